"""The RecordIO layer: MXNet's ``.rec``/``.idx`` files, record by record.

Framing and IRHeader (:mod:`.format`), a record file opened by position in its index
(:mod:`.reader`), several files as one dataset (:mod:`.shards`), which records are samples
(:mod:`.samples`), per-record checksums (:mod:`.checksum`), and MXNet's own names
(:mod:`.recordio`). Nothing here decodes an image or knows of training.
"""
