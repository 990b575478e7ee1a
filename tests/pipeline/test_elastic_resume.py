"""Resuming on another world size or batch size: the global stream goes on, nothing twice.

What "exactly once" means here, for the epoch a state was saved in (its order ``order``,
``n`` samples, ``c`` of them consumed when saved, ``G`` the resumed run's global batch):

- ``pad``: every sample of the epoch is a real (non-pad) slot exactly once, counting the
  batches before the state and those after the resume; padding sits only at the end of the
  last global step, ``ceil((n - c) / G) * G - (n - c)`` slots of it.
- ``discard``: the samples delivered are exactly ``order[:c + k * G]`` with
  ``k = (n - c) // G``, each once: only the last ``(n - c) % G`` are dropped.
- ``rollover``: the stream positions delivered after the resume follow on from the saved
  one with no gap and no repeat, across the epoch boundaries, so each epoch's order is
  still visited in full, nothing twice.

And in every case each rank of the resumed run gets the same number of batches.
The sampler is tested directly (pure integers); a few tests run the real iterators.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recio.pipeline.iterator import ImageRecordIter
from recio.sampling.sampler import Sampler, epoch_order
from tests.conftest import needs_dali

from .test_iterator import _upload, make_rec

WORLD_SIZES = st.sampled_from([1, 2, 3, 4, 8])
POLICIES = st.sampled_from(["pad", "discard", "rollover"])
SHUFFLES = st.sampled_from(["none", "global", "block"])


def world(n, batch, parts, policy, shuffle, lanes=2, start=None):
    """One sampler per rank; small block geometry so that windows matter at these sizes."""
    kw = dict(shuffle=shuffle, seed=9, last_batch=policy, block_size=3, window=2)
    samplers = [
        Sampler(n, batch, part_index=r, num_parts=parts, block_parts=lanes, **kw)
        for r in range(parts)
    ]
    return samplers if start is None else [s.resumed(*start) for s in samplers]


def global_steps(samplers, epoch, stop=None):
    """The epoch's plans of every rank, step by step: [[plan of rank 0, of rank 1, ...]]."""
    s = samplers[0]
    steps = {(t.first_step(epoch), t.steps_in_epoch(epoch)) for t in samplers}
    assert len(steps) == 1  # every rank has the same steps
    end = s.steps_in_epoch(epoch) if stop is None else stop
    return [[t.plan(epoch, k) for t in samplers] for k in range(s.first_step(epoch), end)]


def real(steps):
    """Record positions of the real (non-pad) slots, in global stream order."""
    out = []
    for plans in steps:
        for p in plans:
            out.extend(p.positions[: len(p.positions) - p.pad].tolist())
    return out


def streams(steps):
    """Stream positions of the real slots, sorted (the ranks interleave within a step)."""
    out = []
    for plans in steps:
        for p in plans:
            out.extend(p.stream[: len(p.stream) - p.pad].tolist())
    return sorted(out)


