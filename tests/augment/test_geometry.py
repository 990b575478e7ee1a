"""MXNet's geometry as one warp: MXNet 1.9.1's own pixels, the draws' distributions and
bounds, the native path against the numpy reference, and the keyed determinism."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from recio.augment import CropSpec, KeyedDraw, draws
from recio.augment.geometry import CUBIC, LINEAR, NEAREST, GeometrySpec, plan, warp_image
from recio.decode import DecodeOptions, DecodePool
from tests.images import encode, make_pixels

VECTORS = Path(__file__).parents[1] / "data" / "warp" / "mxnet_warp.npz"
# MXNet samples these twice (resize, then warpAffine); recio once: mean and 90th percentile
# of the absolute difference, in levels, on the vectors' images (sharp synthetic edges).
TWO_STAGE = {"resize24_rotate15": (5.0, 15)}

needs_native = pytest.mark.needs_native


@pytest.fixture(scope="module")
def vectors() -> tuple[dict, dict]:
    with np.load(VECTORS) as z:
        arrays = {k: z[k] for k in z.files}
    return json.loads(bytes(arrays.pop("meta"))), arrays


def _draw(shape, kwargs: dict, **crop) -> KeyedDraw:
    kwargs = dict(kwargs)
    resize = kwargs.pop("resize", -1)
    spec = CropSpec(shape[1], shape[2], resize=resize, **crop)
    return KeyedDraw(spec, seed=0, epoch=0, geometry=GeometrySpec(**kwargs))


def _decode(backend: str, bufs, draw: KeyedDraw, records=None, **pool) -> np.ndarray:
    s = draw.spec
    out = np.zeros((len(bufs), s.out_height, s.out_width, 3), dtype=np.uint8)
    records = np.arange(len(bufs)) if records is None else np.asarray(records)
    with DecodePool(1, backend=backend, dct_scaling=pool.pop("dct", "off"), **pool) as p:
        status = p.decode_batch(bufs, out, draw=draw, records=records)
    assert (status == 0).all(), p.last_errors
    return out


def _settings() -> list[str]:
    with np.load(VECTORS) as z:
        meta = json.loads(bytes(z["meta"]))
    return list(meta["settings"])


@pytest.mark.parametrize("backend", [pytest.param("native", marks=needs_native), "python"])
@pytest.mark.parametrize("fmt", ["png", "jpeg"])
@pytest.mark.parametrize("name", _settings())
def test_pixels_against_mxnet(vectors, name: str, fmt: str, backend: str) -> None:
    """Where MXNet samples once (a lone warpAffine, a resize, pad, a square crop), recio's
    pixels are MXNet's exactly; a resize then a warp within the stated tolerance."""
    meta, arrays = vectors
    shape, kwargs = meta["settings"][name]
    bufs = [arrays[f"{fmt}_{i}"].tobytes() for i in range(len(meta["sizes"]))]
    got = _decode(backend, bufs, _draw(shape, kwargs))
    key = f"out_{name}_{fmt}"
    if key not in arrays:  # MXNet refuses nearest in its warp; recio samples it
        assert "Check failed" in meta["results"][fmt.upper()][name]
        assert kwargs["inter_method"] == NEAREST
        sources = [make_src(arrays, fmt, i) for i in range(len(bufs))]
        for img, src in zip(got, sources, strict=True):  # each pixel a source pixel or fill
            seen = {tuple(p) for p in src.reshape(-1, 3)} | {(255, 255, 255)}
            assert {tuple(p) for p in img.reshape(-1, 3)} <= seen
        return
    want = arrays[key]
    diff = np.abs(got.astype(int) - want)
    if name in TWO_STAGE:
        mean, p90 = TWO_STAGE[name]
        assert diff.mean() < mean and np.percentile(diff, 90) <= p90
    else:
        assert diff.max() == 0, f"{np.count_nonzero(diff)} values differ, by up to {diff.max()}"


def make_src(arrays: dict, fmt: str, i: int) -> np.ndarray:
    import io

    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(arrays[f"{fmt}_{i}"].tobytes())).convert("RGB"))


