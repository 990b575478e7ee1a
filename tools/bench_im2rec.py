#!/usr/bin/env python3
"""recio im2rec against MXNet's tools/im2rec.py, side by side on one image folder.

    python tools/bench_im2rec.py CORPUS --mxnet-python /path/to/venv/bin/python

Both tools pack the same ``.lst`` (made once by recio, ``--list --recursive``), in
alternating runs, each in a fresh output folder; the files are read once first so
both find them in the page cache, and recio's modules are byte-compiled first (as pip
leaves an installed package). Reported per configuration: the median of
``--repeat`` runs in images/s, from the wall time of the whole command (start-up
included, as a user sees it) and without the interpreter/import start-up (measured
alone), the ratio recio / MXNet, and the CPU time per image of all of each
tool's processes (steadier than wall time when other work shares the machine).

With ``--bounds`` each resize round also times, in this process, the image work of the same
``.lst`` with no per-image overhead at all (``--num-thread`` threads, the files already in
memory, no Python in the loop, no reading, framing or writing): the JPEGs im2rec hands to C
through recio's C transcode, or through libjpeg-turbo's own decode + encode (PyTurboJPEG:
YCbCr JPEGs to YUV planes and the resized planes back, with no resize and no DCT scaling;
others through RGB), plus a bare Pillow decode of every other image (PNGs, EXIF-rotated
JPEGs; their resize and encode are left out). Truncated JPEGs cost nothing (im2rec skips
them), nor do JPEGs TurboJPEG cannot open in the floor (CMYK with odd sampling). Each,
plus recio's start-up, gives a whole-command upper bound in images/s for recio on this
machine, set against MXNet's images/s of the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RECIO_IM2REC = os.path.join(HERE, "im2rec.py")
RECIO_PACKAGE = os.path.join(os.path.dirname(HERE), "recio")

CONFIGS = {
    "resize256": ["--resize", "256", "--quality", "90", "--num-thread", "2"],
    "pass-through": ["--pass-through", "--num-thread", "2"],
}


def mxnet_script(python: str) -> str:
    code = "import os, mxnet; print(os.path.join(os.path.dirname(mxnet.__file__), 'tools'))"
    folder = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True)
    return os.path.join(folder.stdout.strip().splitlines()[-1], "im2rec.py")


def timed(cmd: list[str]) -> float:
    """Wall seconds of ``cmd``; its CPU seconds (all processes) go to ``timed.cpu``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    timed.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):  # recio exits 1 when it skipped files
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-2000:]}")
    return elapsed


