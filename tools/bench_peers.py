#!/usr/bin/env python3
"""recio against its peers and against the plain decode, side by side in one run.

    python tools/bench_peers.py [--corpus DIR | --count 800 --seed 47] [--workdir DIR]
        [--threads 2] [--batch 64] [--seconds 2] [--rounds 5] [--only rrc,turboloader,...]
        [--json OUT] [--callgrind N]

The corpus: the JPEG files of an image folder (``--corpus``), or of one
``tools/make_corpus.py`` makes (``--count``, ``--seed``; 800 images give 784 JPEGs, the
rest PNGs, which neither PyTurboJPEG nor TurboLoader decodes). Their original bytes are
packed into a .rec (what ``recio im2rec --pass-through`` writes), a copy of it goes
through ``recio optimize`` (restart markers, lossless), and a TAR of the same files is
what TurboLoader reads (its fastest reading of JPEGs: its DirectBatch path; its .tbl
format stores decoded pixels, which is no decode). Contestants, each on ``--threads``
threads, batches of ``--batch``:

* the plain decode: PyTurboJPEG's full-size decode of the original JPEGs (Pillow for the
  CMYK one it refuses), in memory: ``recio bench``'s "decode (libjpeg-turbo, full size)",
  every ratio's denominator;
* recio's ``ImageRecordIter`` end to end (reads, decode, batches) with RandomResizedCrop
  224 (scale 0.08-1, ratio 3/4-4/3) + flip, uint8 NCHW, on the original and the optimized
  .rec; and its centre crop 224 (shorter side 256) on both;
* TurboLoader 2.39: ``DataLoader(TAR, image_size=224, train_aug=True, shuffle=True,
  output_format="numpy_chw")``, its own fused RandomResizedCrop + flip (float32 [0, 1]:
  its TAR path writes no uint8); its process-wide pool has one thread per core;
* Pillow + a thread pool, ImageFolder-style RandomResizedCrop + flip (``recio bench``'s
  baseline), in memory;
* DALI's CPU pipeline: ``fn.readers.mxnet`` on the original .rec, decode,
  random_resized_crop, crop_mirror_normalize with a coin-flip mirror (float32 NCHW).

A contestant whose package is missing, or that fails to open, is named with the reason
and the others run. All run in one process in interleaved rounds
(:func:`recio.bench.noise.interleaved`: each opened, warmed up, timed for ``--seconds``
and closed in turn, the order rotating), so a busy machine slows all alike. Printed: per
contestant images/s median (min-max), process CPU ms per image (median of the rounds;
all threads, the consumer's included), the median of the per-round ratios to the plain
decode (and their range), the pairs the project sets targets for (BENCHMARKS.md,
"Iterator end to end"), and the JSON (``--json``) with every round's rate, from which
the ratios are computed.

``--callgrind N`` counts instructions per image (valgrind's callgrind, unmoved by load),
one thread over the first N JPEGs PyTurboJPEG decodes: recio's decode call
(``--toggle-collect=rc_decode_drawn``: the pool drawing RRC-224 + flip, or the centre
crop, as the iterator does) on the original and the optimized bytes, and PyTurboJPEG's
(``--toggle-collect=ffi_call``: its C calls) on the original bytes. Each is counted over
one pass and over two; the difference is a pass at steady state, as in a training run's
later epochs (recio's first decode of a JPEG in a process also reads its whole stream:
NOTE [whole-stream check]). One count by hand::

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=rc_decode_drawn \\
        python tools/bench_peers.py --one-pass rrc --rec R.rec --images 200 --passes 2
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=ffi_call \\
        python tools/bench_peers.py --one-pass plain --rec R.rec --images 200 --passes 2

Small images (112² faces, 16²) "no slower per image" than another build:
``tools/bench_decode_core.py small`` decodes the same JPEGs through this checkout's
extension and another checkout's, taking turns in one process::

    python tools/make_corpus.py C --count 600
    python tools/bench_decode_core.py small C --size 112 --write S112
    python tools/bench_decode_core.py small C --size 16 --write S16
    git worktree add OLD BASE_COMMIT && (cd OLD && python setup.py build_ext --inplace -q)
    python tools/bench_decode_core.py small S112 --repeats 7 --against OLD
    python tools/bench_decode_core.py small S16 --size 16 --repeats 7 --against OLD

and reads the line ``recio 1t / against 1t``: this build's throughput over OLD's, and
its CPU per image (process CPU time, steadier on a busy machine); 1.0 or more is no
slower. Instructions per image of each build (the same image set, one thread)::

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=rc_decode \\
        python tools/bench_decode_core.py small S112 --only "recio 1t" --passes 1
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=rc_decode \\
        python tools/bench_decode_core.py small S112 --against OLD --only "against 1t" \\
        --passes 1

each total divided by the 512 images it prints (S16: add ``--size 16``); ``--passes 2``
less ``--passes 1`` is a pass at steady state (NOTE [whole-stream check]).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS.parent))

from recio.augment import CropSpec, KeyedDraw  # noqa: E402
from recio.bench.noise import compare, interleaved  # noqa: E402
from recio.bench.optimized import optimized_copy  # noqa: E402
from recio.bench.stages import (  # noqa: E402
    Data,
    stage_iterator,
    stage_pillow,
    stage_turbo_decode,
)
from recio.decode import DecodePool  # noqa: E402
from recio.records.format import IRHeader  # noqa: E402
from recio.records.recordio import MXIndexedRecordIO, pack  # noqa: E402

PLAIN = "plain decode (PyTurboJPEG, full size)"
RRC_ORIGINAL = "recio RRC-224+flip, original"
RRC_OPTIMIZED = "recio RRC-224+flip, optimized"
CENTRE_ORIGINAL = "recio centre crop 224, original"
CENTRE_OPTIMIZED = "recio centre crop 224, optimized"
TURBOLOADER = "TurboLoader RRC-224+flip (TAR)"
PILLOW = "Pillow + thread pool RRC-224+flip"
DALI = "DALI CPU RRC-224+flip (readers.mxnet)"
CONTESTANTS = (
    PLAIN,
    RRC_ORIGINAL,
    RRC_OPTIMIZED,
    CENTRE_ORIGINAL,
    CENTRE_OPTIMIZED,
    TURBOLOADER,
    PILLOW,
    DALI,
)
#: --only's names for the contestants.
SHORT = {
    "plain": PLAIN,
    "rrc": RRC_ORIGINAL,
    "rrc-optimized": RRC_OPTIMIZED,
    "centre": CENTRE_ORIGINAL,
    "centre-optimized": CENTRE_OPTIMIZED,
    "turboloader": TURBOLOADER,
    "pillow": PILLOW,
    "dali": DALI,
}
TURBOLOADER_VERSION = "2.39.0"
#: The project's targets: (contestant, against) -> the least ratio of throughputs.
TARGETS = {
    (RRC_ORIGINAL, PLAIN): 1.6,
    (RRC_OPTIMIZED, PLAIN): 2.0,
    (CENTRE_OPTIMIZED, PLAIN): 1.3,
    (RRC_ORIGINAL, TURBOLOADER): 3.5,
}
#: Pairs reported beside the ratios to the plain decode.
PAIRS = (
    (RRC_ORIGINAL, TURBOLOADER),
    (RRC_OPTIMIZED, TURBOLOADER),
    (RRC_ORIGINAL, PILLOW),
    (RRC_ORIGINAL, DALI),
    (RRC_OPTIMIZED, RRC_ORIGINAL),
)
SIZE = 224
CENTRE = {"resize": 256}  # ImageRecordIter's centre crop of the image resized to 256
#: --one-pass kinds: what callgrind counts, and the function it counts inside.
PASSES = {"rrc": "rc_decode_drawn", "centre": "rc_decode_drawn", "plain": "ffi_call"}

Factory = Callable[[], tuple[Callable[[], tuple[int, int]], Callable[[], None]]]


# --- the corpus and its three forms ------------------------------------------------------


def make_corpus(out: Path, count: int, seed: int, jobs: int) -> None:
    """``tools/make_corpus.py OUT --count count --seed seed``."""
    spec = importlib.util.spec_from_file_location("make_corpus", TOOLS / "make_corpus.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its process pool looks the module up by name
    spec.loader.exec_module(module)
    argv = [str(out), "--count", str(count), "--seed", str(seed), "--jobs", str(jobs)]
    module.main([*argv, "--quiet"])


def corpus_jpegs(corpus: Path) -> list[Path]:
    """The folder's JPEG files, sorted by path."""
    return sorted(p for p in corpus.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg"))


def pack_rec(files: list[Path], corpus: Path, rec: Path) -> None:
    """The files' original bytes as records (label: the class folder's position)."""
    classes = sorted({f.parent.relative_to(corpus) for f in files})
    label = {c: float(i) for i, c in enumerate(classes)}
    with MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "w") as writer:
        for key, f in enumerate(files):
            header = IRHeader(0, label[f.parent.relative_to(corpus)], key, 0)
            writer.write_idx(key, pack(header, f.read_bytes()))


