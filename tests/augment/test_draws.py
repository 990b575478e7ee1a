"""Crop windows and flips: inside the image, within the asked bounds, and keyed per record:
a function of (seed, epoch, record) alone, the same from the native draws and the numpy
reference, bit for bit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from recio.augment import CropSpec, KeyedDraw, draw_keyed, draws

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


@pytest.fixture(params=["native", "numpy"])
def draw(request, monkeypatch):
    """draw(spec, sizes, records=None, seed=0, epoch=0) -> (windows, flips), either way."""
    if request.param == "native" and draws._native is None:
        pytest.fail("the extension is not built")
    if request.param == "numpy":
        monkeypatch.setattr(draws, "_native", None)

    def run(spec, sizes, records=None, seed=0, epoch=0):
        sizes = np.asarray(sizes)
        records = np.arange(len(sizes)) if records is None else records
        return KeyedDraw(spec, seed, epoch).windows(sizes, records)

    return run


@pytest.mark.parametrize("name", list(SPECS))
def test_windows_lie_inside_the_image(name, draw):
    sizes = random_sizes(400)
    windows, flips = draw(SPECS[name], sizes)
    assert windows.dtype == np.int32 and windows.shape == (400, 4)
    assert flips.dtype == bool and flips.shape == (400,)
    x, y, w, h = windows.T
    assert (w >= 1).all() and (h >= 1).all()
    assert (x >= 0).all() and (y >= 0).all()
    assert (x + w <= sizes[:, 0]).all() and (y + h <= sizes[:, 1]).all()


def test_centre_crop_windows(draw):
    sizes = np.array([[100, 80], [20, 10]])
    windows, _ = draw(CropSpec(32, 32), sizes)
    # the output size in the centre; an image smaller than the output: its largest square
    assert windows.tolist() == [[34, 24, 32, 32], [5, 0, 10, 10]]
    windows, _ = draw(CropSpec(32, 32, resize=40), sizes[:1])
    # shorter side 80 -> 40: a 32-pixel output covers 64 source pixels
    assert windows.tolist() == [[18, 8, 64, 64]]


@pytest.mark.parametrize("name", list(SPECS))
def test_a_records_draws_depend_on_its_own_size_and_key_only(name, draw):
    spec = dataclasses.replace(SPECS[name], rand_mirror=True)
    sizes = random_sizes(64, seed=1)
    records = np.arange(1000, 1064)
    windows, flips = draw(spec, sizes, records, seed=3, epoch=1)
    # any subset, in any order, in any batch: the same draws
    pick = np.array([40, 3, 17, 63, 0])
    sub_windows, sub_flips = draw(spec, sizes[pick], records[pick], seed=3, epoch=1)
    np.testing.assert_array_equal(sub_windows, windows[pick])
    np.testing.assert_array_equal(sub_flips, flips[pick])
    # another image's size changes nothing of the others
    sizes_c = sizes.copy()
    sizes_c[10] = [7, 1999]
    windows_c, flips_c = draw(spec, sizes_c, records, seed=3, epoch=1)
    others = np.arange(64) != 10
    np.testing.assert_array_equal(windows_c[others], windows[others])
    np.testing.assert_array_equal(flips_c, flips)  # a flip never depends on the size


def test_random_resized_crop_area_and_aspect_within_bounds(draw):
    # max_area 0.5 on a 1000x800 image: every first attempt fits, no fallback
    spec = CropSpec(32, 32, random_resized_crop=True, min_area=0.1, max_area=0.5)
    sizes = np.tile([1000, 800], (500, 1))
    windows, _ = draw(spec, sizes, seed=7)
    w, h = windows[:, 2].astype(float), windows[:, 3].astype(float)
    area = w * h / (1000 * 800)
    aspect = w / h
    assert area.min() >= 0.1 * 0.98 and area.max() <= 0.5 * 1.02
    assert aspect.min() >= 0.75 * 0.99 and aspect.max() <= 4 / 3 * 1.01
    # the whole range is drawn from, not one corner of it
    assert area.min() < 0.15 and area.max() > 0.45
    assert aspect.min() < 0.8 and aspect.max() > 1.25
    assert len(set(windows[:, 0].tolist())) > 100 and len(set(windows[:, 1].tolist())) > 100


def test_random_resized_crop_falls_back_to_the_centre_with_the_aspect_clamped(draw):
    # 1000x10: no window of area >= 8 % and aspect <= 4/3 fits; the centre, 13x10
    spec = CropSpec(32, 32, random_resized_crop=True)
    windows, _ = draw(spec, np.array([[1000, 10], [10, 1000]]))
    assert windows.tolist() == [[493, 0, 13, 10], [0, 493, 10, 13]]


def test_flips_only_with_rand_mirror(draw):
    sizes = random_sizes(200)
    _, flips = draw(CropSpec(32, 24, rand_crop=True), sizes)
    assert not flips.any()
    _, flips = draw(CropSpec(32, 24, rand_mirror=True), sizes)
    assert 50 < flips.sum() < 150  # about half


def test_draws_are_fixed_by_seed_epoch_and_record(draw):
    spec = CropSpec(32, 24, random_resized_crop=True, rand_mirror=True)
    sizes = random_sizes(64)
    records = np.arange(64)
    windows, flips = draw(spec, sizes, records, seed=5, epoch=2)
    again_windows, again_flips = draw(spec, sizes, records, seed=5, epoch=2)
    np.testing.assert_array_equal(windows, again_windows)
    np.testing.assert_array_equal(flips, again_flips)
    for seed, epoch, shift in [(6, 2, 0), (5, 3, 0), (5, 2, 64), (-5, 2, 0)]:
        other_windows, _ = draw(spec, sizes, records + shift, seed=seed, epoch=epoch)
        assert not np.array_equal(windows, other_windows), (seed, epoch, shift)


@pytest.mark.parametrize("name", list(SPECS))
def test_native_draws_are_the_numpy_reference_bit_for_bit(name):
    """The decode threads' draws (C) and draw_keyed (numpy) agree on every window and flip."""
    if draws._native is None:
        pytest.fail("the extension is not built")
    rng = np.random.default_rng(11)
    spec = dataclasses.replace(SPECS[name], rand_mirror=True)
    n = 20_000
    sizes = np.concatenate([random_sizes(n - 200, seed=4), rng.integers(1, 6, (200, 2))])
    records = rng.integers(0, 2**62, n)
    for seed, epoch in [(0, 0), (7, 3), (-1, 12345), (2**64 - 1, 2**40)]:
        keyed = KeyedDraw(spec, seed, epoch)
        assert keyed.epoch_key == draws._native.epoch_key(seed % 2**64, epoch)
        windows, flips = keyed.windows(sizes, records)
        ref_windows, ref_flips = draw_keyed(spec, sizes, seed, epoch, records)
        np.testing.assert_array_equal(windows, ref_windows)
        np.testing.assert_array_equal(flips, ref_flips)


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


