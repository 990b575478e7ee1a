"""`recio train`: what it says when the device asked for is missing."""

from __future__ import annotations

import pytest

from ..conftest import needs_torch

try:
    import torch
except ImportError:  # the train extra is not installed: needs_torch skips these tests
    torch = None
else:
    from recio import train as rtrain


@needs_torch
def test_cuda_without_gpu_is_one_clear_error(shapes, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert rtrain.main([shapes["small"], "--device", "cuda"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err
