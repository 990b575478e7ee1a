"""Old import path of :mod:`recio.records.format`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.records.format`` instead.
"""

from recio.records.format import FRAME_HEADER_SIZE as FRAME_HEADER_SIZE
from recio.records.format import IR_HEADER_SIZE as IR_HEADER_SIZE
from recio.records.format import MAGIC as MAGIC
from recio.records.format import MAGIC_BYTES as MAGIC_BYTES
from recio.records.format import MAX_PAYLOAD as MAX_PAYLOAD
from recio.records.format import IRHeader as IRHeader
from recio.records.format import ListEntry as ListEntry
from recio.records.format import decode_text as decode_text
from recio.records.format import encode_record as encode_record
from recio.records.format import format_idx_line as format_idx_line
from recio.records.format import format_lst_line as format_lst_line
from recio.records.format import iter_records as iter_records
from recio.records.format import pack as pack
from recio.records.format import parse_idx as parse_idx
from recio.records.format import parse_idx_arrays as parse_idx_arrays
from recio.records.format import parse_lst as parse_lst
from recio.records.format import read_record as read_record
from recio.records.format import scan_offsets as scan_offsets
from recio.records.format import unpack as unpack
from recio.records.format import unpack_labels as unpack_labels
