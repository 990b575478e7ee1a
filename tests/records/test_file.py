"""RecordFile: zero-copy reads, scans without an .idx, fsspec URLs, closing, truncation."""

import importlib.util
import os
import pickle
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

from recio import storage
from recio.records.file import RecordFile
from recio.records.format import encode_record, unpack
from recio.records.recordio import MXRecordIO
from tests._paths import REPO
from tests.storage_helpers import ids_of, write_rec

from .test_recordio import PAYLOADS, write_indexed


def test_record_file_zero_copy_and_scan_without_idx(tmp_path):
    rec, idx = write_indexed(tmp_path)
    with RecordFile(rec) as rf:
        assert rf.idx_url == idx
        assert isinstance(rf.read(0), memoryview)
        assert [bytes(rf.read(i)) for i in range(len(rf))] == PAYLOADS
        assert [bytes(p) for p in rf.read_many([4, 0])] == [PAYLOADS[4], PAYLOADS[0]]
    os.remove(idx)
    with RecordFile(rec) as rf:
        assert rf.idx_url is None and len(rf) == len(PAYLOADS)
        assert bytes(rf.read(2)) == PAYLOADS[2]


def test_a_missing_idx_is_said_once_per_file_with_the_fix(tmp_path, monkeypatch):
    import warnings

    from recio.errors import IndexWarning
    from recio.records import file

    monkeypatch.setattr(file, "_scanned", set())
    rec, idx = write_indexed(tmp_path)
    os.remove(idx)
    with pytest.warns(IndexWarning) as got, RecordFile(rec):
        pass
    (message,) = [str(w.message) for w in got]
    assert f"{rec} has no index ({idx})" in message and f"`recio index {rec}`" in message
    assert "\n" not in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RecordFile(rec).close()  # once per file
        os.rename(rec, tmp_path / "other.rec")  # another file: its own warning
        with pytest.warns(IndexWarning, match="other.rec has no index"):
            RecordFile(str(tmp_path / "other.rec")).close()


def test_record_file_over_fsspec_memory():
    import fsspec

    fs = fsspec.filesystem("memory")
    data = b"".join(encode_record(p) for p in PAYLOADS)
    fs.pipe("/bucket/m.rec", data)
    with RecordFile("memory://bucket/m.rec") as rf:
        assert [bytes(p) for p in rf.read_many(range(len(rf)))] == PAYLOADS
    r = MXRecordIO("memory://bucket/m.rec", "r")
    assert list(r) == PAYLOADS


def test_record_file_takes_fetch_options_and_cache_dir_and_pickles(memfs, tmp_path):
    write_rec("memory://r/d.rec", n=10, size=100)
    opts = storage.FetchOptions(gap=0, concurrency=2)
    rf = RecordFile("memory://r/d.rec", fetch=opts)
    assert rf.source.fetch == opts
    copy = pickle.loads(pickle.dumps(rf))
    assert copy.source.fetch == opts and ids_of(copy.read_many([3, 1])) == [3, 1]
    with pytest.warns(UserWarning, match="no version"):  # memory:// has no ETag or mtime
        cached = RecordFile("memory://r/d.rec", cache_dir=str(tmp_path))
    assert isinstance(cached.source, storage.MappedSource)
    assert ids_of(cached.read_many([9, 0])) == [9, 0]


def test_duplicate_offsets_read_remotely(memfs):
    """Keys sharing an offset read the same record, locally and remotely (where lengths
    come from the next record start); one warning names the file and the keys."""
    write_rec("memory://dup/d.rec", n=10, size=300)
    text = memfs.cat_file("/dup/d.idx").decode()
    offsets = [int(line.split("\t")[1]) for line in text.splitlines()]
    memfs.pipe("/dup/d.idx", (text + f"10\t{offsets[3]}\n11\t{offsets[9]}\n").encode())
    memfs.rm("/dup/d.crc")  # of the .idx before the edit: refused (tests/records/test_checksum.py)
    with pytest.warns(UserWarning, match=r"memory://dup/d.idx: 2 entries .*key 10 as key 3"):
        rf = RecordFile("memory://dup/d.rec")
    want = list(range(10)) + [3, 9]
    assert ids_of(rf.read_many(range(12))) == want
    assert ids_of([rf.read(i) for i in (10, 3, 11, 9)]) == [3, 3, 9, 9]
    assert (rf.lengths > 0).all()


def test_close_unmaps_closes_and_refuses_reads(tmp_path):
    """After close() reads raise; the map and its descriptor go at once, or, while views
    of it are still held, with the last of them (which stays readable)."""
    rec, _ = write_indexed(tmp_path)
    fds = len(os.listdir("/proc/self/fd"))

    def mapped() -> int:
        with open("/proc/self/maps") as f:
            return sum(rec in line for line in f)

    rf = RecordFile(rec)
    assert bytes(rf.read(0)) == PAYLOADS[0] and mapped() == 1
    rf.close()
    assert mapped() == 0 and len(os.listdir("/proc/self/fd")) == fds
    for read in (lambda: rf.read(0), lambda: rf.read_many([1])):
        with pytest.raises(ValueError, match=f"I/O on a closed RecordFile {rec}"):
            read()
    rf = RecordFile(rec)
    view = rf.read(3)
    rf.close()
    assert bytes(view) == PAYLOADS[3] and mapped() == 1
    del view
    assert mapped() == 0 and len(os.listdir("/proc/self/fd")) == fds


