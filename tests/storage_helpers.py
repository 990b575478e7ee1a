"""Small RecordIO files whose every record carries its id, for storage tests."""

from __future__ import annotations

import numpy as np

from recio.format import IRHeader, pack, unpack
from recio.recordio import MXIndexedRecordIO


def write_rec(
    rec_url: str, n: int = 200, size: int = 20_000, storage_options: dict | None = None
) -> str:
    """Write ``n`` records of about ``size`` bytes, record i with id i and bytes of i."""
    idx_url = rec_url[:-4] + ".idx"
    rng = np.random.default_rng(0)
    with MXIndexedRecordIO(idx_url, rec_url, "w", storage_options=storage_options) as w:
        for i in range(n):
            body = bytes([i % 251]) * int(size + rng.integers(0, size // 4 + 1))
            w.write_idx(i, pack(IRHeader(0, float(i % 7), i, 0), body))
    return idx_url


def ids_of(payloads) -> list[int]:
    """Record ids, each checked against its body."""
    out = []
    for p in payloads:
        header, body = unpack(p)
        assert bytes(body[:1]) == bytes([header.id % 251]) and len(set(bytes(body[-64:]))) == 1
        out.append(int(header.id))
    return out
