"""storage, prefetch and block shuffle on fsspec's memory file system (no servers)."""

from __future__ import annotations

import pickle

import fsspec
import numpy as np
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from hypothesis import given
from hypothesis import strategies as st

from recio import storage
from recio.reader import RecordFile
from recio.recordio import MXIndexedRecordIO
from recio.sampler import Sampler, epoch_order
from recio.storage.prefetch import Prefetcher

from ..storage_helpers import ids_of, write_rec

FAST = storage.FetchOptions(backoff=0.001, max_backoff=0.01, retries=3)

# --- coalesce -------------------------------------------------------------------------


@given(
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 500)), max_size=60),
    st.integers(0, 300),
    st.integers(1, 3000),
)
def test_coalesce_covers_every_range_once(ranges, gap, max_request):
    requests = storage.coalesce(ranges, gap, max_request)
    members = sorted(k for _, _, m in requests for k in m)
    assert members == list(range(len(ranges)))
    for start, end, m in requests:
        for k in m:
            assert start <= ranges[k][0] and ranges[k][0] + ranges[k][1] <= end
        if len(m) > 1:
            assert end - start <= max_request
    starts = [s for s, _, _ in requests]
    assert starts == sorted(starts)


def test_coalesce_merges_neighbours_and_respects_gap():
    assert storage.coalesce([(0, 10), (10, 10), (25, 5)], 5, 100) == [(0, 30, [0, 1, 2])]
    assert storage.coalesce([(0, 10), (10, 10), (25, 5)], 4, 100) == [
        (0, 20, [0, 1]),
        (25, 30, [2]),
    ]
    assert storage.coalesce([(0, 10), (10, 10)], 0, 15) == [(0, 10, [0]), (10, 20, [1])]


# --- ranged reads ---------------------------------------------------------------------


def test_read_ranges_equal_slices(memfs):
    data = np.random.default_rng(1).integers(0, 256, 300_000, dtype=np.uint8).tobytes()
    memfs.pipe("/b/blob", data)
    src = storage.open_source(
        "memory://b/blob", fetch=storage.FetchOptions(gap=1000, max_request=50_000)
    )
    rng = np.random.default_rng(2)
    ranges = [
        (int(o), int(n))
        for o, n in zip(rng.integers(0, 299_000, 200), rng.integers(0, 3000, 200), strict=True)
    ]
    ranges.append((299_990, 100))  # runs past the end: clipped like a file read
    got = src.read_ranges(ranges)
    assert [bytes(g) for g in got] == [data[o : o + n] for o, n in ranges]
    assert src.stats["requests"] < len(ranges)
    assert src.read(5, 10) == data[5:15]


def test_local_and_file_url_are_mapped(tmp_path):
    p = tmp_path / "x.bin"
    p.write_bytes(b"abcdef")
    for url in (str(p), f"file://{p}"):
        src = storage.open_source(url)
        assert isinstance(src, storage.MappedSource)
        assert bytes(src.read_ranges([(1, 2), (4, 2)])[1]) == b"ef"


def test_missing_files_are_file_not_found(tmp_path, memfs):
    for url in (str(tmp_path / "none.rec"), "memory://nothing/here.rec"):
        with pytest.raises(FileNotFoundError, match="here.rec|none.rec"):
            storage.open_source(url)
        with pytest.raises(FileNotFoundError):
            storage.read_text(url)
        assert not storage.exists(url)


def test_missing_extra_names_it(monkeypatch):
    def no_backend(url, **kw):
        raise ImportError("No module named 'hdfs_native'")

    monkeypatch.setattr(fsspec.core, "url_to_fs", no_backend)
    with pytest.raises(ImportError, match=r"recio\[hdfs\]"):
        storage.open_source("hdfs://nn:9000/x.rec")
    with pytest.raises(ImportError, match=r"recio\[s3\]"):
        storage.filesystem("s3://b/x.rec")


