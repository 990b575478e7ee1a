"""MXNet's 2-bit gradient compression: codes, layout, error feedback, and DDP training with it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from .._train_data import torchrun
from ..conftest import needs_torch

try:
    import torch
except ImportError:  # the train extra is not installed: needs_torch skips these tests
    torch = None
else:
    from recio.train.compression import dequantize_2bit, packed_words, quantize_2bit


@needs_torch
def test_quantize_matches_mxnet_codes_and_layout():
    # MXNet's own example values; totals are grad + residual.
    grad = torch.tensor([-6.3, -2.1, 3.4, 1.2, 10.5, 5.1, -3.2, 2.0, -8.9, 0.0])
    residual = torch.tensor([-3.1, 1.2, -1.3, 5.4, -2.1, 2.9, 3.0, -7.0, -2.9, -100.3])
    words, left = quantize_2bit(grad, residual, 4.0)
    assert words.dtype == torch.int32 and words.numel() == 1  # 10 values fit one word
    # value 0 in the top two bits of byte 0; 11 = +t, 10 = -t, 00 = 0
    assert words.view(torch.uint8).tolist() == [0x83, 0xF2, 0xA0, 0x00]
    expected = [-4.0, 0.0, 0.0, 4.0, 4.0, 4.0, 0.0, -4.0, -4.0, -4.0]
    assert dequantize_2bit(words, 10, 4.0).tolist() == expected
    torch.testing.assert_close(left, grad + residual - torch.tensor(expected))
    assert residual[0].item() == pytest.approx(-3.1)  # the input residual is not changed


@needs_torch
@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000])
def test_quantize_round_trip(n: int):
    rng = np.random.default_rng(n)
    g = torch.from_numpy(rng.normal(0, 1, n).astype(np.float32))
    words, left = quantize_2bit(g, torch.zeros(n), 0.5)
    assert words.numel() == packed_words(n) == -(-n // 16)
    sent = dequantize_2bit(words, n, 0.5)
    want = torch.where(g >= 0.5, 0.5, torch.where(g <= -0.5, -0.5, 0.0))
    assert torch.equal(sent, want)
    torch.testing.assert_close(sent + left, g)  # nothing is lost: sent + kept = gradient


@needs_torch
def test_residual_accumulates_small_gradients():
    # Each value is below the threshold: it is sent as ±0.5 once the residual reaches it.
    # (Powers of two keep the float sums exact.)
    residual = torch.zeros(3)
    sent_total = torch.zeros(3)
    grad = torch.tensor([0.25, -0.25, 0.0625])
    for _ in range(10):
        words, residual = quantize_2bit(grad, residual, 0.5)
        sent_total += dequantize_2bit(words, 3, 0.5)
    assert sent_total.tolist() == [2.5, -2.5, 0.5]
    assert residual.tolist() == [0.0, 0.0, 0.125]
    torch.testing.assert_close(sent_total + residual, 10 * grad)  # error feedback


@needs_torch
def test_ddp_two_bit_compression_trains(shapes, tmp_path):
    report = tmp_path / "report.json"
    args = ["-m", "recio.train", shapes["train"], "--report", str(report)]
    args += ["--image-size", "16", "--width", "8", "--blocks", "1,1", "--no-augment"]
    args += ["--epochs", "3", "--batch-size", "16", "--lr", "0.1"]
    args += ["--grad-compression", "2bit", "--threshold", "0.01", "--num-classes", "4"]
    torchrun(args)
    result = json.loads(report.read_text())
    assert result["world_size"] == 2
    assert result["param_digests"][0] == result["param_digests"][1]
    losses = [e["loss"] for e in result["epochs"]]
    assert losses[-1] < losses[0], losses
    epoch = result["epochs"][0]
    # 16 values per 32-bit word: about a sixteenth of the float32 bytes (plus padding)
    assert 0 < epoch["comm_bytes_per_step"] < epoch["dense_bytes_per_step"] / 12
