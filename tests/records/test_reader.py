"""RecordFile: zero-copy reads, scans without an .idx, fsspec URLs, bad .idx offsets."""

import gc
import importlib.util
import os
import pickle
import struct
import subprocess
import sys
import textwrap
import tracemalloc
from unittest import mock

import numpy as np
import pytest

from recio import storage
from recio.errors import IndexMismatchError, RecordIOError
from recio.records import reader as recio_reader
from recio.records.format import MAGIC_BYTES, IRHeader, encode_record, pack, unpack
from recio.records.reader import RecordFile, batch_headers, read_batch
from recio.records.recordio import MXIndexedRecordIO, MXRecordIO
from recio.records.spans import Spans
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
    lines = open(idx).read().splitlines(True)
    lines[1] = "1\t4\n"  # 4 is inside the first record's header
    open(idx, "w").write("".join(lines))
    with RecordFile(rec) as rf, pytest.raises(IndexMismatchError) as info:
        rf.read(1)
    message = str(info.value)
    assert "offset 4, which is not a record start" in message and f"byte 4 of {rec}" in message
    assert info.value.path == idx and f"of {idx}" not in message  # no byte of the .idx claimed
    with MXIndexedRecordIO(idx, rec, "r") as r, pytest.raises(IndexMismatchError):
        r.read_idx(1)


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


def test_idx_negative_offset_is_named(tmp_path):
    rec, idx = write_indexed(tmp_path)
    open(idx, "a").write("7\t-8\n")
    for reader in (lambda: RecordFile(rec), lambda: MXIndexedRecordIO(idx, rec, "r")):
        with pytest.raises(IndexMismatchError, match=r"key 7 offset -8, negative") as info:
            reader()
        assert info.value.path == idx


def test_idx_numbers_beyond_int64_are_named(tmp_path):
    rec, idx = write_indexed(tmp_path)
    good = open(idx).read()
    for line, what in [(f"{1 << 63}\t0", "key"), (f"8\t{1 << 64}", "offset")]:
        open(idx, "w").write(good + line + "\n")
        with pytest.raises(RecordIOError, match=f"line 6: .*{what} out of the int64 range") as info:
            RecordFile(rec)
        assert info.value.path == idx and idx in str(info.value)
    # MXIndexedRecordIO keys are Python ints (or key_type): any size is fine there
    open(idx, "w").write(good.replace("4\t", f"{1 << 70}\t"))
    with MXIndexedRecordIO(idx, rec, "r") as r:
        assert r.read_idx(1 << 70) == PAYLOADS[4]


def test_idx_not_utf8_is_named(tmp_path, memfs):
    rec, idx = write_indexed(tmp_path)
    data = open(idx, "rb").read()
    bad = data[:12] + b"\xff" + data[13:]
    open(idx, "wb").write(bad)
    memfs.pipe("/u/d.rec", open(rec, "rb").read())
    memfs.pipe("/u/d.idx", bad)
    line = bad.count(b"\n", 0, 12) + 1
    where = f"not UTF-8.*line {line}.*at byte 12 of"
    for url, idx_url in ((rec, idx), ("memory://u/d.rec", "memory://u/d.idx")):
        for reader in (RecordFile, lambda u: MXIndexedRecordIO(u[:-4] + ".idx", u, "r")):
            with pytest.raises(RecordIOError, match=where) as info:
                reader(url)
            assert info.value.path == idx_url and info.value.offset == 12


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
        elif reader == "read_batch":
            read_batch(rf, [0, 60, 1], 1)
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


def test_idx_offset_past_the_end_names_the_rec_not_a_byte_of_the_idx(tmp_path):
    rec, idx = write_indexed(tmp_path)
    with open(idx, "a") as f:
        f.write("999\t105896\n")
    with pytest.raises(IndexMismatchError) as info:
        RecordFile(rec)
    message = str(info.value)
    assert "offset 105896, past the end of" in message and rec in message
    assert f"of {idx}" not in message and info.value.path == idx


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
    with RecordFile(rec) as rf:
        assert np.array_equal(rf.offsets, offsets[order])
        assert np.array_equal(rf.lengths, lengths[order])
        assert [bytes(p) for p in rf.read_many(range(5))] == [PAYLOADS[i] for i in order]


