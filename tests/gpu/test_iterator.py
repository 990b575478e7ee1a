"""recio.gpu.ImageRecordIter on the CPU device against recio's CPU ImageRecordIter.

Tolerance (docs/gpu.md): the two decode the same JPEG with libjpeg-turbo, but recio's CPU
decoder shrinks by DCT scaling where it can and resamples in 8-bit fixed point, while
recio.gpu decodes at full size and resamples in float (antialiased bilinear, rounded to
whole levels). Measured on 200-500 px images to 224: at most 1 level of 255 apart, 0.15 on
average. Where the crop is many times the output (120-360 px noise-textured samples to 32 px,
decoded at 1/4 or 1/8 scale by recio's CPU decoder): 1.0 on average, 14 at the 99th
percentile, 100 at most (single pixels of noise).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from recio.augment.draws import draw_keyed
from recio.errors import DecodeError
from recio.gpu import ImageRecordIter
from recio.pipeline.iterator import ImageRecordIter as CpuIter

from .conftest import make_images, with_markers, write_rec

SMALL = dict(data_shape=(3, 32, 32), batch_size=8)


def pair(rec, **kw):
    args = {**SMALL, **kw}
    return ImageRecordIter(rec, device="cpu", **args), CpuIter(rec, preprocess_threads=1, **args)


def test_windows_and_flips_are_the_cpu_iterators(marked_rec):
    """The windows are the CPU iterator's draws (``draw_keyed``, the reference of draw.c)
    for each record's key and the image size Pillow reads."""
    it = ImageRecordIter(marked_rec, device="cpu", random_resized_crop=True, rand_mirror=True,
                         shuffle=True, seed=5, **SMALL)  # fmt: skip
    with it:
        for step in range(len(it)):
            images, _, meta, windows, flips = it.source().batch(0, step)[:5]
            sizes = np.array([Image.open(io.BytesIO(bytes(b))).size for b in images])
            want = draw_keyed(it.config.crop, sizes, it.config.draw_seed, 0, meta[:, 8])
            assert np.array_equal(windows, want[0]) and np.array_equal(flips, want[1])


@pytest.mark.parametrize("kw", [dict(rand_crop=True), dict(rand_crop=True, rand_mirror=True)])
def test_crops_the_output_size_are_the_cpu_iterators_pixels(marked_rec, kw):
    """A window the output's size needs no resampling: the same decoder, the same pixels."""
    gpu, cpu = pair(marked_rec, shuffle=True, seed=2, **kw)
    with gpu, cpu:
        for a, b in zip(gpu, cpu, strict=True):
            assert np.array_equal(a.index, b.index) and np.array_equal(a.label, b.label)
            assert np.array_equal(a.data.numpy(), b.data)


@pytest.mark.parametrize("kw", [dict(random_resized_crop=True, rand_mirror=True), dict(resize=256)])
def test_resized_pixels_are_within_the_stated_tolerance(tmp_path, kw):
    rec = write_rec(tmp_path, with_markers(make_images(32, sides=(200, 500))))
    gpu, cpu = pair(rec, **{**kw, "data_shape": (3, 224, 224), "batch_size": 16, "seed": 3})
    diffs = []
    with gpu, cpu:
        for a, b in zip(gpu, cpu, strict=True):
            assert np.array_equal(a.index, b.index)
            diffs.append(np.abs(a.data.numpy() - b.data))
    diff = np.concatenate(diffs)
    assert diff.max() <= 1 and diff.mean() < 0.25


def test_small_images_within_the_stated_tolerance(plain_rec):
    gpu, cpu = pair(plain_rec, random_resized_crop=True, rand_mirror=True, seed=1)
    with gpu, cpu:
        diff = np.concatenate(
            [np.abs(a.data.numpy() - b.data) for a, b in zip(gpu, cpu, strict=True)]
        )
    assert diff.mean() < 2 and np.percentile(diff, 99) <= 20


def test_cut_and_whole_give_the_same_batches(marked_rec):
    kw = dict(random_resized_crop=True, rand_mirror=True, seed=4, mean_r=120, std_g=50, **SMALL)
    cut = ImageRecordIter(marked_rec, device="cpu", cut=True, **kw)
    whole = ImageRecordIter(marked_rec, device="cpu", cut=False, **kw)
    with cut, whole:
        for a, b in zip(cut, whole, strict=True):
            assert torch.equal(a.data, b.data)


def test_normalisation_layout_and_dtype_as_the_cpu_iterators(marked_rec):
    kw = dict(rand_crop=True, mean_r=123.7, mean_g=116.3, mean_b=103.5, std_r=58.4,
              std_g=57.1, std_b=57.4, scale=0.5, channel_order="BGR", layout="NHWC")  # fmt: skip
    gpu, cpu = pair(marked_rec, **kw)
    with gpu, cpu:
        a, b = next(gpu), next(cpu)
    assert a.data.shape == b.data.shape == (8, 32, 32, 3)
    np.testing.assert_allclose(a.data.numpy(), b.data, atol=1e-4)
    gpu, cpu = pair(marked_rec, rand_crop=True, dtype="float16")
    with gpu, cpu:
        a, b = next(gpu), next(cpu)
    assert a.data.dtype == torch.float16 and np.array_equal(a.data.numpy(), b.data)


