"""One optimisation step: float16 loss scaling, bfloat16 with channels_last, bench_step."""

from __future__ import annotations

import numpy as np

from .._train_data import TINY
from ..conftest import needs_torch

try:
    import torch
except ImportError:  # the train extra is not installed: needs_torch skips these tests
    torch = None
else:
    from recio import train as rtrain
    from recio.train.model import resnet


@needs_torch
def test_float16_overflow_skips_the_step(shapes):
    # A loss scale of 2**40 overflows float16 gradients: the update must be skipped.
    config = rtrain.TrainConfig(
        shapes["small"], batch_size=16, dtype="float16", loss_scale=2.0**40, max_steps=1, **TINY
    )
    result = rtrain.train(config)
    assert result.skipped_steps == 1 and result.epochs[0].skipped_steps == 1
    assert result.final_loss_scale == 2.0**39
    torch.manual_seed(0)
    initial = resnet(4, TINY["width"], TINY["blocks"], TINY["image_size"])
    for (name, p), p0 in zip(result.model.named_parameters(), initial.parameters(), strict=True):
        assert torch.equal(p, p0), name
    # From a sane scale, a few float16 steps train without skipping.
    config = rtrain.TrainConfig(shapes["small"], batch_size=16, dtype="float16", **TINY)
    result = rtrain.train(config)
    assert result.skipped_steps == 0 and np.isfinite(result.losses).all()


@needs_torch
def test_bfloat16_channels_last(shapes):
    config = rtrain.TrainConfig(
        shapes["small"], batch_size=16, dtype="bfloat16", channels_last=True, **TINY
    )
    result = rtrain.train(config)
    assert np.isfinite(result.losses).all() and result.final_loss_scale is None
    assert result.model.stem[0].weight.dtype == torch.float32  # master weights stay fp32


@needs_torch
def test_bench_step():
    out = rtrain.bench_step((8, 3, 16, 16), num_classes=10, steps=2, width=8, blocks=(1,))
    assert out["images_per_s"] > 0 and out["batch_shape"] == [8, 3, 16, 16]
