#!/usr/bin/env python3
"""Build recio's benchmark corpus: a deterministic, ImageNet-like folder of photo-like JPEGs.

    python tools/make_corpus.py OUT [--seed 0] [--count 2000] [--classes 10] [--jobs 1]

OUT gets one folder per class, the layout ``im2rec --list --recursive`` and torchvision's
ImageFolder read, and a MANIFEST.tsv (one row per file: relpath, class, width, height,
mode, format, bytes, sha256)::

    OUT/class_00/img_00000.jpg
    OUT/class_01/img_00001.jpg
    ...
    OUT/MANIFEST.tsv

Image ``i`` goes to class ``i % classes``. What the files are like (defaults):

* size: shorter side drawn from a normal around 375 px (sd 60, clipped to 300-500), aspect
  ratio log-uniform between 3:4 and 4:3, portrait or landscape: about 0.17 MP on average,
  like ImageNet's training set.
* content: synthetic "photos" made with numpy and Pillow only: a two-colour background
  blended along a soft gradient, with large-scale lighting and colour variation and a
  1/f ("pink") noise texture, which has the spectrum of natural images; six to fifteen
  overlapping objects (ellipses, polygons, boxes, blobs) with anti-aliased edges and
  their own colour, shading and texture (some striped, the rearmost often out of focus);
  a few thin lines; vignetting; in-camera unsharp masking, a white-balance shift and
  luminance grain. JPEGs come out at about 3.4 bits/pixel at quality 90, ~70 KB each,
  close to real photos (ImageNet: ~4 bits/pixel), so decode costs are realistic; flat
  or gradient-only images give 0.2-0.5 bits/pixel and decode about twice as fast.
* encoding: baseline JPEG, quality 90, 4:2:0 chroma subsampling, no optimised Huffman
  tables, not progressive.
* oddities every real dataset has: about 2 % PNG files (RGB), two greyscale JPEGs
  (1 component) and one CMYK JPEG (4 components, Adobe marker: libjpeg-turbo's TurboJPEG
  API refuses it, libjpeg, Pillow and OpenCV decode it). Which indices get them is drawn
  from the seed.

Determinism: every image is drawn from its own generator seeded with (seed, index), so
image ``i`` does not depend on ``--count``, ``--jobs`` or any other image. The same seed
gives byte-identical files with the same numpy, Pillow, libjpeg(-turbo) and zlib versions;
MANIFEST.tsv holds each file's sha256 to check a rebuild against.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import io
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

# Stream tags mixed into the seed, so the choices below never share random numbers.
_IMAGE, _SPECIALS, _CLASS = 1, 2, 3


@dataclass(frozen=True)
class Options:
    seed: int = 0
    count: int = 2000
    classes: int = 10
    quality: int = 90
    png_fraction: float = 0.02
    gray: int = 2
    cmyk: int = 1


# --- geometry ---------------------------------------------------------------------------


def draw_size(rng: np.random.Generator) -> tuple[int, int]:
    """(width, height): ImageNet-like shorter side and aspect ratio."""
    short = int(round(float(np.clip(rng.normal(375.0, 60.0), 300.0, 500.0))))
    ratio = float(np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3))))
    if ratio >= 1.0:
        return int(round(short * ratio)), short
    return short, int(round(short / ratio))


@functools.lru_cache(maxsize=4)
def _log_frequency(h: int, w: int) -> np.ndarray:
    """log |f| on the rfft2 grid of an HxW field (the DC term set to 0: it is zeroed)."""
    fy = np.fft.fftfreq(h).astype(np.float32)[:, None]
    fx = np.fft.rfftfreq(w).astype(np.float32)[None, :]
    f2 = fx * fx + fy * fy
    f2[0, 0] = 1.0
    return 0.5 * np.log(f2)


def pink_noise(rng: np.random.Generator, h: int, w: int, slope: float, step: int = 1) -> np.ndarray:
    """A zero-mean, unit-sd HxW field whose amplitude spectrum falls as 1/f**slope (natural
    images have slope ~1; larger is smoother). ``step`` > 1 draws it on a grid that much
    coarser and resizes it up: plenty for smooth fields, and far cheaper."""
    gh, gw = -(-h // step), -(-w // step)
    amp = np.exp(-slope * _log_frequency(gh, gw))
    amp[0, 0] = 0.0
    noise = rng.standard_normal((2, gh, gw // 2 + 1), np.float32)
    field = np.fft.irfft2((noise[0] + 1j * noise[1]) * amp, s=(gh, gw))
    sd = field.std()
    field = (field / sd if sd > 0 else field).astype(np.float32)
    if step > 1:
        field = np.asarray(Image.fromarray(field, "F").resize((w, h), Image.Resampling.BICUBIC))
    return field


def linear_ramp(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A plane in a random direction, -1 .. 1 across the image."""
    angle = rng.uniform(0.0, 2 * np.pi)
    x = (np.float32(np.cos(angle)) * (np.arange(w, dtype=np.float32) / w - 0.5))[None, :]
    y = (np.float32(np.sin(angle)) * (np.arange(h, dtype=np.float32) / h - 0.5))[:, None]
    t = x + y
    return t / max(float(np.abs(x).max() + np.abs(y).max()), 1e-6)


