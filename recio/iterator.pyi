"""Old import path of :mod:`recio.pipeline.iterator`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.pipeline.iterator`` instead.
"""

from recio.pipeline.iterator import Batch as Batch
from recio.pipeline.iterator import BatchBuffers as BatchBuffers
from recio.pipeline.iterator import ImageRecordIter as ImageRecordIter
from recio.pipeline.iterator import IterStats as IterStats
