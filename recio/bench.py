"""Throughput of every pipeline stage and end to end, with baselines, measured in one run.

    recio bench [URL-or-PATH] [--threads N] [--batch-size B] [--shape 3,224,224]
                [--seconds S] [--repeats R] [--json F] [--trace F] [--plot F.png]

With no argument it builds the built-in sample dataset (coloured shapes, JPEG),
packs it as .rec/.idx, and measures that. Each stage runs after a warm-up,
``--repeats`` times for ``--seconds`` each; figures are medians with min/max.
The stages are measured one after another on the same data, so their ratios
are comparable even on a noisy machine; absolute numbers are not.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import __version__
from .augment import CropSpec, batch_rng, draw
from .decode import DecodePool, default_backend
from .format import IRHeader, pack, unpack_labels
from .iterator import ImageRecordIter
from .recordio import MXIndexedRecordIO, RecordFile
from .sample import make_sample_folder
from .trace import Tracer

BASELINE = "Pillow + thread pool (ImageFolder-style)"
DALI_STAGES = {
    "recio": "DALI CPU fed by recio",
    "recio_windows": "DALI CPU fed by recio, recio's crop windows",
    "dali_mxnet": "DALI CPU readers.mxnet (DALI's own reader)",
}


def build_sample_rec(workdir: str, num_images: int = 400, seed: int = 0) -> str:
    """Make the sample image folder and pack it (original JPEG bytes) into workdir/sample.rec."""
    root = make_sample_folder(os.path.join(workdir, "images"), num_images, seed=seed)
    rec = os.path.join(workdir, "sample.rec")
    classes = sorted(os.listdir(root))
    with MXIndexedRecordIO(os.path.join(workdir, "sample.idx"), rec, "w") as writer:
        key = 0
        for label, name in enumerate(classes):
            for fname in sorted(os.listdir(os.path.join(root, name))):
                with open(os.path.join(root, name, fname), "rb") as f:
                    writer.write_idx(key, pack(IRHeader(0, float(label), key, 0), f.read()))
                key += 1
    return rec


# --- measuring --------------------------------------------------------------------


def timed(step: Callable[[], tuple[int, int]], seconds: float, repeats: int) -> dict:
    """Call ``step`` (returns images, bytes done) until ``seconds`` pass; repeat; rates."""
    step()  # warm-up: page cache, size cache, pools started
    images_rates, byte_rates = [], []
    for _ in range(repeats):
        images = nbytes = 0
        start = time.perf_counter()
        while True:
            i, b = step()
            images += i
            nbytes += b
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
        images_rates.append(images / elapsed)
        byte_rates.append(nbytes / elapsed)
    return {
        "images_per_s": _summary(images_rates),
        "MB_per_s": _summary([r / 1e6 for r in byte_rates]),
    }


def _summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


class Data:
    """The benchmark's records, read once into memory for the stages that skip I/O."""

    def __init__(self, rec: str, storage_options: dict | None, batch_size: int) -> None:
        self.rec = rec
        self.storage_options = storage_options
        self.batch_size = batch_size
        with RecordFile(rec, storage_options=storage_options) as rf:
            self.num_records = len(rf)
            payloads = [bytes(p) for p in rf.read_many(range(len(rf)))]
        self.images = []
        for payload in payloads:
            _, _, start = unpack_labels(payload)
            self.images.append(payload[start:])
        self.image_bytes = [len(b) for b in self.images]
        self._cursor = 0

    def next_batch(self) -> list[bytes]:
        return [self.images[i] for i in self.next_indices()]

    def next_indices(self) -> np.ndarray:
        n = self.num_records
        idx = (self._cursor + np.arange(self.batch_size)) % n
        self._cursor = (self._cursor + self.batch_size) % n
        return idx


def stage_read(rec: str, storage_options: dict | None, batch_size: int):
    rf = RecordFile(rec, storage_options=storage_options)
    cursor = [0]

    def step() -> tuple[int, int]:
        start = cursor[0]
        positions = [(start + j) % len(rf) for j in range(batch_size)]
        cursor[0] = (start + batch_size) % len(rf)
        payloads = rf.read_many(positions)
        return len(payloads), sum(len(p) for p in payloads)

    return step, rf.close


