"""The compact training core: a small ResNet trained from a .rec with ImageRecordIter.

    recio train DATA.rec [--val VAL.rec] [--epochs N] [--dtype float16] [--channels-last]
    torchrun --nproc-per-node 2 -m recio.train DATA.rec ...   # data parallel (DDP)

SGD with momentum and weight decay, a cosine or step schedule, cross-entropy,
top-1 accuracy on a validation .rec. Checkpoints hold the model, optimizer,
loss scaler, gradient-compression residuals and the iterator's position, so a
resumed run continues exactly where it stopped. Under torchrun each process
reads its own shard (ImageRecordIter takes RANK/WORLD_SIZE from the
environment) and DDP averages gradients, optionally 2-bit compressed.

Mixed precision follows MXNet's ``multi_precision``: weights and optimizer
state stay float32 (the master copy) while autocast runs the convolutions in
float16/bfloat16; float16 uses dynamic loss scaling, and steps skipped on
overflow are counted. Each epoch reports images/s and the share of step time
spent waiting for data, with a verdict: input-bound or compute-bound.

Modules: :mod:`~recio.train.config` (``TrainConfig``, the results), :mod:`~recio.train.step`
(one step), :mod:`~recio.train.data` (the input), :mod:`~recio.train.loop` (the loop),
:mod:`~recio.train.state` (process group, cross-rank sums, checkpoints),
:mod:`~recio.train.model` (the ResNet), :mod:`~recio.train.compression` (2-bit gradients),
:mod:`~recio.train.cli` (the command line).
"""

from .._install import install_hint

try:
    import torch  # noqa: F401
except ImportError as exc:  # the optional extra is missing
    raise ImportError(f"recio.train needs PyTorch: {install_hint('train')}") from exc

from .cli import add_arguments, main, run
from .config import EpochStats, TrainConfig, TrainResult, lr_at, verdict
from .loop import train
from .step import Stepper, bench_step

__all__ = [
    "EpochStats",
    "Stepper",
    "TrainConfig",
    "TrainResult",
    "add_arguments",
    "bench_step",
    "lr_at",
    "main",
    "run",
    "train",
    "verdict",
]
