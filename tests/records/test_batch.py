"""read_batch: a batch read and its IRHeaders parsed, at once or record by record."""

import gc
import struct

import numpy as np
import pytest

from recio.errors import IndexMismatchError, RecordIOError
from recio.records import batch as recio_batch
from recio.records.batch import batch_headers, read_batch
from recio.records.file import RecordFile
from recio.records.format import MAGIC_BYTES, IRHeader, pack, unpack
from recio.records.recordio import MXIndexedRecordIO
from recio.records.spans import Spans

from .test_recordio import write_indexed

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
        real = recio_batch.gather_words
        monkeypatch.setattr(
            recio_batch, "gather_words", lambda *a: (real(*a)[0], np.zeros(len(a[1]), dtype=bool))
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
    """A .idx offset that is not a record start: the same IndexMismatchError as read_many
    raises for the first such record of the batch, as a bad slot of each (the batch goes
    on: the .idx finds the records after it)."""
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
            batch = read_batch(rf, positions, 1)
            bad = [j for j, p in enumerate(positions) if p in (2, 4)]
            assert sorted(batch.problems) == bad
            assert str(batch.problems[bad[0]]) == str(many.value)
            assert f"key {positions[1]} offset" in str(many.value)
            assert all(isinstance(e, IndexMismatchError) for e in batch.problems.values())
            good = [j for j in range(len(positions)) if j not in bad]
            assert batch.ids[good].tolist() == [positions[j] for j in good]


def test_gather_refuses_rows_past_the_end_or_misaligned() -> None:
    words = np.arange(10, dtype="<u4")
    head, own = recio_batch.gather_words(words, np.array([0, 8, 9, 12, 24, 36]), 2)
    assert own.tolist() == [True, True, False, True, True, False]
    assert head[own].tolist() == [[0, 1], [2, 3], [3, 4], [6, 7]]
    head, own = recio_batch.gather_words(words[:1], np.array([0]), 2)  # shorter than a row
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