def feasible(n, batch, parts, policy):
    return policy != "discard" or n >= batch * parts


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 120),
    before=st.tuples(WORLD_SIZES, st.integers(1, 7)),
    after=st.tuples(WORLD_SIZES, st.integers(1, 7)),
    policy=POLICIES,
    shuffle=SHUFFLES,
    epoch=st.integers(0, 2),
    where=st.floats(0, 1),
    data=st.data(),
)
def test_resume_on_another_world_delivers_the_epoch_exactly_once(
    n, before, after, policy, shuffle, epoch, where, data
):
    (p1, b1), (p2, b2) = before, after
    if not (feasible(n, b1, p1, policy) and feasible(n, b2, p2, policy)):
        return
    lanes = data.draw(st.sampled_from([1, 2, 4, 8]), label="block_parts")
    first = world(n, b1, p1, policy, shuffle, lanes)
    s = first[0]
    lo, hi = s.first_step(epoch), s.steps_in_epoch(epoch)
    stop = lo + round(where * (hi - lo))  # the state is saved before step `stop`
    done = global_steps(first, epoch, stop)
    consumed = {t.consumed_at(epoch, stop) for t in first}
    assert len(consumed) == 1  # every rank saves the same position
    (c,) = consumed
    resumed = world(n, b2, p2, policy, shuffle, lanes, start=(epoch, c))
    r = resumed[0]
    g = b2 * p2
    rest = global_steps(resumed, epoch)
    for plans in rest:  # equal counts: every rank a full batch at every step
        assert all(len(p.positions) == b2 for p in plans)
    order = s.order(epoch)
    assert np.array_equal(order, r.order(epoch))  # the order does not depend on the world
    left = r.steps_in_epoch(epoch) - r.first_step(epoch)
    if policy == "pad":
        assert left == -(-(n - c) // g)
        assert sorted(real(done) + real(rest)) == list(range(n))
        pads = [p.pad for plans in rest for p in plans]
        assert sum(pads) == left * g - (n - c)
        assert not any(pads[: len(pads) - p2])  # only in the last step
    elif policy == "discard":
        assert left == (n - c) // g
        got = real(done) + real(rest)
        assert len(got) == len(set(got))
        assert sorted(got) == sorted(order[: c + left * g].tolist())
    else:
        # rollover: after the state, the stream goes on with no gap and no repeat
        stream = streams(rest) + streams(global_steps(resumed, epoch + 1))
        start = epoch * n + c
        assert stream == list(range(start, start + len(stream)))
        assert streams(done) == list(range(start - len(streams(done)), start))
        for plans in rest + global_steps(resumed, epoch + 1):
            for p in plans:  # and each slot holds its stream position's sample
                want = [s.order(k // n)[k % n] for k in p.stream.tolist()]
                assert p.positions.tolist() == want


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 150),
    parts=WORLD_SIZES,
    batch=st.integers(1, 9),
    policy=POLICIES,
    shuffle=SHUFFLES,
    epoch=st.integers(0, 2),
    where=st.floats(0, 1),
)
def test_resume_on_the_same_world_plans_what_the_uninterrupted_run_does(
    n, parts, batch, policy, shuffle, epoch, where
):
    if not feasible(n, batch, parts, policy):
        return
    plain = world(n, batch, parts, policy, shuffle)
    s = plain[0]
    stop = round(where * s.steps_in_epoch(epoch))
    resumed = world(n, batch, parts, policy, shuffle, start=(epoch, s.consumed_at(epoch, stop)))
    for e in (epoch, epoch + 1):
        first = stop if e == epoch else 0
        assert resumed[0].first_step(e) == first
        assert resumed[0].steps_in_epoch(e) == s.steps_in_epoch(e)
        for a, b in zip(plain, resumed, strict=True):
            for k in range(first, s.steps_in_epoch(e)):
                pa, pb = a.plan(e, k), b.plan(e, k)
                assert (pa.step, pa.pad) == (pb.step, pb.pad)
                assert np.array_equal(pa.positions, pb.positions)


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(8, 200),
    parts=WORLD_SIZES,
    batch=st.integers(1, 9),
    policy=st.sampled_from(["pad", "discard"]),
    shuffle=SHUFFLES,
    consumed=st.floats(0, 1),
)
def test_epochs_after_the_resumed_one_are_whole(n, parts, batch, policy, shuffle, consumed):
    if not feasible(n, batch, parts, policy):
        return
    c = round(consumed * n)
    resumed = world(n, batch, parts, policy, shuffle, start=(0, c))
    plain = world(n, batch, parts, policy, shuffle)
    for a, b in zip(resumed, plain, strict=True):
        assert a.first_step(1) == 0 and a.steps_in_epoch(1) == b.steps_in_epoch(1)
        assert np.array_equal(a.shard_positions(1), b.shard_positions(1))
        # the resumed epoch's shard is its plans' real positions
        steps = range(a.first_step(0), a.steps_in_epoch(0))
        plans = [a.plan(0, k) for k in steps]
        got = [q for p in plans for q in p.positions[: batch - p.pad].tolist()]
        assert a.shard_positions(0).tolist() == got