_TRUNCATE_WHILE_OPEN = """
import os, sys
from recio.errors import RecordIOError
from recio.records.reader import RecordFile, read_batch
from recio.records.recordio import MXIndexedRecordIO, MXRecordIO
sys.path.insert(0, {repo!r})
from tests.storage_helpers import write_rec

write_rec("d.rec", n=64, size=16_000)
for reader in ("read", "read_many", "read_batch", "mxnet", "sequential"):
    rf = RecordFile("d.rec")
    mx = MXIndexedRecordIO("d.idx", "d.rec", "r")
    seq = MXRecordIO("d.rec", "r")
    size = os.path.getsize("d.rec")
    offset = int(rf.offsets[40])
    os.truncate("d.rec", offset + 1000)  # record 40 cut; the pages after it gone
    bytes(rf.read(2)), bytes(rf.read_many([1, 3])[1]), mx.read_idx(5)  # still there
    try:
        if reader == "read":
            rf.read(50)
        elif reader == "read_many":
            rf.read_many([0, 60, 1])
        elif reader == "read_batch":  # a bad slot, for the batch reader's on_error
            batch = read_batch(rf, [0, 60, 1], 1)
            assert sorted(batch.problems) == [1], batch.problems
            raise batch.problems[1]
        elif reader == "mxnet":
            mx.read_idx(40)
        else:
            while seq.read() is not None:
                pass
    except RecordIOError as exc:
        print(reader, "|", exc)
    else:
        print(reader, "| no error")
    for r in (rf, mx, seq):
        r.close()
    write_rec("d.rec", n=64, size=16_000)
"""


def test_truncated_while_open_is_an_error_not_sigbus(tmp_path):
    """A local .rec truncated while open (mmap'd): reading a range it lost raises a
    RecordIOError naming the file, instead of SIGBUS killing the process."""
    script = textwrap.dedent(_TRUNCATE_WHILE_OPEN).format(repo=str(REPO))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, (result.returncode, result.stderr)
    lines = result.stdout.splitlines()
    names = ["read", "read_many", "read_batch", "mxnet", "sequential"]
    assert [line.split(" |")[0] for line in lines] == names
    for line in lines:
        assert "d.rec was truncated while open: now" in line and "bytes, was" in line, line


def _bench_index():
    path = REPO / "tools" / "bench_index.py"
    spec = importlib.util.spec_from_file_location("bench_index", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ten_million_entry_idx_opens_in_tens_of_bytes_per_record(tmp_path):
    """A 10M-line .idx (a sparse .rec, records 1 KiB apart, one real record at the end)
    opens within 48 bytes per record at the peak, as tracemalloc (which sees numpy's
    arrays) counts: its text (19 B/record here), the keys and offsets (16), the lengths
    (8) after the text is gone. The list of (key, offset) tuples it replaced peaked at ~220."""
    n = 10_000_000
    rec, idx = _bench_index().write_pair(str(tmp_path / "big"), n)
    tracemalloc.start()
    try:
        rf = RecordFile(rec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 48 * n, f"{peak / n:.1f} bytes per record"
    assert len(rf) == n and rf.keys.dtype == rf.offsets.dtype == np.int64
    assert np.array_equal(rf.keys, np.arange(n)) and np.array_equal(rf.offsets, rf.keys * 1024)
    assert (rf.lengths[:-1] == 1024).all() and rf.lengths[-1] == rf.source.size - rf.offsets[-1]
    assert unpack(rf.read(n - 1))[0].id == n - 1
    rf.close()


def test_record_lengths_in_any_order_of_the_idx(tmp_path):
    """Offsets in file order (the common case) and in any other order give each record
    the bytes up to the next record start of the file."""
    rec, idx = write_indexed(tmp_path)
    with RecordFile(rec) as rf:
        offsets, lengths = rf.offsets.copy(), rf.lengths.copy()
    starts = np.append(offsets, os.path.getsize(rec))
    assert np.array_equal(lengths, np.diff(starts)) and (lengths > 0).all()
    lines = open(idx).read().splitlines(True)
    order = [3, 0, 4, 1, 2]
    open(idx, "w").write("".join(lines[i] for i in order))
    # the sidecar's checksums are in the .idx's order: the reordered .idx is not its write
    with RecordFile(rec, verify_checksums=False) as rf:
        assert np.array_equal(rf.offsets, offsets[order])
        assert np.array_equal(rf.lengths, lengths[order])
        assert [bytes(p) for p in rf.read_many(range(5))] == [PAYLOADS[i] for i in order]
