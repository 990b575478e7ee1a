"""A plain PyTorch training loop over ImageRecordIter: copy it and swap in your model.

    python examples/train_loop.py DATA.rec [--val VAL.rec] [--epochs 2]

Batches arrive as numpy arrays already decoded, cropped, flipped and
normalised; ``torch.from_numpy`` wraps them without a copy. Iterating the
iterator again starts the next epoch (reshuffled), and ``state_dict()`` saved
with the model lets a later run continue from the same batch.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from recio import ImageRecordIter
from recio.train.model import resnet

NORMALIZE = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.4, std_g=57.1, std_b=57.4)


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rec")
    parser.add_argument("--val")
    parser.add_argument("--num-classes", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--checkpoint", default="checkpoint.pt")
    args = parser.parse_args(argv)
    size = args.image_size

    train_data = ImageRecordIter(
        path_imgrec=args.rec,
        data_shape=(3, size, size),
        batch_size=args.batch_size,
        shuffle=True,
        resize=size,  # shorter side to `size`, then a centre (here: random) crop
        rand_crop=True,
        rand_mirror=True,
        **NORMALIZE,
    )
    model = resnet(args.num_classes, width=8, blocks=(1, 1), image_size=size)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)

    for epoch in range(args.epochs):
        model.train()
        total, count = 0.0, 0
        for batch in train_data:  # one epoch; the next `for` starts the next one
            x = torch.from_numpy(batch.data)
            y = torch.from_numpy(batch.label).long()
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, count = total + loss.item(), count + 1
        print(f"epoch {epoch}: train loss {total / count:.4f} ({count} batches)")

    # The iterator's state makes a resumed run read exactly the batches that come next.
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            **train_data.state_dict(),
        },
        args.checkpoint,
    )
    train_data.close()

    accuracy = float("nan")
    if args.val:
        model.eval()
        correct = seen = 0
        with (
            ImageRecordIter(
                path_imgrec=args.val,
                data_shape=(3, size, size),
                batch_size=args.batch_size,
                resize=size,
                **NORMALIZE,
            ) as val_data,
            torch.no_grad(),
        ):
            for batch in val_data:
                real = len(batch.label) - batch.pad  # the last batch is padded to full size
                pred = model(torch.from_numpy(batch.data)).argmax(1)[:real]
                correct += int((pred == torch.from_numpy(batch.label[:real]).long()).sum())
                seen += real
        accuracy = correct / seen
        print(f"validation top-1: {accuracy:.3f} on {seen} images")
    return accuracy


if __name__ == "__main__":
    main()