# --- colour -----------------------------------------------------------------------------


def hsv_to_rgb(hue: float, sat: float, val: float) -> np.ndarray:
    """One colour, 0..255 floats."""
    i = int(hue * 6.0) % 6
    f = hue * 6.0 - int(hue * 6.0)
    p, q, t = val * (1 - sat), val * (1 - f * sat), val * (1 - (1 - f) * sat)
    rgb = [(val, t, p), (q, val, p), (p, val, t), (p, q, val), (t, p, val), (val, p, q)][i]
    return np.array(rgb, np.float32) * 255.0


def palette_colour(rng: np.random.Generator, hue_centre: float) -> np.ndarray:
    """A plausible object colour: mostly near the scene's hue, muted, mid-bright."""
    hue = (hue_centre + rng.normal(0.0, 0.12)) % 1.0 if rng.random() < 0.7 else rng.random()
    return hsv_to_rgb(hue, float(rng.beta(2.0, 3.0)), float(rng.uniform(0.2, 0.95)))


# --- one image --------------------------------------------------------------------------


def object_mask(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """An L-mode mask of one random shape: ellipse, polygon, rotated box or blob."""
    mask = Image.new("L", (w, h), 0)
    draw = ImageDraw.Draw(mask)
    cx, cy = rng.uniform(-0.1, 1.1) * w, rng.uniform(-0.1, 1.1) * h
    size = min(w, h) * float(np.exp(rng.uniform(np.log(0.06), np.log(0.7))))
    kind = rng.integers(4)
    if kind == 0:
        rx, ry = size * rng.uniform(0.3, 1.0), size * rng.uniform(0.3, 1.0)
        draw.ellipse([cx - rx, cy - ry, cx + rx, cy + ry], fill=255)
    elif kind == 1:
        n = int(rng.integers(3, 8))
        angles = np.sort(rng.uniform(0, 2 * np.pi, n))
        radii = size * rng.uniform(0.4, 1.0, n)
        points = [(cx + r * np.cos(a), cy + r * np.sin(a))
                  for a, r in zip(angles, radii, strict=True)]  # fmt: skip
        draw.polygon(points, fill=255)
    elif kind == 2:
        a = rng.uniform(0, np.pi)
        hw, hh = size * rng.uniform(0.2, 1.0), size * rng.uniform(0.1, 0.6)
        corners = [(-hw, -hh), (hw, -hh), (hw, hh), (-hw, hh)]
        draw.polygon([(cx + x * np.cos(a) - y * np.sin(a), cy + x * np.sin(a) + y * np.cos(a))
                      for x, y in corners], fill=255)  # fmt: skip
    else:  # an irregular blob: a smooth radial profile
        n = 48
        angles = np.linspace(0, 2 * np.pi, n, endpoint=False)
        wobble = np.real(np.fft.ifft(np.concatenate(
            [[0], rng.normal(0, 1, 5) + 1j * rng.normal(0, 1, 5), np.zeros(n - 11),
             rng.normal(0, 1, 5) + 1j * rng.normal(0, 1, 5)])))  # fmt: skip
        radii = size * (0.7 + 0.3 * wobble / max(float(np.abs(wobble).max()), 1e-6))
        points = [(cx + r * np.cos(a), cy + r * np.sin(a))
                  for a, r in zip(angles, radii, strict=True)]  # fmt: skip
        draw.polygon(points, fill=255)
    return mask


def soft_alpha(mask: Image.Image, radius: float) -> tuple[np.ndarray, tuple] | None:
    """The mask blurred by ``radius`` as 0..1 floats (HxWx1), cut to the box it covers:
    (alpha, (x0, y0, x1, y1)), or None for an empty mask."""
    box = mask.getbbox()
    if box is None:
        return None
    pad = int(np.ceil(3 * radius)) + 1
    w, h = mask.size
    box = (max(box[0] - pad, 0), max(box[1] - pad, 0), min(box[2] + pad, w), min(box[3] + pad, h))
    crop = mask.crop(box).filter(ImageFilter.GaussianBlur(radius))
    return np.asarray(crop, np.float32)[..., None] / np.float32(255.0), box


def render(rng: np.random.Generator, w: int, h: int, hue_centre: float) -> np.ndarray:
    """An HxWx3 float32 photo-like scene, 0..255 (not yet clipped)."""
    # Background: two colours blended along a soft ramp (sky/ground, wall/floor), with
    # large-scale light variation and a fine texture.
    ramp = linear_ramp(rng, h, w)
    edge = rng.uniform(-0.4, 0.4)
    blend = 1.0 / (1.0 + np.exp(-(ramp - np.float32(edge)) * np.float32(rng.uniform(2.0, 12.0))))
    c0, c1 = palette_colour(rng, hue_centre), palette_colour(rng, hue_centre)
    light = 1.0 + 0.18 * pink_noise(rng, h, w, 1.6, step=4)
    texture = pink_noise(rng, h, w, rng.uniform(0.8, 1.1))
    chroma = pink_noise(rng, h, w, 1.8, step=4)
    tint = rng.normal(0.0, 8.0, 3).astype(np.float32)
    img = (c0 + (c1 - c0) * blend[..., None]) * light[..., None]
    img += (texture * np.float32(rng.uniform(6.0, 16.0)))[..., None] + chroma[..., None] * tint

    # Objects, back to front; the first ones are often out of focus. Their textures are
    # windows of the background's field and of a rougher one, flipped so that they do not
    # line up with the background.
    fields = [texture, pink_noise(rng, h, w, 0.7)]
    n_objects = int(rng.integers(6, 16))
    for k in range(n_objects):
        mask = object_mask(rng, w, h)
        focus = rng.uniform(2.0, 6.0) if k < n_objects // 3 and rng.random() < 0.6 else 0.8
        soft = soft_alpha(mask, focus)
        if soft is None:
            continue
        a, (x0, y0, x1, y1) = soft
        bh, bw = y1 - y0, x1 - x0
        colour = palette_colour(rng, hue_centre)
        shade = 1.0 + rng.uniform(0.1, 0.5) * linear_ramp(rng, bh, bw)
        field = fields[int(rng.integers(2))][:: rng.choice((-1, 1)), :: rng.choice((-1, 1))]
        tex = field[y0:y1, x0:x1] * np.float32(rng.uniform(3.0, 18.0) * rng.choice((-1, 1)))
        if rng.random() < 0.3:  # stripes or weave: man-made texture
            angle, period = rng.uniform(0, np.pi), rng.uniform(3.0, 14.0)
            kx = np.float32(np.cos(angle) * 2 * np.pi / period)
            ky = np.float32(np.sin(angle) * 2 * np.pi / period)
            xx = (kx * np.arange(bw, dtype=np.float32))[None, :]
            yy = (ky * np.arange(bh, dtype=np.float32))[:, None]
            phase = xx + yy
            tex = tex + rng.uniform(6.0, 20.0) * np.sin(phase)
        obj = shade[..., None] * colour
        obj += tex[..., None]
        region = img[y0:y1, x0:x1]
        obj -= region
        obj *= a
        region += obj

    # Thin structures: wires, twigs, cracks.
    lines = Image.new("L", (w, h), 0)
    draw = ImageDraw.Draw(lines)
    for _ in range(int(rng.integers(0, 6))):
        pts = np.cumsum(rng.normal(0, min(w, h) * 0.08, (int(rng.integers(2, 6)), 2)), 0)
        pts += rng.uniform(0, 1, 2) * (w, h)
        draw.line([tuple(p) for p in pts], fill=int(rng.integers(120, 256)),
                  width=int(rng.integers(1, 4)))  # fmt: skip
    line_colour = palette_colour(rng, hue_centre) * np.float32(rng.uniform(0.2, 0.8))
    soft = soft_alpha(lines, 0.6)
    if soft is not None:
        a, (x0, y0, x1, y1) = soft
        region = img[y0:y1, x0:x1]
        region += (line_colour - region) * a

    # Vignetting.
    xx = ((np.arange(w, dtype=np.float32) - w / 2) / (w / 2))[None, :] ** 2
    yy = ((np.arange(h, dtype=np.float32) - h / 2) / (h / 2))[:, None] ** 2
    img *= (1.0 - np.float32(rng.uniform(0.0, 0.25) / 2.0) * (xx + yy))[..., None]
    return img


def camera(rng: np.random.Generator, img: np.ndarray) -> Image.Image:
    """In-camera sharpening, white balance and sensor grain."""
    pil = Image.fromarray(np.clip(img + 0.5, 0, 255).astype(np.uint8), "RGB")
    pil = pil.filter(ImageFilter.UnsharpMask(radius=1.5, percent=int(rng.integers(50, 151)),
                                             threshold=2))  # fmt: skip
    arr = np.asarray(pil, np.float32)
    arr *= rng.uniform(0.95, 1.05, 3).astype(np.float32)
    grain = rng.standard_normal(arr.shape[:2], np.float32) * rng.uniform(1.5, 4.5)
    arr += grain[..., None]  # the same on every channel: luminance grain survives 4:2:0
    return Image.fromarray(np.clip(arr + 0.5, 0, 255).astype(np.uint8), "RGB")


def class_hue(opts: Options, cls: int) -> float:
    """Each class has a typical hue: weakly class-dependent content, like a real dataset."""
    return float(np.random.default_rng([opts.seed, _CLASS, cls]).random())


def plan_specials(opts: Options) -> dict[int, str]:
    """Index -> "PNG", "L" (greyscale JPEG) or "CMYK" (CMYK JPEG); disjoint, from the seed."""
    rng = np.random.default_rng([opts.seed, _SPECIALS])
    order = [int(i) for i in rng.permutation(opts.count)]
    n_png = int(round(opts.count * opts.png_fraction))
    kinds = ["PNG"] * n_png + ["L"] * opts.gray + ["CMYK"] * opts.cmyk
    return dict(zip(order, kinds, strict=False))  # fewer images than kinds: the first kinds win


def make_image(opts: Options, index: int, kind: str | None) -> tuple[str, bytes, tuple]:
    """(relative path, file bytes, manifest row) of image ``index``."""
    rng = np.random.default_rng([opts.seed, _IMAGE, index])
    cls = index % opts.classes
    hue = class_hue(opts, cls) if rng.random() < 0.6 else float(rng.random())
    w, h = draw_size(rng)
    pil = camera(rng, render(rng, w, h, hue))
    buf = io.BytesIO()
    if kind == "PNG":
        pil.save(buf, "PNG", compress_level=6)
        ext, fmt = "png", "PNG"
    else:
        if kind in ("L", "CMYK"):
            pil = pil.convert(kind)
        pil.save(buf, "JPEG", quality=opts.quality, subsampling="4:2:0", optimize=False,
                 progressive=False)  # fmt: skip
        ext, fmt = "jpg", "JPEG"
    data = buf.getvalue()
    rel = f"class_{cls:02d}/img_{index:05d}.{ext}"
    row = (rel, cls, w, h, pil.mode, fmt, len(data), hashlib.sha256(data).hexdigest())
    return rel, data, row


def _work(args: tuple[Options, str, int, str | None]) -> tuple:
    opts, out, index, kind = args
    rel, data, row = make_image(opts, index, kind)
    with open(os.path.join(out, rel), "wb") as f:
        f.write(data)
    return row


def build(out: str, opts: Options, jobs: int = 1) -> list[tuple]:
    """Write the corpus under ``out``; returns the manifest rows, sorted by path."""
    for cls in range(min(opts.classes, opts.count)):
        os.makedirs(os.path.join(out, f"class_{cls:02d}"), exist_ok=True)
    specials = plan_specials(opts)
    tasks = [(opts, out, i, specials.get(i)) for i in range(opts.count)]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            rows = list(pool.map(_work, tasks, chunksize=8))
    else:
        rows = [_work(t) for t in tasks]
    rows.sort()
    with open(os.path.join(out, "MANIFEST.tsv"), "w") as f:
        f.write("relpath\tclass\twidth\theight\tmode\tformat\tbytes\tsha256\n")
        for row in rows:
            f.write("\t".join(map(str, row)) + "\n")
    return rows


def summary(rows: list[tuple]) -> str:
    n = len(rows)
    jpeg = [r for r in rows if r[5] == "JPEG"]
    total, jpeg_bytes = sum(r[6] for r in rows), sum(r[6] for r in jpeg)
    mpix = sum(r[2] * r[3] for r in rows) / 1e6
    jpeg_px = sum(r[2] * r[3] for r in jpeg)
    per_jpeg = jpeg_bytes / max(len(jpeg), 1) / 1024
    modes = {m: sum(1 for r in jpeg if r[4] == m) for m in ("RGB", "L", "CMYK")}
    return (
        f"{n} images ({len(jpeg)} JPEG: {modes['RGB']} colour, {modes['L']} greyscale, "
        f"{modes['CMYK']} CMYK; {n - len(jpeg)} PNG), {total / 1e6:.1f} MB, "
        f"mean {mpix / max(n, 1):.3f} MP; JPEG mean {per_jpeg:.1f} KB, "
        f"{8 * jpeg_bytes / max(jpeg_px, 1):.2f} bits/pixel"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Same seed, same files (given the same numpy, Pillow, libjpeg and zlib).",
    )
    parser.add_argument("out", help="output folder (made if needed; same-named files replaced)")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (default 0)")
    parser.add_argument("--count", type=int, default=2000, help="number of images (2000)")
    parser.add_argument("--classes", type=int, default=10, help="class folders (10)")
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality (90)")
    parser.add_argument("--png-fraction", type=float, default=0.02, help="share of PNGs (0.02)")
    parser.add_argument("--gray", type=int, default=2, help="greyscale JPEGs (2)")
    parser.add_argument("--cmyk", type=int, default=1, help="CMYK JPEGs (1)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (1)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.count < 1 or args.classes < 1:
        parser.error("--count and --classes must be at least 1")
    opts = Options(args.seed, args.count, args.classes, args.quality, args.png_fraction,
                   args.gray, args.cmyk)  # fmt: skip
    t0 = time.perf_counter()
    rows = build(args.out, opts, args.jobs)
    if not args.quiet:
        print(f"{args.out}: {summary(rows)}, seed {args.seed}, {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
