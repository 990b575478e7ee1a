"""The DALI tests' data: small .rec files, and the DALI stage beside ImageRecordIter."""

import pytest

from recio import dali
from recio.pipeline.iterator import ImageRecordIter

from ..pipeline.test_iterator import make_rec


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
