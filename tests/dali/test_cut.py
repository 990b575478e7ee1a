"""The DALI stage handed restart-cut JPEGs (cut=True): the same pixels as the whole JPEGs."""

import numpy as np
import pytest

from ..conftest import needs_dali, require_native


@needs_dali
@pytest.mark.parametrize(
    "crop", [dict(random_resized_crop=True, rand_mirror=True), dict(resize=80)]
)
def test_cut_jpegs_decode_to_the_whole_jpegs_pixels(tmp_path, crop):
    require_native()
    from recio import dali

    from ..gpu.conftest import make_images, with_markers, write_rec

    rec = write_rec(tmp_path, with_markers(make_images(16, sides=(90, 260))))
    kw = dict(data_shape=(3, 64, 64), batch_size=8, seed=3, device="cpu", **crop)
    cut = dali.DALIImageRecordIter(rec, cut=True, **kw)
    whole = dali.DALIImageRecordIter(rec, **kw)
    source = cut.source()
    images, _, _, windows, _ = source.batch(0, 0)
    assert sum(len(i) for i in images) < 0.8 * sum(len(i) for i in whole.source().batch(0, 0)[0])
    with cut, whole:
        for a, b in zip(cut, whole, strict=True):
            assert np.array_equal(a.index, b.index)
            assert np.array_equal(a.data, b.data)
