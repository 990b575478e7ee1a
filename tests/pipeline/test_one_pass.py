"""NOTE [one pass per record] (native/bind_pool.c): with a checksum sidecar, a local batch's
records are CRC'd once, by the decode threads: the JPEG's CRC32C is its whole-stream key,
the frame's (the sidecar's checksum) comes from it and the header's by CRC algebra, and the
consumer compares those with the sidecar instead of reading the bytes again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from recio import _native
from recio.decode import DecodeOptions, DecodePool
from recio.decode.batch import DecodeJob
from recio.pipeline.iterator import ImageRecordIter
from recio.records import checksum, verified
from recio.records.checksum import CHECKSUM_MISMATCH
from recio.records.file import RecordFile
from recio.records.format import IRHeader, pack
from recio.records.recordio import MXIndexedRecordIO

from .test_iterator import jpeg

pytestmark = pytest.mark.needs_native

ROOT = Path(__file__).resolve().parents[2]  # the checkout, for the child's `tests` import

N = 21


def write_rec(folder, rng, n=N, labels=lambda key: float(key % 5), jpegs=None) -> str:
    """n records (id 1000 + key), each its own random JPEG unless ``jpegs`` gives them."""
    rec, idx = str(folder / "data.rec"), str(folder / "data.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for key in range(n):
            body = jpegs[key] if jpegs else jpeg(rng, *rng.integers(48, 160, 2).tolist())
            w.write_idx(key, pack(IRHeader(0, labels(key), 1000 + key, 0), body))
    return rec


def records_call(pool: DecodePool, records: RecordFile, crops: bool = True):
    """decode_records of every record of ``records`` with ``crcs``: (status, crcs, images)."""
    n = len(records)
    positions = np.arange(n, dtype=np.int64)
    view, offsets = records.mapped_batch(positions)
    out = np.zeros((n, 16, 16, 3), np.uint8)
    job = DecodeJob.build(n, out, None, None, None, None, DecodeOptions())
    box = np.tile(np.array([[0, 0, 16, 16]], np.int32), (n, 1)) if crops else None
    labels = np.zeros((n, 1), np.float32)
    ids, starts, lengths = (np.empty(n, np.int64) for _ in range(3))
    status = np.empty(n, np.int32)
    crcs = np.zeros(n, np.uint32)
    native = pool.native_pool()
    native.decode_records(
        view, offsets, labels, ids, starts, lengths, out, status, pool.job_options(job), box,
        crcs=crcs,
    )  # fmt: skip
    spans = zip(starts.tolist(), lengths.tolist(), strict=True)
    images = [bytes(view[a : a + b]) for a, b in spans]
    return status, crcs, images


@pytest.mark.parametrize("table", [False, True])
def test_the_pools_frame_crcs_are_the_sidecars(tmp_path, table) -> None:
    """Every header length (one label, several, many), empty and large images; both CRC32C
    implementations (the combine runs on either)."""
    rng = np.random.default_rng(1)
    widths = [0, 1, 3, 17, 250]  # labels per record: IRHeaders of 24 to 1,024 bytes
    bodies = [b"", jpeg(rng, 900, 700), *(jpeg(rng, 60, 40) for _ in range(8))]

    def labels(key: int):
        k = widths[key % len(widths)]
        return float(key) if k == 0 else np.arange(k, dtype=np.float32) + key

    write_rec(tmp_path, rng, n=len(bodies), labels=labels, jpegs=bodies)
    script = textwrap.dedent(
        f"""
        import numpy as np, sys
        from recio import _native
        from recio.records.file import RecordFile
        from recio.decode import DecodePool
        sys.path.insert(0, {str(ROOT)!r})
        from tests.pipeline.test_one_pass import records_call
        assert _native.CRC32C == {"table" if table else "sse4.2"!r}, _native.CRC32C
        with RecordFile({str(tmp_path / "data.rec")!r}) as records, DecodePool(2) as pool:
            status, crcs, _ = records_call(pool, records)
            assert (status != int(_native.STATUS_RECORD)).all(), status
            assert np.array_equal(crcs, records.checksums.table), (crcs, records.checksums.table)
            print("ok", len(crcs))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "RECIO_CRC32C"}
    if table:
        env["RECIO_CRC32C"] = "table"
    elif _native.CRC32C != "sse4.2" and "RECIO_CRC32C" not in os.environ:
        pytest.skip("this CPU has no SSE4.2: the table is the one implementation")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "ok 10" in done.stdout, done.stderr


