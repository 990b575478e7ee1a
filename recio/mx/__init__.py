"""MXNet's names that face-recognition code calls, on recio: ``import recio.mx as mx``.

Replacing ``import mxnet as mx`` with ``import recio.mx as mx`` (and ``from mxnet import
ndarray as nd`` with ``from recio.mx import ndarray as nd``) runs InsightFace's data code
(arcface_torch's ``MXFaceDataset``, ``eval/verification.py``'s ``load_bin``, the
``insightface`` package's ``RecBuilder``) without MXNet:

* ``mx.recordio``: recio's RecordIO façade (:mod:`recio.records.recordio`);
* ``mx.image``: ``imdecode``, ``imresize``, ``resize_short``, ``copyMakeBorder`` with MXNet
  1.9.1's pixels (:mod:`recio.mx.image`);
* ``mx.nd`` / ``mx.ndarray``: an ``NDArray`` over numpy and the functions such code calls
  (:mod:`recio.mx.ndarray`).

Any other MXNet name raises :class:`UnsupportedMXNetName` (an ``AttributeError``) naming what
to use instead. docs/faces.md lists the calls.
"""

from __future__ import annotations

from typing import Any

from . import image, ndarray, recordio
from .ndarray import NDArray
from .unsupported import UnsupportedMXNetName, unsupported

nd = ndarray
__version__ = "1.9.1"  # the MXNet whose behaviour recio.mx follows

__all__ = ["NDArray", "UnsupportedMXNetName", "image", "nd", "ndarray", "recordio"]


def __getattr__(name: str) -> Any:
    return unsupported(f"mx.{name}", name)
