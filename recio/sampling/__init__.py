"""Which records each rank reads, and in which order.

Epoch orders, shards across ranks and resume positions (:mod:`.sampler`): pure integers,
no record read. Several datasets mixed per epoch (:mod:`.mixing`): its plans are integers
too, but it opens a mixture's sources (:func:`~.mixing.open_mixture`), reads one record of
each to learn its label width, and reads a mixture's batches with each source's labels
mapped (:func:`~.mixing.read_mapped_batch`). Nothing here decodes an image or starts a
process.
"""
