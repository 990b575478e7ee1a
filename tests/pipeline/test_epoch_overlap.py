"""No drain at an epoch's end (NOTE [epoch overlap] in recio/pipeline/queued.py).

The pipeline reads and decodes the next epoch's first batches while the last ones are taken
(a local file's queued on the pool, a remote file's by its threads). These tests pin down
that it does, and that nothing a consumer can see depends on it: a state saved at any
step of a two-epoch run (the overlap's steps among them) restores the same bytes of data
and labels in a fresh iterator and in the same one, on another world size too; ``len()``
and ``state_dict()`` are the consumer's position; reset, load_state_dict, close and Ctrl-C
during the overlap leave nothing running.
"""

from __future__ import annotations

import hashlib
import threading
import time

import numpy as np
import pytest

from recio.pipeline.iterator import ImageRecordIter
from recio.pipeline.trace import Tracer

from .test_iterator import _upload, make_rec, recio_threads

pytestmark = pytest.mark.needs_native

IMAGES, BATCH = 52, 8  # pad: 7 batches an epoch, the last one with 4 of padding
EPOCHS = 2


@pytest.fixture(scope="module")
def rec(tmp_path_factory) -> str:
    return make_rec(tmp_path_factory.mktemp("overlap"), n=IMAGES)


def make(rec: str, **kw) -> ImageRecordIter:
    args = dict(
        data_shape=(3, 24, 24), batch_size=BATCH, shuffle=True, seed=5, rand_crop=True,
        rand_mirror=True, preprocess_threads=2,
    )  # fmt: skip
    args.update(kw)
    return ImageRecordIter(rec, **args)


def digest(batch) -> tuple:
    """What the consumer gets of a batch: where it stands, its ids, its bytes."""
    h = hashlib.sha256(np.ascontiguousarray(batch.data).tobytes())
    h.update(np.ascontiguousarray(batch.label).tobytes())
    return batch.epoch, batch.step, batch.pad, batch.index.tolist(), h.hexdigest()


def run(it: ImageRecordIter, epochs: int, on_batch=None) -> list:
    """The rest of the iterator's current epoch, then whole epochs: every batch's digest."""
    got = []
    for _ in range(epochs):
        for batch in it:
            got.append(digest(batch))
            if on_batch is not None:
                on_batch(it, batch)
    return got


def uninterrupted(rec: str, **kw) -> tuple[list, dict[int, dict]]:
    """Two epochs' digests, and the state saved after each count of batches."""
    states: dict[int, dict] = {}

    def save(it, batch):
        states[len(states) + 1] = it.state_dict()

    with make(rec, **kw) as it:
        return run(it, EPOCHS, save), states


def test_the_next_epochs_first_batch_is_queued_before_the_last_one_is_taken(rec):
    """The pool has epoch 1's first batches before the consumer has epoch 0's last one."""
    tracer = Tracer()
    taken_last = {}
    with make(rec, tracer=tracer) as it:
        n = len(it)
        for batch in it:
            if batch.step == n - 1:
                taken_last[batch.epoch] = tracer.now_us()
        for _batch in it:
            pass
    submitted = {
        (e["args"]["epoch"], e["args"]["step"]): e["ts"]
        for e in tracer.events
        if e["name"] == "decode+augment"
    }
    assert set(submitted) == {(e, s) for e in range(EPOCHS) for s in range(n)}
    assert submitted[1, 0] < taken_last[0]
    assert submitted[1, 1] < taken_last[0]  # the queue's room, not one batch


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"last_batch": "rollover"},  # a batch reaching into the next epoch's order
        {"last_batch": "discard", "prefetch_buffer": 8},  # the whole next epoch queued
        {"rand_crop": False, "prefetch_buffer": 3},
    ],
    ids=["pad", "rollover", "deep", "shallow"],
)
def test_a_state_saved_at_any_step_restores_the_same_bytes(rec, kw):
    full, states = uninterrupted(rec, **kw)
    for k, state in states.items():
        if k == len(full):
            continue
        with make(rec, **kw) as it:
            it.load_state_dict(state)
            assert run(it, EPOCHS - state["epoch"]) == full[k:], f"resumed after {k} batches"


