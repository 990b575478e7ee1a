#!/usr/bin/env python3
"""What a local cluster of 2 worker processes costs before any work: Dask against Ray.

    python tools/bench_cluster_start.py dask
    /path/to/venv-with-ray/bin/python tools/bench_cluster_start.py ray

Prints the engine's import time, the time until the cluster is up and until its first
task has run, the median round trip of one tiny task (50 of them, one at a time) and the
time for 200 submitted at once, then the shutdown. The figures behind the choice of Dask
for ``im2rec --engine`` (the ``cluster`` extra in pyproject.toml).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time


def work(x: int) -> int:
    return x + 1


def dask_run() -> dict:
    start = time.perf_counter()
    from distributed import Client, LocalCluster

    out = {"import_s": time.perf_counter() - start}
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
    )
    client = Client(cluster)
    out["up_s"] = time.perf_counter() - start
    client.submit(work, 0, pure=False).result()
    out["first_task_s"] = time.perf_counter() - start
    trips = []
    for i in range(50):
        t = time.perf_counter()
        client.submit(work, i, pure=False).result()
        trips.append(time.perf_counter() - t)
    out["round_trip_ms"] = 1e3 * statistics.median(trips)
    t = time.perf_counter()
    client.gather(client.map(work, range(200), pure=False))
    out["200_tasks_ms"] = 1e3 * (time.perf_counter() - t)
    t = time.perf_counter()
    client.close()
    cluster.close()
    out["shutdown_s"] = time.perf_counter() - t
    return out


def ray_run() -> dict:
    start = time.perf_counter()
    import ray

    out = {"import_s": time.perf_counter() - start}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    out["up_s"] = time.perf_counter() - start
    remote = ray.remote(work)
    ray.get(remote.remote(0))
    out["first_task_s"] = time.perf_counter() - start
    trips = []
    for i in range(50):
        t = time.perf_counter()
        ray.get(remote.remote(i))
        trips.append(time.perf_counter() - t)
    out["round_trip_ms"] = 1e3 * statistics.median(trips)
    t = time.perf_counter()
    ray.get([remote.remote(i) for i in range(200)])
    out["200_tasks_ms"] = 1e3 * (time.perf_counter() - t)
    t = time.perf_counter()
    ray.shutdown()
    out["shutdown_s"] = time.perf_counter() - t
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=["dask", "ray"])
    args = parser.parse_args()
    result = (dask_run if args.engine == "dask" else ray_run)()
    print(args.engine, "  ".join(f"{k} {v:.2f}" for k, v in result.items()))


if __name__ == "__main__":  # the workers are spawned: they import this module again
    main()
