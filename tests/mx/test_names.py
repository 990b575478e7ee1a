"""recio.mx's names: MXNet's where InsightFace uses them, a clear error for the rest."""

import numpy as np
import pytest

import recio.mx as mx
from recio.mx import UnsupportedMXNetName
from recio.mx import ndarray as nd
from recio.records import recordio


def test_recordio_is_recios_facade():
    for name in ("MXIndexedRecordIO", "MXRecordIO", "IRHeader", "pack", "unpack", "pack_img"):
        assert getattr(mx.recordio, name) is getattr(recordio, name)
    assert mx.nd is mx.ndarray is nd


@pytest.mark.parametrize(
    ("module", "name", "instead"),
    [
        (mx, "gpu", "torch.device"),
        (mx, "mod", "PyTorch"),
        (mx, "io", "recio.ImageRecordIter"),
        (mx.image, "ImageIter", "recio.ImageRecordIter"),
        (mx.image, "imread", "imdecode"),
        (mx.nd, "softmax", "numpy"),
        (mx.recordio, "MXRecordIOFoo", "numpy"),
    ],
)
def test_an_unsupported_name_says_so_and_what_to_use(module, name, instead):
    with pytest.raises(UnsupportedMXNetName, match=f"{name} is not in recio.mx: use .*{instead}"):
        getattr(module, name)
    assert not hasattr(module, name)  # an AttributeError, so hasattr and getattr work


def test_an_unsupported_ndarray_method_says_what_to_use():
    with pytest.raises(UnsupportedMXNetName, match="NDArray.as_in_context is not in recio.mx"):
        nd.zeros((2,)).as_in_context("gpu(0)")
    import copy
    import pickle

    x = nd.array([1, 2])  # Python's own probes still find what they look for
    assert copy.deepcopy(x).asnumpy().tolist() == pickle.loads(pickle.dumps(x)).asnumpy().tolist()


def test_slices_are_views_and_assignment_casts():
    batch = nd.empty((2, 3, 4, 4))
    image = nd.array(np.arange(48, dtype=np.uint8).reshape(3, 4, 4))
    batch[1][:] = image
    assert batch.dtype == np.float32 and np.array_equal(batch.asnumpy()[1], image.asnumpy())
    assert nd.slice_axis(batch, axis=0, begin=1, end=2).shape == (1, 3, 4, 4)
    out = batch.asnumpy()
    out[:] = 0  # asnumpy is a copy, as MXNet's
    assert batch.asnumpy()[1].sum() == image.asnumpy().sum()
    assert (nd.zeros((2,)) + 1).asnumpy().tolist() == [1.0, 1.0]


def test_a_bad_image_is_a_decode_error():
    from recio.errors import DecodeError

    with pytest.raises(DecodeError, match="not a decodable image"):
        mx.image.imdecode(b"not an image")