def test_len_and_state_are_the_consumers_during_the_overlap(rec):
    with make(rec) as it:
        n = len(it)
        for epoch in range(EPOCHS):
            for step, batch in enumerate(it):
                assert (batch.epoch, batch.step) == (epoch, step)
                assert len(it) == n
                state = it.state_dict()
                if step == n - 1:  # taken, the epoch not yet ended: still its last step
                    assert (state["epoch"], state["step"]) == (epoch, n)
                else:
                    assert (state["epoch"], state["step"]) == (epoch, step + 1)
            assert len(it) == n
            assert (it.state_dict()["epoch"], it.state_dict()["step"]) == (epoch + 1, 0)


@pytest.mark.parametrize("k", [5, 6, 7, 8])  # overlap from the 5th batch (depth 3 of 7)
def test_loading_a_state_during_the_overlap_drops_the_queued_batches(rec, k):
    """The same iterator, mid-overlap, loads an earlier state and a later one."""
    full, states = uninterrupted(rec)
    with make(rec) as it:
        taken = [digest(b) for b, _ in zip(it, range(6), strict=False)]  # in the overlap
        assert taken == full[:6]
        it.load_state_dict(states[k])
        assert run(it, EPOCHS - states[k]["epoch"]) == full[k:]
    with make(rec) as it:
        taken = [digest(b) for b, _ in zip(it, range(6), strict=False)]
        it.load_state_dict(states[9])  # epoch 1's third batch: not the queued first ones
        assert run(it, 1) == full[9:]


def test_reset_during_the_overlap(rec):
    """reset() with the epoch's batches all taken goes on with the queued ones; mid-epoch,
    it drops them."""
    full, _ = uninterrupted(rec)
    n = len(full) // EPOCHS
    with make(rec) as it:
        taken = [digest(next(it)) for _ in range(n)]  # every batch, no StopIteration yet
        it.reset()
        taken += [digest(b) for b in it]
        assert taken == full
    with make(rec) as it:
        taken = [digest(next(it)) for _ in range(n - 1)]  # in the overlap, mid-epoch
        it.reset()
        rest = [digest(b) for b in it]
        assert rest == full[n:]


