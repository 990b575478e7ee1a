"""The one-call batch path (the native pool parses, draws and decodes a local batch) against
the exact path (read_batch + decode_batch): the same pixels, labels, ids and statuses for
every kind of record, and each record's pixels the same however it is batched, sharded or
threaded (draws keyed per record)."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
from PIL import Image

from recio import ImageRecordIter
from recio.augment import CropSpec, KeyedDraw
from recio.decode import DecodeOptions, DecodePool, Status
from recio.errors import RecordIOError
from recio.pipeline.read_decode import read_and_decode
from recio.records.format import MAGIC_BYTES, IRHeader, pack
from recio.records.reader import RecordFile
from recio.records.recordio import MXIndexedRecordIO

from .test_iterator import jpeg

SPEC = CropSpec(24, 20, random_resized_crop=True, rand_mirror=True)
OPTIONS = DecodeOptions(mean=(120.0, 110.0, 100.0), std=(60.0, 50.0, 40.0), layout="NCHW")
KINDS = ["jpeg", "multi-label", "png", "truncated", "multi-frame", "labels beyond the record"]


def _png(rng) -> bytes:
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (30, 44, 3), dtype=np.uint8)).save(out, format="PNG")
    return out.getvalue()


def _with_magic(rng) -> bytes:
    """A JPEG whose payload has the RecordIO magic at a 4-aligned byte: written as frames."""
    img = Image.open(io.BytesIO(jpeg(rng, 48, 40)))
    probe = io.BytesIO()
    img.save(probe, format="JPEG", quality=90, comment=b"Q" * 8)
    at = probe.getvalue().index(b"Q" * 8) + 24 + 8  # after the IRHeader and two labels
    pad = -at % 4
    body = io.BytesIO()
    img.save(body, format="JPEG", quality=90, comment=b"Q" * pad + MAGIC_BYTES + b"Q" * 4)
    return body.getvalue()


def write_mixed(path, n=40) -> str:
    """n records cycling through KINDS, two labels each (id 500 + key)."""
    rng = np.random.default_rng(9)
    rec, idx = str(path / "mixed.rec"), str(path / "mixed.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for key in range(n):
            kind = KINDS[key % len(KINDS)]
            labels = [float(key), float(key % 3)]
            if kind == "png":
                body = _png(rng)
            elif kind == "truncated":
                body = jpeg(rng, 60, 50)[:300]
            elif kind == "multi-frame":
                body = _with_magic(rng)
            else:
                body = jpeg(rng, int(rng.integers(30, 90)), int(rng.integers(30, 90)))
            record = pack(IRHeader(0, labels, 500 + key, 0), body)
            if kind == "labels beyond the record":  # flag says 10**6 labels
                record = struct.pack("<I", 10**6) + record[4:]
            w.write_idx(key, record)
    return rec


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> str:
    return write_mixed(tmp_path_factory.mktemp("mixed"))


@pytest.fixture(scope="module")
def pool():
    with DecodePool(2) as p:
        yield p


def _decode(records, positions, pool, *, exact: bool, **kw):
    out = np.full((len(positions), 3, 20, 24), np.nan, dtype=np.float32)
    payloads = records.read_many(positions) if exact else None
    got = read_and_decode(
        records, positions, pool, out, label_width=2, draw=KeyedDraw(SPEC, 4, 1),
        options=OPTIONS, payloads=payloads, **kw,
    )  # fmt: skip
    return out, got


def test_one_call_and_exact_path_agree_on_every_kind_of_record(mixed, pool):
    positions = np.random.default_rng(0).permutation(40)
    with RecordFile(mixed) as records:
        out, got = _decode(records, positions, pool, exact=False)
        ref_out, ref = _decode(records, positions, pool, exact=True)
    np.testing.assert_array_equal(got.status, ref.status)
    np.testing.assert_array_equal(got.labels, ref.labels)
    np.testing.assert_array_equal(got.ids, ref.ids)
    np.testing.assert_array_equal(out, ref_out)
    kinds = [KINDS[p % len(KINDS)] for p in positions]
    for j, kind in enumerate(kinds):
        key = int(positions[j])
        bad = kind in ("truncated", "labels beyond the record")
        assert (got.status[j] != 0) == bad, (kind, got.status[j])
        if bad:
            assert got.reasons[j], kind
        else:
            assert got.labels[j].tolist() == [key, key % 3], kind
            assert got.ids[j] == 500 + key
    truncated = [j for j, k in enumerate(kinds) if k == "truncated"]
    assert set(got.status[truncated].tolist()) <= {Status.TRUNCATED, Status.CORRUPT}
    beyond = [j for j, k in enumerate(kinds) if k == "labels beyond the record"]
    assert set(got.status[beyond].tolist()) == {Status.CORRUPT}
    assert "byte" in got.reasons[beyond[0]]  # the header's error names where it is


def test_unreadable_header_is_raised_when_asked(mixed, pool):
    beyond = KINDS.index("labels beyond the record")
    assert beyond < 12
    with RecordFile(mixed) as records, pytest.raises(RecordIOError, match="byte .* of .*mixed.rec"):
        _decode(records, np.arange(12), pool, exact=False, raise_bad_headers=True)


def test_single_label_records_refuse_a_wider_label(tmp_path, pool):
    rng = np.random.default_rng(1)
    rec, idx = str(tmp_path / "one.rec"), str(tmp_path / "one.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for key in range(4):
            w.write_idx(key, pack(IRHeader(0, 1.0, key, 0), jpeg(rng, 40, 40)))
    with RecordFile(rec) as records:
        for exact in (False, True):
            with pytest.raises(
                ValueError, match="label_width=2, but record 0, at byte 0 of .*one.rec"
            ):
                _decode(records, np.arange(4), pool, exact=exact)


def test_the_python_backend_reads_the_exact_way(mixed):
    """Without the native pool every record takes the exact path: same labels, ids, statuses."""
    positions = np.arange(40)
    with RecordFile(mixed) as records, DecodePool(1) as native:
        with DecodePool(1, backend="python") as python:
            _, got = _decode(records, positions, python, exact=False)
        _, ref = _decode(records, positions, native, exact=False)
    np.testing.assert_array_equal(got.labels, ref.labels)
    np.testing.assert_array_equal(got.ids, ref.ids)
    np.testing.assert_array_equal(got.status != 0, ref.status != 0)


def _pixels_by_record(rec: str, **kw) -> dict[int, np.ndarray]:
    seen: dict[int, np.ndarray] = {}
    parts = kw.pop("num_parts", 1)
    for rank in range(parts):
        with ImageRecordIter(
            rec, data_shape=(3, 20, 24), random_resized_crop=True, rand_mirror=True,
            shuffle=True, seed=13, part_index=rank, num_parts=parts, last_batch="pad", **kw,
        ) as it:  # fmt: skip
            for batch in it:
                real = len(batch.index) - batch.pad
                for j, rid in enumerate(batch.index[:real].tolist()):
                    assert rid not in seen
                    seen[rid] = batch.data[j].copy()
    return seen


def test_a_records_pixels_do_not_depend_on_ranks_threads_or_batches(tmp_path):
    """Draws keyed per record: the same crop and flip on 1, 2 or 3 ranks, with 1 or 2 decode
    threads, in batches of 4 or 7."""
    rng = np.random.default_rng(5)
    rec, idx = str(tmp_path / "k.rec"), str(tmp_path / "k.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for key in range(30):
            body = jpeg(rng, int(rng.integers(30, 100)), int(rng.integers(30, 100)))
            w.write_idx(key, pack(IRHeader(0, float(key), key, 0), body))
    reference = _pixels_by_record(rec, batch_size=4, preprocess_threads=1)
    assert sorted(reference) == list(range(30))
    for kw in [
        {"batch_size": 7, "preprocess_threads": 2},
        {"batch_size": 4, "preprocess_threads": 2, "num_parts": 2},
        {"batch_size": 3, "preprocess_threads": 1, "num_parts": 3},
    ]:
        other = _pixels_by_record(rec, **kw)
        assert sorted(other) == list(range(30)), kw
        for rid, pixels in reference.items():
            np.testing.assert_array_equal(other[rid], pixels, err_msg=f"record {rid}, {kw}")
    # and the draws are not all alike: flips and windows vary over the records
    flipped = [np.array_equal(p[:, :, ::-1], p) for p in reference.values()]
    assert not all(flipped)


def _rollover_stream(rec: str, batch_size: int, slots: int) -> list[tuple[int, np.ndarray]]:
    """The first ``slots`` (record id, pixels) of a one-rank rollover stream, epochs in turn."""
    stream: list[tuple[int, np.ndarray]] = []
    with ImageRecordIter(
        rec, data_shape=(3, 20, 24), random_resized_crop=True, rand_mirror=True, shuffle=True,
        seed=2, batch_size=batch_size, last_batch="rollover",
    ) as it:  # fmt: skip
        while len(stream) < slots:
            for batch in it:
                stream += [(int(r), batch.data[j].copy()) for j, r in enumerate(batch.index)]
    return stream[:slots]


def test_a_rollover_batch_draws_each_record_from_its_own_epoch(tmp_path):
    """A batch reaching into the next epoch's order (last_batch="rollover") draws those
    records from that epoch: the stream's pixels do not depend on where batches end."""
    rng = np.random.default_rng(6)
    rec, idx = str(tmp_path / "r.rec"), str(tmp_path / "r.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for key in range(30):
            body = jpeg(rng, int(rng.integers(30, 100)), int(rng.integers(30, 100)))
            w.write_idx(key, pack(IRHeader(0, float(key), key, 0), body))
    whole = _rollover_stream(rec, 5, 60)  # batches end at the epochs' ends
    for batch_size in (4, 7):  # batches straddle them
        other = _rollover_stream(rec, batch_size, 60)
        assert [r for r, _ in other] == [r for r, _ in whole]
        for k, ((rid, pixels), (_, want)) in enumerate(zip(other, whole, strict=True)):
            np.testing.assert_array_equal(pixels, want, err_msg=f"slot {k}, record {rid}")


def test_a_batch_reader_queues_batches_that_decode_as_read_and_decode(mixed, pool):
    """BatchReader's prepared path (one local file, one epoch's draws) and its general one
    (rollover slots of two epochs) give read_and_decode's pixels, labels, ids, statuses and
    reasons, with several batches queued on the pool at once."""
    from recio.pipeline.read_decode import BatchReader

    rng = np.random.default_rng(5)
    batches = [rng.permutation(40)[:16] for _ in range(4)]
    draw = KeyedDraw(SPEC, 4, 1)
    with RecordFile(mixed) as records:
        reader = BatchReader(
            records, pool, (16, 3, 20, 24), np.float32, label_width=2, draw=draw,
            options=OPTIONS,
        )  # fmt: skip
        assert reader.job is not None  # the prepared path is the one under test
        outs = [np.full((16, 3, 20, 24), np.nan, dtype=np.float32) for _ in batches]
        epochs = np.array([1] * 8 + [2] * 8)
        queued = [reader.submit(p, o) for p, o in zip(batches, outs, strict=True)]
        rolled = np.empty_like(outs[0])
        queued.append(reader.submit(batches[0], rolled, epochs=epochs))
        assert all(q.wait(30) for q in queued)
        got = [q.result() for q in queued]
        for positions, out, g in zip(batches, outs, got[:-1], strict=True):
            ref_out, ref = _decode(records, positions, pool, exact=False)
            np.testing.assert_array_equal(out, ref_out)
            np.testing.assert_array_equal(g.status, ref.status)
            np.testing.assert_array_equal(g.labels, ref.labels)
            np.testing.assert_array_equal(g.ids, ref.ids)
            assert g.reasons == ref.reasons
            assert g.status.any() and all(g.reasons[j] for j in np.flatnonzero(g.status))
        want = np.full_like(rolled, np.nan)
        ref = read_and_decode(
            records, batches[0], pool, want, label_width=2, draw=draw, options=OPTIONS,
            epochs=epochs,
        )  # fmt: skip
        np.testing.assert_array_equal(rolled, want)
        np.testing.assert_array_equal(got[-1].status, ref.status)
        assert not np.array_equal(rolled[8:], outs[0][8:])  # epoch 2's draws, not epoch 1's
        with pytest.raises(ValueError, match="out must be"):
            reader.submit(batches[0], np.empty((16, 3, 24, 20), np.float32))


def test_lean_local_batches_with_reused_rows_decode_as_read_and_decode(mixed, tmp_path, pool):
    """BatchReader.submit_local (NOTE [lean batches]): batches queued in turn on two sets of
    reused rows give read_and_decode's pixels, labels, ids, statuses and reasons; a clean
    batch's ``decoded()`` is its labels and ids, a batch with bad or multi-label records
    leaves it to ``result()``."""
    from recio.pipeline.read_decode import BatchReader

    clean = str(tmp_path / "clean.rec")
    rng = np.random.default_rng(8)
    with MXIndexedRecordIO(clean[:-4] + ".idx", clean, "w") as w:
        for key in range(24):
            body = jpeg(rng, int(rng.integers(30, 90)), int(rng.integers(30, 90)))
            w.write_idx(key, pack(IRHeader(0, float(key % 7), 700 + key, 0), body))
    draw = KeyedDraw(SPEC, 4, 1)
    for rec, width, n in ((clean, 1, 24), (mixed, 2, 40)):
        with RecordFile(rec, verify_checksums=False) as records:  # (checked: not lean)
            reader = BatchReader(
                records, pool, (8, 3, 20, 24), np.float32, label_width=width, draw=draw,
                options=OPTIONS,
            )  # fmt: skip
            assert reader.local
            sets = [reader.rows(8) for _ in range(2)]
            for k in range(5):
                positions = np.random.default_rng(k).permutation(n)[:8]
                positions = np.ascontiguousarray(positions, dtype=np.int64)
                out = np.full((8, 3, 20, 24), np.nan, dtype=np.float32)
                got = reader.submit_local(positions, out, sets[k % 2])
                assert got.wait(30)
                want = np.full_like(out, np.nan)
                ref = read_and_decode(
                    records, positions, pool, want, label_width=width, draw=draw,
                    options=OPTIONS,
                )  # fmt: skip
                lean = got.decoded()
                assert (lean is not None) == (rec == clean)
                if lean is not None:
                    labels, ids = lean
                    assert not ref.status.any() and ref.reasons is None
                else:
                    res = got.result()
                    labels, ids = res.labels, res.ids
                    np.testing.assert_array_equal(res.status, ref.status)
                    assert res.reasons == ref.reasons
                np.testing.assert_array_equal(out, want)
                np.testing.assert_array_equal(labels, ref.labels)
                np.testing.assert_array_equal(ids, ref.ids)


def test_a_pool_parses_a_draw_once_and_a_new_one_anew(mixed):
    """The native pool keeps the draw tuple it parsed last (a pipeline's readers pass the
    same one with every batch): batches of readers with different draws, in turn on one
    pool, each give what a fresh pool gives for its draw."""
    from recio.pipeline.read_decode import BatchReader

    positions = np.arange(0, 40, 6)  # the jpeg records
    draws = [KeyedDraw(SPEC, 4, 1), KeyedDraw(SPEC, 4, 2), KeyedDraw(SPEC, 9, 1)]
    shape = (len(positions), 3, 20, 24)
    with RecordFile(mixed) as records:
        want = []
        for draw in draws:
            with DecodePool(1) as fresh:
                out = np.zeros(shape, np.float32)
                read_and_decode(
                    records, positions, fresh, out, label_width=2, draw=draw,
                    options=OPTIONS,
                )  # fmt: skip
                want.append(out)
        assert not np.array_equal(want[0], want[1]) and not np.array_equal(want[0], want[2])
        with DecodePool(1) as pool:
            readers = [
                BatchReader(records, pool, shape, np.float32, label_width=2, draw=draw,
                            options=OPTIONS)
                for draw in draws
            ]  # fmt: skip
            for k in [0, 0, 1, 0, 2, 2, 1]:
                out = np.zeros(shape, np.float32)
                readers[k].submit(positions, out).result()
                np.testing.assert_array_equal(out, want[k], err_msg=f"draw {k}")


def test_lean_batches_stay_lean_with_a_sidecar(tmp_path, pool):
    """NOTE [lean batches] with the default checksums: a batch whose records match their
    sidecar is still lean; one with a damaged record goes the general way, which marks and
    counts it once."""
    from recio.pipeline.read_decode import BatchReader

    rec = str(tmp_path / "d.rec")
    rng = np.random.default_rng(3)
    with MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w") as w:
        for key in range(16):
            w.write_idx(key, pack(IRHeader(0, float(key), key, 0), jpeg(rng, 40, 40)))
    draw = KeyedDraw(SPEC, 4, 1)

    def lean(positions, records):
        assert records.checksums is not None  # the default: checked against the sidecar
        reader = BatchReader(
            records, pool, (8, 3, 20, 24), np.float32, label_width=1, draw=draw,
            options=OPTIONS,
        )  # fmt: skip
        out = np.empty((8, 3, 20, 24), np.float32)
        got = reader.submit_local(positions, out, reader.rows(8))
        assert got.wait(30)
        return got.decoded(), got

    positions = np.arange(8, dtype=np.int64)
    with RecordFile(rec) as records:
        assert lean(positions, records)[0] is not None
        at = int(records.offsets[5]) + 8 + 24 + 30  # inside record 5's image
    with open(rec, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0x01]))
    with RecordFile(rec) as records:
        quick, got = lean(positions, records)
        assert quick is None
        result = got.result()
        assert result.status[5] != 0 and "checksum mismatch" in result.reasons[5]
        assert np.count_nonzero(result.status) == 1
        assert records.checksum_stats["mismatched"] == 1
