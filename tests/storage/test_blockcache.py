"""The bounded block cache: the limit, Belady against LRU, checked entries, sharing."""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from recio import storage
from recio.config import IterConfig
from recio.dataset import RecordDataset
from recio.format import IRHeader, pack
from recio.iterator import ImageRecordIter
from recio.reader import RecordFile
from recio.recordio import MXIndexedRecordIO
from recio.storage.blockcache import NEVER, BlockCache, CachedSource, clock, replay
from recio.storage.prefetch import Prefetcher

from ..images import encode
from ..rangeserver import RangeServer
from ..storage_helpers import ids_of, write_rec

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


def dir_bytes(path: Path) -> int:
    total = 0
    for e in os.scandir(path):
        with contextlib.suppress(FileNotFoundError):  # evicted between listing and stat
            total += e.stat().st_size
    return total


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


_CHILD = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np
    from recio import storage
    from recio.reader import RecordFile
    url, cache, limit, seed, go = sys.argv[1:6]
    fetch = storage.FetchOptions(cache_block=int(sys.argv[6]), retries=1)
    rf = RecordFile(url, fetch=fetch, cache_dir=cache, cache_limit=int(limit))
    while not os.path.exists(go):
        time.sleep(0.001)
    order = np.random.default_rng(int(seed)).permutation(len(rf))
    for batch in np.array_split(order, 10):
        for i, p in zip(batch.tolist(), rf.read_many(batch)):
            assert bytes(p[24:25]) == bytes([i % 251]), i  # after the 24-byte IRHeader
    s = rf.source.stats
    print(s.misses, s.hits, s.waited)
    """
)


def test_two_processes_sharing_a_cache_fetch_each_block_once(served, tmp_path):
    cache, go = tmp_path / "cache", tmp_path / "go"
    size = len(served.files["/d.rec"])
    before = len(served.ranges)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _CHILD,
                f"{served.url}/d.rec",
                str(cache),
                str(4 * size),
                str(seed),
                str(go),
                str(BLOCK),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for seed in (1, 2)
    ]
    go.touch()
    outs = [c.communicate(timeout=120) for c in children]
    for child, (_, err) in zip(children, outs, strict=True):
        assert child.returncode == 0, err
    fetched = [r for r in served.ranges[before:] if r[0] == "/d.rec"]
    covered = np.zeros(size, dtype=np.int64)
    for _, start, end in fetched:
        covered[start:end] += 1
    assert (covered == 1).all(), f"bytes fetched {np.bincount(covered)} times"
    misses = [int(out.split()[0]) for out, _ in outs]
    assert sum(misses) == -(-size // BLOCK)


def test_replay_belady_beats_lru_on_a_loop():
    """Three blocks in a loop, room for two: LRU always misses; Belady keeps two and lets
    the third pass (it is needed last), so after the first round two of three hit."""
    trace = [(b, k) for k, b in enumerate([0, 1, 2] * 5)]
    assert replay(trace, 10, 20, "lru") == 0.0
    assert replay(trace, 10, 20, "belady") == pytest.approx(8 / 15)
    assert replay(trace, 10, 30, "lru") == replay(trace, 10, 30, "belady") == 12 / 15


def test_next_use_follows_the_schedule(tmp_path):
    class Remote:
        url, size = "memory://x", 10 * BLOCK

    src = CachedSource(Remote(), BlockCache(str(tmp_path), 1 << 20), BLOCK, "v1")
    # range 1 spans blocks 0 and 1; block 3 is read twice
    src.schedule([5, 7, 9, 11], [0, BLOCK - 10, 3 * BLOCK, 3 * BLOCK + 5], [10, 20, 5, 5])
    assert src.next_use(0, 4) == 5 and src.next_use(0, 5) == 7 and src.next_use(0, 7) == NEVER
    assert src.next_use(1, 6) == 7 and src.next_use(3, 9) == 11
    assert src.next_use(2, 0) == NEVER and src.next_use(0, None) is None


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
