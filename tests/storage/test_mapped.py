"""MappedSource and CopiedSource: local files mmap'd, zero-copy reads, truncation, repair."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from recio.errors import TruncatedRecordError
from recio.storage.mapped import CopiedSource, MappedSource

from .._paths import REPO


def test_reads_are_views_of_the_map_clipped_at_the_end(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"0123456789")
    with MappedSource(str(path)) as src:
        assert src.size == 10 and src.url == str(path) and src.mapped
        got = src.read_ranges([(2, 3), (8, 5), (10, 1)])
        assert all(isinstance(g, memoryview) for g in got)
        assert [bytes(g) for g in got] == [b"234", b"89", b""]
        assert bytes(src.read(0, 4)) == b"0123"
        assert bytes(src.mapped_view()) == b"0123456789"
    kept = got[0]
    assert bytes(kept) == b"234"  # a view handed out outlives close()
    with pytest.raises(ValueError, match="closed"):
        src.current_size()


def test_an_empty_file_reads_as_empty(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    with MappedSource(str(path), url="memory://e/empty") as src:
        assert src.size == 0 and src.url == "memory://e/empty"
        assert bytes(src.read(0, 5)) == b""


def test_a_range_the_file_lost_while_open_is_a_truncation_not_a_fault(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(bytes(2 * 4096))
    src = MappedSource(str(path))
    try:
        with open(path, "r+b") as f:
            f.truncate(4096)
        assert src.current_size() == 4096 and len(src.current_view()) == 4096
        assert bytes(src.read(0, 16)) == bytes(16)  # what is still there reads
        with pytest.raises(TruncatedRecordError, match="now 4096 bytes, was 8192") as info:
            src.read_ranges([(0, 8), (4000, 200)])
        assert info.value.offset == 4000
    finally:
        src.close()


def test_a_copy_refetches_from_its_origin_and_is_mended_in_place(tmp_path):
    origin_path = tmp_path / "origin"
    origin_path.write_bytes(b"abcdefghij")
    copy_path = tmp_path / "copy"
    copy_path.write_bytes(b"abcdXXghij")  # damaged on the local disk
    opened = []

    def reopen():
        opened.append(MappedSource(str(origin_path), url="memory://o/origin"))
        return opened[-1]

    src = CopiedSource(str(copy_path), "memory://o/origin", reopen)
    assert src.mends and src.mapped and src.url == "memory://o/origin"
    assert bytes(src.read(4, 2)) == b"XX"
    fixed = src.refetch(4, 2)
    assert bytes(fixed) == b"ef" and len(opened) == 1
    assert bytes(src.refetch(0, 1)) == b"a" and len(opened) == 1  # opened once
    src.repair(4, fixed)
    assert bytes(src.read(0, 10)) == b"abcdefghij"  # the shared map sees it at once
    assert copy_path.read_bytes() == b"abcdefghij"
    src.close()
    assert opened[0].closed and src.closed


_GUARD = """
import mmap, os, signal, sys
from recio.errors import TruncatedRecordError
from recio.storage.mapped import MappedSource
open("f.bin", "wb").write(bytes(range(256)) * 256)  # 64 KiB
source = MappedSource("f.bin")
if sys.argv[1] == "guarded":
    os.truncate("f.bin", 10_000)
    assert source.buffer[40_000] == 0  # a page past the end: zeros, not SIGBUS
    with open("f.bin", "r+b") as f:  # the file written again to its old size
        f.truncate(65_536)
    print(source.fault_offset(), source.readable(), len(source.current_view()))
    print(bytes(source.read(0, 4)).hex())
    try:
        source.read(39_000, 2000)
    except TruncatedRecordError as exc:
        print(exc)
    source.close()
else:  # a map recio did not make: the fault is not recio's to absorb
    with open("f.bin", "rb") as f:
        other = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    os.truncate("f.bin", 10_000)
    print(other[40_000])
"""


@pytest.mark.needs_native
def test_a_page_that_faults_reads_as_zeros_and_ends_what_is_readable(tmp_path):
    """NOTE [map guard]: a guarded map's page past the file's end reads as zeros (no SIGBUS)
    and the source is readable only up to that page from then on, even once the file is as
    long as before (its bytes there were not the ones read)."""
    run = [sys.executable, "-c", _GUARD, "guarded"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, (result.returncode, result.stderr)
    extents, head, error = result.stdout.splitlines()
    assert extents.split() == ["36864"] * 3  # fault, readable, view: the page's start
    assert head == "00010203"
    assert "f.bin could not be read past byte 36864" in error and "at byte 39000" in error


@pytest.mark.needs_native
def test_a_fault_outside_recios_maps_still_ends_the_process(tmp_path):
    run = [sys.executable, "-c", _GUARD, "other"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True)
    if "libasan" in os.environ.get("LD_PRELOAD", ""):  # the handler before recio's is ASan's
        assert result.returncode == -signal.SIGABRT and "BUS" in result.stderr, result.stderr
        return
    assert result.returncode == -signal.SIGBUS, (result.returncode, result.stderr)
