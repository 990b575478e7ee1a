"""recio against a real S3 server (SeaweedFS, tools/s3_server.sh), with injected faults."""

from __future__ import annotations

import sys
import time

import fsspec
import numpy as np
import pytest

from recio import storage
from recio.records.reader import RecordFile
from recio.records.recordio import MXIndexedRecordIO, MXRecordIO
from recio.sampling.sampler import epoch_order
from recio.storage import stores
from recio.storage.objectsource import ObjectStoreSource
from recio.storage.prefetch import Prefetcher

from ..conftest import S3_BUCKET, s3_options
from ..delayproxy import DelayProxy
from ..faultproxy import FaultProxy
from ..storage_helpers import ids_of, read_across_restart, write_rec

pytestmark = pytest.mark.s3

FAST = storage.FetchOptions(backoff=0.02, max_backoff=0.2, retries=6, gap=0, max_request=1 << 20)
# fsspec's path (s3fs, and the presigned range client beside it); obstore is the default
FSSPEC = storage.FetchOptions(client="fsspec")


@pytest.fixture
def s3_rec(s3_server, s3_prefix):
    url = f"{s3_prefix}/d.rec"
    write_rec(url, n=120, size=20_000, storage_options=s3_server)
    return url


def test_write_then_read_everything(s3_server, s3_rec):
    rf = RecordFile(s3_rec, storage_options=s3_server)
    assert len(rf) == 120 and isinstance(rf.source, storage.FsspecSource)
    order = np.random.default_rng(0).permutation(120)
    assert ids_of(rf.read_many(order)) == order.tolist()
    assert ids_of([rf.read(7)]) == [7]
    with MXRecordIO(s3_rec, "r", storage_options=s3_server) as r:
        assert ids_of(list(r)) == list(range(120))


