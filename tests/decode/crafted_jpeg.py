"""Baseline greyscale JPEGs written from chosen coefficients and Huffman tables.

Encoders pick their own tables and their blocks follow from pixels; the entropy decoder's
tests need codes of every length up to 16 bits, DC differences of every size, runs of
sixteen zeros and blocks whose 63rd coefficient is coded (no end of block), so this writes
them directly: quantisation 1, one component, one 8x8 block an MCU.
"""

from __future__ import annotations

import heapq
import struct
from collections import Counter
from collections.abc import Sequence

import numpy as np

ZRL, EOB = 0xF0, 0x00


def size_of(v: int) -> int:
    """JPEG's magnitude category of v (F.1.2.1)."""
    return abs(int(v)).bit_length()


def value_bits(v: int) -> int:
    """v's size_of(v) bits: negative values as v - 1 in those bits."""
    return int(v) if v >= 0 else int(v) + (1 << size_of(v)) - 1


def block_symbols(zigzag: Sequence[int], prev_dc: int) -> list[tuple[int, int, int]]:
    """(symbol, value bits, their count) of a block, the DC difference first (its symbol the
    size); then the AC symbols: ZRL for sixteen zeros, run << 4 | size, EOB after the last
    non-zero one unless that is the 63rd."""
    diff = int(zigzag[0]) - prev_dc
    out = [(size_of(diff), value_bits(diff), size_of(diff))]
    run = 0
    for v in zigzag[1:]:
        if v == 0:
            run += 1
            continue
        while run > 15:
            out.append((ZRL, 0, 0))
            run -= 16
        out.append((run << 4 | size_of(v), value_bits(v), size_of(v)))
        run = 0
    if run:
        out.append((EOB, 0, 0))
    return out


def table_from_lengths(lengths: dict[int, int]) -> tuple[list[int], list[int]]:
    """(BITS, HUFFVAL) of a DHT giving each symbol its code length (shortest first)."""
    bits = [0] * 16
    for length in lengths.values():
        bits[length - 1] += 1
    assert sum(c / 2**n for n, c in enumerate(bits, 1)) < 1, "no all-ones code left"
    return bits, sorted(lengths, key=lambda s: (lengths[s], s))


def staircase(symbols: Sequence[int]) -> dict[int, int]:
    """Code lengths 2, 3, ... 15 for the first symbols, 16 bits for the rest."""
    return {s: min(2 + i, 16) for i, s in enumerate(symbols)}


def huffman_lengths(counts: Counter) -> dict[int, int]:
    """Huffman's code lengths for counts (at most 16 bits, checked), one more symbol
    counted so that no code is all ones."""
    heap = [(c, i, (s,)) for i, (s, c) in enumerate(sorted(counts.items()))]
    heap.append((1, len(heap), (-1,)))
    heapq.heapify(heap)
    depth: Counter = Counter()
    while len(heap) > 1:
        c1, i1, a = heapq.heappop(heap)
        c2, _, b = heapq.heappop(heap)
        for s in a + b:
            depth[s] += 1
        heapq.heappush(heap, (c1 + c2, i1, a + b))
    del depth[-1]
    assert max(depth.values()) <= 16
    return dict(depth)


def canonical(bits: Sequence[int], vals: Sequence[int]) -> dict[int, tuple[int, int]]:
    """symbol -> (code, length) of a DHT's table (C.2)."""
    codes, code, k = {}, 0, 0
    for length in range(1, 17):
        for _ in range(bits[length - 1]):
            codes[vals[k]] = (code, length)
            code += 1
            k += 1
        code <<= 1
    return codes


