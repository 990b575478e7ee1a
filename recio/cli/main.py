"""The ``recio`` command: its own subcommands (:mod:`.records`) and the stages'.

Each stage module that has a command exposes ``add_arguments(parser)`` and
``run(args) -> int``; they are imported only when their command runs, so an
optional extra that is missing breaks only its own command.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from .. import __version__
from .._args import Parser, Refused, add_debug_option, describe
from .records import add_commands

__all__ = ["build_parser", "main"]

# command -> (module, one-line help)
STAGE_COMMANDS = {
    "im2rec": ("recio.im2rec", "convert an image folder or .lst into .rec/.idx (MXNet's im2rec)"),
    "optimize": (
        "recio.cli.optimize",
        "rewrite a .rec with its JPEGs losslessly restart-marked (faster crop decodes)",
    ),
    "facebin": (
        "recio.im2rec.facebin",
        "read or write a face verification .bin (LFW, CFP-FP, AgeDB-30) from image pairs",
    ),
    "sample": (
        "recio.cli.sample",
        "write the small sample image folders the docs read (images/, faces/)",
    ),
    "bench": ("recio.bench", "measure the throughput of every pipeline stage"),
    "train": ("recio.train", "train the compact model on a .rec (needs the train extra: PyTorch)"),
}


RECIO_HELP = """\
recio: MXNet-compatible RecordIO (.rec/.idx) image datasets: inspect, check and index
them, convert image folders, measure the input pipeline, train a small model."""

RECIO_EPILOG = """\
examples:
  recio sample .                                        # images/ and faces/, the docs' data
  recio info data/train.rec
  recio verify data/train.rec
  recio index data/train.rec
  recio checksum data/train.rec                         # per-record CRC32C sidecar
  recio im2rec --list --recursive data/train images/    # folder -> data/train.lst
  recio im2rec data/train images/                       # .lst -> data/train.rec/.idx
  recio optimize data/train.rec data/opt/train.rec       # lossless, restart markers
  recio facebin write data/lfw.bin pairs.txt            # verification pairs -> .bin
  recio bench                                           # on the built-in sample
  recio train data/train.rec --val data/val.rec

`recio COMMAND --help` gives a command's options. .rec and .idx arguments are local paths
or fsspec URLs (s3://, hdfs://, webhdfs://, memory://, ...; see --storage-options).
An error is one line on stderr and exit status 2; --debug or RECIO_DEBUG=1 shows its
traceback instead."""


def build_parser() -> argparse.ArgumentParser:
    """The ``recio`` parser; stage commands are placeholders that parse their own arguments."""
    parser = Parser(prog="recio", description=RECIO_HELP, epilog=RECIO_EPILOG)
    parser.add_argument("--version", action="version", version=f"recio {__version__}")
    add_debug_option(parser, dest="debug_all")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    add_commands(commands)

    for name, (module_name, help_text) in STAGE_COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, add_help=False)
        sub.set_defaults(stage_module=module_name)
    return parser


def _debug_from_env() -> bool:
    return os.environ.get("RECIO_DEBUG", "").lower() not in ("", "0", "false", "no")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Run ``recio`` with ``argv`` (default: the process's); returns the exit code.

    The exit code is the command's own (0: fine, 1: a problem found or a refusal), 2 for a
    usage error or an error the command could not get past (a missing file, a read error,
    a bad value, a missing extra), said in one line on stderr; ``--debug`` or
    ``RECIO_DEBUG=1`` shows its traceback instead. 130 on Ctrl-C.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = _debug_from_env()
    while argv and argv[0] == "--debug":  # `recio --debug bench ...`
        debug = True
        argv.pop(0)
    command = argv[0] if argv else ""
    with warnings.catch_warnings():  # (restores showwarning after)
        warnings.showwarning = _one_line_warning(command)
        return _run(command, argv, debug)


def _one_line_warning(command: str):
    """A ``warnings.showwarning`` that says a warning as one line, as the errors are."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"recio {command}: warning: {_one_line(message)}", file=file or sys.stderr)

    return show


def _run(command: str, argv: list[str], debug: bool) -> int:
    try:
        # Stage commands parse their own arguments, so their modules load lazily.
        if command in STAGE_COMMANDS:
            module = importlib.import_module(STAGE_COMMANDS[command][0])
            sub = Parser(prog=f"recio {command}", description=describe(module.__doc__))
            module.add_arguments(sub)
            add_debug_option(sub)
            args = sub.parse_args(argv[1:])
            debug = debug or args.debug
            del args.debug  # the stage's run() takes only its own arguments
            return int(module.run(args) or 0)
        args = build_parser().parse_args(argv)
        debug = debug or args.debug or args.debug_all
        return args.func(args)
    except Refused as exc:
        print(f"recio {command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"recio {command}: interrupted", file=sys.stderr)
        return 130
    except (OSError, ValueError, ImportError) as exc:  # RecordIOError is a ValueError
        if debug:
            raise
        print(f"recio {command}: {_one_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
