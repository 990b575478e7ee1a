"""Is training on the built-in sample input-bound or compute-bound on this machine?

    python tools/bench_train.py [--num-images 400] [--image-size 32] [--epochs 2]

Builds the sample dataset (coloured-shape JPEGs, 160-480 px) into a temporary
.rec, then for each model size trains a few epochs from local disk and prints
images/s, the share of step time spent waiting for data, and the verdict; it
also times the model alone on random data (``recio.train.bench_step``) and the
input pipeline alone, so the three numbers can be compared.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time

import torch

from recio.bench import build_sample_rec
from recio.pipeline.iterator import ImageRecordIter
from recio.train import TrainConfig, bench_step, train


def input_only(rec: str, image_size: int, batch_size: int, threads: int | None) -> float:
    """Images/s of ImageRecordIter alone (same augmentation as training), second epoch."""
    with ImageRecordIter(
        rec, (3, image_size, image_size), batch_size, shuffle=True, random_resized_crop=True,
        rand_mirror=True, mean_r=123.7, std_r=58.4, preprocess_threads=threads,
    ) as it:  # fmt: skip
        for _ in it:  # warm-up epoch: first-epoch header parsing, page cache
            pass
        start, images = time.perf_counter(), 0
        for batch in it:
            images += len(batch.label)
        return images / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-images", type=int, default=400)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--torch-threads", type=int, default=0, help="0: torch's default")
    parser.add_argument("--preprocess-threads", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    logging.basicConfig(level=logging.WARNING)
    size, n = args.image_size, args.batch_size
    results: dict = {"torch_threads": torch.get_num_threads(), "image_size": size, "runs": []}
    with tempfile.TemporaryDirectory(prefix="recio-bench-train-") as workdir:
        rec = build_sample_rec(workdir, args.num_images)
        results["input_only_images_per_s"] = input_only(rec, size, n, args.preprocess_threads)
        for width, blocks in ((8, (1, 1)), (16, (1, 1, 1)), (32, (2, 2, 2))):
            model = bench_step((n, 3, size, size), 4, steps=5, width=width, blocks=blocks)
            config = TrainConfig(
                rec, num_classes=4, image_size=size, batch_size=n, epochs=args.epochs,
                width=width, blocks=blocks, preprocess_threads=args.preprocess_threads,
            )  # fmt: skip
            epochs = train(config).epochs
            last = epochs[-1]  # the first epoch also reads every header once
            results["runs"].append(
                {
                    "model": f"resnet width {width} blocks {blocks}",
                    "model_only_images_per_s": model["images_per_s"],
                    "train_images_per_s": last.images_per_s,
                    "data_wait_fraction": last.data_wait_fraction,
                    "verdict": last.verdict,
                }
            )
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print(
        f"input pipeline alone: {results['input_only_images_per_s']:,.0f} images/s "
        f"({size}x{size}, batch {n}); torch threads {results['torch_threads']}"
    )
    for r in results["runs"]:
        print(
            f"{r['model']}: model alone {r['model_only_images_per_s']:,.0f} images/s, "
            f"training {r['train_images_per_s']:,.0f} images/s, "
            f"data wait {100 * r['data_wait_fraction']:.0f}%\n  {r['verdict']}"
        )


if __name__ == "__main__":
    main()
