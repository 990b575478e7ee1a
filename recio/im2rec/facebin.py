"""Face verification sets (LFW, CFP-FP, AgeDB-30 ``.bin``): read them, write them from pairs.

A ``.bin`` is a pickle of ``(bins, issame)``: ``bins`` the encoded images (JPEG bytes as
stored), two per pair, ``issame`` one bool per pair (whether the two show one person).
InsightFace's ``load_bin`` reads it; recio writes it from a pairs file, one pair a line:
``PATH_A PATH_B SAME`` (``SAME`` 1 or 0; relative paths from ``--root``, else the pairs
file's folder). The images are stored as their files' bytes, not decoded.

    recio facebin write lfw.bin pairs.txt
    recio facebin info lfw.bin
"""

from __future__ import annotations

import argparse
import io
import os
import pickle
from collections.abc import Sequence

__all__ = ["add_arguments", "read_bin", "read_pairs", "run", "write_bin"]


def read_bin(path: str) -> tuple[list[bytes], list[bool]]:
    """The images (encoded bytes, two per pair) and the same-person flags of a ``.bin``.

    Files pickled by Python 2 load too (their bytes as ``bytes``).
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        loaded = pickle.loads(data)
    except UnicodeDecodeError:  # a Python 2 pickle of str
        loaded = pickle.loads(data, encoding="bytes")
    except (pickle.UnpicklingError, EOFError) as e:
        raise ValueError(
            f"{path}: not a verification .bin (a pickle of images, issame): {e}"
        ) from e
    if not (isinstance(loaded, tuple | list) and len(loaded) == 2):
        raise ValueError(f"{path}: not a verification .bin: a pickle of (images, issame) expected")
    bins, issame = list(loaded[0]), [bool(s) for s in loaded[1]]
    if len(bins) != 2 * len(issame):
        raise ValueError(f"{path}: {len(bins)} images for {len(issame)} pairs (two a pair)")
    return [bytes(b) for b in bins], issame


def write_bin(path: str, pairs: Sequence[tuple[bytes, bytes, bool]]) -> None:
    """Write a ``.bin`` of ``pairs`` (encoded image A, encoded image B, same person)."""
    bins = [image for a, b, _ in pairs for image in (bytes(a), bytes(b))]
    issame = [bool(same) for _, _, same in pairs]
    tmp = f"{path}.partial"
    with open(tmp, "wb") as f:
        pickle.dump((bins, issame), f, protocol=4)
    os.replace(tmp, path)


def read_pairs(pairs_file: str, root: str | None = None) -> list[tuple[bytes, bytes, bool]]:
    """The pairs a pairs file lists, their images read as stored."""
    base = root if root is not None else os.path.dirname(os.path.abspath(pairs_file))
    pairs = []
    with open(pairs_file, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 3 or fields[2] not in ("0", "1"):
                raise ValueError(
                    f"{pairs_file}:{number}: a pair is 'PATH_A PATH_B SAME' (SAME 0 or 1), "
                    f"not {line.strip()!r}"
                )
            images = []
            for name in fields[:2]:
                with open(os.path.join(base, name), "rb") as image:
                    images.append(image.read())
            pairs.append((images[0], images[1], fields[2] == "1"))
    return pairs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``recio facebin``'s actions: ``write`` and ``info``."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    write = actions.add_parser("write", help="write a .bin from a pairs file")
    write.add_argument("output", help="the .bin to write")
    write.add_argument("pairs", help="one pair a line: PATH_A PATH_B SAME (1 or 0)")
    write.add_argument("--root", help="folder the paths are relative to (default: the file's)")
    info = actions.add_parser("info", help="pairs, same/different counts, image sizes")
    info.add_argument("input", help="a verification .bin")


def run(args: argparse.Namespace) -> int:
    """Run ``recio facebin``; returns the exit status."""
    if args.action == "write":
        pairs = read_pairs(args.pairs, args.root)
        write_bin(args.output, pairs)
        print(f"{args.output}: {len(pairs)} pairs, {sum(p[2] for p in pairs)} same")
        return 0
    from PIL import Image

    bins, issame = read_bin(args.input)
    sizes = set()
    for image in bins:
        with Image.open(io.BytesIO(image)) as opened:
            sizes.add(opened.size)
    shown = ", ".join(f"{w}x{h}" for w, h in sorted(sizes))
    print(f"{args.input}: {len(issame)} pairs, {sum(issame)} same, {len(bins)} images ({shown})")
    return 0
