"""Old import path of :mod:`recio.pipeline.positioned`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.pipeline.positioned`` instead.
"""

from recio.pipeline.positioned import Batch as Batch
from recio.pipeline.positioned import ErrorPolicy as ErrorPolicy
from recio.pipeline.positioned import IterStats as IterStats
from recio.pipeline.positioned import PositionedIterator as PositionedIterator