def stage_turbo_decode(data: Data, threads: int):
    """Full-size libjpeg-turbo decode (PyTurboJPEG) on a thread pool: the physical limit."""
    from turbojpeg import TurboJPEG

    jpeg = TurboJPEG()
    executor = concurrent.futures.ThreadPoolExecutor(threads)

    def decode(buf: bytes) -> int:
        try:
            return jpeg.decode(buf).size
        except OSError:  # not a JPEG (PNG) or one TurboJPEG refuses (CMYK)
            return 0

    def step() -> tuple[int, int]:
        batch = data.next_batch()
        list(executor.map(decode, batch))
        return len(batch), sum(len(b) for b in batch)

    return step, executor.shutdown


def stage_native_pool(data: Data, threads: int, spec: CropSpec, out_shape, dtype):
    pool = DecodePool(threads)
    out = np.empty(out_shape, dtype=dtype)
    counter = [0]
    # Header sizes once, as the iterator caches them after its first epoch: this stage is
    # decode + augment alone, the yardstick for what the pipeline around it costs.
    sizes = np.maximum(pool.image_sizes(data.images), 1)

    def step() -> tuple[int, int]:
        idx = data.next_indices()
        batch = [data.images[i] for i in idx]
        windows, flips = draw(spec, sizes[idx], batch_rng(0, 0, counter[0], 0))
        counter[0] += 1
        pool.decode_batch(batch, out, crops=windows, flips=flips, layout="NCHW")
        return len(batch), sum(len(b) for b in batch)

    return step, pool.close


def stage_iterator(rec, storage_options, threads, batch_size, shape, dtype, tracer=None):
    it = ImageRecordIter(
        rec,
        shape,
        batch_size,
        shuffle=True,
        random_resized_crop=True,
        rand_mirror=True,
        dtype=dtype,
        preprocess_threads=threads,
        storage_options=storage_options,
        tracer=tracer,
    )
    mean_length = float(it.records.lengths.mean())
    stream = [iter(it)]

    def step() -> tuple[int, int]:
        try:
            batch = next(stream[0])
        except StopIteration:
            stream[0] = iter(it)
            batch = next(stream[0])
        n = batch_size - batch.pad
        return n, int(mean_length * n)

    return step, it.close


def stage_pillow(data: Data, threads: int, spec: CropSpec):
    """What a torchvision ImageFolder loader does: Pillow decode, crop+resize, flip, per image."""
    from PIL import Image

    executor = concurrent.futures.ThreadPoolExecutor(threads)
    size = (spec.out_width, spec.out_height)
    counter = [0]

    def one(args) -> None:
        buf, window, flip = args
        with Image.open(io.BytesIO(buf)) as img:
            img = img.convert("RGB")
            x, y, w, h = (int(v) for v in window)
            img = img.resize(size, Image.BILINEAR, box=(x, y, x + w, y + h))
            if flip:
                img = img.transpose(Image.FLIP_LEFT_RIGHT)
            np.asarray(img)

    def step() -> tuple[int, int]:
        batch = data.next_batch()
        sizes = np.array([Image.open(io.BytesIO(b)).size for b in batch], dtype=np.int32)
        windows, flips = draw(spec, sizes, batch_rng(0, 0, counter[0], 0))
        counter[0] += 1
        list(executor.map(one, zip(batch, windows, flips, strict=True)))
        return len(batch), sum(len(b) for b in batch)

    return step, executor.shutdown


MXNET_SCRIPT = r"""
import json, sys, time
import mxnet as mx
rec, batch, threads, seconds, repeats, c, h, w = sys.argv[1:9]
batch, threads, repeats = int(batch), int(threads), int(repeats)
it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(int(c), int(h), int(w)),
    batch_size=batch, shuffle=True, random_resized_crop=True, min_random_area=0.08,
    max_random_area=1.0, min_aspect_ratio=3/4, max_aspect_ratio=4/3, rand_mirror=True,
    preprocess_threads=threads, dtype="uint8")
def run(limit):
    n = 0; t = time.perf_counter()
    while time.perf_counter() - t < limit:
        try:
            b = it.next()
        except StopIteration:
            it.reset(); continue
        b.data[0].wait_to_read(); n += batch - b.pad
    return n / (time.perf_counter() - t)
run(1.0)
print(json.dumps([run(float(seconds)) for _ in range(repeats)]))
"""


