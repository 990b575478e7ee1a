"""Block shuffle: an epoch order that keeps remote reads large.

A global shuffle makes every record its own small request. ``block_shuffle`` cuts
the records (in file order) into blocks of ``block_size`` neighbours, shuffles the
blocks, and shuffles records within each window of ``window`` consecutive blocks.
A reader that fetches a window's records together (``Prefetcher`` with
``group_bytes`` of about ``window * block_size * record size``) reads ``window``
contiguous spans per window: read amplification stays near 1 while batches still
mix ``window`` far-apart parts of the dataset.
"""

from __future__ import annotations

import numpy as np

__all__ = ["block_shuffle"]


def block_shuffle(
    n: int, seed: int, epoch: int, block_size: int = 256, window: int = 4
) -> np.ndarray:
    """A permutation of ``range(n)`` (int64), deterministic in ``(seed, epoch)``.

    Args:
        n: number of records.
        seed: shared by every worker, so all shard the same order.
        epoch: a different order per epoch.
        block_size: records per contiguous block; larger means larger reads, less mixing.
        window: blocks whose records are mixed together; 1 keeps each block contiguous
            (its records still shuffled among themselves).
    """
    if n < 0 or block_size < 1 or window < 1:
        raise ValueError(
            f"need n >= 0, block_size >= 1, window >= 1 (got {n}, {block_size}, {window})"
        )
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(epoch) & 0xFFFFFFFF, 0xB10C])
    n_blocks = -(-n // block_size)
    order = []
    blocks = rng.permutation(n_blocks)
    for w in range(0, n_blocks, window):
        members = np.concatenate(
            [
                np.arange(b * block_size, min((b + 1) * block_size, n))
                for b in blocks[w : w + window]
            ]
        )
        order.append(rng.permutation(members))
    return np.concatenate(order).astype(np.int64) if order else np.empty(0, np.int64)
