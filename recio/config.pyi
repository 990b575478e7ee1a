"""Old import path of :mod:`recio.pipeline.config`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.pipeline.config`` instead.
"""

from recio.pipeline.config import CHANNEL_ORDERS as CHANNEL_ORDERS
from recio.pipeline.config import DTYPES as DTYPES
from recio.pipeline.config import INTERPOLATIONS as INTERPOLATIONS
from recio.pipeline.config import LAYOUTS as LAYOUTS
from recio.pipeline.config import ON_ERROR as ON_ERROR
from recio.pipeline.config import ColourSpec as ColourSpec
from recio.pipeline.config import CropSpec as CropSpec
from recio.pipeline.config import GeometrySpec as GeometrySpec
from recio.pipeline.config import IterConfig as IterConfig
from recio.pipeline.config import Normalize as Normalize
from recio.pipeline.config import Sharding as Sharding
from recio.pipeline.config import Storage as Storage
from recio.pipeline.config import check_choice as check_choice
from recio.pipeline.config import check_geometry as check_geometry
from recio.pipeline.config import check_int as check_int
from recio.pipeline.config import check_rec_spec as check_rec_spec
