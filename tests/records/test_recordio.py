"""The MXNet-named reader/writer classes and images in records (recio.records.recordio)."""

import errno
import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from recio import storage
from recio.errors import IndexMismatchError, TruncatedRecordError
from recio.records.format import MAGIC_BYTES, IRHeader
from recio.records.reader import RecordFile
from recio.records.recordio import MXIndexedRecordIO, MXRecordIO, pack_img, unpack_img
from tests._paths import GOLDEN, REPO

PAYLOADS = [b"hello", b"", b"abcd" + MAGIC_BYTES + b"efgh", bytes(range(256)) * 3, b"xyz"]


def write_indexed(tmp_path, payloads=PAYLOADS, keys=None):
    rec, idx = str(tmp_path / "d.rec"), str(tmp_path / "d.idx")
    keys = keys or list(range(len(payloads)))
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for k, p in zip(keys, payloads, strict=True):
            w.write_idx(k, p)
    return rec, idx


def test_sequential_round_trip_and_end(tmp_path):
    path = str(tmp_path / "s.rec")
    with MXRecordIO(path, "w") as w:
        for p in PAYLOADS:
            w.write(p)
    r = MXRecordIO(path, "r")
    assert [r.read() for _ in PAYLOADS] == PAYLOADS
    assert r.read() is None  # MXNet's end-of-file convention
    r.reset()
    assert list(r) == PAYLOADS  # iteration ends with StopIteration
    r.close()


def test_writer_publishes_only_on_close(tmp_path):
    path = tmp_path / "w.rec"
    w = MXRecordIO(str(path), "w")
    w.write(b"data")
    assert not path.exists()
    w.close()
    assert path.exists()
    with pytest.raises(RuntimeError), MXRecordIO(str(tmp_path / "x.rec"), "w") as w2:
        w2.write(b"partial")
        raise RuntimeError("interrupted")
    assert not (tmp_path / "x.rec").exists()
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".partial")]


def test_indexed_random_access(tmp_path):
    rec, idx = write_indexed(tmp_path, keys=[10, 3, 7, 1, 99])
    with MXIndexedRecordIO(idx, rec, "r") as r:
        assert r.keys == [10, 3, 7, 1, 99]
        assert r.read_idx(7) == PAYLOADS[2]
        assert r.read_idx(10) == PAYLOADS[0]
        assert r.read() == PAYLOADS[1]  # sequential after a seek, as in MXNet
    assert open(idx).read().splitlines()[1] == "3\t16"


def test_pickle_reopens_without_closing(tmp_path):
    rec, idx = write_indexed(tmp_path)
    r = MXIndexedRecordIO(idx, rec, "r")
    r.read_idx(2)
    clone = pickle.loads(pickle.dumps(r))
    assert r.is_open and clone.is_open
    assert clone.read() == r.read() == PAYLOADS[3]
    assert r.read_idx(0) == clone.read_idx(0) == PAYLOADS[0]
    rf = RecordFile(rec)
    assert bytes(pickle.loads(pickle.dumps(rf)).read(3)) == PAYLOADS[3]
    w = MXRecordIO(str(tmp_path / "w.rec"), "w")
    with pytest.raises(TypeError, match="writer"):
        pickle.dumps(w)
    w.close()


def test_truncated_file_reported_by_reader(tmp_path):
    rec, _ = write_indexed(tmp_path)
    data = open(rec, "rb").read()
    open(rec, "wb").write(data[:-6])
    r = MXRecordIO(rec, "r")
    for _ in range(4):
        r.read()
    with pytest.raises(TruncatedRecordError) as info:
        r.read()
    assert info.value.path == rec and info.value.record_index == 4


def test_pack_img_round_trip_png_lossless():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (16, 20, 3), dtype=np.uint8)
    s = pack_img(IRHeader(0, 2.0, 5, 0), img, img_fmt=".png")
    header, out = unpack_img(s)
    assert header.label == 2.0 and header.id == 5
    np.testing.assert_array_equal(out, img)
    _, gray = unpack_img(s, iscolor=0)
    assert gray.shape == (16, 20)


