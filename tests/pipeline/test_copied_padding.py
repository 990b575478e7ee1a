"""A padded last batch's padding copied from the epoch's first batch (NOTE [copied padding]).

Under ``last_batch="pad"`` the padding repeats the first records of the epoch's order with
the same draws, so the local pipeline copies them from the epoch's first batch instead of
decoding them again. These tests pin down that it does (the pool is handed only the real
slots), and that the batches are those of a run that decodes the padding: one whose queue
holds the whole epoch from the start (its last batch is submitted before the first one is
taken, so nothing can be copied), with bad images, with an image list, on two ranks, and
after a resume.
"""

from __future__ import annotations

import numpy as np
import pytest

from recio.pipeline import read_decode
from recio.pipeline.iterator import ImageRecordIter

from .test_epoch_overlap import digest
from .test_iterator import make_rec

pytestmark = pytest.mark.needs_native

IMAGES, BATCH = 60, 8  # 8 batches an epoch, the last one with 4 real images and 4 of padding
DECODES_ALL = 32  # a queue deep enough for every batch of an epoch: nothing copied


@pytest.fixture(scope="module")
def rec(tmp_path_factory) -> str:
    return make_rec(tmp_path_factory.mktemp("padding"), n=IMAGES)


def make(rec: str, **kw) -> ImageRecordIter:
    args = dict(
        data_shape=(3, 24, 24), batch_size=BATCH, shuffle=True, seed=3,
        random_resized_crop=True, rand_mirror=True, preprocess_threads=2,
    )  # fmt: skip
    args.update(kw)
    return ImageRecordIter(rec, **args)


@pytest.fixture
def submitted(monkeypatch) -> list[int]:
    """How many slots each batch that takes the general path hands the pool."""
    sizes: list[int] = []
    submit = read_decode.BatchReader.submit

    def counted(self, positions, out, **kw):
        sizes.append(len(positions))
        return submit(self, positions, out, **kw)

    monkeypatch.setattr(read_decode.BatchReader, "submit", counted)
    return sizes


def epochs(it: ImageRecordIter, n: int = 3) -> list:
    with it:
        return [digest(batch) for _ in range(n) for batch in it]


def test_the_padding_is_copied_not_decoded(rec: str, submitted: list[int]) -> None:
    with make(rec) as it:
        for _ in range(3):
            batches = [(b.data.copy(), b.label.copy(), b.index.copy(), b.pad) for b in it]
            first, last = batches[0], batches[-1]
            assert last[3] == 4
            for k in range(3):  # the padding is the epoch's first four images, labels, ids
                np.testing.assert_array_equal(last[k][4:], first[k][:4])
    assert submitted == [4, 4, 4]  # each epoch's padded batch: its real slots alone


def test_the_batches_are_those_of_a_run_that_decodes_the_padding(
    rec: str, submitted: list[int]
) -> None:
    copied = epochs(make(rec))
    assert submitted == [4, 4, 4]
    decoded = epochs(make(rec, prefetch_buffer=DECODES_ALL))
    # the padding decoded (the epoch overlap queues a fourth epoch's last batch too)
    assert len(submitted) >= 6 and set(submitted[3:]) == {8}
    assert copied == decoded


@pytest.mark.parametrize(
    "kw",
    [
        dict(dtype="uint8", layout="NHWC"),
        dict(mean_r=120.0, std_r=50.0, brightness=0.3, pca_noise=0.1),
        dict(num_parts=2, part_index=1),
        dict(preprocess_threads=1),
    ],
    ids=["uint8-nhwc", "normalised-colour", "rank-1-of-2", "one-thread"],
)
def test_same_batches_in_other_settings(rec: str, kw: dict) -> None:
    assert epochs(make(rec, **kw)) == epochs(make(rec, prefetch_buffer=DECODES_ALL, **kw))


def test_a_bad_image_in_the_first_batch_decodes_the_padding(
    rec: str, tmp_path, submitted: list[int]
) -> None:
    with make(rec) as it:  # the order depends on the seed and the count, not the bytes
        first = int(next(iter(it)).index[0]) - 1000  # id = 1000 + key
    # the first record of epoch 0's order damaged: skip fills its slot from another
    bad = make_rec(tmp_path, n=IMAGES, corrupt=(first,))
    del submitted[:]
    got = epochs(make(bad, on_error="skip"), n=1)
    assert submitted[-1] == 8  # nothing copied from a batch with a bad image
    assert got == epochs(make(bad, on_error="skip", prefetch_buffer=DECODES_ALL), n=1)


def test_a_budget_without_room_for_the_copies_decodes_the_padding(
    rec: str, submitted: list[int]
) -> None:
    """The copies take up to two batches' worth beside the ``prefetch_buffer + 2`` arrays
    in flight: a ``memory_budget`` that holds only those arrays gets the padding decoded."""
    with make(rec) as it:
        batch_bytes = it.plan.batch_bytes
    del submitted[:]
    tight = epochs(make(rec, memory_budget=5 * batch_bytes + 10), n=2)  # prefetch 3
    assert submitted[:2] == [8, 8]
    del submitted[:]
    roomy = epochs(make(rec, prefetch_buffer=3, memory_budget=7 * batch_bytes), n=2)
    assert submitted == [4, 4]
    assert tight == roomy


def test_resumed_mid_epoch_the_padding_is_decoded(rec: str, submitted: list[int]) -> None:
    whole = epochs(make(rec), n=2)
    with make(rec) as it:
        for step, _ in enumerate(it):
            if step == 2:
                state = it.state_dict()
                break
    resumed = make(rec)
    resumed.load_state_dict(state)
    del submitted[:]
    # the resumed epoch never delivered its first batch: its padding is decoded; the next
    # epoch's is copied
    assert epochs(resumed, n=2) == whole[3:]
    assert submitted == [8, 4]
