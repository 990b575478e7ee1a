#!/usr/bin/env python3
"""Small images (face recognition's 112x112, and 16x16): where the iterator's serial cost shows.

    python tools/bench_small_images.py [--count 3000] [--rounds 5] [--sizes 16,112]
                                       [--keep DIR] [--only pool,pool2,iter1,...,dataset]
    python tools/bench_small_images.py --callgrind [--epochs 1] --sizes 16 --keep DIR ...

Builds, deterministically, a .rec of 112x112 JPEGs and one of 16x16 JPEGs (quality 95, 4:2:0)
from ``tools/make_corpus.py``'s photo-like scenes, rendered at 160x160 and downscaled (in a
temporary directory, or in ``--keep DIR``, reused when it is there). Then, per size, side by
side in interleaved rounds (the median of the rounds is reported):

* ``pool``/``pool2``: ``DecodePool(1)`` (and ``(2)``) ``.decode_batch`` alone on pre-sliced
  image bytes, whole-image windows, random flips, mean/std 127.5 to float32 NCHW: the
  iterator's output;
* ``iter1``/``iter2``: ``ImageRecordIter`` with ``preprocess_threads`` 1 and 2, shuffled,
  ``rand_mirror``, mean/std 127.5 (as arcface_torch normalises), data_shape (3, S, S);
* ``turbo``: PyTurboJPEG's ``TurboJPEG().decode`` of the same bytes, one thread, no more;
* ``torch``: an MXFaceDataset-style pipeline: a torch ``Dataset`` reading records with
  ``recio.records.recordio.MXIndexedRecordIO``, Pillow decode, random horizontal flip, to float32,
  normalise, in a ``DataLoader(num_workers=2, batch_size=128)`` (persistent workers);
* ``dataset``: recio's ``RecordDataset`` (same flip and normalisation) in the same
  DataLoader, a batch decoded per native call, ``collate_fn=RecordDataset.collate``.

Each round reads the whole dataset once (the iterator one epoch, thread start included).

The iterator's serial cost per image is the CPU time of the process's Python threads (the
consumer, the reader and the decode threads: everything but the native pool's threads) per
image delivered: process CPU (getrusage) minus the pool threads' CPU (their
/proc/self/task/TID/schedstat, the threads the iterator's construction started). That work
holds the GIL, so a process delivers at most 1e6 / serial images per second however many
decode threads it has (the "ceiling" column). "All CPU on N cores" is what the machine's
cores could deliver if the pool and the Python threads kept them all busy, N * 1e6 /
(serial + pool CPU): the bound on a machine with no other load. CPU times move less with
other people's jobs than rates do.

``--callgrind`` counts instead (valgrind's callgrind, unmoved by load): the instructions of
the consumer thread per batch, for ``ImageRecordIter`` with one decode thread over
``--epochs`` epochs after a warm-up one (the main thread's count while it is inside the
measured loop, which runs under ``functools.reduce``; the pool's threads not counted). That
is the serial Python per batch that the wall-clock "serial" figure measures with noise.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import make_corpus  # noqa: E402

from recio import ImageRecordIter, recordio  # noqa: E402
from recio.decode import DecodePool  # noqa: E402

RENDER = 160  # rendered scene size, downscaled to each output size
QUALITY = 95
BATCH = 128
MEAN = STD = 127.5
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
CONFIGS = ("pool", "pool2", "iter1", "iter2", "turbo", "torch", "dataset")


# --- the corpus ------------------------------------------------------------------------


def _scene(index: int) -> bytes:
    """Scene ``index``, rendered at RENDER x RENDER, as raw RGB bytes."""
    opts = make_corpus.Options()
    rng = np.random.default_rng([opts.seed, 1, index])
    hue = make_corpus.class_hue(opts, index % opts.classes)
    return make_corpus.camera(rng, make_corpus.render(rng, RENDER, RENDER, hue)).tobytes()


def build_recs(out: str, count: int, sizes: list[int], jobs: int) -> dict[int, str]:
    """``{size: .rec path}``, written under ``out`` unless already there."""
    recs = {s: os.path.join(out, f"faces{s}.rec") for s in sizes}
    missing = [s for s in sizes if not os.path.exists(recs[s][:-4] + ".idx")]
    if not missing:
        return recs
    with ProcessPoolExecutor(jobs) as pool:
        scenes = list(pool.map(_scene, range(count), chunksize=16))
    for s in missing:
        tmp_idx, tmp_rec = recs[s][:-4] + ".idx.part", recs[s] + ".part"
        writer = recordio.MXIndexedRecordIO(tmp_idx, tmp_rec, "w")
        for i, raw in enumerate(scenes):
            img = Image.frombytes("RGB", (RENDER, RENDER), raw)
            img = img.resize((s, s), Image.Resampling.LANCZOS)
            buf = io.BytesIO()
            img.save(buf, "JPEG", quality=QUALITY, subsampling="4:2:0")
            header = recordio.IRHeader(0, float(i % 1000), i, 0)
            writer.write_idx(i, recordio.pack(header, buf.getvalue()))
        writer.close()
        os.replace(tmp_rec, recs[s])
        os.replace(tmp_idx, recs[s][:-4] + ".idx")
    return recs


def image_bytes(rec: str) -> list[bytes]:
    reader = recordio.MXIndexedRecordIO(rec[:-4] + ".idx", rec, "r")
    try:
        return [bytes(recordio.unpack(reader.read_idx(k))[1]) for k in reader.keys]
    finally:
        reader.close()


# --- CPU accounting --------------------------------------------------------------------


def _tasks() -> set[int]:
    return {int(t) for t in os.listdir("/proc/self/task")}


def _task_cpu(tids: set[int]) -> float:
    total = 0
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:  # a thread that has ended
            pass
    return total / 1e9


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Run:
    """One timed pass: images, wall seconds, and CPU seconds outside the native threads."""

    def __init__(self, native_tids: set[int] | None = None) -> None:
        self.native = native_tids or set()

    def __enter__(self) -> Run:
        self.cpu0, self.native0 = _process_cpu(), _task_cpu(self.native)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t0
        native = _task_cpu(self.native) - self.native0
        self.python_cpu = _process_cpu() - self.cpu0 - native
        self.native_cpu = native


# --- the pipelines ---------------------------------------------------------------------


def pool_runner(images: list[bytes], size: int, threads: int) -> Callable[[], tuple[int, Run]]:
    pool = DecodePool(threads)
    out = np.empty((BATCH, 3, size, size), np.float32)
    rng = np.random.default_rng(0)
    batches = []
    for k in range(0, len(images) - BATCH + 1, BATCH):
        windows = np.tile(np.array([0, 0, size, size], np.int32), (BATCH, 1))
        batches.append((images[k : k + BATCH], windows, rng.random(BATCH) < 0.5))
    kwargs = {"mean": (MEAN,) * 3, "std": (STD,) * 3, "layout": "NCHW"}

    def run() -> tuple[int, Run]:
        with Run() as r:
            for imgs, windows, flips in batches:
                status = pool.decode_batch(imgs, out, crops=windows, flips=flips, **kwargs)
        assert not status.any()
        return BATCH * len(batches), r

    return run


def _iterator(rec: str, size: int, threads: int) -> ImageRecordIter:
    return ImageRecordIter(
        path_imgrec=rec,
        data_shape=(3, size, size),
        batch_size=BATCH,
        shuffle=True,
        rand_mirror=True,
        mean_r=MEAN, mean_g=MEAN, mean_b=MEAN, std_r=STD, std_g=STD, std_b=STD,
        preprocess_threads=threads,
        last_batch="discard",
    )  # fmt: skip


def iter_runner(rec: str, size: int, threads: int) -> Callable[[], tuple[int, Run]]:
    before = _tasks()
    it = _iterator(rec, size, threads)
    native = _tasks() - before  # the decode pool's threads, started with it
    for _ in it:  # warm-up epoch: image sizes read, batch arrays allocated
        pass

    def run() -> tuple[int, Run]:
        n = 0
        with Run(native) as r:
            for batch in it:
                n += len(batch.data)
        return n, r

    return run


def turbo_runner(images: list[bytes]) -> Callable[[], tuple[int, Run]] | None:
    try:
        from turbojpeg import TurboJPEG
    except ImportError:
        return None
    tj = TurboJPEG()

    def run() -> tuple[int, Run]:
        with Run() as r:
            for buf in images:
                tj.decode(buf)
        return len(images), r

    return run


class FaceDataset:
    """MXFaceDataset's shape: a record per item, Pillow decode, flip, to float32, normalise."""

    def __init__(self, rec: str) -> None:
        self.rec, self.idx = rec, rec[:-4] + ".idx"
        self.reader = None
        probe = recordio.MXIndexedRecordIO(self.idx, rec, "r")
        self.keys = list(probe.keys)
        probe.close()

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: int):
        import torch

        if self.reader is None:  # opened in the worker process
            self.reader = recordio.MXIndexedRecordIO(self.idx, self.rec, "r")
        header, img = recordio.unpack(self.reader.read_idx(self.keys[index]))
        pixels = np.asarray(Image.open(io.BytesIO(img)).convert("RGB"))
        if random.random() < 0.5:
            pixels = pixels[:, ::-1]
        sample = torch.from_numpy(np.ascontiguousarray(pixels)).permute(2, 0, 1)
        sample = sample.float().div_(255.0).sub_(0.5).div_(0.5)
        return sample, torch.tensor(int(header.label), dtype=torch.long)


