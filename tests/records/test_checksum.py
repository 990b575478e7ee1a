"""Per-record CRC32C sidecars (recio.records.checksum): written, covered bytes, verified on read."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys

import crc32c as crc32c_lib
import numpy as np
import pytest

from recio.cli import main as cli
from recio.errors import ChecksumError, DecodeError, IndexMismatchError, RecordIOError
from recio.frameworks.dataset import RecordDataset
from recio.pipeline.iterator import ImageRecordIter
from recio.records import checksum
from recio.records.checksum import (
    HEADER_SIZE,
    frame_ends,
    load_sidecar,
    parse_sidecar,
    record_crcs,
    sidecar_bytes,
    sidecar_path,
)
from recio.records.format import MAGIC_BYTES, IRHeader, pack
from recio.records.reader import RecordFile, read_batch
from recio.records.recordio import MXIndexedRecordIO
from tests._paths import GOLDEN
from tests.conftest import needs_dali
from tests.images import encode

N = 24


def write_set(folder, n=N, checksums=True, name="d"):
    """n tiny JPEG records (16x16, id 100 + key, label key % 3); returns (rec, idx)."""
    rec, idx = str(folder / f"{name}.rec"), str(folder / f"{name}.idx")
    with MXIndexedRecordIO(idx, rec, "w", checksums=checksums) as w:
        for key in range(n):
            image = encode(16, 16, seed=key)
            w.write_idx(key, pack(IRHeader(0, float(key % 3), 100 + key, 0), image))
    return rec, idx


def offsets_of(idx):
    return [int(line.split("\t")[1]) for line in open(idx).read().splitlines()]


LABEL_HIGH_BYTE = 8 + 7  # frame header, then the IRHeader's flag and the label's top byte


def flip(data: bytearray, at: int) -> None:
    data[at] ^= 0x80


def damage_label(rec, idx, key):
    """Flip the sign of record ``key``'s label: the image still decodes, the label is wrong."""
    data = bytearray(open(rec, "rb").read())
    flip(data, offsets_of(idx)[key] + LABEL_HIGH_BYTE)
    open(rec, "wb").write(bytes(data))


# --- the algorithm, the format, the covered bytes -------------------------------------------


def test_crc32c_is_castagnoli():
    """RFC 3720's check value, and the 32 bytes of zeros of its B.4 vectors."""
    from recio.records.checksum import crc32c

    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"6789", crc32c(b"12345")) == 0xE3069283


def test_sidecar_round_trip_and_damage_named(tmp_path):
    data = sidecar_bytes([1, 0xFFFFFFFF, 7], rec_size=1234)
    got = parse_sidecar(data, "x.crc")
    assert got.table.tolist() == [1, 0xFFFFFFFF, 7] and got.rec_size == 1234
    assert data[:8] == b"RECIOCRC" and len(data) == HEADER_SIZE + 12
    for cut, match in [
        (b"NOTACRC!" + data[8:], "magic"),
        (data[:-1], "announces 3 checksums"),
        (data[:-4] + struct.pack("<I", 8), "table does not match"),
        (data[:16] + bytes([data[16] ^ 1]) + data[17:], "header does not match"),
        (data[:10], "shorter than"),
    ]:
        with pytest.raises(RecordIOError, match=match) as info:
            parse_sidecar(cut, "x.crc")
        assert "x.crc" in str(info.value)


def test_sidecar_names():
    assert sidecar_path("a/t.rec", "a/t.idx") == "a/t.crc"
    assert sidecar_path("a/t.rec") == "a/t.crc"
    assert sidecar_path("s3://b/t.rec", "s3://b/other.idx") == "s3://b/other.crc"
    assert sidecar_path("a/t.bin") == "a/t.bin.crc"


