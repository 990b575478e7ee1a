"""Colour and MXNet's geometry together: the draws stay apart, the native and the Pillow
paths agree on the warped and coloured pixels, and the iterator runs them end to end,
resuming exactly; the DALI stage refuses the geometry by name."""

from __future__ import annotations

import numpy as np
import pytest

from recio import ImageRecordIter
from recio.augment import ColourSpec, CropSpec, KeyedDraw, draws
from recio.augment.geometry import GeometrySpec, plan
from recio.decode.pool import DecodePool
from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack
from tests.conftest import needs_dali
from tests.images import encode

needs_native = pytest.mark.needs_native

COLOUR = ColourSpec(brightness=0.4, contrast=0.4, saturation=0.4, pca_noise=0.1, random_h=10,
                    random_l=10, max_random_contrast=0.2, max_random_illumination=5)  # fmt: skip
GEOMETRY = GeometrySpec(max_rotate_angle=20, max_shear_ratio=0.1, max_random_scale=1.2,
                        min_random_scale=0.8, pad=2, fill_value=7)  # fmt: skip
SIZES = [(40, 30), (23, 37), (64, 48), (31, 31)]


def _jpegs() -> list[bytes]:
    return [encode(w, h, seed=i, quality=95) for i, (w, h) in enumerate(SIZES)]


def _decode(backend: str, bufs, draw: KeyedDraw, dtype=np.uint8, **kw) -> np.ndarray:
    s = draw.spec
    out = np.zeros((len(bufs), s.out_height, s.out_width, 3), dtype=dtype)
    with DecodePool(1, backend=backend, dct_scaling="off") as pool:
        status = pool.decode_batch(bufs, out, draw=draw, records=np.arange(len(bufs)) + 3, **kw)
    assert (status == 0).all(), pool.last_errors
    return out


def test_colour_and_geometry_keep_to_their_own_draws() -> None:
    """Turning either on changes neither the other's draws nor the crop's."""
    spec = CropSpec(24, 20, rand_crop=True, rand_mirror=True)
    records, sizes = np.arange(30), np.array(SIZES * 8)[:30]
    both = KeyedDraw(spec, 2, 1, COLOUR, GEOMETRY)
    warp_only = KeyedDraw(spec, 2, 1, geometry=GEOMETRY)
    colour_only = KeyedDraw(spec, 2, 1, COLOUR)
    np.testing.assert_array_equal(
        both.colours(records).values(), colour_only.colours(records).values()
    )
    for got, want in zip(both.windows(sizes, records), warp_only.windows(sizes, records),
                         strict=True):  # fmt: skip
        np.testing.assert_array_equal(got, want)
    for (w, h), r in zip(sizes.tolist(), records.tolist(), strict=True):
        assert plan(both, w, h, r) == plan(warp_only, w, h, r)


@needs_native
def test_native_draw_of_colour_and_geometry_is_the_reference(monkeypatch) -> None:
    """The combined draw tuple parses: native windows, flips and colours are numpy's."""
    spec = CropSpec(16, 16, rand_crop=True, rand_mirror=True, mirror=True)
    draw = KeyedDraw(spec, 9, 0, COLOUR, GEOMETRY)
    records, sizes = np.arange(20), np.array(SIZES * 5)
    native = draw.windows(sizes, records), draw.colours(records).values()
    assert native[0][1].all()  # mirror: every image flipped, as MXNet
    monkeypatch.setattr(draws, "_native", None)
    reference = draw.windows(sizes, records), draw.colours(records).values()
    np.testing.assert_array_equal(native[0][0], reference[0][0])
    np.testing.assert_array_equal(native[0][1], reference[0][1])
    np.testing.assert_array_equal(native[1], reference[1])


@needs_native
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_native_warped_colour_is_the_pillow_paths(layout: str) -> None:
    """Warp, mirror, colour, mean image and the per-image contrast/illumination: the native
    decode and the Pillow path give the same floats."""
    spec = CropSpec(20, 18, rand_crop=True, rand_mirror=True)
    draw = KeyedDraw(spec, 5, 2, COLOUR, GEOMETRY)
    bufs = _jpegs()
    mean_img = np.random.default_rng(0).uniform(0, 50, (3, 18, 20)).astype(np.float32)
    shape = (len(bufs), 3, 18, 20) if layout == "NCHW" else (len(bufs), 18, 20, 3)
    outs = []
    for backend in ("native", "python"):
        out = np.zeros(shape, np.float32)
        with DecodePool(2, backend=backend, dct_scaling="off") as pool:
            status = pool.decode_batch(bufs, out, draw=draw, records=np.arange(4) + 11,
                                       layout=layout, std=(2, 3, 4), scale=0.5,
                                       mean_img=mean_img, channel_order="BGR")  # fmt: skip
        assert (status == 0).all()
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    plain = np.zeros(shape, np.float32)
    with DecodePool(1, backend="native", dct_scaling="off") as pool:
        pool.decode_batch(bufs, plain, draw=KeyedDraw(spec, 5, 2, geometry=GEOMETRY),
                          records=np.arange(4) + 11, layout=layout, std=(2, 3, 4), scale=0.5,
                          mean_img=mean_img, channel_order="BGR")  # fmt: skip
    assert not np.array_equal(outs[0], plain)  # the colour did something


