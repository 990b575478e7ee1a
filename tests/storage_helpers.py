"""Small RecordIO files whose every record carries its id, for storage tests."""

from __future__ import annotations

import subprocess
import threading
import time

import numpy as np

from recio import storage
from recio.format import IRHeader, pack, unpack
from recio.reader import RecordFile
from recio.recordio import MXIndexedRecordIO
from recio.sampler import epoch_order
from recio.storage.prefetch import Prefetcher

from .conftest import TOOLS


def write_rec(
    rec_url: str, n: int = 200, size: int = 20_000, storage_options: dict | None = None
) -> str:
    """Write ``n`` records of about ``size`` bytes, record i with id i and bytes of i."""
    idx_url = rec_url[:-4] + ".idx"
    rng = np.random.default_rng(0)
    with MXIndexedRecordIO(idx_url, rec_url, "w", storage_options=storage_options) as w:
        for i in range(n):
            body = bytes([i % 251]) * int(size + rng.integers(0, size // 4 + 1))
            w.write_idx(i, pack(IRHeader(0, float(i % 7), i, 0), body))
    return idx_url


def ids_of(payloads) -> list[int]:
    """Record ids, each checked against its body."""
    out = []
    for p in payloads:
        header, body = unpack(p)
        assert bytes(body[:1]) == bytes([header.id % 251]) and len(set(bytes(body[-64:]))) == 1
        out.append(int(header.id))
    return out


def read_across_restart(rf: RecordFile, script: str, n: int = 120) -> None:
    """Read a block-shuffled epoch of ``rf`` (records 0..n-1) while ``tools/<script>``
    stops the server after the third batch and starts it 1.5 s later: every record must
    arrive once, in order, with its own bytes."""

    def run(action: str) -> None:
        subprocess.run([str(TOOLS / script), action], check=True, capture_output=True, timeout=180)

    rf.source.fetch = storage.FetchOptions(backoff=0.5, max_backoff=3, retries=20, gap=0,
                                           max_request=200_000)  # fmt: skip
    order = epoch_order(n, 0, 0, "block", block_size=10, window=1)
    got: list[int] = []
    restarter = threading.Thread(target=lambda: (time.sleep(1.5), run("start")))
    # one batch fetched ahead at most: the later batches are read after the stop
    batches = Prefetcher(rf, np.array_split(order, 20), depth=1, group_bytes=0)
    for k, (indices, payloads) in enumerate(batches):
        assert ids_of(payloads) == indices.tolist()
        got += indices.tolist()
        if k == 2:
            run("stop")
            restarter.start()
    restarter.join()
    assert got == order.tolist()