def loader_runner(dataset, **kw) -> Callable[[], tuple[int, Run]] | None:
    """An epoch of ``dataset`` through a 2-worker DataLoader per run (None without torch)."""
    try:
        import torch
        from torch.utils.data import DataLoader
    except ImportError:
        return None
    torch.set_num_threads(1)
    loader = DataLoader(
        dataset, batch_size=BATCH, shuffle=True, num_workers=2, persistent_workers=True,
        drop_last=True, **kw,
    )  # fmt: skip
    for _ in loader:  # warm-up: workers started
        pass

    def run() -> tuple[int, Run]:
        n = 0
        with Run() as r:
            for data, _ in loader:
                n += len(data)
        return n, r

    return run


def dataset_runner(rec: str, size: int) -> Callable[[], tuple[int, Run]] | None:
    """recio's RecordDataset in the same DataLoader: a batch decoded per native call."""
    from recio.frameworks.dataset import RecordDataset
    from recio.pipeline.config import Normalize

    ds = RecordDataset(
        rec, (3, size, size), rand_mirror=True, label_dtype="int64",
        normalize=Normalize(mean=(127.5,) * 3, std=(127.5,) * 3),
    )  # fmt: skip
    return loader_runner(ds, collate_fn=RecordDataset.collate)


# --- instruction counts ----------------------------------------------------------------

