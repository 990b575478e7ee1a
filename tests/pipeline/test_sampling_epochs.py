"""Identical epochs at 1, 2 and 3 decode threads over a corpus of every sampling factor
libjpeg accepts (4x2 luma included), progressive and restart-marked copies, greyscale and
CMYK: a batch's pixels depend on the records, the seed and the epoch, never on which thread
decoded what before."""

from __future__ import annotations

import numpy as np
import pytest

from recio.decode import DecodePool
from recio.im2rec import JpegEncoder
from recio.pipeline.iterator import ImageRecordIter
from recio.records.format import IRHeader
from recio.records.recordio import MXIndexedRecordIO, pack

from ..conftest import require_native
from ..decode.sampling_corpus import files


@pytest.fixture(scope="module")
def rec(tmp_path_factory) -> str:
    require_native()
    images = list(files().values())
    with DecodePool(1, backend="native") as pool:
        baseline = [data for name, data in files().items() if "baseline" in name]
        status, marked = JpegEncoder(pool).optimize_jpeg(baseline, restart=1)
        assert not np.any(status)
    images += marked
    path = tmp_path_factory.mktemp("sampling_epochs")
    rec, idx = str(path / "data.rec"), str(path / "data.idx")
    with MXIndexedRecordIO(idx, rec, "w") as writer:
        for key, data in enumerate(images):
            writer.write_idx(key, pack(IRHeader(0, float(key % 3), key, 0), data))
    return rec


def epochs(rec: str, threads: int) -> list[np.ndarray]:
    kw = dict(shuffle=True, seed=43, random_resized_crop=True, rand_mirror=True)
    with ImageRecordIter(rec, (3, 16, 16), 8, preprocess_threads=threads, **kw) as it:
        got = []
        for _ in range(2):
            got += [(b.data.copy(), b.index.copy()) for b in it]
            it.reset()
        return got


def test_epochs_are_identical_at_one_two_and_three_threads(rec) -> None:
    ref = epochs(rec, 1)
    assert len(ref) >= 2 * 6
    for threads in (2, 3):
        other = epochs(rec, threads)
        assert len(other) == len(ref)
        for (a, ia), (b, ib) in zip(ref, other, strict=True):
            np.testing.assert_array_equal(ia, ib)
            np.testing.assert_array_equal(a, b)
