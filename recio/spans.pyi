"""Old import path of :mod:`recio.records.spans`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.records.spans`` instead.
"""

from recio.records.spans import Spans as Spans
