"""``recio bench --step-ms N``: which stage limits a training job, and what would move it.

The iterator runs as a training loop would use it, its consumer taking ``step_ms`` per
batch (a sleep: the accelerator's step, which holds no core), and its ``stats.stages``
(NOTE [stage times] in recio/pipeline/stage_times.py) give each stage's share of the time:

- storage: a remote source's reader waiting for fetched bytes; a local file's reads are
  page faults inside the decode threads' time, so its rate is measured alone (raw reads);
- decode+augment (read from the map, parse, decode, crop, resize, colour): the decode
  threads' busy time over the time they were active;
- hand-over: recio's Python per batch in the consumer's thread (submit, labels, stats);
- step: the consumer's own time per batch;
- input wait: the step waiting for a batch. Under 5 % of the time, the step is the limit.

The decode threads' CPU time against their working time tells a node whose cores are
oversubscribed (threads that wait for a core while working) from one short of threads.

:func:`verdict` turns the figures into the limiting stage and the setting that would move
it; it is a pure function, so tests can feed it made-up figures.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..pipeline.iterator import ImageRecordIter
from ..pipeline.plan import thread_share, usable_cores
from ..pipeline.stage_times import StageTimes
from .stages import stage_read, timed

__all__ = ["measure_step", "print_bottleneck", "verdict"]

STARVED = 0.05  # the step waits more than this share of the time: the input limits
SATURATED = 0.75  # a stage busier than this is at its limit
CONTENDED = 0.8  # decode threads on a core less than this share of their working time


def _delta(now: StageTimes, then: StageTimes) -> StageTimes:
    fields = ("batches", "images", "wall_s", "wait_s", "handover_s", "consumer_s", "decode_s",
              "decode_cpu_s", "thread_s", "fetch_wait_s")  # fmt: skip
    out = StageTimes(**{f: getattr(now, f) - getattr(then, f) for f in fields})
    out.threads = now.threads
    return out


def measure_step(
    rec: str,
    step_ms: float,
    *,
    threads: int | str | None = None,
    batch_size: int = 64,
    shape: tuple[int, int, int] = (3, 224, 224),
    dtype: str = "uint8",
    seconds: float = 4.0,
    storage_options: dict | None = None,
    read_rate: bool = True,
) -> dict[str, Any]:
    """Run the iterator under a ``step_ms`` step for ``seconds``; the figures and verdict.

    ``threads``: ``preprocess_threads`` (None: the default, ``"auto"``); ``read_rate``:
    measure a local file's raw read rate too (the storage stage's capacity).
    """
    step_s = step_ms / 1e3
    it = ImageRecordIter(
        rec, shape, batch_size, shuffle=True, random_resized_crop=True, rand_mirror=True,
        dtype=dtype, preprocess_threads=threads, storage_options=storage_options,
    )  # fmt: skip
    try:
        remote = not it.records.is_local
        stream = iter(it)
        slept = [0.0]

        def one() -> None:
            nonlocal stream
            try:
                next(stream)
            except StopIteration:
                stream = iter(it)
                next(stream)
            if step_s > 0:
                t0 = time.perf_counter()
                time.sleep(step_s)  # the step: the accelerator's time, no core held
                slept[0] += time.perf_counter() - t0

        for _ in range(min(len(it), 8)):  # warm-up: the page cache, the pool, the tuner
            one()
        then = _copy(it.stats.stages)
        slept[0] = 0.0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            one()
        got = _delta(it.stats.stages, then)
        # The consumer's time beyond the step is recio's Python outside _produce (the
        # iterator's __next__, positions, stats) and this loop's: hand-over, not step.
        got.handover_s += max(0.0, got.consumer_s - slept[0])
        got.consumer_s = min(got.consumer_s, slept[0])
        plan = it.plan
    finally:
        it.close()
    reads = None
    if read_rate and not remote:
        step, close = stage_read(rec, storage_options, batch_size)
        try:
            reads = timed(step, min(1.0, seconds / 4), 1)["images_per_s"]["median"]
        finally:
            close()
    figures = figures_of(got, step_ms, reads)
    figures.update(threads=got.threads, max_threads=plan.max_threads, tuned=plan.tuned,
                   share=thread_share(plan.cores, plan.local_ranks), cores=usable_cores(),
                   remote=remote, batch_size=batch_size, shape=list(shape))  # fmt: skip
    figures["limit"], figures["advice"] = verdict(figures)
    return figures


def _copy(stages: StageTimes) -> StageTimes:
    return _delta(stages, StageTimes())


def figures_of(st: StageTimes, step_ms: float, read_rate: float | None) -> dict[str, Any]:
    """Per-stage utilisation and per-image costs from a run's stage times."""
    wall = max(st.wall_s, 1e-9)
    rate = st.images / wall
    util = st.utilisation()
    per_image = st.per_image()
    return {
        "step_ms": step_ms,
        "images_per_s": rate,
        "batches": st.batches,
        # Shares of the time, so at most 100 %: the iterator's rate above the raw reads'
        # (measured alone, a batch at a time) is the reads measured short, not a share.
        "utilisation": {
            name: min(1.0, value)
            for name, value in {
                "storage": (rate / read_rate) if read_rate else util["fetch_wait"],
                "decode+augment": util["decode"],
                "hand-over": util["handover"],
                "step": util["consumer"],
                "input wait": util["input_wait"],
            }.items()
        },
        "decode_ms_per_image": 1e3 * per_image["decode"],
        "decode_cpu_ms_per_image": 1e3 * per_image["decode_cpu"],
        "handover_ms_per_image": 1e3 * per_image["handover"],
        "storage_images_per_s": read_rate,
    }


