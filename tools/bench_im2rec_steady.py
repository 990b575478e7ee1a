#!/usr/bin/env python3
"""im2rec's steady-state rate against MXNet's, and the Dask engine's against the threads.

    python tools/bench_im2rec_steady.py CORPUS --mxnet-python /path/to/venv/bin/python \
        [--sizes 2000 20000] [--rounds 2] [--shards 4]

Whole-command times on two list sizes hide nothing and include every start-up; the
difference of the two, (N2 - N1) / (T2 - T1), is the per-image rate at steady state, with
each tool's start-up (MXNet's import is 1.2-1.7 s) and its first-image costs cancelled.
The lists cycle through CORPUS's images (``im2rec --list --recursive`` of it, then its
lines repeated with new indices), so a 20,000-entry list needs only the corpus's files,
read from the page cache as in bench_im2rec.py.

Tools, taking turns in each round, each in a fresh folder, all at ``--resize 256
--quality 90 --num-thread 2`` (``--shards`` for recio's two):

* mxnet: MXNet's tools/im2rec.py (from its wheel);
* recio: ``recio im2rec``, threads;
* engine: ``recio im2rec --engine dask``, a local cluster of 2 worker processes, one shard
  per task (its start-up, ~2-3 s here, is in the whole-command time and cancels in the
  steady state). Its shards are checked byte-identical to recio's of the same round.
* base: ``recio im2rec`` (threads) of another checkout given by ``--base-checkout`` (say,
  a worktree of the main branch), to compare a change with what it changes in one run;
  its records are not compared (a change may alter the bytes).

Reported: medians over the rounds of each whole-command time and rate, the steady-state
rates, recio / MXNet and engine / recio, and the steady-state CPU time per image of all of
each tool's processes (steadier than wall time when other work shares the machine), and
the cores that CPU kept busy (its CPU over the wall time, at steady state).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_im2rec import RECIO_IM2REC, RECIO_PACKAGE, count_records, mxnet_script  # noqa: E402

ARGS = ["--resize", "256", "--quality", "90", "--num-thread", "2"]


def write_list(src: str, n: int, out: str) -> None:
    """``out``: ``n`` lines cycling through ``src``'s paths and labels, indices 0..n-1."""
    with open(src) as f:
        lines = [line.rstrip("\n").split("\t", 1)[1] for line in f if line.strip()]
    with open(out, "w") as f:
        for i in range(n):
            f.write(f"{i}\t{lines[i % len(lines)]}\n")


