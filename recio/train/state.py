"""What the training core shares across ranks and keeps across runs.

Joining torchrun's process group, sums and gathers over ranks, a digest of the parameters
(to check the replicas agree) and checkpoints that resume a run exactly (model, optimizer,
loss scaler, compression residuals, iterator position).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from .step import Stepper

log = logging.getLogger("recio.train")


def init_distributed(device: str) -> bool:
    """Join torchrun's process group if we were launched by it; True if we created it."""
    if dist.is_initialized() or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if device == "cuda" else "gloo")
    return True


def rank_world() -> tuple[int, int]:
    """This process's (rank, world size) in torch.distributed; (0, 1) outside a group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def all_sum(values: Sequence[float], device: torch.device) -> list[float]:
    """``values`` summed element-wise over all ranks (float64, via a tensor on ``device``)."""
    t = torch.tensor(values, dtype=torch.float64, device=device)
    if rank_world()[1] > 1:
        dist.all_reduce(t)
    return t.tolist()


def gather(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (picklable), in rank order; a collective: all ranks must call."""
    world = rank_world()[1]
    if world == 1:
        return [obj]
    out: list[Any] = [None] * world
    dist.all_gather_object(out, obj)
    return out


def param_digest(model: torch.nn.Module) -> str:
    """A short hash of the parameters: equal on all ranks iff the replicas agree.

    Buffers are left out: batch-norm running stats are each rank's own until
    DDP's next forward broadcasts rank 0's.
    """
    h = hashlib.sha256()
    for name, t in model.named_parameters():
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


# --- checkpoints ------------------------------------------------------------------------


def save_checkpoint(path: str, stepper: Stepper, it: Any, global_step: int, config: Any) -> None:
    """Write (rank 0) everything a resumed run needs; every rank must call this."""
    residuals = None
    if stepper.compression is not None:
        residuals = gather({k: v.cpu() for k, v in stepper.compression.residuals.items()})
    if rank_world()[0] != 0:
        return
    module = getattr(stepper.model, "module", stepper.model)
    state = {
        "format": "recio.train/1",
        "model": module.state_dict(),
        "optimizer": stepper.optimizer.state_dict(),
        "scaler": stepper.scaler.state_dict(),
        "iterator": it.state_dict(),
        "global_step": global_step,
        "residuals": residuals,  # one dict per rank: error feedback is per process
        "config": {k: v for k, v in asdict(config).items() if k != "storage_options"},
    }
    tmp = f"{path}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)  # a crash mid-write never leaves a torn checkpoint


def load_checkpoint(path: str, stepper: Stepper, it: Any) -> int:
    """Restore a checkpoint into ``stepper`` and ``it``; returns the global step."""
    state = torch.load(path, map_location="cpu", weights_only=False)
    if state.get("format") != "recio.train/1":
        raise ValueError(f"{path} is not a recio.train checkpoint")
    module = getattr(stepper.model, "module", stepper.model)
    module.load_state_dict(state["model"])
    stepper.optimizer.load_state_dict(state["optimizer"])
    stepper.scaler.load_state_dict(state["scaler"])
    it.load_state_dict(state["iterator"])
    rank, world = rank_world()
    if stepper.compression is not None and state["residuals"] is not None:
        if len(state["residuals"]) != world:
            log.warning(
                "checkpoint has residuals of %d ranks, not %d: starting from zero",
                len(state["residuals"]),
                world,
            )
        else:
            device = stepper.device
            stepper.compression.residuals = {
                k: v.to(device) for k, v in state["residuals"][rank].items()
            }
    return int(state["global_step"])
