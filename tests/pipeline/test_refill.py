"""NOTE [refill]: under on_error="skip" a batch with no good image never ends the epoch."""

from __future__ import annotations

import numpy as np
import pytest

from recio.dali.source import RecioSource
from recio.errors import DecodeError
from recio.pipeline.iterator import ImageRecordIter
from recio.records.reader import RecordFile
from recio.sampling.sampler import Sampler

from .test_iterator import make_rec

N = 80
B = 16
# batches 1 and 2 bad from end to end (one search covers both), and batch 4, the last,
# with nothing after it in the stream: it takes the epoch's first good records
BAD = set(range(16, 48)) | set(range(64, 80))
GOOD = [k for k in range(N) if k not in BAD]


@pytest.fixture(scope="module")
def runs_of_bad(tmp_path_factory):
    return make_rec(tmp_path_factory.mktemp("refill"), n=N, corrupt=BAD)


def make_iter(rec, **kw):
    args = dict(data_shape=(3, 32, 32), batch_size=B, preprocess_threads=2, dtype="uint8")
    return ImageRecordIter(rec, **{**args, **kw})


def epoch(it):
    return [(b.index.copy(), b.data.copy(), b.label.copy(), b.pad) for b in it]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_batch_of_bad_records_is_refilled_from_those_that_follow(runs_of_bad, threads):
    """16 bad records in a row, batch size 16: the epoch goes on (no "no image of
    batch 1" error), every batch full, the bad ones counted once each."""
    with make_iter(runs_of_bad, preprocess_threads=threads) as it:
        got = epoch(it)
        stats = it.stats
        assert len(it) == N // B
    assert len(got) == N // B and all(len(ids) == B and pad == 0 for ids, _, _, pad in got)
    ids = [ids.tolist() for ids, _, _, _ in got]
    assert ids[0] == [1000 + k for k in range(16)] and ids[3] == [1000 + k for k in range(48, 64)]
    assert ids[1] == ids[2] == ids[3]  # the next 16 good records of the stream
    assert ids[4] == ids[0]  # nothing good after it: the epoch's order from its start
    for refilled, own in ((1, 3), (2, 3), (4, 0)):  # the same pixels and labels, same draws
        np.testing.assert_array_equal(got[refilled][1], got[own][1])
        np.testing.assert_array_equal(got[refilled][2], got[own][2])
    assert (stats.decoded, stats.skipped) == (len(GOOD), len(BAD))
    assert set(stats.bad_records) == {1000 + k for k in BAD}


@pytest.fixture(scope="module")
def shuffled_bad(tmp_path_factory):
    """Epoch 0 of seed 5's shuffle has its batches 1, 2 and 4 bad from end to end."""
    plan = Sampler(N, B, shuffle=True, seed=5).plan
    bad = {int(p) for step in (1, 2, 4) for p in plan(0, step).positions}
    return make_rec(tmp_path_factory.mktemp("refill_shuffled"), n=N, corrupt=bad)


@pytest.mark.parametrize("shuffle", [False, True])
def test_refills_resume_exactly(runs_of_bad, shuffled_bad, shuffle):
    """Cropped and mirrored, over two epochs: a run resumed from any step's state gives the
    uninterrupted run's batches, refills included (their records' own draws)."""
    rec = shuffled_bad if shuffle else runs_of_bad
    kw = dict(shuffle=shuffle, seed=5, rand_crop=True, rand_mirror=True)
    with make_iter(rec, **kw) as it:
        full = epoch(it) + epoch(it)
        assert it.stats.skipped >= 3 * B
    for stop in (1, 2, 3, 6):
        with make_iter(rec, **kw) as it:
            taken = []
            for _ in range(2):
                for b in it:
                    taken.append((b.index.copy(), b.data.copy(), b.label.copy(), b.pad))
                    if len(taken) == stop:
                        break
                if len(taken) == stop:
                    break
            state = it.state_dict()
        with make_iter(rec, **kw) as resumed:
            resumed.load_state_dict(state)
            rest = epoch(resumed)
            if state["epoch"] == 0:
                rest += epoch(resumed)
        assert len(taken + rest) == len(full)
        for (a, da, la, _), (b, db, lb, _) in zip(full, taken + rest, strict=True):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(da, db)
            np.testing.assert_array_equal(la, lb)


