"""Crop windows and flips for a batch: inside the image, within the asked bounds, and fixed by
the batch's RNG alone (a resumed run draws the same)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from recio.augment import CropSpec, batch_rng, draw

SPECS = {
    "centre": CropSpec(32, 24),
    "centre after resize": CropSpec(32, 24, resize=40),
    "random position": CropSpec(32, 24, rand_crop=True),
    "random position after resize": CropSpec(32, 24, resize=40, rand_crop=True),
    "random resized": CropSpec(32, 24, random_resized_crop=True),
    "random resized, wide range": CropSpec(
        32, 24, random_resized_crop=True, min_area=0.01, min_aspect=0.2, max_aspect=5.0
    ),
}


def random_sizes(n: int, seed: int = 0) -> np.ndarray:
    """(w, h) of n images from 1x1 to 2000x2000, extreme aspect ratios included."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 2001, (n, 2))
    sizes[:8] = [[1, 1], [1, 2000], [2000, 1], [5, 7], [31, 23], [32, 24], [33, 25], [24, 32]]
    return sizes


@pytest.mark.parametrize("name", list(SPECS))
def test_windows_lie_inside_the_image(name):
    sizes = random_sizes(400)
    windows, flips = draw(SPECS[name], sizes, batch_rng(0, 0, 0, 0))
    assert windows.dtype == np.int32 and windows.shape == (400, 4)
    assert flips.dtype == bool and flips.shape == (400,)
    x, y, w, h = windows.T
    assert (w >= 1).all() and (h >= 1).all()
    assert (x >= 0).all() and (y >= 0).all()
    assert (x + w <= sizes[:, 0]).all() and (y + h <= sizes[:, 1]).all()


def test_centre_crop_windows():
    sizes = np.array([[100, 80], [20, 10]])
    windows, _ = draw(CropSpec(32, 32), sizes, batch_rng(0, 0, 0, 0))
    # the output size in the centre; an image smaller than the output: its largest square
    assert windows.tolist() == [[34, 24, 32, 32], [5, 0, 10, 10]]
    windows, _ = draw(CropSpec(32, 32, resize=40), sizes[:1], batch_rng(0, 0, 0, 0))
    # shorter side 80 -> 40: a 32-pixel output covers 64 source pixels
    assert windows.tolist() == [[18, 8, 64, 64]]


@pytest.mark.parametrize("name", list(SPECS))
def test_the_number_of_draws_does_not_depend_on_the_sizes(name):
    spec = dataclasses.replace(SPECS[name], rand_mirror=True)
    a, b = batch_rng(3, 1, 4, 0), batch_rng(3, 1, 4, 0)
    sizes_a, sizes_b = random_sizes(64, seed=1), random_sizes(64, seed=2)
    windows_a, flips_a = draw(spec, sizes_a, a)
    windows_b, flips_b = draw(spec, sizes_b, b)
    assert a.bit_generator.state == b.bit_generator.state  # the same draws, whatever the sizes
    np.testing.assert_array_equal(flips_a, flips_b)
    # and each image's window depends on its own size only
    sizes_c = sizes_a.copy()
    sizes_c[10] = [7, 1999]
    windows_c, _ = draw(spec, sizes_c, batch_rng(3, 1, 4, 0))
    others = np.arange(64) != 10
    np.testing.assert_array_equal(windows_c[others], windows_a[others])
    assert not np.array_equal(windows_a, windows_b)


def test_random_resized_crop_area_and_aspect_within_bounds():
    # max_area 0.5 on a 1000x800 image: every first attempt fits, no fallback
    spec = CropSpec(32, 32, random_resized_crop=True, min_area=0.1, max_area=0.5)
    sizes = np.tile([1000, 800], (500, 1))
    windows, _ = draw(spec, sizes, batch_rng(7, 0, 0, 0))
    w, h = windows[:, 2].astype(float), windows[:, 3].astype(float)
    area = w * h / (1000 * 800)
    aspect = w / h
    assert area.min() >= 0.1 * 0.98 and area.max() <= 0.5 * 1.02
    assert aspect.min() >= 0.75 * 0.99 and aspect.max() <= 4 / 3 * 1.01
    # the whole range is drawn from, not one corner of it
    assert area.min() < 0.15 and area.max() > 0.45
    assert aspect.min() < 0.8 and aspect.max() > 1.25
    assert len(set(windows[:, 0].tolist())) > 100 and len(set(windows[:, 1].tolist())) > 100


def test_random_resized_crop_falls_back_to_the_centre_with_the_aspect_clamped():
    # 1000x10: no window of area >= 8 % and aspect <= 4/3 fits; the centre, 13x10
    spec = CropSpec(32, 32, random_resized_crop=True)
    windows, _ = draw(spec, np.array([[1000, 10], [10, 1000]]), batch_rng(0, 0, 0, 0))
    assert windows.tolist() == [[493, 0, 13, 10], [0, 493, 10, 13]]


def test_flips_only_with_rand_mirror():
    sizes = random_sizes(200)
    _, flips = draw(CropSpec(32, 24, rand_crop=True), sizes, batch_rng(0, 0, 0, 0))
    assert not flips.any()
    _, flips = draw(CropSpec(32, 24, rand_mirror=True), sizes, batch_rng(0, 0, 0, 0))
    assert 50 < flips.sum() < 150  # about half


def test_draws_are_fixed_by_seed_epoch_step_and_part():
    spec = CropSpec(32, 24, random_resized_crop=True, rand_mirror=True)
    sizes = random_sizes(64)
    windows, flips = draw(spec, sizes, batch_rng(5, 2, 9, 1))
    again_windows, again_flips = draw(spec, sizes, batch_rng(5, 2, 9, 1))
    np.testing.assert_array_equal(windows, again_windows)
    np.testing.assert_array_equal(flips, again_flips)
    for other in [(6, 2, 9, 1), (5, 3, 9, 1), (5, 2, 10, 1), (5, 2, 9, 0)]:
        other_windows, _ = draw(spec, sizes, batch_rng(*other))
        assert not np.array_equal(windows, other_windows), other


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"out_height": 0}, "output size"),
        ({"min_area": 0.0}, "min_random_area"),
        ({"min_area": 0.6, "max_area": 0.5}, "max_random_area=0.5"),
        ({"min_aspect": 2.0, "max_aspect": 1.0}, "min_aspect_ratio=2.0"),
    ],
)
def test_bad_specs_are_refused(kw, words):
    with pytest.raises(ValueError, match=words):
        CropSpec(**{"out_height": 32, "out_width": 32, **kw})
