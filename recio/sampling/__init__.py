"""Which records each rank reads, and in which order.

Epoch orders, shards across ranks and resume positions (:mod:`.sampler`); several datasets
mixed per epoch (:mod:`.mixing`). Pure integers: nothing here reads a record or starts a
process.
"""
