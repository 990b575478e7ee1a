"""recio.sampling.mixing: several datasets mixed by weight, repeat or count, per epoch from
the seed."""

from __future__ import annotations

import collections
import os
import pickle

import numpy as np
import pytest

from recio.augment import CropSpec, KeyedDraw
from recio.dali.source import RecioSource
from recio.pipeline.config import IterConfig
from recio.pipeline.iterator import ImageRecordIter
from recio.records.format import IRHeader, pack
from recio.records.recordio import MXIndexedRecordIO
from recio.sampling.mixing import MixPlan, Mixture, Source
from recio.sampling.sampler import Sampler
from tests.images import encode

SHAPE = (3, 8, 8)
A_IDS = range(0, 20)  # label width 1: label = id
B_IDS = range(100, 110)  # label width 1
C_IDS = range(200, 206)  # label width 3: labels id, id + 1, id + 2


def write(rec: str, ids, width: int = 1) -> str:
    """Records of 24x24 JPEGs with id ``i``; ``width`` labels from ``i`` on (1: flag 0)."""
    with MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w") as w:
        for i in ids:
            label = float(i) if width == 1 else np.arange(i, i + width, dtype=np.float32)
            header = IRHeader(0 if width == 1 else width, label, i, 0)
            w.write_idx(i, pack(header, encode(24, 24, seed=i)))
    return rec


@pytest.fixture(scope="module")
def recs(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("mixing")
    return {
        "a": write(str(folder / "a.rec"), A_IDS),
        "b": write(str(folder / "b.rec"), B_IDS),
        "c": write(str(folder / "c.rec"), C_IDS, width=3),
    }


def mixed(recs, batch_size=5, **kw) -> ImageRecordIter:
    """A (20 records) once and B (10) twice per epoch: 40 samples."""
    sources = [Source(recs["a"], name="A"), Source(recs["b"], repeat=2, name="B")]
    return ImageRecordIter(sources, SHAPE, batch_size, shuffle=True, seed=3, **kw)


def epoch_ids(it) -> list[int]:
    """The real (non-pad) record ids of one epoch."""
    ids = []
    for batch in it:
        ids += batch.index[: len(batch.index) - batch.pad].tolist()
    return ids


# --- how many of each source an epoch takes ---------------------------------------------


def test_counts_follow_weight_repeat_and_choose():
    weighted = Mixture((Source("a.rec", weight=0.7), Source("b.rec", weight=0.3)), epoch_size=101)
    assert weighted.counts([5, 1000]) == [71, 30]  # largest remainder: 70.7 -> 71
    assert sum(Mixture((Source("a", weight=1), Source("b", weight=2))).counts([3, 4])) == 7
    each = Mixture((Source("a.rec"), Source("b.rec", repeat=2.5), Source("c.rec", choose=3)))
    assert each.counts([10, 4, 100]) == [10, 10, 3]
    assert Mixture((Source("a.rec", repeat=0.29),)).counts([100]) == [29]  # not 28.99 -> 28
    with pytest.raises(ValueError, match="source b has no samples, but is to give 3"):
        Mixture((Source("a"), Source("b", choose=3))).counts([5, 0])
    with pytest.raises(ValueError, match="gives no samples per epoch"):
        Mixture((Source("a", repeat=0),)).counts([5])


def test_huge_weights_are_shares_without_overflow():
    """1e308 and 1e308 are 50/50 (their sum would overflow to inf, the shares to NaN)."""
    huge = Mixture((Source("a", weight=1e308), Source("b", weight=1e308)), epoch_size=10)
    assert huge.counts([4, 4]) == [5, 5]
    assert Mixture((Source("a", weight=1e308), Source("b", weight=5e307))).counts([6, 3]) == [6, 3]
    tiny = Mixture((Source("a", weight=5e-324), Source("b", weight=5e-324)), epoch_size=4)
    assert tiny.counts([2, 2]) == [2, 2]


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: Source("a.rec", weight=1, repeat=2), ValueError, "one of weight, repeat"),
        (lambda: Source("a.rec", repeat=-1), ValueError, "repeat must be a number >= 0"),
        (lambda: Source("a.rec", weight=float("nan")), ValueError, "weight must be a number"),
        (lambda: Source("a.rec", weight=float("inf")), ValueError, "weight must be a number"),
        (lambda: Source("a.rec", weight=True), ValueError, "weight must be a number"),
        (lambda: Source("a.rec", weight=-1.0), ValueError, "weight must be a number"),
        (lambda: Source("a.rec", choose=1.5), ValueError, "choose must be an int"),
        (lambda: Mixture((Source("a", weight=1), Source("b"))), ValueError, r"\['b'\] have none"),
        (lambda: Mixture((Source("a"),), epoch_size=10), ValueError, "epoch_size goes with"),
        (lambda: Mixture((Source("a"), Source("a", repeat=2))), ValueError, "named 'a'"),
        (lambda: Mixture(("a.rec",)), TypeError, "list of Source"),
        (lambda: Source("a.rec", repeat=1e308), ValueError, "repeat must be at most 1048576"),
        (lambda: Source("a.rec", repeat=float("inf")), ValueError, "repeat must be a number"),
        (lambda: Source("a.rec", choose=2**40 + 1), ValueError, "choose must be at most"),
        (lambda: Source("a.rec", choose=-1), ValueError, "choose must be an int >= 0"),
        (
            lambda: Mixture((Source("a", weight=1),), epoch_size=10**30),
            ValueError,
            "epoch_size must be at most",
        ),
        (
            lambda: Mixture((Source("a.rec", choose=2**30),)).counts([3]),
            ValueError,
            "source a.rec: choose asks for 1073741824 samples per epoch of its 3, more than",
        ),
        (
            lambda: Mixture((Source("a", repeat=2**20), Source("b", repeat=2**20))).counts(
                [2**20, 2**20]
            ),
            ValueError,
            "gives 2199023255552 samples per epoch, more than 1099511627776",
        ),
    ],
)
def test_bad_mixtures_are_refused_with_a_message(make, error, match):
    with pytest.raises(error, match=match):
        make()


