"""A LightningDataModule over ImageRecordIter: Lightning trains on recio's batches as they are.

    python examples/lightning_datamodule.py DATA.rec --devices 2 --epochs 2
    python examples/lightning_datamodule.py DATA.rec --devices 2 --resume CKPT  # continue

What makes it drop-in:

* the iterator is built in ``setup()``, which Lightning calls on every rank after the
  process group is up, so it reads its own part of each epoch (recio takes the rank and
  world size from torch.distributed);
* ``train_dataloader()`` returns a ``TorchBatches``, not a ``DataLoader``: Lightning
  injects no ``DistributedSampler`` into it and shards nothing a second time;
  ``len()`` is the same on every rank, and is the whole epoch's batch count also after a
  resume, which is what Lightning compares its restored batch counter with;
* ``TorchBatches`` has ``state_dict()``/``load_state_dict()``, so every checkpoint holds
  the iterator's position and ``--resume`` continues with exactly the next batches, even
  from a checkpoint taken mid-epoch (the DataModule keeps it too, for the case Lightning
  misses: see ``RecordDataModule.state_dict``).

``--record-ids DIR`` writes, per rank, the record ids of every batch it trained on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import ModelCheckpoint

from recio import ImageRecordIter
from recio.frameworks.torch_data import TorchBatches
from recio.train.model import resnet

NORMALIZE = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.4, std_g=57.1, std_b=57.4)


class RecordDataModule(L.LightningDataModule):
    def __init__(self, rec: str, val: str | None, image_size: int, batch_size: int) -> None:
        super().__init__()
        self.rec, self.val, self.size, self.batch_size = rec, val, image_size, batch_size
        self.train_data = self.val_data = None

    def _iterator(self, rec: str, train: bool) -> TorchBatches:
        it = ImageRecordIter(
            path_imgrec=rec,
            data_shape=(3, self.size, self.size),
            batch_size=self.batch_size,  # per rank
            shuffle=train,
            seed=7,  # the same on every rank: one epoch order, split by rank
            resize=self.size,
            rand_crop=train,
            rand_mirror=train,
            preprocess_threads=2,
            **NORMALIZE,
        )
        return TorchBatches(it, label_dtype=torch.long)

    def setup(self, stage: str) -> None:
        if stage == "fit" and self.train_data is None:
            self.train_data = self._iterator(self.rec, train=True)
        if self.val and self.val_data is None:
            self.val_data = self._iterator(self.val, train=False)

    def train_dataloader(self) -> TorchBatches:
        return self.train_data

    def val_dataloader(self) -> TorchBatches | list:
        return self.val_data if self.val_data is not None else []  # [] : no validation

    # Lightning saves and restores the train loader's state itself (it is stateful). Saving
    # it with the DataModule too covers a Lightning bug: when configure_optimizers asks for
    # trainer.estimated_stepping_batches, as below, the loader is set up before the
    # checkpoint is read and never gets its state back (Lightning-AI/pytorch-lightning#20550).
    # Lightning calls load_state_dict after setup(); loading the same state twice is harmless.
    def state_dict(self) -> dict:
        return {"train": self.train_data.state_dict()} if self.train_data is not None else {}

    def load_state_dict(self, state: dict) -> None:
        if "train" in state:
            self.train_data.load_state_dict(state["train"])

    def teardown(self, stage: str) -> None:
        for data in (self.train_data, self.val_data):
            if data is not None:
                data.close()
        self.train_data = self.val_data = None


class Classifier(L.LightningModule):
    def __init__(self, num_classes: int, image_size: int, lr: float) -> None:
        super().__init__()
        self.model = resnet(num_classes, width=8, blocks=(1, 1), image_size=image_size)
        self.lr = lr

    def training_step(self, batch, batch_idx):
        loss = F.cross_entropy(self.model(batch.data), batch.label)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        real = len(batch.label) - batch.pad  # the last batch is padded to full size
        pred = self.model(batch.data).argmax(1)[:real]
        correct = (pred == batch.label[:real]).sum().float()
        self.log("val_correct", correct, reduce_fx="sum", sync_dist=True)

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)
        # len() of the train loader x epochs, the same when resumed mid-epoch
        steps = self.trainer.estimated_stepping_batches
        schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, self.lr, total_steps=steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class RecordIds(L.Callback):
    """Writes DIR/rank<R>.json: each trained batch's epoch, step, record ids and pixel digest."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir, self.batches = out_dir, []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        real = len(batch.index) - batch.pad  # padding repeats records
        pixels = hashlib.sha256(batch.data.numpy().tobytes()).hexdigest()[:16]
        self.batches.append([batch.epoch, batch.step, batch.index[:real].tolist(), pixels])

    def on_train_end(self, trainer, pl_module) -> None:
        data = trainer.datamodule.train_data
        report = {
            "rank": trainer.global_rank,
            "world_size": trainer.world_size,
            "shard": [data.iterator.part_index, data.iterator.num_parts],
            "len": len(data),
            "num_training_batches": trainer.num_training_batches,
            "batches": self.batches,
        }
        os.makedirs(self.out_dir, exist_ok=True)
        with open(os.path.join(self.out_dir, f"rank{trainer.global_rank}.json"), "w") as f:
            json.dump(report, f)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rec")
    parser.add_argument("--val")
    parser.add_argument("--num-classes", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16, help="per process")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--devices", type=int, default=1, help="processes (CPU: gloo)")
    parser.add_argument("--checkpoint-dir", default="checkpoints")
    parser.add_argument("--checkpoint-every", type=int, default=0, help="steps (0: epochs)")
    parser.add_argument("--resume", help="a checkpoint to continue from")
    parser.add_argument("--record-ids", help="directory for each rank's record ids")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    every = {"every_n_train_steps": args.checkpoint_every} if args.checkpoint_every else {}
    callbacks = [ModelCheckpoint(args.checkpoint_dir, "{epoch}-{step}", save_top_k=-1, **every)]
    if args.record_ids:
        callbacks.append(RecordIds(args.record_ids))
    trainer = L.Trainer(
        accelerator="cpu",
        devices=args.devices,
        strategy="ddp" if args.devices > 1 else "auto",
        max_epochs=args.epochs,
        # not needed for a TorchBatches (Lightning samples only DataLoaders), but says so
        use_distributed_sampler=False,
        callbacks=callbacks,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    data = RecordDataModule(args.rec, args.val, args.image_size, args.batch_size)
    model = Classifier(args.num_classes, args.image_size, args.lr)
    trainer.fit(model, datamodule=data, ckpt_path=args.resume)
    if trainer.is_global_zero:
        print(f"trained {trainer.current_epoch} epochs, {trainer.global_step} steps", flush=True)


if __name__ == "__main__":
    main()
