"""The bounded block cache: the limit, Belady against LRU, checked entries, sharing."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from recio import storage
from recio.errors import ChecksumError, DecodeError
from recio.frameworks.dataset import RecordDataset
from recio.pipeline.config import IterConfig
from recio.pipeline.iterator import ImageRecordIter
from recio.records.checksum import MismatchedPayload
from recio.records.format import IRHeader, pack
from recio.records.reader import RecordFile
from recio.records.recordio import MXIndexedRecordIO
from recio.storage.blockcache import NEVER, BlockCache, CacheStats, clock, entry_bytes
from recio.storage.cached import CachedSource
from recio.storage.prefetch import Prefetcher
from recio.storage.replay import replay

from ..cache_ranks import ARGS
from ..images import encode
from ..rangeserver import RangeServer
from ..storage_helpers import (
    DAMAGED_KEY,
    DAMAGED_N,
    DamagedStore,
    Peak,
    checked_images,
    dir_bytes,
    ids_of,
    write_images,
    write_rec,
)

REPO = Path(__file__).resolve().parents[2]
N = 120
BLOCK = 8192


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A .rec of N records (~2.3 KB each) and its .idx behind a ranged HTTP server."""
    root = tmp_path_factory.mktemp("served")
    write_rec(str(root / "d.rec"), n=N, size=2000)
    files = {f"/d.{ext}": (root / f"d.{ext}").read_bytes() for ext in ("rec", "idx")}
    server = RangeServer(files)
    yield server
    server.close()


def open_cached(server, cache_dir, limit, policy="belady") -> RecordFile:
    fetch = storage.FetchOptions(cache_block=BLOCK, cache_policy=policy, retries=1)
    return RecordFile(f"{server.url}/d.rec", fetch=fetch, cache_dir=str(cache_dir),
                      cache_limit=limit)  # fmt: skip


def orders(epochs: int, batches: int = 12) -> list[list[np.ndarray]]:
    return [np.array_split(np.random.default_rng(e).permutation(N), batches) for e in range(epochs)]


def run_epochs(rf: RecordFile, plan: list[list[np.ndarray]]) -> None:
    """Read each epoch of ``plan`` as the iterator does (schedule, then prefetched jobs);
    every record must come once per epoch with its own bytes."""
    for epoch, batches in enumerate(plan):
        ahead = [(clock(epoch, k), b) for k, b in enumerate(batches)]
        if epoch + 1 < len(plan):
            ahead += [(clock(epoch + 1, k), b) for k, b in enumerate(plan[epoch + 1])]
        rf.schedule_reads(ahead)
        got = []
        for indices, payloads in Prefetcher(rf, batches, group_bytes=0, epoch=epoch):
            assert ids_of(payloads) == indices.tolist()
            got += indices.tolist()
        assert sorted(got) == list(range(N))


def test_two_epochs_from_a_cache_half_the_dataset_never_above_its_limit(served, tmp_path):
    """Sampled every millisecond during two epochs for each policy: the folder never holds
    more than the limit; Belady (the schedule known) hits at least as often as LRU."""
    size = len(served.files["/d.rec"])
    limit = size // 2
    hits = {}
    for policy in ("lru", "belady"):
        folder = tmp_path / policy
        rf = open_cached(served, folder, limit, policy)
        peak, done = [0], threading.Event()

        def sample(folder=folder, peak=peak, done=done):
            while not done.is_set():
                peak[0] = max(peak[0], dir_bytes(folder))
                done.wait(0.001)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            run_epochs(rf, orders(2))
        finally:
            done.set()
            sampler.join()
        stats = rf.source.stats
        assert 0 < peak[0] <= limit, policy
        assert stats.evicted > 0 and dir_bytes(folder) <= limit
        hits[policy] = stats.hits
        rf.close()
    assert hits["belady"] >= hits["lru"] > 0, hits