def test_unpack_img_golden():
    spec = json.loads((GOLDEN / "golden.json").read_text())["images3"]
    with MXIndexedRecordIO(str(GOLDEN / "images3.idx"), str(GOLDEN / "images3.rec"), "r") as r:
        yy, xx = np.mgrid[0:24, 0:32]
        img_a = np.stack([(xx * 8) % 256, (yy * 10) % 256, ((xx + yy) * 4) % 256], -1)
        for key, want in zip(r.keys, spec["records"], strict=True):
            header, img = unpack_img(r.read_idx(key))
            assert list(img.shape) == want["decoded_shape_bgr"]
            if key == 2:  # PNG: lossless, BGR as MXNet/OpenCV returned it
                np.testing.assert_array_equal(img, img_a[:16, :16].astype(np.uint8))
            if key == 0:  # JPEG q95
                assert np.abs(img.astype(int) - img_a).mean() < 6


class _FullDisk:
    """A file on a full disk: writes are buffered, and writing them out fails (ENOSPC)."""

    def __init__(self, file) -> None:
        self._file = file

    def write(self, data) -> int:
        return len(data)

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def fileno(self) -> int:
        return self._file.fileno()

    def close(self) -> None:
        self._file.close()
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("failing", [".idx", ".rec", ".crc"])
def test_full_disk_on_close_leaves_the_old_pair(tmp_path, monkeypatch, failing):
    """The new .rec, .idx and checksum sidecar are all written out before any is renamed: a
    write that fails (the .idx's, after the .rec's succeeded) leaves the old files byte for
    byte."""
    rec, idx = write_indexed(tmp_path, payloads=[b"old"])
    crc = str(tmp_path / "d.crc")
    before = {p: open(p, "rb").read() for p in (rec, idx, crc)}

    class FullDiskFor(storage.AtomicOutput):
        def __init__(self, url, *args, **kwargs):
            super().__init__(url, *args, **kwargs)
            if url.endswith(failing):
                self._file = _FullDisk(self._file)

    monkeypatch.setattr(storage, "AtomicOutput", FullDiskFor)
    w = MXIndexedRecordIO(idx, rec, "w")
    for i in range(600):
        w.write_idx(i, b"new record %d" % i)
    with pytest.raises(OSError) as info:
        w.close()
    assert info.value.errno == errno.ENOSPC
    assert {p: open(p, "rb").read() for p in (rec, idx, crc)} == before
    assert sorted(os.listdir(tmp_path)) == ["d.crc", "d.idx", "d.rec"]  # no .partial left
    with MXIndexedRecordIO(idx, rec, "r") as r:
        assert r.keys == [0] and r.read_idx(0) == b"old"


def test_mixed_pair_is_detected(tmp_path):
    """A new .rec beside the old .idx (a publish interrupted between the renames) is not
    read as a short file without a word: the readers warn; the other way round fails."""
    old = tmp_path / "old"
    new = tmp_path / "new"
    old.mkdir()
    new.mkdir()
    old_rec, old_idx = write_indexed(old, payloads=[b"old"])
    new_rec, new_idx = write_indexed(new, payloads=[b"new %d" % i for i in range(600)])
    with pytest.raises(IndexMismatchError, match=r"old/d.crc was taken of a 12-byte .rec"):
        RecordFile(new_rec, old_idx)  # the old sidecar beside the old .idx knows (by default)
    with pytest.warns(UserWarning, match=r"does not index .*new/d.rec to its end"):
        RecordFile(new_rec, old_idx, verify_checksums=False).close()
    with pytest.warns(UserWarning, match="key 0, at byte 0.* ends at byte 16, the file at 9600"):
        MXIndexedRecordIO(old_idx, new_rec, "r").close()
    with pytest.raises(IndexMismatchError, match="past the end"):
        RecordFile(old_rec, new_idx)
    # A pair written together raises no warning (MXNet's files included).
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RecordFile(new_rec).close()
        RecordFile(str(GOLDEN / "images3.rec")).close()


