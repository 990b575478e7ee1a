"""Old import path of :mod:`recio.pipeline.read_decode`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.pipeline.read_decode`` instead.
"""

from recio.pipeline.read_decode import BatchReader as BatchReader
from recio.pipeline.read_decode import DecodedBatch as DecodedBatch
from recio.pipeline.read_decode import LocalPending as LocalPending
from recio.pipeline.read_decode import PendingBatch as PendingBatch
from recio.pipeline.read_decode import read_and_decode as read_and_decode
from recio.pipeline.read_decode import submit_read_and_decode as submit_read_and_decode