class Bounds:
    """In-process timings of the image work alone (see the module doc, ``--bounds``)."""

    def __init__(self, lst: str, root: str, resize: int, quality: int, threads: int) -> None:
        sys.path.insert(0, os.path.dirname(HERE))
        import numpy as np
        from turbojpeg import TJSAMP_420, TurboJPEG

        from recio import decode
        from recio.im2rec.encoder import JpegEncoder
        from recio.im2rec.transcode import EncodeOptions, SkipImage, _native_job, read_file
        from recio.records.format import parse_lst

        self.tj, self.sampling, self.quality = TurboJPEG(), TJSAMP_420, quality
        with open(lst) as f:
            entries = list(parse_lst(f.read().splitlines()))
        opts = EncodeOptions(resize=resize, quality=quality)
        jpegs, jobs, self.others = [], [], []
        for entry in entries:
            data = read_file(os.path.join(root, entry.path))
            try:
                job = _native_job(data, opts)  # what im2rec hands to C, as it decides
            except SkipImage:
                continue  # a broken JPEG: im2rec skips it after a header parse
            if job is None:
                self.others.append(data)
            else:
                jpegs.append(data)
                jobs.append(job)
        self.encoder = JpegEncoder(decode.DecodePool(threads, backend="native"))
        sizes = np.array([job.size for job in jobs], np.int32)
        status, small = self.encoder.transcode_jpeg(jpegs, sizes, quality=quality)
        keep = [i for i, st in enumerate(status) if st == 0]
        for i, st in enumerate(status):  # C refused it: Pillow's (truncated: skipped)
            if st not in (0, decode.STATUS_TRUNCATED):
                self.others.append(jpegs[i])
        self.jpegs = [jpegs[i] for i in keep]
        self.sizes = sizes[keep]
        # per JPEG, what libjpeg-turbo's floor encodes: YUV planes, or RGB for the rest
        self.targets = []
        for i in keep:
            w, h = (int(v) for v in sizes[i])
            try:
                self.tj.decode_to_yuv_planes(jpegs[i])
                self.targets.append(("yuv", self.tj.decode_to_yuv(small[i])[0], w, h))
                continue
            except (OSError, ValueError):  # CMYK: TurboJPEG has no planes for it
                pass
            try:
                self.tj.decode(jpegs[i])
                self.targets.append(("rgb", self.tj.decode(small[i]), w, h))
            except OSError:  # nor RGB for this one: it costs the floor nothing
                self.targets.append(("none", None, w, h))
        self.threads = threads

    def _threaded(self, work, n: int) -> float:
        from concurrent.futures import ThreadPoolExecutor

        start = time.perf_counter()
        with ThreadPoolExecutor(self.threads) as ex:
            list(ex.map(work, range(n), chunksize=16))
        return time.perf_counter() - start

    def _pillow_decodes(self) -> float:
        """Seconds to decode the other images alone (Pillow releases the GIL to decode)."""
        import io

        from PIL import Image

        def work(i: int) -> None:
            with contextlib.suppress(Exception):  # not an image: im2rec's check is cheaper
                Image.open(io.BytesIO(self.others[i])).load()

        return self._threaded(work, len(self.others))

    def recio_transcode(self) -> float:
        """Seconds for the list: recio's C transcode of the JPEGs, Pillow for the rest."""
        start = time.perf_counter()
        self.encoder.transcode_jpeg(self.jpegs, self.sizes, quality=self.quality)
        return time.perf_counter() - start + self._pillow_decodes()

    def libjpeg_floor(self) -> float:
        """Seconds for the list: decode + encode in libjpeg-turbo, Pillow for the rest."""
        from turbojpeg import TJPF_RGB

        def work(i: int) -> None:  # PyTurboJPEG's ctypes calls release the GIL
            kind, target, w, h = self.targets[i]
            if kind == "yuv":
                self.tj.decode_to_yuv_planes(self.jpegs[i])
                self.tj.encode_from_yuv(target, h, w, self.quality, self.sampling)
            elif kind == "rgb":
                self.tj.decode(self.jpegs[i], pixel_format=TJPF_RGB)
                self.tj.encode(target, self.quality, TJPF_RGB, self.sampling)

        return self._threaded(work, len(self.jpegs)) + self._pillow_decodes()


