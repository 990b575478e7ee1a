"""A crop decode is the whole decode, cropped: over every sampling factor, DCT scale, crop,
flip, progressive JPEGs complete and cut at scan boundaries, restart-marked ones, with
several decode threads.

Two properties, both exact (the same decoded pixels through the same resampler):

- the crop-aware decode (only the rows, iMCU columns and restart segments the crop needs;
  three threads) equals the decode of the whole image at the same DCT scale followed by
  the same crop and resample (``roi_decode=False``);
- at scale 1 and the crop's own size, the crop decode equals the whole image's pixels at
  the crop (mirrored when flipped).

The default run draws a few crops per source; ``slow`` many.
"""

from __future__ import annotations

import numpy as np
import pytest

from recio import decode
from recio.im2rec import JpegEncoder

from ..conftest import require_native
from .sampling_corpus import HEIGHT, WIDTH, files, scan_cuts


@pytest.fixture(scope="module")
def pools():
    require_native()
    with (
        decode.DecodePool(3, backend="native", dct_scaling="all") as crop,
        decode.DecodePool(1, backend="native", dct_scaling="all", roi_decode=False) as whole,
    ):
        yield crop, whole


@pytest.fixture(scope="module")
def sources(pools) -> dict[str, bytes]:
    """Every corpus file; each progressive one cut after every scan (those that decode with
    status 0); each baseline one with a restart marker every MCU (recio optimize's)."""
    crop, whole = pools
    out = dict(files())
    encoder = JpegEncoder(crop)
    for name, data in files().items():
        if "progressive" in name:
            cuts = scan_cuts(data)
            ok = decode_all(whole, cuts, np.array([[0, 0, WIDTH, HEIGHT]] * len(cuts), np.int32))
            out.update({f"{name}-scans{k + 1}": c for k, c in enumerate(cuts) if ok[k] == 0})
        else:
            status, (marked,) = encoder.optimize_jpeg([data], restart=1)
            assert status[0] == 0, (name, encoder.last_errors())
            out[f"{name}-restart"] = marked
    return out


def decode_all(pool, datas, boxes, flips=None, size=(WIDTH, HEIGHT)):
    out = np.zeros((len(datas), size[1], size[0], 3), np.uint8)
    return pool.decode_batch(datas, out, crops=boxes, flips=flips)


def draw_crops(rng: np.random.Generator, n: int) -> np.ndarray:
    """n crops: a random corner (every MCU offset alike) and extent, some to the edges."""
    x = rng.integers(0, WIDTH, n)
    y = rng.integers(0, HEIGHT, n)
    w = rng.integers(1, WIDTH - x + 1)
    h = rng.integers(1, HEIGHT - y + 1)
    edge = rng.random(n) < 0.3  # reaching the right and bottom edges
    w = np.where(edge, WIDTH - x, w)
    h = np.where(edge, HEIGHT - y, h)
    return np.stack([x, y, w, h], 1).astype(np.int32)


def check_matches_whole(pools, sources, crops_per_source: int, seed: int) -> None:
    crop, whole = pools
    rng = np.random.default_rng(seed)
    for name, data in sources.items():
        boxes = draw_crops(rng, crops_per_source)
        flips = rng.integers(0, 2, len(boxes)).astype(np.uint8)
        for box, flip in zip(boxes, flips, strict=True):
            # an output from 1/8 of the crop to its size: every DCT scale gets picked
            ow = int(rng.integers(max(1, box[2] // 8), box[2] + 1))
            oh = int(rng.integers(max(1, box[3] // 8), box[3] + 1))
            want = np.zeros((1, oh, ow, 3), np.uint8)
            got = np.ones((3, oh, ow, 3), np.uint8)  # three threads, the same crop
            assert whole.decode_batch([data], want, crops=box[None], flips=flip[None])[0] == 0
            status = crop.decode_batch(
                [data] * 3, got, crops=np.repeat(box[None], 3, 0), flips=np.repeat(flip, 3)
            )
            assert not status.any(), (name, crop.last_errors())
            for k in range(3):
                assert np.array_equal(got[k], want[0]), (name, box.tolist(), flip, (ow, oh))


def check_scale_one_is_the_whole_image(pools, sources, crops_per_source: int, seed: int):
    crop, whole = pools
    rng = np.random.default_rng(seed)
    for name, data in sources.items():
        full = np.zeros((1, HEIGHT, WIDTH, 3), np.uint8)
        assert whole.decode_batch([data], full)[0] == 0
        for box in draw_crops(rng, crops_per_source):
            x, y, w, h = (int(v) for v in box)
            for flip in (0, 1):
                got = np.zeros((1, h, w, 3), np.uint8)
                assert crop.decode_batch([data], got, crops=box[None], flips=[flip])[0] == 0
                want = full[0, y : y + h, x : x + w]
                if flip:
                    want = want[:, ::-1]
                assert np.array_equal(got[0], want), (name, box.tolist(), flip)


def test_crop_decode_is_the_whole_decode_cropped(pools, sources) -> None:
    check_matches_whole(pools, sources, crops_per_source=3, seed=1)


def test_at_scale_one_a_crop_is_the_whole_images_pixels(pools, sources) -> None:
    check_scale_one_is_the_whole_image(pools, sources, crops_per_source=2, seed=2)


@pytest.mark.slow
def test_crop_decode_is_the_whole_decode_cropped_many(pools, sources) -> None:
    check_matches_whole(pools, sources, crops_per_source=30, seed=11)
    check_scale_one_is_the_whole_image(pools, sources, crops_per_source=15, seed=12)
