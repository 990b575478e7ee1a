"""What a training run is asked to do (``TrainConfig``), and what it reports."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

log = logging.getLogger("recio.train")

# Pixel-scale normalisation (MXNet's mean_r/g/b, std_r/g/b for ImageNet).
MEAN = (123.68, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)
AMP_DTYPES = {"float32": None, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Above this share of step time spent waiting for data, the run is input-bound.
INPUT_BOUND = 0.25
COMPUTE_BOUND = 0.05


@dataclass
class TrainConfig:
    """Everything a run needs; the CLI flags map one to one (``--batch-size`` → batch_size)."""

    train_rec: str
    val_rec: str | None = None
    num_classes: int = 0  # 0: the largest label in train_rec plus one
    image_size: int = 32
    batch_size: int = 32  # per process
    epochs: int = 1
    lr: float = 0.1
    momentum: float = 0.9
    wd: float = 1e-4
    lr_schedule: str = "cosine"  # or "step"
    lr_steps: Sequence[int] = (30, 60, 90)  # epochs where "step" multiplies lr by lr_factor
    lr_factor: float = 0.1
    warmup_epochs: float = 0.0
    width: int = 16
    blocks: Sequence[int] = (1, 1, 1)
    augment: bool = True
    min_random_area: float = 0.25
    dtype: str = "float32"
    loss_scale: float = 2.0**16  # float16's initial dynamic loss scale
    channels_last: bool = False
    grad_compression: str = "none"  # or "2bit"
    threshold: float = 0.5
    device: str = "cpu"
    seed: int = 0
    checkpoint: str | None = None
    resume: str | None = None
    checkpoint_every: int = 0  # steps; 0: at the end of each epoch only
    max_steps: int = 0  # stop (and checkpoint) after this many steps in total; 0: no limit
    preprocess_threads: int | None = None
    prefetch_buffer: int = 4
    storage_options: dict[str, Any] | None = None
    log_every: int = 0

    def __post_init__(self) -> None:
        if self.dtype not in AMP_DTYPES:
            raise ValueError(f"dtype must be one of {sorted(AMP_DTYPES)}, not {self.dtype!r}")
        if self.lr_schedule not in ("cosine", "step"):
            raise ValueError(f"lr_schedule must be 'cosine' or 'step', not {self.lr_schedule!r}")
        if self.grad_compression not in ("none", "2bit"):
            raise ValueError(
                f"grad_compression must be 'none' or '2bit', not {self.grad_compression!r}"
            )
        if self.threshold <= 0:
            raise ValueError(f"threshold must be positive, not {self.threshold}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', not {self.device!r}")
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError("epochs and batch_size must be at least 1")


@dataclass
class EpochStats:
    """One epoch of the whole job: mean step loss, images/s, share of time waiting for data.

    ``steps`` and ``skipped_steps`` are per process; loss and rates cover all ranks.
    """

    epoch: int
    steps: int
    loss: float
    images_per_s: float
    data_wait_fraction: float
    verdict: str
    skipped_steps: int = 0
    lr: float = 0.0
    val_accuracy: float | None = None
    comm_bytes_per_step: float = 0.0  # gradient bytes each process sent per step
    dense_bytes_per_step: float = 0.0  # the same without compression


@dataclass
class TrainResult:
    """What a run did: per-epoch stats, this process's step losses, and the trained model."""

    epochs: list[EpochStats] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)  # every step's loss (this process)
    global_step: int = 0
    skipped_steps: int = 0
    world_size: int = 1
    param_digests: list[str] = field(default_factory=list)  # one per rank: replicas agree?
    final_loss_scale: float | None = None
    model: Any = field(default=None, repr=False, compare=False)  # the trained module

    def to_dict(self) -> dict[str, Any]:
        """Everything but the model, as plain JSON-ready values."""
        out = {k: v for k, v in vars(self).items() if k not in ("model", "epochs")}
        out["epochs"] = [asdict(e) for e in self.epochs]
        return out


def verdict(wait_fraction: float) -> str:
    """One line saying whether the input pipeline or the model sets the pace."""
    pct = f"{100 * wait_fraction:.0f}% of step time waiting for data"
    if wait_fraction >= INPUT_BOUND:
        return f"input-bound: {pct}; add preprocess_threads, shrink images, or decode on the GPU"
    if wait_fraction <= COMPUTE_BOUND:
        return f"compute-bound: {pct}; the input pipeline keeps up"
    return f"balanced: {pct}; the input pipeline is close to its limit"


def lr_at(config: TrainConfig, step: int, steps_per_epoch: int) -> float:
    """Learning rate for global ``step``: linear warm-up, then cosine to 0 or steps down."""
    epoch = step / max(steps_per_epoch, 1)
    if config.warmup_epochs > 0 and epoch < config.warmup_epochs:
        return config.lr * (step + 1) / (config.warmup_epochs * steps_per_epoch)
    if config.lr_schedule == "step":
        drops = sum(1 for e in config.lr_steps if epoch >= e)
        return config.lr * config.lr_factor**drops
    total = config.epochs - config.warmup_epochs
    progress = min(max(epoch - config.warmup_epochs, 0.0) / max(total, 1e-9), 1.0)
    return 0.5 * config.lr * (1 + math.cos(math.pi * progress))


def torch_device(config: TrainConfig) -> torch.device:
    """The torch device for ``config.device``; CUDA uses this process's ``LOCAL_RANK`` GPU.

    Raises:
        RuntimeError: CUDA asked for where torch sees no GPU.
    """
    if config.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "--device cuda was asked for, but torch sees no CUDA GPU "
            f"(torch {torch.__version__}, cuda build: {torch.version.cuda}); use --device cpu"
        )
    if config.device == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")
