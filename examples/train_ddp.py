"""The same loop, data parallel: one process per core or GPU, launched by torchrun.

    torchrun --nproc-per-node 2 examples/train_ddp.py DATA.rec --epochs 2
    # several machines: the usual torchrun --nnodes/--node-rank/--rdzv-endpoint flags

Nothing here picks the shard: ImageRecordIter reads RANK and WORLD_SIZE that
torchrun sets, so each process reads its own disjoint part of every epoch and
all processes take the same number of steps. DDP averages the gradients.
At the end rank 0 prints one JSON line: per rank, the record ids it read in the
first epoch and a digest of its parameters (equal when the replicas agree).
"""

from __future__ import annotations

import argparse
import hashlib
import json

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from recio import ImageRecordIter
from recio.train.model import resnet

NORMALIZE = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.4, std_g=57.1, std_b=57.4)


def digest(model: torch.nn.Module) -> str:
    # Parameters only: batch-norm running stats are each rank's own until DDP's next
    # forward broadcasts rank 0's.
    h = hashlib.sha256()
    for _, p in model.named_parameters():
        h.update(p.detach().numpy().tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rec")
    parser.add_argument("--num-classes", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16, help="per process")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()
    size = args.image_size

    dist.init_process_group("gloo")  # "nccl" on GPUs
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(resnet(args.num_classes, 8, (1, 1), size))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    train_data = ImageRecordIter(
        path_imgrec=args.rec,
        data_shape=(3, size, size),
        batch_size=args.batch_size,
        shuffle=True,
        seed=7,  # the same seed on every rank: one epoch order, split by rank
        resize=size,
        rand_crop=True,
        rand_mirror=True,
        **NORMALIZE,
    )

    first_epoch_ids: list[int] = []
    for epoch in range(args.epochs):
        for batch in train_data:
            if epoch == 0:  # the padding that completes the last batch repeats records
                first_epoch_ids += batch.index[: len(batch.index) - batch.pad].tolist()
            x = torch.from_numpy(batch.data)
            y = torch.from_numpy(batch.label).long()
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch}: last loss {loss.item():.4f}", flush=True)
    train_data.close()
    report = {"rank": rank, "ids": first_epoch_ids, "digest": digest(model.module)}
    reports: list = [None] * dist.get_world_size()
    dist.all_gather_object(reports, report)  # one line from rank 0, not interleaved output
    if rank == 0:
        print(json.dumps(reports), flush=True)
    dist.barrier()  # gloo aborts a rank whose peer tears down first: meet, then part
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
