"""The GPU path without DALI: recio reads and cuts, torchvision's nvJPEG decodes, torch augments.

    records ─▶ RecioSource (read, shard, check; ImageRecordIter's windows and flips) ─▶
        decode.jpegcut (a restart-marked JPEG cut to its crop's segments, on the CPU) ─▶
        device.JpegDecoder (torchvision.io.decode_jpeg(list, device=): nvJPEG on CUDA) ─▶
        device.resize_crops, device.normalise (torch, on the device) ─▶ ImageRecordIter

The same code runs with ``device="cpu"`` (torchvision's CPU decoder, or Pillow where
torchvision is missing), which is how CI tests it. Needs torch; torchvision is the ``gpu``
extra. docs/gpu.md says which GPU path to use when.

Modules: :mod:`~recio.gpu.device` (the decode and pixel work), :mod:`~recio.gpu.iterator`
(the iterator); the cut is :mod:`recio.decode.jpegcut`.
"""

from ..decode.jpegcut import Piece, cut_batch, cut_image
from .device import DECODERS, JpegDecoder, normalise, resize_crops, resolve_decoder
from .iterator import ImageRecordIter

__all__ = [
    "DECODERS",
    "ImageRecordIter",
    "JpegDecoder",
    "Piece",
    "cut_batch",
    "cut_image",
    "normalise",
    "resize_crops",
    "resolve_decoder",
]