def test_source_pickles_as_url(memfs):
    memfs.pipe("/p/x", b"0123456789")
    src = storage.open_source("memory://p/x", fetch=FAST)
    copy = pickle.loads(pickle.dumps(src))
    assert copy.read(2, 3) == b"234" and copy.fetch == FAST


# --- retries --------------------------------------------------------------------------


class FlakyFS(MemoryFileSystem):
    """A memory file system whose range reads fail as told."""

    protocol = ("flaky",)
    root_marker = "/"
    failures: list = []
    calls = 0

    @classmethod
    def _strip_protocol(cls, path):
        return super()._strip_protocol(path.replace("flaky://", "memory://", 1))

    def cat_file(self, path, start=None, end=None, **kwargs):
        type(self).calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return super().cat_file(path, start=start, end=end, **kwargs)


@pytest.fixture
def flaky(memfs):
    fsspec.register_implementation("flaky", FlakyFS, clobber=True)
    FlakyFS.failures, FlakyFS.calls = [], 0
    write_rec("memory://f/d.rec", n=60, size=2000)
    yield FlakyFS
    FlakyFS.failures = []


def test_transient_errors_are_retried_without_losing_or_repeating_records(flaky):
    rf = RecordFile("flaky://f/d.rec", storage_options={"skip_instance_cache": True})
    rf.source.fetch = storage.FetchOptions(backoff=0.001, gap=0, max_request=9000, concurrency=3)
    flaky.failures = [ConnectionResetError(104, "reset")] * 2 + [TimeoutError("timed out"),
                      OSError(5, "503 SlowDown")]  # fmt: skip
    order = np.random.default_rng(0).permutation(60)
    assert ids_of(rf.read_many(order)) == list(order)
    assert rf.source.stats["retries"] == 4


def test_retries_are_bounded_and_name_url_and_range(flaky):
    rf = RecordFile("flaky://f/d.rec")
    rf.source.fetch = FAST
    flaky.failures = [ConnectionResetError(104, "reset")] * 10
    with pytest.raises(storage.RemoteReadError, match=r"bytes \d+-\d+ of flaky://f/d.rec") as e:
        rf.read_many([3, 4])
    assert isinstance(e.value, OSError) and e.value.attempts == 4


def test_permanent_errors_are_not_retried(flaky):
    rf = RecordFile("flaky://f/d.rec")
    calls = flaky.calls
    flaky.failures = [PermissionError(13, "AccessDenied")]
    with pytest.raises(PermissionError, match="flaky://f/d.rec"):
        rf.read(0)
    assert flaky.calls == calls + 1


def test_is_transient_by_name():
    class EndpointConnectionError(Exception):
        pass

    assert storage.is_transient(EndpointConnectionError())
    assert storage.is_transient(ConnectionResetError())
    assert not storage.is_transient(FileNotFoundError())
    assert not storage.is_transient(ValueError("bad argument"))
    # hdfs-native, reading from a NameNode that was just restarted (seen in CI)
    safe_mode = RuntimeError(
        'RPCError("org.apache.hadoop.hdfs.server.namenode.SafeModeException", "Zero '
        'blocklocations for /d.rec. Name node is in safe mode.")'
    )
    assert storage.is_transient(safe_mode)
    assert not storage.is_transient(RuntimeError('RPCError("...AccessControlException", "")'))


# --- writing --------------------------------------------------------------------------


def test_remote_writer_publishes_only_on_close(memfs):
    with (
        pytest.raises(RuntimeError),
        MXIndexedRecordIO("memory://w/a.idx", "memory://w/a.rec", "w") as w,
    ):
        w.write_idx(0, b"x" * 100)
        assert not memfs.exists("/w/a.rec")
        raise RuntimeError("interrupted")
    assert not memfs.exists("/w") or memfs.ls("/w", detail=False) == []
    write_rec("memory://w/a.rec", n=5, size=10)
    assert sorted(memfs.ls("/w", detail=False)) == ["/w/a.idx", "/w/a.rec"]
    # overwriting replaces the old file whole
    write_rec("memory://w/a.rec", n=3, size=10)
    assert len(RecordFile("memory://w/a.rec")) == 3


