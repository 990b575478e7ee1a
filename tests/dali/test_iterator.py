"""DALI stage: pixels against ImageRecordIter, record ids per rank and after resume, bad images."""

import os
import subprocess
import sys

import numpy as np
import pytest

from recio import dali, decode
from recio.dali import bench as dali_bench
from recio.decode import jpegcheck
from recio.iterator import ImageRecordIter

from .._paths import REPO
from ..test_iterator import make_rec

try:
    import nvidia.dali  # noqa: F401
except ImportError:
    HAVE_DALI = False
else:
    HAVE_DALI = True


_skip_without_dali = pytest.mark.skipif(not HAVE_DALI, reason="needs nvidia-dali (the dali extra)")


def needs_dali(test):
    """Marks a test ``dali`` and skips it where nvidia-dali is not installed (every test
    here but the JPEG structure check, which is recio's own code)."""
    return pytest.mark.dali(_skip_without_dali(test))


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return make_rec(tmp_path_factory.mktemp("dali"), n=37)


@pytest.fixture(scope="module")
def bad_rec(tmp_path_factory):
    return make_rec(tmp_path_factory.mktemp("dali_bad"), n=20, corrupt=(3, 11))


def pair(rec, dali_kw=None, **kw):
    """The DALI stage (CPU pipeline) and ImageRecordIter with the same arguments."""
    args = dict(data_shape=(3, 32, 32), batch_size=8)
    args.update(kw)
    ref = ImageRecordIter(rec, preprocess_threads=2, **args)
    return dali.DALIImageRecordIter(rec, device="cpu", **args, **(dali_kw or {})), ref


@needs_dali
def test_pixels_match_cpu_iterator_for_the_same_crops(rec):
    # Same windows and flips (recio draws them for both); DALI's antialiased linear resize
    # vs recio's Pillow-exact bilinear: a few levels apart on average.
    kw = dict(random_resized_crop=True, rand_mirror=True, shuffle=True, seed=5)
    kw.update(mean_r=120, mean_g=110, mean_b=100, std_r=60, std_g=60, std_b=60)
    it, ref = pair(rec, **kw)
    for a, b in zip(it, ref, strict=True):
        assert a.data.shape == b.data.shape == (8, 3, 32, 32)
        diff = np.abs(a.data - b.data) * 60  # back to 0..255 levels
        assert diff.mean() < 6, diff.mean()
        assert np.percentile(diff, 99) < 45
        np.testing.assert_array_equal(a.index, b.index)
        np.testing.assert_array_equal(a.label, b.label)


@needs_dali
def test_plain_crop_without_resize_is_nearly_exact(rec):
    it, ref = pair(rec, data_shape=(3, 24, 24), layout="NHWC", dtype="uint8")
    a, b = next(iter(it)), next(iter(ref))
    assert a.data.shape == (8, 24, 24, 3) and a.data.dtype == np.uint8
    diff = np.abs(a.data.astype(int) - b.data)
    assert diff.mean() < 1.5 and diff.max() <= 16  # the two libjpeg builds' IDCT/upsampling


@needs_dali
@pytest.mark.parametrize("last_batch", ["pad", "discard", "rollover"])
def test_record_ids_per_rank_match_iterator(rec, last_batch):
    for part in range(3):
        kw = dict(shuffle=True, seed=7, part_index=part, num_parts=3, last_batch=last_batch)
        it, ref = pair(rec, **kw)
        for _ in range(2):  # two epochs: the shuffle changes, the agreement must not
            got = [(b.index.tolist(), b.pad, b.epoch, b.step) for b in it]
            want = [(b.index.tolist(), b.pad, b.epoch, b.step) for b in ref]
            assert got == want and got


@needs_dali
def test_resume_gives_the_same_ids_and_pixels(rec):
    kw = dict(shuffle=True, seed=2, random_resized_crop=True, rand_mirror=True)
    it, _ = pair(rec, **kw)
    full = [(b.index.copy(), b.data.copy()) for b in it]
    it2, _ = pair(rec, **kw)
    batches = iter(it2)
    next(batches), next(batches)
    state = it2.state_dict()
    assert state["epoch"] == 0 and state["step"] == 2
    it3, ref = pair(rec, **kw)
    it3.load_state_dict(state)
    rest = list(it3)
    assert len(rest) == len(full) - 2
    for (ids, data), b in zip(full[2:], rest, strict=True):
        np.testing.assert_array_equal(ids, b.index)
        np.testing.assert_array_equal(data, b.data)
    ref.load_state_dict(state)
    assert [b.index.tolist() for b in ref] == [ids.tolist() for ids, _ in full[2:]]
    # and the next epoch continues as the CPU iterator's does
    assert [b.index.tolist() for b in it3] == [b.index.tolist() for b in ref]