def pack_tar(files: list[Path], corpus: Path, tar: Path) -> None:
    """The same files in a TAR, in the same order, as TurboLoader reads them."""
    with tarfile.open(tar, "w") as out:
        for f in files:
            out.add(f, arcname=str(f.relative_to(corpus)))


# --- the contestants ------------------------------------------------------------------


def turboloader_stage(tar: Path, batch: int, mean_bytes: float) -> tuple[Factory, dict]:
    """TurboLoader's DataLoader on the TAR, its fused RRC + flip; its version and failures."""
    import turboloader

    # Its decode failures (the CMYK JPEG) are counted and reported; its own C++ warning
    # on stderr stays, its Python warning about the same failures is left out.
    warnings.filterwarnings("ignore", "turboloader: ", RuntimeWarning)
    info = {"version": turboloader.__version__, "zero_filled": 0}

    def factory():
        loader = turboloader.DataLoader(
            str(tar),
            batch_size=batch,
            shuffle=True,
            image_size=SIZE,
            output_format="numpy_chw",
            train_aug=True,
        )
        epoch, failed = [0], [0]
        stream = [iter(loader)]

        def step() -> tuple[int, int]:
            try:
                images, meta = next(stream[0])
            except StopIteration:
                epoch[0] += 1
                loader.set_epoch(epoch[0])
                stream[0] = iter(loader)
                images, meta = next(stream[0])
            failed[0] = meta.get("decode_failures", 0)  # the loader's count so far
            return len(images), int(mean_bytes * len(images))

        def close() -> None:
            info["zero_filled"] += failed[0]
            loader.close()

        return step, close

    return factory, info


