"""The native resampler's RGB paths: AVX2 and SSE2 give the same bytes, and the flip at scale 1.

The horizontal pass over RGB rows has an AVX2 version (two output pixels per step) chosen at
import; RECIO_SIMD=sse2 keeps to the SSE2 one. The uint8 NCHW store de-interleaves with AVX2.
At scale 1 no resampling pass runs: the store mirrors the row itself.
"""

from __future__ import annotations

import numpy as np
import pytest

from recio import decode

from ..images import encode
from ..simd_levels import outputs_at_each_level

native_only = pytest.mark.needs_native

# Every kernel width the passes special-case (2, 4, 6, 8) and wider ones, both flips, output
# widths odd and even (the AVX2 pass leaves an odd last pixel to the SSE2 one), below and
# above the de-interleave's 16 pixels, each filter, each layout and dtype.
_DIGEST_OF_RGB_DECODES = """
import hashlib, numpy as np
from recio import decode
from tests.images import encode

h = hashlib.sha256()
bufs = [encode(w, hh, seed=w) for w, hh in ((640, 480), (333, 257), (97, 61))]
with decode.DecodePool(1, backend="native", dct_scaling="off") as p:
    sizes = p.image_sizes(bufs)
    for scale in (0.31, 0.77, 1.0, 1.34, 1.71, 2.5, 3.49, 5.2, 7.9):
        for ow in (1, 2, 15, 16, 17, 33, 64):
            oh = 9
            cw, ch = round(ow * scale), round(oh * scale)
            crops = [(3, 2, max(1, min(w - 3, cw)), max(1, min(hh - 2, ch))) for w, hh in sizes]
            for interp in ("bilinear", "area", "nearest"):
                for layout, dtype in (("NHWC", np.uint8), ("NCHW", np.uint8), ("NCHW", np.float32)):
                    for flip in (0, 1):
                        shape = (3, oh, ow, 3) if layout == "NHWC" else (3, 3, oh, ow)
                        out = np.zeros(shape, dtype)
                        st = p.decode_batch(bufs, out, crops=crops, flips=[flip] * 3,
                                            interpolation=interp, layout=layout)
                        assert not st.any(), p.last_errors()
                        h.update(out.tobytes())
print(decode.pool._native.SIMD, h.hexdigest())
"""


@native_only
def test_avx2_and_sse2_rgb_passes_give_the_same_bytes() -> None:
    default, sse2 = outputs_at_each_level(_DIGEST_OF_RGB_DECODES)
    assert default[1] == sse2[1]


@native_only
@pytest.mark.parametrize("ksize_scale", [0.6, 1.5, 2.6, 3.6, 6.3])
@pytest.mark.parametrize("ow", [1, 2, 7, 8, 31])
def test_flipped_resample_is_the_mirror_image(ksize_scale: float, ow: int) -> None:
    """A flipped crop's output is the unflipped one mirrored, at every kernel width (the
    flip is folded into the horizontal pass, two pixels per step on AVX2)."""
    buf = encode(400, 64, seed=3)
    crop = [[5, 4, max(1, round(ow * ksize_scale)), 20]]
    out = np.zeros((2, 10, ow, 3), np.uint8)
    with decode.DecodePool(1, backend="native") as p:
        assert p.decode_batch([buf, buf], out, crops=crop * 2, flips=[0, 1]).tolist() == [0, 0]
    np.testing.assert_array_equal(out[1], out[0][:, ::-1])


@native_only
@pytest.mark.parametrize(
    ("layout", "dtype", "order"),
    [
        ("NHWC", np.uint8, "RGB"),
        ("NHWC", np.uint8, "BGR"),
        ("NCHW", np.uint8, "RGB"),
        ("NCHW", np.uint8, "BGR"),
        ("NCHW", np.float32, "RGB"),
        ("NHWC", np.float16, "BGR"),
    ],
)
def test_flip_at_scale_one_mirrors_the_decoded_image(layout: str, dtype, order: str) -> None:
    """Whole images decoded at their own size (no resampling pass: face-recognition crops,
    say): the flipped output is the unflipped one mirrored, in every layout, dtype and order,
    and the unflipped one is the plain decode."""
    sizes = [(112, 112), (37, 19), (16, 16), (1, 5)]
    for w, h in sizes:
        buf = encode(w, h, seed=w)
        shape = (2, h, w, 3) if layout == "NHWC" else (2, 3, h, w)
        out = np.zeros(shape, dtype)
        norm = {} if dtype == np.uint8 else {"mean": (1.0, 2.0, 3.0), "std": (4.0, 5.0, 6.0)}
        with decode.DecodePool(1, backend="native") as p:
            st = p.decode_batch(
                [buf, buf], out, flips=[0, 1], layout=layout, channel_order=order, **norm
            )
            assert st.tolist() == [0, 0]
            plain = np.zeros((1, h, w, 3), np.uint8)
            assert p.decode_batch([buf], plain).tolist() == [0]
        width_axis = 1 if layout == "NHWC" else 2
        np.testing.assert_array_equal(out[1], np.flip(out[0], axis=width_axis))
        want = plain[0][..., ::-1] if order == "BGR" else plain[0]
        if layout == "NCHW":
            want = want.transpose(2, 0, 1)
        if norm:
            channel = (1, 1, 3) if layout == "NHWC" else (3, 1, 1)
            m = np.array(norm["mean"]).reshape(channel)
            s = np.array(norm["std"]).reshape(channel)
            want = ((want - m) / s).astype(dtype)
        np.testing.assert_array_equal(out[0], want)
