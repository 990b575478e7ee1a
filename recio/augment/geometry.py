"""MXNet's default augmenter's geometry as one affine warp per image, sampled once.

MXNet's ``ImageRecordIter`` (``src/io/image_aug_default.cc``) resizes the shorter side
(``cv::resize``), warps (``cv::warpAffine``: rotation, shear, scale, aspect ratio, image size
limits), pads with ``fill_value`` and crops (the output size, or a random square resized to
it), each stage resampling the last one's pixels. recio composes the stages into one map from
output pixels to source pixels (:func:`plan`) and samples the source once through it, as
warpAffine samples (native/warp.c; :func:`warp_image` is its numpy reference, the Pillow
path's): where MXNet runs a lone warpAffine and a crop, the pixels are OpenCV's; where it
resamples two or three times, they are within a few levels of it (tests/data/README.md).

Every draw is keyed by ``(seed, epoch, record)`` (:class:`.draws.KeyedDraw`, :mod:`.keys`), from
uniforms after the crop's, flip's and colour's, so turning the geometry on changes none of
those. The plan's arithmetic is native/draw.c's, operation for operation (MXNet's float32
where MXNet computes in float32), so both give the same map bit for bit.

Its parts: the parameters and a record's warp (:mod:`.geometry_spec`), the plan, drawn
with the crop windows it composes with (:func:`.draws.plan`), and the pixels' numpy
reference (:mod:`.warp_reference`); this module gathers their names.
"""

from __future__ import annotations

from .._checks import check_int, check_number
from .draws import plan
from .geometry_spec import (
    AREA,
    CONSTANT,
    CUBIC,
    INTER_METHODS,
    LANCZOS4,
    LINEAR,
    NEAREST,
    REPLICATE,
    RESAMPLE,
    GeometrySpec,
    Warp,
)
from .warp_reference import warp_image

__all__ = [
    "AREA",
    "CONSTANT",
    "CUBIC",
    "INTER_METHODS",
    "LANCZOS4",
    "LINEAR",
    "NEAREST",
    "REPLICATE",
    "RESAMPLE",
    "GeometrySpec",
    "Warp",
    "check_int",
    "check_number",
    "plan",
    "warp_image",
]
