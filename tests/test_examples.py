"""The example programs under examples/, run as users run them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ._paths import REPO
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


def _readme_block(heading: str) -> str:
    """The first ```python block after ``heading`` in README.md."""
    text = (REPO / "README.md").read_text()
    after = text[text.index(heading) :]
    start = after.index("```python\n") + len("```python\n")
    return after[start : after.index("```", start)]


def _readme_data(tmp_path: Path) -> None:
    """data/train.rec and its .idx under ``tmp_path``, as README's snippets read them."""
    from recio.bench.sample import build_sample_rec

    data = tmp_path / "data"
    data.mkdir()
    rec = build_sample_rec(str(tmp_path), num_images=24)
    Path(rec).rename(data / "train.rec")
    Path(rec[:-4] + ".idx").rename(data / "train.idx")


@pytest.mark.slow  # 90 epochs of 128 images of 224x224 float32 (~15 s)
@needs_torch
def test_readme_iterator_snippet_runs_as_pasted(tmp_path):
    """README's ImageRecordIter snippet, unchanged, on a small data/train.rec of its own."""
    import subprocess
    import sys

    _readme_data(tmp_path)
    snippet = _readme_block("## Reading in a training loop")
    check = "\nassert it.state_dict()['epoch'] == 90 and it.stats.decoded == 90 * 24\n"
    proc = subprocess.run(
        [sys.executable, "-c", snippet + check], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_readme_recordio_snippet_runs_as_pasted(tmp_path):
    import subprocess
    import sys

    snippet = _readme_block("## RecordIO files").replace("jpeg_bytes", "b'not really a jpeg'")
    proc = subprocess.run(
        [sys.executable, "-c", snippet + "\nassert bytes(image_bytes) == b'not really a jpeg'\n"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


@needs_torch
def test_readme_record_dataset_snippet_runs_as_pasted(tmp_path):
    """README's RecordDataset snippet, unchanged, on a face dataset of its own (1 rank)."""
    import subprocess
    import sys

    from tests.faces import write_faces

    (tmp_path / "data").mkdir()
    face = write_faces(tmp_path / "data", (3, 1, 2), size=112, name="train")
    init = (
        "import os, torch.distributed as td\n"
        "os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=os.environ['PORT'])\n"
        "td.init_process_group('gloo', rank=0, world_size=1)\n"
    )
    snippet = _readme_block("## Face-recognition datasets")
    check = (
        "\nassert images.shape[1:] == (3, 112, 112) and str(labels.dtype) == 'torch.int64'"
        f"\nassert len(ds) == {face.num_images} and ds.num_classes == 3\n"
    )
    from tests._train_data import free_port

    env = {**os.environ, "PORT": str(free_port())}
    proc = subprocess.run(
        [sys.executable, "-c", init + snippet + check],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
