"""The names of the record reader, from the modules that hold them.

:class:`~.file.RecordFile` (one ``.rec`` by position in its index), :class:`~.cursor.RecordCursor`
(records at arbitrary offsets of a ``ByteSource``), the batch read and parse
(:mod:`.batch`), the ``.idx`` checks (:mod:`.index`) and the walk of a whole file
(:mod:`.scan`).
"""

from ..errors import IndexWarning
from .batch import BatchRecords, batch_headers, check_label_width, read_batch
from .cursor import RecordCursor
from .file import RecordFile
from .index import check_offsets, check_pair, default_idx_path, not_a_record_start
from .scan import record_end, scan_source

__all__ = [
    "BatchRecords",
    "IndexWarning",
    "RecordCursor",
    "RecordFile",
    "batch_headers",
    "check_label_width",
    "check_offsets",
    "check_pair",
    "default_idx_path",
    "not_a_record_start",
    "read_batch",
    "record_end",
    "scan_source",
]