def test_a_dataset_that_fits_is_fetched_once(served, tmp_path):
    before = served.fetched("/d.rec")
    rf = open_cached(served, tmp_path, 10 * len(served.files["/d.rec"]))
    run_epochs(rf, orders(3))
    assert served.fetched("/d.rec") - before == len(served.files["/d.rec"])
    assert rf.source.stats.bypassed == rf.source.stats.evicted == 0


def test_corrupt_and_torn_entries_are_caught_and_fetched_again(served, tmp_path):
    """A flipped bit fails the CRC32C, a truncated entry its length: both are fetched again
    (only those blocks), never served."""
    size = len(served.files["/d.rec"])
    rf = open_cached(served, tmp_path, 4 * size)
    everything = rf.read_many(range(N))
    entries = sorted(tmp_path.glob("*.blk"))
    assert len(entries) == -(-size // BLOCK)
    flipped = bytearray(entries[1].read_bytes())
    flipped[-100] ^= 0x20  # one bit of the data: only the checksum can tell
    entries[1].write_bytes(bytes(flipped))
    with open(entries[2], "r+b") as f:  # torn: the write stopped half-way
        f.truncate(BLOCK // 2)
    orphan = tmp_path / (entries[3].name + ".999999.1.tmp")  # a writer that died mid-write
    orphan.write_bytes(bytes(BLOCK))
    before = served.fetched("/d.rec")
    again = rf.read_many(range(N))
    assert [bytes(p) for p in again] == [bytes(p) for p in everything]
    assert rf.source.stats.corrupt == 2
    assert served.fetched("/d.rec") - before == 2 * BLOCK  # those two blocks, nothing else
    assert entries[1].read_bytes() != bytes(flipped)  # stored again, whole
    assert not orphan.exists()  # removed under the lock: it took room no entry accounts for


def test_an_entry_checked_once_is_not_checked_again_until_replaced(served, tmp_path, monkeypatch):
    """NOTE [checked once]: hits on entries this process has checked read no block and
    compute no CRC32C; an entry replaced since (a new file, as another process writes one)
    is checked again, and a corrupt replacement is caught and fetched again; the maps of
    entries removed by others are let go at the next scan of the folder."""
    from recio.storage import entries

    whole = served.files["/d.rec"]
    rf = open_cached(served, tmp_path, 4 * len(whole))
    ranges = [(100, 3000), (BLOCK + 50, 2000), (3 * BLOCK, 500)]
    rf.source.read_ranges(ranges)  # fetched and stored
    rf.source.read_ranges(ranges)  # hits: checked once here
    checked = []
    real = entries.crc32c
    monkeypatch.setattr(entries, "crc32c", lambda data: checked.append(1) or real(data))
    got = rf.source.read_ranges(ranges)
    assert [bytes(g) for g in got] == [whole[o : o + n] for o, n in ranges]
    assert checked == [] and rf.source.stats.corrupt == 0
    entry = Path(rf.source.cache.entry(rf.source.key, 1))
    flipped = bytearray(entry.read_bytes())
    flipped[-10] ^= 1
    replacement = entry.with_name(entry.name + ".new")
    replacement.write_bytes(bytes(flipped))
    os.replace(replacement, entry)  # a new file, as every entry is written
    got = rf.source.read_ranges(ranges)
    assert [bytes(g) for g in got] == [whole[o : o + n] for o, n in ranges]
    assert rf.source.stats.corrupt == 1 and len(checked) == 2  # the check, the store's CRC
    cache = rf.source.cache
    gone = os.path.basename(cache.entry(rf.source.key, 3))
    assert gone in cache._held
    os.unlink(tmp_path / gone)  # evicted by another process
    cache.usage()  # a scan of the folder
    assert gone not in cache._held
    rf.close()


def test_eight_ranks_on_one_node_share_one_cache(tmp_path):
    """8 rank processes (fresh interpreters, as torchrun starts them) iterate two epochs
    through one cache folder: with a limit above the dataset the server sends each byte once
    in all (so once per node, the second epoch all from the cache); with a limit of a third,
    every rank still gets exactly its records every epoch. Sampled throughout: never above
    the limit."""
    files = write_images(tmp_path, n=64)
    size = len(files["/im.rec"])
    server = RangeServer(
        {f"/{run}{p}": data for run in ("fits", "small") for p, data in files.items()}
    )
    limits = {"fits": 2 * size, "small": size // 3}
    runs = [
        dict(url=f"{server.url}/{name}/im.rec", cache_dir=str(tmp_path / name),
             cache_limit=limit, block=4096, epochs=2)
        for name, limit in limits.items()
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "tests.cache_ranks"]
    peaks = {name: Peak(tmp_path / name) for name in limits}
    ranks = []
    with contextlib.ExitStack() as stack:
        for peak in peaks.values():
            stack.enter_context(peak)
        stack.callback(server.close)
        stack.callback(lambda: [p.kill() for p in ranks if p.poll() is None])
        for rank in range(8):
            ranks.append(subprocess.Popen(
                [*command, str(rank), str(tmp_path), json.dumps(runs)], cwd=REPO, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            ))  # fmt: skip
        outs = [p.communicate(timeout=120) for p in ranks]
    for p, (_, err) in zip(ranks, outs, strict=True):
        assert p.returncode == 0, err
    got = [[json.loads(line) for line in out.splitlines()] for out, _ in outs]
    want = {}
    for rank in range(8):
        with ImageRecordIter(str(tmp_path / "im.rec"), part_index=rank, **ARGS) as local:
            want[rank] = [[int(i) for b in local for i in b.index] for _ in range(2)]
    by_run = [{rank: (got[rank][k]["ids"], got[rank][k]["stats"]) for rank in range(8)}
              for k in range(len(runs))]  # fmt: skip
    for k, name in enumerate(limits):
        assert sorted(by_run[k]) == list(range(8))
        for rank, (ids, _) in by_run[k].items():
            assert ids == want[rank], (name, rank)
        for epoch in range(2):  # the ranks together: every record once per epoch
            every = sorted(i for ids, _ in by_run[k].values() for i in ids[epoch])
            assert every == list(range(100, 164)), (name, epoch)
        assert 0 < peaks[name].peak <= limits[name], (name, peaks[name].peak, limits[name])
    covered = np.zeros(size, dtype=np.int64)
    for path, start, end in server.ranges:
        if path == "/fits/im.rec":
            covered[start:end] += 1
    assert (covered == 1).all(), f"bytes sent {np.bincount(covered)} times"
    fits = [stats for _, stats in by_run[0].values()]
    # (counted as the ranks stopped: one may still be fetching for its next epoch's read-ahead)
    assert 0 < sum(s["misses"] for s in fits) <= -(-size // 4096) < sum(s["hits"] for s in fits)
    small = [stats for _, stats in by_run[1].values()]
    assert sum(s["evicted"] + s["bypassed"] for s in small) > 0


@pytest.mark.parametrize("policy", ["belady", "lru"])
def test_the_cache_evicts_what_replay_evicts(tmp_path, policy):
    """Read one block at a time with the trace's future known, the cache hits exactly where
    replay's policy does: its victims (and Belady's bypasses) are the rule's, one by one."""
    rng = np.random.default_rng(7)
    blocks = rng.integers(0, 9, 300).tolist()
    trace = [(b, k) for k, b in enumerate(blocks)]
    later = [NEVER] * len(blocks)  # each use's next use of its block
    seen: dict[int, int] = {}
    for k in range(len(blocks) - 1, -1, -1):
        later[k], seen[blocks[k]] = seen.get(blocks[k], NEVER), k
    size = entry_bytes(100)
    cache = BlockCache(str(tmp_path), 4 * size, policy=policy)
    stats = CacheStats()
    hits = []
    for k, b in enumerate(blocks):
        before = stats.hits
        got = cache.get("k", [(b, 100, later[k])], lambda want: [bytes([w]) * n for w, n in want],
                        stats, until=k)  # fmt: skip
        assert bytes(got[b]) == bytes([b]) * 100
        hits.append(stats.hits - before)
        assert cache.usage() <= 4 * size
    assert sum(hits) == round(replay(trace, size, 4 * size, policy) * len(blocks)) > 0
    assert stats.evicted > 0 and (stats.bypassed > 0) == (policy == "belady")


def test_next_use_follows_the_schedule(tmp_path):
    class Remote:
        url, size = "memory://x", 10 * BLOCK

    src = CachedSource(Remote(), BlockCache(str(tmp_path), 1 << 20), BLOCK, "v1")
    # range 1 spans blocks 0 and 1; block 3 is read twice
    src.schedule([5, 7, 9, 11], [0, BLOCK - 10, 3 * BLOCK, 3 * BLOCK + 5], [10, 20, 5, 5])
    assert src.next_use(0, 4) == 5 and src.next_use(0, 5) == 7 and src.next_use(0, 7) == NEVER
    assert src.next_use(1, 6) == 7 and src.next_use(3, 9) == 11
    assert src.next_use(2, 0) == NEVER and src.next_use(0, None) is None


def test_ranges_of_every_shape_come_as_the_files_bytes(served, tmp_path):
    """NOTE [ranges as arrays]: ranges inside one block, over two and over several, empty
    ones, ones past the end and cut by it, repeated and out of order come back as the file's
    bytes, in the order asked, hits (the second read, the ranges as an array) as misses."""
    whole = served.files["/d.rec"]
    size = len(whole)
    rf = open_cached(served, tmp_path, 4 * size)
    ranges = [(5, 100), (BLOCK - 10, 20), (BLOCK // 2, 3 * BLOCK), (0, 0), (size + 7, 10),
              (size - 30, 100), (5, 100), (2 * BLOCK, BLOCK), (0, BLOCK)]  # fmt: skip
    for asked in (ranges, np.array(ranges, dtype=np.int64)):  # pairs, or an array of them
        got = rf.source.read_ranges(asked)
        assert [bytes(g) for g in got] == [whole[o : o + n] for o, n in ranges]
    assert rf.source.read_ranges([]) == []
    # empty ranges inside blocks nothing else reads (and past the end) fetch nothing
    before = rf.source.stats.misses
    assert [bytes(g) for g in rf.source.read_ranges([(5 * BLOCK + 5, 0), (size + 9, 4)])] == [
        b"",
        b"",
    ]
    assert rf.source.stats.misses == before
    assert rf.source.stats.misses == 5  # blocks 0 to 3 and the last, each fetched once
    assert rf.source.stats.hits >= 5  # the second read's


def test_bad_cache_arguments(tmp_path):
    with pytest.raises(ValueError, match="cache_limit=5 needs a cache_dir"):
        storage.open_source("http://127.0.0.1:1/x.rec", cache_limit=5)
    with pytest.raises(ValueError, match="cache_limit must be >= 1"):
        BlockCache(str(tmp_path), 0)
    with pytest.raises(ValueError, match="cache_policy"):
        storage.FetchOptions(cache_policy="fifo")


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """48 small JPEGs (id = 100 + key) behind a ranged HTTP server, and the local path."""
    root = tmp_path_factory.mktemp("images")
    rec = str(root / "im.rec")
    with MXIndexedRecordIO(str(root / "im.idx"), rec, "w") as w:
        for key in range(48):
            body = encode(24 + key % 9, 24 + key % 7, seed=key) + bytes(3000)  # padded
            w.write_idx(key, pack(IRHeader(0, float(key % 3), 100 + key, 0), body))
    server = RangeServer({f"/im.{e}": (root / f"im.{e}").read_bytes() for e in ("rec", "idx")})
    yield server, rec
    server.close()


@pytest.mark.parametrize("mode", ["block", "global"])
def test_iterator_epochs_through_a_cache_smaller_than_the_dataset(images, tmp_path, mode):
    """ImageRecordIter(cache_dir=, cache_limit=) gives the local run's batches, epoch after
    epoch, from a cache a third of the dataset, which stays within its limit."""
    server, rec = images
    limit = len(server.files["/im.rec"]) // 3
    args = dict(data_shape=(3, 16, 16), batch_size=6, shuffle=True, shuffle_mode=mode,
                block_parts=2, preprocess_threads=1)  # fmt: skip
    fetch = storage.FetchOptions(cache_block=4096, retries=1)
    with (
        ImageRecordIter(rec, **args) as local,
        ImageRecordIter(
            f"{server.url}/im.rec", cache_dir=str(tmp_path), cache_limit=limit, fetch=fetch, **args
        ) as remote,  # fmt: skip
    ):
        assert remote.records.cached
        for _ in range(2):
            want = [(b.index.copy(), b.data.copy()) for b in local]
            got = [(b.index.copy(), b.data.copy()) for b in remote]
            assert [w[0].tolist() for w in want] == [g[0].tolist() for g in got]
            assert all((w[1] == g[1]).all() for w, g in zip(want, got, strict=True))
            assert sorted(np.concatenate([g[0] for g in got]).tolist()) == list(range(100, 148))
            assert dir_bytes(tmp_path) <= limit
        stats = remote.records.source.stats
        assert stats.hits > 0 and stats.evicted + stats.bypassed > 0


def test_map_style_reader_through_the_cache(images, tmp_path):
    """RecordDataset(cache_dir=, cache_limit=): every sample as from local disk, also in a
    pickled copy (a DataLoader worker), the folder within its limit."""
    server, rec = images
    limit = len(server.files["/im.rec"]) // 2
    local = RecordDataset(rec, (3, 16, 16))
    remote = RecordDataset(f"{server.url}/im.rec", (3, 16, 16), cache_dir=str(tmp_path),
                           cache_limit=limit)  # fmt: skip
    worker = pickle.loads(pickle.dumps(remote))
    for ds in (remote, worker):
        for i in np.random.default_rng(0).permutation(len(local)).tolist():
            image, label = ds[i]
            want_image, want_label = local[i]
            assert (image == want_image).all() and label == want_label
    assert 0 < dir_bytes(tmp_path) <= limit
    assert worker._records.source.stats.hits > 0  # the entries the first one stored


def test_cache_keywords_are_checked_once(images):
    server, _ = images
    config = IterConfig.from_mxnet(f"{server.url}/im.rec", (3, 16, 16), 4, cache_dir="/c",
                                   cache_limit=1 << 20)  # fmt: skip
    assert (config.storage.cache_dir, config.storage.cache_limit) == ("/c", 1 << 20)
    with pytest.raises(ValueError, match="cache_limit=5 needs a cache_dir"):
        IterConfig.from_mxnet(f"{server.url}/im.rec", (3, 16, 16), 4, cache_limit=5)
    with pytest.raises(ValueError, match="cache_limit must be a number of bytes"):
        IterConfig.from_mxnet(f"{server.url}/im.rec", (3, 16, 16), 4, cache_dir="/c",
                              cache_limit=0)  # fmt: skip


# --- a record wrong at the store: fetched again from it, never from the cache ----------------

K, CHECKED_N = DAMAGED_KEY, DAMAGED_N


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    return checked_images(tmp_path_factory.mktemp("checked"))


@pytest.fixture
def damaged(checked):
    store = DamagedStore(checked)
    yield store
    store.server.close()


FETCH = storage.FetchOptions(cache_block=4096, retries=1)


def test_a_record_wrong_at_the_store_is_fetched_again_from_it_not_from_the_cache(damaged, tmp_path):
    """The block was wrong when fetched, so its entry's own check passes; the record's
    checksum does not. Each time, the entry is dropped and the block fetched from the store:
    while the store is wrong, the record is on_error's (marked; or a ChecksumError naming the
    file, byte offset and record); once the object is replaced by a right one, the one refetch
    gives the record, and the good block is what the cache keeps."""
    want = damaged.want
    with RecordFile(damaged.url, fetch=FETCH, cache_dir=str(tmp_path), cache_limit=1 << 20) as rf:
        assert rf.cached and rf.checksums is not None  # "auto": remote data with a sidecar
        got = rf.read_many(range(CHECKED_N), bad="mark")
        assert isinstance(got[K], MismatchedPayload)
        assert [bytes(p) for j, p in enumerate(got) if j != K] == want[:K] + want[K + 1 :]
        assert damaged.sent() == 2  # the first fetch and one refetch, from the store
        assert rf.checksum_stats == {"refetched": 1, "mismatched": 1}
        with pytest.raises(ChecksumError, match="also when fetched again") as info:
            rf.read(K)  # the cached entry (the store's wrong bytes): dropped, fetched again
        assert (info.value.path, info.value.offset, info.value.record_index) == (
            damaged.url, damaged.offset, K)  # fmt: skip
        assert damaged.sent() == 3
        damaged.repair()
        assert bytes(rf.read(K)) == want[K] and damaged.sent() == 4
        assert bytes(rf.read(K)) == want[K] and damaged.sent() == 4  # now a hit
        blocks = len({o // 4096 for o in (damaged.offset, damaged.at)})  # those K spans
        assert rf.source.stats.invalidated == 3 * blocks  # dropped by each refetch
        assert rf.checksum_stats == {"refetched": 3, "mismatched": 2}


def test_the_iterator_skips_and_counts_a_record_wrong_at_the_store(damaged, tmp_path):
    """ImageRecordIter through the cache: the record fetched twice, then skipped and
    counted; on_error="raise" names the file, byte offset and record."""
    args = dict(data_shape=(3, 8, 8), batch_size=4, preprocess_threads=1, fetch=FETCH,
                cache_dir=str(tmp_path / "skip"), cache_limit=1 << 20)  # fmt: skip
    with ImageRecordIter(damaged.url, on_error="skip", **args) as it:
        ids = [int(i) for b in it for i in b.index]
        assert 100 + K not in ids and len(ids) == CHECKED_N
        assert it.stats.skipped == 1 and it.stats.checksum_mismatches == 1
        # the first fetch and the refetch (and the next epoch's read-ahead may have read it
        # again: one more); served from the cache, the refetch would leave this at 1
        assert damaged.sent() >= 2
    args["cache_dir"] = str(tmp_path / "raise")
    with (
        ImageRecordIter(damaged.url, on_error="raise", **args) as it,
        pytest.raises(ChecksumError) as info,
    ):
        list(it)
    assert (info.value.path, info.value.offset, info.value.record_index) == (
        damaged.url, damaged.offset, K)  # fmt: skip


def test_map_style_reader_refetches_past_its_cache(damaged, tmp_path):
    """RecordDataset(cache_dir=, cache_limit=), LRU within a limit under the dataset: a record
    wrong at the store is raised (after its refetch) or replaced and counted; a read that
    finds the wrong bytes in the cache fetches them from the store, once."""
    limit = len(damaged.good) // 2
    kw = dict(cache_dir=str(tmp_path / "c"), cache_limit=limit)
    strict = RecordDataset(damaged.url, (3, 8, 8), **kw)
    with pytest.raises((DecodeError, ChecksumError), match="checksum mismatch"):
        strict[K]
    assert damaged.sent() == 2
    replacing = RecordDataset(damaged.url, (3, 8, 8), on_error="replace", **kw)
    image, _ = replacing[K]  # the cache's entry: dropped, fetched once more, still wrong
    assert not image.any() and "checksum mismatch" in replacing.bad_records[K]  # its .idx key
    assert damaged.sent() == 3
    damaged.repair()
    image, _ = replacing[K]  # the cache still holds the wrong bytes: fetched from the store
    assert image.any() and damaged.sent() == 4
    with Peak(tmp_path / "c") as peak:
        for i in np.random.default_rng(1).permutation(CHECKED_N).tolist():
            image, label = replacing[i]
            assert image.any() and label == i % 3, i
    stats = replacing._records.source.stats
    assert 0 < peak.peak <= limit and stats.evicted > 0 and stats.hits > 0, stats
