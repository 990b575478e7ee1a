"""The ``recio`` command: info, verify, index, and the stages' own subcommands.

Each stage module that has a command exposes ``add_arguments(parser)`` and
``run(args) -> int``; they are imported only when their command runs, so an
optional extra that is missing breaks only its own command.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections import Counter
from typing import NoReturn

# recio's commands do no linear algebra. Without this, numpy's OpenBLAS starts a thread per
# core at import and they spin for a while, taking CPU from the decode threads (about 4 % of
# an im2rec run on 2 cores). A value the user set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402  (after the OpenBLAS setting)

from . import __version__, storage
from .errors import RecordIOError
from .format import IR_HEADER_SIZE, format_idx_line, unpack_labels
from .reader import RecordFile, default_idx_path, scan_source

# command -> (module, one-line help)
STAGE_COMMANDS = {
    "im2rec": ("recio.im2rec", "convert an image folder or .lst into .rec/.idx (MXNet's im2rec)"),
    "bench": ("recio.bench", "measure the throughput of every pipeline stage"),
    "train": ("recio.train", "train the compact model on a .rec (needs the train extra: PyTorch)"),
}


# --- argument types shared by every recio command ---------------------------------------


def json_object(text: str) -> dict:
    """An argparse type: a JSON object (such as fsspec ``storage_options``)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object {{...}}, not {text!r}")
    return value


def at_least(minimum: int):
    """An argparse type: an integer no smaller than ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def positive_float(text: str) -> float:
    """An argparse type: a number greater than zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, not {text}")
    return value


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--storage-options JSON`` (fsspec options for remote URLs) to ``parser``."""
    parser.add_argument(
        "--storage-options",
        type=json_object,
        metavar="JSON",
        help="fsspec options for remote URLs as a JSON object, e.g. "
        '\'{"endpoint_url": "http://127.0.0.1:8333"}\'',
    )


def cmd_info(args: argparse.Namespace) -> int:
    """``recio info``: records, bytes, labels and whether the .idx agrees (1 if not)."""
    options = args.storage_options
    with RecordFile(args.rec, args.idx, storage_options=options) as rf:
        labels: Counter = Counter()
        widths: Counter = Counter()
        bad_headers = 0
        for i in range(len(rf)):
            payload = rf.read(i)
            if len(payload) < IR_HEADER_SIZE:
                bad_headers += 1
                continue
            flag = int(np.frombuffer(payload, np.uint32, 1)[0])
            label, _, _ = unpack_labels(payload, max(flag, 1))
            widths[max(flag, 1)] += 1
            if flag <= 1:
                labels[float(label[0])] += 1
        summary = {
            "file": rf.url,
            "bytes": rf.source.size,
            "records": len(rf),
            "index": rf.idx_url or "none (offsets from a scan)",
            "label_widths": dict(widths),
            "classes": len(labels),
        }
        if labels:
            counts = list(labels.values())
            summary["records_per_class"] = {"min": min(counts), "max": max(counts)}
        if bad_headers:
            summary["records_without_header"] = bad_headers
        if rf.idx_url is not None:
            scanned = scan_source(rf.source)
            agrees = sorted(rf.offsets.tolist()) == scanned
            summary["index_agrees"] = agrees
            if not agrees:
                summary["index_problem"] = (
                    f".idx has {len(rf)} entries, the file {len(scanned)} records; "
                    f"rebuild with `recio index {args.rec}`"
                )
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        print(f"{key:<{width}}  {value}")
    return 0 if summary.get("index_agrees", True) else 1


def cmd_verify(args: argparse.Namespace) -> int:
    """``recio verify``: walk every frame; 1 and the first problem if the file is damaged."""
    options = args.storage_options
    with storage.open_source(args.rec, options) as source:
        try:
            offsets = scan_source(source)
        except RecordIOError as exc:
            print(f"FAIL {exc}")
            return 1
    print(f"OK {args.rec}: {len(offsets)} records, {source.size} bytes")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    """``recio index``: scan the .rec and write its .idx (keys 0..N-1), atomically."""
    options = args.storage_options
    idx_url = args.idx or default_idx_path(args.rec)
    with storage.open_source(args.rec, options) as source:
        offsets = scan_source(source)
    out = storage.AtomicOutput(idx_url, options)
    try:
        out.write("".join(format_idx_line(i, o) for i, o in enumerate(offsets)).encode())
    except BaseException:
        out.abort()
        raise
    out.commit()
    print(f"wrote {idx_url}: {len(offsets)} records (keys 0..{len(offsets) - 1})")
    return 0


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE (see PROG --help)`` on stderr and exit with 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _add_debug_option(parser: argparse.ArgumentParser, dest: str = "debug") -> None:
    parser.add_argument(
        "--debug",
        dest=dest,
        action="store_true",
        help="on an error, print the whole traceback instead of one line (also RECIO_DEBUG=1)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``recio`` parser; stage commands are placeholders that parse their own arguments."""
    parser = Parser(prog="recio", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"recio {__version__}")
    _add_debug_option(parser, dest="debug_all")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = commands.add_parser("info", help="records, bytes, labels, and whether the .idx agrees")
    verify = commands.add_parser("verify", help="walk every frame; report the first problem")
    index = commands.add_parser("index", help="rebuild a missing or wrong .idx by scanning")
    for sub, func in ((info, cmd_info), (verify, cmd_verify), (index, cmd_index)):
        sub.add_argument("rec", help=".rec path or URL")
        if sub is not verify:
            sub.add_argument("--idx", help=".idx path or URL (default: beside the .rec)")
        add_storage_option(sub)
        _add_debug_option(sub)
        sub.set_defaults(func=func)

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
    try:
        # Stage commands parse their own arguments, so their modules load lazily.
        if command in STAGE_COMMANDS:
            module = importlib.import_module(STAGE_COMMANDS[command][0])
            sub = Parser(prog=f"recio {command}", description=module.__doc__)
            module.add_arguments(sub)
            _add_debug_option(sub)
            args = sub.parse_args(argv[1:])
            debug = debug or args.debug
            del args.debug  # the stage's run() takes only its own arguments
            return int(module.run(args) or 0)
        args = build_parser().parse_args(argv)
        debug = debug or args.debug or args.debug_all
        return args.func(args)
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