def test_checksums_cover_every_frame_as_mxnet_wrote_it(tmp_path):
    """Over MXNet's own files: a record's CRC is of its bytes from its first frame header
    to the end of its last frame's data (frames from golden.json, not from recio)."""
    spec = json.loads((GOLDEN / "golden.json").read_text())
    for name in ("bytes5", "magic_edges"):
        data = (GOLDEN / f"{name}.rec").read_bytes()
        frames = spec[name]["frames"]
        want = []
        for record in spec[name]["records"]:
            mine = [f for f in frames if f["offset"] >= record["offset"]]
            k = next(i for i, f in enumerate(mine) if f["cflag"] in (0, 3))
            end = mine[k]["offset"] + 8 + mine[k]["length"]
            want.append(crc32c_lib.crc32c(data[record["offset"] : end]))
        with RecordFile(str(GOLDEN / f"{name}.rec"), verify_checksums=False) as records:
            assert record_crcs(records).tolist() == want
        assert any(f["cflag"] == 1 for f in frames)  # multi-frame records are among them


def test_frame_ends_fast_and_walked_agree():
    from recio.records.format import encode_record

    parts = [b"abc", b"x" * 8 + MAGIC_BYTES + b"yyyy", b"", MAGIC_BYTES]
    frames = [encode_record(p) for p in parts]
    offsets = np.cumsum([0] + [len(f) for f in frames[:-1]])
    view = memoryview(b"".join(frames))
    ends = frame_ends(view, offsets)
    assert ends.tolist() == [8 + 3, offsets[1] + 8 + 8 + 8 + 4, offsets[2] + 8, len(view)]


@pytest.mark.needs_native
@pytest.mark.parametrize("impl", ["default", "table"])
def test_native_crc32c_is_the_librarys(impl, tmp_path):
    """The extension's CRC32C (SSE4.2, or its table fallback) against the crc32c package, on
    every length and alignment up to 70 bytes, the lengths either side of where the three
    chains of 8192 and of 256 bytes start (NOTE [three streams] in native/crc32c.c) and a
    large buffer, and its batch of records against the per-record Python path, multi-frame
    records and MXNet's files included."""
    script = """
import os, sys, crc32c, numpy as np
import recio._native as n
from recio.records import checksum
from recio.records.reader import RecordFile
data = os.urandom(1 << 16)
rounds = [3 * 256, 3 * 8192, 3 * 8192 + 3 * 256, 2 * 3 * 8192]
for start in range(9):
    for k in list(range(70)) + [r + d for r in rounds for d in (-9, -1, 0, 1, 8, 100)]:
        piece = data[start:start + k]
        assert n.crc32c(piece) == crc32c.crc32c(piece), (start, k)
want = crc32c.crc32c(data)
assert n.crc32c(data) == want and n.crc32c(data[5:], n.crc32c(data[:5])) == want
for rec in sys.argv[1:]:
    with RecordFile(rec, verify_checksums=False) as r:
        view, offsets = r.local_view(np.arange(len(r))), r.offsets
        got = checksum.frame_crcs(view, offsets)
        assert (got == checksum.frame_crcs(view, offsets, native=False)).all(), rec
        extents = [view[o : o + k] for o, k in zip(offsets.tolist(), r.lengths.tolist())]
        extents[0] = bytes(8)  # frames that do not chain
        fast, slow = checksum.extent_crcs(extents), checksum.extent_crcs(extents, native=False)
        assert (fast[0] == slow[0]).all() and (fast[1] == slow[1]).all(), rec
        assert (fast[0][1:] == got[1:]).all() and fast[1][0] == -1, rec
print(n.CRC32C)
"""
    env = dict(os.environ)
    if impl == "table":
        env["RECIO_CRC32C"] = "table"
    golden = [str(GOLDEN / f"{name}.rec") for name in ("bytes5", "magic_edges", "images3")]
    done = subprocess.run(
        [sys.executable, "-c", script, *golden], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("table" if impl == "table" else "sse4.2")


def test_frames_that_do_not_chain_are_named_on_both_paths():
    from recio.records.format import encode_record

    view = memoryview(encode_record(b"abcd") + encode_record(b"x" * 9))
    for native in (True, False):
        assert len(frame_ends(view, np.array([0, 12]))) == 2
        with pytest.raises(RecordIOError, match="bad magic.* at byte 4 of f.rec"):
            checksum.frame_crcs(view, np.array([0, 4]), "f.rec", native=native)
        with pytest.raises(RecordIOError, match="at byte 12 of f.rec"):
            checksum.frame_crcs(view[:20], np.array([12]), "f.rec", native=native)


# --- the writer, im2rec, `recio checksum` ---------------------------------------------------


def test_writer_publishes_the_sidecar_with_the_pair(tmp_path):
    rec, idx = write_set(tmp_path, n=5)
    sidecar = load_sidecar(str(tmp_path / "d.crc"))
    assert sidecar.rec_size == os.path.getsize(rec) and len(sidecar) == 5
    with RecordFile(rec, verify_checksums=False) as records:
        assert (record_crcs(records) == sidecar.table).all()
    write_set(tmp_path, n=3, checksums=False, name="none")
    assert not (tmp_path / "none.crc").exists()
    aborted = MXIndexedRecordIO(str(tmp_path / "x.idx"), str(tmp_path / "x.rec"), "w")
    with pytest.raises(RuntimeError), aborted as w:
        w.write_idx(0, b"abc")
        raise RuntimeError
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("x")) == []


