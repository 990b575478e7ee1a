"""How mixed an order's batches are: distinct identities per batch, one identity's share.

Face datasets are sorted by identity, so an order that keeps neighbouring records together
fills a batch from few identities. :func:`mix_figures` measures a given order;
:func:`order_of` gives the orders worth comparing: recio's ``global`` and ``block``
shuffles (``block-N``: blocks of N records), ``none``, and ``buffer-N``, a streaming
shuffle through a buffer of N records as DALI's readers do it (``random_shuffle=True``,
``initial_fill=N``: the buffer is filled from the file in order, each output is a random
slot of it, refilled with the next record). ``recio info --shuffle`` prints them for a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .sampler import BLOCK_PARTS, BLOCK_SIZE, Shuffle, epoch_order

__all__ = ["MixFigures", "buffer_order", "mix_figures", "mix_table", "order_of"]


@dataclass(frozen=True)
class MixFigures:
    """An order's batches: distinct identities, and the largest share of one identity.

    ``distinct_mean`` / ``distinct_min``: identities in a batch, on average and the fewest;
    ``top_share_mean`` / ``top_share_max``: each batch's largest share of one identity, on
    average and the worst.
    """

    order: str
    batches: int
    distinct_mean: float
    distinct_min: int
    top_share_mean: float
    top_share_max: float


def buffer_order(n: int, buffer: int, seed: int = 0) -> np.ndarray:
    """The order of ``0..n-1`` a streaming shuffle through ``buffer`` slots gives."""
    rng = np.random.default_rng(seed)
    slots = list(range(min(buffer, n)))
    out = np.empty(n, dtype=np.int64)
    picks = rng.random(n)
    incoming = len(slots)
    for i in range(n):
        k = int(picks[i] * len(slots))
        out[i] = slots[k]
        if incoming < n:
            slots[k] = incoming
            incoming += 1
        else:  # the file is read: the buffer drains
            slots[k] = slots[-1]
            slots.pop()
    return out


def order_of(spec: str, n: int, seed: int = 0, epoch: int = 0) -> np.ndarray:
    """The record order ``spec`` names.

    ``global``, ``block``, ``block-N``, ``buffer-N`` or ``none``.
    """
    name, _, size = spec.partition("-")
    if name in ("global", "none") and not size:
        return epoch_order(n, seed, epoch, Shuffle(name))
    if name == "block":
        block = int(size) if size else BLOCK_SIZE
        if block < 1:
            raise ValueError(f"{spec}: a block of at least one record")
        return epoch_order(n, seed, epoch, Shuffle.BLOCK, block_size=block, parts=BLOCK_PARTS)
    if name == "buffer" and size.isdigit() and int(size) > 0:
        return buffer_order(n, int(size), seed + epoch)
    raise ValueError(f"order {spec!r}: global, block, block-N, buffer-N or none")


def mix_figures(
    classes: np.ndarray, order: np.ndarray, batch_size: int, name: str = ""
) -> MixFigures:
    """The figures of ``order``'s whole batches of ``batch_size`` (``classes``: per sample)."""
    batches = len(order) // batch_size
    if batches == 0:
        raise ValueError(f"{len(order)} samples make no whole batch of {batch_size}")
    rows = np.sort(classes[order[: batches * batch_size]].reshape(batches, batch_size), axis=1)
    starts = np.ones_like(rows, dtype=bool)
    starts[:, 1:] = rows[:, 1:] != rows[:, :-1]
    distinct = starts.sum(axis=1)
    # the longest run of one class in each sorted row: run ends minus run starts
    where = np.nonzero(starts.ravel())[0]
    lengths = np.diff(np.append(where, rows.size))
    row_of_run = where // batch_size
    top = np.zeros(batches, dtype=np.int64)
    np.maximum.at(top, row_of_run, lengths)
    share = top / batch_size
    return MixFigures(
        name, batches, float(distinct.mean()), int(distinct.min()), float(share.mean()),
        float(share.max()),
    )  # fmt: skip


def mix_table(
    classes: np.ndarray, orders: Sequence[str], batch_size: int, seed: int = 0
) -> list[MixFigures]:
    """:func:`mix_figures` of each order ``orders`` names (:func:`order_of`)."""
    classes = np.asarray(classes)
    return [
        mix_figures(classes, order_of(spec, len(classes), seed), batch_size, spec)
        for spec in orders
    ]
