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


def _storage_options(text: str | None) -> dict | None:
    return json.loads(text) if text else None


def _add_storage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage-options",
        metavar="JSON",
        help='fsspec options as JSON, e.g. \'{"endpoint_url": "http://127.0.0.1:8333"}\'',
    )


def cmd_info(args: argparse.Namespace) -> int:
    """``recio info``: records, bytes, labels and whether the .idx agrees (1 if not)."""
    options = _storage_options(args.storage_options)
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
    options = _storage_options(args.storage_options)
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
    options = _storage_options(args.storage_options)
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


def build_parser() -> argparse.ArgumentParser:
    """The ``recio`` parser; stage commands are placeholders that parse their own arguments."""
    parser = argparse.ArgumentParser(prog="recio", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"recio {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = commands.add_parser("info", help="records, bytes, labels, and whether the .idx agrees")
    verify = commands.add_parser("verify", help="walk every frame; report the first problem")
    index = commands.add_parser("index", help="rebuild a missing or wrong .idx by scanning")
    for sub, func in ((info, cmd_info), (verify, cmd_verify), (index, cmd_index)):
        sub.add_argument("rec", help=".rec path or URL")
        if sub is not verify:
            sub.add_argument("--idx", help=".idx path or URL (default: beside the .rec)")
        _add_storage_option(sub)
        sub.set_defaults(func=func)

    for name, (module_name, help_text) in STAGE_COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, add_help=False)
        sub.set_defaults(stage_module=module_name)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``recio`` with ``argv`` (default: the process's); the exit code, 2 on a read error."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    # Stage commands parse their own arguments, so their modules load lazily.
    if argv and argv[0] in STAGE_COMMANDS:
        module = importlib.import_module(STAGE_COMMANDS[argv[0]][0])
        sub = argparse.ArgumentParser(prog=f"recio {argv[0]}", description=module.__doc__)
        module.add_arguments(sub)
        return int(module.run(sub.parse_args(argv[1:])) or 0)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (RecordIOError, OSError) as exc:
        print(f"recio {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