def test_checksum_command_agrees_with_the_writer_and_refuses_to_hide_damage(tmp_path, capsys):
    rec, idx = write_set(tmp_path)
    written = (tmp_path / "d.crc").read_bytes()
    (tmp_path / "d.crc").unlink()
    assert cli(["checksum", rec]) == 0
    assert (tmp_path / "d.crc").read_bytes() == written
    assert cli(["checksum", rec]) == 1  # there and agrees: nothing to do
    assert "already agrees" in capsys.readouterr().err
    damage_label(rec, idx, 7)
    assert cli(["checksum", rec]) == 1
    err = capsys.readouterr().err
    assert "1 record of" in err and f"record 7, at byte {offsets_of(idx)[7]}" in err
    assert (tmp_path / "d.crc").read_bytes() == written
    assert cli(["checksum", "--force", rec]) == 0
    assert cli(["verify", rec]) == 0


def test_verify_reports_each_damaged_record(tmp_path, capsys):
    rec, idx = write_set(tmp_path)
    assert cli(["verify", rec]) == 0
    assert f"{N} checksums match" in capsys.readouterr().out
    damage_label(rec, idx, 3)
    damage_label(rec, idx, 20)
    assert cli(["verify", rec]) == 1
    out = capsys.readouterr().out.splitlines()
    offsets = offsets_of(idx)
    assert f"at byte {offsets[3]} of {rec} (record 3) (key 3)" in out[0]
    assert f"at byte {offsets[20]} of {rec} (record 20) (key 20)" in out[1]
    assert "checksum mismatch" in out[0] and str(tmp_path / "d.crc") in out[0]
    sidecar = tmp_path / "d.crc"
    assert out[2] == f"FAIL {rec}: 2 records of {N} do not match the checksums in {sidecar}"


def test_shards_from_im2rec_checksum_and_verify(tmp_path, capsys):
    from recio import im2rec

    folder = tmp_path / "img" / "a"
    folder.mkdir(parents=True)
    for i in range(6):
        (folder / f"{i}.jpg").write_bytes(encode(16, 16, seed=i))
    prefix = str(tmp_path / "s")
    assert im2rec.main(["--list", "--recursive", prefix, str(tmp_path / "img")]) == 0
    assert im2rec.main(["--shards", "2", "--pass-through", prefix, str(tmp_path / "img")]) == 0
    for k in range(2):
        stem = f"{prefix}-{k:05d}-of-00002"
        with RecordFile(stem + ".rec", verify_checksums=True) as records:
            assert len(records.checksums) == 3 == len(records)
    assert cli(["verify", prefix]) == 0
    (tmp_path / "s-00001-of-00002.crc").unlink()
    assert cli(["checksum", prefix]) == 1  # shard 0's agrees; shard 1's is written
    assert (tmp_path / "s-00001-of-00002.crc").exists()
    assert "1 of 2 shards refused" in capsys.readouterr().err


