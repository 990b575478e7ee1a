"""ObjectStoreSource behind recio's capabilities: checksums verified, a record wrong at the
store fetched again (past the block cache too), the cache within its limit, the read-ahead.

The store is a local HTTPS server (tests/rangeserver.py with a certificate the test's CA
signs) serving a dataset with one record's byte flipped, as DamagedStore does over HTTP;
obstore's HTTP store reads it. The S3 tests (test_s3.py, test_upload.py, the conformance
suite) run the same source against SeaweedFS.
"""

from __future__ import annotations

import pytest

from recio import storage
from recio.errors import ChecksumError
from recio.records.checksum import MismatchedPayload
from recio.records.reader import RecordFile
from recio.storage.objectsource import ObjectStoreSource
from recio.storage.prefetch import Prefetcher

from ..rangeserver import RangeServer
from ..storage_helpers import DAMAGED_KEY, DAMAGED_N, checked_images, dir_bytes
from ..tlscert import self_signed

pytest.importorskip("obstore", reason="the cloud extra (obstore)")

K = DAMAGED_KEY
FETCH = storage.FetchOptions(cache_block=4096, retries=1, client="obstore")


class DamagedTLSStore:
    """checked_images over HTTPS with record K's byte flipped; ``repair()`` puts it right."""

    def __init__(self, root) -> None:
        files, self.want, self.at, self.offset = checked_images(root)
        self.good = files["/im.rec"]
        bad = bytearray(self.good)
        bad[self.at] ^= 0x40
        ca, cert, key = self_signed(root)
        self.server = RangeServer({**files, "/im.rec": bytes(bad)}, tls=(cert, key))
        self.url = f"{self.server.url}/im.rec"
        self.options = {"client_kwargs": {"verify": ca}}

    def sent(self) -> int:
        """Ranged GETs of the .rec that carried the flipped byte."""
        return sum(p == "/im.rec" and s <= self.at < e for p, s, e in self.server.ranges)

    def repair(self) -> None:
        self.server.files["/im.rec"] = self.good


@pytest.fixture
def damaged(tmp_path):
    store = DamagedTLSStore(tmp_path)
    yield store
    store.server.close()


def test_a_wrong_record_is_fetched_again_then_reported(damaged):
    with RecordFile(damaged.url, storage_options=damaged.options, fetch=FETCH) as rf:
        assert isinstance(rf.source, ObjectStoreSource) and rf.checksums is not None
        got = rf.read_many(range(DAMAGED_N), bad="mark")
        assert isinstance(got[K], MismatchedPayload)
        assert [bytes(p) for j, p in enumerate(got) if j != K] == damaged.want[:K] + damaged.want[
            K + 1 :
        ]
        assert damaged.sent() == 2  # the fetch and one refetch
        with pytest.raises(ChecksumError) as info:
            rf.read(K)
        assert (info.value.path, info.value.offset, info.value.record_index) == (
            damaged.url, damaged.offset, K)  # fmt: skip
        damaged.repair()
        assert bytes(rf.read(K)) == damaged.want[K]


def test_through_the_block_cache_the_refetch_goes_to_the_store(damaged, tmp_path):
    folder = tmp_path / "blocks"
    limit = 16 << 10  # a fraction of the dataset: evictions, never above the limit
    with RecordFile(damaged.url, storage_options=damaged.options, fetch=FETCH,
                    cache_dir=str(folder), cache_limit=limit) as rf:  # fmt: skip
        assert rf.cached and isinstance(rf.source.source, ObjectStoreSource)
        got = rf.read_many(range(DAMAGED_N), bad="mark")
        assert isinstance(got[K], MismatchedPayload) and damaged.sent() == 2
        damaged.repair()
        assert bytes(rf.read(K)) == damaged.want[K] and damaged.sent() == 3
        for _ in range(2):
            assert [bytes(p) for p in rf.read_many(range(DAMAGED_N))] == damaged.want
            assert dir_bytes(folder) <= limit + 4096  # the entries, and the lock file
        assert rf.source.stats.evicted > 0 and rf.source.stats.invalidated >= 1


def test_the_read_ahead_fetches_batches_in_order(damaged):
    damaged.repair()
    with RecordFile(damaged.url, storage_options=damaged.options, fetch=FETCH) as rf:
        batches = [list(range(i, min(i + 5, DAMAGED_N))) for i in range(0, DAMAGED_N, 5)]
        seen = []
        for indices, payloads in Prefetcher(rf, batches, group_bytes=8 << 10):
            assert [bytes(p) for p in payloads] == [damaged.want[i] for i in indices]
            seen += list(indices)
        assert seen == list(range(DAMAGED_N))
        assert rf.source.stats["requests"] >= 2