@pytest.mark.parametrize("backend", [pytest.param("native", marks=needs_native), "python"])
def test_mirror_flips_the_warped_and_coloured_output(backend: str) -> None:
    """MXNet's mirror after the warp, colour unchanged by it (per pixel, or the image's
    mean grey)."""
    colour = ColourSpec(brightness=0.4, contrast=0.4, saturation=0.4, random_h=10)
    bufs = _jpegs()
    plain = _decode(backend, bufs, KeyedDraw(CropSpec(16, 14), 1, 0, colour, GEOMETRY))
    spec = CropSpec(16, 14, mirror=True)
    mirrored = _decode(backend, bufs, KeyedDraw(spec, 1, 0, colour, GEOMETRY))
    np.testing.assert_array_equal(mirrored, plain[:, :, ::-1])


# ---- the iterator ----


@pytest.fixture(scope="module")
def rec(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("colour_geometry")
    rec, idx = str(path / "g.rec"), str(path / "g.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for key in range(16):
            body = encode(40 + key, 36, seed=key, quality=90)
            w.write_idx(key, pack(IRHeader(0, float(key % 3), 100 + key, 0), body))
    return rec


ARGS = dict(data_shape=(3, 24, 24), batch_size=4, preprocess_threads=2, dtype="float32")
WARP = dict(max_rotate_angle=10, max_shear_ratio=0.1, brightness=0.4)


def _all(rec: str, **kw) -> list[np.ndarray]:
    with ImageRecordIter(rec, **ARGS, **kw) as it:
        return [b.data.copy() for b in it]


def test_iterator_warps_and_colours_end_to_end(rec) -> None:
    plain = np.concatenate(_all(rec))
    warped = np.concatenate(_all(rec, **WARP))
    colour_only = np.concatenate(_all(rec, brightness=0.4))
    assert warped.shape == plain.shape
    assert not np.array_equal(warped, plain) and not np.array_equal(warped, colour_only)
    geometry_only = np.concatenate(_all(rec, max_rotate_angle=10, max_shear_ratio=0.1))
    assert not np.array_equal(geometry_only, plain)
    # brightness: one factor per image over the warped pixels (away from the clipping)
    ratio = warped / np.maximum(geometry_only, 1)
    inside = (geometry_only > 20) & (geometry_only < 150)
    for r, m in zip(ratio, inside, strict=True):
        assert np.ptp(r[m]) < 0.1


def test_iterator_resumes_exactly_with_colour_and_geometry(rec) -> None:
    kw = dict(shuffle=True, seed=3, rand_mirror=True, rand_crop=True, **WARP)
    whole = _all(rec, **kw)
    with ImageRecordIter(rec, **ARGS, **kw) as it:
        head = iter(it)
        next(head), next(head)
        state = it.state_dict()
    with ImageRecordIter(rec, **ARGS, **kw) as it:
        it.load_state_dict(state)
        rest = [b.data.copy() for b in it]
    assert len(rest) == len(whole) - 2
    assert all(np.array_equal(a, b) for a, b in zip(rest, whole[2:], strict=True))


def test_local_and_remote_paths_agree_with_every_augmentation(rec, memfs, tmp_path) -> None:
    """A local file's batches (queued on the pool with their constants made once) and a
    remote one's (the general path) give the same pixels: the per-job constants (mean
    image, random contrast/illumination gain, colour, warp) reach both."""
    import fsspec

    mean = (np.arange(3 * 24 * 24, dtype=np.float32).reshape(3, 24, 24) % 50) + 60
    np.save(tmp_path / "mean.npy", mean)
    url = "memory://augment/data.rec"
    fs = fsspec.filesystem("memory")
    fs.put_file(rec, url)
    fs.put_file(rec[:-4] + ".idx", url[:-4] + ".idx")
    kw = dict(
        shuffle=True, seed=5, rand_mirror=True, mean_img=str(tmp_path / "mean.npy"), scale=0.5,
        max_random_contrast=0.3, max_random_illumination=10, pca_noise=0.1, **WARP,
    )  # fmt: skip
    local, remote = _all(rec, **kw), _all(url, **kw)
    assert len(local) == len(remote) == 4
    for a, b in zip(local, remote, strict=True):
        np.testing.assert_array_equal(a, b)
    # and the mean image and the gain did change the pixels
    plain = _all(rec, shuffle=True, seed=5, rand_mirror=True, **WARP)
    assert not np.allclose(plain[0], local[0])


def test_iterator_refuses_pad_with_random_resized_crop(rec) -> None:
    with pytest.raises(ValueError, match="pad=2 does not combine with random_resized_crop"):
        ImageRecordIter(rec, **ARGS, pad=2, random_resized_crop=True)


@needs_dali
def test_dali_stage_refuses_the_geometry_by_name(rec) -> None:
    from recio import dali

    with pytest.raises(ValueError, match="not supported by the DALI stage yet: max_rotate_angle"):
        dali.DALIImageRecordIter(rec, device="cpu", **ARGS, max_rotate_angle=10)


def test_an_image_list_with_a_mixture_is_refused(tmp_path) -> None:
    from recio.pipeline.config import IterConfig
    from recio.sampling.mixing import Source

    with pytest.raises(TypeError, match="path_imglist does not combine with a Mixture"):
        IterConfig([Source("a.rec"), Source("b.rec")], (3, 8, 8), 2, path_imglist="x.lst")
