"""recio against a real HDFS (tools/hdfs_server.sh): hdfs:// via hdfs-native, webhdfs://."""

from __future__ import annotations

import numpy as np
import pytest

from recio import storage
from recio.reader import RecordFile
from recio.recordio import MXIndexedRecordIO
from recio.sampler import epoch_order
from recio.storage.prefetch import Prefetcher

from ..storage_helpers import ids_of, read_across_restart, write_rec

pytestmark = pytest.mark.hdfs
WEBHDFS = {"user": "root"}


def test_hdfs_write_then_read(hdfs_prefix):
    rec = f"{hdfs_prefix}/d.rec"
    write_rec(rec, n=80, size=30_000)
    rf = RecordFile(rec)
    assert len(rf) == 80 and isinstance(rf.source, storage.FsspecSource)
    order = epoch_order(80, 0, 1, "block", block_size=8, window=2)
    got = []
    for indices, payloads in Prefetcher(rf, np.array_split(order, 10), group_bytes=500_000):
        assert ids_of(payloads) == indices.tolist()
        got += indices.tolist()
    assert got == order.tolist()
    fs, path = storage.filesystem(hdfs_prefix)
    assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(path, detail=False)) == [
        "d.crc",
        "d.idx",
        "d.rec",
    ]


def test_hdfs_aborted_write_leaves_nothing(hdfs_prefix):
    rec = f"{hdfs_prefix}/a.rec"
    with (
        pytest.raises(KeyboardInterrupt),
        MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w") as w,
    ):
        w.write_idx(0, b"x" * 100_000)
        raise KeyboardInterrupt
    fs, path = storage.filesystem(hdfs_prefix)
    assert not fs.exists(path) or fs.ls(path, detail=False) == []


def test_webhdfs_reads_what_hdfs_wrote(hdfs_prefix, webhdfs_prefix):
    name = hdfs_prefix.rsplit("/", 1)[1]
    write_rec(f"{hdfs_prefix}/w.rec", n=30, size=10_000)
    web = webhdfs_prefix.rsplit("/", 1)[0] + f"/{name}/w.rec"
    rf = RecordFile(web, storage_options=WEBHDFS)
    assert ids_of(rf.read_many(range(29, -1, -1))) == list(range(29, -1, -1))


def test_hdfs_missing_file(hdfs_prefix):
    with pytest.raises(FileNotFoundError, match="nope.rec"):
        RecordFile(f"{hdfs_prefix}/nope.rec")


def test_server_restart_mid_read(hdfs_prefix, hdfs_owned_server):
    """NameNode and DataNode stopped mid-epoch, started again: the reads wait or retry
    (hdfs-native reconnects by itself; a NameNode in safe mode is retried by recio). Only on
    a server this run started (else skipped: someone else's is never stopped)."""
    rec = f"{hdfs_prefix}/r.rec"
    write_rec(rec, n=120, size=20_000)
    read_across_restart(RecordFile(rec), hdfs_owned_server)