SPECS = {
    "rotate": (CropSpec(24, 24), GeometrySpec(rotate=30)),
    "everything random": (
        CropSpec(24, 20, rand_crop=True, rand_mirror=True),
        GeometrySpec(
            max_rotate_angle=20,
            max_shear_ratio=0.2,
            max_aspect_ratio=0.2,
            min_random_scale=0.8,
            max_random_scale=1.2,
            fill_value=3,
        ),
    ),
    "pad and random crop": (CropSpec(24, 24, rand_crop=True), GeometrySpec(pad=4, fill_value=7)),
    "resize, cubic": (CropSpec(20, 16, resize=24), GeometrySpec(inter_method=2)),
    "resize, area": (CropSpec(12, 12, resize=14), GeometrySpec(inter_method=3)),
    "resize, area enlarging": (CropSpec(40, 40, resize=50), GeometrySpec(inter_method=3)),
    "resize, Lanczos": (CropSpec(20, 16, resize=23), GeometrySpec(inter_method=4)),
    "resize, nearest, pad": (CropSpec(30, 30, resize=23), GeometrySpec(inter_method=0, pad=3)),
    "resize, rotate, Lanczos": (
        CropSpec(20, 16, resize=24),
        GeometrySpec(rotate=10, inter_method=4),
    ),
    "rotate, nearest": (CropSpec(20, 16), GeometrySpec(rotate=10, inter_method=0)),
    "square crop, random filter": (
        CropSpec(20, 20, rand_crop=True),
        GeometrySpec(min_crop_size=10, max_crop_size=16, inter_method=10),
    ),
    "random resized crop, rotate and shear": (
        CropSpec(24, 24, random_resized_crop=True, rand_mirror=True),
        GeometrySpec(max_rotate_angle=10, max_shear_ratio=0.1, inter_method=9),
    ),
    "image size limits": (
        CropSpec(16, 16),
        GeometrySpec(max_img_size=20, min_img_size=18, max_random_scale=2.0),
    ),
}
SIZES = [(40, 30), (30, 44), (64, 48), (17, 23)]


@pytest.fixture(scope="module")
def jpegs() -> list[bytes]:
    return [encode(w, h, seed=i, quality=95) for i, (w, h) in enumerate(SIZES)]


@needs_native
@pytest.mark.parametrize("name", list(SPECS))
def test_native_plan_is_the_reference(name: str) -> None:
    """native/draw.c's rc_draw_warp and recio.augment.geometry.plan: the same warp, bit for bit."""
    from recio import _native

    spec, geometry = SPECS[name]
    draw = KeyedDraw(spec, seed=11, epoch=2, geometry=geometry)
    rng = np.random.default_rng(1)
    for record, (w, h) in enumerate(rng.integers(1, 300, (40, 2)).tolist()):
        want = plan(draw, w, h, record)
        m, off_x, off_y, interp, border, fill, crop, flip = _native.draw_warp(
            draw.native(), w, h, record
        )
        assert m == want.m and (off_x, off_y) == (want.off_x, want.off_y)
        assert (interp, border, fill) == (want.interp, want.border, want.fill)
        assert crop == want.crop and flip == want.flip


@needs_native
@pytest.mark.parametrize("name", list(SPECS))
def test_native_pixels_are_the_fallback(jpegs, name: str) -> None:
    """The native warp and the numpy reference (the Pillow path) give the same pixels."""
    spec, geometry = SPECS[name]
    draw = KeyedDraw(spec, seed=5, epoch=1, geometry=geometry)
    records = np.arange(len(jpegs)) + 7
    native = _decode("native", jpegs, draw, records)
    python = _decode("python", jpegs, draw, records)
    np.testing.assert_array_equal(native, python)


@needs_native
def test_normalised_nchw_output_is_the_uint8_one(jpegs) -> None:
    """The warp's pixels go through the same store: float NCHW, BGR, mean and std."""
    spec, geometry = SPECS["everything random"]
    draw = KeyedDraw(spec, seed=5, epoch=1, geometry=geometry)
    plain = _decode("native", jpegs, draw)
    out = np.zeros((len(jpegs), 3, spec.out_height, spec.out_width), dtype=np.float32)
    mean, std = (10.0, 20.0, 30.0), (2.0, 4.0, 8.0)
    with DecodePool(1, backend="native", dct_scaling="off") as p:
        p.decode_batch(
            jpegs, out, draw=draw, records=np.arange(len(jpegs)), mean=mean, std=std,
            layout="NCHW", channel_order="BGR",
        )  # fmt: skip
    want = (plain[..., ::-1].astype(np.float32) - mean) / std
    np.testing.assert_allclose(out, want.transpose(0, 3, 1, 2), rtol=1e-6)