_TOGGLE = "functools_reduce"  # the C function the measured loop runs under


def consumer_program(rec: str, size: int, epochs: int) -> None:
    """What ``--callgrind`` counts: ``epochs`` epochs of iter1, after a warm-up epoch."""
    import functools

    it = _iterator(rec, size, 1)
    for _ in it:
        pass
    n = sum(functools.reduce(lambda k, _: k + 1, it, 0) for _ in range(epochs))
    print(f"batches {n}")
    it.close()


def callgrind(rec: str, size: int, epochs: int) -> None:
    """Count the consumer thread's instructions per batch under callgrind, and print them."""
    import re
    import subprocess

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.%p")
        code = (
            f"import sys; sys.path.insert(0, {str(ROOT / 'tools')!r}); import bench_small_images"
            f" as b; b.consumer_program({rec!r}, {size}, {epochs})"
        )
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", "--separate-threads=yes", "--collect-atstart=no",
             f"--toggle-collect={_TOGGLE}", f"--callgrind-out-file={out}", sys.executable,
             "-c", code],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        batches = int(re.search(r"batches (\d+)", run.stdout).group(1))
        main = [f for f in os.listdir(tmp) if f.endswith("-01")]
        with open(os.path.join(tmp, main[0])) as f:
            total = int(re.search(r"^summary: (\d+)", f.read(), re.M).group(1))
    print(
        f"{size}x{size}, ImageRecordIter 1 thread, {batches} batches of {BATCH}: consumer thread"
        f" {total / batches:,.0f} instructions per batch ({total / batches / BATCH:,.0f} per"
        " image)"
    )


# --- the report ------------------------------------------------------------------------


