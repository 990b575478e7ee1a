"""Colour augmentation: MXNet's HLS jitter, brightness, contrast, saturation, PCA lighting and
random contrast/illumination, drawn per record and applied in the decode.

The draws: keyed like the crops, the same from native/draw.c and the numpy reference, bit
for bit, within their bounds, leaving every window and flip as it was. The pixels: each
step against its formula, the native decode against the Pillow path byte for byte, and the
distributions of outputs against MXNet 1.9.1's own (tests/data/mxnet_colour, made by
tools/mxnet_colour_reference.py).
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from recio import ImageRecordIter
from recio.augment import (
    ColourDraws,
    ColourSpec,
    CropSpec,
    KeyedDraw,
    apply_colour,
    colour,
    draw_colour,
)
from recio.decode import DecodePool
from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack
from tests.images import make_pixels

DATA = Path(__file__).parents[1] / "data" / "mxnet_colour"
ALL = ColourSpec(random_h=20, random_s=30, random_l=15, brightness=0.4, contrast=0.4,
                 saturation=0.4, pca_noise=0.1, max_random_contrast=0.3,
                 max_random_illumination=20)  # fmt: skip
JITTER = ColourSpec(brightness=0.4, contrast=0.4, saturation=0.4, pca_noise=0.1)


def png(pixels: np.ndarray) -> bytes:
    b = io.BytesIO()
    Image.fromarray(pixels).save(b, "PNG")
    return b.getvalue()


def jpeg(pixels: np.ndarray) -> bytes:
    b = io.BytesIO()
    Image.fromarray(pixels).save(b, "JPEG", quality=92)
    return b.getvalue()


def draws_of(n: int, **values) -> ColourDraws:
    """Identity draws for n records, with the given columns set."""
    d = ColourDraws(
        np.zeros((n, 3), np.int32), np.ones((n, 3)), np.zeros((n, 3)), np.tile([1.0, 0.0], (n, 1))
    )
    for name, v in values.items():
        getattr(d, name)[:] = v
    return d


# ---- the draws ----


@pytest.mark.needs_native
def test_native_draws_are_the_numpy_reference_bit_for_bit():
    records = np.arange(0, 5000, 7, dtype=np.int64)
    for spec in (ALL, JITTER, ColourSpec(random_l=1), ColourSpec()):
        draw = KeyedDraw(CropSpec(8, 8), 11, 3, spec)
        got = draw.colours(records).values()
        want = draw_colour(spec, 11, 3, records).values()
        assert np.array_equal(got, want)


def test_draws_are_keyed_per_record_and_epoch():
    a = draw_colour(ALL, 0, 0, np.arange(20)).values()
    b = draw_colour(ALL, 0, 0, np.arange(20)[::-1]).values()[::-1]
    assert np.array_equal(a, b)  # any order or subset: the same values per record
    assert not np.array_equal(a, draw_colour(ALL, 0, 1, np.arange(20)).values())
    assert not np.array_equal(a, draw_colour(ALL, 1, 0, np.arange(20)).values())


def test_colour_leaves_the_windows_and_flips_as_they_were():
    crop = CropSpec(32, 24, random_resized_crop=True, rand_mirror=True)
    sizes = np.random.default_rng(0).integers(20, 300, (200, 2))
    plain = KeyedDraw(crop, 5, 2).windows(sizes, np.arange(200))
    coloured = KeyedDraw(crop, 5, 2, ALL).windows(sizes, np.arange(200))
    assert np.array_equal(plain[0], coloured[0]) and np.array_equal(plain[1], coloured[1])


def test_draws_respect_their_bounds_and_follow_mxnets_formulas():
    d = draw_colour(ALL, 0, 0, np.arange(20000))
    # HLS: int(U(-v, v)), truncated towards zero as MXNet's int() of a float
    for k, v in enumerate((20, 30, 15)):
        assert d.hls[:, k].min() == -(v - 1) and d.hls[:, k].max() == v - 1
        assert 1.5 / (2 * v) < np.mean(d.hls[:, k] == 0) < 2.5 / (2 * v)  # twice the mass
    for k in range(3):  # 1 + U(-0.4, 0.4)
        a = d.alpha[:, k]
        assert 0.6 <= a.min() < 0.61 and 1.39 < a.max() <= 1.4
        assert abs(a.mean() - 1) < 0.01 and abs(a.std() - 0.4 / np.sqrt(3)) < 0.005
    c, i = d.affine[:, 0], d.affine[:, 1]
    assert c.min() >= 0.7 and c.max() <= 1.3 and i.min() >= -20 and i.max() <= 20
    # PCA: eigvec @ (N(0, 0.1) * eigval): that covariance, zero mean
    vec, val = np.array(colour.PCA_EIGVEC), np.array(colour.PCA_EIGVAL)
    want = vec @ np.diag((0.1 * val) ** 2) @ vec.T
    assert np.allclose(np.cov(d.pca.T), want, rtol=0.06, atol=0.02)
    assert np.abs(d.pca.mean(0)).max() < 0.06
    off = draw_colour(ColourSpec(), 0, 0, np.arange(10))
    assert (off.hls == 0).all() and (off.alpha == 1).all() and (off.pca == 0).all()
    assert (off.affine == [1, 0]).all()


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"random_h": 181}, "random_h must be in [0, 180]"),
        ({"random_s": -1}, "random_s must be in [0, 255]"),
        ({"brightness": -0.1}, "brightness must be at least 0"),
        ({"pca_noise": float("nan")}, "pca_noise must be at least 0"),
        ({"max_random_contrast": 1.0}, "max_random_contrast must be below 1"),
    ],
)
def test_bad_colour_values_are_named(kw, words):
    with pytest.raises(ValueError) as info:
        ColourSpec(**kw)
    assert words in str(info.value)
    with pytest.raises(TypeError, match="random_l must be an int"):
        ColourSpec(random_l=1.5)


# ---- the pixels, step by step ----


def test_each_step_moves_the_pixels_as_its_formula_says():
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (6, 7, 3), dtype=np.uint8)
    f = rgb.astype(np.float64)
    bright = apply_colour(rgb, ColourSpec(brightness=0.5), draws_of(1, alpha=[1.3, 1, 1]), 0)
    assert np.abs(bright - np.clip(f * 1.3, 0, 255)).max() <= 0.5
    flat = apply_colour(rgb, ColourSpec(contrast=0.5), draws_of(1, alpha=[1, 0, 1]), 0)
    assert (flat == flat[0, 0]).all()  # contrast 0: every pixel the mean grey
    assert abs(int(flat[0, 0, 0]) - colour.gray_f32(rgb).mean()) <= 0.5
    strong = apply_colour(rgb, ColourSpec(contrast=0.5), draws_of(1, alpha=[1, 1.4, 1]), 0)
    assert colour.gray_f32(strong).std() > colour.gray_f32(rgb).std()
    grey = apply_colour(rgb, ColourSpec(saturation=0.5), draws_of(1, alpha=[1, 1, 0]), 0)
    assert (grey == grey[..., :1]).all()  # saturation 0: each pixel its own grey
    assert np.array_equal(grey[..., 0], np.rint(colour.gray_f32(rgb)))
    shift = apply_colour(rgb, ColourSpec(pca_noise=0.1), draws_of(1, pca=[5, -3, 0.4]), 0)
    assert np.array_equal(shift, np.clip(np.rint(f + [5, -3, 0.4]), 0, 255))
    same = apply_colour(rgb, JITTER, draws_of(1), 0)
    assert np.array_equal(same, rgb)  # identity draws: identity (no HLS round trip)


def test_hls_shifts_move_lightness_and_saturation_and_clip_hue():
    rgb = np.array([[[100, 150, 200], [200, 40, 40], [10, 10, 10]]], np.uint8)
    light = apply_colour(rgb, ColourSpec(random_l=30), draws_of(1, hls=[0, 0, 30]), 0)
    assert (colour.gray_f32(light) > colour.gray_f32(rgb)).all()
    dull = apply_colour(rgb, ColourSpec(random_s=60), draws_of(1, hls=[0, -255, 0]), 0)
    assert (dull == dull[..., :1]).all()  # no saturation left: grey
    turned = apply_colour(rgb, ColourSpec(random_h=90), draws_of(1, hls=[90, 0, 0]), 0)[0]
    hue = colour._to_hls(turned)[:, 0]
    assert colour._to_hls(rgb[0])[:2, 0].tolist() == [105, 0]
    assert hue[0] in (0, 180)  # 105 + 90 is clipped at 180 (MXNet), not wrapped to 15
    assert hue[1] == 90


def test_hls_round_trip_is_mxnets():
    """MXNet with random_s=1 draws a shift of int(U(-1, 1)) = 0: its 8-bit HLS round trip
    alone, which is lossy; recio's gives the same bytes."""
    ref = np.load(DATA / "hls.npz")
    spec = ColourSpec(random_s=1)
    got = np.stack([apply_colour(s, spec, draws_of(1), 0) for s in ref["source"]])
    assert np.array_equal(got, ref["mxnet"])
    assert not np.array_equal(got, ref["source"])