@needs_native
def test_rows_read_and_dct_scaling(jpegs) -> None:
    """Decoding only the rows the warp reads changes nothing; a DCT-scaled decode of a large
    image stays close to the full-size one."""
    spec, geometry = SPECS["everything random"]
    draw = KeyedDraw(spec, seed=5, epoch=1, geometry=geometry)
    whole = _decode("native", jpegs, draw, roi_decode=False)
    np.testing.assert_array_equal(_decode("native", jpegs, draw), whole)
    big = [encode(640, 480, seed=3, quality=95)]
    draw = KeyedDraw(CropSpec(48, 48, resize=60), 0, 0, geometry=GeometrySpec(rotate=20))
    exact = _decode("native", big, draw).astype(int)
    scaled = _decode("native", big, draw, dct="pow2").astype(int)
    assert np.abs(exact - scaled).mean() < 3


@needs_native
@pytest.mark.parametrize("subsampling", [0, 1, 2])
def test_warps_decoding_only_the_columns_they_read_match_the_whole_decode(subsampling) -> None:
    """Small rotated crops drawn all over a larger image decode only the iMCU columns their
    taps read, plus the margin the chroma upsampler needs to fill the edge ones as a whole
    decode does: the pixels equal the whole image's decode, at every sampling."""
    bufs = [encode(320, 240, seed=11, quality=92, subsampling=subsampling)] * 128
    geometry = GeometrySpec(max_rotate_angle=30, min_crop_size=24, max_crop_size=48)
    draw = KeyedDraw(CropSpec(24, 24, rand_crop=True, rand_mirror=True), 3, 0, geometry=geometry)
    whole = _decode("native", bufs, draw, roi_decode=False)
    np.testing.assert_array_equal(_decode("native", bufs, draw), whole)


@needs_native
def test_cmyk_and_grey_jpegs_are_warped() -> None:
    bufs = [encode(40, 30, mode="CMYK", quality=95), encode(40, 30, mode="L", quality=95)]
    draw = KeyedDraw(CropSpec(24, 24), 0, 0, geometry=GeometrySpec(rotate=30))
    native = _decode("native", bufs, draw).astype(int)
    python = _decode("python", bufs, draw).astype(int)
    assert np.abs(native - python).max() <= 2  # (CMYK: libjpeg's and Pillow's conversions)


def test_crops_are_the_source_boxes_read(monkeypatch) -> None:
    """The windows reported for a warped image are the source pixels its taps read, the
    same from the native draws and from the reference (a build without the extension)."""
    draw = KeyedDraw(CropSpec(8, 8), 0, 0, geometry=GeometrySpec(rotate=45))
    windows, flips = draw.windows(np.array([[64, 48]]), np.array([0]))
    x, y, w, h = windows[0].tolist()
    assert 0 < x < x + w < 64 and 0 < y < y + h < 48 and not flips[0]
    spec, geometry = SPECS["everything random"]
    draw = KeyedDraw(spec, 4, 0, geometry=geometry)
    sizes, records = np.array(SIZES * 5), np.arange(len(SIZES) * 5)
    first = draw.windows(sizes, records)
    monkeypatch.setattr(draws, "_native", None)
    second = draw.windows(sizes, records)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    monkeypatch.undo()
    spec, padded = CropSpec(8, 8, rand_crop=True), GeometrySpec(pad=12, fill_value=9)
    far = KeyedDraw(spec, 0, 0, geometry=padded)
    windows, _ = far.windows(np.array([[16, 16]] * 20), np.arange(20))
    missed = np.flatnonzero((windows == 0).all(1))  # crops in the padding: no source read
    assert 0 < len(missed) < 20
    out = _decode("python", [encode(16, 16)] * len(missed), far, missed)
    assert (out == 9).all()


def _angles(draw: KeyedDraw, n: int) -> np.ndarray:
    """The rotation each of n records gets (a pure rotation: the map's angle)."""
    warps = [plan(draw, 64, 64, r) for r in range(n)]
    return np.array([round(math.degrees(math.atan2(w.m[3], w.m[0]))) for w in warps])


def test_angles_are_mxnets_uniform_integers() -> None:
    """max_rotate_angle=10: whole degrees uniform on [-10, 10], MXNet's
    uniform_int_distribution (chi-square over the 21 values)."""
    draw = KeyedDraw(CropSpec(32, 32), 3, 0, geometry=GeometrySpec(max_rotate_angle=10))
    angles = _angles(draw, 2100)
    counts = np.bincount(angles + 10, minlength=21)
    assert len(counts) == 21 and counts.min() > 0
    chi2 = ((counts - 100) ** 2 / 100).sum()
    assert chi2 < 45.3  # the 0.999 quantile for 20 degrees of freedom
    fixed = KeyedDraw(CropSpec(32, 32), 3, 0, geometry=GeometrySpec(max_rotate_angle=10, rotate=7))
    assert set(_angles(fixed, 50).tolist()) == {7}  # rotate overrides the random angle


