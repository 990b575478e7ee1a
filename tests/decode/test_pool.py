"""Decode stage: pixels against a Pillow reference, statuses, argument checks, pool lifetime.

Tolerance against Pillow: mean absolute difference <= 2 levels and max <= 16 per image. With
DCT scaling off the native path must match Pillow to one level (same libjpeg-turbo IDCT, same
fixed-point resampler, 14-bit weights instead of Pillow's 22: at most one level apart).
"""

from __future__ import annotations

import gc
import io
import json
import mmap
import os
import re
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from PIL import Image

from recio import decode
from recio.errors import DecodeError
from recio.im2rec.encoder import JpegEncoder
from recio.records.spans import Spans

from ..images import backends, encode, make_pixels

FILTERS = {
    "bilinear": Image.Resampling.BILINEAR,
    "area": Image.Resampling.BOX,
    "nearest": Image.Resampling.NEAREST,
}
native_only = pytest.mark.needs_native


def reference(buf: bytes, crop, flip: bool, size: tuple[int, int], interp: str) -> np.ndarray:
    """Pillow: decode, RGB, crop, resize with the same filter, flip (HWC uint8)."""
    im = Image.open(io.BytesIO(buf)).convert("RGB")
    if crop is not None:
        x, y, w, h = crop
        im = im.crop((max(x, 0), max(y, 0), min(x + w, im.width), min(y + h, im.height)))
    im = im.resize(size, FILTERS[interp])
    arr = np.asarray(im)
    return arr[:, ::-1] if flip else arr


def assert_close(got: np.ndarray, want: np.ndarray, exact: bool = False) -> None:
    diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
    if exact:
        assert diff.max() <= 1, f"max diff {diff.max()}"
    assert diff.mean() <= 2.0 and diff.max() <= 16, f"MAD {diff.mean():.3f}, max {diff.max()}"


def to_hwc(out: np.ndarray, layout: str) -> np.ndarray:
    return out.transpose(1, 2, 0) if layout == "NCHW" else out


CASES = [  # (image w, h), crop, flip, (out w, h)
    ((320, 240), None, False, (320, 240)),
    ((320, 240), None, True, (224, 224)),
    ((320, 240), (37, 21, 200, 150), False, (96, 80)),
    ((320, 240), (37, 21, 200, 150), True, (300, 260)),  # upscale
    ((333, 257), (-10, 100, 500, 500), True, (64, 64)),  # clamped at three edges
    ((640, 480), (100, 50, 400, 300), False, (224, 224)),
]


@pytest.mark.parametrize("interp", ["bilinear", "area"])
@pytest.mark.parametrize("case", CASES)
def test_matches_pillow(pool: decode.DecodePool, case, interp: str) -> None:
    (w, h), crop, flip, (ow, oh) = case
    buf = encode(w, h, seed=w)
    out = np.zeros((1, oh, ow, 3), np.uint8)
    status = pool.decode_batch(
        [buf],
        out,
        crops=None if crop is None else [crop],
        flips=[flip],
        interpolation=interp,
    )
    assert status.tolist() == [0], pool.last_errors()
    assert_close(out[0], reference(buf, crop, flip, (ow, oh), interp))


@native_only
@pytest.mark.parametrize("interp", ["bilinear", "area", "nearest"])
@pytest.mark.parametrize("case", CASES)
def test_native_exact_without_dct_scaling(case, interp: str) -> None:
    (w, h), crop, flip, (ow, oh) = case
    buf = encode(w, h, seed=w)
    out = np.zeros((1, oh, ow, 3), np.uint8)
    with decode.DecodePool(1, backend="native", dct_scaling="off") as p:
        status = p.decode_batch(
            [buf], out, crops=None if crop is None else [crop], flips=[flip], interpolation=interp
        )
    assert status.tolist() == [0]
    assert_close(out[0], reference(buf, crop, flip, (ow, oh), interp), exact=True)


# (scale numerator over 8, dct_scaling mode that may pick it): "pow2" has 1, 2, 4, 8 only
DCT_SCALES = [(num, "all") for num in range(1, 9)] + [(num, "pow2") for num in (1, 2, 4, 8)]


