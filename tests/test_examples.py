"""The example programs under examples/, run as users run them."""

from __future__ import annotations

import json

import pytest

from ._train_data import run_example, torchrun
from .conftest import needs_torch

try:
    import torch
except ImportError:  # the train extra is not installed: needs_torch skips these tests
    torch = None


@needs_torch
def test_ddp_example_shards_and_replicas(shapes):
    proc = torchrun(
        ["examples/train_ddp.py", shapes["small"], "--image-size", "16", "--batch-size", "8"]
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[{")]
    assert len(lines) == 1, proc.stdout[-2000:]
    reports = json.loads(lines[0])
    assert sorted(r["rank"] for r in reports) == [0, 1]
    ids = [set(r["ids"]) for r in reports]
    assert not ids[0] & ids[1]  # disjoint
    assert ids[0] | ids[1] == set(range(96))  # complete
    assert reports[0]["digest"] == reports[1]["digest"]  # identical parameters


@needs_torch
def test_example_train_loop(shapes, tmp_path):
    out = run_example(
        ["examples/train_loop.py", shapes["small"], "--val", shapes["small"], "--epochs", "1",
         "--image-size", "16", "--checkpoint", str(tmp_path / "c.pt")]
    )  # fmt: skip
    assert "epoch 0: train loss" in out and "validation top-1" in out
    state = torch.load(tmp_path / "c.pt", weights_only=False)
    assert state["epoch"] == 1 and state["step"] == 0 and "model" in state


def test_example_mxnet_port(tmp_path):
    out = run_example(["examples/mxnet_port.py", str(tmp_path)])
    assert "40 records written and read back" in out
    assert "10 batches in two epochs" in out  # 40 images, batch 8, two epochs


@pytest.mark.s3
def test_example_read_s3(shapes, s3_server, s3_prefix):
    import fsspec

    fs, prefix = fsspec.core.url_to_fs(s3_prefix, **s3_server)
    fs.put(shapes["small"], f"{prefix}/small.rec")
    fs.put(shapes["small"][:-4] + ".idx", f"{prefix}/small.idx")
    try:
        out = run_example(
            ["examples/read_s3.py", f"s3://{prefix}/small.rec",
             "--endpoint-url", s3_server["endpoint_url"],
             "--key", s3_server["key"], "--secret", s3_server["secret"]]
        )  # fmt: skip
        assert f"read 96 images from s3://{prefix}/small.rec" in out
    finally:
        fs.rm(prefix, recursive=True)