def verdict(f: dict[str, Any]) -> tuple[str, str]:
    """The limiting stage and the setting that would move it.

    ``f``: :func:`figures_of`'s figures plus ``threads``, ``share`` (the rank's share of
    the cores, NOTE [resource plan]), ``cores`` and ``remote``.
    """
    u = f["utilisation"]
    rate, cost = f["images_per_s"], f["decode_cpu_ms_per_image"] / 1e3
    need = max(1, math.ceil(rate * cost * 1.25))  # threads at this rate, a quarter spare
    if u["input wait"] < STARVED and u["hand-over"] > u["step"]:
        return "hand-over", (
            f"recio's Python per batch ({f['handover_ms_per_image']:.3f} ms per image) in the "
            "consumer's thread takes more time than the step: larger batches"
        )
    if u["input wait"] < STARVED:
        return "step", (
            f"the input keeps up with a {f['step_ms']:g} ms step; about {need} decode "
            f"thread(s) suffice at {rate:,.0f} images/s (auto parks the rest)"
        )
    if u["storage"] >= SATURATED or (f["remote"] and u["storage"] > u["decode+augment"]):
        if f["remote"]:
            return "storage", (
                "the reader waits for the store: keep the data near (cache_dir=, a local "
                "copy) or fetch further ahead (FetchOptions(read_ahead=...), memory_budget=)"
            )
        return "storage", "the disk limits: put the .rec on faster storage or in the page cache"
    if u["decode+augment"] >= SATURATED:
        if f["threads"] < f["share"]:
            return "decode+augment", (
                f"the decode threads are busy {u['decode+augment']:.0%} of the time with "
                f"{f['threads']} thread(s) of this rank's {f['share']}: more threads "
                f"(preprocess_threads={min(f['share'], max(need, f['threads'] + 1))}, or auto)"
            )
        return "decode+augment", (
            f"the CPU is the limit ({f['threads']} threads busy, "
            f"{f['decode_cpu_ms_per_image']:.2f} ms CPU per image): smaller stored images "
            "(im2rec --resize), a smaller crop or output, uint8 output, or decode on the GPU "
            "(recio.dali)"
        )
    ran = f["decode_cpu_ms_per_image"] / max(f["decode_ms_per_image"], 1e-12)
    if ran < CONTENDED and u["decode+augment"] >= 0.4:
        return "cores", (
            f"the decode threads ran only {ran:.0%} of the time they were working: other "
            "threads (other ranks', the training loop's, other programs') hold the cores; "
            "leave preprocess_threads at its default (this rank's share) or run fewer "
            "processes on the node"
        )
    if u["hand-over"] >= 0.5 * u["input wait"] and u["hand-over"] > STARVED:
        return "hand-over", (
            f"recio's Python per batch ({f['handover_ms_per_image']:.3f} ms per image) in the "
            "consumer's thread: larger batches"
        )
    return "prefetch", (
        "no stage is saturated but the step waits: the batches come unevenly; a larger "
        "prefetch_buffer (or memory_budget=) smooths it"
    )


def print_bottleneck(f: dict[str, Any], out=print) -> None:
    """The table of stages and the verdict of :func:`measure_step`'s figures."""
    out(
        f"training step {f['step_ms']:g} ms, batches of {f['batch_size']}: "
        f"{f['images_per_s']:,.0f} images/s with {f['threads']} decode thread(s)"
        + (f" (auto, at most {f['max_threads']})" if f["tuned"] else "")
        + f" on {f['cores']} usable core(s)"
    )
    out(f"{'stage':<16}{'busy':>8}")
    for name, value in f["utilisation"].items():
        out(f"{name:<16}{value:>8.0%}")
    out(
        f"decode+augment {f['decode_cpu_ms_per_image']:.2f} ms CPU per image "
        f"({f['decode_ms_per_image']:.2f} ms busy); hand-over "
        f"{f['handover_ms_per_image']:.3f} ms per image"
        + (
            f"; raw reads {f['storage_images_per_s']:,.0f} images/s"
            if f["storage_images_per_s"]
            else ""
        )
    )
    out(f"limit: {f['limit']}: {f['advice']}")
