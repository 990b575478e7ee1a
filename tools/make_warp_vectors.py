"""Makes tests/data/warp/mxnet_warp.npz: MXNet 1.9.1's ImageRecordIter output for the geometry.

Three small synthetic images (smooth gradients, edges and mild noise), each stored as a PNG
(lossless: both sides decode the same pixels) and as a JPEG (quality 95), are packed into a
.rec; MXNet's ImageRecordIter reads it once per deterministic setting (rotate, pad with
fill_value, inter_method 0-4 with resize, a fixed scale, a fixed square crop, resize with
rotate) and its uint8 output is stored with the settings and the encoded images.
tests/augment/test_geometry.py decodes the same bytes with recio and compares.

Usage (MXNet needs its own Python, with numpy 1.x)::

    python tools/make_warp_vectors.py --mxnet-python PATH/TO/mxnet-venv/bin/python
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "warp" / "mxnet_warp.npz"
SIZES = [(40, 30), (30, 44), (36, 36)]  # width, height

# name -> (data_shape (C, H, W), ImageRecordIter keywords); every one deterministic.
SETTINGS: dict[str, tuple[tuple[int, int, int], dict]] = {
    "rotate30": ((3, 24, 24), {"rotate": 30}),
    **{f"rotate30_inter{m}": ((3, 24, 24), {"rotate": 30, "inter_method": m}) for m in range(5)},
    "pad4_fill17": ((3, 36, 36), {"pad": 4, "fill_value": 17}),
    **{f"resize20_inter{m}": ((3, 18, 18), {"resize": 20, "inter_method": m}) for m in range(5)},
    **{f"resize56_inter{m}": ((3, 48, 48), {"resize": 56, "inter_method": m}) for m in range(5)},
    "resize15_inter3": ((3, 14, 14), {"resize": 15, "inter_method": 3}),  # whole 2x: fast area
    **{
        f"{s}_inter9": (shape, {**kw, "inter_method": 9})
        for s, shape, kw in [
            ("resize20", (3, 18, 18), {"resize": 20}),
            ("resize56", (3, 48, 48), {"resize": 56}),
            ("rotate30", (3, 24, 24), {"rotate": 30}),
        ]
    },
    "scale075": ((3, 20, 20), {"min_random_scale": 0.75, "max_random_scale": 0.75}),
    "crop24_to16": ((3, 16, 16), {"min_crop_size": 24, "max_crop_size": 24}),
    "resize24_rotate15": ((3, 20, 20), {"resize": 24, "rotate": 15}),
}

MXNET_SCRIPT = r"""
import json, re, sys
import numpy as np
import mxnet as mx
rec, idx, n, settings, out = sys.argv[1:6]
results = {}
for name, (shape, kwargs) in json.loads(settings).items():
    try:
        it = mx.io.ImageRecordIter(path_imgrec=rec, path_imgidx=idx, data_shape=tuple(shape),
            batch_size=int(n), shuffle=False, preprocess_threads=1, dtype="uint8", **kwargs)
        data = it.next().data[0].asnumpy()
        np.save(f"{out}/{name}.npy", data.transpose(0, 2, 3, 1).astype(np.uint8))
        results[name] = "ok"
    except Exception as e:
        lines = [l for l in str(e).splitlines() if "Check failed" in l] or str(e).splitlines()
        text = re.sub(r"\[[0-9:]+\] ", "", lines[0].strip())  # (MXNet's log time)
        results[name] = f"{type(e).__name__}: {text[:300]}"
print(json.dumps({"results": results, "mxnet": mx.__version__, "numpy": np.__version__}))
"""


def images() -> list[np.ndarray]:
    """The test images: gradients, a disc and a bar (sharp edges), and mild noise."""
    rng = np.random.default_rng(20)
    out = []
    for w, h in SIZES:
        y, x = np.mgrid[0:h, 0:w].astype(np.float64)
        r = 255 * x / (w - 1)
        g = 255 * y / (h - 1)
        b = np.where((x - w / 2) ** 2 + (y - h / 2) ** 2 < (min(w, h) / 3) ** 2, 230.0, 40.0)
        b[:, w // 5 : w // 5 + 3] = 255
        a = np.stack([r, g, b], -1) + rng.normal(0, 6, (h, w, 3))
        out.append(np.clip(np.rint(a), 0, 255).astype(np.uint8))
    return out


def encode(pixels: np.ndarray, fmt: str) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    return buf.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mxnet-python", required=True, help="a Python with mxnet 1.9.1")
    args = parser.parse_args()
    arrays: dict[str, np.ndarray] = {}
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("PNG", "JPEG"):
            encoded = [encode(p, fmt) for p in images()]
            for i, data in enumerate(encoded):
                arrays[f"{fmt.lower()}_{i}"] = np.frombuffer(data, dtype=np.uint8)
            rec, idx = f"{tmp}/{fmt}.rec", f"{tmp}/{fmt}.idx"
            with MXIndexedRecordIO(idx, rec, "w") as w:
                for i, data in enumerate(encoded):
                    w.write_idx(i, pack(IRHeader(0, float(i), i, 0), data))
            out = Path(tmp) / fmt
            out.mkdir()
            cmd = [args.mxnet_python, "-c", MXNET_SCRIPT, rec, idx, str(len(encoded))]
            cmd += [json.dumps(SETTINGS), str(out)]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
            runs[fmt] = json.loads(done.stdout.strip().splitlines()[-1])
            for name, result in runs[fmt]["results"].items():
                if result == "ok":
                    arrays[f"out_{name}_{fmt.lower()}"] = np.load(out / f"{name}.npy")
    meta = {
        "settings": SETTINGS,
        "sizes": SIZES,
        "mxnet": runs["PNG"]["mxnet"],
        "numpy": runs["PNG"]["numpy"],
        "results": {fmt: run["results"] for fmt, run in runs.items()},
    }
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **arrays)
    print(json.dumps(meta["results"], indent=1))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
