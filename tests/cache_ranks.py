"""One rank of a node whose ranks share a block cache: what the cache tests start 8 of.

``python -m tests.cache_ranks RANK FOLDER RUNS_JSON`` runs as ``torchrun --nproc-per-node 8``
starts a rank: a fresh interpreter (what a spawn context gives, without importing pytest
again in each rank). It prints one JSON line per run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from recio import storage
from recio.pipeline.iterator import ImageRecordIter

#: The iterator's arguments every rank (and the local reference) uses.
ARGS: dict[str, Any] = dict(
    data_shape=(3, 8, 8), batch_size=4, shuffle=True, shuffle_mode="block", block_parts=8,
    preprocess_threads=1, seed=3, num_parts=8,
)  # fmt: skip
RANKS = 8


def barrier(folder: str, name: str, rank: int, timeout: float = 60.0) -> None:
    """Wait until every rank has reached ``name`` (a file per rank in ``folder``)."""
    open(os.path.join(folder, f"{name}.{rank}"), "wb").close()
    deadline = time.monotonic() + timeout
    while sum(os.path.exists(os.path.join(folder, f"{name}.{r}")) for r in range(RANKS)) < RANKS:
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: the others did not reach {name}")
        time.sleep(0.001)


def run_rank(rank: int, folder: str, runs: list[dict]) -> list[dict]:
    """Each of ``runs`` (url, cache_dir, cache_limit, block, epochs) as ``rank`` of 8.

    Every rank starts a run when all are ready, so they meet on the cache. Per run: the
    record ids of each epoch and this rank's cache stats.
    """
    out = []
    for k, run in enumerate(runs):
        barrier(folder, f"run{k}", rank)
        fetch = storage.FetchOptions(cache_block=run["block"])
        with ImageRecordIter(
            run["url"], part_index=rank, cache_dir=run["cache_dir"],
            cache_limit=run["cache_limit"], fetch=fetch, **ARGS,
        ) as it:  # fmt: skip
            epochs = [[int(i) for b in it for i in b.index] for _ in range(run["epochs"])]
            s = it.records.source.stats
            stats = dict(misses=s.misses, hits=s.hits, waited=s.waited, stored=s.stored,
                         evicted=s.evicted, bypassed=s.bypassed)  # fmt: skip
        out.append({"ids": epochs, "stats": stats})
    return out


if __name__ == "__main__":
    for result in run_rank(int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])):
        print(json.dumps(result), flush=True)