def _run(script: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


_WRITE_3_OF_10 = """
from recio.records.recordio import MXIndexedRecordIO, MXRecordIO
def write(w, n):
    for i in range(n):
        w.write_idx(i, b"record %d" % i) if hasattr(w, "write_idx") else w.write(b"r")
"""


@pytest.mark.parametrize(
    "body",
    [
        # at module level, the exception unhandled
        """
        w = MXIndexedRecordIO("d.idx", "d.rec", "w")
        s = MXRecordIO("s.rec", "w")
        write(w, 3); write(s, 3)
        raise RuntimeError("died after 3 of 10 records")
        """,
        # inside a function, the exception unhandled
        """
        def convert():
            w = MXIndexedRecordIO("d.idx", "d.rec", "w")
            s = MXRecordIO("s.rec", "w")
            write(w, 3); write(s, 3)
            raise KeyboardInterrupt
        convert()
        """,
        # dropped while its exception is handled
        """
        try:
            w = MXIndexedRecordIO("d.idx", "d.rec", "w")
            s = MXRecordIO("s.rec", "w")
            write(w, 3); write(s, 3)
            raise RuntimeError("died after 3 of 10 records")
        except RuntimeError:
            del w, s
        print("handled")
        """,
    ],
    ids=["module", "function", "dropped-in-except"],
)
def test_writer_unwound_by_an_exception_is_not_published(tmp_path, body):
    result = _run(_WRITE_3_OF_10 + textwrap.dedent(body), tmp_path)
    assert "Traceback" in result.stderr or "handled" in result.stdout, result.stderr
    assert os.listdir(tmp_path) == [], result.stderr  # no output, no .partial


def test_writer_dropped_normally_is_published(tmp_path):
    """As in MXNet, ``del w`` (no exception) flushes: MXNet scripts keep working. So do
    writers opened while an exception is handled, and those caught and handled."""
    result = _run(
        _WRITE_3_OF_10
        + """
w = MXIndexedRecordIO("d.idx", "d.rec", "w")
write(w, 3)
del w
try:
    raise ValueError("handled before the writer was opened")
except ValueError:
    s = MXRecordIO("s.rec", "w")
    write(s, 2)
    del s
def inner():
    x = MXRecordIO("x.rec", "w")
    write(x, 1)
    raise LookupError
try:
    inner()
except LookupError:
    pass
g = MXRecordIO("g.rec", "w")  # open at a normal exit: closed by the interpreter
write(g, 4)
""",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(tmp_path)) == ["d.crc", "d.idx", "d.rec", "g.rec", "s.rec", "x.rec"]
    with MXIndexedRecordIO(str(tmp_path / "d.idx"), str(tmp_path / "d.rec"), "r") as r:
        assert [r.read_idx(k) for k in r.keys] == [b"record 0", b"record 1", b"record 2"]
    assert len(list(MXRecordIO(str(tmp_path / "g.rec"), "r"))) == 4


def _maps(path) -> int:
    with open("/proc/self/maps") as f:
        return sum(str(path) in line for line in f)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc (Linux)")
def test_reader_close_unmaps_and_refuses_reads(tmp_path):
    rec, idx = write_indexed(tmp_path)
    fds = len(os.listdir("/proc/self/fd"))
    for reader in (lambda: MXRecordIO(rec, "r"), lambda: MXIndexedRecordIO(idx, rec, "r")):
        r = reader()
        assert r.read() == PAYLOADS[0] and _maps(rec) == 1
        r.close()
        assert _maps(rec) == 0 and len(os.listdir("/proc/self/fd")) == fds
        with pytest.raises(ValueError, match="closed"):
            r.read()