@native_only
@pytest.mark.parametrize("roi", [True, False])
@pytest.mark.parametrize(("num", "mode"), DCT_SCALES)
def test_each_dct_scale(num: int, mode: str, roi: bool) -> None:
    """Outputs chosen so that the decoder picks scale num/8; compared with full-size Pillow."""
    w, h = 640, 512
    crop = (40, 24, 560, 480)
    ow, oh = crop[2] * num // 8, crop[3] * num // 8
    assert (
        decode.pool._native.dct_scale_num(crop[2], crop[3], ow, oh, decode.pool._DCT[mode]) == num
    )
    buf = encode(w, h, seed=num)
    with decode.DecodePool(1, backend="native", dct_scaling=mode, roi_decode=roi) as p:
        for interp in ("bilinear", "area"):
            out = np.zeros((1, oh, ow, 3), np.uint8)
            assert p.decode_batch([buf], out, crops=[crop], interpolation=interp).tolist() == [0]
            assert_close(out[0], reference(buf, crop, False, (ow, oh), interp))


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float16])
@pytest.mark.parametrize("order", ["RGB", "BGR"])
def test_layouts_dtypes_normalisation(pool: decode.DecodePool, layout, dtype, order) -> None:
    bufs = [encode(200, 150, seed=s) for s in range(3)]
    crops = np.array([[0, 0, 200, 150], [10, 20, 100, 90], [50, 0, 150, 150]], np.int32)
    flips = np.array([0, 1, 1], bool)
    shape = (3, 64, 48, 3) if layout == "NHWC" else (3, 3, 64, 48)
    mean = std = None
    if dtype != np.uint8:
        mean, std = (123.7, 116.3, 103.5), (58.4, 57.1, 57.4)
    out = np.zeros(shape, dtype)
    status = pool.decode_batch(
        bufs,
        out,
        crops=crops,
        flips=flips,
        mean=mean,
        std=std,
        layout=layout,
        channel_order=order,
    )
    assert status.tolist() == [0, 0, 0]
    for i, buf in enumerate(bufs):
        want = reference(buf, tuple(crops[i]), bool(flips[i]), (48, 64), "bilinear")
        if order == "BGR":
            want = want[..., ::-1]
        got = to_hwc(out[i], layout)
        if dtype == np.uint8:
            assert_close(got, want)
        else:  # undo the normalisation, then compare levels
            levels = got.astype(np.float64) * np.array(std) + np.array(mean)
            assert_close(np.rint(levels), want)


def test_float_output_is_normalised_uint8(pool: decode.DecodePool) -> None:
    """The float path is exactly (uint8 result - mean) / std, cast."""
    bufs = [encode(180, 120, seed=s) for s in range(2)]
    u8 = np.zeros((2, 32, 32, 3), np.uint8)
    f32 = np.zeros((2, 32, 32, 3), np.float32)
    mean, std = (1.0, 2.0, 3.0), (4.0, 5.0, 6.0)
    assert pool.decode_batch(bufs, u8).tolist() == [0, 0]
    assert pool.decode_batch(bufs, f32, mean=mean, std=std).tolist() == [0, 0]
    want = ((u8.astype(np.float64) - mean) / std).astype(np.float32)
    np.testing.assert_array_equal(f32, want)


@pytest.mark.parametrize("mode", ["L", "CMYK"])
def test_grayscale_and_cmyk_come_out_rgb(pool: decode.DecodePool, mode: str) -> None:
    buf = encode(160, 120, mode=mode)
    out = np.zeros((1, 60, 80, 3), np.uint8)
    assert pool.decode_batch([buf], out, crops=[(10, 10, 120, 100)]).tolist() == [0]
    assert_close(out[0], reference(buf, (10, 10, 120, 100), False, (80, 60), "bilinear"))
    if mode == "L":
        assert (out[0, ..., 0] == out[0, ..., 1]).all()


