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
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

try:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel
except ImportError as exc:  # the optional extra is missing
    raise ImportError(
        "recio.train needs PyTorch: pip install 'recio[train]' (or pip install torch)"
    ) from exc

from .compression import TwoBitState, two_bit_hook
from .iterator import ImageRecordIter
from .model import resnet
from .recordio import RecordFile
from .train_state import (
    all_sum,
    gather,
    init_distributed,
    load_checkpoint,
    param_digest,
    rank_world,
    save_checkpoint,
)

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


# --- data -------------------------------------------------------------------------------


def count_classes(rec: str, storage_options: dict[str, Any] | None = None) -> int:
    """The largest label in ``rec`` plus one (reads every record header)."""
    largest = 0
    with RecordFile(rec, storage_options=storage_options) as rf:
        for i in range(len(rf)):
            payload = rf.read(i)
            largest = max(largest, int(np.frombuffer(payload, np.float32, 1, 4)[0]))
    return largest + 1


def make_iterator(config: TrainConfig, rec: str, train: bool) -> Any:
    """ImageRecordIter for training (shuffled, augmented) or validation (centre crop, padded)."""
    layout = "NHWC" if config.channels_last else "NCHW"
    size = config.image_size
    kwargs = dict(
        path_imgrec=rec,
        data_shape=(3, size, size),
        batch_size=config.batch_size,
        mean_r=MEAN[0],
        mean_g=MEAN[1],
        mean_b=MEAN[2],
        std_r=STD[0],
        std_g=STD[1],
        std_b=STD[2],
        layout=layout,
        seed=config.seed,
        preprocess_threads=config.preprocess_threads,
        prefetch_buffer=config.prefetch_buffer,
        storage_options=config.storage_options,
        last_batch="pad",
    )
    if train:
        augment = config.augment
        kwargs.update(
            shuffle=True,
            random_resized_crop=augment,
            min_random_area=config.min_random_area,
            rand_mirror=augment,
            resize=-1 if augment else size,
        )
    else:
        kwargs.update(shuffle=False, resize=size)
    if config.device == "cuda":
        return _dali_iterator(kwargs)
    return ImageRecordIter(**kwargs)


def _dali_iterator(kwargs: dict[str, Any]) -> Any:
    # The GPU path: raw bytes from the .rec, nvJPEG decode and augmentation in DALI.
    try:
        from recio.dali import DALIImageRecordIter
    except ImportError as exc:
        raise RuntimeError(
            "--device cuda feeds the model through the DALI stage, which is not available "
            f"here ({exc}); install recio[dali] or use --device cpu"
        ) from exc
    return DALIImageRecordIter(**kwargs)


def timed(it: Any) -> Iterator[tuple[Any, float]]:
    """Yield (batch, seconds spent waiting for it)."""
    iterator = iter(it)
    while True:
        start = time.perf_counter()
        try:
            batch = next(iterator)
        except StopIteration:
            return
        yield batch, time.perf_counter() - start


# --- distributed ------------------------------------------------------------------------


# --- the loop ---------------------------------------------------------------------------


def _device(config: TrainConfig) -> torch.device:
    if config.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "--device cuda was asked for, but torch sees no CUDA GPU "
            f"(torch {torch.__version__}, cuda build: {torch.version.cuda}); use --device cpu"
        )
    if config.device == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def evaluate(stepper: Stepper, it: Any) -> float:
    """Top-1 accuracy over ``it`` (all ranks together; padding excluded)."""
    module = getattr(stepper.model, "module", stepper.model)
    module.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in it:
            x, y = to_tensors(batch, stepper.device, stepper.channels_last)
            with stepper.autocast():
                pred = module(x).argmax(1)
            real = len(y) - int(batch.pad)
            correct += int((pred[:real] == y[:real]).sum())
            total += real
    correct, total = all_sum([correct, total], stepper.device)
    return correct / max(total, 1)


