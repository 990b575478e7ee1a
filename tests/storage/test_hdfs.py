"""recio against a real HDFS (tools/hdfs_server.sh): hdfs:// via hdfs-native, webhdfs://."""

from __future__ import annotations

import json
import time
import urllib.request

import numpy as np
import pytest

from recio import storage
from recio.records.reader import RecordFile
from recio.records.recordio import MXIndexedRecordIO
from recio.sampling.sampler import epoch_order
from recio.storage.prefetch import Prefetcher

from ..conftest import _unavailable
from ..delayproxy import DelayProxy
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


def datanode(hdfs_in_use) -> tuple[str, str, int]:
    """The DataNode's registered host name, the address and transfer port the NameNode gives
    out for it (from the NameNode's JMX)."""
    web = hdfs_in_use.urls["RECIO_WEBHDFS_URL"].replace("webhdfs://", "http://")
    query = f"{web}/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo"
    with urllib.request.urlopen(query, timeout=10) as answer:
        live = json.loads(json.load(answer)["beans"][0]["LiveNodes"])
    ((name, info),) = live.items()
    ip, port = info["xferaddr"].rsplit(":", 1)
    return name.rsplit(":", 1)[0], ip, int(port)


def test_hdfs_reads_behind_the_delay_proxy_wait_its_delay(hdfs_prefix, hdfs_in_use):
    """The DataNode behind the delay proxy: it registers as 127.0.0.2 (tools/hdfs_server.sh),
    so a client with dfs.client.use.datanode.hostname connects there, where the proxy listens
    on the DataNode's transfer port. Every block read waits the delay (the proxy counts each
    request the client sends after an answer), and an epoch still gives every record once."""
    host, ip, port = datanode(hdfs_in_use)
    if host == ip:
        _unavailable("HDFS", f"its DataNode registered as {ip}: no address left for a proxy")
    rec = f"{hdfs_prefix}/far.rec"
    write_rec(rec, n=40, size=2000)
    delay = 0.1
    proxy = DelayProxy(port, ip, delay_s=delay, rate=50e6, port=port, host=host, protocol="turns")
    try:
        with RecordFile(rec, storage_options={"dfs.client.use.datanode.hostname": "true"}) as rf:
            opened = proxy.stats["requests"]
            assert opened >= 1  # the .idx and the check at open came through the proxy
            order = epoch_order(40, 0, 1, "global")
            got, reads = [], []  # per batch: (turns through the proxy, seconds)
            for batch in np.array_split(order, 8):
                before, t0 = proxy.stats["requests"], time.perf_counter()
                got += ids_of(rf.read_many(batch))
                reads.append((proxy.stats["requests"] - before, time.perf_counter() - t0))
        assert got == order.tolist()
        # The batches are read one after another, and a batch whose read went through the
        # proxy waited at least its delay. How many turns a read makes depends on how
        # hdfs-native's reads fall into the DataNode's packets (one or two, and a turn
        # may overlap another of the same read), so each read is held to one delay.
        assert sum(turns > 0 for turns, _ in reads) >= 4, reads
        assert all(took >= delay for turns, took in reads if turns), reads
    finally:
        proxy.close()
