"""What verifying per-record checksums costs the iterator, end to end, side by side.

Writes a small dataset (JPEG records with their checksum sidecar), then iterates it with
``verify_checksums=False`` and ``True``, alternating, and prints each setting's median
images/s (wall) and CPU time per image (all threads; steadier on a loaded machine), and
the median of the paired ratios. Local files (a batch's records checked by one native
call in the decode thread) and the same bytes on fsspec's memory:// store (the remote
path: a batch's extents checked as they are fetched, before parsing).

    python tools/bench_checksum.py [--records 1024] [--size 112] [--repeats 7]

Timings swing on a loaded machine; instruction counts do not. ``--callgrind`` counts the
instructions (all threads) of N epochs with checksums off and on, and of opening alone,
under ``valgrind --tool=callgrind``, and prints what checking adds per epoch:

    python tools/bench_checksum.py --callgrind --records 256 --size 112

``--batches N`` counts the steps of one batch of 64 instead (N calls, less none): reading
and decoding it, checking it locally, reading it from memory:// unchecked and checked,
and prints each one's instructions per record:

    python tools/bench_checksum.py --callgrind --batches 100 --records 64 --size 24

``--rec FILE`` uses an existing dataset (with its ``.idx`` and ``.crc`` beside it: the far
benchmark's sample, say) instead of writing one.

``--default`` times what the default settings cost (``verify_checksums`` left as it is,
NOTE [checksums by default]): the local dataset with its sidecar beside it against a copy
of its ``.rec`` and ``.idx`` without one, taking turns, the same medians and paired ratios
(and a second copy without one, the control: how far identical arms drift apart); with
``--callgrind``, their instructions per epoch:

    python tools/bench_checksum.py --default --records 1024 --size 112 --repeats 9
    python tools/bench_checksum.py --default --callgrind --records 512 --size 32
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from recio.pipeline.iterator import ImageRecordIter  # noqa: E402
from recio.records.format import IRHeader, pack  # noqa: E402
from recio.records.recordio import MXIndexedRecordIO  # noqa: E402


def make(folder: str, n: int, size: int) -> str:
    rng = np.random.default_rng(0)
    rec = os.path.join(folder, "b.rec")
    with MXIndexedRecordIO(os.path.join(folder, "b.idx"), rec, "w") as w:
        for i in range(n):
            yy, xx = np.mgrid[0:size, 0:size]
            img = np.stack([xx * 255 // size, yy * 255 // size, (xx + yy + i) % 256], -1)
            img = np.clip(img + rng.integers(0, 30, img.shape), 0, 255).astype(np.uint8)
            out = io.BytesIO()
            Image.fromarray(img).save(out, format="JPEG", quality=90)
            w.write_idx(i, pack(IRHeader(0, float(i % 10), i, 0), out.getvalue()))
    return rec


def epoch_rate(url: str, out: int, verify: bool | None) -> tuple[float, float]:
    """One epoch: (images per second of wall time, CPU microseconds per image).

    ``verify``: ``verify_checksums``; None: the default.
    """
    setting = {} if verify is None else {"verify_checksums": verify}
    with ImageRecordIter(
        url, data_shape=(3, out, out), batch_size=64, preprocess_threads=2, **setting
    ) as it:
        start, cpu = time.perf_counter(), time.process_time()
        n = sum(len(b.index) for b in it)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        return n / wall, 1e6 * cpu / n


def _epochs(url: str, out: int, verify: bool | None, epochs: int) -> None:
    """The program callgrind counts: open the iterator, run ``epochs`` epochs."""
    setting = {} if verify is None else {"verify_checksums": verify}
    with ImageRecordIter(
        url, data_shape=(3, out, out), batch_size=64, preprocess_threads=2, **setting
    ) as it:  # fmt: skip
        for _ in range(epochs):
            for _ in it:
                pass


def _batches(kind: str, rec: str, out: int, n: int) -> None:
    """The program callgrind counts per batch of 64: after one warm-up call, ``n`` calls of
    ``kind``: "decode" (read_and_decode, unverified), "verify" (RecordFile.verify_view),
    "remote-off" / "remote-on" (read_many from memory://, checked or not)."""
    from recio.augment import KeyedDraw
    from recio.decode import DecodeOptions, DecodePool
    from recio.pipeline.config import CropSpec
    from recio.pipeline.read_decode import read_and_decode
    from recio.records.file import RecordFile

    positions = np.arange(64)
    if kind.startswith("remote"):
        import fsspec

        fs = fsspec.filesystem("memory")
        for ext in ("rec", "idx", "crc"):
            with open(rec[:-3] + ext, "rb") as f:
                fs.pipe(f"/b/b.{ext}", f.read())
        records = RecordFile("memory://b/b.rec", verify_checksums=kind == "remote-on")
        call = lambda: records.read_many(positions, bad="mark")  # noqa: E731
    elif kind == "verify":
        records = RecordFile(rec, verify_checksums=True)
        view = records.local_view(positions)
        call = lambda: records.verify_view(view, positions)  # noqa: E731
    else:
        records = RecordFile(rec, verify_checksums=False)
        pool, pixels = DecodePool(1), np.empty((64, out, out, 3), np.uint8)
        draw, options = KeyedDraw(CropSpec(out, out), seed=0, epoch=0), DecodeOptions()
        call = lambda: read_and_decode(  # noqa: E731
            records, positions, pool, pixels, label_width=1, draw=draw, options=options
        )
    for _ in range(n + 1):
        call()


def _instructions(program: str, args: tuple, folder: str) -> int:
    import re
    import subprocess

    log = os.path.join(folder, "cg.out")
    code = (
        f"import sys; sys.path.insert(0, {os.path.dirname(os.path.dirname(__file__))!r}); "
        f"from tools.bench_checksum import {program}; {program}(*{args!r})"
    )
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={log}", sys.executable, "-c", code],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
    )  # fmt: skip
    return int(re.findall(r"Collected : (\d+)", done.stderr)[-1])