def train(config: TrainConfig) -> TrainResult:
    """Train the built-in ResNet as ``config`` says; under torchrun, data parallel."""
    device = _device(config)
    created_group = init_distributed(config.device)
    rank, world = rank_world()
    torch.manual_seed(config.seed)  # same initial weights everywhere (DDP also broadcasts)
    num_classes = config.num_classes or count_classes(config.train_rec, config.storage_options)
    model = resnet(num_classes, config.width, config.blocks, config.image_size).to(device)
    if config.channels_last:
        model = model.to(memory_format=torch.channels_last)
    dense_bytes = sum(p.numel() * 4 for p in model.parameters() if p.requires_grad)
    if world > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=ids)
    stepper = Stepper(model, config, device)
    if config.grad_compression == "2bit":
        if world == 1:
            log.warning("--grad-compression 2bit has nothing to compress in a single process")
        else:
            stepper.compression = TwoBitState.for_model(model.module, config.threshold)
            model.register_comm_hook(stepper.compression, two_bit_hook)
    train_it = make_iterator(config, config.train_rec, train=True)
    val_it = make_iterator(config, config.val_rec, train=False) if config.val_rec else None
    result = TrainResult(world_size=world)
    global_step = 0
    if config.resume:
        global_step = load_checkpoint(config.resume, stepper, train_it)
        log.info("resumed from %s at step %d", config.resume, global_step)
    steps_per_epoch = len(train_it)  # batches per epoch (per process)
    if rank == 0:
        log.info(
            "training %d classes, %dx%d images, batch %d x %d processes, %d steps/epoch, "
            "dtype %s%s, gradients %s",
            num_classes, config.image_size, config.image_size, config.batch_size, world,
            steps_per_epoch, config.dtype, ", channels-last" if config.channels_last else "",
            config.grad_compression,
        )  # fmt: skip
    finished = False
    try:
        while (epoch := train_it.state_dict()["epoch"]) < config.epochs:
            wait = compute = loss_sum = 0.0
            steps = images = skipped = 0
            if stepper.compression is not None:
                stepper.compression.reset_counts()
            lr = config.lr
            stop = False
            for batch, waited in timed(train_it):
                start = time.perf_counter()
                x, y = to_tensors(batch, device, config.channels_last)
                lr = lr_at(config, global_step, steps_per_epoch)
                loss, was_skipped = stepper.step(x, y, lr)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                compute += time.perf_counter() - start
                wait += waited
                global_step += 1
                steps += 1
                images += len(y)
                skipped += was_skipped
                loss_sum += loss
                result.losses.append(loss)
                if was_skipped:
                    log.info("step %d skipped: float16 overflow, loss scale now %g",
                             global_step, stepper.scaler.get_scale())  # fmt: skip
                if config.log_every and global_step % config.log_every == 0 and rank == 0:
                    log.info("step %d loss %.4f lr %.4g", global_step, loss, lr)
                stop = bool(config.max_steps) and global_step >= config.max_steps
                every = config.checkpoint_every
                if config.checkpoint and (stop or (every and global_step % every == 0)):
                    save_checkpoint(config.checkpoint, stepper, train_it, global_step, config)
                if stop:
                    break
            stats = _epoch_stats(
                epoch, steps, images, wait, compute, loss_sum, skipped, lr, device, world
            )
            if stepper.compression is not None:
                sent, dense = stepper.compression.reset_counts()
                stats.comm_bytes_per_step = sent / max(steps, 1)
                stats.dense_bytes_per_step = dense / max(steps, 1)
            elif world > 1:
                stats.comm_bytes_per_step = stats.dense_bytes_per_step = float(dense_bytes)
            if val_it is not None and not stop:
                stats.val_accuracy = evaluate(stepper, val_it)
            result.epochs.append(stats)
            result.skipped_steps += skipped
            if rank == 0:
                _log_epoch(stats)
            if stop:
                break
            if config.checkpoint and not config.checkpoint_every:
                save_checkpoint(config.checkpoint, stepper, train_it, global_step, config)
        result.global_step = global_step
        module = getattr(model, "module", model)
        result.param_digests = gather(param_digest(module))
        if stepper.scaler.is_enabled():
            result.final_loss_scale = stepper.scaler.get_scale()
        finished = True
    finally:
        train_it.close()
        if val_it is not None:
            val_it.close()
        if created_group:
            if finished:  # gloo aborts a rank whose peer tears down first: meet, then part
                dist.barrier()
            dist.destroy_process_group()
    result.model = module
    return result


