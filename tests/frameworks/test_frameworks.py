"""The training frameworks with two CPU processes (gloo), run as users run them: Lightning's
DDP over examples/lightning_datamodule.py, Accelerate under torchrun over
examples/accelerate_loop.py. Each rank reads its own part of an epoch, ``len()`` agrees on
every rank, and a run resumed from a mid-epoch checkpoint continues with exactly the next
batches (record ids and pixels)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests._paths import REPO
from tests._train_data import env, torchrun
from tests.conftest import _installed

pytestmark = [
    pytest.mark.needs_native,
    pytest.mark.slow,  # two-process runs: 15-30 s each on two cores
]
needs_lightning = pytest.mark.skipif(
    not _installed("lightning"), reason="needs lightning (the frameworks extra)"
)
needs_accelerate = pytest.mark.skipif(
    not _installed("accelerate"), reason="needs accelerate (the frameworks extra)"
)

SMALL = 96  # images in the small shapes file; batch 8 on 2 ranks: 6 steps an epoch
COMMON = ["--batch-size", "8", "--image-size", "16", "--epochs", "2"]


def reports(out_dir) -> list[dict]:
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(2)]


def check_shards(runs: list[dict]) -> None:
    """Both ranks: their own shard, 6 batches an epoch, disjoint and complete in each epoch."""
    for rank, run in enumerate(runs):
        assert run["rank"] == rank and run["world_size"] == 2 and run["shard"] == [rank, 2]
        assert run["len"] == 6
        assert [b[:2] for b in run["batches"]] == [[e, s] for e in range(2) for s in range(6)]
    for epoch in range(2):
        ids = [[i for b in run["batches"] if b[0] == epoch for i in b[2]] for run in runs]
        assert len(ids[0]) == len(ids[1]) == SMALL // 2
        assert not set(ids[0]) & set(ids[1]) and set(ids[0]) | set(ids[1]) == set(range(SMALL))
    assert runs[0]["batches"][0][2] != runs[0]["batches"][6][2]  # reshuffled


def check_resumed(full: list[dict], resumed: list[dict], first: tuple[int, int]) -> None:
    """The resumed run's batches are the full run's from (epoch, step) ``first`` on."""
    for whole, rest in zip(full, resumed, strict=True):
        start = [b[:2] for b in whole["batches"]].index(list(first))
        assert rest["batches"] == whole["batches"][start:]
        # len() of the resumed epoch: the whole epoch's, as the framework counts
        assert rest["shard"] == whole["shard"] and rest["len"] == 6


@needs_lightning
def test_lightning_ddp_shards_once_and_resumes_mid_epoch(shapes, tmp_path):
    def fit(*args: str) -> str:
        cmd = [sys.executable, "examples/lightning_datamodule.py", shapes["small"], *COMMON]
        cmd += ["--devices", "2", *args]
        proc = subprocess.run(cmd, cwd=REPO, env=env(), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc.stdout

    ckpt = tmp_path / "ckpt"
    out = fit("--checkpoint-dir", str(ckpt), "--checkpoint-every", "3",
              "--record-ids", str(tmp_path / "full"))  # fmt: skip
    assert "trained 2 epochs, 12 steps" in out
    full = reports(tmp_path / "full")
    check_shards(full)
    assert all(run["num_training_batches"] == 6 for run in full)  # Lightning's own count

    # global step 9: epoch 1 after its third batch; the iterator's state is in the checkpoint
    torch = pytest.importorskip("torch")
    saved = torch.load(ckpt / "epoch=1-step=9.ckpt", weights_only=False)
    assert saved["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    resume = ["--resume", str(ckpt / "epoch=1-step=9.ckpt")]
    out = fit("--checkpoint-dir", str(tmp_path / "ckpt2"), *resume,
              "--record-ids", str(tmp_path / "resumed"))  # fmt: skip
    assert "trained 2 epochs, 12 steps" in out
    check_resumed(full, reports(tmp_path / "resumed"), (1, 3))


@needs_accelerate
def test_accelerate_shards_once_and_resumes_from_save_state(shapes, tmp_path):
    def run(*args: str) -> str:
        script = ["examples/accelerate_loop.py", shapes["small"], "--cpu", *COMMON, *args]
        return torchrun(script, timeout=300).stdout

    out = run("--save-state-at", "9", "--state-dir", str(tmp_path / "state"),
              "--record-ids", str(tmp_path / "full"))  # fmt: skip
    full = reports(tmp_path / "full")
    check_shards(full)
    resumed_out = run("--resume", str(tmp_path / "state"), "--record-ids", str(tmp_path / "res"))
    check_resumed(full, reports(tmp_path / "res"), (1, 3))
    # model, optimizer and data all continued: the last loss is the full run's
    last = [line for line in out.splitlines() if line.startswith("epoch 1: last loss")]
    assert last and last == [ln for ln in resumed_out.splitlines() if ln.startswith("epoch 1:")]


@needs_accelerate
def test_accelerate_refuses_a_prepared_dataloader_on_every_rank(shapes):
    proc = torchrun(["tests/_accelerate_prepared.py", shapes["small"]], timeout=240)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["rank"] for r in lines) == [0, 1]
    ids = []
    for r in lines:
        assert r["unchanged"] and r["wrapper"] == "DataLoaderDispatcher"
        assert "would shard it again" in r["error"] and "pass the TorchBatches itself" in r["error"]
        ids.append(set(r["ids"]))
    assert not ids[0] & ids[1] and ids[0] | ids[1] == set(range(SMALL))