def stage_mxnet(rec, mxnet_python, threads, batch_size, shape, seconds, repeats) -> dict:
    """MXNet's own ImageRecordIter in a separate Python (it needs numpy 1.x)."""
    cmd = [
        mxnet_python,
        "-c",
        MXNET_SCRIPT,
        rec,
        str(batch_size),
        str(threads),
        str(seconds),
        str(repeats),
        *map(str, shape),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "failed")
    rates = json.loads(out.stdout.strip().splitlines()[-1])
    return {"images_per_s": _summary(rates)}


# --- the run ----------------------------------------------------------------------


def machine_info() -> dict:
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
    log: Callable[[str], None] = print,
) -> dict:
    """Measure every stage on ``rec``; returns the JSON-able result."""
    threads = threads or len(os.sched_getaffinity(0))
    spec = CropSpec(shape[1], shape[2], random_resized_crop=True, rand_mirror=True)
    out_shape = (batch_size, *shape)
    data = Data(rec, storage_options, batch_size)
    stages: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    mean_bytes = float(np.mean(data.image_bytes))

    def measure(name: str, factory: Callable[[], tuple[Callable, Callable]]) -> None:
        log(f"  measuring {name} ...")
        step, close = factory()
        try:
            stages[name] = timed(step, seconds, repeats)
        finally:
            close()

    measure("read", lambda: stage_read(rec, storage_options, batch_size))
    measure("decode (libjpeg-turbo, full size)", lambda: stage_turbo_decode(data, threads))
    measure(
        "decode+augment (native pool)",
        lambda: stage_native_pool(data, threads, spec, out_shape, dtype),
    )
    tracer = Tracer() if trace_path else None
    measure(
        "iterator end to end",
        lambda: stage_iterator(rec, storage_options, threads, batch_size, shape, dtype, tracer),
    )
    if tracer is not None:
        tracer.save(trace_path)
    measure(BASELINE, lambda: stage_pillow(data, threads, spec))

    mxnet_python = mxnet_python or _importable_python("mxnet")
    if mxnet_python is None:
        skipped["MXNet ImageRecordIter"] = "mxnet not importable (pass --mxnet-python)"
    elif "://" in rec and not rec.startswith("file://"):
        skipped["MXNet ImageRecordIter"] = "MXNet reads local files only"
    else:
        log("  measuring MXNet ImageRecordIter ...")
        try:
            stages["MXNet ImageRecordIter"] = stage_mxnet(
                rec, mxnet_python, threads, batch_size, shape, seconds, repeats
            )
        except Exception as exc:  # a baseline failing must not end the benchmark
            skipped["MXNet ImageRecordIter"] = f"failed: {exc}"
    _optional_stages(
        rec, storage_options, threads, batch_size, shape, seconds, repeats, stages, skipped, log
    )

    base = stages[BASELINE]["images_per_s"]["median"]
    for result in stages.values():
        rate = result["images_per_s"]["median"]
        result["ratio_to_baseline"] = rate / base if base else None
        result.setdefault("MB_per_s", {"median": rate * mean_bytes / 1e6})
    pipeline = ["read", "decode+augment (native pool)"]
    if "train step" in stages:
        pipeline.append("train step")
    bound = min(pipeline, key=lambda s: stages[s]["images_per_s"]["median"])
    end_to_end = stages["iterator end to end"]["images_per_s"]["median"]
    verdict = (
        f"bound by {bound}: end to end {end_to_end:,.0f} images/s on {threads} threads = "
        f"{end_to_end / threads:,.0f} images/s per core; "
        f"{end_to_end / base:.2f}x the Pillow baseline"
    )
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
    }


def _optional_stages(
    rec, storage_options, threads, batch_size, shape, seconds, repeats, stages, skipped, log
) -> None:
    """DALI pipelines and a training step, when their extras are installed."""
    try:
        from . import dali_bench
    except ImportError as exc:
        skipped["DALI pipelines"] = f"recio[dali] not installed ({exc})"
    else:
        if "://" in rec and not rec.startswith("file://"):
            skipped["DALI pipelines"] = "DALI's readers.mxnet reads local files only"
        else:
            log("  measuring DALI CPU pipelines ...")
            try:
                found = dali_bench.bench_pipelines(
                    rec, batch_size, shape[1:], threads, seconds, rounds=repeats, device="cpu"
                )
            except Exception as exc:  # a baseline failing must not end the benchmark
                skipped["DALI pipelines"] = f"failed: {exc}"
            else:
                for key, name in DALI_STAGES.items():
                    stages[name] = {"images_per_s": _summary(found["rounds"][key])}
    try:
        from . import train
    except ImportError as exc:
        skipped["train step"] = f"recio[train] not installed ({exc})"
    else:
        log("  measuring train step ...")
        try:
            rates = [
                train.bench_step((batch_size, *shape), steps=2, warmup=1)["images_per_s"]
                for _ in range(repeats)
            ]
            stages["train step"] = {"images_per_s": _summary(rates)}
        except Exception as exc:
            skipped["train step"] = f"failed: {exc}"


