"""DALIImageRecordIter: pixels against ImageRecordIter, record ids per rank and after resume,
bad images."""

import numpy as np
import pytest

from recio import dali
from recio.storage import FetchOptions

from ..conftest import needs_dali
from ..storage_helpers import DAMAGED_KEY, DAMAGED_N, DamagedStore, Peak, checked_images
from .conftest import pair


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
def test_bgr_output_takes_each_colour_its_own_mean_and_std(rec):
    # mean_r/std_r are the red channel's in BGR output too, as on the CPU iterator
    kw = dict(channel_order="BGR", mean_r=200, mean_g=110, mean_b=20, std_r=10, std_g=60)
    it, ref = pair(rec, data_shape=(3, 24, 24), **kw)
    a, b = next(iter(it)), next(iter(ref))
    diff = np.abs(a.data - b.data)
    assert diff.mean() < 0.5, diff.mean()  # a few levels apart at most, / std
    blue_first = next(iter(pair(rec, data_shape=(3, 24, 24), channel_order="BGR")[0])).data
    np.testing.assert_allclose(a.data[:, 0], blue_first[:, 0] - 20, atol=1e-3)


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
    assert it.stats.checksum_mismatches == ref.stats.checksum_mismatches == 0


@needs_dali
def test_a_batch_of_bad_records_is_refilled_like_the_iterator(tmp_path):
    """NOTE [refill]: 8 bad records in a row, batch size 8, and a resume past them: the DALI
    stage refills the batch from the records that follow, as the CPU iterator does."""
    from ..pipeline.test_iterator import make_rec

    rec = make_rec(tmp_path, n=32, corrupt=range(8, 16))
    it, ref = pair(rec)
    got = [b.index.tolist() for b in it]
    assert got == [b.index.tolist() for b in ref] and len(got) == 4
    assert got[1] == got[2] == [1000 + k for k in range(16, 24)]
    assert it.stats.skipped == ref.stats.skipped == 8 and it.stats.decoded == 24
    it, _ = pair(rec)
    next(iter(it))
    state = it.state_dict()
    resumed, _ = pair(rec)
    resumed.load_state_dict(state)
    assert [b.index.tolist() for b in resumed] == got[1:]


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


@needs_dali
def test_face_layout_metadata_records_are_not_samples(tmp_path):
    from tests.faces import write_faces

    face = write_faces(tmp_path, (4, 1, 3))
    it, _ = pair(face.rec, data_shape=(3, 24, 24), batch_size=4, shuffle=True, last_batch="discard")
    with it:
        assert it.layout.num_classes == 3
        ids = [i for b in it for i in b.index.tolist()]
        assert sorted(ids) == list(range(1, 9))
        assert it.stats.bad_records == {} and it.stats.decoded == 8


def _first_label(labels):
    return labels[:, :1]


@needs_dali
def test_a_mixture_gives_the_cpu_iterators_ids_labels_and_stats(tmp_path):
    from recio.sampling.mixing import Source

    from ..sampling.test_mixing import B_IDS, C_IDS, write

    b = write(str(tmp_path / "b.rec"), B_IDS)
    c = write(str(tmp_path / "c.rec"), C_IDS, width=3)
    sources = [Source(b, repeat=2), Source(c, labels=_first_label)]
    kw = dict(shuffle=True, seed=3, rand_crop=True, data_shape=(3, 8, 8), part_index=1, num_parts=2)
    it, ref = pair(sources, **kw)
    got, want = [], []
    for x, y in zip(it, ref, strict=True):  # the same windows: the copies' own draws
        got.append((x.index.tolist(), x.label.tolist(), x.pad))
        want.append((y.index.tolist(), y.label.tolist(), y.pad))
        assert np.abs(x.data - y.data).mean() < 6
    assert got == want and got
    assert it.stats.sources == ref.stats.sources


@needs_dali
def test_the_dali_stage_reads_through_a_bounded_cache_and_refetches_past_it(tmp_path):
    """cache_dir=/cache_limit= (LRU: the DALI stage gives no schedule), a limit of half the
    dataset: the folder stays within it over two epochs, and later reads hit; a record wrong
    at the store is fetched again from the store (not the cache's copy), then skipped and
    counted; once the store is right, the record comes back."""
    store = DamagedStore(checked_images(tmp_path))
    folder = tmp_path / "cache"
    limit = len(store.good) // 2
    args = dict(data_shape=(3, 8, 8), batch_size=4, cache_dir=str(folder), cache_limit=limit,
                fetch=FetchOptions(cache_block=4096, retries=1), on_error="skip")  # fmt: skip
    try:
        it = dali.DALIImageRecordIter(store.url, device="cpu", **args)
        assert it.records.cached
        with Peak(folder) as peak:
            ids = [int(i) for b in it for i in b.index]
            assert store.sent() == 2  # the first fetch and the refetch, both from the store
            ids += [int(i) for b in it for i in b.index]
        everything = list(range(100, 100 + DAMAGED_N))
        assert sorted(set(ids)) == [i for i in everything if i != 100 + DAMAGED_KEY]
        assert it.stats.skipped == it.stats.checksum_mismatches == 2
        assert DAMAGED_KEY in it.stats.bad_records
        stats = it.records.source.stats
        assert 0 < peak.peak <= limit and stats.hits > 0 and stats.evicted > 0, stats
        store.repair()
        assert sorted(int(i) for b in it for i in b.index) == everything
        it.close()
    finally:
        store.server.close()
