"""Make tests/data/mxnet_colour/: MXNet 1.9.1's colour augmentation, for recio's tests.

Run with an MXNet 1.9.1 environment (numpy and Pillow beside it)::

    python tools/mxnet_colour_reference.py OUT_DIR

Writes, from PNG records (lossless: MXNet sees exactly the pixels written):

- ``draws.npz``: 400 copies of a 32x32 image, left half (100, 150, 200), right half grey 60,
  through ``ImageRecordIter`` once per colour setting; for each setting the output pixel of
  each image at the left (0, 0) and the right (0, 20) half, float32 (400, 3, 2). Their
  distributions are what recio's draws are compared with (MXNet's random draws cannot be
  repeated, only their distribution).
- ``hls.npz``: 8 images of random pixels (16x16) and MXNet's output with ``random_s=1``:
  MXNet draws an HLS shift of int(U(-1, 1)) = 0, so this is its HLS round trip alone.
- ``mean.nd``: a mean image (3, 16, 16) as ``mx.nd.save`` writes it (R 10, G 20, B 30,
  pixel (0, 0) of R 5), with ``mean.npz`` the 8 images above through ``mean_img`` with
  ``scale=0.5`` and ``std_r/g/b=2``.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import mxnet as mx
import numpy as np
from PIL import Image

SETTINGS = {
    "brightness": {"brightness": 0.4},
    "contrast": {"contrast": 0.4},
    "saturation": {"saturation": 0.4},
    "pca_noise": {"pca_noise": 0.1},
    "max_random_contrast": {"max_random_contrast": 0.3},
    "max_random_illumination": {"max_random_illumination": 20.0},
    "random_h": {"random_h": 20},
    "random_s": {"random_s": 40},
    "random_l": {"random_l": 30},
    "jitter": {"brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "pca_noise": 0.1},
}


def write_rec(stem: Path, images: list[np.ndarray]) -> None:
    w = mx.recordio.MXIndexedRecordIO(f"{stem}.idx", f"{stem}.rec", "w")
    for i, a in enumerate(images):
        b = io.BytesIO()
        Image.fromarray(a).save(b, "PNG")
        w.write_idx(i, mx.recordio.pack(mx.recordio.IRHeader(0, float(i), i, 0), b.getvalue()))
    w.close()


def run(stem: Path, shape, n: int, **kw) -> np.ndarray:
    it = mx.io.ImageRecordIter(path_imgrec=f"{stem}.rec", path_imgidx=f"{stem}.idx",
                               data_shape=shape, batch_size=n, preprocess_threads=1,
                               verbose=False, **kw)  # fmt: skip
    return it.next().data[0].asnumpy()


def two_tone() -> np.ndarray:
    a = np.zeros((32, 32, 3), np.uint8)
    a[:, :16] = (100, 150, 200)
    a[:, 16:] = 60
    return a


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "_tmp"
    tmp.mkdir(exist_ok=True)
    n = 400
    write_rec(tmp / "tone", [two_tone()] * n)
    draws = {}
    for name, kw in SETTINGS.items():
        d = run(tmp / "tone", (3, 32, 32), n, **kw)
        draws[name] = d[:, :, 0, [0, 20]].astype(np.float32)
    np.savez_compressed(out / "draws.npz", **draws, settings=json.dumps(SETTINGS),
                        mxnet_version=mx.__version__)  # fmt: skip

    rng = np.random.default_rng(1)
    images = [rng.integers(0, 256, (16, 16, 3), dtype=np.uint8) for _ in range(8)]
    write_rec(tmp / "random", images)
    hls = run(tmp / "random", (3, 16, 16), 8, random_s=1).transpose(0, 2, 3, 1)
    np.savez_compressed(out / "hls.npz", source=np.stack(images), mxnet=hls.astype(np.uint8))

    m = np.zeros((3, 16, 16), np.float32)
    m[0], m[1], m[2] = 10, 20, 30
    m[0, 0, 0] = 5
    mx.nd.save(str(out / "mean.nd"), {"mean_img": mx.nd.array(m)})
    got = run(tmp / "random", (3, 16, 16), 8, mean_img=str(out / "mean.nd"), scale=0.5,
              std_r=2, std_g=2, std_b=2)  # fmt: skip
    np.savez_compressed(out / "mean.npz", mxnet=got.astype(np.float32))
    for p in tmp.iterdir():
        p.unlink()
    tmp.rmdir()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
