"""recio's resample + flip + store of RandomResizedCrop windows against OpenCV and Pillow.

    python tools/bench_resample.py CORPUS [--size 224] [--count 300] [--rounds 7]
        [--pillow-simd PYTHON] [--against OTHER_CHECKOUT] [--only NAME --passes N]

CORPUS is a folder of JPEGs (``python tools/make_corpus.py OUT``). Each JPEG gets the window
and flip ``recio bench`` draws for it (RandomResizedCrop(--size) + flip, seed 0, epoch 0) and
is decoded once, as the iterator decodes it: at the libjpeg DCT scale the pool picks for the
window (pow2), to RGB. The windows' pixels are then what every configuration works on, one
thread, per image:

* ``recio u8`` / ``recio f32``: recio's resample (bilinear, the fractional window), flip and
  store to uint8 NCHW, or to float32 NCHW normalised by ImageNet's mean and std
  (``recio._native.resample_windows``: the code a crop decode runs after its rows are read);
* ``cv2 linear u8`` / ``cv2 area u8`` / ``cv2 linear f32``: ``cv2.resize`` of the window's
  whole pixels (INTER_LINEAR, INTER_AREA), ``cv2.flip``, then the NCHW copy (``transpose``),
  or the float32 normalise (numpy, in place) and the NCHW copy;
* ``pillow u8``: ``Image.resize(BILINEAR, box=window)``, ``transpose(FLIP_LEFT_RIGHT)``, the
  three planes' bytes (NCHW);
* ``pillow-simd u8``: the same in another interpreter (``--pillow-simd``: a venv's python
  with pillow-simd installed), driven round by round over a pipe;
* ``against u8`` / ``against f32``: recio's, through another checkout's built extension
  (``--against``), in the same rounds: an A/B of two builds of the C code.

After one untimed pass of each (the outputs' pages faulted in), every configuration runs once
per round, in an order turned round each round; the summary is
the median CPU microseconds per image (the thread's CPU time: steadier than the wall clock on
a shared machine), the rounds' spread, and the ratio to ``recio u8`` / ``recio f32``.

For instruction counts, one configuration once under callgrind, counting inside recio's call
only::

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=rc_resample_window \\
        python tools/bench_resample.py CORPUS --only "recio u8" --passes 1

and divide the total by the windows (printed). For any configuration (OpenCV's wheel has no
symbols to toggle on), the whole process's count with ``--passes 3`` less ``--passes 1``,
no toggle, divided by twice the windows.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkouts import MEAN, STD, load_extension, without_lut_line  # noqa: E402

from recio.augment import CropSpec, KeyedDraw  # noqa: E402
from recio.decode import DecodePool  # noqa: E402
from recio.decode import pool as pool_module  # noqa: E402
from recio.decode.batch import DecodeJob  # noqa: E402
from recio.decode.options import DecodeOptions  # noqa: E402


def scale_num(cw: int, ch: int, size: int) -> int:
    """The pool's DCT scale (over 8) for a cw x ch window to size x size (pow2)."""
    for num in (1, 2, 4):
        if cw * num >= size * 8 and ch * num >= size * 8:
            return num
    return 8


