#!/usr/bin/env python3
"""Where each of im2rec's threads spends a run: on a core, waiting for one, or asleep.

    python tools/im2rec_threads.py LIST ROOT [--num-thread 2] [--shards 4]

Packs LIST (``--resize 256 --quality 90``, threads) in this process, sampling every
thread's ``/proc/self/task/TID/schedstat`` (time run, time runnable but waiting for a core)
every 0.2 s. A native thread's sleep (the run's wall time less the two; the time before
the thread started counts too) is time it had no batch queued: the pipeline's idle time,
which a busy machine does not hide (waiting for a core is counted apart). Linux only.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from recio.im2rec.pack import pack_list  # noqa: E402
from recio.im2rec.transcode import EncodeOptions  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("list")
    parser.add_argument("root")
    parser.add_argument("--num-thread", type=int, default=2)
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args(argv)
    seen: dict[str, tuple[str, float, float]] = {}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            names = {str(t.native_id): t.name for t in threading.enumerate()}
            for tid in os.listdir("/proc/self/task"):
                try:
                    with open(f"/proc/self/task/{tid}/schedstat") as f:
                        run_ns, wait_ns, _ = map(int, f.read().split())
                except OSError:  # the thread ended
                    continue
                name = names.get(tid, seen.get(tid, ("native",))[0])
                seen[tid] = (name, run_ns / 1e9, wait_ns / 1e9)
            stop.wait(0.2)

    sampler = threading.Thread(target=sample, name="sampler", daemon=True)
    sampler.start()
    with tempfile.TemporaryDirectory() as out:
        start, cpu = time.perf_counter(), time.process_time()
        report = pack_list(
            args.list, args.root, EncodeOptions(resize=256, quality=90), out_stem=f"{out}/x",
            num_thread=args.num_thread, shards=args.shards, pool="thread",
        )  # fmt: skip
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    stop.set()
    sampler.join()
    print(
        f"{report.written} records in {wall:.2f} s ({report.written / wall:.0f}/s), CPU "
        f"{cpu:.2f} s ({1e3 * cpu / report.written:.3f} ms/image, {cpu / wall:.2f} cores)"
    )
    print(f"{'thread':16s} {'run s':>7s} {'waiting s':>10s} {'asleep s':>9s}")
    for name, run, wait in sorted(seen.values(), key=lambda x: -x[1]):
        if name != "sampler" and run + wait > 0.01:
            print(f"{name:16s} {run:7.2f} {wait:10.2f} {wall - run - wait:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