# --- verified on read -----------------------------------------------------------------------


def test_local_reads_verified_when_asked(tmp_path):
    rec, idx = write_set(tmp_path)
    damage_label(rec, idx, 5)
    with RecordFile(rec, verify_checksums=False) as plain:  # the check turned off
        assert plain.checksums is None and len(plain.read(5))
    with RecordFile(rec) as records:  # "auto": a local file is checked where a sidecar is
        with pytest.raises(ChecksumError) as info:
            records.read(5)
        error = info.value
        assert (error.path, error.offset, error.record_index) == (rec, offsets_of(idx)[5], 5)
        with pytest.raises(ChecksumError):
            records.read_many([4, 5])
        marked = records.read_many([4, 5, 6], bad="mark")
        assert len(marked[0]) and marked[1] == b"" and marked[1].error.record_index == 5
        batch = read_batch(records, np.arange(8), 1)
        assert list(batch.problems) == [5] and isinstance(batch.problems[5], ChecksumError)
        assert batch.ids[5] == 5 and batch.labels[4, 0] == 1.0
        assert records.checksum_stats["mismatched"] >= 3


def test_the_setting_is_checked_and_travels(tmp_path):
    import pickle

    from recio.pipeline.config import Storage

    rec, _ = write_set(tmp_path, n=3)
    with pytest.raises(ValueError, match="verify_checksums must be True, False or"):
        Storage(verify_checksums="yes")
    with pytest.raises(ValueError, match="verify_checksums"):
        RecordFile(rec, verify_checksums="always")
    with RecordFile(rec, verify_checksums=True) as records:
        copy = pickle.loads(pickle.dumps(records))
        assert copy.verify_checksums is True and copy.checksums is not None
        copy.close()


def test_sidecar_of_another_write_is_refused(tmp_path):
    rec, idx = write_set(tmp_path)
    shutil.copy(tmp_path / "d.crc", tmp_path / "keep.crc")
    write_set(tmp_path, n=N - 1, checksums=False)  # new pair, old sidecar
    with pytest.raises(IndexMismatchError, match="holds 24 checksums, but .* lists 23") as info:
        RecordFile(rec, verify_checksums=True)
    assert info.value.path == str(tmp_path / "d.crc")
    short = sidecar_bytes(load_sidecar(str(tmp_path / "keep.crc")).table[:-1], rec_size=5)
    (tmp_path / "d.crc").write_bytes(short)
    with pytest.raises(IndexMismatchError, match="5-byte .rec"):
        RecordFile(rec, verify_checksums=True)
    (tmp_path / "d.crc").unlink()
    with pytest.raises(FileNotFoundError, match="recio checksum"):
        RecordFile(rec, verify_checksums=True)
    RecordFile(rec, verify_checksums="auto").close()


def put_remote(memfs, folder, name="d"):
    for ext in ("rec", "idx", "crc"):
        memfs.pipe(f"/ck/{name}.{ext}", (folder / f"{name}.{ext}").read_bytes())
    return f"memory://ck/{name}.rec"


def test_remote_corruption_on_the_wire_is_fetched_again(tmp_path, memfs, monkeypatch):
    """A byte flipped in transit: caught, fetched once more, and the read gets the record."""
    rec, idx = write_set(tmp_path)
    url = put_remote(memfs, tmp_path)
    at = offsets_of(idx)[9] + LABEL_HIGH_BYTE
    real = type(memfs).cat_file
    flipped = []

    def on_the_wire(self, path, start=None, end=None, **kw):
        data = real(self, path, start, end, **kw)
        if path.endswith(".rec") and start is not None and start <= at < end and not flipped:
            flipped.append(start)
            data = bytearray(data)
            flip(data, at - start)
            data = bytes(data)
        return data

    monkeypatch.setattr(type(memfs), "cat_file", on_the_wire)
    with RecordFile(url) as records:  # "auto": remote data is verified
        assert records.checksums is not None
        payloads = records.read_many(range(N))
        assert flipped and records.checksum_stats == {"refetched": 1, "mismatched": 0}
        with RecordFile(rec) as local:
            assert [bytes(p) for p in payloads] == [bytes(local.read(i)) for i in range(N)]