def test_the_set_gets_the_jpegs_own_key_from_the_one_pass(tmp_path) -> None:
    """NOTE [whole-stream check] holds: after a crop decode through the one pass, the JPEG's
    own bytes are known whole (not the frame's, not the sidecar's checksum); the same JPEG
    under another header is the same key; a damaged JPEG never enters the set, though its
    frame's checksum is still taken for the sidecar."""
    rng = np.random.default_rng(2)
    good = jpeg(rng, 400, 300)  # fresh noise: no earlier decode of the process read it
    damaged = bytearray(jpeg(rng, 400, 300))
    damaged[len(damaged) - 60] = 0xFF  # in the last rows' data: below a 16x16 crop at 0, 0
    damaged = bytes(damaged)
    assert not _native.stream_checked(good) and not _native.stream_checked(damaged)
    rec = write_rec(tmp_path, rng, n=3, jpegs=[good, good, damaged])  # two headers, one JPEG
    with RecordFile(rec) as records, DecodePool(1) as pool:
        status, crcs, images = records_call(pool, records)
        view = records.local_view(np.arange(3))
        frames = [
            bytes(view[o : o + 8 + len(pack(IRHeader(0, 0, 0, 0), b))])
            for o, b in zip(records.offsets.tolist(), images, strict=True)
        ]
        assert np.array_equal(crcs, records.checksums.table)
    assert images == [good, good, damaged]
    assert status[0] == status[1] == 0 and status[2] != 0
    assert _native.stream_checked(good) and not _native.stream_checked(damaged)
    assert not any(_native.stream_checked(f) for f in frames)


def test_the_consumer_never_reads_a_checked_batch_again(tmp_path, monkeypatch) -> None:
    """The iterator's batches (lean, padded, every epoch) are checked against the pool's
    CRCs: the consumer's own pass over the map never runs."""
    rng = np.random.default_rng(3)
    rec = write_rec(tmp_path, rng)

    def refused(*args, **kwargs):
        raise AssertionError("the consumer CRC'd a batch the pool had CRC'd")

    monkeypatch.setattr(checksum, "frame_crcs", refused)
    monkeypatch.setattr(verified, "frame_crcs", refused)
    kw = dict(data_shape=(3, 32, 32), batch_size=4, last_batch="pad", rand_crop=True)
    with ImageRecordIter(rec, **kw, preprocess_threads=2, dtype="uint8") as it:
        ids = [b.index[: 4 - b.pad].tolist() for _ in range(2) for b in it]
        assert it.stats.decoded == 2 * N and not it.stats.bad_records
    assert sorted(i for batch in ids for i in batch) == sorted(2 * [1000 + k for k in range(N)])


# byte (from the record's start) and XOR mask: each damage the check must see, one in the
# frame's header, one in the IRHeader's label (the image still decodes), one in the JPEG
DAMAGES = {"label": (8 + 4 + 1, 0x01), "id2": (8 + 16 + 2, 0x04), "jpeg": (-30, 0x10)}


@pytest.mark.parametrize("where", list(DAMAGES))
@pytest.mark.parametrize("padded", [False, True])
def test_a_record_that_differs_from_its_checksum_is_a_bad_slot(tmp_path, where, padded) -> None:
    """The pool's CRC covers the whole frame: a flipped bit in the header the decode does not
    look at (the id2 word), in the label, or in the JPEG is a checksum mismatch, counted and
    named, on the lean path and the general one (a padded last batch's), the CRC algebra's
    head included."""
    rng = np.random.default_rng(4)
    clean = tmp_path / "clean"
    clean.mkdir()
    write_rec(clean, rng)
    for name in ("data.rec", "data.idx", "data.crc"):
        shutil.copy(clean / name, tmp_path / name)
    rec = str(tmp_path / "data.rec")
    bad = N - 1 if padded else 6  # the padded last batch's real slot, or a lean batch's
    with RecordFile(rec) as records:
        start, length = int(records.offsets[bad]), int(records.lengths[bad])
    at, mask = DAMAGES[where]
    at = start + (at if at >= 0 else length + at)
    with open(rec, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ mask]))
    kw = dict(data_shape=(3, 32, 32), batch_size=4, last_batch="pad", dtype="uint8")
    with ImageRecordIter(rec, on_error="skip", preprocess_threads=2, **kw) as it:
        ids = [i for b in it for i in b.index[: 4 - b.pad].tolist()]
        stats = it.stats
    assert stats.checksum_mismatches == 1 and list(stats.bad_records) == [bad]  # the .idx key
    reason = stats.bad_records[bad]
    assert reason.startswith(CHECKSUM_MISMATCH) and rec in reason and f"{start}" in reason
    assert 1000 + bad not in ids and set(ids) == {1000 + k for k in range(N)} - {1000 + bad}


def test_crcs_of_the_wrong_kind_are_refused_before_anything_is_queued(tmp_path) -> None:
    rng = np.random.default_rng(5)
    rec = write_rec(tmp_path, rng, n=4)
    with RecordFile(rec) as records, DecodePool(1) as pool:
        view, offsets = records.mapped_batch(np.arange(4, dtype=np.int64))
        out = np.zeros((4, 16, 16, 3), np.uint8)
        for crcs in (np.zeros(4, np.int32), np.zeros(3, np.uint32), np.zeros(4, np.uint32)[::-1]):
            with pytest.raises(ValueError, match="crcs must be"):
                pool.submit_records(view, offsets, out, crcs=crcs)
        crcs = np.zeros(4, np.uint32)
        got = pool.submit_records(view, offsets, out, crcs=crcs).result()
        assert not got.status.any() and np.array_equal(crcs, records.checksums.table)