def test_bad_offset_found_in_a_later_slice(tmp_path):
    """check_offsets looks at the offsets a slice at a time; the error names the first
    bad one, wherever it is."""
    rec, idx = write_indexed(tmp_path)
    good = open(idx).read()
    open(idx, "w").write(good + "7\t8\n8\t6\n9\t-4\n")
    with (
        mock.patch.object(recio_reader, "_CHECK_SLICE", 2),
        pytest.raises(IndexMismatchError) as info,
    ):
        RecordFile(rec)
    assert info.value.record_index == 6 and "key 8 offset 6, not 4-byte aligned" in str(info.value)


# --- read_batch: a batch parsed at once (NOTE [batch parse]) ------------------------------


def _record(key: int, rng: np.random.Generator) -> bytes:
    """Record ``key`` of a file with every kind of record a batch can meet."""
    image = rng.bytes(int(rng.integers(0, 200)))
    kind = key % 9
    if kind == 0:
        return pack(IRHeader(0, key + 0.25, key, 7), image)  # one label
    if kind == 1:
        return pack(IRHeader(0, [key, -key], key, 0), image)  # flag 2
    if kind == 2:
        return pack(IRHeader(0, np.arange(5) + key, key, 0), image)  # flag 5
    if kind == 3:
        return pack(IRHeader(0, [key + 0.5], key, 0), b"")  # flag 1, an empty image
    if kind == 4:  # the magic at an aligned byte: a multi-frame record, its image as bytes
        return pack(IRHeader(0, float(key), key, 0), b"abcd" + MAGIC_BYTES + image)
    if kind == 5:
        return b"tiny"  # shorter than an IRHeader: a problem
    if kind == 6:
        return struct.pack("<IfQQ", 1000, 0.0, key, 0) + b"abc"  # more labels than bytes
    if kind == 7:
        return pack(IRHeader(0, float("nan"), (1 << 62) + key, 0), image)  # a large id
    return pack(IRHeader(0, -1.0, key, 0), b"")  # flag 0, an empty image


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> tuple[str, list[bytes]]:
    rec = str(tmp_path_factory.mktemp("mixed") / "m.rec")
    rng = np.random.default_rng(3)
    records = [_record(key, rng) for key in range(45)]
    with MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w") as w:
        for key, body in enumerate(records):
            w.write_idx(key, body)
    return rec, records


def _expected(body: bytes, key: int, width: int):
    """(labels, id, image) by MXNet's unpack, or None for an unreadable header."""
    try:
        header, image = unpack(body)
    except RecordIOError:
        return None
    label = np.asarray(header.label, np.float32).ravel()
    row = np.full(width, label[0]) if header.flag == 0 else np.zeros(width, np.float32)
    if header.flag:
        row[: min(width, len(label))] = label[:width]
    return row, header.id, bytes(image)


def _outcome(run):
    try:
        return run()
    except (RecordIOError, ValueError) as exc:
        return type(exc), str(exc)


@pytest.mark.parametrize("exact", [False, True], ids=["at-once", "all-exact"])
def test_read_batch_parses_as_unpack_does(mixed, monkeypatch, exact):
    """Labels, ids, images and problems as MXNet's unpack gives them, for every kind of
    record; the same when every record goes the exact way (the gather's rows refused)."""
    rec, records = mixed
    if exact:
        real = recio_reader._gather
        monkeypatch.setattr(
            recio_reader, "_gather", lambda *a: (real(*a)[0], np.zeros(len(a[1]), dtype=bool))
        )
    rng = np.random.default_rng(0)
    several = np.array([p for p in range(45) if p % 9 in (1, 2, 3, 5, 6)])  # no flag 0
    batches = [np.arange(45), rng.permutation(45)[:17], [4, 4, 13], several, several[::-1]]
    checked = set()
    with RecordFile(rec) as rf:
        for width in (1, 2, 7):
            for positions in map(np.asarray, batches):
                want = [_expected(records[p], p, width) for p in positions]
                if width > 1 and any(w is not None and records[p][:4] == b"\0\0\0\0"
                                     for w, p in zip(want, positions, strict=True)):  # fmt: skip
                    with pytest.raises(ValueError, match=f"label_width={width}"):
                        read_batch(rf, positions, width)
                    continue
                got = read_batch(rf, positions, width)
                multi = any(p % 9 == 4 for p in positions)
                assert isinstance(got.images, list if multi else Spans)
                for j, (w, p) in enumerate(zip(want, positions, strict=True)):
                    if w is None:
                        error = got.problems[j]
                        assert error.offset == rf.offsets[p] and error.record_index == p
                        assert got.ids[j] == p and not got.labels[j].any()
                        assert len(got.images[j]) == 0
                        continue
                    np.testing.assert_array_equal(got.labels[j], w[0])
                    assert got.ids[j] == w[1] and bytes(got.images[j]) == w[2], (j, p)
                assert set(got.problems) == {j for j, w in enumerate(want) if w is None}
                checked.add(width)
    assert checked == {1, 2, 7}


