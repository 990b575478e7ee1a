"""The iterator's cost beyond the decode call: this checkout against another, side by side.

    python tools/bench_iter_overhead.py R.rec [--against DIR] [--threads 1,2] [--batch 64]
                                        [--epochs 6] [--rounds 5] [--centre]

``ImageRecordIter`` end to end on a local file as ``tools/bench_peers.py`` runs it
(RandomResizedCrop 224 + flip, uint8 NCHW, shuffled, ``last_batch="pad"``), the consumer
taking each batch and doing nothing else. Each measure is a subprocess of its own: one
warm-up epoch (pool threads, page cache, each JPEG's first whole-stream read: NOTE
[whole-stream check]), then ``--epochs`` timed epochs. Printed per measure, per image
delivered (padding left out):

* images/s and the process's CPU time (``cpu``, all threads);
* ``pool``: the decode threads' CPU time in their jobs (``stats.stages``' ``decode_cpu_s``:
  the records' parse, the draws, the decode call; the padding too where it is decoded);
* ``rest``: ``cpu`` less ``pool``: the consumer's thread (recio's Python per batch, the
  checksums of NOTE [checksums by default], labels and ids) and the process's other
  threads;
* ``busy``: the decode stage's utilisation (busy wall time over threads x wall: below 1,
  the pool waited for the consumer to queue work) and ``got``: the pool's CPU over its busy
  wall time (below 1: the OS ran other processes on the cores meanwhile).

``--against DIR`` is another checkout, built in place (``git archive COMMIT | tar -x -C
DIR``, then ``python setup.py build_ext --inplace`` there): the two take turns, the order
alternating each round, and the last lines give the medians and the median of the per-round
ratios (this checkout's images/s over DIR's; DIR's CPU per image over this one's).
``--centre``: a centre crop 224 of the shorter side 256 instead of RandomResizedCrop.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkouts import run_in  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS = ("rate", "cpu", "pool", "rest", "busy", "got")


def one(rec: str, threads: int, batch: int, epochs: int, centre: bool) -> dict:
    """One measure, in this process (recio as imported from PYTHONPATH)."""
    from recio import ImageRecordIter

    augment = (
        {"resize": 256} if centre else {"random_resized_crop": True, "rand_mirror": True}
    )  # fmt: skip
    it = ImageRecordIter(
        rec, (3, 224, 224), batch, shuffle=True, seed=1, dtype="uint8",
        preprocess_threads=threads, last_batch="pad", **augment,
    )  # fmt: skip
    with it:
        for _batch in it:  # warm-up epoch
            pass
        s0 = it.stats.stages
        s0 = (s0.decode_cpu_s, s0.decode_s, s0.thread_s)
        images, t0, c0 = 0, time.perf_counter(), time.process_time()
        for _ in range(epochs):
            for b in it:
                images += len(b.index) - b.pad
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        s1 = it.stats.stages
        pool, busy, capacity = (
            s1.decode_cpu_s - s0[0],
            s1.decode_s - s0[1],
            s1.thread_s - s0[2],
        )
    return {
        "rate": images / wall,
        "cpu": cpu / images * 1e3,
        "pool": pool / images * 1e3,
        "rest": (cpu - pool) / images * 1e3,
        "busy": busy / capacity if capacity else 0.0,
        "got": pool / busy if busy else 0.0,
    }


def measure(code: str, args: argparse.Namespace, threads: int) -> dict:
    """:func:`one` in a subprocess importing recio from ``code``."""
    argv = [args.rec, "--one", str(threads), "--batch", str(args.batch)]
    argv += ["--epochs", str(args.epochs), *(["--centre"] if args.centre else [])]
    return json.loads(run_in(code, __file__, argv))


def line(name: str, got: dict) -> str:
    return (
        f"{name:8s} {got['rate']:7,.0f} images/s  cpu {got['cpu']:.3f} ms  pool "
        f"{got['pool']:.3f}  rest {got['rest']:.3f}  busy {got['busy']:.2f}  got {got['got']:.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rec")
    parser.add_argument("--against", help="another checkout, built in place")
    parser.add_argument("--threads", default="1,2", help="preprocess_threads, a list (1,2)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=6, help="timed epochs a measure (6)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--centre", action="store_true", help="centre crop 224 (short side 256)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a measure's subprocess
    args = parser.parse_args(argv)
    args.rec = os.path.abspath(args.rec)
    if args.one is not None:
        print(json.dumps(one(args.rec, args.one, args.batch, args.epochs, args.centre)))
        return 0
    code = {"this": HERE}
    if args.against:
        code["against"] = os.path.abspath(args.against)
    names = list(code)
    for threads in (int(t) for t in args.threads.split(",")):
        got: dict[str, list[dict]] = {k: [] for k in names}
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]
            for k in order:
                got[k].append(measure(code[k], args, threads))
                print(f"{threads} threads, round {r}: {line(k, got[k][-1])}", flush=True)
        print(f"\n{threads} threads, medians of {args.rounds} rounds:")
        for k in names:
            print(line(k, {f: statistics.median(g[f] for g in got[k]) for f in FIELDS}))
        if args.against:
            rates = [
                a["rate"] / b["rate"] for a, b in zip(got["this"], got["against"], strict=True)
            ]
            cpus = [b["cpu"] / a["cpu"] for a, b in zip(got["this"], got["against"], strict=True)]
            print(
                f"this / against: images/s {statistics.median(rates):.3f}x "
                f"({min(rates):.2f}-{max(rates):.2f}); CPU an image (against's over this "
                f"one's) {statistics.median(cpus):.3f}x ({min(cpus):.2f}-{max(cpus):.2f})\n",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
