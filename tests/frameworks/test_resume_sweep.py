"""Resume from any step, under every framework: a state saved after step k of a run (k = 1 ..
2n - 1 over two epochs of n = 7 batches: every step of the first epoch, its boundary, and
every step of the second) continues with exactly the rest of that epoch and then whole
epochs, the record ids, the bytes of the images (random crops and flips, keyed by epoch) and
labels, and the framework's own step numbers of the uninterrupted run's. The last steps of
an epoch are saved while the next epoch's first batches are already queued on the pool
(NOTE [epoch overlap] in recio/pipeline/queued.py): the states are the consumer's, the
batches the same.

Lightning in one process and in two (DDP on CPU, gloo, under torchrun), with and without
``trainer.estimated_stepping_batches`` (a OneCycleLR sized from it; Lightning then sets the
loader up before it reads the checkpoint, and the DataModule keeps the loader's state as
examples/lightning_datamodule.py does); Accelerate's usual loop (epoch and step from a step
counter and ``len()``); torchdata's StatefulDataLoader in a loop over saved epochs. Before
``len(TorchBatches)`` was the whole epoch's count, Lightning dropped batches whenever fewer had
been taken than were left (from k = 5 of 7 it trained 4 of the 9 batches left in the two
epochs), Accelerate's loop started in the wrong epoch, and a StatefulDataLoader saved after an
epoch's last batch trained one epoch too many.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from tests._paths import REPO
from tests._train_data import env, make_shapes_rec, torchrun
from tests.conftest import _installed

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.needs_native
needs_lightning = pytest.mark.skipif(not _installed("lightning"), reason="needs lightning")
needs_accelerate = pytest.mark.skipif(not _installed("accelerate"), reason="needs accelerate")

N, EPOCHS, IMAGES = 7, 2, 112  # batch 16 on one rank, 8 on each of two: 7 steps an epoch
EVERY_K = list(range(1, EPOCHS * N))
# early, middle, late, the epoch boundary (after epoch 0's last batch), the next epoch
SOME_K = [1, 3, 6, 7, 10]


@pytest.fixture(scope="module")
def rec(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("sweep") / "tiny.rec"
    return make_shapes_rec(str(path), IMAGES, seed=4, sides=(8, 12))


def positions() -> list[list[int]]:
    return [[e, s] for e in range(EPOCHS) for s in range(N)]


def run_ranks(script: str, rec: str, workdir, ks: list[int], ranks: int, *flags: str) -> list:
    args = [script, rec, str(workdir), "--batch-size", str(IMAGES // N // ranks)]
    args += ["--ks", ",".join(map(str, ks)), *flags]
    if ranks == 1:
        cmd = [sys.executable, *args]
        proc = subprocess.run(cmd, cwd=REPO, env=env(), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    else:
        torchrun(args, timeout=600)
    return [json.loads((workdir / f"rank{r}.json").read_text()) for r in range(ranks)]


def check_shards(fulls: list[list[list]], ids_at: int) -> None:
    """Every epoch of the uninterrupted run: each record once, over all ranks."""
    for epoch in range(EPOCHS):
        ids = [i for full in fulls for b in full if b[0] == epoch for i in b[ids_at]]
        assert sorted(ids) == list(range(IMAGES))


# --- Lightning -----------------------------------------------------------------------------


def check_lightning(reports: list[dict], ks: list[int], estimate: bool) -> None:
    for report in reports:
        full = report["full"]
        # [epoch, step, batch_idx, ids]: Lightning's batch_idx is the iterator's step
        assert [b[:2] for b in full["batches"]] == positions()
        assert all(b[1] == b[2] for b in full["batches"])
        assert full["num_training_batches"] == N and full["global_step"] == EPOCHS * N
        assert full["estimated"] == (EPOCHS * N if estimate else None)
        assert set(full["len"].values()) == {N}
        for k in ks:
            resumed = report["resumed"][str(k)]
            assert resumed["batches"] == full["batches"][k:], f"resumed from step {k}"
            assert resumed["num_training_batches"] == N, f"resumed from step {k}"
            assert resumed["global_step"] == EPOCHS * N, f"resumed from step {k}"
            assert resumed["estimated"] == full["estimated"]
    check_shards([r["full"]["batches"] for r in reports], ids_at=3)


LIGHTNING_MODES = {
    "plain": [],  # Lightning restores the loader's state itself
    "estimated_stepping_batches": ["--estimate", "--datamodule-state"],
}


@needs_lightning
@pytest.mark.parametrize("mode", LIGHTNING_MODES)
def test_lightning_resumes_from_every_step(rec, tmp_path, mode):
    flags = LIGHTNING_MODES[mode]
    reports = run_ranks("tests/_lightning_resume.py", rec, tmp_path, EVERY_K, 1, *flags)
    check_lightning(reports, EVERY_K, "--estimate" in flags)


@needs_lightning
def test_lightning_ddp_resumes_from_early_middle_late_and_boundary_steps(rec, tmp_path):
    flags = [*LIGHTNING_MODES["estimated_stepping_batches"], "--devices", "2"]
    reports = run_ranks("tests/_lightning_resume.py", rec, tmp_path, SOME_K, 2, *flags)
    check_lightning(reports, SOME_K, estimate=True)


@pytest.mark.slow  # two processes, 13 resumed fits each way (about a minute each)
@needs_lightning
@pytest.mark.parametrize("mode", LIGHTNING_MODES)
def test_lightning_ddp_resumes_from_every_step(rec, tmp_path, mode):
    flags = [*LIGHTNING_MODES[mode], "--devices", "2"]
    reports = run_ranks("tests/_lightning_resume.py", rec, tmp_path, EVERY_K, 2, *flags)
    check_lightning(reports, EVERY_K, "--estimate" in flags)


# --- Accelerate ----------------------------------------------------------------------------


def check_accelerate(reports: list[dict], ks: list[int]) -> None:
    for report in reports:
        # [the loop's epoch, the loop's step, the batch's epoch, its step, ids]
        full = report["full"]["batches"]
        assert [b[:2] for b in full] == [b[2:4] for b in full] == positions()
        for k in ks:
            resumed = report["resumed"][str(k)]
            assert resumed["batches"] == full[k:], f"resumed from step {k}"
            assert resumed["len"]["after_load"] == N, f"resumed from step {k}"
    check_shards([r["full"]["batches"] for r in reports], ids_at=4)


@needs_accelerate
def test_accelerate_resumes_from_every_step(rec, tmp_path):
    reports = run_ranks("tests/_accelerate_resume.py", rec, tmp_path, EVERY_K, 1)
    check_accelerate(reports, EVERY_K)


@pytest.mark.slow  # two processes
@needs_accelerate
def test_accelerate_two_processes_resume_from_every_step(rec, tmp_path):
    reports = run_ranks("tests/_accelerate_resume.py", rec, tmp_path, EVERY_K, 2)
    check_accelerate(reports, EVERY_K)


# --- torchdata -----------------------------------------------------------------------------


def batch_bytes(batch) -> str:
    """A digest of a TorchBatch's images and labels: the same bytes, or not."""
    digest = hashlib.sha256(batch.data.contiguous().numpy().tobytes())
    digest.update(batch.label.contiguous().numpy().tobytes())
    return digest.hexdigest()


