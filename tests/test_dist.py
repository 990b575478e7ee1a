"""Rank and world size: a kv object, part_index/num_parts, torch.distributed, the environment."""

import sys

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


class FakeProcessGroup:
    """Stands in for torch.distributed with an initialised process group (also for
    tests/frameworks/test_torch_data.py)."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def get_rank(self) -> int:
        return self.rank

    def get_world_size(self) -> int:
        return self.size


def test_process_group_comes_before_the_environment(monkeypatch):
    # Lightning's launcher sets WORLD_SIZE without RANK; a SLURM step may hold one task
    # for the two processes a framework starts: the process group is what DDP averages over.
    monkeypatch.setitem(sys.modules, "torch.distributed", FakeProcessGroup(1, 2))
    env = {"RANK": "0", "WORLD_SIZE": "1", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}
    assert discover(None, None, None, env) == (1, 2, "torch.distributed")
    assert discover(None, None, None, {"WORLD_SIZE": "2"}) == (1, 2, "torch.distributed")
    assert discover(None, 0, 4, env)[:2] == (0, 4)  # what the user passes still wins
    assert discover(KV(), None, None, env)[:2] == (1, 4)