def bench_size(rec: str, size: int, rounds: int, only: list[str]) -> dict[str, dict]:
    images = image_bytes(rec)
    makers = {
        "pool": lambda: pool_runner(images, size, 1),
        "pool2": lambda: pool_runner(images, size, 2),
        "iter1": lambda: iter_runner(rec, size, 1),
        "iter2": lambda: iter_runner(rec, size, 2),
        "turbo": lambda: turbo_runner(images),
        "torch": lambda: loader_runner(FaceDataset(rec)),
        "dataset": lambda: dataset_runner(rec, size),
    }
    runners = {name: makers[name]() for name in only}
    runners = {k: v for k, v in runners.items() if v is not None}
    results: dict[str, list] = {k: [] for k in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            n, r = run()
            results[name].append((n / r.wall, r.python_cpu / n * 1e6, r.native_cpu / n * 1e6))
    summary = {}
    for name, rows in results.items():
        rates = [row[0] for row in rows]
        summary[name] = {
            "rate": statistics.median(rates),
            "low": min(rates),
            "high": max(rates),
            "serial_us": statistics.median(row[1] for row in rows),
            "native_us": statistics.median(row[2] for row in rows),
        }
    return summary


def report(size: int, s: dict[str, dict]) -> None:
    print(f"\n{size}x{size} JPEGs (q{QUALITY}), batch {BATCH}: images/s, median (min-max)")
    labels = {
        "pool": "C pool alone, 1 thread",
        "pool2": "C pool alone, 2 threads",
        "iter1": "ImageRecordIter, 1 thread",
        "iter2": "ImageRecordIter, 2 threads",
        "turbo": "PyTurboJPEG decode, 1 thread",
        "torch": "MXFaceDataset-style, 2 workers",
        "dataset": "RecordDataset, 2 workers",
    }
    for name, row in s.items():
        line = f"  {labels[name]:32s} {row['rate']:9.0f}  ({row['low']:.0f}-{row['high']:.0f})"
        if name.startswith("iter"):
            ceiling = 1e6 / row["serial_us"] if row["serial_us"] > 0 else float("inf")
            cores = 1e6 * CORES / (row["serial_us"] + row["native_us"])
            line += (
                f"  serial {row['serial_us']:.2f} us/img (ceiling {ceiling:.0f}/s),"
                f" pool CPU {row['native_us']:.2f} us/img; all CPU on {CORES} cores:"
                f" {cores:.0f}/s"
            )
        elif name.startswith("pool") or name == "turbo":
            line += f"  CPU {row['serial_us']:.2f} us/img"
        print(line)

    def ratio(a: str, b: str) -> str:
        return f"{s[a]['rate'] / s[b]['rate']:.2f}x" if a in s and b in s else "n/a"

    if size <= 32:
        print(f"  iter1 / pool   = {ratio('iter1', 'pool')} (target >= 0.8x)")
        print(f"  iter2 / iter1  = {ratio('iter2', 'iter1')} (target >= 1.8x)")
    else:
        print(f"  iter2 / turbo  = {ratio('iter2', 'turbo')} (target >= 1.8x)")
        print(f"  iter2 / torch  = {ratio('iter2', 'torch')} (target >= 2x)")
        print(f"  dataset / torch = {ratio('dataset', 'torch')}")
        print(f"  iter1 / pool   = {ratio('iter1', 'pool')}")
    print(f"  iter2 / pool2  = {ratio('iter2', 'pool2')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=3000, help="images per .rec")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="16,112", help="comma-separated image sizes")
    parser.add_argument("--keep", help="build the .recs here (reused if present)")
    parser.add_argument("--only", default=",".join(CONFIGS), help=f"of {','.join(CONFIGS)}")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--callgrind", action="store_true", help="count instructions instead")
    parser.add_argument("--epochs", type=int, default=1, help="--callgrind: epochs counted")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    only = [c for c in args.only.split(",") if c]
    unknown = set(only) - set(CONFIGS)
    if unknown:
        parser.error(f"unknown configurations {sorted(unknown)}")
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or tmp
        os.makedirs(out, exist_ok=True)
        t0 = time.perf_counter()
        recs = build_recs(out, args.count, sizes, args.jobs)
        print(f"{args.count} images per .rec, ready in {time.perf_counter() - t0:.1f} s")
        for size in sizes:
            if args.callgrind:
                callgrind(recs[size], size, args.epochs)
            else:
                report(size, bench_size(recs[size], size, args.rounds, only))
    return 0


if __name__ == "__main__":
    sys.exit(main())