def dali_stage(rec: Path, batch: int, threads: int, mean_bytes: float) -> Factory:
    """DALI's CPU pipeline with its own reader of the .rec: ``recio bench``'s DALI row."""
    from recio.dali.bench import mxnet_reader_pipeline

    def factory():
        idx = str(rec.with_suffix(".idx"))
        pipes = [mxnet_reader_pipeline(str(rec), idx, batch, (SIZE, SIZE), threads, "cpu")]

        def step() -> tuple[int, int]:
            pipes[0].run()
            return batch, int(mean_bytes * batch)

        return step, pipes.clear

    return factory


class CpuPerImage:
    """A factory whose steps after the warm-up one count process CPU time and images."""

    def __init__(self, factory: Factory) -> None:
        self.factory = factory
        self.ms: list[float] = []  # one per opening: CPU ms per image

    def __call__(self):
        step, close = self.factory()
        seen = {"steps": 0, "cpu": 0.0, "images": 0}

        def counted() -> tuple[int, int]:
            start = time.process_time()
            images, nbytes = step()
            if seen["steps"]:  # the first is interleaved's warm-up
                seen["cpu"] += time.process_time() - start
                seen["images"] += images
            seen["steps"] += 1
            return images, nbytes

        def closed() -> None:
            close()
            if seen["images"]:
                self.ms.append(seen["cpu"] / seen["images"] * 1e3)

        return counted, closed


