"""The layer both iterators share: the on_error policy, the stats, batch buffer ownership."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from recio.consumer import ErrorPolicy, IterStats
from recio.errors import DecodeError
from recio.iterator import BatchBuffers, ImageRecordIter

from .test_iterator import make_rec

STATUS = np.array([0, 3, 0, 0, 4], dtype=np.int32)  # slots 1 and 4 bad
REASONS = [None, "corrupt", None, None, "truncated"]


def describe(j: int) -> str:
    return f"record id {100 + j} (record {j}, at byte {8 * j} of x.rec)"


def test_skip_fills_each_bad_slot_from_the_next_good_one_wrapping():
    fill = ErrorPolicy("skip").fill_from(STATUS, REASONS, describe, "batch 0")
    assert fill.tolist() == [0, 2, 2, 3, 0]


def test_replace_keeps_the_slots():
    assert ErrorPolicy("replace").fill_from(STATUS, REASONS, describe, "batch 0") is None


def test_raise_names_the_first_bad_record_and_its_status():
    with pytest.raises(DecodeError, match=r"record id 101 \(record 1, at byte 8 of x.rec\)") as e:
        ErrorPolicy("raise").fill_from(STATUS, REASONS, describe, "batch 0")
    assert e.value.status == 3 and e.value.index == 1


def test_skip_with_no_good_image_is_an_error():
    with pytest.raises(DecodeError, match="no image of batch 7"):
        ErrorPolicy("skip").fill_from(np.array([3, 4]), ["a", "b"], describe, "batch 7")


def test_unknown_policy_lists_the_valid_ones():
    with pytest.raises(ValueError, match="'skip', 'raise', 'replace'"):
        ErrorPolicy("ignore")


def test_stats_count_real_images_not_padding():
    stats = IterStats()
    ids = np.arange(100, 105)
    # the last two slots are padding that repeats records: slot 4's failure is not counted
    stats.count_batch(STATUS, ids, REASONS, pad=2, on_error="skip", url="x.rec")
    assert (stats.decoded, stats.skipped, stats.replaced) == (2, 1, 0)
    assert stats.bad_records == {101: "corrupt", 104: "truncated"}
    stats.count_batch(STATUS, ids, [None] * 5, pad=0, on_error="replace", url="x.rec")
    assert (stats.decoded, stats.replaced) == (5, 2)
    assert stats.bad_records[101] == "corrupt"  # a code's name when no text came


def test_buffers_reuse_only_what_nobody_holds():
    buffers = BatchBuffers((2, 3), np.uint8, limit=4)
    a = buffers.take()
    a[...] = 1
    b = buffers.take()  # `a` is held: a new buffer
    assert buffers.allocated == 2 and not np.shares_memory(a, b)
    kept = a[0]  # a slice keeps the view alive
    del a
    gc.collect()
    c = buffers.take()
    assert buffers.allocated == 3 and kept.tolist() == [1, 1, 1]
    del kept, c
    d = buffers.take()
    assert buffers.reused == 1 and buffers.allocated == 3
    assert d.flags.writeable and d.flags.c_contiguous


def test_buffers_forget_what_the_consumer_keeps_beyond_the_limit():
    buffers = BatchBuffers((4,), np.float32, limit=2)
    held = [buffers.take() for _ in range(5)]
    assert buffers.allocated == 5 and len(buffers._slots) == 2
    for i, h in enumerate(held):
        h[...] = i
    assert [float(h[0]) for h in held] == [0, 1, 2, 3, 4]


def test_the_iterator_reuses_batch_arrays_across_epochs(tmp_path):
    rec = make_rec(tmp_path, n=48)
    with ImageRecordIter(rec, (3, 24, 24), 4, dtype="uint8", prefetch_buffer=2) as it:
        for _ in range(4):
            for _batch in it:
                pass
        # 48 batches; in flight at once: one decoding, one queued, one the consumer holds
        assert it.buffers.allocated <= 4
        assert it.buffers.reused >= 44


def test_kept_batches_and_tensors_are_never_overwritten(tmp_path):
    torch = pytest.importorskip("torch")
    rec = make_rec(tmp_path, n=32)
    with ImageRecordIter(
        rec, (3, 24, 24), 4, dtype="uint8", prefetch_buffer=1, shuffle=True, rand_mirror=True
    ) as it:
        first = list(it)
        tensors = [torch.from_numpy(b.data) for b in first[:3]]
        copies = [b.data.copy() for b in first]
        tensor_copies = [t.clone() for t in tensors]
        del first[:3]  # only the tensors hold these three now
        for _ in range(3):  # more epochs while the first one's batches and tensors are held
            for _batch in it:
                pass
        assert it.buffers.reused > 0
    for b, c in zip(first, copies[3:], strict=True):
        np.testing.assert_array_equal(b.data, c)
    for t, c in zip(tensors, tensor_copies, strict=True):
        assert torch.equal(t, c)