def test_png_cmyk_and_grey_records_are_decoded_as_the_cpu_iterator_does(tmp_path):
    bodies = make_images(16, kinds=("jpeg", "png", "cmyk", "grey"))
    rec = write_rec(tmp_path, with_markers(bodies))
    gpu, cpu = pair(rec, rand_crop=True, rand_mirror=True)
    with gpu, cpu:
        for a, b in zip(gpu, cpu, strict=True):
            assert np.array_equal(a.data.numpy(), b.data)
        assert gpu.stats.decoded == cpu.stats.decoded == 16


@pytest.mark.parametrize("on_error", ["skip", "replace"])
def test_bad_records_are_handled_and_counted_as_the_cpu_iterator_does(tmp_path, on_error):
    bodies = make_images(20)
    for k in (3, 11):
        bodies[k] = bodies[k][: len(bodies[k]) // 3]  # truncated
    bodies[7] = b"not an image at all"
    rec = write_rec(tmp_path, with_markers(bodies))
    gpu, cpu = pair(rec, rand_crop=True, on_error=on_error)
    with gpu, cpu:
        for a, b in zip(gpu, cpu, strict=True):
            assert np.array_equal(a.index, b.index) and np.array_equal(a.label, b.label)
            assert np.array_equal(a.data.numpy(), b.data)
        assert (gpu.stats.skipped, gpu.stats.replaced) == (cpu.stats.skipped, cpu.stats.replaced)
        assert gpu.stats.skipped + gpu.stats.replaced == 3


def test_on_error_raise_names_the_record(tmp_path):
    bodies = make_images(8)
    bodies[5] = bodies[5][:200]
    rec = write_rec(tmp_path, bodies)
    with (
        ImageRecordIter(rec, device="cpu", on_error="raise", **SMALL) as it,
        pytest.raises(DecodeError, match="1005"),
    ):
        next(it)


def test_resume_mid_epoch_gives_the_remaining_batches(marked_rec):
    kw = dict(shuffle=True, seed=9, random_resized_crop=True, rand_mirror=True, **SMALL)
    with ImageRecordIter(marked_rec, device="cpu", **kw) as it:
        whole = [(b.index.copy(), b.data.clone()) for b in it]
    with ImageRecordIter(marked_rec, device="cpu", **kw) as it:
        next(it)
        state = it.state_dict()
    with CpuIter(marked_rec, **kw) as cpu:  # either iterator's state loads in the other
        next(cpu)
        assert cpu.state_dict() == state
    with ImageRecordIter(marked_rec, device="cpu", **kw) as it:
        it.load_state_dict(state)
        rest = [(b.index, b.data) for b in it]
    assert len(rest) == len(whole) - 1
    for (i, d), (j, e) in zip(rest, whole[1:], strict=True):
        assert np.array_equal(i, j) and torch.equal(d, e)


def test_ranks_and_elastic_resume_as_the_cpu_iterator(marked_rec):
    kw = dict(shuffle=True, seed=3, rand_crop=True, data_shape=(3, 32, 32), batch_size=4)
    for rank in range(2):
        gpu = ImageRecordIter(marked_rec, device="cpu", part_index=rank, num_parts=2, **kw)
        cpu = CpuIter(marked_rec, part_index=rank, num_parts=2, **kw)
        with gpu, cpu:
            assert [b.index.tolist() for b in gpu] == [b.index.tolist() for b in cpu]
    with ImageRecordIter(marked_rec, device="cpu", part_index=1, num_parts=2, **kw) as two:
        next(two)
        state = two.state_dict()
    one = ImageRecordIter(marked_rec, device="cpu", **kw)
    ref = CpuIter(marked_rec, **kw)
    with one, ref:  # saved on two ranks, resumed on one
        one.load_state_dict(state)
        ref.load_state_dict(state)
        assert [b.index.tolist() for b in one] == [b.index.tolist() for b in ref]


def test_refuses_what_it_does_not_do_and_a_missing_device(marked_rec):
    with pytest.raises(ValueError, match="brightness"):
        ImageRecordIter(marked_rec, device="cpu", brightness=0.2, **SMALL)
    with pytest.raises(ValueError, match="device"):
        ImageRecordIter(marked_rec, device="meta", **SMALL)
    with pytest.raises(ValueError, match="decoder"):
        ImageRecordIter(marked_rec, device="cpu", decoder="nvjpeg", **SMALL)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            ImageRecordIter(marked_rec, device="cuda", **SMALL)


@pytest.mark.gpu
def test_cuda_batches_match_the_cpu_device(marked_rec):
    kw = dict(random_resized_crop=True, rand_mirror=True, seed=2, **SMALL)
    gpu = ImageRecordIter(marked_rec, device="cuda", **kw)
    cpu = ImageRecordIter(marked_rec, device="cpu", decoder="pillow", **kw)
    with gpu, cpu:
        for a, b in zip(gpu, cpu, strict=True):
            assert a.data.is_cuda and np.array_equal(a.index, b.index)
            # nvJPEG's IDCT and upsampling differ from libjpeg-turbo's by a few levels
            assert (a.data.cpu() - b.data).abs().max() <= 12