def test_remote_damage_is_on_errors_to_handle(tmp_path, memfs):
    """A record damaged in the store: fetched twice, then skipped and counted, or raised."""
    rec, idx = write_set(tmp_path)
    damage_label(rec, idx, 11)
    url = put_remote(memfs, tmp_path)
    args = dict(data_shape=(3, 16, 16), batch_size=8, preprocess_threads=1)
    with ImageRecordIter(url, on_error="skip", **args) as it:
        ids = np.concatenate([b.index for b in it])
        assert 111 not in ids and len(ids) == N and it.stats.checksum_mismatches == 1
        assert it.stats.skipped == 1 and "checksum mismatch" in it.stats.bad_records[11]
        stats = it.records.checksum_stats  # (the next epoch's read-ahead may be reading it)
        assert stats["refetched"] >= stats["mismatched"] >= 1
    with RecordFile(url) as records:
        with pytest.raises(ChecksumError, match="also when fetched again"):
            records.read_many(range(N))
        assert records.checksum_stats == {"refetched": 1, "mismatched": 1}
    with ImageRecordIter(url, on_error="raise", **args) as it, pytest.raises(ChecksumError) as info:
        list(it)
    assert info.value.record_index == 11 and info.value.path == url
    assert f"at byte {offsets_of(idx)[11]} of {url} (record 11)" in str(info.value)
    with ImageRecordIter(url, verify_checksums=False, **args) as it:  # the control
        labels = {int(i): float(v) for b in it for i, v in zip(b.index, b.label, strict=True)}
        assert labels[111] == -2.0  # the damage is silent without the checksum


def the_copy(cache):
    (copy,) = [p for p in cache.iterdir() if p.name.endswith("d.rec")]
    return copy


def rot(path, at: int) -> None:
    """Flip one byte of ``path`` in place (a disk's rot under a mapped copy)."""
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x80]))


def test_a_damaged_cached_copy_is_mended_from_the_store(tmp_path, memfs):
    """cache_dir: the copy is read from the map and checked; a record that rotted in the copy
    (its label, its frame's length word) is fetched from the store and written over the copy."""
    rec, idx = write_set(tmp_path)
    url = put_remote(memfs, tmp_path)
    cache = tmp_path / "cache"
    offsets = offsets_of(idx)
    with RecordFile(rec) as local:
        expected = [bytes(local.read(i)) for i in range(N)]
    with pytest.warns(UserWarning, match="no version"), RecordFile(url, cache_dir=str(cache)) as rf:
        assert rf.is_local and rf.checksums is not None
        assert bytes(rf.read(4)) == expected[4]
        copy = the_copy(cache)
        rot(copy, offsets[4] + LABEL_HIGH_BYTE)
        rot(copy, offsets[7] + 5)  # the length word: the frames no longer chain
        assert bytes(rf.read(4)) == expected[4]
        assert [bytes(p) for p in rf.read_many(range(N))] == expected
        assert rf.checksum_stats == {"refetched": 2, "mismatched": 0}
        assert copy.read_bytes() == open(rec, "rb").read()  # mended in place