def test_coalesced_reads_are_few_and_large(s3_server, s3_rec):
    rf = RecordFile(s3_rec, storage_options=s3_server)
    opened = dict(rf.source.stats)  # the open's check of the .idx: one frame header
    total = int(rf.lengths.sum())
    # fixed sizes: requests of max_request; adaptive: a job over every connection at once
    every = storage.FetchOptions().concurrency
    for adaptive, most in ((False, total // (1 << 20) + 2), (True, every + 1)):
        rf.source.fetch = storage.FetchOptions(max_request=1 << 20, adaptive=adaptive)
        assert ids_of(rf.read_many(range(120))) == list(range(120))
        assert rf.source.stats["requests"] - opened["requests"] <= most
        assert rf.source.stats["bytes"] - opened["bytes"] == total
        opened = dict(rf.source.stats)


def test_block_shuffled_prefetch_reads_little_extra(s3_server, s3_rec):
    rf = RecordFile(s3_rec, storage_options=s3_server)
    opened = dict(rf.source.stats)  # the open's check of the .idx: one frame header
    rf.source.fetch = storage.FetchOptions(gap=0)
    order = epoch_order(len(rf), 3, 0, "block", block_size=16, window=2)
    batches = [order[i : i + 8] for i in range(0, len(order), 8)]
    seen = []
    # one window = 32 records = 4 batches of ~22 KB records: a group holds one window
    for indices, payloads in Prefetcher(rf, batches, group_bytes=32 * 20_000):
        assert ids_of(payloads) == indices.tolist()
        seen += indices.tolist()
    assert seen == order.tolist()
    assert rf.source.stats["bytes"] - opened["bytes"] == int(rf.lengths.sum())
    assert rf.source.stats["requests"] - opened["requests"] <= 2 * 120 // 16 + 4  # one a block


def test_ranges_go_over_a_presigned_url_with_the_same_bytes(s3_server, s3_rec):
    fast = RecordFile(s3_rec, storage_options=s3_server, fetch=FSSPEC)
    plain = RecordFile(s3_rec, storage_options=s3_server, fetch=FSSPEC)
    plain.source.fetch = storage.FetchOptions(presign_s3=False, client="fsspec")
    plain.source._http = None  # as built with presign_s3=False
    order = np.random.default_rng(2).permutation(120)
    got = fast.read_many(order)
    assert fast.source._presigned is not None  # the presigned path was taken
    assert [bytes(p) for p in got] == [bytes(p) for p in plain.read_many(order)]
    assert ids_of(got) == order.tolist()
    no_presign = storage.FsspecSource(
        s3_rec, s3_server, fetch=storage.FetchOptions(presign_s3=False)
    )
    assert no_presign._http is None
    assert no_presign.read(0, 64) == bytes(fast.source.read(0, 64))


def test_without_httptools_ranges_go_through_s3fs_and_say_so(s3_server, s3_rec, monkeypatch):
    monkeypatch.setitem(sys.modules, "httptools", None)  # importing it fails
    monkeypatch.delitem(sys.modules, "recio.storage.httprange", raising=False)
    with pytest.warns(UserWarning, match=r"needs httptools: pip install -e '\.\[s3\]'"):
        source = storage.FsspecSource(s3_rec, s3_server)
    assert source._http is None
    monkeypatch.undo()  # httptools back: the presigned path again
    presigned = storage.FsspecSource(s3_rec, s3_server)
    assert presigned._http is not None
    assert bytes(source.read(0, 4096)) == bytes(presigned.read(0, 4096))


def test_bodies_from_s3_reuse_buffers_within_the_read_ahead(s3_server, s3_rec):
    """NOTE [reused buffers]: the presigned path receives bodies into the process's buffers,
    which come back once the records' views are gone; closing lets the source's go."""
    fetch = storage.FetchOptions(read_ahead=4 << 20, client="fsspec")
    source = storage.open_source(s3_rec, s3_server, fetch=fetch)
    whole = bytes(source.read(0, source.size))  # one request of the whole file (> 256 KiB)
    assert len(whole) == source.size > (256 << 10)
    pool = source._http.buffers
    before = pool.reused
    for _ in range(3):
        assert bytes(source.read(0, source.size)) == whole
    assert pool.reused - before == 3 and 0 < pool.kept <= pool.limit
    source.close()
    assert source._http.buffers is None


def test_an_expired_presigned_url_is_renewed(s3_server, s3_rec):
    rf = RecordFile(s3_rec, storage_options=s3_server, fetch=FSSPEC)
    src = rf.source
    src.read(0, 16)
    # A URL that expires in one second, as if made long ago (age kept below the renewal).
    src._presigned = (src.fs.url(src.path, expires=1), time.monotonic())
    time.sleep(2.5)
    with pytest.raises(Exception) as refused:  # the server does refuse it
        src._http.cat_file(src._presigned[0], start=0, end=16)
    assert storage.http_status(refused.value) == 403
    assert ids_of(rf.read_many([3, 60, 110])) == [3, 60, 110]  # ranges: renewed once
    src._presigned = (src.fs.url(src.path, expires=1), time.monotonic())
    time.sleep(2.5)
    assert len(src.read(100, 50)) == 50  # a single read: renewed too
    assert src.stats["retries"] >= 1


def test_aborted_multipart_write_leaves_no_object(s3_server, s3_prefix):
    import s3fs

    opts = dict(s3_server, default_block_size=5 << 20)
    rec = f"{s3_prefix}/big.rec"
    with (
        pytest.raises(KeyboardInterrupt),
        MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w", storage_options=opts) as w,
    ):
        for i in range(14):  # 14 MB: two 5 MB parts uploaded before the interruption
            w.write_idx(i, b"\0" * (1 << 20))
        raise KeyboardInterrupt
    fs = s3fs.S3FileSystem(**s3_server)
    assert not fs.exists(rec) and not fs.exists(rec[:-4] + ".idx")
    # the same writer, finished, publishes both (a multipart upload)
    with MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w", storage_options=opts) as w:
        for i in range(14):
            w.write_idx(i, b"\1" * (1 << 20))
    assert fs.size(rec) > 14 << 20 and len(RecordFile(rec, storage_options=s3_server)) == 14


def test_clear_errors_for_credentials_buckets_and_keys(s3_server, s3_rec):
    bad = dict(s3_server, secret="wrong-secret")
    with pytest.raises(PermissionError, match=s3_rec):
        storage.open_source(s3_rec, bad)
    with pytest.raises(FileNotFoundError, match="no-such-bucket-recio"):
        RecordFile("s3://no-such-bucket-recio/x.rec", storage_options=s3_server)
    with pytest.raises(FileNotFoundError, match="missing.rec"):
        storage.open_source(f"s3://{S3_BUCKET}/missing.rec", s3_server)


def test_cache_dir_makes_a_local_copy(s3_server, s3_rec, tmp_path):
    src = storage.open_source(s3_rec, s3_server, cache_dir=str(tmp_path))
    assert isinstance(src, storage.MappedSource)
    rf = RecordFile(s3_rec, storage_options=s3_server)
    assert bytes(src.read(0, src.size)) == bytes(rf.source.read(0, rf.source.size))


@pytest.fixture
def proxy(s3_server):
    port = int(s3_server["endpoint_url"].rsplit(":", 1)[1])
    p = FaultProxy(port)
    yield p
    p.close()


@pytest.mark.parametrize("fault", ["reset", "503", "cut", "delay"])
def test_faults_are_retried_without_lost_or_repeated_records(s3_server, s3_rec, proxy, fault):
    rf = RecordFile(s3_rec, storage_options=s3_options(proxy.endpoint))
    rf.source.fetch = FAST
    proxy.delay_s = 0.3
    proxy.inject(*[fault] * 3)
    order = np.random.default_rng(1).permutation(120)
    got = []
    for indices, payloads in Prefetcher(rf, np.array_split(order, 12), group_bytes=0):
        assert ids_of(payloads) == indices.tolist()
        got += indices.tolist()
    assert got == order.tolist()
    assert proxy.injected == [fault] * 3


def test_persistent_faults_end_in_one_clear_error(s3_server, s3_rec, proxy):
    rf = RecordFile(s3_rec, storage_options=s3_options(proxy.endpoint))
    rf.source.fetch = storage.FetchOptions(backoff=0.01, max_backoff=0.05, retries=2)
    proxy.inject(*["reset"] * 1000)
    t0 = time.monotonic()
    with pytest.raises(storage.RemoteReadError, match=rf"bytes \d+-\d+ of {s3_rec}"):
        rf.read_many([5, 6, 7])
    assert time.monotonic() - t0 < 60


def test_server_restart_mid_read(s3_server, s3_rec, s3_owned_server):
    """Only on a server this run started (else skipped: someone else's is never stopped)."""
    rf = RecordFile(s3_rec, storage_options=s3_server)
    read_across_restart(rf, s3_owned_server)
    assert rf.source.stats["retries"] > 0


def test_through_the_delay_proxy_and_the_block_cache(s3_server, s3_rec, tmp_path):
    """S3 made far away (tests/delayproxy.py): every request waits the delay; the bounded
    block cache then serves a second read with no request at all."""
    port = int(s3_server["endpoint_url"].rsplit(":", 1)[1])
    proxy = DelayProxy(port, delay_s=0.05, rate=50e6)
    try:
        options = s3_options(proxy.endpoint)
        rf = RecordFile(s3_rec, storage_options=options, cache_dir=str(tmp_path),
                        cache_limit=8 << 20)  # fmt: skip
        order = np.random.default_rng(2).permutation(120)
        t0 = time.perf_counter()
        assert ids_of(rf.read_many(order[:60])) == order[:60].tolist()
        assert time.perf_counter() - t0 >= 0.05
        requests = proxy.stats["requests"]
        assert requests >= 1 and proxy.stats["delay_s"] >= 0.05 * requests - 1e-9
        assert ids_of(rf.read_many(order[:60])) == order[:60].tolist()
        assert proxy.stats["requests"] == requests  # all from the cache
        assert rf.source.stats.hits > 0 and rf.source.stats.corrupt == 0
    finally:
        proxy.close()


def test_separate_ranges_go_over_sixteen_connections_by_default(s3_server, s3_rec):
    """A global shuffle's job is many separate requests: by default 16 of them are in
    flight at once (NOTE [adaptive fetch]), which a far store's latency needs."""
    port = int(s3_server["endpoint_url"].rsplit(":", 1)[1])
    proxy = DelayProxy(port, delay_s=0.15, rate=1e9)
    try:
        fetch = storage.FetchOptions(gap=1000, retries=1)  # each range its own request
        assert fetch.concurrency == 16
        src = storage.open_source(s3_rec, s3_options(proxy.endpoint), fetch=fetch)
        src.read(0, 100)  # a connection's setup, outside what is counted
        proxy.reset_peak()
        ranges = [(o, 5_000) for o in range(0, 2_300_000, 100_000)]  # 23 requests
        got = src.read_ranges(ranges)
        assert [len(g) for g in got] == [5_000] * len(ranges)
        assert proxy.stats["peak_held"] >= 12, proxy.stats  # (16 unless threads start late)
    finally:
        proxy.close()


def test_a_job_goes_over_every_connection_at_once(s3_server, s3_rec):
    """One read_ranges call of adjacent ranges (one 2.4 MB span) is cut into
    ``concurrency`` requests that the proxy holds all at once: it takes about one
    request's delay, not one per request (NOTE [adaptive fetch])."""
    port = int(s3_server["endpoint_url"].rsplit(":", 1)[1])
    proxy = DelayProxy(port, delay_s=0.15, rate=1e9)
    try:
        fetch = storage.FetchOptions(concurrency=8, min_request=64 << 10, retries=1)
        src = storage.open_source(s3_rec, s3_server, fetch=fetch)
        want = src.read(0, 2_400_000)
        src = storage.open_source(s3_rec, s3_options(proxy.endpoint), fetch=fetch)
        src.read(0, 100)  # the connection's setup, outside what is counted
        proxy.reset_peak()
        requests = proxy.stats["requests"]
        t0 = time.perf_counter()
        got = src.read_ranges([(o, 20_000) for o in range(0, 2_400_000, 20_000)])
        took = time.perf_counter() - t0
        assert b"".join(bytes(g) for g in got) == want
        assert proxy.stats["requests"] - requests == 8  # a concurrency-th of the span each
        assert proxy.stats["peak_held"] >= 6, proxy.stats  # (8 unless a thread started late)
        assert took < 0.15 * 8 / 2, took  # one after another would take 8 delays
    finally:
        proxy.close()


@pytest.mark.parametrize("presign", [True, False], ids=["presigned", "s3fs"])
def test_a_merged_request_holds_only_its_ranges_bytes(s3_server, s3_rec, presign):
    """Ranges merged across gaps come over one request, but only their own bytes are kept
    (NOTE [dropped gaps]): the buffers behind the views hold the ranges, not the gaps,
    whether the presigned client drops them as they come or they are dropped after."""
    whole = storage.open_source(s3_rec, s3_server).read(0, 2_400_000)
    fetch = storage.FetchOptions(
        gap=256 << 10, adaptive=False, max_request=16 << 20, presign_s3=presign
    )
    src = storage.open_source(s3_rec, s3_server, fetch=fetch)
    opened = dict(src.stats)
    # a random sample, a range repeated and one overlapping another: one request
    rng = np.random.default_rng(0)
    ranges = [(int(o), 7_000) for o in rng.choice(2_300_000, 40, replace=False)]
    ranges += [ranges[3], (ranges[5][0] + 100, 9_000)]
    got = src.read_ranges(ranges)
    assert [bytes(g) for g in got] == [whole[o : o + n] for o, n in ranges]
    assert src.stats["requests"] - opened["requests"] == 1
    start, end = min(o for o, _ in ranges), max(o + n for o, n in ranges)
    assert src.stats["bytes"] - opened["bytes"] == end - start  # what came over the wire
    held = {id(g.obj): memoryview(g.obj).nbytes for g in got}  # the buffers behind the views
    needed = len({i for o, n in ranges for i in range(o, o + n)})
    assert needed <= sum(held.values()) < (end - start) / 3, (held, needed, end - start)


def test_opening_a_dataset_makes_one_s3_client(s3_server, s3_rec, monkeypatch):
    """The .rec, its .idx, the sidecar and their existence checks go through one client,
    although the options skip fsspec's instance cache (one client each made five)."""
    assert s3_server.get("skip_instance_cache")
    made = []
    real = fsspec.core.url_to_fs
    monkeypatch.setattr(fsspec.core, "url_to_fs", lambda *a, **k: made.append(a) or real(*a, **k))
    monkeypatch.setattr(stores, "obstore_module", lambda: None)  # fsspec's clients only
    rf = RecordFile(s3_rec, storage_options=s3_server)
    assert rf.checksums is not None and len(rf) == 120  # the writer's sidecar was read
    assert len(made) == 1


def test_opening_a_dataset_makes_one_obstore_store(s3_server, s3_rec, monkeypatch):
    from obstore import store as obstores

    made = []
    real = obstores.S3Store
    monkeypatch.setattr(obstores, "S3Store", lambda *a, **k: made.append(a) or real(*a, **k))
    rf = RecordFile(s3_rec, storage_options=s3_server)
    assert isinstance(rf.source, ObjectStoreSource)
    assert rf.checksums is not None and len(rf) == 120
    assert len(made) == 1