def stateful_loop(rec: str, saved: dict | None = None) -> tuple[list, dict[int, dict]]:
    """A loop over epochs with a StatefulDataLoader, saving {epoch, step, loader} each step.

    Returns the batches it trained, [loop epoch, loop step, batch epoch, batch step, ids,
    digest of the images and labels]
    (the loop's step counts on from the saved one), and the state saved after each count
    of batches.
    """
    from torchdata.stateful_dataloader import StatefulDataLoader

    from recio.frameworks.torch_data import TorchBatches
    from recio.pipeline.iterator import ImageRecordIter

    it = ImageRecordIter(
        path_imgrec=rec, data_shape=(3, 8, 8), batch_size=IMAGES // N, shuffle=True, seed=3,
        resize=8, rand_crop=True, rand_mirror=True, preprocess_threads=1,
    )  # fmt: skip
    with it:
        loader = StatefulDataLoader(TorchBatches(it), batch_size=None)
        start, taken, states, batches = 0, 0, {}, []
        if saved is not None:
            loader.load_state_dict(saved["loader"])
            start, taken = saved["epoch"], saved["step"]
        for epoch in range(start, EPOCHS):
            left = len(loader) - taken  # what a progress bar would expect
            before = len(batches)
            for step, batch in enumerate(loader, start=taken):
                ids = batch.index.tolist()
                batches.append([epoch, step, batch.epoch, batch.step, ids, batch_bytes(batch)])
                states[len(batches)] = {
                    "epoch": epoch, "step": step + 1, "loader": loader.state_dict()
                }  # fmt: skip
            assert len(batches) - before == left
            taken = 0
    return batches, states


def test_stateful_dataloader_resumes_from_every_step(rec):
    pytest.importorskip("torchdata")
    full, states = stateful_loop(rec)
    assert [b[:2] for b in full] == [b[2:4] for b in full] == positions()
    check_shards([full], ids_at=4)
    for k in EVERY_K:
        resumed, _ = stateful_loop(rec, states[k])
        assert resumed == full[k:], f"resumed from step {k}"