@pytest.mark.parametrize("where", ["local", "remote"])
def test_elastic_resume_inside_the_overlap(request, where):
    """A state saved in the overlap by one rank, loaded by two: the rest of epoch 0 and all
    of epoch 1 once over the ranks, each record's pixels those of the uninterrupted run."""
    rec = request.getfixturevalue("rec" if where == "local" else "remote")
    k = 6
    full_images, states = {}, {}
    with make(rec) as it:
        for batch in it:
            take_images(full_images, batch)
            states[batch.step + 1] = it.state_dict()
        for batch in it:
            take_images(full_images, batch)
    resumed_images, counts = {}, []
    for rank in range(2):
        with make(rec, batch_size=BATCH // 2, part_index=rank, num_parts=2) as it:
            it.load_state_dict(states[k])
            count = 0
            for _ in range(EPOCHS):
                for batch in it:
                    take_images(resumed_images, batch, clash=False)
                    count += 1
            counts.append(count)
    assert counts[0] == counts[1]
    n = len(full_images)
    epoch0_before = {key for key in full_images if key[0] == 0} - set(resumed_images)
    assert len(epoch0_before) == k * BATCH  # the batches before the state, nothing else
    assert len(resumed_images) == n - k * BATCH
    for key, pixels in resumed_images.items():
        assert full_images[key] == pixels, key


def take_images(into: dict, batch, clash: bool = True) -> None:
    """(epoch, id) -> digest of the image, for the batch's real slots."""
    real = len(batch.index) - batch.pad
    for j in range(real):
        key = (batch.epoch, int(batch.index[j]))
        assert clash or key not in into, f"{key} delivered twice"
        into[key] = hashlib.sha256(np.ascontiguousarray(batch.data[j]).tobytes()).hexdigest()


def test_close_in_the_overlap_waits_for_the_queued_batches(rec):
    it = make(rec)
    n = len(it)
    for batch in it:
        if batch.step == n - 2:
            break
    queued = list(it._pipeline._queued)
    assert {q.epoch for q in queued} == {0, 1}  # the overlap is on
    outs = [q.out for q in queued]
    t0 = time.monotonic()
    it.close()
    assert time.monotonic() - t0 < 30
    assert it._pipeline is None and all(q.pending.wait(0) for q in queued)
    snap = [o.copy() for o in outs]
    time.sleep(0.05)
    assert all(np.array_equal(s, o) for s, o in zip(snap, outs, strict=True))
    assert not recio_threads()
    with pytest.raises(ValueError, match="was closed"):
        next(it)


@pytest.mark.parametrize("where", ["local", "remote"])
@pytest.mark.parametrize("delay", [0.05, 0.13, 0.31])
def test_ctrl_c_around_epoch_ends_leaves_the_iterator_closable(tmp_path_factory, delay, where):
    """A KeyboardInterrupt while epochs of two batches go by (every get in an overlap)."""
    import _thread

    rec = make_rec(tmp_path_factory.mktemp("ctrlc"), n=16)
    if where == "remote":
        rec = _upload(rec, f"memory://ctrlc/{delay}.rec", {})
    it = make(rec, batch_size=8)
    timer = threading.Timer(delay, _thread.interrupt_main)
    with pytest.raises(KeyboardInterrupt):
        timer.start()
        for _ in range(100_000):
            for _batch in it:
                pass
    timer.join()
    closer = threading.Thread(target=it.close)
    closer.start()
    closer.join(30)
    assert not closer.is_alive(), "close() hung"
    assert it._pipeline is None and not recio_threads()


@pytest.fixture(scope="module")
def remote(rec) -> str:
    """The same records on fsspec's memory filesystem: the remote pipeline reads them."""
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    for suffix in (".rec", ".idx"):
        with open(rec[: -len(".rec")] + suffix, "rb") as f:
            fs.pipe(f"/overlap/data{suffix}", f.read())
    return "memory://overlap/data.rec"


def test_a_remote_file_gives_the_local_files_batches(rec, remote):
    full, _ = uninterrupted(rec)
    with make(remote) as it:
        assert not it.records.is_local
        assert run(it, EPOCHS) == full


def test_a_remote_files_next_epoch_is_decoded_before_it_starts(remote):
    """The decode threads go on into epoch 1 before the consumer asks for it."""
    full, _ = uninterrupted(remote)
    tracer = Tracer()
    with make(remote, tracer=tracer) as it:
        n = len(it)
        for _batch in it:
            pass  # epoch 0 ended; epoch 1 not started: only the overlap decodes it
        assert it.epoch == 0

        def decoded_ahead():
            return {
                e["args"]["step"]
                for e in list(tracer.events)
                if e["name"] == "decode+augment" and e["args"]["epoch"] == 1
            }

        deadline = time.monotonic() + 60  # a loaded machine: eventually, not by when
        while 0 not in decoded_ahead() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert 0 in decoded_ahead()
        assert run(it, 1) == full[n:]


def test_a_remote_state_saved_at_any_step_restores_the_same_bytes(remote):
    full, states = uninterrupted(remote)
    for k, state in states.items():
        if k == len(full):
            continue
        with make(remote) as it:
            it.load_state_dict(state)
            assert run(it, EPOCHS - state["epoch"]) == full[k:], f"resumed after {k} batches"


def test_a_remote_load_state_and_close_during_the_overlap(remote):
    full, states = uninterrupted(remote)
    n = len(full) // EPOCHS
    with make(remote) as it:
        taken = [digest(next(it)) for _ in range(n)]  # epoch 1 being read and decoded
        it.load_state_dict(states[3])
        assert taken + run(it, EPOCHS) == full[:n] + full[3:]
    it = make(remote)
    taken = [digest(b) for b in it]
    it.close()
    assert taken == full[:n] and not recio_threads()
