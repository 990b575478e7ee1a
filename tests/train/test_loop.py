"""The training loop: convergence on the sample shapes, exact resume from a checkpoint."""

from __future__ import annotations

from .._train_data import TINY
from ..conftest import needs_torch

try:
    import torch
except ImportError:  # the train extra is not installed: needs_torch skips these tests
    torch = None
else:
    from recio import train as rtrain


@needs_torch
def test_converges_on_the_sample_shapes(shapes):
    # About 700 steps of 32 images learn the shapes well above chance (0.25): seed 0
    # reached 0.81 val top-1 here, seed 1 0.66; the bound leaves room for other CPUs' kernels.
    config = rtrain.TrainConfig(
        shapes["train"], shapes["val"], epochs=60, batch_size=32, lr=0.1,
        **{**TINY, "width": 32},
    )  # fmt: skip
    result = rtrain.train(config)
    accuracy = result.epochs[-1].val_accuracy
    losses = [e.loss for e in result.epochs]
    assert losses[-1] < losses[0] - 0.5, losses
    assert accuracy >= 0.5, f"val top-1 {accuracy:.3f} (chance 0.25); losses {losses}"
    stats = result.epochs[-1]
    assert stats.images_per_s > 0 and 0 <= stats.data_wait_fraction <= 1
    assert stats.verdict.split(":")[0] in ("input-bound", "compute-bound", "balanced")


def _params(model) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


@needs_torch
def test_resume_continues_exactly(shapes, tmp_path):
    base = dict(epochs=2, batch_size=16, lr=0.05, **{**TINY, "augment": True})
    full = rtrain.train(rtrain.TrainConfig(shapes["small"], **base))
    ckpt = str(tmp_path / "ckpt.pt")
    # Stop mid-epoch 1 (6 steps per epoch), then resume in a fresh model.
    first = rtrain.train(rtrain.TrainConfig(shapes["small"], checkpoint=ckpt, max_steps=8, **base))
    second = rtrain.train(rtrain.TrainConfig(shapes["small"], resume=ckpt, **base))
    assert len(full.losses) == 12 and len(first.losses) == 8 and len(second.losses) == 4
    assert first.losses + second.losses == full.losses
    a, b = _params(full.model), _params(second.model)
    assert all(torch.equal(a[k], b[k]) for k in a)
