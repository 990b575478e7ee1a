"""Check the DALI stage on this machine: GPU output against the CPU reference, then speed.

    python tools/dali_check.py [--corpus DIR | --rec FILE.rec] [--cpu] [--seconds 5]

Packs a .rec from DIR (class folders of JPEGs, original bytes) or from synthetic images,
then (1) compares the recio-fed DALI stage (same crop windows) against ImageRecordIter,
(2) checks record ids against it across ranks and after a resume, (3) feeds corrupt images,
and (4) times recio → DALI against DALI's own readers.mxnet with the same graph. ``--cpu``
runs all of it as DALI CPU pipelines (the dry run the tests use). Exit status 0 = all passed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile

import numpy as np


def pack_folder(root: str, out_dir: str) -> str:
    from recio.records.format import IRHeader, pack
    from recio.records.recordio import MXIndexedRecordIO

    rec = os.path.join(out_dir, "check.rec")
    key = 0
    with MXIndexedRecordIO(os.path.join(out_dir, "check.idx"), rec, "w") as w:
        for label, name in enumerate(sorted(os.listdir(root))):
            folder = os.path.join(root, name)
            for fname in sorted(os.listdir(folder)):
                if fname.lower().endswith((".jpg", ".jpeg")):
                    with open(os.path.join(folder, fname), "rb") as f:
                        w.write_idx(key, pack(IRHeader(0, float(label), key, 0), f.read()))
                    key += 1
    return rec


def pack_synthetic(out_dir: str, n: int = 512, corrupt: tuple[int, ...] = ()) -> str:
    from PIL import Image

    from recio.records.format import IRHeader, pack
    from recio.records.recordio import MXIndexedRecordIO

    rng = np.random.default_rng(0)
    rec = os.path.join(out_dir, "synthetic.rec" if not corrupt else "corrupt.rec")
    with MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w") as w:
        for key in range(n):
            h, wd = int(rng.integers(200, 400)), int(rng.integers(200, 500))
            yy, xx = np.mgrid[0:h, 0:wd]
            img = np.stack([xx * 255 // wd, yy * 255 // h, (xx * yy) % 256], -1)
            img = np.clip(img + rng.integers(0, 30, img.shape), 0, 255).astype(np.uint8)
            buf = io.BytesIO()
            Image.fromarray(img).save(buf, format="JPEG", quality=90)
            body = buf.getvalue()
            if key in corrupt:
                body = body[: len(body) // 2]
            w.write_idx(key, pack(IRHeader(0, float(key % 10), key, 0), body))
    return rec


def check_correctness(rec: str, device: str) -> list[str]:
    from recio.dali import DALIImageRecordIter
    from recio.pipeline.iterator import ImageRecordIter

    failures = []
    kw = dict(data_shape=(3, 224, 224), batch_size=32, random_resized_crop=True, rand_mirror=True)
    kw.update(shuffle=True, seed=11, mean_r=124, mean_g=116, mean_b=104)
    kw.update(std_r=58, std_g=57, std_b=57)
    it = DALIImageRecordIter(rec, device=device, **kw)
    ref = ImageRecordIter(rec, **kw)
    worst = 0.0
    for i, (a, b) in enumerate(zip(it, ref, strict=False)):
        data = a.data.cpu().numpy() if hasattr(a.data, "cpu") else a.data
        diff = np.abs(data - b.data) * 57.5
        worst = max(worst, float(diff.mean()))
        if not np.array_equal(a.index, b.index):
            failures.append(f"batch {i}: record ids differ")
        if i == 4:
            break
    print(f"pixels: worst batch mean |diff| = {worst:.2f} levels (limit 6)")
    if worst >= 6:
        failures.append(f"pixels differ by {worst:.2f} levels on average")
    for part in range(2):  # ids per rank, and after a resume
        args = dict(kw, part_index=part, num_parts=2)
        it = DALIImageRecordIter(rec, device=device, **args)
        ref = ImageRecordIter(rec, **args)
        steps = len(ref)  # an epoch's steps: the resume is inside it, whatever the .rec
        if [b.index.tolist() for b in it] != [b.index.tolist() for b in ref]:
            failures.append(f"rank {part}: record ids differ from ImageRecordIter")
        state = {"epoch": 1, "step": min(3, steps - 1)}
        it.load_state_dict(state)
        ref.load_state_dict(state)
        if [b.index.tolist() for b in it] != [b.index.tolist() for b in ref]:
            failures.append(f"rank {part}: record ids differ after a resume")
    return failures


def check_corrupt(out_dir: str, device: str) -> list[str]:
    from recio.dali import DALIImageRecordIter

    rec = pack_synthetic(out_dir, n=40, corrupt=(5, 17))
    it = DALIImageRecordIter(rec, data_shape=(3, 64, 64), batch_size=8, device=device)
    n = sum(1 for _ in it)
    if n != 5 or set(it.stats.bad_records) != {5, 17}:
        return [f"corrupt records: {n} batches, bad {sorted(it.stats.bad_records)}"]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--corpus", help="folder of class folders of JPEGs")
    src.add_argument("--rec", help="an existing .rec (with .idx)")
    parser.add_argument("--cpu", action="store_true", help="DALI CPU pipelines (dry run)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=min(8, os.cpu_count() or 2))
    parser.add_argument("--target", type=float, default=0.95)
    args = parser.parse_args(argv)

    from recio.dali import gpu_count, resolve_device
    from recio.dali.bench import bench_pipelines

    device = "cpu" if args.cpu else resolve_device("gpu")
    print(f"device={device} cuda_devices={gpu_count()}")
    with tempfile.TemporaryDirectory() as tmp:
        rec = args.rec or (pack_folder(args.corpus, tmp) if args.corpus else pack_synthetic(tmp))
        failures = check_correctness(rec, device) + check_corrupt(tmp, device)
        print(
            "PASS correctness" if not failures else "FAIL correctness:\n  " + "\n  ".join(failures)
        )
        res = bench_pipelines(
            rec,
            args.batch_size if not args.cpu else 16,
            (224, 224),
            args.threads,
            args.seconds,
            rounds=3,
            device=device,
        )
    print(json.dumps(res["images_per_s"]))
    ratio = res["ratio_recio_vs_dali_mxnet"]
    verdict = "PASS" if ratio >= args.target else "BELOW TARGET"
    print(f"{verdict} speed: recio / dali_mxnet = {ratio:.3f} (target {args.target})")
    print(f"recio_windows / dali_mxnet = {res['ratio_recio_windows_vs_dali_mxnet']:.3f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