@pytest.mark.filterwarnings("ignore:cache_dir")  # memory:// files have no version
def test_a_cached_copy_damaged_in_the_store_too_is_reported(tmp_path, memfs):
    rec, idx = write_set(tmp_path)
    url = put_remote(memfs, tmp_path)
    cache = tmp_path / "cache"
    with RecordFile(url, cache_dir=str(cache)) as rf:
        at = offsets_of(idx)[4] + LABEL_HIGH_BYTE
        rot(the_copy(cache), at)
        damaged = bytearray(memfs.cat_file("/ck/d.rec"))
        flip(damaged, at)
        memfs.pipe("/ck/d.rec", bytes(damaged))
        with pytest.raises(ChecksumError, match=r"also when fetched again.*\(record 4\)"):
            rf.read(4)
        assert rf.checksum_stats == {"refetched": 1, "mismatched": 1}


@pytest.mark.needs_native
@pytest.mark.filterwarnings("ignore:cache_dir")
def test_iterator_over_a_damaged_cached_copy_gets_the_stores_records(tmp_path, memfs):
    """The iterator's native batches over a copy: a rotted record is mended before decoding."""
    rec, idx = write_set(tmp_path)
    url = put_remote(memfs, tmp_path)
    cache = tmp_path / "cache"
    args = dict(data_shape=(3, 16, 16), batch_size=8, preprocess_threads=2, on_error="raise")
    with ImageRecordIter(rec, verify_checksums=True, **args) as it:
        want = [(b.data.copy(), b.label.copy()) for b in it]
    with ImageRecordIter(url, cache_dir=str(cache), **args) as it:
        rot(the_copy(cache), offsets_of(idx)[10] + LABEL_HIGH_BYTE)
        rot(the_copy(cache), offsets_of(idx)[20] + 40)  # inside the JPEG
        got = [(b.data.copy(), b.label.copy()) for b in it]
        assert it.records.checksum_stats == {"refetched": 2, "mismatched": 0}
        assert it.stats.checksum_mismatches == 0
    assert len(got) == len(want)
    for (data, label), (data0, label0) in zip(got, want, strict=True):
        assert np.array_equal(data, data0) and np.array_equal(label, label0)


@pytest.mark.needs_native
def test_local_iterator_and_dataset_verify_in_the_native_path(tmp_path):
    rec, idx = write_set(tmp_path)
    damage_label(rec, idx, 2)
    args = dict(data_shape=(3, 16, 16), batch_size=8, preprocess_threads=2)
    with ImageRecordIter(rec, verify_checksums=True, on_error="replace", **args) as it:
        batches = list(it)
        assert it.stats.replaced == 1 and it.stats.checksum_mismatches == 1
        assert not batches[0].data[2].any() and batches[0].data[3].any()
    data = RecordDataset(rec, (3, 16, 16), verify_checksums=True)
    assert data[1][1] == 1.0
    with pytest.raises((DecodeError, ChecksumError), match="checksum mismatch"):
        data[2]
    replaced = RecordDataset(rec, (3, 16, 16), verify_checksums=True, on_error="replace")
    image, label = replaced[2]
    assert not image.any() and "checksum mismatch" in replaced.bad_records[2]


def flip_image_byte(rec, idx, key):
    """Flip a byte of record ``key``'s entropy-coded JPEG data: it decodes, to wrong pixels."""
    data = bytearray(open(rec, "rb").read())
    scan = data.index(b"\xff\xda", offsets_of(idx)[key])  # start of scan
    flip(data, scan + 2 + 12 + 4)  # past its 12-byte header (3 components), into the data
    open(rec, "wb").write(bytes(data))


