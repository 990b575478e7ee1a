"""The layer both iterators share: the on_error policy and the stats."""

from __future__ import annotations

import numpy as np
import pytest

from recio.errors import DecodeError
from recio.pipeline.positioned import ErrorPolicy, IterStats

STATUS = np.array([0, 3, 0, 0, 4], dtype=np.int32)  # slots 1 and 4 bad
REASONS = [None, "corrupt", None, None, "truncated"]


def describe(j: int) -> str:
    return f"record id {100 + j} (record {j}, at byte {8 * j} of x.rec)"


def test_skip_fills_each_bad_slot_from_the_next_good_one_wrapping():
    fill = ErrorPolicy("skip").fill_from(STATUS, REASONS, describe)
    assert fill.tolist() == [0, 2, 2, 3, 0]


def test_replace_keeps_the_slots():
    assert ErrorPolicy("replace").fill_from(STATUS, REASONS, describe) is None


def test_raise_names_the_first_bad_record_and_its_status():
    with pytest.raises(DecodeError, match=r"record id 101 \(record 1, at byte 8 of x.rec\)") as e:
        ErrorPolicy("raise").fill_from(STATUS, REASONS, describe)
    assert e.value.status == 3 and e.value.index == 1


def test_skip_with_no_good_image_asks_for_a_refill():
    """No slot of the batch to take from: -1 everywhere (NOTE [refill]), not an error."""
    fill = ErrorPolicy("skip").fill_from(np.array([3, 4]), ["a", "b"], describe)
    assert fill.tolist() == [-1, -1]


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
