"""The built-in sample dataset: coloured shapes on noisy backgrounds, as JPEG files.

Small, learnable (the class is the shape) and varied in size, so it serves the
README's main job, the benchmark without arguments, and tests that need images.
"""

from __future__ import annotations

import os

import numpy as np
from PIL import Image, ImageDraw

from ..records.format import IRHeader, pack
from ..records.recordio import MXIndexedRecordIO

SHAPES = ("circle", "square", "triangle", "cross")
COLOURS = ((220, 40, 40), (40, 180, 60), (50, 80, 220), (230, 200, 30))


def sample_image(rng: np.random.Generator, label: int, size: tuple[int, int]) -> Image.Image:
    """One image of class ``label`` (the shape), with random colour, position and noise."""
    width, height = size
    yy, xx = np.mgrid[0:height, 0:width]
    base = rng.integers(40, 200, size=3)
    gradient = (xx / width * rng.integers(-60, 60) + yy / height * rng.integers(-60, 60))[..., None]
    noise = rng.normal(0, 12, size=(height, width, 3))
    pixels = np.clip(base + gradient + noise, 0, 255).astype(np.uint8)
    image = Image.fromarray(pixels)
    draw = ImageDraw.Draw(image)
    r = int(min(width, height) * rng.uniform(0.2, 0.35))
    cx = int(rng.integers(r, width - r))
    cy = int(rng.integers(r, height - r))
    colour = COLOURS[int(rng.integers(len(COLOURS)))]
    shape = SHAPES[label % len(SHAPES)]
    if shape == "circle":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=colour)
    elif shape == "square":
        draw.rectangle([cx - r, cy - r, cx + r, cy + r], fill=colour)
    elif shape == "triangle":
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=colour)
    else:
        w = max(2, r // 3)
        draw.rectangle([cx - r, cy - w, cx + r, cy + w], fill=colour)
        draw.rectangle([cx - w, cy - r, cx + w, cy + r], fill=colour)
    return image


def make_sample_folder(
    root: str,
    num_images: int = 400,
    *,
    num_classes: int = len(SHAPES),
    min_side: int = 160,
    max_side: int = 480,
    quality: int = 90,
    seed: int = 0,
) -> str:
    """Write ``num_images`` JPEGs as ``root/class_K/img_NNNNN.jpg`` (im2rec --recursive layout)."""
    rng = np.random.default_rng(seed)
    for i in range(num_images):
        label = i % num_classes
        folder = os.path.join(root, f"class_{label:02d}")
        os.makedirs(folder, exist_ok=True)
        size = tuple(int(v) for v in rng.integers(min_side, max_side + 1, size=2))
        image = sample_image(rng, label, size)
        image.save(os.path.join(folder, f"img_{i:05d}.jpg"), quality=quality)
    return root


def build_sample_rec(workdir: str, num_images: int = 400, seed: int = 0) -> str:
    """Make the sample image folder and pack it (original JPEG bytes) into workdir/sample.rec."""
    root = make_sample_folder(os.path.join(workdir, "images"), num_images, seed=seed)
    rec = os.path.join(workdir, "sample.rec")
    classes = sorted(os.listdir(root))
    with MXIndexedRecordIO(os.path.join(workdir, "sample.idx"), rec, "w") as writer:
        key = 0
        for label, name in enumerate(classes):
            for fname in sorted(os.listdir(os.path.join(root, name))):
                with open(os.path.join(root, name, fname), "rb") as f:
                    writer.write_idx(key, pack(IRHeader(0, float(label), key, 0), f.read()))
                key += 1
    return rec