@pytest.mark.parametrize(
    ("geometry", "bounds"),
    [
        (GeometrySpec(min_random_scale=0.5, max_random_scale=1.5), (0.5, 1.5)),
        (GeometrySpec(max_aspect_ratio=0.25), (0.75, 1.25)),
        (GeometrySpec(min_aspect_ratio=0.5, max_aspect_ratio=2.0), (0.5, 2.0)),
    ],
)
def test_scale_and_aspect_within_bounds(geometry: GeometrySpec, bounds) -> None:
    """Scale s and aspect r (MXNet: hs = 2s / (1 + r), ws = r hs) cover their ranges."""
    draw = KeyedDraw(CropSpec(32, 32), 1, 0, geometry=geometry)
    values = []
    for r in range(400):
        w = plan(draw, 64, 64, r)
        hs, ws = 1 / w.m[0], 1 / w.m[4]  # no rotation or shear: the inverse is diagonal
        values.append((hs + ws) / 2 if geometry.max_random_scale != 1 else ws / hs)
    lo, hi = bounds
    values = np.array(values)
    assert lo - 1e-5 <= values.min() < lo + (hi - lo) * 0.05
    assert hi - (hi - lo) * 0.05 < values.max() <= hi + 1e-5


def test_square_crop_sizes_and_shear_within_bounds() -> None:
    draw = KeyedDraw(
        CropSpec(16, 16), 1, 0, geometry=GeometrySpec(min_crop_size=20, max_crop_size=24)
    )
    sizes = {round(plan(draw, 64, 64, r).m[0] * 16) for r in range(200)}
    assert sizes == {20, 21, 22, 23, 24}
    draw = KeyedDraw(CropSpec(16, 16), 1, 0, geometry=GeometrySpec(max_shear_ratio=0.3))
    shears = np.array([-plan(draw, 64, 64, r).m[1] for r in range(300)])  # inverse of x + m y
    assert -0.3 - 1e-6 <= shears.min() < -0.27 and 0.27 < shears.max() <= 0.3 + 1e-6


@pytest.mark.parametrize("backend", [pytest.param("native", marks=needs_native), "python"])
def test_keyed_by_record_whatever_the_batch(jpegs, backend: str) -> None:
    """Each record's warp is a function of (seed, epoch, record): the same pixels in any batch
    and order (so resume and elastic resharding repeat them); the next epoch differs."""
    spec, geometry = SPECS["everything random"]
    draw = KeyedDraw(spec, seed=9, epoch=4, geometry=geometry)
    records = np.array([3, 8, 1, 5])
    together = _decode(backend, jpegs, draw, records)
    order = [2, 0, 3, 1]
    apart = _decode(backend, [jpegs[i] for i in order], draw, records[order])
    np.testing.assert_array_equal(apart, together[order])
    alone = _decode(backend, jpegs[1:2], draw, records[1:2])
    np.testing.assert_array_equal(alone[0], together[1])
    later = KeyedDraw(spec, seed=9, epoch=5, geometry=geometry)
    assert (_decode(backend, jpegs, later, records) != together).any()


def test_flips_and_windows_unchanged_by_the_geometry() -> None:
    """The geometry's uniforms come after the crop's and flip's: turning it on draws the same
    flips, and RandomResizedCrop's windows are the ones without it."""
    spec = CropSpec(24, 24, random_resized_crop=True, rand_mirror=True)
    plain = KeyedDraw(spec, 2, 3)
    warped = KeyedDraw(spec, 2, 3, geometry=GeometrySpec(max_rotate_angle=5))
    sizes, records = np.array([[64, 48]] * 200), np.arange(200)
    windows, flips = plain.windows(sizes, records)
    assert [plan(warped, 64, 48, r).flip for r in range(200)] == flips.tolist()
    upright = KeyedDraw(spec, 2, 3, geometry=GeometrySpec())
    for r in range(20):
        m = plan(upright, 64, 48, r).m  # the window scaled onto the output, centres aligned
        x, y, w, h = windows[r].tolist()
        assert math.isclose(m[0] * 24, w) and math.isclose(m[4] * 24, h)
        assert math.isclose(m[2] + 0.5 - 0.5 * m[0], x, abs_tol=1e-9)


