"""Old import path of :mod:`recio.sampling.mixing`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.sampling.mixing`` instead.
"""

from recio.sampling.mixing import LabelMap as LabelMap
from recio.sampling.mixing import MixPlan as MixPlan
from recio.sampling.mixing import Mixture as Mixture
from recio.sampling.mixing import Source as Source
from recio.sampling.mixing import open_mixture as open_mixture
from recio.sampling.mixing import plan_mixture as plan_mixture
from recio.sampling.mixing import read_mapped_batch as read_mapped_batch
