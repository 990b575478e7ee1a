"""The GPU path's check, run by tools/gpu_check.sh: pixels, then speed, into one JSON file.

    python tools/gpu_check.py --out DIR [--device cuda|cpu] [--images 512] [--seconds 8]
        [--batch 64]

Makes its corpus here (synthetic ImageNet-sized JPEGs, packed twice: as they are, and
losslessly re-encoded with restart markers), then measures:

(a) pixels: recio.gpu on ``--device`` against recio's CPU ImageRecordIter (the same windows
    and flips), and recio.gpu's cut against its whole-JPEG decode;
(b) images/s and CPU seconds per image (this process's user + system time) of recio →
    torchvision decode (cut, and whole), of torchvision's own decode_jpeg on the JPEG files
    (an ImageFolder-style baseline: file reads, batched decode, the same crop and resize),
    and of recio's CPU iterator on all cores, for RandomResizedCrop-224 + flip and the
    256 → 224 centre crop;
(c) the DALI stage's rows where ``import nvidia.dali`` works.

Writes DIR/gpu_check.json and prints a table. Exit status 0 when the pixel checks pass.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import resource
import sys
import time

import numpy as np

CROPS = {
    "rrc224_flip": dict(random_resized_crop=True, rand_mirror=True),
    "centre224": dict(resize=256),
}
NORMALIZE = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.4, std_g=57.1, std_b=57.4)
STD = np.array([58.4, 57.1, 57.4], dtype=np.float32).reshape(1, 3, 1, 1)
AREA, ASPECT = (0.08, 1.0), (3 / 4, 4 / 3)  # RandomResizedCrop's defaults, as recio's


def make_corpus(root: str, n: int) -> dict[str, str]:
    """JPEG files (root/images), and .rec files of them: plain and restart-marked."""
    from recio import decode
    from recio.bench.sample import sample_image
    from recio.im2rec import JpegEncoder
    from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack

    rng = np.random.default_rng(0)
    files = os.path.join(root, "images")
    os.makedirs(files, exist_ok=True)
    bodies = []
    for k in range(n):
        size = (int(rng.integers(375, 501)), int(rng.integers(333, 501)))
        out = io.BytesIO()
        sample_image(rng, k % 10, size).convert("RGB").save(out, "JPEG", quality=90)
        bodies.append(out.getvalue())
        with open(os.path.join(files, f"{k:05d}.jpg"), "wb") as f:
            f.write(bodies[-1])
    with decode.DecodePool(os.cpu_count()) as pool:
        status, marked = JpegEncoder(pool).optimize_jpeg(bodies, restart=1)
    assert not status.any(), "the lossless re-encode failed"
    recs = {}
    for name, items in (("plain", bodies), ("marked", marked)):
        rec = os.path.join(root, f"{name}.rec")
        with MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w") as w:
            for key, body in enumerate(items):
                w.write_idx(key, pack(IRHeader(0, float(key % 10), key, 0), body))
        recs[name] = rec
    recs["files"] = files
    return recs


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(batches, seconds: float, sync) -> dict[str, float]:
    """images/s and CPU s/image over ``seconds`` of ``batches`` (after one warm-up batch)."""
    it = iter(batches)
    next(it)
    sync()
    images, start, cpu = 0, time.perf_counter(), cpu_seconds()
    while time.perf_counter() - start < seconds:
        images += next(it)
    sync()
    wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    return {"images": images, "img_per_s": images / wall, "cpu_s_per_img": cpu / max(images, 1)}


def forever(make):
    """Batch sizes of an iterator, epoch after epoch."""
    while True:
        with make() as it:
            for batch in it:
                yield len(batch.index) - batch.pad


def torchvision_baseline(files: str, crop: dict, device, batch: int, seconds: float, sync):
    """torchvision's own path: read the files, decode_jpeg(list, device), crop and resize."""
    import torch
    import torchvision.io as tvio
    from torchvision.transforms import RandomResizedCrop

    from recio.gpu import normalise, resize_crops

    names = sorted(os.path.join(files, f) for f in os.listdir(files))
    mean, std = (123.68, 116.28, 103.53), (58.4, 57.1, 57.4)
    rng = np.random.default_rng(0)

    def batches():
        while True:
            for at in range(0, len(names) - batch + 1, batch):
                data = [tvio.read_file(name) for name in names[at : at + batch]]
                images = tvio.decode_jpeg(data, mode=tvio.ImageReadMode.RGB, device=device)
                windows = []
                for image in images:
                    h, w = image.shape[-2:]
                    if crop.get("random_resized_crop"):
                        y, x, ch, cw = RandomResizedCrop.get_params(
                            image, (0.08, 1), (3 / 4, 4 / 3)
                        )
                    else:  # shorter side to 256, the centre 224 of it
                        side = min(h, w) * 224 / 256
                        ch = cw = int(side)
                        y, x = (h - ch) // 2, (w - cw) // 2
                    windows.append((x, y, cw, ch))
                out = torch.empty((len(images), 3, 224, 224), device=device)
                flips = rng.random(len(images)) < 0.5 if crop.get("rand_mirror") else [0] * batch
                resize_crops(images, windows, [bool(f) for f in flips], out)
                normalise(out, mean, std, 1.0, False)
                yield len(images)

    return timed(batches(), seconds, sync)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    import tempfile

    import torch

    import recio
    from recio import ImageRecordIter as CpuIter
    from recio.gpu import ImageRecordIter
    from recio.gpu.device import torchvision_io

    device = torch.device(args.device)
    if device.type == "cpu":  # the dry run: torch's intra-op threads spin against the pool's
        torch.set_num_threads(1)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    os.makedirs(args.out, exist_ok=True)
    work = args.workdir or tempfile.mkdtemp(prefix="recio-gpu-check-")
    start = time.perf_counter()
    recs = make_corpus(work, args.images)
    tv = torchvision_io()
    report = {
        "interpreter": f"{platform.python_implementation()} {platform.python_version()} "
        f"({sys.executable})",
        "recio": recio.__version__,
        "torch": torch.__version__,
        "torchvision": None if tv is None else __import__("torchvision").__version__,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "cpus": os.cpu_count(),
        "images": args.images,
        "corpus_s": round(time.perf_counter() - start, 1),
        "pixels": {},
        "rows": [],
    }
    common = dict(data_shape=(3, 224, 224), batch_size=args.batch, seed=1, **NORMALIZE)
    ok = True
    # (a) pixels, on the first 2 batches of each crop
    for name, crop in CROPS.items():
        kw = {**common, **crop}
        gpu = ImageRecordIter(recs["marked"], device=device, **kw)
        whole = ImageRecordIter(recs["marked"], device=device, cut=False, **kw)
        ref = CpuIter(recs["marked"], preprocess_threads=os.cpu_count(), **kw)
        diffs, cut_diffs = [], []
        with gpu, whole, ref:
            for _, a, b, c in zip(range(2), gpu, ref, whole, strict=False):
                assert np.array_equal(a.index, b.index)
                levels = (a.data.cpu().numpy() - b.data) * STD  # back to levels of 255
                diffs.append(np.abs(levels))
                cut_diffs.append(float((a.data - c.data).abs().max()))
        diff = np.concatenate(diffs)
        report["pixels"][name] = {
            "max_levels": float(diff.max()),
            "mean_levels": float(diff.mean()),
            "p99_levels": float(np.percentile(diff, 99)),
            "cut_vs_whole_max": max(cut_diffs),
        }
        ok &= float(diff.mean()) < 2.0 and max(cut_diffs) == 0.0
    # (b) speed
    decoder = "torchvision" if tv is not None else "pillow"
    for name, crop in CROPS.items():
        kw = {**common, **crop, "shuffle": True}
        rows = {
            f"recio -> {decoder} cut": lambda kw=kw: ImageRecordIter(
                recs["marked"], device=device, **kw
            ),
            f"recio -> {decoder} whole": lambda kw=kw: ImageRecordIter(
                recs["plain"], device=device, cut=False, **kw
            ),
            "recio CPU iterator (all cores)": lambda kw=kw: CpuIter(
                recs["plain"], preprocess_threads=os.cpu_count(), **kw
            ),
            "recio CPU iterator, restart-marked": lambda kw=kw: CpuIter(
                recs["marked"], preprocess_threads=os.cpu_count(), **kw
            ),
        }
        for label, make in rows.items():
            row = timed(forever(make), args.seconds, sync)
            report["rows"].append({"crop": name, "path": label, **row})
        if tv is not None:
            row = torchvision_baseline(recs["files"], crop, device, args.batch, args.seconds, sync)
            report["rows"].append({"crop": name, "path": "torchvision decode_jpeg, files", **row})
    # (c) DALI, where it imports
    try:
        import nvidia.dali  # noqa: F401

        from recio.dali import DALIImageRecordIter

        dali_device = "gpu" if device.type == "cuda" else "cpu"
        for name, crop in CROPS.items():
            kw = {**common, **crop, "shuffle": True}
            row = timed(
                forever(lambda kw=kw: DALIImageRecordIter(recs["plain"], device=dali_device, **kw)),
                args.seconds,
                sync,
            )
            report["rows"].append({"crop": name, "path": f"recio -> DALI ({dali_device})", **row})
    except ImportError:
        report["dali"] = "not importable: no DALI rows"
    report["total_s"] = round(time.perf_counter() - start, 1)
    report["pixels_ok"] = bool(ok)
    with open(os.path.join(args.out, "gpu_check.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"{report['interpreter']}; torch {report['torch']}, device {report['device']}")
    for name, p in report["pixels"].items():
        print(f"pixels {name}: {p}")
    for r in report["rows"]:
        print(f"{r['crop']:12} {r['path']:40} {r['img_per_s']:9.1f} img/s "
              f"{r['cpu_s_per_img'] * 1e3:8.2f} ms CPU/img")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
