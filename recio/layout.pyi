"""Old import path of :mod:`recio.records.samples`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.records.samples`` instead.
"""

from recio.records.samples import INSIGHTFACE as INSIGHTFACE
from recio.records.samples import PLAIN as PLAIN
from recio.records.samples import RecordLayout as RecordLayout
from recio.records.samples import detect_layout as detect_layout
