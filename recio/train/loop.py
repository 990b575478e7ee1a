"""The training loop: epochs of steps, evaluation, checkpoints, per-epoch reports."""

from __future__ import annotations

import logging
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from .compression import TwoBitState, two_bit_hook
from .config import EpochStats, TrainConfig, TrainResult, lr_at, torch_device, verdict
from .data import count_classes, make_iterator, timed
from .model import resnet
from .state import (
    all_sum,
    gather,
    init_distributed,
    load_checkpoint,
    param_digest,
    rank_world,
    save_checkpoint,
)
from .step import Stepper, to_tensors

log = logging.getLogger("recio.train")

# --- distributed ------------------------------------------------------------------------


# --- the loop ---------------------------------------------------------------------------


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
    device = torch_device(config)
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
    # batches per epoch (per process); taken before a resume, after which len() is the
    # batches left in the resumed epoch
    steps_per_epoch = len(train_it)
    if config.resume:
        global_step = load_checkpoint(config.resume, stepper, train_it)
        log.info("resumed from %s at step %d", config.resume, global_step)
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