def test_local_writer_leaves_nothing_on_abort(tmp_path):
    out = storage.AtomicOutput(str(tmp_path / "x.rec"))
    out.write(b"abc")
    out.abort()
    assert list(tmp_path.iterdir()) == []


# --- cache ----------------------------------------------------------------------------


def test_cache_dir_copies_once_then_maps(memfs, tmp_path):
    write_rec("memory://c/d.rec", n=20, size=500)
    src = storage.open_source("memory://c/d.rec", cache_dir=str(tmp_path))
    assert isinstance(src, storage.MappedSource) and src.url == "memory://c/d.rec"
    assert bytes(src.read(0, src.size)) == memfs.cat_file("/c/d.rec")
    (cached,) = list(tmp_path.iterdir())
    mtime = cached.stat().st_mtime_ns
    storage.open_source("memory://c/d.rec", cache_dir=str(tmp_path))
    assert cached.stat().st_mtime_ns == mtime


# --- block shuffle --------------------------------------------------------------------


@given(st.integers(0, 700), st.integers(1, 100), st.integers(1, 5), st.integers(0, 3))
def test_block_shuffle_is_a_permutation(n, block, window, epoch):
    order = epoch_order(n, 7, epoch, "block", block_size=block, window=window)
    assert order.dtype == np.int64 and sorted(order.tolist()) == list(range(n))
    assert np.array_equal(order, epoch_order(n, 7, epoch, "block", block_size=block, window=window))


def test_block_shuffle_keeps_windows_contiguous_and_varies_by_epoch():
    order = epoch_order(1000, 1, 0, "block", block_size=50, window=2)
    for w in range(0, 1000, 100):
        blocks = set((order[w : w + 100] // 50).tolist())
        assert len(blocks) == 2
    assert not np.array_equal(order, epoch_order(1000, 1, 1, "block", block_size=50, window=2))
    assert not np.array_equal(order, np.arange(1000))


# --- prefetcher -----------------------------------------------------------------------


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
    sampler = Sampler(256, 8, shuffle="block", block_size=16, window=4, seed=3)
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
    assert rf.source.stats["bytes"] == int(rf.lengths.sum())
    # Resumed at step 3 of a window: the lead batch, then steps 4-7, then whole windows.
    calls.clear()
    resumed = Prefetcher(
        Spy(), [p.positions for p in plans[3:]], group_batches=group, first_batch=3
    )
    assert sum(len(payloads) for _, payloads in resumed) == 256 - 3 * 8
    assert [len(c) for c in calls] == [8, 32] + [64] * 3
    rf.close()  # its fetch threads end now, not at the next garbage collection
    assert Sampler(256, 8, shuffle="global").fetch_group() is None
    # with 4 ranks a window holds 4 blocks per rank: 64 records = 8 batches of each rank
    assert Sampler(256, 8, num_parts=4, shuffle="block", block_size=16, window=4).fetch_group() == 8


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


def test_record_file_takes_fetch_options_and_cache_dir_and_pickles(memfs, tmp_path):
    write_rec("memory://r/d.rec", n=10, size=100)
    opts = storage.FetchOptions(gap=0, concurrency=2)
    rf = RecordFile("memory://r/d.rec", fetch=opts)
    assert rf.source.fetch == opts
    copy = pickle.loads(pickle.dumps(rf))
    assert copy.source.fetch == opts and ids_of(copy.read_many([3, 1])) == [3, 1]
    cached = RecordFile("memory://r/d.rec", cache_dir=str(tmp_path))
    assert isinstance(cached.source, storage.MappedSource)
    assert ids_of(cached.read_many([9, 0])) == [9, 0]