def callgrind(rec: str, out: int, folder: str, epochs: int, where: str, plain: str = "") -> None:
    """Instructions per epoch, checked and not; with ``plain`` (a copy without a sidecar),
    the default settings on ``plain`` (off) and on ``rec`` (on)."""
    if plain:
        runs = {False: (plain, None), True: (rec, None)}
    else:
        runs = {False: (rec, False), True: (rec, True)}
    counts = {
        (verify, n): _instructions("_epochs", (url, out, setting, n), folder)
        for verify, (url, setting) in runs.items()
        for n in (0, epochs)
    }
    off = (counts[False, epochs] - counts[False, 0]) / epochs
    on = (counts[True, epochs] - counts[True, 0]) / epochs
    print(
        f"{where:10s} instructions per epoch: off {off / 1e6:.1f} M, on {on / 1e6:.1f} M "
        f"({100 * (on - off) / off:+.2f} %); opening: off {counts[False, 0] / 1e6:.0f} M, "
        f"on {counts[True, 0] / 1e6:.0f} M (loading the sidecar)"
    )


def callgrind_batches(rec: str, out: int, folder: str, n: int) -> None:
    """Instructions per record of each batch program (the difference of n calls and none)."""
    per = {}
    for kind, calls in (("decode", n), ("verify", 10 * n), ("remote-off", n), ("remote-on", n)):
        count = _instructions("_batches", (kind, rec, out, calls), folder)
        base = _instructions("_batches", (kind, rec, out, 0), folder)
        per[kind] = (count - base) / (64 * calls)
    verify, remote = per["verify"], per["remote-on"] - per["remote-off"]
    read_decode = per["decode"]
    print(
        f"per record: read+decode {read_decode:.0f}, local check {verify:.0f} "
        f"({100 * verify / read_decode:.2f} %), remote read {per['remote-off']:.0f}, "
        f"its check {remote:.0f} ({100 * remote / (read_decode + per['remote-off']):.2f} % "
        "of read+decode)"
    )


def bare_copy(rec: str, folder: str, name: str = "bare") -> str:
    """A copy of the ``.rec`` and ``.idx`` in a folder of ``folder``, without the sidecar."""
    import shutil

    bare = os.path.join(folder, name)
    os.mkdir(bare)
    plain = os.path.join(bare, "b.rec")
    shutil.copy(rec, plain)
    shutil.copy(rec[:-3] + "idx", plain[:-3] + "idx")
    return plain


