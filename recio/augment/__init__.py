"""What to do to each image, decided per record from ``(seed, epoch, record)`` alone.

:mod:`.keys` makes each record's uniforms; :mod:`.draws` turns them into crop windows and
flips (:class:`KeyedDraw`, what the decoder takes) and, with MXNet's geometry, each
record's warp (:func:`.draws.plan`); :mod:`.colour` is MXNet's colour augmentation;
:mod:`.geometry_spec` MXNet's geometry parameters (the affine warp, padding and square
crops), :mod:`.warp_reference` the warp's pixels in numpy; :mod:`.geometry` gathers the
geometry's names.
"""

from .colour import (
    COLOUR_VALUES,
    PCA_EIGVAL,
    PCA_EIGVEC,
    ColourDraws,
    ColourSpec,
    apply_colour,
    draw_colour,
    gray_f32,
)
from .draws import CropSpec, KeyedDraw, draw_keyed
from .geometry_spec import GeometrySpec
from .keys import keyed_uniform

__all__ = [
    "COLOUR_VALUES",
    "PCA_EIGVAL",
    "PCA_EIGVEC",
    "ColourDraws",
    "ColourSpec",
    "CropSpec",
    "GeometrySpec",
    "KeyedDraw",
    "apply_colour",
    "draw_colour",
    "draw_keyed",
    "gray_f32",
    "keyed_uniform",
]
