"""The MXNet-named reader/writer classes, RecordFile, images in records, and the CLI tools."""

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from recio.cli import main as cli
from recio.errors import IndexMismatchError, RecordIOError, TruncatedRecordError
from recio.format import MAGIC_BYTES, IRHeader, encode_record, pack
from recio.reader import RecordFile
from recio.recordio import MXIndexedRecordIO, MXRecordIO, pack_img, unpack_img

from ._paths import GOLDEN

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


def test_record_file_over_fsspec_memory():
    import fsspec

    fs = fsspec.filesystem("memory")
    data = b"".join(encode_record(p) for p in PAYLOADS)
    fs.pipe("/bucket/m.rec", data)
    with RecordFile("memory://bucket/m.rec") as rf:
        assert [bytes(p) for p in rf.read_many(range(len(rf)))] == PAYLOADS
    r = MXRecordIO("memory://bucket/m.rec", "r")
    assert list(r) == PAYLOADS


def test_idx_offset_past_end(tmp_path):
    rec, idx = write_indexed(tmp_path)
    with open(idx, "a") as f:
        f.write("50\t100000\n")
    with pytest.raises(IndexMismatchError) as info:
        RecordFile(rec)
    assert "100000" in str(info.value) and "past the end" in str(info.value)
    assert info.value.record_index == 5
    with pytest.raises(IndexMismatchError):
        MXIndexedRecordIO(idx, rec, "r")


def test_idx_offset_not_a_record_start(tmp_path):
    rec, idx = write_indexed(tmp_path)
    with open(idx, "w") as f:
        f.write("0\t0\n1\t4\n")  # 4 is inside the first record's header
    with RecordFile(rec) as rf, pytest.raises(IndexMismatchError) as info:
        rf.read(1)
    assert info.value.offset == 4 and "not a record start" in str(info.value)
    with MXIndexedRecordIO(idx, rec, "r") as r, pytest.raises(IndexMismatchError):
        r.read_idx(1)


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


def test_cli_info_verify_index(tmp_path, capsys):
    rec, idx = str(tmp_path / "c.rec"), str(tmp_path / "c.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for i in range(6):
            w.write_idx(i, pack(IRHeader(0, float(i % 3), i, 0), b"img%d" % i))
    assert cli(["info", rec]) == 0
    out = capsys.readouterr().out
    assert "records" in out and "6" in out and "index_agrees" in out and "True" in out
    assert cli(["verify", rec]) == 0
    os.remove(idx)
    assert cli(["index", rec]) == 0
    assert open(idx).read().splitlines() == [
        f"{i}\t{o}" for i, o in enumerate(RecordFile(rec).offsets.tolist())
    ]
    # a wrong .idx is detected by info
    open(idx, "w").write("0\t0\n")
    assert cli(["info", rec]) == 1
    # a corrupt file: verify names the byte offset and exits non-zero
    data = bytearray(open(rec, "rb").read())
    data[40:44] = b"\0\0\0\0"
    open(rec, "wb").write(bytes(data))
    assert cli(["verify", rec]) == 1
    assert "at byte" in capsys.readouterr().out


def test_console_script_runs():
    result = subprocess.run(
        [sys.executable, "-m", "recio.cli", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0 and "recio" in result.stdout


def test_errors_are_value_errors():
    assert issubclass(RecordIOError, ValueError)
