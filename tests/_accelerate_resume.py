"""Accelerate's resume from every saved state of a run: run with python (one process) or under
torchrun (gloo). Used by tests/frameworks/test_resume_sweep.py.

    python tests/_accelerate_resume.py DATA.rec WORKDIR --batch-size 16 --ks 1,5,7

The loop is Accelerate's usual one: the epoch to start from and the batches already taken
in it come from a step counter and ``len(train)``; ``load_state`` puts the iterator where
the saved run was (no skipping). One uninterrupted run saves a state after every step and
records, on each rank, every batch as [the loop's epoch, the loop's step, the batch's epoch,
the batch's step, record ids, a digest of its images and labels]; then each k in ``--ks``
resumes from the state of step k.
Each rank writes WORKDIR/rank<R>.json: {"full": [...], "resumed": {k: [...]}, "len": {...}}.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os

import torch
from accelerate import Accelerator

from recio import ImageRecordIter
from recio.frameworks.torch_data import TorchBatches


def batch_bytes(batch) -> str:
    """A digest of the batch's images and labels: the same bytes, or not."""
    digest = hashlib.sha256(batch.data.contiguous().cpu().numpy().tobytes())
    digest.update(batch.label.contiguous().cpu().numpy().tobytes())
    return digest.hexdigest()


def run(args, save_dir: str | None, resume: int | None) -> dict:
    accelerator = Accelerator(cpu=True)  # a new one: it holds the models and objects saved
    model = torch.nn.Linear(3 * 8 * 8, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    it = ImageRecordIter(
        path_imgrec=args.rec, data_shape=(3, 8, 8), batch_size=args.batch_size, shuffle=True,
        seed=3, resize=8, rand_crop=True, rand_mirror=True, preprocess_threads=1,
    )  # fmt: skip
    train = TorchBatches(it, device=accelerator.device, label_dtype=torch.long)
    model, optimizer, train = accelerator.prepare(model, optimizer, train)
    accelerator.register_for_checkpointing(train)
    completed = 0
    if resume is not None:
        accelerator.load_state(os.path.join(args.workdir, f"step{resume}"))
        completed = resume  # what the user's own counter saved
    lengths = {"after_load": len(train)}
    first_epoch, taken = divmod(completed, len(train))
    batches = []
    for epoch in range(first_epoch, args.epochs):
        for step, batch in enumerate(train, start=taken if epoch == first_epoch else 0):
            real = len(batch.index) - batch.pad
            ids = batch.index[:real].tolist()
            batches.append([epoch, step, batch.epoch, batch.step, ids, batch_bytes(batch)])
            loss = torch.nn.functional.cross_entropy(model(batch.data.flatten(1)), batch.label)
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            completed += 1
            if save_dir is not None:
                accelerator.save_state(os.path.join(save_dir, f"step{completed}"))
        lengths[epoch] = len(train)
    train.close()
    accelerator.wait_for_everyone()
    return {"batches": batches, "len": lengths}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("rec")
    parser.add_argument("workdir")
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--ks", required=True, help="steps to resume from, e.g. 1,5,7")
    args = parser.parse_args()
    torch.manual_seed(0)
    report = {"full": run(args, args.workdir, None), "resumed": {}}
    for k in (int(k) for k in args.ks.split(",")):
        report["resumed"][k] = run(args, None, k)
    accelerator = Accelerator(cpu=True)
    with open(os.path.join(args.workdir, f"rank{accelerator.process_index}.json"), "w") as f:
        json.dump(report, f)
    accelerator.end_training()


if __name__ == "__main__":
    main()