@needs_dali
def test_corrupt_records_are_skipped_and_counted_like_the_iterator(bad_rec):
    it, ref = pair(bad_rec, batch_size=5)
    got = [b.index.tolist() for b in it]
    want = [b.index.tolist() for b in ref]
    assert got == want
    assert set(it.stats.bad_records) == {1003, 1011} == set(ref.stats.bad_records)
    assert it.stats.skipped == ref.stats.skipped == 2


@needs_dali
def test_corrupt_records_replace_gives_zeros(bad_rec):
    it, _ = pair(bad_rec, batch_size=5, on_error="replace", mean_r=10, std_r=2)
    batch = next(iter(it))
    assert batch.index.tolist() == [1000, 1001, 1002, 1003, 1004]
    assert not batch.data[3].any() and batch.data[2].any()
    assert it.stats.replaced == 1


@needs_dali
def test_corrupt_records_raise(bad_rec):
    it, _ = pair(bad_rec, batch_size=5, on_error="raise")
    with pytest.raises(Exception, match="record id 1003"):
        next(iter(it))


def _jpeg(seed=0, progressive=False):
    from ..images import encode

    return encode(96, 64, seed=seed, progressive=progressive)


@pytest.mark.parametrize("progressive", [False, True])
def test_structure_check_catches_every_truncation(progressive):
    good = _jpeg(progressive=progressive)
    assert jpegcheck.jpeg_structure_problem(good) is None
    for cut in range(2, len(good) - 1, 7):
        assert jpegcheck.jpeg_structure_problem(good[:cut]), cut
    assert jpegcheck.jpeg_structure_problem(good[:-2])  # only the EOI marker missing


@needs_dali
def test_check_catches_what_stops_dali_on_bit_flips():
    """Every bit-flipped JPEG DALI's CPU decoder refuses must be refused before DALI sees it."""
    fn, types = dali.load_dali().fn, dali.load_dali().types
    good = _jpeg(seed=3)
    rng = np.random.default_rng(0)
    header_end = good.index(b"\xff\xda") + 14
    variants = []
    for _ in range(60):  # flips in the headers (tables, frame, scan) and in the data
        b = bytearray(good)
        pos = int(rng.integers(2, header_end if rng.random() < 0.7 else len(b)))
        b[pos] ^= 1 << int(rng.integers(0, 8))
        variants.append(bytes(b))
    current = [good]

    # Synchronous, no prefetch: each run() decodes exactly the variant just set.
    sync = dict(exec_async=False, exec_pipelined=False, prefetch_queue_depth=1)

    @dali.load_dali().pipeline_def(batch_size=1, num_threads=1, device_id=None, **sync)
    def one():
        data = fn.external_source(
            source=lambda: [np.frombuffer(current[0], np.uint8)], batch=True, dtype=types.UINT8
        )
        return fn.decoders.image(data, device="cpu")

    pool = decode.DecodePool(1)
    refused = 0
    pipe = one()
    pipe.build()
    for buf in variants:
        current[0] = buf
        try:
            pipe.run()
            continue
        except Exception:  # noqa: BLE001 - DALI's error: this variant must be caught by us
            pipe = one()
            pipe.build()
        refused += 1
        header_bad = pool.image_sizes([buf])[0, 0] <= 0
        assert header_bad or jpegcheck.image_problem(buf), buf.hex()
    assert refused >= 5  # the test exercised DALI's refusals


@needs_dali
def test_gpu_request_without_gpu_is_one_clear_message():
    if dali.gpu_count() > 0:
        pytest.skip("this machine has a GPU")
    with pytest.raises(dali.DeviceUnavailableError, match="device='cpu'") as info:
        dali.resolve_device("gpu")
    assert "libcuda" in str(info.value) and "pip install -e '.[dali]'" in str(info.value)
    assert dali.resolve_device("auto") == "cpu"


@needs_dali
def test_parallel_source_pickles_and_agrees(rec):
    it, ref = pair(rec, {"parallel": True, "py_num_workers": 1}, shuffle=True, seed=1)
    got = [b.index.tolist() for b in it]
    assert got == [b.index.tolist() for b in ref]


@needs_dali
def test_bench_and_gpu_check_dry_run(rec, tmp_path):
    res = dali_bench.bench_pipelines(rec, 8, (32, 32), 2, 0.2, rounds=1)
    assert set(res["images_per_s"]) == {"recio", "recio_windows", "dali_mxnet"}
    assert min(res["images_per_s"].values()) > 0
    out = subprocess.run(
        [sys.executable, "tools/dali_check.py", "--cpu", "--rec", rec, "--seconds", "0.2"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASS correctness" in out.stdout