def contestants(args, rec: Path, optimized: Path | None, tar: Path, why_not_optimized: str):
    """Name -> factory of the contestants that can run; name -> why not, for the others."""
    threads, batch, shape = args.threads, args.batch, (3, SIZE, SIZE)
    data = Data(str(rec), None, batch)
    mean_bytes = float(np.mean(data.image_bytes))
    spec = CropSpec(SIZE, SIZE, random_resized_crop=True, rand_mirror=True)
    factories: dict[str, Factory] = {
        PLAIN: lambda: stage_turbo_decode(data, threads),
        RRC_ORIGINAL: lambda: stage_iterator(str(rec), None, threads, batch, shape, "uint8"),
        CENTRE_ORIGINAL: lambda: stage_iterator(
            str(rec), None, threads, batch, shape, "uint8", augment=CENTRE
        ),
        PILLOW: lambda: stage_pillow(data, threads, spec),
    }
    missing: dict[str, str] = {}
    if optimized is None:
        missing[RRC_OPTIMIZED] = missing[CENTRE_OPTIMIZED] = why_not_optimized
    else:
        factories[RRC_OPTIMIZED] = lambda: stage_iterator(
            str(optimized), None, threads, batch, shape, "uint8"
        )
        factories[CENTRE_OPTIMIZED] = lambda: stage_iterator(
            str(optimized), None, threads, batch, shape, "uint8", augment=CENTRE
        )
    extra: dict = {}
    try:
        factories[TURBOLOADER], extra[TURBOLOADER] = turboloader_stage(tar, batch, mean_bytes)
    except ImportError as exc:
        missing[TURBOLOADER] = (
            f"turboloader is not installed ({exc}); pip install turboloader=="
            f"{TURBOLOADER_VERSION} (the peers extra)"
        )
    try:
        factories[DALI] = dali_stage(rec, batch, threads, mean_bytes)
    except ImportError as exc:
        missing[DALI] = f"the dali extra is not installed ({exc})"
    wanted = {SHORT[n] for n in args.only.split(",")} if args.only else set(CONTESTANTS)
    wanted.add(PLAIN)  # every ratio's denominator
    for name in list(factories):
        if name not in wanted:
            del factories[name]
            continue
        try:  # opened once before the rounds: a failure is its row's, not the run's
            step, close = factories[name]()
            try:
                step()
            finally:
                close()
        except Exception as exc:
            missing[name] = f"failed: {type(exc).__name__}: {exc}"
            del factories[name]
    if TURBOLOADER in extra:
        extra[TURBOLOADER]["zero_filled"] = 0  # counted in the rounds, not in the probe
    missing = {n: why for n, why in missing.items() if n in wanted}
    return factories, missing, {n: v for n, v in extra.items() if n in factories}


# --- the run ----------------------------------------------------------------------------


