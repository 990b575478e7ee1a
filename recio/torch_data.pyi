"""Old import path of :mod:`recio.frameworks.torch_data`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.frameworks.torch_data`` instead.
"""

from recio.frameworks.torch_data import TorchBatch as TorchBatch
from recio.frameworks.torch_data import TorchBatches as TorchBatches
from recio.frameworks.torch_data import as_tensor as as_tensor
from recio.frameworks.torch_data import to_torch as to_torch
