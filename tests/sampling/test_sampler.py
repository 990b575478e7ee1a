"""Order, sharding and the last-batch policies: pure integer math, tested without processes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recio.sampling.sampler import LastBatch, Sampler, epoch_order


def ranks(n, batch, parts, policy, seed=3, shuffle=True):
    return [
        Sampler(
            n, batch, part_index=r, num_parts=parts, shuffle=shuffle, seed=seed, last_batch=policy
        )
        for r in range(parts)
    ]


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 300),
    batch=st.integers(1, 17),
    parts=st.integers(1, 6),
    policy=st.sampled_from(["pad", "discard", "rollover"]),
)
def test_equal_batches_disjoint_and_complete(n, batch, parts, policy):
    if policy == "discard" and n < batch * parts:
        with pytest.raises(ValueError, match="no batch"):
            Sampler(n, batch, num_parts=parts, last_batch=policy)
        return
    samplers = ranks(n, batch, parts, policy)
    for epoch in range(3):
        counts = {s.steps_in_epoch(epoch) for s in samplers}
        assert len(counts) == 1  # every rank gets the same number of batches
        shards = [s.shard_positions(epoch) for s in samplers]
        real = np.concatenate(shards)
        if policy != "rollover":  # rollover steps may straddle two epochs' orders
            assert len(real) == len(set(real.tolist()))  # disjoint
        if policy == "pad":
            assert sorted(real.tolist()) == list(range(n))  # complete
        if policy == "discard":
            assert len(real) == (n // (batch * parts)) * batch * parts
        for s in samplers:
            for step in range(s.steps_in_epoch(epoch)):
                plan = s.plan(epoch, step)
                assert len(plan.positions) == batch and 0 <= plan.pad <= batch
                assert ((plan.positions >= 0) & (plan.positions < n)).all()


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 200), batch=st.integers(1, 9), parts=st.integers(1, 4))
def test_rollover_covers_every_record_once_per_pass(n, batch, parts):
    """Over many epochs, the stream visits each epoch's order in full, nothing twice."""
    samplers = ranks(n, batch, parts, "rollover")
    epochs = 4
    seen = []
    for epoch in range(epochs):
        for step in range(samplers[0].steps_in_epoch(epoch)):
            # interleave ranks as they sit in the global step
            plans = [s.plan(epoch, step).positions for s in samplers]
            seen.extend(np.stack(plans, 1).reshape(-1).tolist())
    total_steps = epochs * n // (batch * parts)
    assert len(seen) == total_steps * batch * parts
    for e in range(epochs):
        chunk = seen[e * n : (e + 1) * n]
        if len(chunk) == n:
            assert sorted(chunk) == list(range(n))


def test_shuffle_differs_per_epoch_same_per_seed():
    a, b = epoch_order(1000, 7, 0), epoch_order(1000, 7, 1)
    assert not np.array_equal(a, b)
    assert np.array_equal(a, epoch_order(1000, 7, 0))
    assert not np.array_equal(a, epoch_order(1000, 8, 0))
    assert sorted(a.tolist()) == list(range(1000))
    assert np.array_equal(epoch_order(10, 7, 0, "none"), np.arange(10))


def test_block_shuffle_keeps_runs_and_is_a_permutation():
    order = epoch_order(1000, 1, 0, "block", block_size=50, window=1)
    assert sorted(order.tolist()) == list(range(1000))
    # with window=1 each span of 50 holds exactly one block's records
    for lo in range(0, 1000, 50):
        span = order[lo : lo + 50]
        assert span.max() - span.min() == 49
    assert not np.array_equal(order, np.arange(1000))


@given(st.integers(0, 700), st.integers(1, 100), st.integers(1, 5), st.integers(0, 3))
def test_block_shuffle_is_a_permutation(n, block, window, epoch):
    order = epoch_order(n, 7, epoch, "block", block_size=block, window=window)
    assert order.dtype == np.int64 and sorted(order.tolist()) == list(range(n))
    assert np.array_equal(order, epoch_order(n, 7, epoch, "block", block_size=block, window=window))


