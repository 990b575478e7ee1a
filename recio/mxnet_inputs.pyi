"""Old import path of :mod:`recio.pipeline.mxnet_inputs`, removed in recio 0.3.0: for type checkers.

Importing it warns (``recio._moved``); import ``recio.pipeline.mxnet_inputs`` instead.
"""

from recio.pipeline.mxnet_inputs import ImageList as ImageList
from recio.pipeline.mxnet_inputs import load_mean_image as load_mean_image