def test_bad_inputs_get_statuses(pool: decode.DecodePool) -> None:
    good = encode(128, 96)
    flipped = bytearray(good)
    for k in range(300, len(flipped), 97):
        flipped[k] ^= 0x5A
    bufs = [
        good,
        b"",
        good[: len(good) // 2],
        bytes(flipped),
        b"\xff\xd8\xff" + os.urandom(100),
        b"definitely not an image",
        good,
    ]
    out = np.full((len(bufs), 32, 32, 3), 7, np.uint8)
    status = pool.decode_batch(bufs, out)
    errors = pool.last_errors()
    assert status[0] == 0 and status[-1] == 0
    assert status[1] == decode.STATUS_EMPTY
    assert status[2] in (decode.STATUS_TRUNCATED, decode.STATUS_CORRUPT)
    assert status[3] != 0 or (out[3] != 0).any()  # a bit-flipped JPEG may still decode
    assert status[4] in (decode.STATUS_CORRUPT, decode.STATUS_TRUNCATED, decode.STATUS_UNSUPPORTED)
    assert status[5] == decode.STATUS_UNSUPPORTED
    for i in np.flatnonzero(status):
        assert isinstance(errors[i], str) and errors[i], i
        assert (out[i] == 0).all()  # failed slots are zeroed
    assert errors[0] is None
    np.testing.assert_array_equal(out[0], out[-1])
    with pytest.raises(DecodeError) as exc:
        decode.raise_on_error(status, errors)
    assert exc.value.index == 1 and exc.value.status == decode.STATUS_EMPTY


def test_crop_outside_image(pool: decode.DecodePool) -> None:
    buf = encode(100, 80)
    out = np.zeros((2, 16, 16, 3), np.uint8)
    status = pool.decode_batch([buf, buf], out, crops=[(200, 0, 10, 10), (90, 70, 50, 50)])
    assert status.tolist() == [decode.STATUS_BAD_PARAM, 0]
    assert_close(out[1], reference(buf, (90, 70, 50, 50), False, (16, 16), "bilinear"))


def test_pixel_limit(backend: str) -> None:
    buf = encode(200, 100)
    with decode.DecodePool(1, backend=backend, max_pixels=200 * 100 - 1) as p:
        out = np.zeros((1, 8, 8, 3), np.uint8)
        assert p.decode_batch([buf], out).tolist() == [decode.STATUS_TOO_LARGE]
        assert "limit" in p.last_errors()[0]


@pytest.mark.parametrize(
    ("out", "kwargs"),
    [
        (np.zeros((2, 8, 8, 3), np.int16), {}),
        (np.zeros((2, 8, 8, 4), np.uint8), {}),
        (np.zeros((2, 8, 8, 3), np.uint8), {"layout": "NCHW"}),
        (np.zeros((2, 8, 3), np.uint8), {}),
        (np.zeros((1, 8, 8, 3), np.uint8), {}),
        (np.zeros((2, 8, 16, 3), np.uint8)[:, :, ::2], {}),
        (np.zeros((2, 8, 8, 3), np.uint8), {"mean": (0, 0, 0), "std": (1, 1, 1)}),
        (np.zeros((2, 8, 8, 3), np.float32), {"mean": (0, 0), "std": (1, 1)}),
        (np.zeros((2, 8, 8, 3), np.float32), {"mean": (0, 0, 0), "std": (1, 0, 1)}),
        (np.zeros((2, 8, 8, 3), np.uint8), {"crops": np.zeros((2, 3), np.int32)}),
        (np.zeros((2, 8, 8, 3), np.uint8), {"crops": [(0, 0, 0, 5), (0, 0, 5, 5)]}),
        (np.zeros((2, 8, 8, 3), np.uint8), {"flips": [1]}),
        (np.zeros((2, 8, 8, 3), np.uint8), {"interpolation": "bicubic"}),
        (np.zeros((2, 8, 8, 3), np.uint8), {"channel_order": "RGBA"}),
        (np.zeros((2, 8, 8, 3), np.uint8), {"layout": "HWC"}),
    ],
)
def test_bad_arguments_raise_before_work(pool: decode.DecodePool, out, kwargs) -> None:
    with pytest.raises(ValueError):
        pool.decode_batch([encode(16, 16)] * 2, out, **kwargs)


@pytest.mark.parametrize(
    ("crops", "bad"),
    [
        (np.array([[0, 0, 2**32 + 10, 10]] * 2, np.int64), "crops[0, 2] = 4294967306"),
        (np.array([[0, 0, 10, 10], [-(2**31) - 1, 0, 10, 10]], np.int64), "crops[1, 0]"),
        (np.array([[0, 0, 10, 10], [0, 2**63, 10, 10]], np.uint64), "crops[1, 1]"),
        ([[0, 0, 10, 10], [0, 0, 10, 2**70]], "crops[1, 3] = 1180591620717411303424"),
        (np.array([[0, 0, 10, 10], [0, 0, 10.5, 10]]), "crops[1, 2] = 10.5"),
        (np.array([[0, 0, 10, 10], [0, 0, np.nan, 10]]), "crops[1, 2] = nan"),
    ],
)
def test_crops_beyond_int32_are_refused_not_wrapped(pool: decode.DecodePool, crops, bad) -> None:
    """A window int32 cannot hold is an error naming it; astype(int32) wrapped 2**32 + 10 to
    10, a valid window, and decoded the wrong pixels with status 0."""
    out = np.zeros((2, 8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match=re.escape(bad)):
        pool.decode_batch([encode(16, 16)] * 2, out, crops=crops)
    # int64 windows that fit are taken as they are
    fits = np.array([[2, 2, 10, 10], [0, 0, 16, 16]], np.int64)
    assert pool.decode_batch([encode(16, 16)] * 2, out, crops=fits).tolist() == [0, 0]


def test_flips_are_truth_values(pool: decode.DecodePool) -> None:
    """flips=[256] is a flip (it wrapped to uint8 0: no flip)."""
    buf = encode(32, 24)
    out = np.zeros((2, 24, 32, 3), np.uint8)
    assert pool.decode_batch([buf, buf], out, flips=np.array([256, 0])).tolist() == [0, 0]
    np.testing.assert_array_equal(out[0], out[1, :, ::-1])


def test_read_only_out_raises(pool: decode.DecodePool) -> None:
    out = np.zeros((1, 8, 8, 3), np.uint8)
    out.flags.writeable = False
    with pytest.raises(ValueError):
        pool.decode_batch([encode(16, 16)], out)


def test_ring_slot_and_mmap_buffers(pool: decode.DecodePool, tmp_path) -> None:
    """out may be a slot of a larger ring; inputs may be memoryview slices of an mmap."""
    bufs = [encode(90 + 10 * s, 70, seed=s) for s in range(4)]
    path = tmp_path / "blob.bin"
    path.write_bytes(b"".join(bufs))
    ring = np.full((3, 6, 24, 24, 3), 99, np.uint8)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view, views, at = memoryview(mm), [], 0
        for b in bufs:
            views.append(view[at : at + len(b)])
            at += len(b)
        status = pool.decode_batch(views, ring[1])
        del views, view
    assert status.tolist() == [0] * 4
    assert (ring[0] == 99).all() and (ring[2] == 99).all() and (ring[1, 4:] == 99).all()
    direct = np.zeros((4, 24, 24, 3), np.uint8)
    assert pool.decode_batch(bufs, direct).tolist() == [0] * 4
    np.testing.assert_array_equal(ring[1, :4], direct)


def test_spans_decode_as_the_list_does(pool: decode.DecodePool) -> None:
    """Spans of one buffer decode as the list of their items (PNGs too, on the Pillow path
    beside the native one), statuses and error texts alike; image_sizes as well."""
    bufs = [encode(60, 40, seed=s) for s in range(3)]
    bufs += [encode(30, 20, fmt="PNG"), b"", b"\xff\xd8 not really", encode(50, 30)]
    base, starts = bytearray(), []
    for b in bufs:
        base += b"\x07\x07\x07"  # bytes between the images that are no image's
        starts.append(len(base))
        base += b
    spans = Spans(bytes(base), starts, [len(b) for b in bufs])
    flips = np.arange(len(bufs)) % 2
    want = np.full((len(bufs), 20, 24, 3), 9, np.uint8)
    got = want.copy()
    want_status = pool.decode_batch(bufs, want, flips=flips)
    want_errors = pool.last_errors()
    got_status = pool.decode_batch(spans, got, flips=flips)
    assert got_status.tolist() == want_status.tolist()
    assert want_status[3] == 0 and want_status[4] == decode.STATUS_EMPTY  # the PNG decoded
    assert pool.last_errors() == want_errors and want_errors[4] and want_errors[0] is None
    np.testing.assert_array_equal(got, want)
    assert pool.image_sizes(spans).tolist() == pool.image_sizes(bufs).tolist()
    assert pool.image_sizes(spans.take([3, 0])).tolist() == [[30, 20], [60, 40]]


def test_last_errors_of_a_batch_without_failures(pool: decode.DecodePool) -> None:
    out = np.zeros((3, 8, 8, 3), np.uint8)
    assert pool.decode_batch([b"junk"], out).tolist() != [0]
    assert pool.decode_batch([encode(16, 16)] * 3, out).tolist() == [0, 0, 0]
    assert pool.last_errors() == [None] * 3
    errors = pool.last_errors()
    errors[0] = "mine"  # a copy: the pool's record stays as it was
    assert pool.last_errors() == [None] * 3


def test_last_errors_are_each_threads_own(pool: decode.DecodePool) -> None:
    """Two threads decoding at once each read their own batch's errors."""
    good, seen = encode(24, 16), []

    def run(bufs: list) -> None:
        out = np.zeros((len(bufs), 8, 8, 3), np.uint8)
        for _ in range(30):
            status = pool.decode_batch(bufs, out)
            errors = pool.last_errors()
            seen.append(len(errors) == len(bufs) and [e is not None for e in errors] == [
                bool(st) for st in status
            ])  # fmt: skip

    threads = [threading.Thread(target=run, args=(b,)) for b in ([b"junk"], [good] * 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 60 and all(seen)


def test_the_normalisation_table_is_shared_and_read_only(pool: decode.DecodePool) -> None:
    """The lookup table of a (dtype, mean, std) is made once; a batch cannot change it."""
    out = np.zeros((1, 8, 8, 3), np.float32)
    buf = [encode(16, 16)]
    pool.decode_batch(buf, out, mean=(10.0, 20.0, 30.0), std=(2.0, 2.0, 2.0))
    first = out.copy()
    pool.decode_batch(buf, out, mean=[10, 20, 30], std=np.array([2.0, 2, 2]))  # unhashable
    np.testing.assert_array_equal(out, first)
    lut = decode.options.lut(np.dtype(np.float32), (10.0, 20.0, 30.0), (2.0, 2.0, 2.0))
    assert lut is decode.options.lut(np.dtype(np.float32), (10.0, 20.0, 30.0), (2.0, 2.0, 2.0))
    assert not lut.flags.writeable and lut[1, 20] == 0.0 and lut[2, 32] == 1.0


def test_image_sizes(pool: decode.DecodePool) -> None:
    bufs = [encode(123, 45), encode(30, 20, fmt="PNG"), b"", b"junk", encode(64, 48, mode="CMYK")]
    sizes = pool.image_sizes(bufs)
    assert sizes.dtype == np.int32
    assert sizes.tolist() == [[123, 45], [30, 20], [-1, -1], [-1, -1], [64, 48]]


def test_empty_batch(pool: decode.DecodePool) -> None:
    out = np.zeros((4, 8, 8, 3), np.uint8)
    assert pool.decode_batch([], out).shape == (0,)


@pytest.mark.parametrize("backend_", backends())
def test_same_result_for_1_2_8_threads(backend_: str) -> None:
    rng = np.random.default_rng(5)
    sizes = rng.integers(40, 300, (40, 2))
    bufs = [encode(int(w), int(h), seed=s) for s, (w, h) in enumerate(sizes)]
    bufs[7] = bufs[7][:200]
    crops = np.array([[rng.integers(0, 20), rng.integers(0, 20), 30, 30] for _ in bufs], np.int32)
    flips = rng.integers(0, 2, len(bufs)).astype(bool)
    results = []
    for n in (1, 2, 8):
        with decode.DecodePool(n, backend=backend_) as p:
            out = np.zeros((len(bufs), 3, 20, 28), np.float16)
            st = p.decode_batch(bufs, out, crops=crops, flips=flips, layout="NCHW")
            results.append((st, out))
    for st, out in results[1:]:
        np.testing.assert_array_equal(st, results[0][0])
        np.testing.assert_array_equal(out, results[0][1])


@native_only
@pytest.mark.parametrize("interp", ["bilinear", "area", "nearest"])
def test_repeated_sizes_reuse_coefficients_correctly(interp: str) -> None:
    """A worker keeps its last resampling coefficients for images of the same size and crop;
    a batch of repeats (one thread, so one worker) must give a fresh pool's pixels every
    time, also where the row decode rebases them (a half-scale DCT decode of a crop at an odd
    row starts half a row in, so a box or nearest filter skips the first row)."""
    buf = encode(640, 512, seed=9)
    crops = [(41, 23, 400, 300), (41, 23, 400, 300), (0, 0, 640, 512), (41, 23, 400, 300)]
    out = (200, 150)
    with decode.DecodePool(1, backend="native", dct_scaling="all") as p:
        batch = np.zeros((len(crops), out[1], out[0], 3), np.uint8)
        status = p.decode_batch([buf] * len(crops), batch, crops=crops, interpolation=interp)
        assert status.tolist() == [0] * len(crops)
    for crop, got in zip(crops, batch, strict=True):
        with decode.DecodePool(1, backend="native", dct_scaling="all") as fresh:
            want = np.zeros((1, out[1], out[0], 3), np.uint8)
            assert fresh.decode_batch([buf], want, crops=[crop], interpolation=interp).tolist() == [
                0
            ]
        np.testing.assert_array_equal(got, want[0])


def _task_count() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_pools_leave_no_threads(backend: str) -> None:
    before_tasks, before_py = _task_count(), threading.active_count()
    buf = encode(32, 32)
    for i in range(30):
        p = decode.DecodePool(4, backend=backend)
        p.decode_batch([buf] * 8, np.zeros((8, 8, 8, 3), np.uint8))
        if i % 3 == 0:
            with p:
                pass
        elif i % 3 == 1:
            p.close()
            p.close()  # idempotent
        else:
            del p  # the finalizer closes it
    gc.collect()
    deadline = time.monotonic() + 5
    while _task_count() > before_tasks + 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # threads from earlier tests may still be on their way out
    # Slack of 2: libraries loaded by other suites may start a helper thread of their own
    # meanwhile; 30 pools of 4 threads each leaking would add up to 120.
    assert _task_count() <= before_tasks + 2, threading.enumerate()
    assert threading.active_count() <= before_py, threading.enumerate()


def test_closed_pool_refuses(pool: decode.DecodePool) -> None:
    pool.close()
    with pytest.raises(ValueError, match="closed"):
        pool.decode_batch([b""], np.zeros((1, 8, 8, 3), np.uint8))


def test_env_forces_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECIO_DECODER", "python")
    monkeypatch.setattr(decode.pool, "_warned_slow", False)
    with pytest.warns(RuntimeWarning, match="slow"), decode.DecodePool(1) as p:
        assert p.backend == "python"
    monkeypatch.setenv("RECIO_DECODER", "bogus")
    with pytest.raises(ValueError, match="RECIO_DECODER"):
        decode.DecodePool(1)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/statm")
def test_no_memory_growth(backend: str) -> None:
    """RSS stays bounded over 10,000 small batches (in a subprocess, tiny images)."""
    script = textwrap.dedent(
        f"""
        import io, os, numpy as np
        from PIL import Image
        from recio import decode

        def rss():
            return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

        def enc(fmt, **kw):
            b = io.BytesIO()
            Image.fromarray(np.full((12, 16, 3), 90, np.uint8)).save(b, fmt, **kw)
            return b.getvalue()

        bufs = [enc("JPEG"), enc("JPEG")[:60], b"", enc("PNG"), b"junk"]
        out = np.zeros((len(bufs), 3, 8, 8), np.float32)
        crops = np.array([[1, 1, 9, 9]] * len(bufs), np.int32)
        n = {2000 if backend == "python" else 10000}
        with decode.DecodePool(2, backend={backend!r}) as p:
            for i in range(n):
                if i == n // 5:
                    base = rss()
                p.decode_batch(bufs, out, crops=crops, flips=[1, 0, 1, 0, 1], layout="NCHW",
                               mean=(1, 2, 3), std=(2, 2, 2))
                p.image_sizes(bufs)
        print(rss() - base)
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert res.returncode == 0, res.stderr
    growth = int(res.stdout.split()[-1])
    assert growth < 4 * 2**20, f"RSS grew by {growth} bytes"


def test_progressive_and_subsampling(pool: decode.DecodePool) -> None:
    for kwargs in ({"progressive": True}, {"subsampling": 0}, {"subsampling": 1}):
        buf = encode(250, 190, **kwargs)
        out = np.zeros((1, 50, 70, 3), np.uint8)
        crop = (13, 17, 200, 150)
        assert pool.decode_batch([buf], out, crops=[crop], flips=[1]).tolist() == [0]
        assert_close(out[0], reference(buf, crop, True, (70, 50), "bilinear"))


def test_make_pixels_is_deterministic() -> None:
    np.testing.assert_array_equal(make_pixels(10, 10, 3), make_pixels(10, 10, 3))


def _entropy_start(jpeg: bytes, last_scan: bool = False) -> int:
    """Where the first (or last) scan's entropy-coded data begins."""
    sos = jpeg.rfind(b"\xff\xda") if last_scan else jpeg.find(b"\xff\xda")
    return sos + 2 + int.from_bytes(jpeg[sos + 2 : sos + 4], "big")


# Baseline, progressive (cut in the last scan: only refinement bits are lost), and with
# restart intervals (libjpeg meets the EOI where it wants an RSTn marker).
PADDED_KINDS = {
    "baseline": {},
    "progressive": {"progressive": True},
    "restart rows": {"restart_marker_rows": 1},
    "restart blocks": {"restart_marker_blocks": 3},
}


@native_only
@pytest.mark.parametrize("kind", list(PADDED_KINDS))
@pytest.mark.parametrize("frac", [0.3, 0.6, 0.95])
def test_jpeg_cut_short_and_padded_with_eoi_is_truncated(kind: str, frac: float) -> None:
    """A partial download "repaired" with an EOI marker: libjpeg's warning (premature end of
    data segment, or EOI instead of RSTn) makes it TRUNCATED, pixels written, like a file that
    simply ends early; a crop of the rows above the cut too (NOTE [whole-stream check])."""
    good = encode(320, 240, **PADDED_KINDS[kind])
    start = _entropy_start(good, last_scan=kind == "progressive")
    cut = good[: start + int((len(good) - 2 - start) * frac)]
    out = np.zeros((3, 60, 80, 3), np.uint8)
    with decode.DecodePool(1, backend="native") as p:
        status = p.decode_batch([good, cut + b"\xff\xd9", cut], out)
        errors = p.last_errors()
        assert status.tolist() == [0, decode.STATUS_TRUNCATED, decode.STATUS_TRUNCATED], errors
        assert "image incomplete" in errors[1] and "Corrupt JPEG data" in errors[1]
        for _epoch in range(2):  # a crop of the rows above the cut: the same status
            top = p.decode_batch([cut + b"\xff\xd9"], out, crops=[(0, 0, 320, 16)])
            assert top.tolist() == [decode.STATUS_TRUNCATED]


@native_only
def test_corrupt_entropy_data_is_corrupt_and_benign_warnings_are_ok() -> None:
    good = encode(320, 240)
    start = _entropy_start(good)
    mid = len(good) - 400
    assert mid > start
    # 0xFF 0x00 is a stuffed 0xFF: runs of one bits, which no Huffman code is. (Near the end:
    # libjpeg-turbo's fast Huffman path, used while 512 bytes a block remain, says nothing.)
    bad_codes = good[:mid] + b"\xff\x00" * 16 + good[mid + 32 :]
    # bytes between two marker segments ("extraneous bytes before marker"): harmless
    dqt = good.find(b"\xff\xdb")
    extraneous = good[:dqt] + b"\x00\x01\x02" + good[dqt:]
    out = np.zeros((3, 60, 80, 3), np.uint8)
    with decode.DecodePool(1, backend="native") as p:
        status = p.decode_batch([good, bad_codes, extraneous], out)
        errors = p.last_errors()
    assert status.tolist() == [0, decode.STATUS_CORRUPT, 0], errors
    assert "Huffman" in errors[1]
    np.testing.assert_array_equal(out[0], out[2])
    # Pillow ignores both warnings: it decodes the extraneous bytes' image as we do
    ref = reference(extraneous, None, False, (80, 60), "bilinear")
    assert_close(out[2], ref)


# NOTE [decode budget]: small files that decode to a lot of memory, and the peak RSS a batch
# of them costs, measured in a fresh interpreter: VmHWM, the high-water mark of its memory
# (not ru_maxrss, which a child inherits from pytest), after VmHWM is reset to the RSS now.
PEAK_SCRIPT = """
import json, sys
import numpy as np
from recio import decode

def status_kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])

path, backend, threads, n, budget = sys.argv[1:6]
data, n = open(path, "rb").read(), int(n)
kw = {} if budget == "default" else {"max_decode_bytes": None if budget == "none" else int(budget)}
with decode.DecodePool(int(threads), backend=backend, **kw) as p:
    out = np.zeros((n, 32, 32, 3), np.uint8)
    p.decode_batch([data[:100]], out)  # the threads and libraries, loaded
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS
    except OSError:
        pass
    base = status_kib("VmRSS")
    status = p.decode_batch([data] * n, out, crops=[(0, 0, 64, 64)] * n)
    grew = status_kib("VmHWM") - base
    print(json.dumps({"status": status.tolist(), "errors": p.last_errors(), "grew": grew << 10}))
"""
MIB = 1 << 20


def _peak(path, backend: str, budget, threads: int = 2, n: int = 4) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    cmd = [sys.executable, "-c", PEAK_SCRIPT, str(path), backend, str(threads), str(n)]
    res = subprocess.run([*cmd, str(budget)], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, tuple[object, int]]:
    """Small files and what one decode of each must hold: a 6000x6000 grey progressive JPEG
    (140 KB; libjpeg's coefficient buffer: 562,500 blocks of 128 bytes, 72 MB), and a
    4000x4000 RGB PNG of one colour (55 KB; Pillow stores it in 64 MB)."""
    d = tmp_path_factory.mktemp("bombs")
    jpeg, png = d / "progressive.jpg", d / "flat.png"
    Image.new("L", (6000, 6000), 77).save(jpeg, "JPEG", progressive=True, quality=80)
    Image.new("RGB", (4000, 4000), (9, 200, 30)).save(png, "PNG", compress_level=9)
    return {"jpeg": (jpeg, 562_500 * 128), "png": (png, 4000 * 4000 * 4)}


BOMB_CASES = [
    pytest.param("jpeg", "native", marks=pytest.mark.needs_native),
    pytest.param("png", "native", marks=pytest.mark.needs_native),
    pytest.param("png", "python"),
]


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmHWM")
@pytest.mark.skipif(
    "libasan" in os.environ.get("LD_PRELOAD", ""),
    reason="ASan's quarantine holds freed memory: the peak RSS says nothing under it",
)
@pytest.mark.parametrize(("kind", "backend"), BOMB_CASES)
def test_decode_budget_bounds_the_batch_peak(bombs, kind: str, backend: str) -> None:
    """4 small bombs on 2 threads held two decodes' worth at once (JPEG: 150 MB, PNG: 130 MB;
    a 15 KB PNG of 11000x11000 took 1.5 GB). With max_decode_bytes=100 MiB they wait for one
    another: the peak stays under the budget."""
    path, one = bombs[kind]
    unbounded = _peak(path, backend, "none")
    assert unbounded["status"] == [0] * 4, unbounded["errors"]
    assert unbounded["grew"] > 1.5 * one, unbounded  # the measurement sees two at once
    bounded = _peak(path, backend, 100 * MIB)
    assert bounded["status"] == [0] * 4, bounded["errors"]
    assert one * 0.9 < bounded["grew"] < 100 * MIB, bounded


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmHWM")
@pytest.mark.parametrize(("kind", "backend"), BOMB_CASES)
def test_image_alone_over_the_decode_budget_is_refused_before_allocating(
    bombs, kind: str, backend: str
) -> None:
    path, one = bombs[kind]
    res = _peak(path, backend, 48 * MIB)
    assert res["status"] == [decode.STATUS_TOO_LARGE] * 4
    assert "over the budget of 48 MiB" in res["errors"][0]
    if kind == "jpeg":
        assert res["errors"][0].startswith("6000x6000 progressive JPEG needs about 7")
    assert res["grew"] < 16 * MIB, res  # refused from the header: nothing allocated


@native_only
def test_progressive_jpeg_under_the_default_budget() -> None:
    """The default budget (1 GiB) takes every ordinary image, progressive and CMYK too; it
    is the budget the Pillow part of a batch shares with the native one."""
    bufs = [
        encode(640, 480, progressive=True),
        encode(300, 200, mode="CMYK", progressive=True),
        encode(300, 200, mode="L", progressive=True),
        encode(300, 200, fmt="PNG"),
    ]
    out = np.zeros((len(bufs), 48, 64, 3), np.uint8)
    with decode.DecodePool(2, backend="native") as p:
        assert p.max_decode_bytes == 1 << 30 == p._native.max_decode_bytes
        assert p.decode_batch(bufs, out).tolist() == [0] * len(bufs), p.last_errors()
        native = p._native
        assert native.reserve(1 << 30) and not native.reserve((1 << 30) + 1)
        native.release(1 << 30)
    with pytest.raises(ValueError, match="max_decode_bytes"):
        decode.DecodePool(1, max_decode_bytes=0)


@native_only
def test_transcode_refuses_a_progressive_jpeg_over_the_budget() -> None:
    big = encode(1024, 1024, progressive=True)  # 4:2:0: 24,576 blocks, 3 MB of coefficients
    with decode.DecodePool(1, backend="native", max_decode_bytes=2 * MIB) as p:
        encoder = JpegEncoder(p)
        status, out = encoder.transcode_jpeg([big, encode(64, 64)], np.array([[64, 64]] * 2))
        assert status.tolist() == [decode.STATUS_TOO_LARGE, 0] and out[0] is None
        assert "1024x1024 progressive JPEG needs about" in p.last_errors()[0]
        out = np.zeros((1, 32, 32, 3), np.uint8)
        assert p.decode_batch([big], out).tolist() == [decode.STATUS_TOO_LARGE]
        assert "over the budget of 2 MiB" in p.last_errors()[0]


def _hold_first_pillow_decode(monkeypatch, hold: threading.Event, timeout: float):
    """Makes the Pillow decode of image 0 wait (up to timeout) for `hold`; returns the events
    set when it starts and the time it wrote its slot."""
    started, wrote = threading.Event(), []
    real = decode.batch.DecodeJob.decode_pil

    def slow(self, i, *args):
        if i == 0:
            started.set()
            hold.wait(timeout)
        result = real(self, i, *args)
        if i == 0:
            wrote.append(time.monotonic())
        return result

    monkeypatch.setattr(decode.batch.DecodeJob, "decode_pil", slow)
    return started, wrote


@pytest.mark.parametrize("backend_", backends())
def test_a_batch_that_close_interrupts_writes_nothing_after_it_raises(
    monkeypatch, backend_: str
) -> None:
    """close() from another thread between two hand-offs to the Pillow threads: the batch
    raised ValueError while image 0, already handed off, was still decoding into `out`,
    which the caller may be reusing by then. Now it raises once image 0 is done."""
    raised = threading.Event()
    started, wrote = _hold_first_pillow_decode(monkeypatch, raised, timeout=1.0)
    pool = decode.DecodePool(2, backend=backend_)
    executor, closer, calls = pool._executor, [], []
    real_submit = executor.submit

    def submit(fn, *args):
        calls.append(fn)
        if len(calls) == 2:  # the second hand-off: once image 0 decodes, close() first
            assert started.wait(5)
            closer.append(threading.Thread(target=pool.close))
            closer[0].start()
            while not executor._shutdown:
                time.sleep(0.001)
        return real_submit(fn, *args)

    monkeypatch.setattr(executor, "submit", submit)
    pngs = [encode(64, 48, fmt="PNG", seed=s) for s in range(3)]
    out = np.zeros((3, 16, 16, 3), np.uint8)
    with pytest.raises(ValueError, match="DecodePool is closed"):
        pool.decode_batch(pngs, out)
    raised_at = time.monotonic()
    raised.set()
    closer[0].join(10)
    assert wrote and wrote[0] <= raised_at, "image 0 was written after decode_batch raised"


@pytest.mark.parametrize("backend_", backends())
def test_a_second_close_returns_once_the_threads_are_joined(monkeypatch, backend_: str) -> None:
    """close() while another thread's close() waits for a running Pillow decode returned at
    once (the finalizer had already run): its caller went on with threads still running."""
    go = threading.Event()
    started, wrote = _hold_first_pillow_decode(monkeypatch, go, timeout=5.0)
    pool = decode.DecodePool(2, backend=backend_)
    pngs = [encode(64, 48, fmt="PNG", seed=s) for s in range(2)]
    out = np.zeros((2, 16, 16, 3), np.uint8)
    batch = threading.Thread(target=lambda: pool.decode_batch(pngs, out))
    batch.start()
    assert started.wait(5)
    first = threading.Thread(target=pool.close)
    first.start()
    while not pool._executor._shutdown:  # the first close() waits for image 0
        time.sleep(0.001)
    timer = threading.Timer(0.3, go.set)
    timer.start()
    pool.close()
    assert wrote, "close() returned while a decode thread was still running"
    assert not [t for t in pool._executor._threads if t.is_alive()]
    first.join(10)
    batch.join(10)
    timer.join()
