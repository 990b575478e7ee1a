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


@needs_torch
def test_help_keeps_examples_and_shows_defaults(capsys):
    from recio.cli import main as cli

    for run_help in (lambda: cli(["train", "--help"]), lambda: rtrain.main(["--help"])):
        with pytest.raises(SystemExit) as exit_:
            run_help()
        assert exit_.value.code == 0
        out = capsys.readouterr().out
        # the module docstring's examples, line by line, as written
        assert (
            "\n    torchrun --nproc-per-node 2 -m recio.train DATA.rec ...   # data parallel" in out
        )
        assert "\n  recio train data/train.rec --resume run.pt --checkpoint run.pt " in out
        flat = " ".join(out.split())
        for default in ("(default: 32)", "(default: 30,60,90)", "(default: 1,1,1)"):
            assert default in flat
        assert "default 32" not in flat  # said once, by the formatter
        assert "``" not in out and "Modules:" not in out
        assert "(default: False)" not in out and "(default: True)" not in out
        assert "channels-last (NHWC)" in flat and "train without the random resized crop" in flat