def count_records(idx: str) -> int:
    with open(idx) as f:
        return sum(1 for line in f if line.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", help="image folder with one sub-folder per class")
    parser.add_argument("--mxnet-python", required=True, help="python that can import mxnet")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool and configuration")
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--json", metavar="PATH", help="also write the results here")
    parser.add_argument("--workdir", help="scratch folder (default: a temporary one)")
    parser.add_argument(
        "--bounds", action="store_true", help="also time the least work (see above)"
    )
    args = parser.parse_args(argv)

    corpus = os.path.abspath(args.corpus)
    work = args.workdir or tempfile.mkdtemp(prefix="bench_im2rec.")
    os.makedirs(work, exist_ok=True)
    mx_script = mxnet_script(args.mxnet_python)
    tools = {
        "mxnet": [args.mxnet_python, mx_script],
        "recio": [sys.executable, RECIO_IM2REC],
    }
    # Start-up alone: interpreter plus each tool's imports.
    startup_cmds = {
        "mxnet": [args.mxnet_python, "-c", "import mxnet, cv2"],
        "recio": [sys.executable, RECIO_IM2REC, "--help"],
    }
    lst_dir = os.path.join(work, "list")
    os.makedirs(lst_dir, exist_ok=True)
    lst_prefix = os.path.join(lst_dir, "bench")
    subprocess.run(
        tools["recio"] + ["--list", "--recursive", "--quiet", lst_prefix, corpus], check=True
    )
    with open(lst_prefix + ".lst") as f:
        n_images = sum(1 for line in f if line.strip())
    # recio's modules byte-compiled, as pip or any first run leaves them (MXNet's are, by
    # pip): where PYTHONDONTWRITEBYTECODE is set, each run would recompile them (~35 ms).
    subprocess.run([sys.executable, "-m", "compileall", "-q", RECIO_PACKAGE], check=True)
    for dirpath, _, files in os.walk(corpus):  # warm the page cache
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                while f.read(1 << 20):
                    pass

    startup = {
        name: statistics.median(timed(cmd) for _ in range(3)) for name, cmd in startup_cmds.items()
    }
    results: dict = {
        "corpus": corpus,
        "images": n_images,
        "cpus": os.cpu_count(),
        "repeat": args.repeat,
        "startup_s": {k: round(v, 3) for k, v in startup.items()},
        "configs": {},
    }
    bounds = None
    if args.bounds and "resize256" in args.configs:
        cfg = CONFIGS["resize256"]
        opt = {k: int(v) for k, v in zip(cfg[::2], cfg[1::2], strict=True)}
        bounds = Bounds(
            lst_prefix + ".lst", corpus, opt["--resize"], opt["--quality"], opt["--num-thread"]
        )
    for config in args.configs:
        times: dict[str, list[float]] = {"mxnet": [], "recio": []}
        least: dict[str, list[float]] = {"recio_transcode": [], "libjpeg_floor": []}
        cpus: dict[str, list[float]] = {"mxnet": [], "recio": []}
        records: dict[str, int] = {}
        for rep in range(args.repeat):
            for name in ("mxnet", "recio") if rep % 2 == 0 else ("recio", "mxnet"):
                out = os.path.join(work, f"{config}-{name}")
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(out)
                shutil.copy(lst_prefix + ".lst", os.path.join(out, "bench.lst"))
                cmd = [*tools[name], *CONFIGS[config], os.path.join(out, "bench"), corpus]
                times[name].append(timed(cmd))
                cpus[name].append(timed.cpu)
                records[name] = count_records(os.path.join(out, "bench.idx"))
                shutil.rmtree(out)
            if bounds is not None and config == "resize256":
                least["recio_transcode"].append(bounds.recio_transcode())
                least["libjpeg_floor"].append(bounds.libjpeg_floor())
        row: dict = {"args": " ".join(CONFIGS[config]), "records": records}
        for name, ts in times.items():
            wall = statistics.median(ts)
            row[name] = {
                "runs_s": [round(t, 3) for t in ts],
                "median_s": round(wall, 3),
                "images_per_s": round(n_images / wall, 1),
                "images_per_s_without_startup": round(n_images / (wall - startup[name]), 1),
                # CPU time of all its processes: steadier than wall time on a shared machine
                "cpu_ms_per_image": round(1e3 * statistics.median(cpus[name]) / n_images, 3),
            }
        row["ratio"] = round(row["recio"]["images_per_s"] / row["mxnet"]["images_per_s"], 2)
        row["ratio_without_startup"] = round(
            row["recio"]["images_per_s_without_startup"]
            / row["mxnet"]["images_per_s_without_startup"],
            2,
        )
        if least["recio_transcode"]:
            row["bounds"] = {"jpegs": len(bounds.jpegs), "others": len(bounds.others)}
            mx_rate = row["mxnet"]["images_per_s"]
            for name, ts in least.items():
                seconds = statistics.median(ts)
                rate = n_images / (startup["recio"] + seconds)
                row["bounds"][name] = {
                    "seconds": round(seconds, 3),
                    "upper_bound_images_per_s": round(rate, 1),
                    "upper_bound_ratio": round(rate / mx_rate, 2),
                }
                print(
                    f"  bound {name:16s} {seconds:.2f} s of work + recio's start-up: "
                    f"{rate:7.1f} img/s = {rate / mx_rate:.2f}x MXNet's run",
                    flush=True,
                )
        results["configs"][config] = row
        print(
            f"{config:13s} mxnet {row['mxnet']['images_per_s']:7.1f} img/s   "
            f"recio {row['recio']['images_per_s']:7.1f} img/s   ratio {row['ratio']:.2f}x   "
            f"(without start-up: {row['mxnet']['images_per_s_without_startup']:.0f} vs "
            f"{row['recio']['images_per_s_without_startup']:.0f}, "
            f"{row['ratio_without_startup']:.2f}x)   CPU ms/image "
            f"{row['mxnet']['cpu_ms_per_image']:.2f} vs {row['recio']['cpu_ms_per_image']:.2f}   "
            f"records {records}",
            flush=True,
        )
    print(f"start-up: {results['startup_s']}; {n_images} images, {os.cpu_count()} CPUs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