def measure(args, rec: Path, optimized: Path | None, tar: Path, why_not: str) -> dict:
    """The rounds, the ratios and the targets, as the JSON result."""
    factories, missing, extra = contestants(args, rec, optimized, tar, why_not)
    counted = {name: CpuPerImage(f) for name, f in factories.items()}
    log = print if not args.quiet else (lambda _: None)
    stages = interleaved(counted, args.seconds, args.rounds, log)
    result: dict = {"contestants": {}, "missing": missing, "pairs": [], "targets": []}
    cpu = {name: counted[name].ms for name in stages}

    def versus(a: str, b: str) -> dict:
        """``a`` against ``b``: throughput, and CPU per image (``b``'s over ``a``'s)."""
        return {**ratio(stages[a]["rounds"], stages[b]["rounds"]), "cpu": ratio(cpu[b], cpu[a])}

    for name in sorted(stages, key=CONTESTANTS.index):
        stage = stages[name]
        row = {
            "images_per_s": stage["images_per_s"],
            "rounds": stage["rounds"],
            "cpu_ms_per_image": statistics.median(cpu[name]),
            "cpu_ms_rounds": cpu[name],
        }
        if name != PLAIN:
            row["vs_plain_decode"] = versus(name, PLAIN)
        result["contestants"][name] = row
    for a, b in PAIRS:
        if a in stages and b in stages:
            result["pairs"].append({"a": a, "b": b, **versus(a, b)})
    for (a, b), least in TARGETS.items():
        target = {"a": a, "b": b, "target": least}
        if a in stages and b in stages:
            got = versus(a, b)
            target.update(ratio=got["median"], met=got["median"] >= least, cpu=got["cpu"]["median"])
        else:
            target.update(ratio=None, met=None, cpu=None)
        result["targets"].append(target)
    if TURBOLOADER in extra:
        result["turboloader"] = extra[TURBOLOADER]
    return result


def ratio(a: list[float], b: list[float]) -> dict:
    """``a``'s rates over ``b``'s, round by round: the median and the range."""
    c = compare(a, b)
    return {"median": c.ratio, "min": c.low, "max": c.high}


def report(result: dict) -> None:
    """The result as a table: rates, CPU per image, ratios; then pairs, targets, missing."""
    setup = result["setup"]
    print(
        f"\n{setup['images']} JPEGs ({setup['mean_kb']:.1f} kB, {setup['mean_mp']:.3f} MP mean), "
        f"{setup['threads']} threads, batch {setup['batch']}, {setup['rounds']} interleaved "
        f"rounds of {setup['seconds']:g} s; load average before {setup['load_before']}, "
        f"after {setup['load_after']}"
    )
    print(
        f"\n{'contestant':40s} {'images/s median (min-max)':>26s}  {'vs plain':17s} "
        f"{'CPU ms/img':>10s}  CPU vs plain"
    )
    for name, row in result["contestants"].items():
        r = row["images_per_s"]
        vs = row.get("vs_plain_decode")
        versus = f"{vs['median']:.2f}x ({vs['min']:.2f}-{vs['max']:.2f})" if vs else "1 (base)"
        cpu_vs = f"{vs['cpu']['median']:.2f}x" if vs else "1 (base)"
        rate = f"{r['median']:,.0f} ({r['min']:,.0f}-{r['max']:,.0f})"
        print(f"{name:40s} {rate:>26s}  {versus:17s} {row['cpu_ms_per_image']:10.3f}  {cpu_vs}")
    print("\n(ratios: medians of the per-round ratios, their range in brackets; CPU: the")
    print(" process's CPU per image, the other's over this one's: fewer cores used, higher)")
    for p in result["pairs"]:
        print(
            f"  {p['a']} / {p['b']}: {p['median']:.2f}x ({p['min']:.2f}-{p['max']:.2f}), "
            f"CPU per image {p['cpu']['median']:.2f}x"
        )
    print("\ntargets")
    for t in result["targets"]:
        got = "not measured" if t["ratio"] is None else f"{t['ratio']:.2f}x"
        met = {None: "", True: "met", False: "NOT met"}[t["met"]]
        cpu = "" if t["cpu"] is None else f" (CPU per image {t['cpu']:.2f}x)"
        print(f"  {t['a']} / {t['b']}: {got} (target >= {t['target']}) {met}{cpu}")
    for name, why in result["missing"].items():
        print(f"missing: {name}: {why}")
    if "turboloader" in result:
        tl = result["turboloader"]
        print(
            f"TurboLoader {tl['version']}: {tl['zero_filled']} image(s) it could not decode "
            "served zero-filled in the run"
        )


