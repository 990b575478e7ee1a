"""``recio sample DIR``: the small image folders the documentation's examples read.

``DIR/images/``: three classes (``cat``, ``dog``, ``fish``) of four 64x48 JPEGs each,
``images/cat/0.jpg`` ...; ``DIR/faces/``: three identities of two, three and four 112x112
JPEGs, ``faces/id0/0.jpg`` ... The pictures are :mod:`recio.bench.sample`'s coloured shapes
on noise, the same bytes on every run. The docs make ``data/train.rec`` and the rest from
them with the commands they show.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from ..bench.sample import sample_image

__all__ = ["CLASSES", "add_arguments", "run", "write_sample"]

CLASSES = ("cat", "dog", "fish")
IMAGES_PER_CLASS = 4
FACES = (2, 3, 4)  # images of identities id0, id1, id2


def write_sample(root: str) -> list[str]:
    """Write ``root/images`` and ``root/faces``; returns the files written."""
    written = []
    rng = np.random.default_rng(2026)
    folders = [
        (os.path.join("images", c), IMAGES_PER_CLASS, (64, 48), k) for k, c in enumerate(CLASSES)
    ]
    folders += [(os.path.join("faces", f"id{k}"), n, (112, 112), k) for k, n in enumerate(FACES)]
    for folder, count, size, label in folders:
        os.makedirs(os.path.join(root, folder), exist_ok=True)
        for i in range(count):
            path = os.path.join(root, folder, f"{i}.jpg")
            sample_image(rng, label, size).save(path, "JPEG", quality=90)
            written.append(path)
    return written


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``recio sample``'s one argument: the folder to write into."""
    parser.add_argument("root", nargs="?", default=".", help="where to write images/ and faces/")


def run(args: argparse.Namespace) -> int:
    """Write the sample folders; returns the exit status."""
    written = write_sample(args.root)
    print(
        f"wrote {len(written)} JPEGs under {os.path.join(args.root, 'images')} and "
        f"{os.path.join(args.root, 'faces')}"
    )
    return 0