def test_read_batch_agrees_with_batch_headers_on_read_many(mixed):
    """The remote way (payloads, then batch_headers) and the local one give the same batch,
    the same problems and the same errors."""
    rec, _ = mixed
    rng = np.random.default_rng(1)
    with RecordFile(rec) as rf:
        for width in (1, 3):
            for _ in range(20):
                positions = rng.integers(0, 45, int(rng.integers(1, 20)))

                def local(positions=positions, width=width):
                    b = read_batch(rf, positions, width)
                    return b.labels, b.ids, [bytes(x) for x in b.images], b.problems

                def remote(positions=positions, width=width):
                    payloads = rf.read_many(positions)
                    b = read_batch(rf, positions, width, payloads)
                    labels, ids, starts, problems = batch_headers(rf, positions, payloads, width)
                    np.testing.assert_array_equal(labels, b.labels)
                    np.testing.assert_array_equal(ids, b.ids)
                    for j, (payload, start) in enumerate(zip(payloads, starts, strict=True)):
                        want = b"" if j in problems else bytes(payload[start:])
                        assert bytes(b.images[j]) == want
                    return b.labels, b.ids, [bytes(x) for x in b.images], b.problems

                a, b = _outcome(local), _outcome(remote)
                if isinstance(a[0], type):
                    assert a == b
                    continue
                np.testing.assert_array_equal(a[0], b[0])
                np.testing.assert_array_equal(a[1], b[1])
                assert a[2] == b[2]
                assert {j: str(e) for j, e in a[3].items()} == {j: str(e) for j, e in b[3].items()}


def test_read_batch_framing_errors_are_read_many_s(tmp_path):
    """A .idx offset that is not a record start: the same IndexMismatchError as read_many,
    for the first such record of the batch."""
    rng = np.random.default_rng(2)
    records = [pack(IRHeader(0, float(k), k, 0), rng.bytes(100)) for k in range(6)]
    rec, idx = write_indexed(tmp_path, records)
    lines = open(idx).read().splitlines(True)
    for k in (2, 4):  # 8 bytes into the record: its IRHeader, not a frame header
        key, offset = lines[k].split("\t")
        lines[k] = f"{key}\t{int(offset) + 8}\n"
    open(idx, "w").write("".join(lines))
    with RecordFile(rec) as rf:
        for positions in ([0, 4, 1, 2], [5, 2]):
            with pytest.raises(IndexMismatchError) as many:
                rf.read_many(positions)
            with pytest.raises(IndexMismatchError) as batch:
                read_batch(rf, positions, 1)
            assert str(batch.value) == str(many.value)
            assert f"key {positions[1]} offset" in str(batch.value)


def test_gather_refuses_rows_past_the_end_or_misaligned() -> None:
    words = np.arange(10, dtype="<u4")
    head, own = recio_reader._gather(words, np.array([0, 8, 9, 12, 24, 36]), 2)
    assert own.tolist() == [True, True, False, True, True, False]
    assert head[own].tolist() == [[0, 1], [2, 3], [3, 4], [6, 7]]
    head, own = recio_reader._gather(words[:1], np.array([0]), 2)  # shorter than a row
    assert head.shape == (1, 2) and not own.any()


def test_spans_of_a_closed_file_stay_readable_and_unmap_with_the_last(tmp_path):
    rec, _ = write_indexed(tmp_path, [pack(IRHeader(0, 1.0, k, 0), b"img%d" % k) for k in range(3)])

    def mapped() -> int:
        with open("/proc/self/maps") as f:
            return sum(rec in line for line in f)

    rf = RecordFile(rec)
    batch = read_batch(rf, [2, 0], 1)
    assert isinstance(batch.images, Spans)
    rf.close()
    assert mapped() == 1 and [bytes(x) for x in batch.images] == [b"img2", b"img0"]
    with pytest.raises(ValueError, match="closed RecordFile"):
        read_batch(rf, [0], 1)
    del batch
    gc.collect()
    assert mapped() == 0
