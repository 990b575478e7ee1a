"""A training loop whose batches are decoded on the GPU by recio.gpu (nvJPEG via torchvision).

    python examples/gpu_train_loop.py DATA.rec [--device cuda] [--epochs 2] [--resume CKPT]

recio reads and shards the records, draws ImageRecordIter's crop windows, cuts each
restart-marked JPEG to its crop's segments, and torchvision decodes the batch on the
device; crop, resize, flip and normalisation run there in torch. No DataLoader: the
iterator is the loader, and its ``state_dict()`` saved with the model resumes at the same
batch. ``--device cpu`` runs the same code on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.nn.functional as F

from recio.gpu import ImageRecordIter
from recio.train.model import resnet

NORMALIZE = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.4, std_g=57.1, std_b=57.4)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rec")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--num-classes", type=int, default=5)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--checkpoint", default="checkpoint.pt")
    parser.add_argument("--resume", help="a checkpoint this script saved")
    args = parser.parse_args(argv)
    size, device = args.image_size, torch.device(args.device)

    data = ImageRecordIter(
        args.rec,
        data_shape=(3, size, size),
        batch_size=args.batch_size,
        shuffle=True,
        random_resized_crop=True,
        rand_mirror=True,
        device=device,
        **NORMALIZE,
    )
    model = resnet(args.num_classes, width=8, blocks=(1, 1), image_size=size).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    first = 0
    if args.resume and os.path.exists(args.resume):
        saved = torch.load(args.resume, weights_only=False)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        data.load_state_dict(saved["data"])  # the next batch is the one after the saved one
        first = saved["epochs"]
    with data:
        for epoch in range(first, args.epochs):
            total, count = 0.0, 0
            for batch in data:  # one epoch; batch.data is on the device, normalised, NCHW
                labels = torch.from_numpy(batch.label).long().to(device, non_blocking=True)
                loss = F.cross_entropy(model(batch.data), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total, count = total + loss.item(), count + 1
            print(f"epoch {epoch}: train loss {total / count:.4f} ({count} batches)")
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        torch.save({**state, "epochs": args.epochs, "data": data.state_dict()}, args.checkpoint)
    print(f"decoded {data.stats.decoded} images on {device}, saved {args.checkpoint}")


if __name__ == "__main__":
    main()
