"""The fused colour and store (native/colour.h's rc_colour_plan, NOTE [fused colour] in
native/decode_core.c): an output coloured and written in one pass per row (NCHW or NHWC)
gives the bytes of the colour pass over the whole image followed by the store.

Against the numpy reference (the Pillow backend) where both decoders see the same pixels,
for every dtype, channel order, mirror and subset of the colour steps; and against the
unfused SSE2 path (``RECIO_SIMD=sse2``) through the resampler and the warp.
"""

from __future__ import annotations

import numpy as np
import pytest

from recio.augment import ColourSpec, CropSpec, KeyedDraw
from recio.decode import DecodePool
from tests.augment.test_colour import ALL, jpeg, simd_digests
from tests.images import make_pixels

SPECS = {
    "all": ALL,
    "brightness": ColourSpec(brightness=0.5),
    "contrast": ColourSpec(contrast=0.6),
    "saturation": ColourSpec(saturation=0.7),
    "pca": ColourSpec(pca_noise=0.3),
    "no contrast": ColourSpec(brightness=0.3, saturation=0.4, pca_noise=0.2),
    "hls, contrast": ColourSpec(random_h=30, random_l=20, contrast=0.5),
    "illumination": ColourSpec(
        saturation=0.3, max_random_contrast=0.4, max_random_illumination=15
    ),  # fmt: skip
}


# the output: dtype and normalisation ("plain": the identity table, stored without a lookup)
OUTPUTS = {
    "uint8": ("uint8", {}),
    "float16": ("float16", {"mean": (120, 110, 100), "std": (60, 61, 62)}),
    "float32": ("float32", {"mean": (120, 110, 100), "std": (60, 61, 62)}),
    "float32 plain": ("float32", {}),
}
# (random contrast and illumination: float32 only)
CASES = [(name, out) for name in sorted(SPECS) for out in OUTPUTS
         if OUTPUTS[out][0] == "float32" or not SPECS[name].affine]  # fmt: skip


@pytest.mark.needs_native
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize(("name", "output"), CASES)
def test_fused_store_is_the_reference_byte_for_byte(name, output, layout):
    """Output = window size (no resampling): the same pre-colour pixels in both backends.
    Width 21: two turns of the 8-pixel loop and 5 pixels for the C one; mirrored images go
    through the store's flip."""
    spec = SPECS[name]
    buffers = [jpeg(make_pixels(21, 13 + i, seed=i)) for i in range(6)]
    draw = KeyedDraw(CropSpec(13, 21, rand_crop=True, rand_mirror=True), 5, 2, spec)
    dtype, kw = OUTPUTS[output]
    if output == "float32" and name in ("all", "illumination"):
        kw = {"std": (2, 3, 4), "scale": 0.5,
              "mean_img": np.random.default_rng(1).uniform(0, 50, (3, 13, 21))}  # fmt: skip
    outs = []
    for backend in ("native", "python"):
        for order in ("RGB", "BGR"):
            with DecodePool(2, backend=backend, dct_scaling="off") as pool:
                out = np.zeros((6, 3, 13, 21) if layout == "NCHW" else (6, 13, 21, 3), dtype)
                status = pool.decode_batch(buffers, out, draw=draw, records=np.arange(6),
                                           layout=layout, channel_order=order, **kw)  # fmt: skip
                assert (status == 0).all()
                outs.append(out)
    assert np.array_equal(outs[0], outs[2]) and np.array_equal(outs[1], outs[3])
    assert not np.array_equal(outs[0], outs[1])  # the channel order did change it


_DIGEST = """
import dataclasses
import hashlib
import numpy as np
from recio import _native
from recio.augment import ColourSpec, CropSpec, KeyedDraw
from recio.decode import DecodePool
from recio.augment.geometry import GeometrySpec
from tests.augment.test_colour import ALL, jpeg
from tests.images import make_pixels
buffers = [jpeg(make_pixels(70, 50 + i, seed=i)) for i in range(4)]
h = hashlib.sha256()
warp = GeometrySpec(max_rotate_angle=15, max_shear_ratio=0.1)
pixels_only = dataclasses.replace(ALL, max_random_contrast=0, max_random_illumination=0)
for spec in (pixels_only, ColourSpec(contrast=0.5, saturation=0.5, pca_noise=0.2)):
    for geometry in (None, warp):
        for dtype, kw in (("uint8", {}), ("float16", {"mean": (1, 2, 3)}),
                          ("float32", {"std": (50, 60, 70)}), ("float32", {})):
            draw = KeyedDraw(CropSpec(27, 35, random_resized_crop=geometry is None,
                                      rand_mirror=True), 0, 0, spec, geometry)
            for layout, shape in (("NCHW", (4, 3, 27, 35)), ("NHWC", (4, 27, 35, 3))):
                out = np.zeros(shape, dtype)
                with DecodePool(1) as pool:
                    pool.decode_batch(buffers, out, draw=draw, records=np.arange(4),
                                      layout=layout, channel_order="BGR", **kw)
                h.update(out.tobytes())
draw = KeyedDraw(CropSpec(27, 35, random_resized_crop=True), 0, 0, ALL)
out = np.zeros((4, 3, 27, 35), np.float32)
with DecodePool(1) as pool:
    pool.decode_batch(buffers, out, draw=draw, records=np.arange(4), layout="NCHW", std=(2, 3, 4),
                      mean_img=np.full((3, 27, 35), 7.0))
h.update(out.tobytes())
print(_native.COLOUR_SIMD, h.hexdigest())
"""


@pytest.mark.needs_native
def test_fused_avx2_store_is_the_sse2_paths():
    default, sse2 = simd_digests(_DIGEST)
    if default[0] != "avx2":
        pytest.skip("this CPU has no AVX2: the fused store does not run")
    assert sse2[0] == "sse2" and default[1] == sse2[1]