_MIX_UNDER_LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from recio.pipeline.iterator import ImageRecordIter
from recio.sampling.mixing import Source
try:
    key = sys.argv[2]
    value = float(sys.argv[3]) if key == "repeat" else int(sys.argv[3])
    next(iter(ImageRecordIter([Source(sys.argv[1], **{key: value})], (3, 8, 8), 5)))
    print("opened")
except BaseException as exc:
    print(type(exc).__name__, exc)
"""


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("repeat", "1e308", "repeat must be at most"),
        ("repeat", "1048576.5", "repeat must be at most"),
        ("choose", str(2**39), "choose asks for 549755813888 samples per epoch of its 20"),
    ],
)
def test_hostile_counts_are_refused_before_anything_is_allocated(recs, key, value, said):
    """Under a 2 GiB address-space limit: recio's refusal naming the parameter, not a
    MemoryError from an epoch of 1e308 (or 2**39) samples."""
    import subprocess
    import sys

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-c", _MIX_UNDER_LIMIT, recs["a"], key, value],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ValueError"), run.stdout
    assert said in run.stdout and key in run.stdout, run.stdout


def plan_of(sizes, counts) -> MixPlan:
    """A MixPlan over sources of ``sizes`` samples numbered one after another."""
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    samples = tuple(np.arange(bounds[k], bounds[k + 1]) for k in range(len(sizes)))
    return MixPlan(("A", "B"), samples, tuple(counts), bounds, int(bounds[-1]))


def test_proportions_within_binomial_tolerance_and_exact_per_epoch():
    # 70 % of 1000 from A's 300 samples (2 copies + a subset of 100), 30 % from B's 200
    counts = Mixture((Source("A", weight=0.7), Source("B", weight=0.3)), epoch_size=1000).counts(
        [300, 200]
    )
    assert counts == [700, 300]
    plan = plan_of([300, 200], counts)
    ranks = [Sampler(1000, 25, part_index=r, num_parts=4, shuffle=True, seed=5, mix=plan)
             for r in range(4)]  # fmt: skip
    subsets = []
    for epoch in range(3):
        taken = {r: np.concatenate([s.plan(epoch, k).positions for k in range(len(s))])
                 for r, s in enumerate(ranks)}  # fmt: skip
        everything = np.concatenate(list(taken.values()))
        from_a = np.count_nonzero(everything < 300)
        assert from_a == 700  # exact over the epoch
        copies = np.bincount(everything[everything < 300], minlength=300)
        assert set(copies.tolist()) == {2, 3}  # whole copies plus one seeded subset
        subsets.append(frozenset(np.flatnonzero(copies == 3).tolist()))
        for positions in taken.values():  # 250 per rank: binomial sd ~7.2, 4 sd tolerance
            assert abs(np.count_nonzero(positions < 300) - 175) <= 4 * np.sqrt(250 * 0.21)
        # the first 10 batches of the global stream: each within its binomial band
        head = np.concatenate([s.plan(epoch, k).positions for k in range(10) for s in ranks])
        share = np.count_nonzero(head < 300) / len(head)
        assert abs(share - 0.7) <= 4 * np.sqrt(0.21 / len(head))
    assert len(set(subsets)) == 3  # a new subset each epoch


def stream(samplers, epoch):
    """(position, key) of every real slot of ``epoch``, in global stream order."""
    s = samplers[0]
    out = {}
    for k in range(s.first_step(epoch), s.steps_in_epoch(epoch)):
        for t in samplers:
            plan = t.plan(epoch, k)
            real = len(plan.positions) - plan.pad
            for at, p, key in zip(plan.stream[:real], plan.positions, plan.keys, strict=False):
                out[int(at)] = (int(p), int(key))
    return [out[at] for at in sorted(out)]


@pytest.mark.parametrize("shuffle", ["none", "global", "block"])
@pytest.mark.parametrize("last_batch", ["pad", "discard"])
def test_a_resumed_mixture_on_another_world_size_goes_on_with_the_same_keys(shuffle, last_batch):
    plan = plan_of([50, 30], [50, 75])  # B's 30 two and a half times
    kw = dict(shuffle=shuffle, seed=8, last_batch=last_batch, mix=plan, block_size=4, window=2)
    whole = [Sampler(125, 5, part_index=r, num_parts=2, **kw) for r in range(2)]
    resumed = [Sampler(125, 3, part_index=r, num_parts=3, start=(1, 40), **kw) for r in range(3)]
    assert len({len(s) for s in resumed}) == 1  # equal counts per rank
    epoch = list(zip(whole[0].order(1).tolist(), whole[0].keys(1).tolist(), strict=True))
    assert stream(whole, 1) == epoch[: len(stream(whole, 1))]
    rest = stream(resumed, 1)
    assert rest == epoch[40 : 40 + len(rest)]  # exactly the rest, each with its own draws
    assert len(rest) == (85 if last_batch == "pad" else 81)  # discard: 85 // 9 steps of 9
    later = stream(resumed, 2)
    assert later == stream(whole, 2)[: len(later)]  # later epochs are whole
    assert len({key for _, key in epoch}) == 125  # no two samples share a draw key


def test_repeat_two_gives_each_record_of_b_exactly_twice_per_epoch(recs):
    with mixed(recs) as it:
        assert len(it) == 8
        for _ in range(2):
            seen = collections.Counter(epoch_ids(it))
            assert {i: seen[i] for i in A_IDS} == {i: 1 for i in A_IDS}
            assert {i: seen[i] for i in B_IDS} == {i: 2 for i in B_IDS}
            assert sum(seen.values()) == 40
        assert it.stats.sources == {"A": 40, "B": 40}  # two epochs
        assert it.stats.decoded == 80


def test_a_records_copies_get_different_crops(recs):
    with mixed(recs, batch_size=40, rand_crop=True, rand_mirror=True) as it:
        batch = next(iter(it))
        plan = it.sampler.plan(0, 0)
    union = len(A_IDS) + len(B_IDS)
    for record in B_IDS:
        slots = np.flatnonzero(batch.index == record)
        assert len(slots) == 2
        # copy 0 keys as the record itself, copy 1 one union further on
        assert sorted(plan.keys[slots] - plan.positions[slots]) == [0, union]
    differ = sum(
        not np.array_equal(*batch.data[np.flatnonzero(batch.index == record)]) for record in B_IDS
    )
    assert differ >= 8  # 17x17 positions and a flip: two copies rarely draw alike


def test_deterministic_from_the_seed(recs):
    def run(seed):
        sources = [Source(recs["a"], choose=7), Source(recs["b"], repeat=1.5)]
        with ImageRecordIter(sources, SHAPE, 4, shuffle=True, seed=seed, rand_crop=True) as it:
            return [[(b.index[: 4 - b.pad].copy(), b.data.copy()) for b in it] for _ in range(2)]

    first, again = run(11), run(11)
    for epoch, repeated in zip(first, again, strict=True):
        assert all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
                   for x, y in zip(epoch, repeated, strict=True))  # fmt: skip
    ids = [np.concatenate([i for i, _ in epoch]) for epoch in first]
    for epoch in ids:  # 22 samples each: 7 of A, 15 of B (10 + a subset of 5)
        assert np.count_nonzero(epoch < 100) == 7 and np.count_nonzero(epoch >= 100) == 15
    assert set(ids[0][ids[0] < 100].tolist()) != set(ids[1][ids[1] < 100].tolist())
    other = [np.concatenate([i for i, _ in epoch]) for epoch in run(12)]
    assert not np.array_equal(ids[0], other[0])


def test_equal_counts_per_rank_and_per_source_stats(recs):
    ranks = [mixed(recs, batch_size=3, part_index=r, num_parts=3) for r in range(3)]
    try:
        lengths = {len(it) for it in ranks}
        assert lengths == {5}  # 40 samples in global steps of 9: 5 steps, the last padded
        got = [[(b.index.copy(), b.pad) for b in it] for it in ranks]
        assert {len(g) for g in got} == {5}
        total = collections.Counter()
        for it in ranks:
            total.update(it.stats.sources)
        assert dict(total) == {"A": 20, "B": 20}  # padding is not counted
        for it, batches in zip(ranks, got, strict=True):  # each rank's own, by id
            ids = np.concatenate([i[: len(i) - pad] for i, pad in batches])
            assert it.stats.sources == {"A": int(np.sum(ids < 100)), "B": int(np.sum(ids >= 100))}
    finally:
        for it in ranks:
            it.close()


def test_resume_mid_epoch_on_another_world_size_delivers_exactly_the_rest(recs):
    before = collections.Counter()
    saving = [mixed(recs, batch_size=4, part_index=r, num_parts=2) for r in range(2)]
    for it in saving:
        for _, batch in zip(range(2), it, strict=False):  # 2 of 5 steps of 8
            before.update(batch.index.tolist())
    state = saving[0].state_dict()
    assert state["consumed"] == 16 and state["mixture"][1][1:] == [10, 20]
    for it in saving:
        it.close()
    after = collections.Counter()
    for r in range(3):
        with mixed(recs, batch_size=3, part_index=r, num_parts=3) as it:
            it.load_state_dict(pickle.loads(pickle.dumps(state)))
            assert len(it) == 3  # 24 left in global steps of 9
            after.update(epoch_ids(it))
            assert next(iter(it)).epoch == 1  # then whole epochs
    whole = collections.Counter({**{i: 1 for i in A_IDS}, **{i: 2 for i in B_IDS}})
    assert before + after == whole
    assert sum(after.values()) == 24


def test_resume_on_the_same_geometry_repeats_ids_and_pixels(recs):
    with mixed(recs, rand_crop=True) as it:
        batches = [(b.index.copy(), b.data.copy()) for b in it]
    with mixed(recs, rand_crop=True) as it:
        for _, _ in zip(range(3), it, strict=False):
            pass
        state = it.state_dict()
    with mixed(recs, rand_crop=True) as it:
        it.load_state_dict(state)
        rest = [(b.index.copy(), b.data.copy()) for b in it]
    assert len(rest) == 5
    for (i, d), (j, e) in zip(batches[3:], rest, strict=True):
        assert np.array_equal(i, j) and np.array_equal(d, e)


def test_a_state_of_another_mixture_is_refused(recs):
    with mixed(recs) as it:
        next(iter(it))
        state = it.state_dict()
    sources = [Source(recs["a"], name="A"), Source(recs["b"], repeat=3, name="B")]
    other = ImageRecordIter(sources, SHAPE, 5, shuffle=True, seed=3)
    with other, pytest.raises(ValueError, match="mixture=.*'B', 10, 20"):
        other.load_state_dict(state)
    plain = ImageRecordIter(recs["a"], SHAPE, 5, shuffle=True, seed=3)
    with plain, pytest.raises(ValueError, match="mixture="):
        plain.load_state_dict(state)


def test_rollover_batches_across_epochs_keep_the_mix(recs):
    with mixed(recs, batch_size=6, last_batch="rollover") as it:
        ids = epoch_ids(it) + epoch_ids(it) + epoch_ids(it)  # 120 samples, 20 batches
    assert len(ids) == 120
    seen = collections.Counter(ids)
    assert {seen[i] for i in A_IDS} == {3} and {seen[i] for i in B_IDS} == {6}


def test_remote_sources_mix_as_local_ones(recs, memfs):
    remote = {}
    for key, rec in recs.items():
        name = os.path.basename(rec)
        memfs.put_file(rec, f"/mix/{name}")
        memfs.put_file(rec[:-4] + ".idx", f"/mix/{name[:-4]}.idx")
        remote[key] = f"memory:///mix/{name}"

    def run(paths):
        sources = [
            Source(paths["b"], repeat=2, name="B"),
            Source(paths["c"], labels=first_label, name="C"),
        ]
        with ImageRecordIter(sources, SHAPE, 7, shuffle=True, seed=2, rand_crop=True) as it:
            assert it.records.is_local == (paths is recs)
            batches = [(b.index.copy(), b.label.copy(), b.data.copy()) for b in it]
            return batches, dict(it.stats.sources)

    (local, local_stats), (fetched, fetched_stats) = run(recs), run(remote)
    for x, y in zip(local, fetched, strict=True):
        assert all(np.array_equal(u, v) for u, v in zip(x, y, strict=True))
    assert local_stats == fetched_stats == {"B": 20, "C": 6}


# --- label widths -------------------------------------------------------------------------


def test_different_label_widths_are_refused_naming_the_sources(recs):
    sources = [Source(recs["a"], name="A"), Source(recs["c"], name="C")]
    with pytest.raises(ValueError, match=r"different label widths \(A: 1, C: 3\).*labels="):
        ImageRecordIter(sources, SHAPE, 4)


def first_label(labels: np.ndarray) -> np.ndarray:
    return labels[:, :1]


def pad_to_three(labels: np.ndarray) -> np.ndarray:
    return np.pad(labels, ((0, 0), (0, 3 - labels.shape[1])), constant_values=-1)


@pytest.mark.parametrize("remote_path", [False, True])
def test_a_label_map_makes_them_work(recs, remote_path, monkeypatch):
    if remote_path:  # the exact parse that remote payloads take, on the same files
        monkeypatch.setattr("recio.records.file.RecordFile.is_local", False)
    sources = [Source(recs["a"]), Source(recs["c"], labels=first_label)]
    with ImageRecordIter(sources, SHAPE, 13) as it:  # no shuffle: A's 20, then C's 6
        batches = list(it)
    labels = np.concatenate([b.label for b in batches])[:26]
    ids = np.concatenate([b.index for b in batches])[:26]
    assert np.array_equal(labels, ids.astype(np.float32))  # C's first label is its id
    assert batches[1].label.shape == (13,)
    sources = [Source(recs["a"], labels=pad_to_three), Source(recs["c"])]
    with ImageRecordIter(sources, SHAPE, 26, label_width=3) as it:
        batch = next(iter(it))
    padded = np.stack([np.arange(20), -np.ones(20), -np.ones(20)], 1)
    assert np.array_equal(batch.label[:20], padded)
    assert np.array_equal(batch.label[20:], np.arange(200, 206)[:, None] + np.arange(3))


def test_a_label_map_of_the_wrong_shape_is_named(recs):
    sources = [Source(recs["a"]), Source(recs["c"], labels=lambda y: y, name="C")]
    it = ImageRecordIter(sources, SHAPE, 26)
    with it, pytest.raises(ValueError, match=r"source C: its labels= function .* \(6, 3\)"):
        next(iter(it))


# --- configuration and the DALI stage's source ----------------------------------------------


def test_path_imgrec_takes_a_mixture_or_a_list_of_sources(recs):
    config = IterConfig.from_mxnet([Source(recs["a"]), Source(recs["b"])], SHAPE, 4)
    assert isinstance(config.path_imgrec, Mixture)
    with pytest.raises(TypeError, match="mixes Source and plain paths"):
        IterConfig.from_mxnet([Source(recs["a"]), recs["b"]], SHAPE, 4)
    with pytest.raises(TypeError, match="Source\\(idx=\\)"):
        IterConfig.from_mxnet(Mixture((Source(recs["a"]),)), SHAPE, 4, path_imgidx="x.idx")


def test_dali_source_feeds_the_same_mixture(recs):
    crop = CropSpec(8, 8, rand_crop=True)
    sources = [Source(recs["b"], repeat=2), Source(recs["c"], labels=first_label)]
    with ImageRecordIter(sources, SHAPE, 13, shuffle=True, seed=4, rand_crop=True) as it:
        cpu = next(iter(it))
        source = RecioSource(
            it.records, it.sampler, crop=crop, seed=4, label_maps=it.mix.label_maps
        )
        source = pickle.loads(pickle.dumps(source))  # DALI's parallel workers get a copy
        images, labels, meta, windows, _ = source.batch(0, 0)
        plan = it.sampler.plan(0, 0)
    assert np.array_equal(meta[:, 0], cpu.index)
    assert np.array_equal(labels[:, 0], cpu.label)
    sizes = np.full((13, 2), 24)
    expected, _ = KeyedDraw(crop, 4, 0).windows(sizes, plan.keys)
    assert np.array_equal(windows, expected)  # keyed by copy: the CPU iterator's draws
    twice = [r for r, n in collections.Counter(cpu.index.tolist()).items() if n == 2]
    assert twice, "some record of B twice in the batch"
    assert any(not np.array_equal(*windows[cpu.index == r]) for r in twice)