class _Bits:
    """Big-endian bit writer with 0xFF stuffing; segments padded with ones."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.acc = 0
        self.n = 0

    def put(self, value: int, n: int) -> None:
        self.acc = self.acc << n | (value & ((1 << n) - 1))
        self.n += n
        while self.n >= 8:
            self.n -= 8
            byte = self.acc >> self.n & 0xFF
            self.out.append(byte)
            if byte == 0xFF:
                self.out.append(0)
        self.acc &= (1 << self.n) - 1

    def align(self) -> None:
        if self.n:
            self.put((1 << (8 - self.n)) - 1, 8 - self.n)


def segment(marker: int, payload: bytes) -> bytes:
    return struct.pack(">BBH", 0xFF, marker, len(payload) + 2) + payload


def write_jpeg(
    blocks: np.ndarray,
    dc: tuple[list[int], list[int]],
    ac: tuple[list[int], list[int]],
    restart: int = 0,
) -> bytes:
    """A JPEG of blocks (rows, columns, 64: each block's coefficients in zigzag order),
    its Huffman tables dc and ac (BITS, HUFFVAL), a restart marker every `restart` blocks."""
    rows, cols = blocks.shape[:2]
    dc_codes, ac_codes = canonical(*dc), canonical(*ac)
    w = _Bits()
    prev = 0
    for done, block in enumerate(blocks.reshape(-1, 64)):
        if restart and done and done % restart == 0:
            w.align()
            w.out += bytes([0xFF, 0xD0 + (done // restart - 1) % 8])
            prev = 0
        for i, (sym, value, n) in enumerate(block_symbols(block, prev)):
            code, length = (dc_codes if i == 0 else ac_codes)[sym]
            w.put(code, length)
            w.put(value, n)
        prev = int(block[0])
    w.align()
    head = b"\xff\xd8" + segment(0xDB, b"\x00" + bytes([1] * 64))
    head += segment(0xC0, struct.pack(">BHHBBBB", 8, rows * 8, cols * 8, 1, 1, 0x11, 0))
    for tc, (bits, vals) in ((0x00, dc), (0x10, ac)):
        head += segment(0xC4, bytes([tc, *bits, *vals]))
    if restart:
        head += segment(0xDD, struct.pack(">H", restart))
    head += segment(0xDA, bytes([1, 1, 0x00, 0, 63, 0]))
    return head + bytes(w.out) + b"\xff\xd9"


def random_blocks(rows: int, cols: int, seed: int) -> np.ndarray:
    """Blocks that code every DC difference size (0 to 11), AC values of sizes 1 to 10,
    runs of up to 40 zeros (ZRL), and blocks whose last coded coefficient is the 63rd."""
    rng = np.random.default_rng(seed)
    out = np.zeros((rows, cols, 64), np.int32)
    dc = 0
    for b in out.reshape(-1, 64):
        size = int(rng.integers(0, 12))
        step = 0 if size == 0 else int(rng.integers(1 << (size - 1), 1 << size))
        sign = -1 if dc > 0 else 1  # towards 0 stays within +-2047; away where it still does
        if rng.random() < 0.5 and abs(dc - sign * step) <= 2047:
            sign = -sign
        dc += sign * step
        b[0] = dc
        k = 1
        kind = rng.random()
        while k < 64:
            k += int(rng.integers(0, 41 if kind < 0.2 else 4))
            if k >= 64 or rng.random() < (0.02 if kind > 0.7 else 0.15):
                break
            size = int(rng.integers(1, 11 if rng.random() < 0.2 else 4))
            b[k] = int(rng.integers(1 << (size - 1), 1 << size)) * int(rng.choice([-1, 1]))
            k += 1
        if kind > 0.85:  # the 63rd coded: the block has no end of block
            b[63] = int(rng.choice([-1, 1, 5, -300]))
    return out


def symbol_counts(blocks: np.ndarray) -> tuple[Counter, Counter]:
    """How often each DC and AC symbol codes in blocks."""
    dcs: Counter = Counter()
    acs: Counter = Counter()
    prev = 0
    for block in blocks.reshape(-1, 64):
        symbols = block_symbols(block, prev)
        dcs[symbols[0][0]] += 1
        acs.update(s for s, _, _ in symbols[1:])
        prev = int(block[0])
    return dcs, acs