def test_block_order_is_the_same_on_any_world_size_and_windows_stay_whole():
    """Block shuffle's order comes from (seed, epoch, block_parts); ranks read whole blocks
    when their number divides block_parts."""
    n, block, window, lanes, batch = 16 * 2 * 4 * 3, 16, 2, 4, 4
    orders = set()
    for parts in (1, 2, 4):
        samplers = [
            Sampler(n, batch, part_index=r, num_parts=parts, shuffle="block", seed=1,
                    block_size=block, window=window, block_parts=lanes)
            for r in range(parts)
        ]  # fmt: skip
        orders.add(tuple(samplers[0].order(0).tolist()))
        group = samplers[0].fetch_group()
        assert group == block * window * lanes // (batch * parts)
        for s in samplers:
            shard = s.shard_positions(0)
            per = group * batch
            for w in range(len(shard) // per):
                mine = np.sort(shard[w * per : (w + 1) * per])
                runs = np.split(mine, np.flatnonzero(np.diff(mine) != 1) + 1)
                assert all(len(r) % block == 0 for r in runs)
    assert len(orders) == 1


def test_resumed_steps_keep_their_numbers_and_fetch_groups_follow_the_windows():
    """A resumed epoch's first step is consumed // global_batch: the prefetcher's groups
    (multiples of fetch_group in step numbers) still start where the windows do."""
    s = Sampler(4096, 8, num_parts=2, shuffle="block", block_size=16, window=2, block_parts=2)
    group = s.fetch_group()  # 16 * 2 * 2 / 16 = 4 steps a window
    assert s.resumed(0, 16 * 9).plan(0, 12).stream[0] == 3 * group * 16  # window 3
    r = s.resumed(0, 150)  # from another geometry: not a whole number of steps
    assert r.first_step(0) == 9
    start = r.plan(0, 12).stream[0]  # step 12 begins within a global batch of window 3
    assert 0 <= start - 3 * group * 16 < s.global_batch


def test_start_out_of_range_is_refused():
    s = Sampler(10, 2)
    with pytest.raises(ValueError, match=r"consumed=11 is outside 0\.\.10"):
        s.resumed(0, 11)
    with pytest.raises(ValueError, match=r"consumed=-1"):
        s.resumed(1, -1)
    with pytest.raises(ValueError, match="epoch must be >= 0"):
        s.resumed(-1, 0)
    roll = Sampler(10, 4, last_batch="rollover")
    assert roll.resumed(1, -2).first_step(1) == 0  # leftovers of epoch 0 start epoch 1
    with pytest.raises(ValueError, match=r"consumed=-11 is outside -10\.\.10"):
        roll.resumed(1, -11)


# --- through the iterators -------------------------------------------------------------

N = 41


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return make_rec(tmp_path_factory.mktemp("elastic"), n=N)


def make_iter(rec, **kw):
    args = dict(data_shape=(3, 16, 16), batch_size=4, preprocess_threads=1, shuffle=True)
    args.update(kw)
    return ImageRecordIter(rec, **args)


def take(it, count):
    """The real record ids of the next ``count`` batches (or to the epoch's end)."""
    ids = []
    for k, b in enumerate(it):
        ids.extend(b.index[: len(b.index) - b.pad].tolist())
        if k + 1 == count:
            break
    return ids


@pytest.mark.parametrize("shuffle_mode", ["global", "block"])
@pytest.mark.parametrize(("last_batch", "batch_after"), [("pad", 3), ("pad", 4), ("discard", 2)])
def test_two_ranks_then_three_cover_the_epoch_exactly_once(
    rec, shuffle_mode, last_batch, batch_after
):
    kw = dict(shuffle_mode=shuffle_mode, seed=3, last_batch=last_batch)
    seen, states = [], []
    for part in range(2):
        with make_iter(rec, part_index=part, num_parts=2, **kw) as it:
            seen += take(it, 2)
            states.append(it.state_dict())
    assert states[0]["consumed"] == 2 * 2 * 4
    same = {k for k in states[0] if states[0][k] == states[1][k]}
    assert same == set(states[0]) - {"part_index"}  # every rank saves the same position
    lengths, after = set(), []
    for part in range(3):
        with make_iter(rec, part_index=part, num_parts=3, batch_size=batch_after, **kw) as it:
            it.load_state_dict(states[part % 2])
            lengths.add(len(it))
            batches = list(it)
            assert len(batches) == len(it)
            after += [i for b in batches for i in b.index[: len(b.index) - b.pad].tolist()]
            # the next epoch is whole again, on the new geometry
            g = 3 * batch_after
            assert len(list(it)) == len(it) == (-(-N // g) if last_batch == "pad" else N // g)
    (left,) = lengths  # every rank the same number of batches
    rest = N - 16
    g = 3 * batch_after
    assert left == (-(-rest // g) if last_batch == "pad" else rest // g)
    ids = seen + after
    assert len(ids) == len(set(ids))
    if last_batch == "pad":
        assert sorted(ids) == [1000 + k for k in range(N)]
    else:
        assert len(ids) == 16 + left * g


def test_resume_continues_the_same_records_in_order(rec):
    """One rank resumed on two (and with another batch size): the same stream goes on."""
    with make_iter(rec, seed=5) as it:
        whole = take(it, 100)
    with make_iter(rec, seed=5) as it:
        head = take(it, 3)
        state = it.state_dict()
    tail = []
    for part in range(2):
        with make_iter(rec, seed=5, part_index=part, num_parts=2, batch_size=5) as it:
            it.load_state_dict(state)
            tail.append([b.index[: len(b.index) - b.pad].tolist() for b in it])
    # interleave the two ranks' batches back into the global stream
    merged = []
    for a, b in zip(*tail, strict=True):
        merged += [x for pair in zip(a, b, strict=False) for x in pair]
        merged += a[len(b) :] + b[len(a) :]
    assert head + merged == whole


def test_remote_block_shuffle_resumed_on_another_world_reads_the_right_records(rec, memfs):
    """The prefetcher's window groups over a resumed epoch: the records the local file gives."""
    url = _upload(rec, "memory://elastic/data.rec", {})
    kw = dict(shuffle_mode="block", block_parts=2, seed=8, dtype="uint8")
    with make_iter(rec, num_parts=2, **kw) as it:
        take(it, 3)
        state = it.state_dict()
    for part in range(3):
        args = dict(kw, part_index=part, num_parts=3, batch_size=3)
        with make_iter(rec, **args) as local, make_iter(url, **args) as remote:
            local.load_state_dict(state)
            remote.load_state_dict(state)
            assert remote.sampler.fetch_group() is not None
            for a, b in zip(local, remote, strict=True):
                np.testing.assert_array_equal(a.index, b.index)
                np.testing.assert_array_equal(a.data, b.data)


def test_state_of_the_earlier_format_resumes(rec):
    """(epoch, step, batch_size, num_parts) as saved before ``consumed`` existed."""
    legacy = {"epoch": 0, "step": 2, "seed": 3, "num_records": N, "batch_size": 4,
              "part_index": 0, "num_parts": 2}  # fmt: skip
    with make_iter(rec, seed=3, part_index=0, num_parts=2) as it:
        it.load_state_dict(legacy)
        assert it.state_dict()["consumed"] == 16 and it.state_dict()["step"] == 2
        want = [it.sampler.plan(0, k).positions.tolist() for k in range(2, len(it) + 2)]
    with make_iter(rec, seed=3, part_index=0, num_parts=2) as plain:
        assert want == [plain.sampler.plan(0, k).positions.tolist() for k in range(2, 6)]
    # block shuffle then: blocks of 256 in windows of 4 per rank, one partition per rank
    with make_iter(rec, seed=3, shuffle_mode="block", part_index=1, num_parts=3) as it:
        it.load_state_dict(legacy)
        s = it.sampler
        assert (s.block_parts, s.block_size, s.window) == (2, 256, 4)
        then = epoch_order(N, 3, 0, "block", block_size=256, window=4, parts=2)
        assert np.array_equal(s.order(0), then)


def test_block_geometry_is_taken_from_the_state(rec):
    with make_iter(rec, shuffle_mode="block", block_parts=4) as it:
        take(it, 1)
        state = it.state_dict()
    assert state["block_parts"] == 4
    with make_iter(rec, shuffle_mode="block", num_parts=2) as it:  # default 8: the state's
        it.load_state_dict(state)
        assert it.sampler.block_parts == 4 and it.state_dict()["block_parts"] == 4
    refused = pytest.raises(ValueError, match="block_parts=4.*block_parts=2")
    with make_iter(rec, shuffle_mode="block", block_parts=2) as it, refused:
        it.load_state_dict(state)


def test_states_that_cannot_be_honoured_are_refused(rec, tmp_path):
    with make_iter(rec, seed=3) as it:
        take(it, 1)
        state = it.state_dict()
    other = make_rec(tmp_path, n=N, seed=1)  # as many records, other images
    cases = [
        (dict(seed=4), "seed=3.*seed=4"),
        (dict(shuffle=False), "shuffle='global'.*shuffle='none'"),
        (dict(shuffle_mode="block"), "shuffle='global'.*shuffle='block'"),
        (dict(last_batch="rollover"), "last_batch='pad'.*last_batch='rollover'"),
    ]
    for kw, message in cases:
        with make_iter(rec, **{"seed": 3, **kw}) as it, pytest.raises(ValueError, match=message):
            it.load_state_dict(state)
    with make_iter(other, seed=3) as it, pytest.raises(ValueError, match="fingerprint="):
        it.load_state_dict(state)
    (tmp_path / "short").mkdir()
    short = make_rec(tmp_path / "short", n=9)
    refused = pytest.raises(ValueError, match=f"num_records={N}.*num_records=9")
    with make_iter(short, seed=3) as it, refused:
        it.load_state_dict(state)
    with make_iter(rec, seed=3) as it:
        with pytest.raises(ValueError, match="consumed=99"):
            it.load_state_dict({**state, "consumed": 99})
        it.load_state_dict({**state, "last_batch": "discard"})  # pad and discard agree
        assert it.state_dict()["consumed"] == 4


def test_len_counts_the_batches_left_then_whole_epochs(rec):
    with make_iter(rec, seed=2) as it:
        take(it, 4)
        state = it.state_dict()
    with make_iter(rec, seed=2, batch_size=3, num_parts=2) as it:
        it.load_state_dict(state)
        assert len(it) == -(-(N - 16) // 6)
        assert len(list(it)) == -(-(N - 16) // 6)
        epoch = iter(it)  # the next epoch
        assert len(it) == -(-N // 6)
        assert len(list(epoch)) == len(it)


@needs_dali
def test_dali_stage_resumes_on_another_world_size(rec):
    from recio import dali

    kw = dict(data_shape=(3, 16, 16), shuffle=True, seed=6)
    seen, states = [], []
    for part in range(2):
        args = dict(kw, part_index=part, num_parts=2, batch_size=4)
        it = dali.DALIImageRecordIter(rec, device="cpu", **args)
        seen += take(it, 3)
        states.append(it.state_dict())
        it.close()
    assert states[0]["consumed"] == states[1]["consumed"] == 24
    after = []
    for part in range(3):
        args = dict(kw, part_index=part, num_parts=3, batch_size=3)
        it = dali.DALIImageRecordIter(rec, device="cpu", **args)
        it.load_state_dict(states[part % 2])
        with make_iter(rec, **args) as ref:
            ref.load_state_dict(states[part % 2])
            want = [(b.index.tolist(), b.pad) for b in ref]
        got = [(b.index.tolist(), b.pad) for b in it]
        it.close()
        assert got == want and len(got) == 2  # 17 left, global steps of 9
        after += [i for ids, pad in got for i in ids[: len(ids) - pad]]
    assert sorted(seen + after) == [1000 + k for k in range(N)]


def test_hostile_states_are_refused_naming_the_field(rec):
    """Wrong types and ranges, an old-format step past its epoch, and no state at all."""
    from recio.errors import ResumeStateError, ResumeStateTypeError

    with make_iter(rec, seed=3) as it:
        take(it, 1)
        state = it.state_dict()
        cases = [
            ({**state, "epoch": 1.5}, ResumeStateTypeError, "'epoch' is 1.5"),
            ({**state, "epoch": True}, ResumeStateTypeError, "'epoch' is True"),
            ({**state, "consumed": 4.0}, ResumeStateTypeError, "'consumed' is 4.0"),
            ({**state, "epoch": -1}, ResumeStateError, "'epoch' is -1, not >= 0"),
            ({**state, "block_size": 0}, ResumeStateError, "'block_size' is 0"),
            ({"epoch": 0, "step": 10**6, "seed": 3, "batch_size": 4, "num_parts": 1},
             ResumeStateError, r"'step' is 1000000, past the end of epoch 0 \(step 11\)"),
            ({}, ResumeStateError, "no 'epoch' field"),
            ({"epoch": 0}, ResumeStateError, "no 'consumed' field"),
            ([("epoch", 0)], ResumeStateTypeError, "cannot resume from a list"),
            (None, ResumeStateTypeError, "cannot resume from a NoneType"),
        ]  # fmt: skip
        for bad, error, message in cases:
            with pytest.raises(error, match=message):
                it.load_state_dict(bad)
        assert issubclass(ResumeStateTypeError, TypeError)
        assert issubclass(ResumeStateError, ValueError)
        assert it.state_dict() == state  # nothing was changed by the refusals
        it.load_state_dict({"epoch": 0, "step": 11, "seed": 3, "batch_size": 4})  # the end
        assert len(list(it)) == 0
