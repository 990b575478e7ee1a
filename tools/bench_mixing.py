#!/usr/bin/env python3
"""What a mixture costs the sampler: the epoch's list, and each batch's plan and tally.

    python tools/bench_mixing.py [--records 1000000] [--batch 256] [--rounds 7]

Pure integer work, no files: a sampler over ``--records`` samples against one over a
mixture with the same epoch size: A of ``records / 4`` samples twice, and a seeded half of
B's ``records``. Side by side in interleaved rounds, in turn forwards and backwards
(medians reported):

* ``epoch``: the epoch's order (the permutation; a mixture also builds its list);
* ``plan``: one batch's plan (a mixture also gathers the draw keys), plus, for the mixture,
  the per-source tally the iterator's stats take.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from recio.sampling.mixing import MixPlan  # noqa: E402
from recio.sampling.sampler import Sampler  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    n = args.records
    bounds = np.array([0, n // 4, n // 4 + n], dtype=np.int64)
    samples = (np.arange(0, bounds[1]), np.arange(bounds[1], bounds[2]))
    counts = (2 * len(samples[0]), n - 2 * len(samples[0]))  # A twice, a half of B
    mix = MixPlan(("A", "B"), samples, counts, bounds, int(bounds[-1]))
    kw = {"shuffle": True, "seed": 1, "num_parts": 8}
    plain = Sampler(n, args.batch, **kw)
    mixed = Sampler(mix.epoch_size, args.batch, mix=mix, **kw)
    steps = len(plain)

    def epoch(s: Sampler, e: int) -> None:
        s._order_cache.clear()
        s.order(e)

    def plans(s: Sampler, tally: bool) -> None:
        for k in range(0, steps, max(1, steps // 200)):
            plan = s.plan(0, k)
            if tally:
                mix.tally(plan.positions[: len(plan.positions) - plan.pad])

    times: dict[str, list[float]] = {k: [] for k in ("epoch", "epoch mix", "plan", "plan mix")}
    calls = len(range(0, steps, max(1, steps // 200)))
    for r in range(args.rounds):
        jobs = [
            ("epoch", lambda r=r: epoch(plain, r)),
            ("epoch mix", lambda r=r: epoch(mixed, r)),
            ("plan", lambda: plans(plain, False)),
            ("plan mix", lambda: plans(mixed, True)),
        ]
        for name, job in jobs if r % 2 == 0 else jobs[::-1]:
            t = time.perf_counter()
            job()
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{n} samples, batch {args.batch} x 8 ranks, {args.rounds} rounds (medians)")
    print(f"epoch order: plain {med['epoch'] * 1e3:.1f} ms, mixture {med['epoch mix'] * 1e3:.1f} "
          f"ms ({med['epoch mix'] / med['epoch']:.2f}x)")  # fmt: skip
    print(f"plan per batch: plain {med['plan'] / calls * 1e6:.1f} us, mixture + tally "
          f"{med['plan mix'] / calls * 1e6:.1f} us")  # fmt: skip


if __name__ == "__main__":
    main()