def test_block_shuffle_keeps_windows_contiguous_and_varies_by_epoch():
    order = epoch_order(1000, 1, 0, "block", block_size=50, window=2)
    for w in range(0, 1000, 100):
        blocks = set((order[w : w + 100] // 50).tolist())
        assert len(blocks) == 2
    assert not np.array_equal(order, epoch_order(1000, 1, 1, "block", block_size=50, window=2))
    assert not np.array_equal(order, np.arange(1000))


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(1, 300),
    batch=st.integers(1, 9),
    parts=st.integers(1, 6),
    block=st.integers(1, 12),
    window=st.integers(1, 3),
)
def test_block_shuffle_shards_are_disjoint_and_complete(n, batch, parts, block, window):
    samplers = [
        Sampler(n, batch, part_index=r, num_parts=parts, shuffle="block", seed=5,
                block_size=block, window=window)
        for r in range(parts)
    ]  # fmt: skip
    for epoch in range(2):
        real = np.concatenate([s.shard_positions(epoch) for s in samplers])
        assert sorted(real.tolist()) == list(range(n))


@pytest.mark.parametrize(("parts", "lanes"), [(2, 2), (3, 3), (4, 4), (2, 4), (1, 4), (2, 6)])
def test_block_shuffle_gives_each_rank_whole_blocks(parts, lanes):
    """With world sizes dividing the canonical partitions, a rank's window is whole blocks."""
    block, window, batch = 16, 2, 8
    n = block * (window * lanes * 5 + 1)  # five full windows and a one-block tail
    samplers = [
        Sampler(n, batch, part_index=r, num_parts=parts, shuffle="block", seed=3,
                block_size=block, window=window, block_parts=lanes)
        for r in range(parts)
    ]  # fmt: skip
    full = block * window * lanes // (batch * parts)  # batches per rank per window
    assert samplers[0].fetch_group() == full
    for s in samplers:
        shard = s.shard_positions(0)
        for w in range(5):
            mine = np.sort(shard[w * full * batch : (w + 1) * full * batch])
            runs = np.split(mine, np.flatnonzero(np.diff(mine) != 1) + 1)
            assert all(len(r) % block == 0 and r[0] % block == 0 for r in runs), runs
    real = np.concatenate([s.shard_positions(0) for s in samplers])
    assert sorted(real.tolist()) == list(range(n))  # still a partition of the records
    for m in (n + 7, 5, 0):  # a short block somewhere, fewer records than a block, none
        order = epoch_order(m, 3, 0, "block", block_size=block, window=window, parts=lanes)
        assert sorted(order.tolist()) == list(range(m))


def test_block_order_does_not_depend_on_the_world_size():
    orders = {
        parts: Sampler(5000, 8, num_parts=parts, shuffle="block", seed=2).order(1).tolist()
        for parts in (1, 2, 3, 8)
    }
    assert len({tuple(o) for o in orders.values()}) == 1
    default = epoch_order(5000, 2, 1, "block", parts=8)  # the default canonical partitions
    assert orders[1] == default.tolist()


def test_pad_marks_padding_at_the_end():
    s = Sampler(10, 4, num_parts=1, last_batch=LastBatch.PAD)
    assert len(s) == 3
    last = s.plan(0, 2)
    assert last.pad == 2 and last.positions[:2].tolist() == [8, 9]


def test_argument_checks():
    with pytest.raises(ValueError, match="part_index"):
        Sampler(10, 2, part_index=2, num_parts=2)
    with pytest.raises(ValueError, match="batch_size"):
        Sampler(10, 0)
    with pytest.raises(ValueError, match="last_batch|'x'"):
        Sampler(10, 2, last_batch="x")


# --- the orders and shards of the loop implementations they replaced, bit for bit -----


def _blocks_then_windows(n, seed, epoch, block_size, window, parts):
    """Block shuffle as a list of block arrays and a loop over windows (the code before)."""
    rng = np.random.default_rng([seed, epoch])
    starts = rng.permutation(np.arange(0, n - n % block_size, block_size))
    if n % block_size:
        starts = np.append(starts, n - n % block_size)
    blocks = [np.arange(s, min(s + block_size, n), dtype=np.int64) for s in starts]
    if not blocks:
        return np.arange(0, dtype=np.int64)
    per_window = window * parts
    spans = []
    for lo in range(0, len(blocks), per_window):
        group = blocks[lo : lo + per_window]
        whole = parts > 1 and len(group) == per_window
        lanes = [np.concatenate(group[r::parts]) for r in range(parts)] if whole else []
        if lanes and len({len(lane) for lane in lanes}) == 1:
            for lane in lanes:
                rng.shuffle(lane)
            spans.append(np.stack(lanes, axis=1).reshape(-1))
        else:
            span = np.concatenate(group)
            rng.shuffle(span)
            spans.append(span)
    return np.concatenate(spans)


def _plan_by_plan(sampler, epoch):
    """shard_positions as the real positions of each plan, one plan after another."""
    steps = range(sampler.first_step(epoch), sampler.steps_in_epoch(epoch))
    plans = [sampler.plan(epoch, s) for s in steps]
    if not plans:
        return np.empty(0, dtype=np.int64)
    return np.concatenate([p.positions[: sampler.batch_size - p.pad] for p in plans])


@pytest.mark.parametrize("n", [0, 1, 255, 256, 1000, 4099, 100_003])
@pytest.mark.parametrize(("block", "window", "parts"), [(256, 4, 1), (256, 4, 8), (16, 2, 3)])
def test_block_order_is_the_loop_order(n, block, window, parts):
    for epoch in (0, 3):
        got = epoch_order(n, 11, epoch, "block", block_size=block, window=window, parts=parts)
        want = _blocks_then_windows(n, 11, epoch, block, window, parts)
        assert got.dtype == np.int64 and np.array_equal(got, want)


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(0, 400),
    block=st.integers(1, 20),
    window=st.integers(1, 4),
    parts=st.integers(1, 5),
    epoch=st.integers(0, 3),
)
def test_block_order_is_the_loop_order_anywhere(n, block, window, parts, epoch):
    got = epoch_order(n, 2, epoch, "block", block_size=block, window=window, parts=parts)
    assert np.array_equal(got, _blocks_then_windows(n, 2, epoch, block, window, parts))


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 500),
    batch=st.integers(1, 40),
    parts=st.integers(1, 6),
    policy=st.sampled_from(["pad", "discard", "rollover"]),
    shuffle=st.sampled_from(["none", "global", "block"]),
    mapped=st.booleans(),
)
def test_shard_positions_are_the_plans_positions(n, batch, parts, policy, shuffle, mapped):
    if policy == "discard" and n < batch * parts:
        return
    positions = 3 * np.arange(n)[::-1] + 1 if mapped else None  # samples among other records
    for rank in {0, parts - 1}:
        s = Sampler(n, batch, part_index=rank, num_parts=parts, shuffle=shuffle, seed=4,
                    last_batch=policy, block_size=8, window=2, positions=positions)  # fmt: skip
        for epoch in range(4):
            got = s.shard_positions(epoch)
            assert got.dtype == np.int64 and np.array_equal(got, _plan_by_plan(s, epoch))


