"""Old import path of :mod:`recio.pipeline.trace`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.pipeline.trace`` instead.
"""

from recio.pipeline.trace import Tracer as Tracer
from recio.pipeline.trace import maybe_span as maybe_span
