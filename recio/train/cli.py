"""``recio train`` / ``python -m recio.train``: the command line of the training core."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from .._args import Parser, add_storage_option, describe
from .config import AMP_DTYPES, TrainConfig
from .loop import train

log = logging.getLogger("recio.train")

# --- command line -----------------------------------------------------------------------


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v)


EPILOG = """\
examples:
  recio train data/train.rec --val data/val.rec --epochs 10 --image-size 64
  recio train data/train.rec --dtype bfloat16 --channels-last --batch-size 128
  recio train data/train.rec --checkpoint run.pt --max-steps 500     # stop after 500 steps
  recio train data/train.rec --resume run.pt --checkpoint run.pt      # carry on from there
  recio train data/train.rec --device cuda                  # DALI decodes on the GPU
  torchrun --nproc-per-node 2 -m recio.train data/train.rec --grad-compression 2bit"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``recio train`` flags (also ``python -m recio.train``), and examples as the epilog."""
    p = parser
    if p.epilog is None:
        p.epilog = EPILOG
    p.add_argument(
        "train_rec",
        metavar="DATA.rec",
        help="training .rec path or URL, or shards: a pattern "
        "(train-{00000..00007}-of-00008.rec), a quoted glob, or STEM for STEM-*-of-*.rec",
    )

    p.add_argument(
        "--val", dest="val_rec", metavar="VAL.rec", help="validation .rec or shards (top-1)"
    )
    p.add_argument(
        "--num-classes",
        type=int,
        default=0,
        metavar="N",
        help="classes; 0: the largest label in DATA.rec plus 1",
    )
    p.add_argument(
        "--image-size", type=int, default=32, metavar="PX", help="side of the square input images"
    )
    p.add_argument("--batch-size", type=int, default=32, metavar="B", help="images per process")
    p.add_argument("--epochs", type=int, default=1, help="passes over DATA.rec")
    p.add_argument("--lr", type=float, default=0.1, help="learning rate (after any warm-up)")
    p.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    p.add_argument("--wd", type=float, default=1e-4, help="weight decay")
    p.add_argument(
        "--lr-schedule",
        choices=("cosine", "step"),
        default="cosine",
        help="cosine: down to 0 at the last epoch; step: times --lr-factor at each of --lr-steps",
    )
    p.add_argument(
        "--lr-steps",
        type=_ints,
        default="30,60,90",
        metavar="E,E,...",
        help="epochs where the step schedule lowers the learning rate",
    )
    p.add_argument("--lr-factor", type=float, default=0.1, help="the step schedule's factor")
    p.add_argument(
        "--warmup-epochs",
        type=float,
        default=0.0,
        metavar="E",
        help="linear warm-up of the learning rate over this many epochs",
    )
    p.add_argument("--width", type=int, default=16, help="channels of the model's first stage")
    p.add_argument(
        "--blocks", type=_ints, default="1,1,1", metavar="N,N,N", help="residual blocks per stage"
    )
    p.add_argument(
        "--no-augment",
        dest="augment",
        action="store_false",
        help="train without the random resized crop and mirror (they are on by default)",
    )
    p.add_argument(
        "--dtype",
        choices=sorted(AMP_DTYPES),
        default="float32",
        help="autocast type of the convolutions; weights stay float32",
    )
    p.add_argument(
        "--loss-scale", type=float, default=2.0**16, help="float16's initial dynamic loss scale"
    )
    p.add_argument(
        "--channels-last",
        action="store_true",
        help="keep the model and batches in channels-last (NHWC) memory format "
        "(default: channels first)",
    )
    p.add_argument(
        "--grad-compression",
        choices=("none", "2bit"),
        default="none",
        help="2bit: MXNet's 2-bit gradient compression of DDP's gradients",
    )
    p.add_argument("--threshold", type=float, default=0.5, help="2-bit compression threshold")
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cuda: DALI decodes on the GPU and the model trains there",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the model, order and crops")
    p.add_argument("--checkpoint", metavar="PATH", help="write checkpoints here")
    p.add_argument("--resume", metavar="PATH", help="continue from this checkpoint")
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        metavar="STEPS",
        help="checkpoint every this many steps; 0: at the end of each epoch",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=0,
        metavar="STEPS",
        help="stop (and checkpoint) after this many steps in all; 0: no limit",
    )
    p.add_argument(
        "--preprocess-threads",
        type=int,
        default=None,
        metavar="N",
        help="decode threads per process (default: the usable cores)",
    )
    p.add_argument(
        "--prefetch-buffer",
        type=int,
        default=4,
        metavar="N",
        help="batches the iterator decodes ahead",
    )
    add_storage_option(p)
    p.add_argument(
        "--log-every",
        type=int,
        default=0,
        metavar="STEPS",
        help="log the loss every this many steps; 0: never",
    )
    p.add_argument("--report", metavar="PATH", help="write the result as JSON (rank 0)")


def run(args: argparse.Namespace) -> int:
    """Train as ``args`` say; rank 0 writes ``--report``. The exit code: 2 for a failed run."""
    rank = int(os.environ.get("RANK", "0"))
    logging.basicConfig(
        level=logging.INFO if rank == 0 else logging.WARNING,
        format="%(message)s" if rank == 0 else f"[rank {rank}] %(message)s",
    )
    options = {k: v for k, v in vars(args).items() if k not in ("report",)}
    try:
        config = TrainConfig(**options)
        result = train(config)
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"recio train: {exc}", file=sys.stderr)
        return 2
    if args.report and rank == 0:
        with open(args.report, "w") as f:
            json.dump(result.to_dict(), f, indent=1)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m recio.train``: parse ``argv`` and train; returns the exit code."""
    import recio.train

    parser = Parser(prog="python -m recio.train", description=describe(recio.train.__doc__))
    add_arguments(parser)
    return run(parser.parse_args(argv))