def test_shard_positions_of_a_large_epoch_are_the_plans_positions():
    """300K records, rank 3 of 8 and a single rank, batch 128: every policy and order."""
    for shuffle in ("global", "block"):
        for policy in ("pad", "discard", "rollover"):
            for rank, parts in ((3, 8), (0, 1)):
                s = Sampler(300_007, 128, part_index=rank, num_parts=parts, shuffle=shuffle,
                            seed=9, last_batch=policy)  # fmt: skip
                epoch = 1
                assert np.array_equal(s.shard_positions(epoch), _plan_by_plan(s, epoch))


def _check_slices_equal_plans(sampler, epochs):
    """Every step the slices give is exactly plan()'s; those they leave have padding or
    reach into another epoch's order; returns how many steps were sliced."""
    sliced = 0
    for epoch in epochs:
        slices = sampler.slices(epoch)
        first, end = sampler.first_step(epoch), sampler.steps_in_epoch(epoch)
        assert slices.get(first - 1) is None and slices.get(end) is None
        for step in range(first, end):
            plan = sampler.plan(epoch, step)
            got = slices.get(step)
            epochs_of = sampler.slot_epochs(plan)
            own = plan.pad == 0 and (epochs_of is None or (epochs_of == epoch).all())
            assert (got is not None) == own, (epoch, step)
            if got is None:
                continue
            sliced += 1
            positions, keys = got
            assert positions.dtype == np.int64 and positions.flags.c_contiguous
            np.testing.assert_array_equal(positions, plan.positions)
            if plan.keys is None:
                assert keys is None
            else:
                np.testing.assert_array_equal(keys, plan.keys)
    return sliced


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 200),
    batch=st.integers(1, 13),
    parts=st.integers(1, 5),
    policy=st.sampled_from(["pad", "discard", "rollover"]),
    shuffle=st.sampled_from(["none", "global", "block"]),
    start=st.integers(0, 250),
    positions=st.booleans(),
)
def test_sliced_plans_are_the_plans(n, batch, parts, policy, shuffle, start, positions):
    # NOTE [sliced plans]: each rank's slices, over several epochs, resumed or not
    if policy == "discard" and n < batch * parts:
        return
    mapped = np.arange(n, dtype=np.int64) * 3 + 1 if positions else None
    consumed = start % (n + 1)
    if policy == "rollover":
        consumed = -(start % (2 * n)) if start % 3 == 0 else consumed  # the epoch before's too
        consumed = max(consumed, -n)
    for r in range(parts):
        sampler = Sampler(
            n, batch, part_index=r, num_parts=parts, shuffle=shuffle, seed=7, last_batch=policy,
            block_size=4, window=2, block_parts=4, positions=mapped, start=(1, consumed),
        )  # fmt: skip
        _check_slices_equal_plans(sampler, range(4))


def test_sliced_plans_cover_the_full_batches_and_a_mixtures_keys():
    # the common case is sliced: every full batch of an epoch, with a mixture's draw keys
    from recio.sampling.mixing import MixPlan

    bounds = np.array([0, 60, 100], dtype=np.int64)
    plan = MixPlan(("A", "B"), (np.arange(60), np.arange(60, 100)), (90, 30), bounds, 100)
    for r in range(2):
        sampler = Sampler(120, 8, part_index=r, num_parts=2, shuffle=True, seed=2, mix=plan)
        assert _check_slices_equal_plans(sampler, range(3)) == 3 * (120 // 16)
        assert sampler.plan(0, 0).keys is not None
    pad = Sampler(100, 8, shuffle=True, seed=1)
    assert _check_slices_equal_plans(pad, range(2)) == 2 * (100 // 8)  # all but the padded
