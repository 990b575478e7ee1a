"""A rank's default resources: its share of the cores and memory (NOTE [resource plan])."""

import os
import subprocess
import sys
import textwrap

import pytest

from recio.pipeline import plan as plan_module
from recio.pipeline.config import IterConfig
from recio.pipeline.iterator import ImageRecordIter
from recio.pipeline.plan import local_ranks, make_plan, thread_share

from .test_iterator import make_rec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MB = 1 << 20


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return make_rec(tmp_path_factory.mktemp("plan"))


def _run(code: str, env: dict | None = None) -> str:
    """``code`` in a fresh Python (its own affinity, environment, process group)."""
    full = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    for var in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"):
        if env is None or var not in env:
            full.pop(var, None)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_thread_share_rule():
    assert thread_share(2, 1) == 2  # this machine, alone: both cores
    assert thread_share(2, 8) == 1
    assert thread_share(96, 8) == 11  # 12 cores each, one left to the consumer
    assert thread_share(96, 1) == 95
    assert thread_share(1, 1) == 1
    assert thread_share(3, 1) == 2


def test_local_ranks_from_the_environment_in_order():
    assert local_ranks({"LOCAL_WORLD_SIZE": "8", "SLURM_NTASKS_PER_NODE": "4"})[0] == 8
    assert local_ranks({"OMPI_COMM_WORLD_LOCAL_SIZE": "4"})[0] == 4
    assert local_ranks({"SLURM_NTASKS_PER_NODE": "2"})[0] == 2
    assert local_ranks({"LOCAL_WORLD_SIZE": "junk"})[0] == 1
    assert local_ranks({}) == (1, "one process on this node")


def test_local_world_size_8_gives_one_decode_thread(rec, monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    with ImageRecordIter(rec, data_shape=(3, 32, 32), batch_size=8) as it:
        assert it.plan.threads == it.plan.max_threads == 1
        assert it.plan.local_ranks == 8
        assert it.pool.num_threads == 1
        assert "LOCAL_WORLD_SIZE=8" in " ".join(it.plan.why)
        assert sum(len(b.index) for b in it) >= 37


def test_affinity_cut_to_one_core_gives_one_thread(rec):
    out = _run(f"""
        import os
        os.sched_setaffinity(0, {{sorted(os.sched_getaffinity(0))[0]}})
        from recio.pipeline.iterator import ImageRecordIter
        it = ImageRecordIter({rec!r}, data_shape=(3, 32, 32), batch_size=8)
        next(iter(it))
        print(it.plan.cores, it.plan.threads, it.pool.num_threads)
        it.close()
    """)
    assert out == "1 1 1"


def test_an_initialised_process_group_counts_its_local_ranks(rec):
    pytest.importorskip("torch")
    out = _run(f"""
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
        from recio.pipeline.iterator import ImageRecordIter
        from recio.pipeline.plan import local_ranks
        it = ImageRecordIter({rec!r}, data_shape=(3, 32, 32), batch_size=8)
        n, source = local_ranks()
        print(n, it.plan.threads, "torch.distributed" in source)
        it.close()
        dist.destroy_process_group()
    """)
    cores = len(os.sched_getaffinity(0))
    assert out == f"1 {thread_share(cores, 1)} True"


def test_explicit_numbers_are_taken_as_given(rec):
    kw = dict(data_shape=(3, 32, 32), batch_size=8, preprocess_threads=3, prefetch_buffer=6)
    with ImageRecordIter(rec, **kw) as it:
        assert it.config == IterConfig.from_mxnet(rec, **kw)  # nothing replaced
        assert not it.plan.tuned and it.plan.threads == 3 and it.plan.depth == 6
        assert it.pool.num_threads == 3 and it.pool.activity()[0] == 3
        assert it._governor.tuner is None
        assert it.buffers.limit == 8  # prefetch + 2
        list(it)
        assert it.pool.activity()[0] == 3  # never changed


def test_the_memory_budget_bounds_the_batches_in_flight(rec):
    batch = 8 * 3 * 32 * 32 * 4  # float32
    assert make_plan(batch, memory_budget=100 * batch).depth == 4  # the default depth
    plan = make_plan(batch, memory_budget=5 * batch + 10)
    assert (plan.depth, plan.in_flight) == (3, 5)
    assert plan.in_flight * plan.batch_bytes <= plan.budget
    with pytest.raises(ValueError, match="memory_budget"):
        make_plan(batch, memory_budget=4 * batch)
    with ImageRecordIter(rec, data_shape=(3, 32, 32), batch_size=8, memory_budget=5 * batch) as it:
        assert it.buffers.limit * batch <= 5 * batch
        assert it.config.prefetch_buffer == 3
        for _ in range(2):  # the next epoch's first batches queued as one ends: the same count
            assert sum(1 for _batch in it) == 5
        assert it.buffers.allocated <= 5  # those in flight, and the one the consumer holds


@pytest.fixture(scope="module")
def big_rec(tmp_path_factory):
    return make_rec(tmp_path_factory.mktemp("plan-big"), n=400)


def test_rss_stays_under_the_budget(big_rec):
    """The arrays in flight under ``memory_budget`` (RSS measured); a prefetch given
    explicitly past it goes past it, so the measure can tell."""
    code = """
        from recio.pipeline.iterator import ImageRecordIter

        def rss():
            with open("/proc/self/status") as f:
                return next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmRSS:"))

        with ImageRecordIter({rec!r}, data_shape=(3, 8, 8), batch_size=2) as warm:
            list(warm)  # imports, pools, the page cache: not the arrays measured
        del warm
        before, most = rss(), 0
        kw = dict(data_shape=(3, 224, 224), batch_size=16, dtype="float32")
        with ImageRecordIter({rec!r}, **kw, **{extra}) as it:
            for _ in range(3):
                for b in it:
                    most = max(most, rss())
        print(most - before)
    """
    batch = 16 * 3 * 224 * 224 * 4
    budget = int(5.5 * batch)  # 53 MB: 5 batches, prefetch 3
    within = int(_run(code.format(rec=big_rec, extra={"memory_budget": budget})))
    past = int(_run(code.format(rec=big_rec, extra={"prefetch_buffer": 12})))
    assert within < budget, (within, budget)
    assert past > budget, (past, budget)


def test_the_plan_is_logged_once_at_info(rec, caplog, monkeypatch):
    from recio.pipeline import plan as plan_module

    monkeypatch.setattr(plan_module, "_logged", set())
    with caplog.at_level("INFO", logger="recio"):
        for _ in range(2):
            ImageRecordIter(rec, data_shape=(3, 32, 32), batch_size=8).close()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("recio plan:")]
    assert len(lines) == 1 and "decode thread" in lines[0]