@pytest.mark.parametrize("threads", [1, 2])
def test_default_iterator_checks_a_local_sidecar(tmp_path, threads):
    """NOTE [checksums by default]: a flipped image byte of a local file with a sidecar is a
    bad image under the default settings (no wrong pixels delivered); without a sidecar,
    and with verify_checksums=False, the same bytes are delivered unchecked."""
    rec, idx = write_set(tmp_path)
    args = dict(data_shape=(3, 16, 16), batch_size=8, preprocess_threads=threads)
    with ImageRecordIter(rec, verify_checksums=False, **args) as it:
        clean = {int(i): d.copy() for b in it for i, d in zip(b.index, b.data, strict=True)}
    flip_image_byte(rec, idx, 13)
    with ImageRecordIter(rec, **args) as it:  # every default: on_error="skip", "auto"
        assert it.records.checksums is not None
        got = [(int(i), d.copy()) for b in it for i, d in zip(b.index, b.data, strict=True)]
        assert it.stats.checksum_mismatches == 1 and it.stats.skipped == 1
        assert "checksum mismatch" in it.stats.bad_records[13]  # the .idx key: not trusted
    assert 113 not in [i for i, _ in got] and len(got) == N
    assert all(np.array_equal(d, clean[i]) for i, d in got)  # no wrong pixels
    with ImageRecordIter(rec, verify_checksums=False, **args) as it:  # the control
        wrong = {int(i): d.copy() for b in it for i, d in zip(b.index, b.data, strict=True)}
        assert it.stats.skipped == 0
    assert not np.array_equal(wrong[113], clean[113])  # the damage is silent unchecked
    os.remove(sidecar_path(rec, idx))
    with ImageRecordIter(rec, **args) as it:  # no sidecar: nothing to check against
        assert it.records.checksums is None and len(list(it)) == N // 8
    with pytest.raises((DecodeError, ChecksumError), match="checksum mismatch"):
        write_set(tmp_path, name="e")
        flip_image_byte(str(tmp_path / "e.rec"), str(tmp_path / "e.idx"), 3)
        RecordDataset(str(tmp_path / "e.rec"), (3, 16, 16))[3]


# --- MXNet and DALI read the pair, sidecar or not --------------------------------------------


def test_golden_files_unchanged_by_a_sidecar(tmp_path):
    """`recio checksum` adds only its sidecar; MXNet's .rec/.idx stay as MXNet wrote them,
    recio's writer still writes them byte for byte, and they read back MXNet's payloads."""
    spec = json.loads((GOLDEN / "golden.json").read_text())
    for name in ("bytes5", "images3"):
        for ext in ("rec", "idx"):
            shutil.copy(GOLDEN / f"{name}.{ext}", tmp_path / f"{name}.{ext}")
        assert cli(["checksum", str(tmp_path / f"{name}.rec")]) == 0
        for ext in ("rec", "idx"):
            golden = (GOLDEN / f"{name}.{ext}").read_bytes()
            assert (tmp_path / f"{name}.{ext}").read_bytes() == golden
        out = tmp_path / "again"
        out.mkdir(exist_ok=True)
        rec, idx = str(tmp_path / f"{name}.rec"), str(tmp_path / f"{name}.idx")
        with MXIndexedRecordIO(idx, rec, "r") as r:
            payloads = [(k, r.read_idx(k)) for k in r.keys]
        with MXIndexedRecordIO(str(out / f"{name}.idx"), str(out / f"{name}.rec"), "w") as w:
            for k, p in payloads:
                w.write_idx(k, p)
        for ext in ("rec", "idx"):
            assert (out / f"{name}.{ext}").read_bytes() == (GOLDEN / f"{name}.{ext}").read_bytes()
        assert (out / f"{name}.crc").read_bytes() == (tmp_path / f"{name}.crc").read_bytes()
        keys = [r["key"] for r in spec[name]["records"]]
        assert [k for k, _ in payloads] == keys


@needs_dali
def test_dali_reads_a_dataset_with_a_sidecar(tmp_path):
    from nvidia.dali import fn, pipeline_def

    rec, idx = write_set(tmp_path, n=8)
    assert os.path.exists(tmp_path / "d.crc")

    @pipeline_def(batch_size=8, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.mxnet(path=[rec], index_path=[idx], random_shuffle=False)
        return fn.decoders.image(jpegs, device="cpu"), labels

    p = pipe()
    p.build()
    images, labels = p.run()
    got = [float(np.asarray(labels.at(i)).ravel()[0]) for i in range(8)]
    assert got == [k % 3 for k in range(8)]
    assert all(images.at(i).shape == (16, 16, 3) for i in range(8))