# ---- against MXNet's distributions ----


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sample Kolmogorov-Smirnov distance of two samples."""
    grid = np.union1d(a, b)
    fa = np.searchsorted(np.sort(a), grid, side="right") / len(a)
    fb = np.searchsorted(np.sort(b), grid, side="right") / len(b)
    return float(np.abs(fa - fb).max())


N_OURS = 200  # records drawn per setting (MXNet's samples: 400)


@pytest.fixture(scope="module")
def two_tone_batches():
    """recio's outputs at MXNet's two probe pixels, per setting, for N_OURS records."""
    ref = np.load(DATA / "draws.npz")
    pixels = np.zeros((32, 32, 3), np.uint8)
    pixels[:, :16] = (100, 150, 200)
    pixels[:, 16:] = 60
    buffers = [png(pixels)] * N_OURS
    got = {}
    with DecodePool(2) as pool:
        for name, kw in json.loads(str(ref["settings"])).items():  # what MXNet ran
            out = np.zeros((N_OURS, 3, 32, 32), np.float32)
            draw = KeyedDraw(CropSpec(32, 32), 0, 0, ColourSpec(**kw))
            status = pool.decode_batch(buffers, out, draw=draw, records=np.arange(N_OURS),
                                       layout="NCHW", mean=(0, 0, 0), std=(1, 1, 1))  # fmt: skip
            assert (status == 0).all()
            got[name] = out[:, :, 0, [0, 20]]
    return ref, got


def test_output_distributions_match_mxnets(two_tone_batches):
    """Per setting, channel and probe pixel: a two-sample KS test against MXNet's outputs.

    The critical distance at the 0.1 % level is 1.95 * sqrt((n + m) / (n m)), 0.169 for
    these 200 and 400 samples (conservative for discrete values). The draws are keyed, so
    the test gives the same answer every run.
    """
    ref, got = two_tone_batches
    n, m = N_OURS, len(ref["brightness"])
    critical = 1.95 * np.sqrt((n + m) / (n * m))
    worst = {}
    for name, ours in got.items():
        theirs = ref[name]
        worst[name] = max(
            ks_statistic(ours[:, c, k], theirs[:, c, k]) for c in range(3) for k in range(2)
        )
    assert max(worst.values()) < critical, worst


def test_brightness_shifts_the_image_mean_as_mxnet(two_tone_batches):
    ref, got = two_tone_batches
    ours, theirs = got["brightness"][:, :, 1], ref["brightness"][:, :, 1]  # the grey half
    assert abs(ours.mean() - theirs.mean()) < 2 and abs(ours.std() - theirs.std()) < 1.5
    assert ours.min() >= 60 * 0.6 - 0.5 and ours.max() <= 60 * 1.4 + 0.5


# ---- the decode: native against the Pillow path ----


@pytest.mark.needs_native
@pytest.mark.parametrize(
    "spec",
    [ALL, JITTER, ColourSpec(random_h=40, random_l=20), ColourSpec(saturation=0.9, pca_noise=0.3)],
)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_native_decode_is_the_pillow_paths_byte_for_byte(spec, layout):
    """Output size = window size (no resampling, no DCT scaling): both decoders give the
    same pre-colour pixels, so the colour must agree exactly, mean image and all."""
    # 15 x 23: 21 turns of the SIMD loop's 48 values and 9 pixels left for the C one
    buffers = [jpeg(make_pixels(23, 15 + i, seed=i)) for i in range(6)]
    crop = CropSpec(15, 23, rand_crop=True, mirror=False, rand_mirror=True)
    draw = KeyedDraw(crop, 3, 1, spec)
    mean_img = np.random.default_rng(0).uniform(0, 50, (3, 15, 23)).astype(np.float32)
    shape = (6, 3, 15, 23) if layout == "NCHW" else (6, 15, 23, 3)
    outs = []
    for backend in ("native", "python"):
        with DecodePool(2, backend=backend, dct_scaling="off") as pool:
            out = np.zeros(shape, np.float32)
            status = pool.decode_batch(buffers, out, draw=draw, records=np.arange(6) + 40,
                                       layout=layout, std=(2, 3, 4), scale=0.5,
                                       mean_img=mean_img, channel_order="BGR")  # fmt: skip
            assert (status == 0).all()
            outs.append(out)
    assert np.array_equal(outs[0], outs[1])


@pytest.mark.needs_native
def test_native_decode_with_resampling_stays_close_to_the_pillow_path():
    buffers = [jpeg(make_pixels(90, 70 + i, seed=i)) for i in range(4)]
    draw = KeyedDraw(CropSpec(32, 32, random_resized_crop=True), 0, 0, JITTER)
    outs = []
    for backend in ("native", "python"):
        with DecodePool(2, backend=backend, dct_scaling="off") as pool:
            out = np.zeros((4, 32, 32, 3), np.uint8)
            pool.decode_batch(buffers, out, draw=draw, records=np.arange(4))
            outs.append(out.astype(int))
    assert np.abs(outs[0] - outs[1]).mean() < 1.0  # the resamplers' one level, amplified


def test_pool_refuses_what_it_cannot_do():
    buffers = [jpeg(make_pixels(16, 16))]
    affine = KeyedDraw(CropSpec(16, 16), 0, 0, ColourSpec(max_random_illumination=5))
    with DecodePool(1) as pool:
        with pytest.raises(ValueError, match="float32"):
            pool.decode_batch(buffers, np.zeros((1, 16, 16, 3), np.float16), draw=affine,
                              records=[0])  # fmt: skip
        with pytest.raises(ValueError, match="mean_img must have shape"):
            pool.decode_batch(buffers, np.zeros((1, 16, 16, 3), np.float32),
                              mean_img=np.zeros((3, 8, 8)))  # fmt: skip
        with pytest.raises(ValueError, match="float32 or float16 out"):
            pool.decode_batch(buffers, np.zeros((1, 16, 16, 3), np.uint8), scale=0.5)


# ---- the iterator ----


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    path = tmp_path_factory.mktemp("colour")
    rec, idx = str(path / "c.rec"), str(path / "c.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for key in range(24):
            body = jpeg(make_pixels(48 + key, 40, seed=key))
            w.write_idx(key, pack(IRHeader(0, float(key % 3), 100 + key, 0), body))
    return rec


def means(images: np.ndarray) -> np.ndarray:
    return images.mean((1, 2, 3))


def batches(rec, n=3, **kw):
    args = dict(data_shape=(3, 32, 32), batch_size=8, preprocess_threads=2, dtype="float32")
    args.update(kw)
    with ImageRecordIter(rec, **args) as it:
        return [b.data.copy() for b, _ in zip(it, range(n), strict=False)]


@pytest.mark.parametrize(
    ("kw", "check"),
    [
        ({"brightness": 0.4}, lambda plain, out: np.ptp(means(out) / means(plain)) > 0.1),
        ({"saturation": 0.9}, lambda plain, out: not np.allclose(out.std(1), plain.std(1))),
        ({"max_random_illumination": 10.0}, lambda plain, out: (np.abs(out - plain) <= 10).all()),
        ({"scale": 0.5}, lambda plain, out: np.allclose(out, plain * 0.5)),
        ({"mirror": True}, lambda plain, out: np.array_equal(out, plain[..., ::-1])),
    ],
)  # fmt: skip
def test_iterator_parameters_change_the_output_as_they_should(rec, kw, check):
    plain = np.concatenate(batches(rec))
    out = np.concatenate(batches(rec, **kw))
    assert not np.array_equal(out, plain) and check(plain, out)


def test_iterator_illumination_is_one_shift_per_image(rec):
    plain = np.concatenate(batches(rec, 1, mean_r=5, std_b=2))
    out = np.concatenate(batches(rec, 1, max_random_illumination=10.0, mean_r=5, std_b=2))
    diff = (out - plain) * np.array([1, 1, 2])[None, :, None, None]  # times std
    assert np.allclose(diff, diff[:, :1, :1, :1], atol=1e-4)  # one shift per image
    assert len(np.unique(diff[:, 0, 0, 0].round(4))) == len(diff)


def test_iterator_resumes_exactly_with_colour_on(rec):
    kw = dict(shuffle=True, seed=4, rand_mirror=True, random_resized_crop=True, brightness=0.4,
              contrast=0.4, saturation=0.4, pca_noise=0.1, random_h=10, random_l=10,
              max_random_contrast=0.2, max_random_illumination=5)  # fmt: skip
    args = dict(data_shape=(3, 32, 32), batch_size=4, preprocess_threads=2, dtype="float32")
    with ImageRecordIter(rec, **args, **kw) as it:
        whole = [b.data.copy() for b in it]
    with ImageRecordIter(rec, **args, **kw) as it:
        head = iter(it)
        next(head), next(head)
        state = it.state_dict()
    with ImageRecordIter(rec, **args, **kw) as it:
        it.load_state_dict(state)
        rest = [b.data.copy() for b in it]
    assert len(rest) == len(whole) - 2
    assert all(np.array_equal(a, b) for a, b in zip(rest, whole[2:], strict=True))


def test_seed_aug_changes_the_draws_not_the_order(rec):
    kw = dict(shuffle=True, seed=1, rand_crop=True, resize=40, brightness=0.4)
    args = dict(data_shape=(3, 32, 32), batch_size=8, preprocess_threads=1)
    ids = {}
    pixels = {}
    for name, extra in {"plain": {}, "same": {"seed_aug": 1}, "other": {"seed_aug": 9}}.items():
        with ImageRecordIter(rec, **args, **kw, **extra) as it:
            b = next(iter(it))
            ids[name], pixels[name] = b.index.copy(), b.data.copy()
    assert np.array_equal(ids["plain"], ids["other"]) and np.array_equal(ids["plain"], ids["same"])
    assert np.array_equal(pixels["plain"], pixels["same"])
    assert not np.array_equal(pixels["plain"], pixels["other"])


def test_fields_of_colourspec_are_mxnets_keywords():
    names = {f.name for f in dataclasses.fields(ColourSpec)}
    assert names == {"random_h", "random_s", "random_l", "brightness", "contrast", "saturation",
                     "pca_noise", "max_random_contrast", "max_random_illumination"}  # fmt: skip


_DIGEST = """
import hashlib, numpy as np
from recio import _native
from recio.augment import ColourSpec, CropSpec, KeyedDraw
from recio.decode import DecodePool
from tests.augment.test_colour import ALL, jpeg
from tests.images import make_pixels
buffers = [jpeg(make_pixels(60, 40 + i, seed=i)) for i in range(4)]
h = hashlib.sha256()
specs = (ALL, ColourSpec(brightness=0.3, saturation=0.5), ColourSpec(contrast=0.5, pca_noise=0.2))
for spec in specs:
    draw = KeyedDraw(CropSpec(29, 31, random_resized_crop=True), 0, 0, spec)
    out = np.zeros((4, 29, 31, 3), np.float32)
    with DecodePool(1) as pool:
        pool.decode_batch(buffers, out, draw=draw, records=np.arange(4), mean=(1, 2, 3))
    h.update(out.tobytes())
print(_native.COLOUR_SIMD, h.hexdigest())
"""


def simd_digests(script: str) -> tuple[list[str], list[str]]:
    """``script``'s printed (SIMD path, digest), run with the default passes and with SSE2's.

    Each in a fresh interpreter: the passes are chosen once, at import (RECIO_SIMD).
    """
    import os
    import subprocess
    import sys

    root = Path(__file__).parents[2]

    def digest(**env):
        run = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                             text=True, check=True, env={**os.environ, **env})  # fmt: skip
        return run.stdout.split()

    return digest(), digest(RECIO_SIMD="sse2")


@pytest.mark.needs_native
def test_avx2_and_sse2_colour_passes_give_the_same_bytes():
    default, sse2 = simd_digests(_DIGEST)
    if default[0] != "avx2":
        pytest.skip("this CPU has no AVX2: there is one path only")
    assert sse2[0] == "sse2" and default[1] == sse2[1]