def test_warp_image_replicates_and_fills() -> None:
    """The reference itself: an identity map gives the image; pad is fill around it."""
    src = make_pixels(10, 8)
    draw = KeyedDraw(CropSpec(8, 10), 0, 0, geometry=GeometrySpec())
    w = plan(draw, 10, 8, 0)
    assert w.interp == LINEAR
    np.testing.assert_array_equal(warp_image(src, w, 10, 8), src)
    draw = KeyedDraw(CropSpec(12, 14), 0, 0, geometry=GeometrySpec(pad=2, fill_value=40))
    out = warp_image(src, plan(draw, 10, 8, 0), 14, 12)
    np.testing.assert_array_equal(out[2:10, 2:12], src)
    assert (out[:2] == 40).all() and (out[:, :2] == 40).all()
    draw = KeyedDraw(CropSpec(16, 20, resize=20), 0, 0, geometry=GeometrySpec(inter_method=9))
    assert plan(draw, 10, 8, 0).interp == CUBIC  # 9: cubic to enlarge


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"inter_method": 5}, "inter_method must be one of"),
        ({"fill_value": 256}, "fill_value must be in"),
        ({"min_crop_size": 30, "max_crop_size": 20}, "min_crop_size <= max_crop_size"),
        ({"max_crop_size": 0}, "max_crop_size must be positive"),
        ({"rotate": -2}, "rotate must be an angle"),
        ({"max_rotate_angle": 400}, "max_rotate_angle must be in"),
        ({"max_shear_ratio": -0.1}, "max_shear_ratio must be at least 0"),
        ({"max_aspect_ratio": 1.5}, "aspect ratio range must be positive"),
        ({"min_random_scale": 2.0}, "min_random_scale <= max_random_scale"),
        ({"min_img_size": 30, "max_img_size": 20}, "min_img_size <= max_img_size"),
        ({"pad": -1}, "pad must be in"),
    ],
)
def test_bad_parameters_name_themselves(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GeometrySpec(**kwargs)


def test_bad_types_and_combinations() -> None:
    with pytest.raises(TypeError, match="max_rotate_angle must be an int"):
        GeometrySpec(max_rotate_angle=2.5)
    with pytest.raises(TypeError, match="max_shear_ratio must be a number"):
        GeometrySpec(max_shear_ratio="0.1")
    with pytest.raises(ValueError, match="pad does not combine with random_resized_crop"):
        KeyedDraw(CropSpec(8, 8, random_resized_crop=True), 0, 0, geometry=GeometrySpec(pad=2))
    with pytest.raises(ValueError, match="needs a KeyedDraw with a geometry"):
        plan(KeyedDraw(CropSpec(8, 8), 0, 0), 8, 8, 0)


def test_enabled_and_non_default() -> None:
    """What the configuration asks to decide whether an iterator needs the warp."""
    assert not GeometrySpec().enabled and not GeometrySpec(fill_value=3).enabled
    assert GeometrySpec(inter_method=2).enabled and GeometrySpec(pad=1).enabled
    assert GeometrySpec(max_crop_size=20).enabled and GeometrySpec(rotate=5).enabled
    assert GeometrySpec(rotate=5, fill_value=0).non_default() == ["rotate", "fill_value"]


@pytest.mark.parametrize("backend", [pytest.param("native", marks=needs_native), "python"])
def test_records_read_and_decoded_are_warped(tmp_path, jpegs, backend: str) -> None:
    """The iterator's way (records parsed and decoded in one call) warps as decode_batch."""
    from recio.pipeline.read_decode import read_and_decode
    from recio.records.reader import RecordFile
    from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack

    rec, idx = tmp_path / "w.rec", tmp_path / "w.idx"
    with MXIndexedRecordIO(str(idx), str(rec), "w") as w:
        for i, data in enumerate(jpegs):
            w.write_idx(i, pack(IRHeader(0, float(i), i, 0), data))
    spec, geometry = SPECS["everything random"]
    draw = KeyedDraw(spec, seed=2, epoch=0, geometry=geometry)
    out = np.zeros((len(jpegs), spec.out_height, spec.out_width, 3), dtype=np.uint8)
    positions = np.array([2, 0, 3, 1])
    with RecordFile(str(rec)) as records, DecodePool(1, backend=backend, dct_scaling="off") as p:
        got = read_and_decode(
            records, positions, p, out, label_width=1, draw=draw, options=DecodeOptions()
        )
    assert (got.status == 0).all()
    want = _decode(backend, [jpegs[i] for i in positions], draw, positions)
    np.testing.assert_array_equal(out, want)
