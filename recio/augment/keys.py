"""Counter-based draws: each record's uniforms from ``(seed, epoch, record)`` alone.

Value ``k`` of a record is a hash of ``(seed, epoch, record, k)`` (splitmix64 over the
counter), so a record's draws do not depend on its batch, rank, worker or thread, nor on
the world size. The uniforms of one record are laid out as native/draw.h lays them out:
the crop's attempts and the flip, then colour's, then the geometry's; each part taking its
own keeps turning one on from changing the others.
"""

from __future__ import annotations

import numpy as np

ATTEMPTS = 10  # torchvision's RandomResizedCrop tries 10 windows before its fallback
CROP_UNIFORMS = ATTEMPTS * 4 + 1  # four per attempt, then the flip's (uniforms 1..41)
FLIP_UNIFORM = CROP_UNIFORMS
# Colour's follow (HLS h, s, l; brightness, contrast, saturation; three normals of two
# each for PCA; random contrast, random illumination), then the geometry's eight.
COLOUR_FIRST = CROP_UNIFORMS + 1
COLOUR_UNIFORMS = 14
GEOMETRY_FIRST = COLOUR_FIRST + COLOUR_UNIFORMS
# The geometry's eight (native/draw.h), the last uniforms of a record.
(
    SHEAR_UNIFORM,
    ANGLE_UNIFORM,
    SCALE_UNIFORM,
    RATIO_UNIFORM,
    CROP_SIZE_UNIFORM,
    CROP_Y_UNIFORM,
    CROP_X_UNIFORM,
    INTERP_UNIFORM,
) = range(GEOMETRY_FIRST, GEOMETRY_FIRST + 8)
LAST_UNIFORM = INTERP_UNIFORM

GOLDEN_INT, MASK = 0x9E3779B97F4A7C15, (1 << 64) - 1
_GOLDEN = np.uint64(GOLDEN_INT)


def mix_int(x: int) -> int:
    """:func:`_mix` of one Python integer (below 2**64)."""
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & MASK
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & MASK
    return x ^ (x >> 31)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 that scrambles every bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def keyed_uniform(seed: int, epoch: int, samples: np.ndarray, count: int) -> np.ndarray:
    """``count`` uniform floats in [0, 1) per sample: counter-based, (len(samples), count).

    Value ``k`` of sample ``s`` is a hash of ``(seed, epoch, s, k)`` (splitmix64 over the
    counter), so any subset of samples, in any order or grouping, gets the same values.
    """
    with np.errstate(over="ignore"):
        key = _mix(np.uint64(seed % (1 << 64)) + _GOLDEN)
        key = _mix(key ^ (np.uint64(epoch % (1 << 64)) * _GOLDEN))
        per_sample = _mix(key ^ np.asarray(samples, dtype=np.int64).astype(np.uint64))
        counters = np.arange(1, count + 1, dtype=np.uint64) * _GOLDEN
        bits = _mix(per_sample[:, None] + counters[None, :])
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