def _reordered(cls: type) -> type:
    """A copy of the frozen dataclass ``cls`` with its fields in reverse order, same methods."""
    fields = list(reversed(dataclasses.fields(cls)))
    assert [f.name for f in fields] != [f.name for f in dataclasses.fields(cls)]
    namespace = {k: v for k, v in vars(cls).items() if not k.startswith("__")}
    namespace["__post_init__"] = cls.__post_init__
    specs = [(f.name, f.type, dataclasses.field(default=f.default)) for f in fields]
    return dataclasses.make_dataclass(cls.__name__, specs, frozen=True, namespace=namespace)


def _copy_as(cls: type, spec: object) -> object:
    return cls(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)})


@pytest.mark.needs_native
def test_the_draw_reaches_the_decoder_by_name_not_by_field_order() -> None:
    """NOTE [named parameters] in native/bind_options.c: a ColourSpec and a GeometrySpec with their
    fields in another order draw the same colours and windows, and decode the same pixels."""
    from recio.augment import ColourSpec, GeometrySpec
    from recio.decode import DecodePool

    from ..images import encode

    colour = ColourSpec(
        random_h=10, random_s=20, random_l=5, brightness=0.3, contrast=0.2, saturation=0.4,
        pca_noise=0.1, max_random_contrast=0.3, max_random_illumination=12.0,
    )  # fmt: skip
    geometry = GeometrySpec(
        max_rotate_angle=20, max_shear_ratio=0.1, pad=2, fill_value=17, inter_method=2
    )
    spec = CropSpec(24, 32, rand_mirror=True)
    want = KeyedDraw(spec, 7, 2, colour, geometry)
    got = KeyedDraw(
        spec, 7, 2, _copy_as(_reordered(ColourSpec), colour),
        _copy_as(_reordered(GeometrySpec), geometry),
    )  # fmt: skip
    records = np.arange(16, dtype=np.int64)
    np.testing.assert_array_equal(got.colours(records).values(), want.colours(records).values())
    sizes = random_sizes(16)
    for a, b in zip(got.windows(sizes, records), want.windows(sizes, records), strict=True):
        np.testing.assert_array_equal(a, b)
    images = [encode(40 + 8 * k, 30 + 4 * k, seed=k) for k in range(6)]
    outs = []
    with DecodePool(2, backend="native") as pool:
        for draw in (want, got, KeyedDraw(spec, 7, 2)):
            out = np.zeros((6, 3, 24, 32), np.float32)
            status = pool.decode_batch(
                images, out, draw=draw, records=records[:6], layout="NCHW",
                mean=(120, 110, 100), std=(60, 60, 60),
            )  # fmt: skip
            assert status.tolist() == [0] * 6
            outs.append(out)
    np.testing.assert_array_equal(outs[1], outs[0])
    assert not np.array_equal(outs[2], outs[0])  # the colour and geometry do change them


@pytest.mark.needs_native
def test_the_native_draw_takes_every_field_by_name_and_no_other() -> None:
    """recio._native.Draw: keywords only; a missing or unknown name is a TypeError."""
    keyed = KeyedDraw(CropSpec(24, 32), 1, 0)
    keyed.native()  # the names KeyedDraw gives are the ones C reads
    named = dict(
        out_w=32, out_h=24, resize=-1, rand_crop=0, rrc=0, rand_mirror=0, min_area=0.08,
        max_area=1.0, min_aspect=0.75, max_aspect=4 / 3, epoch_key=keyed.epoch_key, mirror=0,
        colour=keyed.colour.native(),
    )  # fmt: skip
    draws._native.Draw(**named)
    with pytest.raises(TypeError, match="keyword arguments only"):
        draws._native.Draw(*named.values())
    with pytest.raises(TypeError, match="out_w"):
        draws._native.Draw(**{k: v for k, v in named.items() if k != "out_w"})
    with pytest.raises(TypeError, match="hue"):
        draws._native.Draw(**named, hue=3)
    with pytest.raises(TypeError, match="colour"):
        draws._native.Draw(**{**named, "colour": {**keyed.colour.native(), "hue": 1}})
    with pytest.raises(TypeError, match="pca_noise"):
        colour = {k: v for k, v in keyed.colour.native().items() if k != "pca_noise"}
        draws._native.Draw(**{**named, "colour": colour})
