"""One benchmark run: every stage on the same data, side by side, and the verdict."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import __version__
from ..augment import CropSpec
from ..decode import default_backend
from ..pipeline.trace import Tracer
from ..records.shards import expand_shards
from .mxnet import stage_mxnet
from .noise import compare, interleaved, rounds_of
from .optimized import (
    DEFAULT_LIMIT_MB,
    OPTIMIZED,
    MarkerCensus,
    marker_census,
    optimize_verdict,
    optimized_copy,
    why_not_optimize,
)
from .stages import (
    Data,
    stage_iterator,
    stage_native_pool,
    stage_pillow,
    stage_read,
    stage_turbo_decode,
    summary,
)

BASELINE = "Pillow + thread pool (ImageFolder-style)"
# Stages whose work is not the baseline's (decode + random crop, resize, flip): a ratio of
# their images/s to its would compare a read, say, with a decode. No "vs Pillow" for them.
UNLIKE_BASELINE = {
    "read": "reads the records' bytes, decodes nothing",
    "decode (libjpeg-turbo, full size)": "decodes at full size, with no crop or resize",
    "train step": "a training step, no input pipeline",
}
DALI_STAGES = {
    "recio": "DALI CPU fed by recio",
    "recio_windows": "DALI CPU fed by recio, recio's crop windows",
    "dali_mxnet": "DALI CPU readers.mxnet (DALI's own reader)",
}


# --- the run ----------------------------------------------------------------------


def machine_info() -> dict:
    """Cores, CPU, platform, library versions and decoder backend, for the JSON result."""
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next(
                (line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None
            )
    except OSError:
        info["cpu"] = platform.processor()
    versions = {"recio": __version__, "numpy": np.__version__}
    for name in ("PIL", "turbojpeg", "fsspec", "s3fs", "torch", "nvidia.dali"):
        try:
            module = __import__(name, fromlist=["__version__"])
            versions[name] = getattr(module, "__version__", "installed")
        except Exception:
            pass
    info["versions"] = versions
    info["decoder_backend"] = default_backend()
    return info


def run_bench(
    rec: str,
    *,
    storage_options: dict | None = None,
    threads: int | None = None,
    batch_size: int = 64,
    shape: tuple[int, int, int] = (3, 224, 224),
    seconds: float = 2.0,
    repeats: int = 3,
    dtype: str = "uint8",
    mxnet_python: str | None = None,
    trace_path: str | None = None,
    optimize_limit_mb: float | None = DEFAULT_LIMIT_MB,
    log: Callable[[str], None] = print,
) -> dict:
    """Measure every stage on ``rec``; returns the JSON-able result.

    Where ``rec``'s JPEGs carry no restart markers and it is a local file of at most
    ``optimize_limit_mb`` MB (None: any size; 0: never), a copy is optimized into a
    temporary folder and the iterator measured on it too (:mod:`~recio.bench.optimized`).

    Raises:
        ValueError: a bad argument (:func:`check_settings`), before anything is measured.
    """
    check_settings(shape, batch_size, dtype, threads)
    threads = threads or len(os.sched_getaffinity(0))
    spec = CropSpec(shape[1], shape[2], random_resized_crop=True, rand_mirror=True)
    out_shape = (batch_size, *shape)
    data = Data(rec, storage_options, batch_size)
    stages: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    mean_bytes = float(np.mean(data.image_bytes))
    log(
        f"measuring {rec} ({data.num_records:,} records): batches of {batch_size} x "
        f"{'x'.join(map(str, shape))} {dtype}, {threads} decode threads, each stage "
        f"{repeats} x {seconds:g} s after a warm-up"
    )

    # The stages recio's verdicts compare run in interleaved rounds (.noise): each round
    # measures every one of them once, so their ratios compare like loads with like.
    factories: dict[str, Callable] = {
        "read": lambda: stage_read(rec, storage_options, batch_size),
        "decode (libjpeg-turbo, full size)": lambda: stage_turbo_decode(data, threads),
        "decode+augment (native pool)": lambda: stage_native_pool(
            data, threads, spec, out_shape, dtype
        ),
    }
    tracer = Tracer() if trace_path else None
    factories["iterator end to end"] = lambda: stage_iterator(
        rec, storage_options, threads, batch_size, shape, dtype, tracer
    )
    census = marker_census(data.images)
    why_not = why_not_optimize(rec, storage_options, census, optimize_limit_mb)
    optimized: dict[str, Any] = {"census": census.as_dict()}
    with contextlib.ExitStack() as stack:
        if why_not is None:
            folder = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="recio-bench-optimized-")
            )
            why_not = _optimized_stage(
                rec, folder, threads, optimized, factories, log, (batch_size, shape, dtype)
            )
        factories[BASELINE] = lambda: stage_pillow(data, threads, spec)
        log(
            f"  measuring {len(factories)} stages in {repeats} interleaved rounds of "
            f"{seconds:g} s each ..."
        )
        stages.update(interleaved(factories, seconds, repeats, log))
    if tracer is not None:
        tracer.save(trace_path)
    already = census.jpegs > 0 and census.marked == census.jpegs  # no row, nothing skipped
    if why_not is not None and not already:
        skipped[OPTIMIZED] = why_not

    # The baselines read one file; a set of shards (recio.records.shards) is for recio's stages.
    shards = expand_shards(rec, storage_options)
    single = shards[0] if len(shards) == 1 else None
    mxnet_python = mxnet_python or _importable_python("mxnet")
    if mxnet_python is None:
        skipped["MXNet ImageRecordIter"] = "mxnet not importable (pass --mxnet-python)"
    elif single is None:
        skipped["MXNet ImageRecordIter"] = f"{len(shards)} shards: MXNet reads one .rec here"
    elif "://" in rec and not rec.startswith("file://"):
        skipped["MXNet ImageRecordIter"] = "MXNet reads local files only"
    else:
        log("  measuring MXNet ImageRecordIter ...")
        try:
            stages["MXNet ImageRecordIter"] = stage_mxnet(
                single, mxnet_python, threads, batch_size, shape, seconds, repeats
            )
        except Exception as exc:  # a baseline failing must not end the benchmark
            skipped["MXNet ImageRecordIter"] = f"failed: {exc}"
    _optional_stages(
        rec,
        single,
        storage_options,
        threads,
        batch_size,
        shape,
        seconds,
        repeats,
        stages,
        skipped,
        log,
    )

    base = stages[BASELINE]["images_per_s"]["median"]
    for name, result in stages.items():
        rate = result["images_per_s"]["median"]
        compared = base and name not in UNLIKE_BASELINE
        result["ratio_to_baseline"] = rate / base if compared else None
        if name != "train step":  # a step on random tensors reads no bytes
            result.setdefault("MB_per_s", {"median": rate * mean_bytes / 1e6})
    bound, verdict = pipeline_verdict(stages, threads, census)
    training = training_verdict(stages, batch_size, shape)
    return {
        "recio_bench": 1,
        "data": {"url": rec, "records": data.num_records, "mean_image_bytes": mean_bytes},
        "config": {
            "threads": threads,
            "batch_size": batch_size,
            "shape": list(shape),
            "dtype": dtype,
            "seconds": seconds,
            "repeats": repeats,
            "augmentation": "RandomResizedCrop(scale 0.08-1, ratio 3/4-4/3) + flip",
        },
        "machine": machine_info(),
        "stages": stages,
        "skipped": skipped,
        "bound_by": bound,
        "verdict": verdict,
        "training_verdict": training,
        "optimize_verdict": optimize_verdict(stages, census, why_not),
        "optimized_input": optimized,
    }


def _optimized_stage(rec, folder, threads, optimized, factories, log, batches) -> str | None:
    """Optimize a copy of ``rec`` into ``folder`` and add its iterator to ``factories``.

    Why not, where the copy or its iterator failed (the row failing must not end the run).
    """
    batch_size, shape, dtype = batches
    log(f"  optimizing a copy of {rec} (recio optimize, restart markers) ...")
    try:
        copy, figures = optimized_copy(rec, folder, threads)
    except Exception as exc:
        return f"recio optimize failed: {exc}"
    optimized.update(figures)
    log(
        f"  optimized {figures['transcoded']:,} JPEGs in {figures['seconds']:.1f} s "
        f"({figures['bytes_change']:+.1%} bytes)"
    )

    def factory():
        return stage_iterator(copy, None, threads, batch_size, shape, dtype)

    try:
        step, close = factory()  # opened once before the rounds: a failure is the row's
        try:
            step()
        finally:
            close()
    except Exception as exc:
        return f"failed on the optimized copy: {exc}"
    factories[OPTIMIZED] = factory
    return None


DTYPES = ("uint8", "float32", "float16")


def check_settings(
    shape: tuple[int, ...], batch_size: int, dtype: str, threads: int | None = None
) -> None:
    """Refuse what some stage would refuse only after the others ran, in one sentence.

    Raises:
        ValueError: a shape that is not 3 x H x W, a batch size or thread count below 1,
            a dtype the stages do not write.
    """
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"shape must be C,H,W (three positive integers), not {shape}")
    if shape[0] != 3:
        raise ValueError(
            f"shape {','.join(map(str, shape))}: the batches are RGB, so C must be 3 "
            f"(give 3,{shape[1]},{shape[2]})"
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch size must be an integer of at least 1, not {batch_size!r}")
    if threads is not None and (isinstance(threads, bool) or int(threads) < 1):
        raise ValueError(f"threads must be at least 1, not {threads!r}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")


#: The input pipeline's own stages: the slowest of them bounds the iterator end to end.
PIPELINE_STAGES = ("read", "decode+augment (native pool)")


def pipeline_verdict(
    stages: dict, threads: int, census: MarkerCensus | None = None
) -> tuple[str | None, str]:
    """The input pipeline's slowest stage and the verdict on the pipeline alone.

    The stages are compared round by round (:func:`~.noise.compare`): the bound is named
    only where one stage is slower than the other by more than the run's noise (else None,
    and the verdict says the machine was too busy to tell). End to end's share of the
    bound's rate is at most 100 %: the pipeline does the bound stage's work and more, so a
    faster end to end is the stage alone measured short (it runs one batch at a time).
    A decode bound names ``recio optimize`` where ``census`` found JPEGs without restart
    markers.
    """
    end_to_end = stages["iterator end to end"]["images_per_s"]["median"]
    base = stages[BASELINE]["images_per_s"]["median"]
    ratio = f"{end_to_end / base:.2f}x" if base else "-"
    head = (
        f"end to end {end_to_end:,.0f} images/s on {threads} threads = "
        f"{end_to_end / threads:,.0f} images/s per core, {ratio} the Pillow baseline"
    )
    read, decode = PIPELINE_STAGES
    which = compare(rounds_of(stages[read]), rounds_of(stages[decode]))
    if not which.decided:
        ran = f"{read} ran at"
        tell = which.cannot_tell("which stage binds", ran)
        return None, f"{head}; {tell} (of {decode}'s rate), or run `recio bench --step-ms S`"
    bound = read if which.ratio < 1 else decode
    limit = stages[bound]["images_per_s"]["median"]
    share = compare(rounds_of(stages["iterator end to end"]), rounds_of(stages[bound]))
    if share.ratio >= 1:
        reach = (
            f"end to end reaches its full rate (100 %; it measured {share.ratio:.2f}x the "
            "stage alone, which runs one batch at a time)"
        )
    else:
        noise = f", noise ±{share.noise:.0%}" if share.rounds > 1 else ""
        reach = f"of which end to end reaches {100 * share.ratio:.0f}%{noise}"
    verdict = f"{head}; bound by {bound} ({limit:,.0f} images/s alone), {reach}"
    if bound == decode and census is not None and census.marked < census.jpegs:
        verdict += (
            f"; {census.jpegs - census.marked} of the {census.jpegs} JPEGs sampled carry no "
            "restart markers: `recio optimize` adds them, so each crop decodes only the "
            "segments that cover it"
        )
    return bound, verdict


def training_verdict(stages: dict, batch_size: int, shape: tuple[int, ...]) -> str | None:
    """Whether the input pipeline keeps up with the training step; None if it was not run."""
    if "train step" not in stages:
        return None
    step = stages["train step"]["images_per_s"]["median"]
    end_to_end = stages["iterator end to end"]["images_per_s"]["median"]
    what = (
        f"the training step (recio.train's small ResNet, float32 on the CPU, random batches "
        f"of {batch_size}x{'x'.join(map(str, shape))}, measured alone: in a CPU run the two "
        f"share the cores) takes {step:,.0f} images/s; "
    )
    if end_to_end >= step:
        return what + (
            f"the input pipeline delivers {end_to_end / step:.1f}x that: compute-bound, "
            "the data would not make the model wait"
        )
    return what + (
        f"the input pipeline delivers {100 * end_to_end / step:.0f}% of it: input-bound, "
        "the model would wait for data"
    )


def _optional_stages(
    rec, single, storage_options, threads, batch_size, shape, seconds, repeats, stages, skipped, log
) -> None:
    """DALI pipelines and a training step, when their extras are installed."""
    try:
        from ..dali import bench as dali_bench
    except ImportError as exc:
        skipped["DALI pipelines"] = f"the dali extra is not installed ({exc})"
    else:
        if single is None:
            skipped["DALI pipelines"] = "several shards: DALI's readers.mxnet is given one here"
        elif "://" in rec and not rec.startswith("file://"):
            skipped["DALI pipelines"] = "DALI's readers.mxnet reads local files only"
        else:
            log("  measuring DALI CPU pipelines ...")
            try:
                found = dali_bench.bench_pipelines(
                    single, batch_size, shape[1:], threads, seconds, rounds=repeats, device="cpu"
                )
            except Exception as exc:  # a baseline failing must not end the benchmark
                skipped["DALI pipelines"] = f"failed: {exc}"
            else:
                for key, name in DALI_STAGES.items():
                    stages[name] = {"images_per_s": summary(found["rounds"][key])}
    try:
        from .. import train
    except ImportError as exc:
        skipped["train step"] = f"the train extra is not installed ({exc})"
    else:
        log("  measuring train step ...")
        try:
            rates = [
                train.bench_step((batch_size, *shape), steps=2, warmup=1)["images_per_s"]
                for _ in range(repeats)
            ]
            stages["train step"] = {"images_per_s": summary(rates)}
        except Exception as exc:
            skipped["train step"] = f"failed: {exc}"


def _importable_python(module: str) -> str | None:
    try:
        __import__(module)
    except Exception:
        return None
    return sys.executable
