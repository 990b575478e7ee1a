"""Small RecordIO files whose every record carries its id, for storage tests."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import numpy as np

from recio import storage
from recio.records.format import IRHeader, pack, unpack
from recio.records.reader import RecordFile
from recio.records.recordio import MXIndexedRecordIO
from recio.sampling.sampler import epoch_order
from recio.storage.prefetch import Prefetcher

from .conftest import Server, port_open
from .images import encode
from .rangeserver import RangeServer


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


def write_images(folder, n: int, pad: int = 600) -> dict[str, bytes]:
    """``n`` small JPEGs (id = 100 + key, padded), their .idx and checksum sidecar."""
    with MXIndexedRecordIO(str(folder / "im.idx"), str(folder / "im.rec"), "w") as w:
        for key in range(n):
            body = encode(12 + key % 5, 12 + key % 3, seed=key) + bytes(pad)
            w.write_idx(key, pack(IRHeader(0, float(key % 3), 100 + key, 0), body))
    return {f"/im.{e}": (folder / f"im.{e}").read_bytes() for e in ("rec", "idx", "crc")}


DAMAGED_KEY, DAMAGED_N = 9, 24  # the record damaged in checked_images, of its records


def checked_images(root: Path) -> tuple[dict[str, bytes], list[bytes], int, int]:
    """DAMAGED_N small JPEGs with their checksum sidecar (the files a server serves), each
    record's payload, and where a byte of record DAMAGED_KEY's padding is (flipped there,
    the image still decodes: only the checksum can tell), and that record's offset."""
    files = write_images(root, n=DAMAGED_N)
    with RecordFile(str(root / "im.rec")) as local:
        want = [bytes(local.read(i)) for i in range(DAMAGED_N)]
        at = int(local.offsets[DAMAGED_KEY] + local.lengths[DAMAGED_KEY]) - 10
        return files, want, at, int(local.offsets[DAMAGED_KEY])


class DamagedStore:
    """:func:`checked_images` served with record DAMAGED_KEY's byte flipped; ``sent()``: the
    ranged GETs that carried that byte; ``repair()`` replaces the object with the right one."""

    def __init__(self, checked) -> None:
        files, self.want, self.at, self.offset = checked
        self.good = files["/im.rec"]
        bad = bytearray(self.good)
        bad[self.at] ^= 0x40
        self.server = RangeServer({**files, "/im.rec": bytes(bad)})
        self.url = f"{self.server.url}/im.rec"

    def sent(self) -> int:
        return sum(p == "/im.rec" and s <= self.at < e for p, s, e in self.server.ranges)

    def repair(self) -> None:
        self.server.files["/im.rec"] = self.good


class Peak:
    """The most bytes ``folder`` held while the ``with`` block ran (sampled every ms)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.peak, self._done = folder, 0, threading.Event()
        self._thread = threading.Thread(target=self._sample)

    def _sample(self) -> None:
        while True:
            with contextlib.suppress(FileNotFoundError):  # not made yet
                self.peak = max(self.peak, dir_bytes(self.folder))
            if self._done.wait(0.001):
                return

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def dir_bytes(path: Path) -> int:
    total = 0
    for e in os.scandir(path):
        with contextlib.suppress(FileNotFoundError):  # evicted between listing and stat
            total += e.stat().st_size
    return total