def test_docs_tuning_python_blocks_run_as_written(tmp_path):
    import re

    text = open(os.path.join(ROOT, "docs", "tuning.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 4
    script = tmp_path / "tuning_blocks.py"
    script.write_text("\n".join(blocks))
    env = {k: v for k, v in os.environ.items() if k != "LOCAL_WORLD_SIZE"}
    done = subprocess.run(
        [sys.executable, str(script)],
        env=dict(env, PYTHONPATH=ROOT),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_the_read_ahead_takes_the_budget_left(rec, memfs):
    from recio.storage import FetchOptions

    from .test_iterator import _upload

    batch = 8 * 3 * 32 * 32 * 4
    plan = make_plan(batch, memory_budget=6 * batch + 8 * MB)
    assert plan.read_ahead == 8 * MB and plan.bytes <= plan.budget
    assert make_plan(batch, memory_budget=1 << 40).read_ahead == FetchOptions().read_ahead
    given = FetchOptions(read_ahead=3 * MB)
    assert make_plan(batch, memory_budget=6 * batch, fetch=given).read_ahead == 3 * MB
    url = _upload(rec, "memory://plan/data.rec", {})
    budget = 6 * batch + 8 * MB
    with ImageRecordIter(url, data_shape=(3, 32, 32), batch_size=8, memory_budget=budget) as it:
        assert it.config.storage.fetch.read_ahead == 8 * MB
        assert sum(len(b.index) - b.pad for b in it) == 37


def test_a_decode_pool_made_alone_takes_the_rank_share_too(monkeypatch):
    from recio.decode import DecodePool

    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    with DecodePool() as pool:
        assert pool.num_threads == 1
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    with DecodePool() as pool:
        assert pool.num_threads == thread_share(len(os.sched_getaffinity(0)), 1)


def test_a_default_budget_too_small_gives_way_to_the_least_with_a_warning(monkeypatch, caplog):
    """Nobody asked for the default budget: batches larger than it run at the least depth."""
    batch = 8 * 3 * 32 * 32 * 4
    monkeypatch.setattr(plan_module, "available_memory", lambda: int(4 * batch / 0.25))
    with caplog.at_level("WARNING", logger="recio"):
        plan = make_plan(batch, environ={})
    assert (plan.depth, plan.in_flight) == (3, 5)
    assert "default memory budget" in caplog.text and "memory_budget=" in caplog.text
