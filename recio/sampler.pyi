"""Old import path of :mod:`recio.sampling.sampler`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.sampling.sampler`` instead.
"""

from recio.sampling.sampler import BLOCK_PARTS as BLOCK_PARTS
from recio.sampling.sampler import BLOCK_SIZE as BLOCK_SIZE
from recio.sampling.sampler import WINDOW as WINDOW
from recio.sampling.sampler import EpochSlices as EpochSlices
from recio.sampling.sampler import LastBatch as LastBatch
from recio.sampling.sampler import Sampler as Sampler
from recio.sampling.sampler import Shuffle as Shuffle
from recio.sampling.sampler import StepPlan as StepPlan
from recio.sampling.sampler import epoch_order as epoch_order
