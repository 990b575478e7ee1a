"""The JPEGs of tests/data/sampling (tools/make_sampling_corpus.py): every sampling factor
libjpeg accepts, greyscale and CMYK, baseline and progressive; and the sources built from
them: progressive ones cut at each scan boundary, baseline ones with restart markers."""

from __future__ import annotations

from pathlib import Path

SAMPLING = Path(__file__).resolve().parent.parent / "data" / "sampling"
WIDTH, HEIGHT = 101, 83  # every file's size


def files() -> dict[str, bytes]:
    """{stem: bytes} of every file of the corpus, in name order."""
    return {p.stem: p.read_bytes() for p in sorted(SAMPLING.glob("*.jpg"))}


def scan_cuts(data: bytes) -> list[bytes]:
    """The progressive JPEG ``data`` cut before each of its scans but the first, an EOI
    appended: what a download that stopped at a scan boundary holds."""
    starts, i = [], 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker in (0x00, 0xFF) or 0xD0 <= marker <= 0xD7:  # stuffing, fill, RSTn
            i += 1
            continue
        if marker == 0xD9:
            break
        if marker == 0xDA:  # into the scan's data: walked byte by byte to the next marker
            starts.append(i)
            i += 2
            continue
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return [data[:s] + b"\xff\xd9" for s in starts[1:]]