def windows(corpus: Path, size: int, count: int) -> list[tuple[np.ndarray, tuple, bool]]:
    """Each JPEG's drawn window as decoded: (its whole pixels, the fractional box in them, flip),
    computed as native/decode_core.c's plan_crop does."""
    from turbojpeg import TJPF_RGB, TurboJPEG

    tj = TurboJPEG()
    jpegs = [p.read_bytes() for p in sorted(corpus.rglob("*.jpg"))]
    with DecodePool(1) as probe:
        sizes = probe.image_sizes(jpegs)
    spec = CropSpec(size, size, random_resized_crop=True, rand_mirror=True)
    crops, flips = KeyedDraw(spec, 0, 0).windows(sizes, np.arange(len(jpegs)))
    out = []
    for jpeg, (W, H), (x, y, w, h), flip in zip(jpegs, sizes, crops, flips, strict=True):
        num = scale_num(int(w), int(h), size)
        try:
            rgb = tj.decode(
                jpeg,
                pixel_format=TJPF_RGB,
                scaling_factor=(num // math.gcd(num, 8), 8 // math.gcd(num, 8)),
            )
        except OSError:  # TurboJPEG refuses CMYK
            continue
        if rgb.ndim != 3 or rgb.shape[2] != 3:
            continue
        SH, SW = rgb.shape[:2]
        fx, fy = SW / W, SH / H
        bx0, bx1, by0, by1 = x * fx, (x + w) * fx, y * fy, (y + h) * fy
        rx0, ry0 = min(math.floor(bx0), SW - 1), min(math.floor(by0), SH - 1)
        rx1, ry1 = max(min(math.ceil(bx1), SW), rx0 + 1), max(min(math.ceil(by1), SH), ry0 + 1)
        pixels = np.ascontiguousarray(rgb[ry0:ry1, rx0:rx1])
        box = tuple(float(v) for v in (bx0 - rx0, by0 - ry0, bx1 - rx0, by1 - ry0))
        out.append((pixels, box, bool(flip)))
        if len(out) == count:
            break
    return out


def recio_runner(items: list, size: int, dtype: type, extension=None) -> Callable[[], int]:
    """recio's resample + flip + store of every window, one call (one worker, this thread),
    through ``extension`` (another build's recio._native; None: this checkout's)."""
    native = extension or pool_module._native
    n = len(items)
    out = np.empty((n, 3, size, size), dtype)
    norm = {} if dtype == np.uint8 else {"mean": MEAN, "std": STD}
    options = DecodeOptions.of(None, {"layout": "NCHW", **norm})
    job = DecodeJob.build(n, out, None, None, None, None, options)
    saved, pool_module._native = pool_module._native, native  # its own JobOptions
    try:
        with DecodePool(1) as pool:
            try:
                native_options = pool.job_options(job)
            except TypeError:  # a build whose JobOptions takes no lut_line
                pool_module._native = without_lut_line(native)
                native_options = pool.job_options(job)
    finally:
        pool_module._native = saved
    images = [p for p, _, _ in items]
    sizes = np.array([(p.shape[1], p.shape[0]) for p in images], np.int32)
    boxes = np.array([b for _, b, _ in items], np.float64)
    flips = np.array([f for _, _, f in items], np.uint8)

    def run() -> int:
        native.resample_windows(images, sizes, boxes, flips, out, native_options)
        return n

    return run


def cv2_runner(items: list, size: int, interp: str, dtype: type) -> Callable[[], int]:
    """cv2.resize of each window's whole pixels, cv2.flip, the NCHW copy (and normalise)."""
    import cv2

    cv2.setNumThreads(1)
    flag = {"linear": cv2.INTER_LINEAR, "area": cv2.INTER_AREA}[interp]
    out = np.empty((len(items), 3, size, size), dtype)
    mean = np.array(MEAN, np.float32)
    inv_std = (1 / np.array(STD)).astype(np.float32)
    scratch = np.empty((size, size, 3), np.float32)

    def run() -> int:
        for i, (pixels, _, flip) in enumerate(items):
            img = cv2.resize(pixels, (size, size), interpolation=flag)
            if flip:
                img = cv2.flip(img, 1)
            if dtype == np.uint8:
                out[i] = img.transpose(2, 0, 1)
            else:
                np.subtract(img, mean, out=scratch)
                np.multiply(scratch, inv_std, out=scratch)
                out[i] = scratch.transpose(2, 0, 1)
        return len(items)

    return run


PILLOW_LOOP = """
def make_run(items, size):
    from PIL import Image
    images = [(Image.frombuffer("RGB", (w, h), data, "raw", "RGB", 0, 1), box, flip)
              for data, w, h, box, flip in items]
    def run():
        for img, box, flip in images:
            r = img.resize((size, size), Image.Resampling.BILINEAR, box=box)
            if flip:
                r = r.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            b"".join(band.tobytes() for band in r.split())
        return len(images)
    return run
"""

PILLOW_CHILD = (
    PILLOW_LOOP
    + """
import pickle, sys, time
items, size = pickle.load(open(sys.argv[1], "rb"))
run = make_run(items, size)
import PIL
print(PIL.__version__, flush=True)
for line in sys.stdin:
    t = time.thread_time()
    n = run()
    print(time.thread_time() - t, n, flush=True)
"""
)


def pillow_items(items: list) -> list:
    return [(p.tobytes(), p.shape[1], p.shape[0], box, flip) for p, box, flip in items]


def pillow_runner(items: list, size: int) -> Callable[[], int]:
    """Pillow's resize with the fractional box, flip, the three planes' bytes."""
    scope: dict = {}
    exec(PILLOW_LOOP, scope)
    return scope["make_run"](pillow_items(items), size)


class PillowSimd:
    """Pillow-SIMD in another interpreter: one pass per line written, its seconds read back."""

    def __init__(self, python: str, items: list, size: int, folder: Path) -> None:
        import pickle

        data = folder / "items.pickle"
        data.write_bytes(pickle.dumps((pillow_items(items), size)))
        self.proc = subprocess.Popen(
            [python, "-c", PILLOW_CHILD, str(data)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.version = self.proc.stdout.readline().strip()

    def seconds(self) -> tuple[float, int]:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        seconds, n = self.proc.stdout.readline().split()
        return float(seconds), int(n)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path, help="folder of JPEGs (tools/make_corpus.py)")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--count", type=int, default=300, help="windows (default 300)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--pillow-simd", help="a python with pillow-simd installed")
    ap.add_argument("--against", type=Path, help="another checkout with its extension built")
    ap.add_argument("--only", help="run just this configuration (for callgrind)")
    ap.add_argument("--passes", type=int, default=1, help="with --only: passes, no timing")
    ap.add_argument("--json", type=Path, help="write the medians here")
    args = ap.parse_args(argv)

    items = windows(args.corpus, args.size, args.count)
    mean_w = statistics.mean((b[2] - b[0]) for _, b, _ in items)
    mean_h = statistics.mean((b[3] - b[1]) for _, b, _ in items)
    print(
        f"{len(items)} windows, {mean_w:.0f}x{mean_h:.0f} decoded pixels mean, "
        f"to {args.size}x{args.size}, flipped {sum(f for _, _, f in items)}"
    )
    runners: dict[str, Callable[[], int]] = {
        "recio u8": recio_runner(items, args.size, np.uint8),
        "recio f32": recio_runner(items, args.size, np.float32),
    }
    if args.against:
        other = load_extension(args.against)
        runners["against u8"] = recio_runner(items, args.size, np.uint8, other)
        runners["against f32"] = recio_runner(items, args.size, np.float32, other)
    try:
        import cv2

        runners["cv2 linear u8"] = cv2_runner(items, args.size, "linear", np.uint8)
        runners["cv2 area u8"] = cv2_runner(items, args.size, "area", np.uint8)
        runners["cv2 linear f32"] = cv2_runner(items, args.size, "linear", np.float32)
        print(f"OpenCV {cv2.__version__}")
    except ImportError:
        print("OpenCV not installed (pip install opencv-python-headless): left out")
    runners["pillow u8"] = pillow_runner(items, args.size)
    import PIL

    print(f"Pillow {PIL.__version__}")
    if args.only:
        for _ in range(args.passes):
            n = runners[args.only]()
        print(f"{args.only}: {n} windows x {args.passes} passes")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        simd = (
            PillowSimd(args.pillow_simd, items, args.size, Path(tmp)) if args.pillow_simd else None
        )
        if simd:
            print(f"Pillow-SIMD {simd.version} ({args.pillow_simd})")
        names = [*runners, *(["pillow-simd u8"] if simd else [])]
        per_image: dict[str, list[float]] = {name: [] for name in names}
        for name in names:  # one pass untimed: the outputs' pages faulted in, the code warm
            simd.seconds() if name == "pillow-simd u8" else runners[name]()
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]
            for name in order:
                if name == "pillow-simd u8":
                    seconds, n = simd.seconds()
                else:
                    t = time.thread_time()
                    n = runners[name]()
                    seconds = time.thread_time() - t
                per_image[name].append(seconds / n * 1e6)
        if simd:
            simd.close()
    medians = {name: statistics.median(v) for name, v in per_image.items()}
    print(f"\n{'configuration':<16} {'us/image':>9} {'spread':>8} {'x recio':>8}")
    for name in names:
        base = medians["recio f32" if name.endswith("f32") else "recio u8"]
        spread = (max(per_image[name]) - min(per_image[name])) / medians[name]
        print(f"{name:<16} {medians[name]:9.1f} {spread:8.0%} {medians[name] / base:8.2f}")
    if args.json:
        args.json.write_text(json.dumps(medians, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
