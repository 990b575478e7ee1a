"""Prefetcher: upcoming batches fetched ahead, in order, bounded, block-shuffle windows whole
(fsspec's memory file system, no servers)."""

from __future__ import annotations

import numpy as np
import pytest

from recio import storage
from recio.records.reader import RecordFile
from recio.sampling.sampler import Sampler, epoch_order
from recio.storage.prefetch import Prefetcher

from ..storage_helpers import ids_of, write_rec


@pytest.mark.parametrize("group_bytes", [0, 30_000, 10 << 20])
def test_prefetcher_yields_every_batch_in_order(memfs, group_bytes):
    write_rec("memory://q/d.rec", n=100, size=1000)
    rf = RecordFile("memory://q/d.rec")
    order = epoch_order(100, 0, 0, "block", block_size=16, window=2)
    batches = [order[i : i + 7] for i in range(0, 100, 7)]
    seen = []
    with Prefetcher(rf, batches, depth=3, group_bytes=group_bytes) as pf:
        for indices, payloads in pf:
            assert ids_of(payloads) == indices.tolist()
            seen += indices.tolist()
    assert seen == order.tolist()


def plans_window(plans, k: int, group: int) -> list[int]:
    return [int(i) for p in plans[k * group : (k + 1) * group] for i in p.positions]


def test_block_shuffle_windows_are_fetched_whole_and_once(memfs):
    """Sampler.fetch_group batches per job: each job reads its window's blocks, each byte once."""
    write_rec("memory://q/w.rec", n=256, size=1000)
    rf = RecordFile("memory://q/w.rec")
    rf.source.fetch = storage.FetchOptions(gap=0)
    opened = rf.source.stats["bytes"]  # the open's check of the .idx: one frame header
    sampler = Sampler(256, 8, shuffle="block", block_size=16, window=4, block_parts=1, seed=3)
    group = sampler.fetch_group()
    assert group == 8  # 16 records x 4 blocks / 8 per batch
    plans = [sampler.plan(0, s) for s in range(sampler.steps_in_epoch(0))]
    calls = []

    class Spy:
        lengths = rf.lengths

        def read_many(self, indices):
            calls.append(sorted(indices))
            return rf.read_many(indices)

    seen = []
    for indices, payloads in Prefetcher(Spy(), [p.positions for p in plans], group_batches=group):
        assert ids_of(payloads) == indices.tolist()
        seen += indices.tolist()
    assert sorted(seen) == list(range(256))
    # The first batch alone (the decoder starts soon), then the rest of its window...
    assert [len(c) for c in calls[:2]] == [8, 56]
    assert sorted(calls[0] + calls[1]) == sorted(plans_window(plans, 0, group))
    for job in calls[2:]:  # ...then whole windows: 4 runs of 16 consecutive records
        runs = np.split(np.array(job), np.flatnonzero(np.diff(job) != 1) + 1)
        assert len(job) == 64 and all(len(r) % 16 == 0 for r in runs)
    assert rf.source.stats["bytes"] - opened == int(rf.lengths.sum())
    # Resumed at step 3 of a window: the lead batch, then steps 4-7, then whole windows.
    calls.clear()
    resumed = Prefetcher(
        Spy(), [p.positions for p in plans[3:]], group_batches=group, first_batch=3
    )
    assert sum(len(payloads) for _, payloads in resumed) == 256 - 3 * 8
    assert [len(c) for c in calls] == [8, 32] + [64] * 3
    # Started well ahead (the next epoch's): whole windows from the first batch on.
    calls.clear()
    ahead = Prefetcher(Spy(), [p.positions for p in plans], group_batches=group, lead=False)
    assert sum(len(payloads) for _, payloads in ahead) == 256
    assert [len(c) for c in calls] == [64] * 4
    rf.close()  # its fetch threads end now, not at the next garbage collection
    assert Sampler(256, 8, shuffle="global").fetch_group() is None
    # with 4 canonical partitions a window holds 4 blocks of each: 256 records, 8 global
    # steps of 4 ranks (whatever the world size, the window is the same records)
    four = {"shuffle": "block", "block_size": 16, "window": 4, "block_parts": 4}
    assert Sampler(256, 8, num_parts=4, **four).fetch_group() == 8
    assert Sampler(256, 8, num_parts=2, **four).fetch_group() == 16


def test_prefetcher_bounds_jobs_and_reraises(memfs):
    write_rec("memory://q/d.rec", n=40, size=100)
    rf = RecordFile("memory://q/d.rec")
    calls = []

    class Spy:
        lengths = rf.lengths

        def read_many(self, indices):
            calls.append(list(indices))
            if 30 in list(indices):
                raise OSError(5, "boom")
            return rf.read_many(indices)

    pf = Prefetcher(Spy(), [[i] for i in range(40)], depth=2, group_bytes=0)
    it = iter(pf)
    next(it)
    assert len(calls) <= 3  # the one handed out + at most depth in flight
    with pytest.raises(OSError, match="boom"):
        for _ in it:
            pass


def test_when_issued_runs_once_the_last_job_is_submitted(memfs):
    write_rec("memory://q/i.rec", n=60, size=100)
    rf = RecordFile("memory://q/i.rec")
    batches = np.array_split(np.arange(60), 6)
    calls = []
    pf = Prefetcher(rf, batches, depth=2, group_bytes=0)  # a job a batch, two in flight
    pf.when_issued(lambda: calls.append(pf._next))
    seen = 0
    for _ in pf:
        seen += 1
        # the sixth job goes out when the fourth batch is handed out, not after the sixth
        assert calls == ([6] if seen >= 4 else []), (seen, calls)
    assert seen == 6 and calls == [6]
    late = []
    pf.when_issued(lambda: late.append(1))  # already issued: at once
    assert late == [1]
