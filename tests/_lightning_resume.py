"""Lightning's resume from every checkpoint of a run: run with python (one process) or under
torchrun (DDP, gloo). Used by tests/frameworks/test_resume_sweep.py.

    python tests/_lightning_resume.py DATA.rec WORKDIR --batch-size 16 --ks 1,5,7
    torchrun --nproc-per-node 2 tests/_lightning_resume.py DATA.rec WORKDIR --devices 2 ...

One uninterrupted fit of ``--epochs`` epochs saves a checkpoint after every step and
records, on each rank, the (epoch, step, record ids, a digest of the images and labels) of
every batch trained; then, for each k in ``--ks``, a fresh Trainer, model and DataModule
resume from the checkpoint of global step k and record theirs. ``--estimate`` has
``configure_optimizers`` size a OneCycleLR from ``trainer.estimated_stepping_batches``
(Lightning then sets up the train loader before the checkpoint is read);
``--datamodule-state`` keeps the loader's state in the DataModule too, the way around that
(see examples/lightning_datamodule.py). Each rank writes WORKDIR/rank<R>.json: {"full":
[...], "resumed": {k: [...]}, "len": ..., "num_training_batches": {...}, "estimated": {...}}.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import warnings

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from recio import ImageRecordIter
from recio.frameworks.torch_data import TorchBatches


class Data(L.LightningDataModule):
    def __init__(self, rec: str, batch_size: int, keep_state: bool) -> None:
        super().__init__()
        self.rec, self.batch_size, self.keep_state = rec, batch_size, keep_state
        self.train = None

    def setup(self, stage: str) -> None:
        if self.train is None:
            it = ImageRecordIter(
                path_imgrec=self.rec, data_shape=(3, 8, 8), batch_size=self.batch_size,
                shuffle=True, seed=3, resize=8, rand_crop=True, rand_mirror=True,
                preprocess_threads=1,
            )  # fmt: skip
            self.train = TorchBatches(it, label_dtype=torch.long)

    def train_dataloader(self) -> TorchBatches:
        return self.train

    def state_dict(self) -> dict:
        return {"train": self.train.state_dict()} if self.keep_state and self.train else {}

    def load_state_dict(self, state: dict) -> None:
        if "train" in state:
            self.train.load_state_dict(state["train"])

    def teardown(self, stage: str) -> None:
        if self.train is not None:
            self.train.close()
        self.train = None


def batch_bytes(batch) -> str:
    """A digest of the batch's images and labels: the same bytes, or not."""
    digest = hashlib.sha256(batch.data.contiguous().numpy().tobytes())
    digest.update(batch.label.contiguous().numpy().tobytes())
    return digest.hexdigest()


class Model(L.LightningModule):
    def __init__(self, estimate: bool) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(3 * 8 * 8, 4)
        self.estimate = estimate
        self.trained: list = []
        self.estimated = None

    def training_step(self, batch, batch_idx):
        real = len(batch.index) - batch.pad
        ids = batch.index[:real].tolist()
        self.trained.append([batch.epoch, batch.step, batch_idx, ids, batch_bytes(batch)])
        logits = self.layer(batch.data.flatten(1))
        return torch.nn.functional.cross_entropy(logits, batch.label)

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.01)
        if not self.estimate:
            return optimizer
        self.estimated = self.trainer.estimated_stepping_batches
        schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.01, total_steps=self.estimated)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


def fit(args, ckpt_dir: str | None, resume: str | None) -> dict:
    callbacks = []
    if ckpt_dir:
        every = ModelCheckpoint(ckpt_dir, "{step}", every_n_train_steps=1, save_top_k=-1)
        callbacks.append(every)
    trainer = L.Trainer(
        accelerator="cpu", devices=args.devices, strategy="ddp" if args.devices > 1 else "auto",
        max_epochs=args.epochs, use_distributed_sampler=False, callbacks=callbacks,
        logger=False, enable_progress_bar=False, enable_model_summary=False,
        enable_checkpointing=bool(ckpt_dir), num_sanity_val_steps=0,
    )  # fmt: skip
    model = Model(args.estimate)
    data = Data(args.rec, args.batch_size, args.datamodule_state)
    length = {}

    class Lengths(L.Callback):  # len() as Lightning reads it when each epoch starts
        def on_train_epoch_start(self, trainer, pl_module):
            length[trainer.current_epoch] = len(data.train)

    trainer.callbacks.append(Lengths())
    trainer.fit(model, datamodule=data, ckpt_path=resume)
    return {
        "batches": model.trained,
        "num_training_batches": trainer.num_training_batches,
        "estimated": model.estimated,
        "global_step": trainer.global_step,
        "len": length,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("rec")
    parser.add_argument("workdir")
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--ks", required=True, help="global steps to resume from, e.g. 1,5,7")
    parser.add_argument("--estimate", action="store_true")
    parser.add_argument("--datamodule-state", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")  # Lightning's advice on workers and log intervals
    torch.manual_seed(0)

    ckpt = os.path.join(args.workdir, "ckpt")
    report = {"full": fit(args, ckpt, None), "resumed": {}}
    for k in (int(k) for k in args.ks.split(",")):
        report["resumed"][k] = fit(args, None, os.path.join(ckpt, f"step={k}.ckpt"))
    rank = int(os.environ.get("RANK", 0))
    with open(os.path.join(args.workdir, f"rank{rank}.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
