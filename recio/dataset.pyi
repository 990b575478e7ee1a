"""Old import path of :mod:`recio.frameworks.dataset`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.frameworks.dataset`` instead.
"""

from recio.frameworks.dataset import RecordDataset as RecordDataset
from recio.frameworks.dataset import SampleBatch as SampleBatch