def _epoch_stats(epoch, steps, images, wait, compute, loss_sum, skipped, lr, device, world):
    # Sum over ranks: images/s of the whole job, wait share of the slowest-waiting average.
    images, wait, compute, loss_sum, steps_all, skipped = all_sum(
        [images, wait, compute, loss_sum, steps, skipped], device
    )
    elapsed = (wait + compute) / max(world, 1)
    fraction = wait / max(wait + compute, 1e-12)
    return EpochStats(
        epoch=epoch,
        steps=steps,
        loss=loss_sum / max(steps_all, 1),
        images_per_s=images / max(elapsed, 1e-12),
        data_wait_fraction=fraction,
        verdict=verdict(fraction),
        skipped_steps=int(skipped / max(world, 1)),
        lr=lr,
    )


def _log_epoch(s: EpochStats) -> None:
    val = f" val top-1 {s.val_accuracy:.3f}" if s.val_accuracy is not None else ""
    comm = ""
    if s.comm_bytes_per_step:
        comm = (
            f" | gradients sent {s.comm_bytes_per_step / 1e3:,.1f} kB/step per process"
            f" (uncompressed {s.dense_bytes_per_step / 1e3:,.1f} kB)"
        )
    skipped = f" | {s.skipped_steps} steps skipped (fp16 overflow)" if s.skipped_steps else ""
    log.info(
        "epoch %d: loss %.4f%s | %d steps, %.1f images/s, data wait %.0f%%%s%s\n  %s",
        s.epoch, s.loss, val, s.steps, s.images_per_s, 100 * s.data_wait_fraction, comm,
        skipped, s.verdict,
    )  # fmt: skip


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
    dev = _device(config)
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


# --- command line -----------------------------------------------------------------------


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``recio train`` flags (also ``python -m recio.train``)."""
    p = parser
    p.add_argument("train_rec", metavar="DATA.rec", help="training .rec path or URL")
    p.add_argument("--val", dest="val_rec", metavar="VAL.rec", help="validation .rec")
    p.add_argument("--num-classes", type=int, default=0, help="default: largest label + 1")
    p.add_argument("--image-size", type=int, default=32, help="square input side (default 32)")
    p.add_argument("--batch-size", type=int, default=32, help="per process (default 32)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", type=float, default=1e-4, help="weight decay")
    p.add_argument("--lr-schedule", choices=("cosine", "step"), default="cosine")
    p.add_argument("--lr-steps", type=_ints, default=(30, 60, 90), help="epochs, e.g. 30,60")
    p.add_argument("--lr-factor", type=float, default=0.1)
    p.add_argument("--warmup-epochs", type=float, default=0.0)
    p.add_argument("--width", type=int, default=16, help="channels of the first stage")
    p.add_argument("--blocks", type=_ints, default=(1, 1, 1), help="blocks per stage, e.g. 2,2,2")
    p.add_argument("--no-augment", dest="augment", action="store_false",
                   help="no random resized crop or mirror")  # fmt: skip
    p.add_argument("--dtype", choices=sorted(AMP_DTYPES), default="float32")
    p.add_argument("--loss-scale", type=float, default=2.0**16, help="float16's initial scale")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--grad-compression", choices=("none", "2bit"), default="none")
    p.add_argument("--threshold", type=float, default=0.5, help="2-bit compression threshold")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: DALI decodes on the GPU and the model trains there")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", metavar="PATH", help="write checkpoints here")
    p.add_argument("--resume", metavar="PATH", help="continue from this checkpoint")
    p.add_argument("--checkpoint-every", type=int, default=0, help="steps (0: each epoch)")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps")
    p.add_argument("--preprocess-threads", type=int, default=None)
    p.add_argument("--prefetch-buffer", type=int, default=4)
    p.add_argument("--storage-options", type=json.loads, default=None, metavar="JSON")
    p.add_argument("--log-every", type=int, default=0, help="log the loss every N steps")
    p.add_argument("--report", metavar="PATH", help="write the result as JSON (rank 0)")


def run(args: argparse.Namespace) -> int:
    rank = int(os.environ.get("RANK", "0"))
    logging.basicConfig(
        level=logging.INFO if rank == 0 else logging.WARNING,
        format="%(message)s" if rank == 0 else f"[rank {rank}] %(message)s",
    )
    options = {k: v for k, v in vars(args).items() if k not in ("report",)}
    try:
        config = TrainConfig(**options)
        result = train(config)
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"recio train: {exc}", file=sys.stderr)
        return 2
    if args.report and rank == 0:
        with open(args.report, "w") as f:
            json.dump(result.to_dict(), f, indent=1)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recio.train", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
