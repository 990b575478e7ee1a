"""``recio.recordio``, MXNet's names (:mod:`recio.records.recordio`): for type checkers."""

from recio.records.recordio import IRHeader as IRHeader
from recio.records.recordio import MXIndexedRecordIO as MXIndexedRecordIO
from recio.records.recordio import MXRecordIO as MXRecordIO
from recio.records.recordio import pack as pack
from recio.records.recordio import pack_img as pack_img
from recio.records.recordio import unpack as unpack
from recio.records.recordio import unpack_img as unpack_img
