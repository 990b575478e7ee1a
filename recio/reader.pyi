"""Old import path of :mod:`recio.records.reader`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.records.reader`` instead.
"""

from recio.records.reader import BatchRecords as BatchRecords
from recio.records.reader import IndexWarning as IndexWarning
from recio.records.reader import RecordCursor as RecordCursor
from recio.records.reader import RecordFile as RecordFile
from recio.records.reader import batch_headers as batch_headers
from recio.records.reader import check_label_width as check_label_width
from recio.records.reader import check_offsets as check_offsets
from recio.records.reader import check_pair as check_pair
from recio.records.reader import default_idx_path as default_idx_path
from recio.records.reader import not_a_record_start as not_a_record_start
from recio.records.reader import read_batch as read_batch
from recio.records.reader import record_end as record_end
from recio.records.reader import scan_source as scan_source
