"""Rank and world size: a kv object, part_index/num_parts, then the environment."""

import pytest

from recio.dist import discover


class KV:
    rank, num_workers = 1, 4


def test_discover_order():
    env = {"RANK": "2", "WORLD_SIZE": "8", "SLURM_PROCID": "5", "SLURM_NTASKS": "6"}
    assert discover(KV(), 0, 2, env)[:2] == (1, 4)
    assert discover(None, 1, 2, env)[:2] == (1, 2)
    assert discover(None, None, None, env) == (2, 8, "torchrun environment")
    assert discover(None, None, None, {"SLURM_PROCID": "5", "SLURM_NTASKS": "6"})[:2] == (5, 6)
    mpi = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "3"}
    assert discover(None, None, None, mpi)[:2] == (0, 3)
    assert discover(None, None, None, {}).source == "single process"
    with pytest.raises(ValueError, match="outside"):
        discover(None, 3, 2, {})
