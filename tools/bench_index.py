"""Opening a large ``.idx`` and drawing an epoch's order and shard: time and memory.

    python tools/bench_index.py [--records 40000000] [--workdir DIR] [--rounds 1]
                                [--batch-size 128] [--parts 8] [--rank 3]
                                [--baseline-rev REV] [--no-baselines] [--tracemalloc]

Writes a synthetic pair (reused when DIR holds one of that size): an ``.idx`` of
``key\\toffset`` lines, key i at byte i * 1024, and a sparse ``.rec`` with one real record
at the last offset (so the open's checks pass). Each way of opening it runs in a fresh
process, the ways taking turns round after round:

- ``recio``: ``RecordFile(rec)``, as the reader opens an ``.idx`` now;
- ``parse_idx``: the reader before (``read_text``, ``parse_idx``'s list of tuples, two
  arrays from it, ``np.unique`` for the records' extents);
- ``mxnet``: MXNet 1.9.1's ``MXIndexedRecordIO.open`` (a dict of every key and a list of
  keys, line by line), emulated.

Each prints its wall time and its peak RSS above what the process held before (bytes per
record); ``--tracemalloc`` adds tracemalloc's peak for ``recio`` (in another process: it
slows the baselines tenfold). The sampler part times ``Sampler.order`` and
``shard_positions`` for rank ``--rank`` of ``--parts`` and for a single rank, global and
block shuffle, against the sampler module at ``--baseline-rev`` (``git show``), and
checks the two give the same positions.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, REPO)

from recio.records.format import IRHeader, encode_record, pack  # noqa: E402

STRIDE = 1024  # bytes between record starts in the synthetic .rec
BASELINE_REV = "e06f759"  # the last commit with the list-of-tuples reader and loop sampler
WAYS = ("recio", "parse_idx", "mxnet")


# --- the synthetic pair -------------------------------------------------------------


def _widths(x: np.ndarray) -> np.ndarray:
    """Decimal digits of each non-negative number."""
    width = np.ones(len(x), dtype=np.int64)
    top = int(x.max()) if len(x) else 0
    for p in range(1, len(str(top))):
        width += x >= 10**p
    return width


def _fixed_width_lines(keys: np.ndarray, wk: int, offsets: np.ndarray, wo: int) -> bytes:
    line = np.empty((len(keys), wk + wo + 2), dtype=np.uint8)
    line[:, wk], line[:, -1] = ord("\t"), ord("\n")
    for column, x, w in ((0, keys, wk), (wk + 1, offsets, wo)):
        powers = 10 ** np.arange(w - 1, -1, -1, dtype=np.int64)
        line[:, column : column + w] = x[:, None] // powers % 10 + ord("0")
    return line.tobytes()


def idx_lines(keys: np.ndarray, offsets: np.ndarray) -> bytes:
    r"""``key\toffset\n`` lines of non-negative numbers, as MXNet writes them (vectorised)."""
    wk, wo = _widths(keys), _widths(offsets)
    change = np.flatnonzero((np.diff(wk) != 0) | (np.diff(wo) != 0)) + 1
    bounds = [0, *change.tolist(), len(keys)]
    return b"".join(
        _fixed_width_lines(keys[a:b], int(wk[a]), offsets[a:b], int(wo[a]))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        if b > a
    )


def write_pair(base: str, n: int, stride: int = STRIDE) -> tuple[str, str]:
    """``base.rec`` (sparse, one record at the last offset) and ``base.idx`` of ``n`` records."""
    rec, idx = base + ".rec", base + ".idx"
    with open(idx, "wb") as f:
        for lo in range(0, n, 1 << 20):
            keys = np.arange(lo, min(n, lo + (1 << 20)), dtype=np.int64)
            f.write(idx_lines(keys, keys * stride))
    with open(rec, "wb") as f:
        if n:
            last = (n - 1) * stride
            f.truncate(last)
            f.seek(last)
            f.write(encode_record(pack(IRHeader(0, 0.0, n - 1, 0), b"\xff" * 100)))
    return rec, idx


# --- the ways of opening it, each in a process of its own ---------------------------


def open_recio(rec: str, idx: str):
    from recio.records.file import RecordFile

    return RecordFile(rec, idx)


def open_parse_idx(rec: str, idx: str):
    """The reader's open before parse_idx_arrays (its ``_load_index``, line for line)."""
    from recio import storage
    from recio.records.format import parse_idx
    from recio.records.index import check_pair

    source = storage.open_source(rec)
    text = storage.read_text(idx)
    entries = parse_idx(text, path=idx, int64_keys=True)
    keys = np.array([k for k, _ in entries], dtype=np.int64)
    offsets = np.array([o for _, o in entries], dtype=np.int64)
    bad = np.flatnonzero((offsets < 0) | (offsets >= source.size) | (offsets % 4 != 0))
    assert not bad.size
    check_pair(idx, keys, offsets, source)
    starts, first = np.unique(offsets, return_index=True)
    ends = np.append(starts[1:], source.size)
    lengths = ends[np.searchsorted(starts, offsets)] - offsets
    return source, keys, offsets, lengths


def open_mxnet(rec: str, idx: str):
    """MXNet 1.9.1 ``MXIndexedRecordIO.open`` for reading, its index part."""
    index, keys = {}, []
    with open(idx) as fidx:
        for line in iter(fidx.readline, ""):
            line = line.strip().split("\t")
            key = int(line[0])
            index[key] = int(line[1])
            keys.append(key)
    return index, keys


