"""Queued record batches: PendingRecords over one base or a list of extents, and RecordsJob
(the options and draw made once) giving what submit_records gives, on both backends."""

from __future__ import annotations

import struct

import numpy as np

from recio import decode
from recio.augment import ColourSpec, CropSpec, KeyedDraw
from recio.records.format import IRHeader, pack

from ..images import encode


def _records(images: list[bytes]) -> list[bytes]:
    """Each image as one framed record (label k, id 100 + k), padded to 4 bytes."""
    extents = []
    for k, image in enumerate(images):
        payload = pack(IRHeader(0, float(k), 100 + k, 0), image)
        extents.append(struct.pack("<II", 0xCED7230A, len(payload)) + payload)
        extents[-1] += b"\0" * (-len(extents[-1]) % 4)
    return extents


def test_records_from_a_list_of_extents_decode_as_from_one_base(pool: decode.DecodePool) -> None:
    """submit_records over a list of records' extents (NOTE [unjoined extents] in
    recio/pipeline/remote.py) gives what it gives over the same records joined: statuses, labels,
    ids, pixels, PNGs (the Pillow path, each image read inside its own extent) too; the
    Python backend leaves every record to the exact parse either way."""
    images = [encode(60, 40, seed=1), encode(30, 20, fmt="PNG"), encode(50, 30, seed=2)]
    extents = _records(images)
    offsets = np.cumsum([0] + [len(e) for e in extents[:-1]]).astype(np.int64)
    want, got = (np.full((3, 20, 24, 3), 9, np.uint8) for _ in range(2))
    expected = pool.submit_records(b"".join(extents), offsets, want).result()
    result = pool.submit_records(extents, np.zeros(3, np.int64), got).result()
    assert result.status.tolist() == expected.status.tolist()
    if pool.backend != "native":  # every record left to the exact parse
        assert result.status.tolist() == [decode.Status.RECORD] * 3
        return
    assert result.status.tolist() == [0, 0, 0]
    assert result.ids.tolist() == [100, 101, 102] and result.labels[:, 0].tolist() == [0, 1, 2]
    assert [bytes(i) for i in result.images] == [bytes(i) for i in expected.images] == images
    np.testing.assert_array_equal(got, want)


def test_a_records_job_gives_what_submit_records_gives(pool: decode.DecodePool) -> None:
    """RecordsJob.submit, and on the native backend queue + pending, decode each batch as
    submit_records does with the same options and draw: statuses, labels, ids, pixels."""
    images = [encode(60 + 4 * k, 40 + 2 * k, seed=k) for k in range(5)]
    images[2] = encode(30, 20, fmt="PNG")  # the Pillow path of a queued batch
    extents = _records(images)
    base = b"".join(extents)
    offsets = np.cumsum([0] + [len(e) for e in extents[:-1]]).astype(np.int64)
    records = np.arange(10, 15, dtype=np.int64)
    draw = KeyedDraw(CropSpec(20, 24, rand_mirror=True), 3, 1, ColourSpec(brightness=0.3))
    options = decode.DecodeOptions(mean=(100.0, 110.0, 120.0), std=(50.0, 60.0, 70.0))
    want = np.zeros((5, 20, 24, 3), np.float32)
    expected = pool.submit_records(
        base, offsets, want, label_width=2, draw=draw, records=records, options=options
    ).result()
    job = pool.records_job(want.shape, np.float32, label_width=2, draw=draw, options=options)
    got = np.zeros_like(want)
    result = job.submit(base, offsets, got, records).result()
    for a, b in zip(result[:3], expected[:3], strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got, want)
    assert job.native == (pool.backend == "native")
    if pool.backend != "native":
        assert result.status.tolist() == [decode.Status.RECORD] * 5
        return
    assert result.status.tolist() == [0] * 5 and result.ids.tolist() == [100, 101, 102, 103, 104]
    assert want.any()
    rows = (np.empty(5, np.int32), np.empty(5, np.int64), np.empty(5, np.int64),
            np.zeros((5, 4), np.int32), np.zeros(5, np.uint8))  # fmt: skip
    queued = np.zeros_like(want)
    handle, labels, ids = job.queue(base, offsets, queued, records, rows)
    pending = job.pending(base, queued, records, rows, handle, labels, ids).result()
    np.testing.assert_array_equal(queued, want)
    assert pending.status.tolist() == [0] * 5
    np.testing.assert_array_equal(pending.labels, expected.labels)
