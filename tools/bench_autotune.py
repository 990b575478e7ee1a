"""``preprocess_threads="auto"`` against fixed thread counts, side by side in one run.

    python tools/bench_autotune.py [--rec R | --images 800] [--repeats 3] [--seconds 4]
                                   [--step-ms 150]
    python tools/bench_autotune.py --burn 2 --fast-only   # under a competing load
    python tools/bench_autotune.py --hook [--repeats 5]

Two consumers over the built-in sample (RandomResizedCrop 224, flip, uint8):

- fast: takes each batch as soon as it comes. Images/s of fixed 1..4 threads and of auto,
  the settings interleaved in each repeat; auto should reach at least 95 % of the best.
- slow: a training step of ``--step-ms`` (a sleep) per batch, long enough that one thread
  keeps up. Auto's settled thread count, its changes after the first epoch, and the
  process CPU seconds per image against a fixed single thread (within 10 %).

``--burn N`` runs N CPU-burning processes beside it the whole time (another job on the
cores); ``--fast-only`` measures the fast consumer alone.

Prints medians of the repeats (min-max beside them) and a JSON line with every figure.
``--hook``: instead, what the per-batch hook (``Governor.batch``: stage times, and the
tuner's decision) costs the consumer's thread, with a fixed thread count and with the tuner.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from recio.bench.sample import build_sample_rec  # noqa: E402
from recio.decode import DecodePool  # noqa: E402
from recio.pipeline.autotune import Governor, ThreadTuner  # noqa: E402
from recio.pipeline.iterator import ImageRecordIter  # noqa: E402
from recio.pipeline.stage_times import StageTimes  # noqa: E402

KW = dict(random_resized_crop=True, rand_mirror=True, shuffle=True, dtype="uint8")


def run(rec: str, threads, seconds: float, step_s: float = 0.0) -> dict:
    """Images/s, CPU s per image and the tuner's story for one setting."""
    with ImageRecordIter(rec, (3, 224, 224), 32, preprocess_threads=threads, **KW) as it:
        for _ in it:  # warm-up epoch: page cache, pool threads, the tuner's first moves
            time.sleep(step_s)
        tuner = it._governor.tuner
        warm_changes = len(tuner.changes) if tuner else 0
        images, start, cpu0 = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - start < seconds:
            for b in it:
                images += len(b.index) - b.pad
                time.sleep(step_s)
                if time.perf_counter() - start >= seconds:
                    break
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
        return {
            "images_per_s": images / wall,
            "cpu_per_image_ms": 1e3 * cpu / max(1, images),
            "threads": it.pool.activity()[0],
            "changes_after_warmup": (len(tuner.changes) - warm_changes) if tuner else 0,
        }


class _Running:
    """What the hook reads of a running pipeline."""

    blocked = 0.001
    fetch_wait = 0.0

    def ready_share(self) -> float:
        return 0.5


def hook_us(tuned: bool, calls: int = 20_000) -> float:
    """Microseconds a ``Governor.batch`` call takes, over ``calls`` batches."""
    with DecodePool(2) as pool:
        governor = Governor(pool, StageTimes(), ThreadTuner(2, 2) if tuned else None)
        running, t = _Running(), time.perf_counter()
        start = time.perf_counter()
        for i in range(calls):
            governor.batch(t + i * 0.01, t + i * 0.01 + 0.002, 64, running)
        return (time.perf_counter() - start) / calls * 1e6


def med(values: list[float], digits: int = 1) -> str:
    lo, hi = min(values), max(values)
    return f"{statistics.median(values):8.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def measure(args: argparse.Namespace) -> dict:
    """The fast (and slow) consumer's figures for every setting, interleaved."""
    result: dict = {"fast": {}, "slow": {}}
    with tempfile.TemporaryDirectory() as tmp:
        rec = args.rec or build_sample_rec(tmp, args.images)
        settings = [1, 2, 3, 4, "auto"]
        for _ in range(args.repeats):
            for threads in settings:  # interleaved: the machine's noise hits all alike
                got = run(rec, threads, args.seconds)
                result["fast"].setdefault(str(threads), []).append(got)
            for threads in () if args.fast_only else (1, "auto"):
                got = run(rec, threads, args.seconds, args.step_ms / 1e3)
                result["slow"].setdefault(str(threads), []).append(got)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rec", help="a .rec to read (default: the built-in sample)")
    parser.add_argument("--images", type=int, default=800, help="images of the sample")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--step-ms", type=float, default=150.0)
    parser.add_argument("--hook", action="store_true", help="time the per-batch hook alone")
    parser.add_argument("--burn", type=int, default=0, help="CPU-burning processes beside it")
    parser.add_argument("--fast-only", action="store_true", help="no slow consumer")
    args = parser.parse_args()
    if args.hook:
        for tuned in (False, True):  # interleaved repeats would not change a CPU-bound loop
            runs = [hook_us(tuned) for _ in range(args.repeats)]
            print(f"hook, {'tuner' if tuned else 'fixed threads'}: {med(runs, 2)} us per batch")
        return 0
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burn)
    ]
    try:
        result = measure(args)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    print(f"fast consumer (images/s, median of {args.repeats}, min-max):")
    best = 0.0
    for name, runs in result["fast"].items():
        rates = [r["images_per_s"] for r in runs]
        if name != "auto":
            best = max(best, statistics.median(rates))
        threads = [r["threads"] for r in runs]
        print(f"  {name:>5} threads {med(rates)}  active at the end {threads}")
    auto = statistics.median(r["images_per_s"] for r in result["fast"]["auto"])
    print(f"  auto / best fixed = {auto / best:.3f}")
    if args.fast_only:
        print(json.dumps(result))
        return 0
    print(f"slow consumer ({args.step_ms:g} ms step): CPU ms per image, threads, changes")
    for name, runs in result["slow"].items():
        cpu = [r["cpu_per_image_ms"] for r in runs]
        threads = [r["threads"] for r in runs]
        changes = [r["changes_after_warmup"] for r in runs]
        print(f"  {name:>5} {med(cpu, 3)}  threads {threads}  changes after warm-up {changes}")
    one = statistics.median(r["cpu_per_image_ms"] for r in result["slow"]["1"])
    tuned = statistics.median(r["cpu_per_image_ms"] for r in result["slow"]["auto"])
    print(f"  auto / fixed 1 CPU per image = {tuned / one:.3f}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