def _importable_python(module: str) -> str | None:
    try:
        __import__(module)
    except Exception:
        return None
    return sys.executable


def print_report(result: dict, out=print) -> None:
    stages = result["stages"]
    width = max(len(n) for n in stages)
    out(f"{'stage':<{width}}  {'images/s':>10}  {'min':>8}  {'max':>8}  {'MB/s':>8}  vs Pillow")
    for name, r in stages.items():
        ips = r["images_per_s"]
        ratio = r.get("ratio_to_baseline")
        ratio_text = f"{ratio:.2f}x" if ratio else "-"
        out(
            f"{name:<{width}}  {ips['median']:>10,.0f}  {ips['min']:>8,.0f}  {ips['max']:>8,.0f}"
            f"  {r['MB_per_s']['median']:>8,.1f}  {ratio_text}"
        )
    for name, why in result["skipped"].items():
        out(f"skipped {name}: {why}")
    out(f"verdict: {result['verdict']}")


def save_plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["stages"])
    med = [result["stages"][n]["images_per_s"]["median"] for n in names]
    lo = [m - result["stages"][n]["images_per_s"]["min"] for n, m in zip(names, med, strict=True)]
    hi = [result["stages"][n]["images_per_s"]["max"] - m for n, m in zip(names, med, strict=True)]
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(names) + 1.5))
    colours = ["tab:gray" if n == BASELINE else "tab:blue" for n in names]
    ax.barh(names, med, xerr=[lo, hi], color=colours)
    ax.invert_yaxis()
    ax.set_xscale("log")  # raw reads run orders of magnitude faster than decoding
    ax.set_xlabel("images/s (median, min-max; log scale)")
    ax.set_title(
        f"recio bench: {result['config']['threads']} threads, batch "
        f"{result['config']['batch_size']}, {tuple(result['config']['shape'])}"
    )
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rec", nargs="?", help=".rec path or URL (default: built-in sample)")
    parser.add_argument("--num-images", type=int, default=400, help="size of the built-in sample")
    parser.add_argument("--threads", type=int, help="decode threads (default: usable cores)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--shape", default="3,224,224", help="C,H,W of the output")
    parser.add_argument("--dtype", default="uint8", choices=["uint8", "float32", "float16"])
    parser.add_argument("--seconds", type=float, default=2.0, help="per repeat of each stage")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--storage-options", metavar="JSON", help="fsspec options as JSON")
    parser.add_argument("--mxnet-python", help="a Python with mxnet 1.9.1, for its baseline")
    parser.add_argument("--json", metavar="FILE", help="write all figures and machine info")
    parser.add_argument("--trace", metavar="FILE", help="Chrome/Perfetto trace of the iterator")
    parser.add_argument("--plot", metavar="FILE.png", help="bar chart (needs matplotlib)")


def run(args: argparse.Namespace) -> int:
    shape = tuple(int(v) for v in args.shape.split(","))
    if len(shape) != 3:
        raise SystemExit(f"--shape must be C,H,W, not {args.shape!r}")
    options = json.loads(args.storage_options) if args.storage_options else None
    with tempfile.TemporaryDirectory(prefix="recio-bench-") as workdir:
        rec = args.rec
        if rec is None:
            start = time.perf_counter()
            rec = build_sample_rec(workdir, args.num_images)
            print(
                f"built the sample dataset: {args.num_images} JPEGs packed into "
                f"{os.path.basename(rec)} in {time.perf_counter() - start:.1f}s"
            )
        result = run_bench(
            rec,
            storage_options=options,
            threads=args.threads,
            batch_size=args.batch_size,
            shape=shape,
            seconds=args.seconds,
            repeats=args.repeats,
            dtype=args.dtype,
            mxnet_python=args.mxnet_python,
            trace_path=args.trace,
        )
    print_report(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.plot:
        save_plot(result, args.plot)
    return 0
