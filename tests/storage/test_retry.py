"""Retries on fsspec's memory file system made flaky: transient errors retried, bounded,
named; permanent ones not."""

from __future__ import annotations

import fsspec
import numpy as np
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from recio import storage
from recio.records.reader import RecordFile

from ..storage_helpers import ids_of, write_rec

FAST = storage.FetchOptions(backoff=0.001, max_backoff=0.01, retries=3)


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
