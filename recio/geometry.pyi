"""Old import path of :mod:`recio.augment.geometry`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.augment.geometry`` instead.
"""

from recio.augment.geometry import INTER_METHODS as INTER_METHODS
from recio.augment.geometry import RESAMPLE as RESAMPLE
from recio.augment.geometry import GeometrySpec as GeometrySpec
from recio.augment.geometry import Warp as Warp
from recio.augment.geometry import check_int as check_int
from recio.augment.geometry import check_number as check_number
from recio.augment.geometry import plan as plan
from recio.augment.geometry import warp_image as warp_image
