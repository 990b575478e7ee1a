"""One optimisation step (forward, backward, update, loss scaling), and its benchmark."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .compression import TwoBitState
from .config import AMP_DTYPES, TrainConfig, torch_device
from .model import resnet

log = logging.getLogger("recio.train")

# --- one optimisation step --------------------------------------------------------------


class Stepper:
    """Model, optimizer and loss scaler; ``step(x, y, lr)`` does forward, backward, update.

    Weights and momentum stay float32 whatever ``dtype`` is: autocast casts on the
    fly, which is MXNet's multi_precision without a separate master copy.
    """

    def __init__(self, model: torch.nn.Module, config: TrainConfig, device: torch.device) -> None:
        self.model = model
        self.device = device
        decay, no_decay = [], []
        for name, p in model.named_parameters():
            # MXNet's usual recipe: no weight decay on batch-norm scales and biases.
            (no_decay if p.ndim <= 1 or name.endswith(".bias") else decay).append(p)
        self.optimizer = torch.optim.SGD(
            [{"params": decay, "weight_decay": config.wd}, {"params": no_decay, "weight_decay": 0}],
            lr=config.lr,
            momentum=config.momentum,
        )
        self.amp_dtype = AMP_DTYPES[config.dtype]
        self.scaler = torch.amp.GradScaler(
            device.type, init_scale=config.loss_scale, enabled=config.dtype == "float16"
        )
        self.channels_last = config.channels_last
        self.compression: TwoBitState | None = None

    def autocast(self) -> contextlib.AbstractContextManager:
        """The autocast context of the configured dtype; a no-op for float32."""
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    def step(self, x: torch.Tensor, y: torch.Tensor, lr: float) -> tuple[float, bool]:
        """One update; returns (loss, skipped). Skipped: float16 overflowed, weights unchanged."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            logits = self.model(x)
        loss = F.cross_entropy(logits.float(), y)
        scale = self.scaler.get_scale() if self.scaler.is_enabled() else 1.0
        if self.compression is not None:
            self.compression.grad_scale = scale
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        # GradScaler lowers the scale exactly when it found inf/nan and skipped the step.
        skipped = self.scaler.is_enabled() and self.scaler.get_scale() < scale
        return float(loss.detach()), skipped


def to_tensors(batch: Any, device: torch.device, channels_last: bool):
    """(images, labels) as tensors on ``device``, without copying CPU numpy batches."""
    data, label = batch.data, batch.label
    x = torch.from_numpy(data) if isinstance(data, np.ndarray) else torch.from_dlpack(data)
    y = torch.from_numpy(label) if isinstance(label, np.ndarray) else torch.from_dlpack(label)
    if channels_last and x.shape[-1] == 3:
        x = x.permute(0, 3, 1, 2)  # NHWC memory seen as NCHW: already channels_last
    x = x.to(device, non_blocking=True)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    return x, y.to(device).long()


# --- benchmark hook ---------------------------------------------------------------------


def bench_step(
    batch_shape: Sequence[int],
    num_classes: int = 1000,
    steps: int = 10,
    *,
    dtype: str = "float32",
    channels_last: bool = False,
    device: str = "cpu",
    width: int = 16,
    blocks: Sequence[int] = (1, 1, 1),
    warmup: int = 2,
) -> dict[str, float]:
    """Time training steps of the built-in model on random data of ``batch_shape`` (N, C, H, W).

    What the model alone can absorb; compare it with the input pipeline's images/s.
    """
    n, c, h, w = (int(v) for v in batch_shape)
    config = TrainConfig(
        train_rec="", image_size=h, batch_size=n, dtype=dtype, channels_last=channels_last,
        device=device, width=width, blocks=blocks,
    )  # fmt: skip
    dev = torch_device(config)
    torch.manual_seed(0)
    model = resnet(num_classes, width, blocks, h).to(dev)
    x = torch.randn(n, c, h, w, device=dev)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, num_classes, (n,), device=dev)
    stepper = Stepper(model, config, dev)
    for _ in range(warmup):
        stepper.step(x, y, 0.01)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        stepper.step(x, y, 0.01)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    return {
        "images_per_s": n * steps / elapsed,
        "step_ms": 1e3 * elapsed / steps,
        "batch_shape": [n, c, h, w],
        "dtype": dtype,
        "device": device,
        "threads": torch.get_num_threads(),
    }
