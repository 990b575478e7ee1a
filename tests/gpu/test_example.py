"""examples/gpu_train_loop.py on the CPU device: it trains, saves, and resumes at the next epoch."""

from __future__ import annotations

from .._train_data import run_example


def test_gpu_train_loop_trains_and_resumes(marked_rec, tmp_path):
    first, second = str(tmp_path / "a.pt"), str(tmp_path / "b.pt")
    common = ["examples/gpu_train_loop.py", marked_rec, "--device", "cpu", "--batch-size", "8"]
    out = run_example([*common, "--epochs", "1", "--checkpoint", first])
    assert "epoch 0: train loss" in out and "decoded 24 images on cpu" in out
    out = run_example([*common, "--epochs", "2", "--checkpoint", second, "--resume", first])
    assert "epoch 0" not in out and "epoch 1: train loss" in out and "(3 batches)" in out
