"""The plain training loop under Hugging Face Accelerate, one process per core or GPU.

    accelerate launch --multi_gpu --num_processes 2 examples/accelerate_loop.py DATA.rec
    torchrun --nproc-per-node 2 examples/accelerate_loop.py DATA.rec --cpu  # CPU, gloo
    ... DATA.rec --save-state-at 100, later ... DATA.rec --resume state  # continue

(``accelerate launch --cpu`` starts one process, or several only through mpirun; torchrun
starts CPU processes, and ``Accelerator(cpu=True)`` makes them one gloo process group.)

The iterator is built after ``Accelerator()``, which sets up the process group, so each
process reads its own part of every epoch (recio takes the rank and world size from
torch.distributed) and all take the same number of steps.

``accelerator.prepare`` gets the ``TorchBatches`` along with the model and optimizer and
hands it back unchanged: Accelerate prepares only DataLoaders. Do not wrap it in a
``DataLoader`` and prepare that: Accelerate would shard it a second time (by default
rank 0 alone reads and splits its batches among the ranks), so ``TorchBatches`` refuses
to be iterated that way. ``device=accelerator.device`` puts the batches where the model
is. ``register_for_checkpointing`` makes ``save_state()``/``load_state()`` carry the
iterator's position, so ``--resume`` continues with exactly the next batches: the loop
below takes the epoch from the batches; a loop that counts its own steps gets the epoch
and the step in it from ``divmod(steps_done, len(train))`` (``len()`` is the whole
epoch's batch count, also after ``load_state``), and skips nothing.

``--record-ids DIR`` writes, per rank, the record ids of every batch it trained on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os

import torch
import torch.nn.functional as F
from accelerate import Accelerator

from recio import ImageRecordIter
from recio.frameworks.torch_data import TorchBatches
from recio.train.model import resnet

NORMALIZE = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.4, std_g=57.1, std_b=57.4)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rec")
    parser.add_argument("--num-classes", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16, help="per process")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--cpu", action="store_true", help="CPU processes (gloo), no GPU")
    parser.add_argument("--save-state-at", type=int, default=0, help="after this many steps")
    parser.add_argument("--state-dir", default="state")
    parser.add_argument("--resume", help="a directory written by --save-state-at")
    parser.add_argument("--record-ids", help="directory for each rank's record ids")
    args = parser.parse_args(argv)
    size = args.image_size

    accelerator = Accelerator(cpu=args.cpu)  # the process group is up from here on
    torch.manual_seed(0)
    model = resnet(args.num_classes, width=8, blocks=(1, 1), image_size=size)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    it = ImageRecordIter(
        path_imgrec=args.rec,
        data_shape=(3, size, size),
        batch_size=args.batch_size,  # per process
        shuffle=True,
        seed=7,  # the same on every rank: one epoch order, split by rank
        resize=size,
        rand_crop=True,
        rand_mirror=True,
        **NORMALIZE,
    )
    train = TorchBatches(it, device=accelerator.device, label_dtype=torch.long)
    model, optimizer, train = accelerator.prepare(model, optimizer, train)
    assert isinstance(train, TorchBatches)  # handed back as it was
    accelerator.register_for_checkpointing(train)

    step = 0
    if args.resume:
        accelerator.load_state(args.resume)  # model, optimizer and the iterator's position
    batches = []
    while True:
        for batch in train:  # the rest of the current epoch
            if args.record_ids:
                real = len(batch.index) - batch.pad  # padding repeats records
                pixels = hashlib.sha256(batch.data.cpu().numpy().tobytes()).hexdigest()[:16]
                batches.append([batch.epoch, batch.step, batch.index[:real].tolist(), pixels])
            loss = F.cross_entropy(model(batch.data), batch.label)
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            step += 1
            if step == args.save_state_at and not args.resume:
                accelerator.save_state(args.state_dir)
        accelerator.print(f"epoch {batch.epoch}: last loss {loss.item():.4f}")
        if batch.epoch + 1 >= args.epochs:
            break

    if args.record_ids:
        os.makedirs(args.record_ids, exist_ok=True)
        report = {
            "rank": accelerator.process_index,
            "world_size": accelerator.num_processes,
            "shard": [it.part_index, it.num_parts],
            "len": len(train),
            "batches": batches,
        }
        with open(os.path.join(args.record_ids, f"rank{accelerator.process_index}.json"), "w") as f:
            json.dump(report, f)
    train.close()
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