def _status_bytes(field: str) -> int:
    """A figure of /proc/self/status (VmRSS, VmHWM: the peak RSS of this image, which,
    unlike ``ru_maxrss``, does not count the parent's before ``exec``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"no {field} in /proc/self/status")


def child(way: str, rec: str, idx: str, n: int, trace: bool) -> dict:
    opener = {"recio": open_recio, "parse_idx": open_parse_idx, "mxnet": open_mxnet}[way]
    if trace:
        import tracemalloc

        tracemalloc.start()
    before = _status_bytes("VmRSS")
    start = time.perf_counter()
    held = opener(rec, idx)
    seconds = time.perf_counter() - start
    peak = _status_bytes("VmHWM")
    out = {"way": way, "seconds": seconds, "rss_per_record": (peak - before) / n}
    if trace:
        out["traced_per_record"] = tracemalloc.get_traced_memory()[1] / n
    del held
    return out


def run_child(way: str, rec: str, idx: str, n: int, trace: bool = False) -> dict:
    command = [sys.executable, __file__, "--child", way, "--rec", rec, "--idx", idx]
    command += ["--records", str(n)] + (["--tracemalloc"] if trace else [])
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.splitlines()[-1])


# --- the sampler ----------------------------------------------------------------------


def baseline_sampler(rev: str):
    """The sampler module as it was at ``rev`` (it imports nothing of recio at run time)."""
    for path in ("recio/sampling/sampler.py", "recio/sampler.py"):  # its home, then its old one
        shown = subprocess.run(
            ["git", "-C", REPO, "show", f"{rev}:{path}"], capture_output=True, text=True
        )
        if shown.returncode == 0:
            break
    shown.check_returncode()
    spec = importlib.util.spec_from_loader(f"sampler_{rev}", loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    exec(compile(shown.stdout, f"{rev}:{path}", "exec"), module.__dict__)
    return module


def time_sampler(module, n: int, batch: int, parts: int, rank: int, shuffle: str):
    s = module.Sampler(n, batch, part_index=rank, num_parts=parts, shuffle=shuffle, seed=0)
    start = time.perf_counter()
    s.order(0)
    ordered = time.perf_counter()
    shard = s.shard_positions(0)
    sharded = time.perf_counter()
    s.plan(0, len(s) - 1)
    planned = time.perf_counter()
    return ordered - start, sharded - ordered, planned - sharded, shard


def bench_sampler(args) -> None:
    from recio.sampling import sampler as current

    try:
        old = baseline_sampler(args.baseline_rev)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"no baseline sampler ({exc}); this build alone")
        old = None
    print(f"\nSampler, {args.records:,} records, batch {args.batch_size}")
    print(f"{'':28} {'order':>8} {'shard':>8} {'plan':>8}   baseline order / shard")
    for shuffle in ("global", "block"):
        for parts, rank in ((args.parts, args.rank), (1, 0)):
            o, s, p, shard = time_sampler(
                current, args.records, args.batch_size, parts, rank, shuffle
            )
            line = f"{shuffle}, rank {rank} of {parts}".ljust(28)
            line += f" {o:7.2f}s {s:7.2f}s {p * 1e3:6.2f}ms"
            if old is not None:
                bo, bs, _, base = time_sampler(
                    old, args.records, args.batch_size, parts, rank, shuffle
                )
                same = "same positions" if np.array_equal(shard, base) else "POSITIONS DIFFER"
                line += f"   {bo:7.2f}s / {bs:6.2f}s ({same})"
                del base
            print(line, flush=True)
            del shard


# --- the command --------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=40_000_000)
    parser.add_argument("--workdir", help="where the pair is written (default: a temp dir)")
    parser.add_argument("--rounds", type=int, default=1, help="turns of every way of opening")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--rank", type=int, default=3)
    parser.add_argument("--baseline-rev", default=BASELINE_REV)
    parser.add_argument("--no-baselines", action="store_true", help="time recio's open only")
    parser.add_argument("--no-sampler", action="store_true")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--child", choices=WAYS, help=argparse.SUPPRESS)
    parser.add_argument("--rec", help=argparse.SUPPRESS)
    parser.add_argument("--idx", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.rec, args.idx, args.records, args.tracemalloc)))
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        base = os.path.join(workdir, f"synthetic-{args.records}")
        rec, idx = base + ".rec", base + ".idx"
        if not (os.path.exists(rec) and os.path.exists(idx)):
            start = time.perf_counter()
            write_pair(base, args.records)
            print(f"wrote {idx} in {time.perf_counter() - start:.1f} s")
        size = os.path.getsize(idx)
        per = size / args.records
        print(f"{args.records:,} records, .idx {size / 1e6:.1f} MB ({per:.1f} B/record)")
        ways = ("recio",) if args.no_baselines else WAYS
        results: dict[str, list[dict]] = {way: [] for way in ways}
        for _ in range(args.rounds):
            for way in ways:
                results[way].append(run_child(way, rec, idx, args.records))
        print(f"\nopen, median (min-max) of {args.rounds}: seconds, peak RSS in bytes per record")
        recio_seconds = statistics.median(r["seconds"] for r in results["recio"])
        for way, runs in results.items():
            seconds = [r["seconds"] for r in runs]
            rss = statistics.median(r["rss_per_record"] for r in runs)
            spread = f"{statistics.median(seconds):.2f} s ({min(seconds):.2f}-{max(seconds):.2f})"
            ratio = statistics.median(seconds) / recio_seconds
            ratio = f"   {ratio:.1f}x recio's time" if way != "recio" else ""
            print(f"{way:10} {spread:>24} {rss:8.1f} B/record{ratio}")
        if args.tracemalloc:
            traced = run_child("recio", rec, idx, args.records, trace=True)
            print(f"recio, tracemalloc peak: {traced['traced_per_record']:.1f} B/record")
        if not args.no_sampler:
            bench_sampler(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
