"""``recio train`` / ``python -m recio.train``: the command line of the training core."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from .config import AMP_DTYPES, TrainConfig
from .loop import train

log = logging.getLogger("recio.train")

# --- command line -----------------------------------------------------------------------


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``recio train`` flags (also ``python -m recio.train``)."""
    p = parser
    p.add_argument("train_rec", metavar="DATA.rec", help="training .rec path or URL")
    p.add_argument("--val", dest="val_rec", metavar="VAL.rec", help="validation .rec")
    p.add_argument("--num-classes", type=int, default=0, help="default: largest label + 1")
    p.add_argument("--image-size", type=int, default=32, help="square input side (default 32)")
    p.add_argument("--batch-size", type=int, default=32, help="per process (default 32)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", type=float, default=1e-4, help="weight decay")
    p.add_argument("--lr-schedule", choices=("cosine", "step"), default="cosine")
    p.add_argument("--lr-steps", type=_ints, default=(30, 60, 90), help="epochs, e.g. 30,60")
    p.add_argument("--lr-factor", type=float, default=0.1)
    p.add_argument("--warmup-epochs", type=float, default=0.0)
    p.add_argument("--width", type=int, default=16, help="channels of the first stage")
    p.add_argument("--blocks", type=_ints, default=(1, 1, 1), help="blocks per stage, e.g. 2,2,2")
    p.add_argument("--no-augment", dest="augment", action="store_false",
                   help="no random resized crop or mirror")  # fmt: skip
    p.add_argument("--dtype", choices=sorted(AMP_DTYPES), default="float32")
    p.add_argument("--loss-scale", type=float, default=2.0**16, help="float16's initial scale")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--grad-compression", choices=("none", "2bit"), default="none")
    p.add_argument("--threshold", type=float, default=0.5, help="2-bit compression threshold")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: DALI decodes on the GPU and the model trains there")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", metavar="PATH", help="write checkpoints here")
    p.add_argument("--resume", metavar="PATH", help="continue from this checkpoint")
    p.add_argument("--checkpoint-every", type=int, default=0, help="steps (0: each epoch)")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps")
    p.add_argument("--preprocess-threads", type=int, default=None)
    p.add_argument("--prefetch-buffer", type=int, default=4)
    p.add_argument("--storage-options", type=json.loads, default=None, metavar="JSON")
    p.add_argument("--log-every", type=int, default=0, help="log the loss every N steps")
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

    parser = argparse.ArgumentParser(
        prog="python -m recio.train",
        description=recio.train.__doc__.split("\n\nModules:")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))
