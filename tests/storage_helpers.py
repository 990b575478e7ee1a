"""Small RecordIO files whose every record carries its id, for storage tests."""

from __future__ import annotations

import threading
import time

import numpy as np

from recio import storage
from recio.format import IRHeader, pack, unpack
from recio.reader import RecordFile
from recio.recordio import MXIndexedRecordIO
from recio.sampler import epoch_order
from recio.storage.prefetch import Prefetcher

from .conftest import Server, port_open


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


def read_across_restart(rf: RecordFile, server: Server, n: int = 120) -> None:
    """Read a block-shuffled epoch of ``rf`` (records 0..n-1) while ``server`` (one this run
    started) is stopped after the third batch -- checked down: not ready, every port closed --
    and started again 1.5 s later: every record must arrive once, in order, with its own
    bytes."""

    def run(action: str) -> None:
        done = server.run(action)
        assert done.returncode == 0, f"{server.script} {action}: {done.stdout}{done.stderr}"

    def restart() -> None:
        time.sleep(1.5)
        try:
            run("start")
        except BaseException as exc:  # re-raised in the test's thread
            failed.append(exc)

    rf.source.fetch = storage.FetchOptions(backoff=0.5, max_backoff=3, retries=20, gap=0,
                                           max_request=200_000)  # fmt: skip
    order = epoch_order(n, 0, 0, "block", block_size=10, window=1)
    got: list[int] = []
    failed: list[BaseException] = []
    restarter = threading.Thread(target=restart)
    # one batch fetched ahead at most: the later batches are read after the stop
    batches = Prefetcher(rf, np.array_split(order, 20), depth=1, group_bytes=0)
    try:
        for k, (indices, payloads) in enumerate(batches):
            assert ids_of(payloads) == indices.tolist()
            got += indices.tolist()
            if k == 2:
                assert server.ports(), f"no ports recorded for {server.script}"
                run("stop")
                assert server.run("status", timeout=30).returncode != 0, "still ready after stop"
                still = [p for p in server.ports() if port_open(p)]
                assert not still, f"{server.script} stop left ports {still} open"
                restarter.start()
    finally:
        if restarter.ident is not None:
            restarter.join()
        if failed:
            raise failed[0]
    assert got == order.tolist()