def test_each_rank_refills_from_its_own_stream(runs_of_bad):
    """Two ranks: both get the planned number of full batches (DDP stays in step); a
    refilled batch takes records of its own rank's stream, which that rank delivers too,
    and the last batch, with nothing good after it, the epoch's first good records."""
    ranks = []
    for r in range(2):
        with make_iter(runs_of_bad, part_index=r, num_parts=2, batch_size=8) as it:
            ranks.append((epoch(it), it.stats, set(it.sampler.shard_positions(0).tolist())))
    assert len(ranks[0][0]) == len(ranks[1][0]) == N // 16
    for got, stats, mine in ranks:
        assert all(len(ids) == 8 for ids, _, _, _ in got)
        assert {i - 1000 for ids, _, _, _ in got[:-1] for i in ids.tolist()} <= mine - BAD
        assert got[-1][0].tolist() == [1000 + k for k in range(8)]
        assert stats.decoded + stats.skipped == len(mine)
    assert sum(s.skipped for _, s, _ in ranks) == len(BAD)


def test_elastic_resume_with_refills_counts_every_record_once(runs_of_bad):
    """A state of one rank, loaded on two: the rest of the epoch's records are each
    counted once (delivered or skipped) over the ranks, every batch full; rank 0's first
    batch (records 32, 34, ..., 46) is bad from end to end and refilled from its stream."""
    kw = dict(shuffle=False)
    with make_iter(runs_of_bad, **kw) as it:
        before = [next(iter(it)).index.copy() for _ in range(2)]
        state = it.state_dict()
        skipped_before = it.stats.skipped
    assert sum(len(ids) for ids in before) == state["consumed"] == 2 * B
    counts, lengths = 0, []
    for r in range(2):
        with make_iter(runs_of_bad, part_index=r, num_parts=2, batch_size=8, **kw) as it:
            it.load_state_dict(state)
            got = epoch(it)
            lengths.append(len(got))
            if r == 0:
                assert got[0][0].tolist() == [1000 + k for k in range(48, 64, 2)]
            assert all(len(ids) - pad == 8 or pad for ids, _, _, pad in got)
            counts += it.stats.decoded + it.stats.skipped
    assert lengths[0] == lengths[1] and counts == N - state["consumed"]
    assert skipped_before <= len(BAD)


def test_remote_batches_are_refilled_as_local_ones(runs_of_bad, memfs):
    for ext in ("rec", "idx", "crc"):
        memfs.pipe(f"/refill/data.{ext}", open(runs_of_bad[:-3] + ext, "rb").read())
    with make_iter(runs_of_bad) as it:
        local = epoch(it)
    with make_iter("memory://refill/data.rec") as it:
        remote = epoch(it)
        assert it.stats.skipped == len(BAD)
    for (a, da, _, _), (b, db, _, _) in zip(local, remote, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(da, db)


def test_an_epoch_with_no_good_record_is_an_error(tmp_path):
    rec = make_rec(tmp_path, n=20, corrupt=range(20))
    with make_iter(rec, batch_size=8) as it, pytest.raises(DecodeError) as info:
        next(iter(it))
    assert "nor of any record of epoch 0" in str(info.value) and rec in str(info.value)


def test_the_dali_source_refills_as_the_iterator_does(runs_of_bad):
    """The DALI stage's source (no DALI needed): the same records take the bad batches'
    slots, their metadata names the bad records."""
    source = RecioSource(RecordFile(runs_of_bad), Sampler(N, B, shuffle=False))
    ids = [source.batch(0, s)[2][:, 0].tolist() for s in range(N // B)]
    with make_iter(runs_of_bad) as it:
        assert ids == [b.index.tolist() for b in it]
    _, labels, meta = source.batch(0, 1)
    assert meta[:, 4].tolist() == [1000 + k for k in range(16, 32)]  # the bad records
    assert labels[:, 0].tolist() == [float(k % 5) for k in range(48, 64)]
    everything_bad = RecioSource(RecordFile(make_rec_all_bad(runs_of_bad)), Sampler(8, 8))
    with pytest.raises(DecodeError, match="nor of any record"):
        everything_bad.batch(0, 0)


def make_rec_all_bad(beside: str) -> str:
    from pathlib import Path

    folder = Path(beside).parent / "all_bad"
    folder.mkdir(exist_ok=True)
    return make_rec(folder, n=8, corrupt=range(8))