def report_counts(counts: dict) -> None:
    """The instruction counts, one line each."""
    for name, count in counts.items():
        print(f"callgrind: {name}: {count['per_image']:,.0f} instructions an image "
              f"(first pass {count['first_pass_per_image']:,.0f}; {count['images']} images, "
              "one thread)")  # fmt: skip


def load_average() -> str:
    """The 1-minute load average, or '-' where there is none."""
    with contextlib.suppress(OSError):
        return f"{os.getloadavg()[0]:.2f}"
    return "-"


def prepare(args, work: Path) -> tuple[Path, Path | None, Path, str, list[Path]]:
    """The corpus's .rec, its optimized copy (or why not), its TAR, its JPEG files."""
    corpus = Path(args.corpus) if args.corpus else work / "corpus"
    if not args.corpus:
        print(f"making a corpus of {args.count} images (seed {args.seed}) in {corpus} ...")
        make_corpus(corpus, args.count, args.seed, args.threads)
    files = corpus_jpegs(corpus)
    if not files:
        raise SystemExit(f"no JPEG file under {corpus}")
    rec, tar = work / "original.rec", work / "original.tar"
    pack_rec(files, corpus, rec)
    pack_tar(files, corpus, tar)
    optimized, why_not = None, ""
    try:
        copy, figures = optimized_copy(str(rec), str(work), args.threads)
        optimized = Path(copy)
        print(f"optimized {figures['transcoded']} JPEGs ({figures['bytes_change']:+.1%} bytes)")
    except Exception as exc:  # the optimized rows fail alone
        why_not = f"recio optimize failed: {exc}"
    return rec, optimized, tar, why_not, files


# --- instruction counts -------------------------------------------------------------------


def pass_images(rec: str, count: int) -> list[bytes]:
    """The first ``count`` images of ``rec`` PyTurboJPEG decodes (so each pass counts the same)."""
    from turbojpeg import TurboJPEG

    tj = TurboJPEG()
    out = []
    for buf in Data(rec, None, 1).images:
        with contextlib.suppress(OSError):
            tj.decode_header(buf)
            out.append(buf)
            if len(out) == count:
                break
    return out


def one_pass(kind: str, rec: str, count: int, passes: int) -> int:
    """One thread decodes the images ``passes`` times: what ``--callgrind`` counts."""
    images = pass_images(rec, count)
    for _ in range(passes):
        decode_once(kind, images)
    print(f"{len(images)} images decoded {passes} times")
    return len(images)


def decode_once(kind: str, images: list[bytes]) -> None:
    """Each image decoded once by ``kind``'s decoder, on one thread."""
    if kind == "plain":
        from turbojpeg import TurboJPEG

        tj = TurboJPEG()
        for buf in images:
            tj.decode(buf)
    else:
        spec = (
            CropSpec(SIZE, SIZE, random_resized_crop=True, rand_mirror=True)
            if kind == "rrc"
            else CropSpec(SIZE, SIZE, resize=CENTRE["resize"])
        )
        draw = KeyedDraw(spec, 0, 0)
        out = np.empty((64, 3, SIZE, SIZE), np.uint8)
        with DecodePool(1, backend="native") as pool:
            for s in range(0, len(images), 64):
                batch = images[s : s + 64]
                records = np.arange(s, s + len(batch), dtype=np.int64)
                status = pool.decode_batch(batch, out, draw=draw, records=records, layout="NCHW")
                assert not np.any(status), pool.last_errors()