def default_cost(rec: str, out: int, plain: str, repeats: int) -> None:
    """Paired epochs under the default settings: the sidecar beside the data (``rec``), and
    not (``plain``); a second copy without one (``control``) says how far two identical
    arms drift apart on this machine. The arms take turns going first."""
    control = bare_copy(plain, os.path.dirname(os.path.dirname(plain)), "control")
    with ImageRecordIter(rec, data_shape=(3, out, out), batch_size=64) as it:
        assert it.records.checksums is not None, "the default checks a local sidecar"
    arms = {"sidecar": rec, "control": control, "no sidecar": plain}
    for url in arms.values():
        epoch_rate(url, out, None)  # warm up: page cache, pool, imports
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
    names = list(arms)
    for k in range(repeats):
        for name in names[k % 3 :] + names[: k % 3]:
            runs[name].append(epoch_rate(arms[name], out, None))
    for k, what in ((0, "img/s (wall)"), (1, "CPU us/img")):
        base = statistics.median(r[k] for r in runs["no sidecar"])
        for name in ("sidecar", "control"):
            ratios = [b[k] / a[k] for a, b in zip(runs["no sidecar"], runs[name], strict=True)]
            ratio = statistics.median(ratios)
            cost = 100 * (1 - ratio) if k == 0 else 100 * (ratio - 1)
            print(
                f"default   {what:13s} {name:8s} {statistics.median(r[k] for r in runs[name]):8.1f}"
                f"  no sidecar {base:8.1f}  paired median {ratio:.3f} (cost {cost:+.1f} %)"
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1024)
    parser.add_argument("--size", type=int, default=112, help="stored image side")
    parser.add_argument("--out", type=int, default=0, help="output side (default: --size)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--callgrind", action="store_true", help="count instructions instead")
    parser.add_argument("--epochs", type=int, default=2, help="epochs counted (--callgrind)")
    parser.add_argument(
        "--batches", type=int, default=0,
        help="with --callgrind: count N calls of each batch step instead of epochs",
    )  # fmt: skip
    parser.add_argument("--rec", help="an existing .rec (with .idx and .crc) instead")
    parser.add_argument(
        "--default", action="store_true",
        help="the default settings, with the sidecar beside the data and without one",
    )  # fmt: skip
    args = parser.parse_args()
    out = args.out or args.size
    with tempfile.TemporaryDirectory() as folder:
        if args.rec:
            if not args.callgrind:
                raise SystemExit("--rec is for --callgrind (timings write their own data)")
            rec = os.path.abspath(args.rec)
            mb = os.path.getsize(rec) / 1e6
            print(f"{rec} ({mb:.1f} MB), out {out}")
        else:
            rec = make(folder, args.records, args.size)
            mb = os.path.getsize(rec) / 1e6
            print(
                f"{args.records} records of {args.size}x{args.size} JPEG ({mb:.1f} MB), out {out}"
            )  # noqa: E501
        if args.callgrind and args.batches:
            callgrind_batches(rec, out, folder, args.batches)
            return
        if args.callgrind:  # local only: a memory:// store lives in one process
            if args.default:
                callgrind(rec, out, folder, args.epochs, "default", bare_copy(rec, folder))
            else:
                callgrind(rec, out, folder, args.epochs, "local")
            return
        if args.default:
            default_cost(rec, out, bare_copy(rec, folder), args.repeats)
            return
        import fsspec

        fs = fsspec.filesystem("memory")
        for ext in ("rec", "idx", "crc"):
            with open(os.path.join(folder, f"b.{ext}"), "rb") as f:
                fs.pipe(f"/bench/b.{ext}", f.read())
        for where, url in (("local", rec), ("memory://", "memory://bench/b.rec")):
            epoch_rate(url, out, True)  # warm up: page cache, pool, imports
            runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            for _ in range(args.repeats):
                for verify in (False, True):
                    runs[verify].append(epoch_rate(url, out, verify))
            for k, what in ((0, "img/s (wall)"), (1, "CPU us/img")):
                off, on = (statistics.median(r[k] for r in runs[v]) for v in (False, True))
                pairs = zip(runs[False], runs[True], strict=True)
                ratio = statistics.median(b[k] / a[k] for a, b in pairs)
                cost = 100 * (1 - ratio) if k == 0 else 100 * (ratio - 1)
                print(
                    f"{where:10s} {what:13s} off {off:8.1f}  on {on:8.1f}  "
                    f"paired on/off median {ratio:.3f} (cost {cost:+.1f} %)"
                )


if __name__ == "__main__":
    main()