def run(cmd: list[str], env: dict | None = None) -> float:
    """Wall seconds of ``cmd``; the CPU seconds of all its processes go to ``run.cpu``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):  # recio exits 1 when it skipped files (counted after)
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", help="image folder with one sub-folder per class")
    parser.add_argument("--mxnet-python", required=True, help="python that can import mxnet")
    parser.add_argument("--sizes", type=int, nargs=2, default=[2000, 20000], metavar="N")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--shards", type=int, default=4, help="recio's --shards (4)")
    parser.add_argument("--tools", nargs="+", default=["mxnet", "recio", "engine"])
    parser.add_argument(
        "--base-checkout", metavar="DIR", help="another recio checkout: the 'base' tool"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results here")
    parser.add_argument("--workdir", help="scratch folder (default: a temporary one)")
    args = parser.parse_args(argv)

    corpus = os.path.abspath(args.corpus)
    work = args.workdir or tempfile.mkdtemp(prefix="bench_im2rec_steady.")
    os.makedirs(work, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.path.dirname(HERE)}  # this checkout's recio
    shards = ["--shards", str(args.shards)]
    tools = {
        "mxnet": [args.mxnet_python, mxnet_script(args.mxnet_python), *ARGS],
        "recio": [sys.executable, RECIO_IM2REC, *ARGS, *shards, "--quiet"],
        "engine": [sys.executable, RECIO_IM2REC, *ARGS, *shards, "--quiet", "--engine", "dask"],
    }
    envs = {tool: env for tool in tools}
    if args.base_checkout:
        checkout = os.path.abspath(args.base_checkout)
        script = os.path.join(checkout, "tools", "im2rec.py")
        tools["base"] = [sys.executable, script, *ARGS, *shards, "--quiet"]
        envs["base"] = {**os.environ, "PYTHONPATH": checkout}
        subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(checkout, "recio")])
    elif "base" in args.tools:
        parser.error("--tools base needs --base-checkout")
    base = os.path.join(work, "base")
    subprocess.run(
        [sys.executable, RECIO_IM2REC, "--list", "--recursive", "--quiet", base, corpus],
        check=True,
        env=env,
    )
    subprocess.run([sys.executable, "-m", "compileall", "-q", RECIO_PACKAGE], check=True)
    for dirpath, _, files in os.walk(corpus):  # warm the page cache
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                while f.read(1 << 20):
                    pass
    lists = {}
    for n in args.sizes:
        lists[n] = os.path.join(work, f"list{n}.lst")
        write_list(base + ".lst", n, lists[n])

    times: dict[str, dict[int, list[float]]] = {t: {n: [] for n in args.sizes} for t in args.tools}
    cpus: dict[str, dict[int, list[float]]] = {t: {n: [] for n in args.sizes} for t in args.tools}
    for rnd in range(args.rounds):
        order = args.tools if rnd % 2 == 0 else args.tools[::-1]
        for n in args.sizes:
            outs = {}
            for tool in order:
                out = os.path.join(work, f"{tool}-{n}")
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(out)
                shutil.copy(lists[n], os.path.join(out, "data.lst"))
                t = run([*tools[tool], os.path.join(out, "data"), corpus], envs[tool])
                times[tool][n].append(t)
                cpus[tool][n].append(run.cpu)
                outs[tool] = out
                count = sum(count_records(str(p)) for p in Path(out).glob("*.idx"))
                if count < n * 0.99:  # MXNet prints its errors and exits 0
                    sys.exit(f"{tool} wrote {count} of {n} records")
                print(
                    f"round {rnd} {tool:6s} {n:6d} entries: {t:6.2f} s, CPU {run.cpu:6.2f} s, "
                    f"{count} records",
                    flush=True,
                )
            if "recio" in outs and "engine" in outs:
                names = [f for f in os.listdir(outs["recio"]) if f.endswith((".rec", ".idx"))]
                same = filecmp.cmpfiles(outs["recio"], outs["engine"], names, shallow=False)
                if same[1] or same[2]:
                    sys.exit(f"engine's shards differ from the threads': {same[1] + same[2]}")
            for out in outs.values():
                shutil.rmtree(out)
    n1, n2 = args.sizes
    results: dict = {"corpus": corpus, "sizes": args.sizes, "rounds": args.rounds, "tools": {}}
    for tool in args.tools:
        t1, t2 = (statistics.median(times[tool][n]) for n in args.sizes)
        c1, c2 = (statistics.median(cpus[tool][n]) for n in args.sizes)
        results["tools"][tool] = {
            "runs_s": {n: [round(t, 3) for t in times[tool][n]] for n in args.sizes},
            "median_s": {n1: round(t1, 3), n2: round(t2, 3)},
            "whole_command_images_per_s": {n1: round(n1 / t1, 1), n2: round(n2 / t2, 1)},
            "steady_images_per_s": round((n2 - n1) / (t2 - t1), 1),
            "fixed_cost_s": round(t1 - n1 * (t2 - t1) / (n2 - n1), 3),
            # CPU of all its processes per image at steady state: steadier on a busy machine
            "steady_cpu_ms_per_image": round(1e3 * (c2 - c1) / (n2 - n1), 3),
            # cores kept busy at steady state: CPU over wall time of the extra images
            "steady_cores": round((c2 - c1) / (t2 - t1), 2),
            "cpu_s": {n: [round(c, 3) for c in cpus[tool][n]] for n in args.sizes},
        }
    r = results["tools"]
    for a, b in (("recio", "mxnet"), ("engine", "recio"), ("recio", "base"), ("base", "mxnet")):
        if a in r and b in r:
            results[f"{a}_over_{b}"] = {
                "steady": round(r[a]["steady_images_per_s"] / r[b]["steady_images_per_s"], 3),
                # b's CPU per image over a's: how much less CPU a needs for the same work
                "steady_cpu": round(
                    r[b]["steady_cpu_ms_per_image"] / r[a]["steady_cpu_ms_per_image"], 3
                ),
                **{
                    f"whole_{n}": round(
                        r[a]["whole_command_images_per_s"][n]
                        / r[b]["whole_command_images_per_s"][n],
                        3,
                    )
                    for n in args.sizes
                },
            }
    for tool, row in r.items():
        print(
            f"{tool:6s} steady {row['steady_images_per_s']:7.1f} img/s   fixed cost "
            f"{row['fixed_cost_s']:.2f} s   CPU {row['steady_cpu_ms_per_image']:.3f} ms/image "
            f"({row['steady_cores']:.2f} cores)   "
            f"whole command {row['whole_command_images_per_s']}"
        )
    for key in ("recio_over_mxnet", "engine_over_recio", "recio_over_base", "base_over_mxnet"):
        if key in results:
            print(f"{key}: {results[key]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