def callgrind(kind: str, rec: Path, count: int, folder: Path) -> dict:
    """Instructions per image inside ``PASSES[kind]``: a pass at steady state (two passes
    counted less one: recio's first decode of a JPEG in a process also checks its whole
    stream, NOTE [whole-stream check]), and the first pass."""
    counts = {}
    for passes in (1, 2):
        out = folder / f"callgrind.{kind}.{rec.stem}.{passes}.out"
        command = [
            "valgrind", "--tool=callgrind", "--collect-atstart=no",
            f"--toggle-collect={PASSES[kind]}", f"--callgrind-out-file={out}", sys.executable,
            __file__, "--one-pass", kind, "--rec", str(rec), "--images", str(count),
            "--passes", str(passes),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        found = re.search(r"^(\d+) images decoded", done.stdout, re.M)
        if done.returncode or not found:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stderr[-2000:]}")
        counts[passes] = int(re.search(r"^summary: (\d+)", out.read_text(), re.M).group(1))
    images = int(found.group(1))
    return {
        "images": images,
        "per_image": (counts[2] - counts[1]) / images,
        "first_pass_per_image": counts[1] / images,
    }


def count_instructions(rec: Path, optimized: Path | None, count: int, folder: Path) -> dict:
    """recio's decode call (RRC, centre crop; original, optimized) and the plain decode."""
    runs = {
        "recio RRC-224+flip decode call, original": ("rrc", rec),
        "recio centre crop 224 decode call, original": ("centre", rec),
        "plain decode (PyTurboJPEG C calls), original": ("plain", rec),
    }
    if optimized is not None:
        runs["recio RRC-224+flip decode call, optimized"] = ("rrc", optimized)
        runs["recio centre crop 224 decode call, optimized"] = ("centre", optimized)
    counts = {}
    for name, (kind, path) in runs.items():
        print(f"  callgrind: {name} ...")
        counts[name] = callgrind(kind, path, count, folder)
    return counts


# --- the command ----------------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", help="an image folder (its JPEG files are the corpus)")
    ap.add_argument("--count", type=int, default=800, help="images to make (default 800)")
    ap.add_argument("--seed", type=int, default=47, help="the made corpus's seed (default 47)")
    ap.add_argument("--workdir", help="keep the .rec, optimized copy and TAR here")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=2.0, help="a contestant's turn (2)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", help=f"some of {','.join(SHORT)} (the plain decode always runs)")
    ap.add_argument("--json", help="write the result here too")
    ap.add_argument("--callgrind", type=int, metavar="N", help="count instructions over N JPEGs")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    ap.add_argument("--one-pass", choices=sorted(PASSES), help=argparse.SUPPRESS)
    ap.add_argument("--rec", help=argparse.SUPPRESS)
    ap.add_argument("--images", type=int, default=200, help=argparse.SUPPRESS)
    ap.add_argument("--passes", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.only:
        unknown = set(args.only.split(",")) - set(SHORT)
        if unknown:
            ap.error(f"--only: unknown {sorted(unknown)}; of {','.join(SHORT)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.one_pass:
        one_pass(args.one_pass, args.rec, args.images, args.passes)
        return 0
    with contextlib.ExitStack() as stack:
        if args.workdir:
            work = Path(args.workdir)
            work.mkdir(parents=True, exist_ok=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-peers-")))
        rec, optimized, tar, why_not, files = prepare(args, work)
        sizes = []
        with DecodePool(1) as probe:
            data = Data(str(rec), None, 1)
            sizes = probe.image_sizes(data.images)
        setup = {
            "images": len(files),
            "mean_kb": float(np.mean(data.image_bytes)) / 1e3,
            "mean_mp": float(np.mean(sizes[:, 0] * sizes[:, 1])) / 1e6,
            "threads": args.threads,
            "batch": args.batch,
            "rounds": args.rounds,
            "seconds": args.seconds,
            "cpu": cpu_name(),
            "load_before": load_average(),
        }
        result = measure(args, rec, optimized, tar, why_not)
        setup["load_after"] = load_average()
        result = {"setup": setup, **result}
        report(result)
        if args.callgrind:
            result["callgrind"] = count_instructions(rec, optimized, args.callgrind, work)
            report_counts(result["callgrind"])
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


def cpu_name() -> str:
    """The CPU's model name, from /proc/cpuinfo where there is one."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "-"


if __name__ == "__main__":
    sys.exit(main())
