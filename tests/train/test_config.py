"""TrainConfig and the learning-rate schedules."""

from __future__ import annotations

import pytest

from ..conftest import needs_torch

try:
    from recio import train as rtrain
except ImportError:  # the train extra is not installed: needs_torch skips these tests
    rtrain = None


@needs_torch
def test_lr_schedules():
    cos = rtrain.TrainConfig("x", epochs=10, lr=1.0, warmup_epochs=1)
    assert rtrain.lr_at(cos, 0, 10) == pytest.approx(0.1)
    assert rtrain.lr_at(cos, 10, 10) == pytest.approx(1.0)
    assert rtrain.lr_at(cos, 100, 10) == pytest.approx(0.0)
    step = rtrain.TrainConfig("x", epochs=10, lr=1.0, lr_schedule="step", lr_steps=(3, 6))
    assert [rtrain.lr_at(step, s, 10) for s in (0, 30, 60)] == pytest.approx([1, 0.1, 0.01])
