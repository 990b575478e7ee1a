"""``recio info``, ``verify``, ``index`` and ``checksum``: a dataset's ``.rec`` files, walked.

Each command walks a ``.rec`` with :func:`~recio.records.scan.walk_records` (the walk the
readers index a file with): ``info`` summarises what it found, ``verify`` reports the
first problem (then each record against its checksum sidecar), ``index`` writes the
``.idx`` of the records walked, and ``checksum`` writes the sidecar. Each takes a set of
shards too, one shard after another.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import NamedTuple

import numpy as np

from .. import storage
from .._args import Refused, add_debug_option, add_storage_option
from ..errors import RecordIOError
from ..records.checksum import load_sidecar, record_crcs, sidecar_path, write_sidecar
from ..records.file import RecordFile
from ..records.format import format_idx_line
from ..records.index import default_idx_path
from ..records.index_check import (
    check_idx,
    counted,
    damaged_tail,
    index_keys,
    records_left_out,
)
from ..records.samples import detect_layout, sample_classes
from ..records.scan import walk_records
from ..records.shard_names import expand_shards, is_shard_spec
from ..records.shards import open_records
from ..sampling.identity_mix import mix_table

__all__ = [
    "add_commands",
    "check_idx",
    "cmd_checksum",
    "cmd_index",
    "cmd_info",
    "cmd_verify",
    "index_keys",
    "unfinished_writes",
]


def unfinished_writes(rec: str, idx_url: str | None, options: dict | None) -> str | None:
    """What ``info`` and ``verify`` say of the ``.partial`` files beside a dataset, if any.

    The hidden temporaries of writers of the ``.rec``, its ``.idx`` and its checksum
    sidecar that did not finish (NOTE [partial owners] in :mod:`recio.storage.partials`).
    """
    idx_url = idx_url or default_idx_path(rec)
    outputs = dict.fromkeys([rec, idx_url, sidecar_path(rec, idx_url)])
    lines = []
    for output in outputs:
        found = storage.find_partials(output, options)
        if found:
            lines.append(storage.describe_partials(found, output))
    return "; ".join(lines) or None


# --- the commands --------------------------------------------------------------------------


def cmd_info(args: argparse.Namespace) -> int:
    """``recio info``: records, bytes, labels, damage, whether the .idx agrees (1 if not).

    For several shards: each shard's summary, then the totals over all of them.
    """
    options = args.storage_options
    shards = _shard_urls(args)
    if shards is None:
        info = _info(args.rec[0], args.idx, options)
        _print_summary(info.summary)
        if args.shuffle:
            _print_mixing(args.rec[0], args)
        return 0 if info.ok else 1
    infos = []
    for k, url in enumerate(shards):
        print(f"== shard {k} of {len(shards)}: {url}")
        infos.append(_info(url, None, options))
        _print_summary(infos[-1].summary, indent="  ")
    labels: Counter = Counter()
    widths: Counter = Counter()
    for info in infos:
        labels.update(info.labels)
        widths.update(info.widths)
    bad = [url for url, info in zip(shards, infos, strict=True) if not info.ok]
    total: dict = {
        "shards": len(shards),
        "bytes": sum(i.summary["bytes"] for i in infos),
        "records": sum(i.summary["records"] for i in infos),
    }
    if bad:
        total["shards_with_problems"] = f"{len(bad)} (first: {bad[0]})"
    total["label_widths"] = dict(widths)
    total["classes"] = len(labels)
    if labels:
        counts = list(labels.values())
        total["records_per_class"] = {"min": min(counts), "max": max(counts)}
    if all(info.readable for info in infos):
        total.update(_layout_summary(shards, None, options))
    print(f"== total: {' '.join(args.rec)}")
    _print_summary(total, indent="  ")
    if args.shuffle:
        _print_mixing(shards, args)
    return 1 if bad else 0


def _shard_urls(args: argparse.Namespace) -> list[str] | None:
    """The shards the ``rec`` arguments name, or None for one plain file (no I/O for it)."""
    if len(args.rec) == 1 and not is_shard_spec(args.rec[0]):
        found = expand_shards(args.rec[0], args.storage_options)
        if found == args.rec:
            return None
    found = expand_shards(args.rec, args.storage_options)
    if getattr(args, "idx", None) is not None:
        raise ValueError(
            f"--idx names one .idx, but {len(found)} shards are given: each shard's .idx is "
            "the one beside it"
        )
    return found


class _Info(NamedTuple):
    summary: dict
    labels: Counter  # first label -> records (flag 0 or 1)
    widths: Counter  # label width -> records
    ok: bool  # readable, and the checksum sidecar (if any) is of this write
    readable: bool  # not damaged, and the .idx (if any) agrees


def _print_summary(summary: dict, indent: str = "") -> None:
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        print(f"{indent}{key:<{width}}  {value}")


def _info(rec: str, idx_url: str | None, options: dict | None) -> _Info:
    """What ``recio info`` says of one ``.rec``."""
    with storage.open_source(rec, options) as source:
        walk = walk_records(source, headers=True)
        size = source.size
    if idx_url is None:
        candidate = default_idx_path(rec)
        idx_url = candidate if storage.exists(candidate, options) else None
    summary: dict = {"file": rec, "bytes": size, "records": len(walk.offsets)}
    problem = None
    if idx_url is not None:
        _, problem = check_idx(idx_url, options, walk, rec, size)
    if walk.error is not None:
        hint = (
            f"; `recio index --prefix-only {rec}` indexes them"
            if idx_url is None or problem is not None
            else f"; {idx_url} lists them"
        )
        summary["damaged"] = (
            f"{walk.error}; {walk.intact(rec)} can be read, the last {size - walk.end} "
            f"bytes cannot{hint}"
        )
    summary["index"] = idx_url or "none (offsets from a scan)"
    if idx_url is not None:
        summary["index_agrees"] = problem is None
        if problem is not None:
            fix = "--prefix-only " if walk.error is not None else ""
            summary["index_problem"] = f"{problem}; rebuild it with `recio index {fix}{rec}`"
    labels: Counter = Counter()
    widths: Counter = Counter()
    no_header = 0
    for header in walk.headers:
        if header is None:
            no_header += 1
            continue
        flag, label, _ = header
        widths[max(flag, 1)] += 1
        if flag <= 1:
            labels[label] += 1
    summary["label_widths"] = dict(widths)
    summary["classes"] = len(labels)
    if labels:
        counts = list(labels.values())
        summary["records_per_class"] = {"min": min(counts), "max": max(counts)}
    if no_header:
        summary["records_without_header"] = no_header
    readable = walk.error is None and problem is None
    stale = None
    if readable:
        summary.update(_layout_summary(rec, idx_url, options))
        stale = _stale_sidecar(rec, idx_url, len(walk.offsets), size, options)
        if stale is not None:
            summary["checksums"] = stale
    unfinished = unfinished_writes(rec, idx_url, options)
    if unfinished is not None:
        summary["unfinished_writes"] = unfinished
    return _Info(summary, labels, widths, readable and stale is None, readable)


def _stale_sidecar(
    rec: str, idx_url: str | None, count: int, size: int, options: dict | None
) -> str | None:
    """What is wrong with the checksum sidecar of ``rec`` (None: none, or it fits).

    A sidecar of another write (its record count or ``.rec`` size differs, e.g. after the
    ``.rec`` was rewritten by hand) makes readers refuse the file by default, so ``info``
    says so on a line of its own, while still describing the records.
    """
    try:
        sidecar = load_sidecar(sidecar_path(rec, idx_url), options)
        if sidecar is not None:
            sidecar.check_matches(count, rec, size, idx_url)
    except RecordIOError as exc:
        return f"{exc} (readers refuse {rec} unless verify_checksums=False)"
    return None


def _layout_summary(rec: str | list[str], idx_url: str | None, options: dict | None) -> dict:
    """The ``layout`` line of ``recio info`` (and the classes an InsightFace header gives).

    Read without checksums: a stale sidecar is reported on its own line (_stale_sidecar),
    and it does not make the layout unreadable.
    """
    try:
        with open_records(rec, idx_url, storage_options=options, verify_checksums=False) as records:
            layout = detect_layout(records)
            found = {"layout": layout.describe()}
            if layout.num_classes is not None:
                found["classes"] = layout.num_classes
            return found
    except RecordIOError as exc:
        return {"layout": f"unreadable: {exc}"}


def _print_mixing(rec: str | list[str], args: argparse.Namespace) -> None:
    """``--shuffle``: how mixed each order's batches are (:mod:`recio.sampling.identity_mix`)."""
    orders = [o.strip() for o in args.shuffle.split(",") if o.strip()]
    with open_records(rec, args.idx, storage_options=args.storage_options) as records:
        layout = detect_layout(records)
        classes = sample_classes(records, layout)
    rows = mix_table(classes, orders, args.batch_size, args.seed)
    print(
        f"identity mixing, batches of {args.batch_size} over {len(classes)} samples of "
        f"{len(np.unique(classes))} identities:"
    )
    print(f"  {'order':<14} {'identities/batch':>17} {'fewest':>7} {'top share':>10} {'worst':>7}")
    for row in rows:
        print(
            f"  {row.order:<14} {row.distinct_mean:>17.1f} {row.distinct_min:>7} "
            f"{row.top_share_mean:>10.1%} {row.top_share_max:>7.1%}"
        )


def cmd_verify(args: argparse.Namespace) -> int:
    """``recio verify``: walk every frame; 1 and the first problem if the file is damaged.

    For several shards: a line for each, then one for all of them.
    """
    shards = _shard_urls(args)
    if shards is None:
        return 0 if _verify(args.rec[0], args.storage_options) is not None else 1
    found = [_verify(url, args.storage_options) for url in shards]
    bad = [url for url, f in zip(shards, found, strict=True) if f is None]
    if bad:
        print(f"FAIL {len(bad)} of {len(shards)} shards damaged (first: {bad[0]})")
        return 1
    records, size = (sum(f[i] for f in found) for i in (0, 1))
    print(f"OK {len(shards)} shards: {records} records, {size} bytes")
    return 0


def _verify(rec: str, options: dict | None) -> tuple[int, int] | None:
    """Verify one ``.rec`` and print its line: (records, bytes), or None if damaged.

    The frames first; then, where the ``.rec`` has a checksum sidecar, every record
    against its checksum (a line for each that does not match). Unfinished writes
    beside it (``.partial`` files) get a line of their own, not a FAIL.
    """
    unfinished = unfinished_writes(rec, None, options)
    if unfinished is not None:
        print(f"NOTE {rec}: {unfinished}")
    with storage.open_source(rec, options) as source:
        walk = walk_records(source)
        if walk.error is not None:
            print(
                f"FAIL {rec}: {walk.error}; {walk.intact(rec)} are whole "
                f"(`recio index --prefix-only {rec}` indexes them)"
            )
            return None
        offsets, size = walk.offsets, source.size
    left_out = records_left_out(rec, offsets, options)
    if left_out is not None:
        print(f"FAIL {rec}: {left_out}")
        return None
    checked = _verify_checksums(rec, options)
    if checked is None:
        return None
    print(f"OK {rec}: {len(offsets)} records, {size} bytes{checked}")
    return len(offsets), size


_SHOWN = 20  # mismatches listed one by one


def _verify_checksums(rec: str, options: dict | None) -> str | None:
    """Check each record of ``rec`` against its sidecar; print a line per mismatch.

    Returns what to add to the OK line ("" without a sidecar), or None after FAIL lines.
    """
    with RecordFile(rec, storage_options=options, verify_checksums=False) as records:
        path = sidecar_path(records.url, records.idx_url)
        try:
            sidecar = load_sidecar(path, options)
            if sidecar is None:
                return ""
            sidecar.check_matches(len(records), records.url, records.size, records.idx_url)
        except RecordIOError as exc:
            print(f"FAIL {rec}: {exc}")
            return None
        crcs = record_crcs(records)
        bad = np.flatnonzero(crcs != sidecar.table)
        if bad.size and not records.is_local:  # damaged on the way? fetch those again
            crcs[bad] = record_crcs(records, bad)
            bad = np.flatnonzero(crcs != sidecar.table)
        for position in bad[:_SHOWN].tolist():
            error = sidecar.mismatch(records, position, int(crcs[position]))
            print(f"FAIL {rec}: {error} (key {records.keys[position]})")
        if bad.size:
            more = f", {bad.size - _SHOWN} more not listed" if bad.size > _SHOWN else ""
            print(
                f"FAIL {rec}: {counted(int(bad.size), 'record')} of {len(records)} "
                f"{'does' if bad.size == 1 else 'do'} not match the checksums in {path}{more}"
            )
            return None
    return f", {len(crcs)} checksums match ({path})"


def cmd_checksum(args: argparse.Namespace) -> int:
    """``recio checksum``: write the checksum sidecar of each ``.rec`` (see ``CHECKSUM_HELP``).

    For several shards: each shard's beside it; a shard refused does not stop the others.
    """
    return _per_shard(args, _checksum, "checksum")


def _per_shard(args: argparse.Namespace, one, command: str) -> int:
    """``one(url, args)`` for the .rec, or for each of its shards.

    A shard refused does not stop the others; it makes the exit status 1.
    """
    shards = _shard_urls(args)
    if shards is None:
        return one(args.rec[0], args)
    refused = 0
    for url in shards:
        try:
            one(url, args)
        except Refused as exc:
            print(f"recio {command}: {exc}", file=sys.stderr)
            refused += 1
    if refused:
        print(f"{refused} of {len(shards)} shards refused", file=sys.stderr)
    return 1 if refused else 0


def _checksum(rec: str, args: argparse.Namespace) -> int:
    """Write one ``.rec``'s sidecar; an existing one is replaced only with --force."""
    options = args.storage_options
    with RecordFile(rec, args.idx, storage_options=options, verify_checksums=False) as records:
        path = sidecar_path(records.url, records.idx_url)
        crcs = record_crcs(records)
        size = records.size
        try:
            old = load_sidecar(path, options)
            problem = None
            if old is not None:
                old.check_matches(len(records), records.url, size, records.idx_url)
                differ = np.flatnonzero(old.table != crcs)
                if differ.size:
                    p = int(differ[0])
                    problem = (
                        f"{counted(int(differ.size), 'record')} of {rec} "
                        f"{'does' if differ.size == 1 else 'do'} not match it (first: "
                        f"{records.describe(p)}): damaged since it was written, or rewritten"
                    )
        except RecordIOError as exc:  # unreadable, or of another write
            old, problem = True, str(exc)
        if old is not None and not args.force:
            if problem is None:
                raise Refused(f"{path} already agrees with {rec}; nothing written")
            raise Refused(
                f"{path} exists and {problem}; nothing written (`recio verify {rec}` lists "
                "the records; --force writes the checksums of the bytes as they are now)"
            )
    write_sidecar(path, crcs, size, options)
    print(f"wrote {path}: {len(crcs)} checksums of {rec} ({size} bytes)")
    if problem is not None:
        print(f"replaced the old {path}: {problem}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    """``recio index``: walk the .rec and write its .idx atomically (see ``INDEX_HELP``).

    For several shards: each shard's .idx beside it; a shard refused does not stop the
    others (exit status 1 at the end).
    """
    return _per_shard(args, _index, "index")


def _index(rec: str, args: argparse.Namespace) -> int:
    """Index one ``.rec`` (``recio index``'s work for one file)."""
    options = args.storage_options
    idx_url = args.idx or default_idx_path(rec)
    with storage.open_source(rec, options) as source:
        walk = walk_records(source, headers=not args.renumber)
        size = source.size
    if walk.error is not None and not args.prefix_only:
        raise Refused(
            f"{rec} is damaged: {walk.error}; nothing written. `recio index --prefix-only "
            f"{rec}` indexes {walk.intact(rec)} and leaves out the last {size - walk.end} bytes"
        )
    keys, what = index_keys(walk, args.renumber)
    old: list[tuple[int, int]] = []
    replaced = None
    if storage.exists(idx_url, options):
        old, problem = check_idx(idx_url, options, walk, rec, size)
        if problem is None and not args.force:
            differ = [k for k, _ in sorted(old, key=lambda e: e[1])] != keys
            note = f"; its keys differ from the new ones, {what}," if differ else ""
            raise Refused(
                f"{idx_url} already exists and agrees with {rec}{note}; nothing written "
                "(--force overwrites it)"
            )
        replaced = problem or "it agreed with the file (--force)"
    out = storage.AtomicOutput(idx_url, options)
    try:
        out.write(
            "".join(format_idx_line(k, o) for k, o in zip(keys, walk.offsets, strict=True)).encode()
        )
    except BaseException:
        out.abort()
        raise
    out.commit()
    print(f"wrote {idx_url}: {len(keys)} records, {what}")
    if replaced is not None:
        print(f"replaced the old {idx_url}: {replaced}")
    if walk.error is not None:
        print(damaged_tail(walk, rec, size, old))
    return 0


INFO_HELP = """\
Walk a .rec record by record and summarise it: records, bytes, label widths, classes
and records per class, and whether its .idx lists exactly its records (each once,
under distinct keys).

On a damaged .rec (truncated, or corrupt from some byte on) it says what is wrong, at
which byte of the .rec, and how many complete records come before it.

Several shards (a list, a shard pattern, a quoted glob, or STEM for STEM-*-of-*.rec)
are summarised one by one, then in total (records, bytes, classes, layout).

--shuffle ORDERS adds, for each order, the distinct identities (classes: a face file's
identity records, else each sample's first label) in a batch (mean, fewest) and the
largest share of a batch one identity takes (mean, worst).

exit status: 0 all is well, 1 the .rec (a shard) is damaged or the .idx disagrees, 2 an
error.

examples:
  recio info data/train.rec
  recio info data/train                  # data/train-00000-of-00008.rec ... as one
  recio info data/faces.rec --shuffle global,block,buffer-32768  # identities per batch
  recio info s3://bucket/train.rec --storage-options '{"anon": true}'"""

VERIFY_HELP = """\
Walk every frame of a .rec (magic, length word, continuation flags, padding) and print
OK with the number of records, or FAIL with the first problem: what it is, its byte
offset in the .rec, and how many complete records come before it.

Several shards: a line for each, and one for all of them.

Where the .rec has a checksum sidecar (X.crc beside X.idx: written by im2rec, the
writer API and `recio checksum`), every record is then checked against its CRC32C, and
each that does not match is a FAIL line with its record number, key, byte offset and
file. (Remote records that do not match are fetched once more before they are reported.)

exit status: 0 the file is whole, 1 it (a shard) is damaged, 2 an error (e.g. no such
file).

examples:
  recio verify data/train.rec
  recio verify 'data/train-{00000..00007}-of-00008.rec'"""

CHECKSUM_HELP = """\
Write the checksum sidecar of a .rec: one CRC32C per record of its .idx, in its order,
over the record's frames as stored, in X.crc beside X.idx (MXNet and DALI read only the
.rec and .idx, and ignore it). It appears only when whole. im2rec and the writer API
write it themselves; this is for datasets written without one.

Readers then check records against it (`verify_checksums`: wherever it exists, by default), and
so does `recio verify`. An existing sidecar is not replaced unless --force: one that
disagrees with the records means they changed since it was written, which is for
`recio verify` to show, not for a new sidecar to hide.

Several shards: each gets its sidecar beside it; one refused does not stop the others.

exit status: 0 written, 1 refused (nothing written; for shards, some), 2 an error.

examples:
  recio checksum data/train.rec
  recio checksum data/train            # data/train-00000-of-00008.rec ... each"""

INDEX_HELP = """\
Walk a .rec and write its .idx (default: beside it, X.rec -> X.idx). The .idx appears
only when it is whole (written under a temporary name, then renamed).

Keys: each record's IRHeader id. im2rec (MXNet's and recio's) writes the .lst index
both as the header id and as the .idx key, so the rebuilt .idx gives the same keys
and read_idx(k) still finds the record with id k. When a record has no image header,
or the ids are not unique, the keys are the positions 0..N-1 and the output says why.
--renumber asks for positions. (MXNet's tools/rec2idx.py always numbers by position.)

An existing .idx that agrees with the .rec is left alone unless --force; one that
disagrees is replaced, and the output says what was wrong with it. A damaged .rec
(truncated, or corrupt from some byte on) is refused; --prefix-only indexes the
complete records before the first problem and reports the bytes and records left out.

Several shards: each gets its .idx beside it; one refused does not stop the others.

exit status: 0 written, 1 refused (nothing written; for shards, some), 2 an error.

examples:
  recio index data/train.rec
  recio index --force --renumber data/train.rec   # keys 0..N-1, as rec2idx writes them
  recio index --prefix-only data/cut.rec          # a copy that stopped part way"""


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add ``info``, ``verify``, ``index`` and ``checksum`` to ``recio``'s subcommands."""
    info = commands.add_parser(
        "info",
        help="records, bytes, labels, damage, and whether the .idx agrees",
        description=INFO_HELP,
    )
    verify = commands.add_parser(
        "verify",
        help="walk every frame; report the first problem and its byte offset",
        description=VERIFY_HELP,
    )
    index = commands.add_parser(
        "index",
        help="write a missing or wrong .idx (keys: the records' header ids)",
        description=INDEX_HELP,
    )
    checksum = commands.add_parser(
        "checksum",
        help="write the per-record CRC32C sidecar of a dataset that has none",
        description=CHECKSUM_HELP,
    )
    subcommands = ((info, cmd_info), (verify, cmd_verify), (index, cmd_index))
    for sub, func in (*subcommands, (checksum, cmd_checksum)):
        sub.add_argument(
            "rec",
            nargs="+",
            help=".rec path or URL; or several shards: their URLs, a shard pattern "
            "(train-{00000..00063}-of-00064.rec), a glob (quoted) or STEM for STEM-*-of-*.rec",
        )
        if sub is not verify:
            sub.add_argument("--idx", help=".idx path or URL (default: beside the .rec)")
        add_storage_option(sub)
        add_debug_option(sub)
        sub.set_defaults(func=func)
    info.add_argument(
        "--shuffle",
        metavar="ORDERS",
        help="also say how mixed the identities of each order's batches are: a comma list of "
        "global, block, block-N (N records a block), buffer-N (a streaming shuffle buffer of N, "
        "as DALI's readers), none; e.g. global,block,buffer-32768",
    )
    info.add_argument("--batch-size", type=int, default=128, help="for --shuffle (default 128)")
    info.add_argument("--seed", type=int, default=0, help="for --shuffle (default 0)")
    index.add_argument(
        "--renumber",
        action="store_true",
        help="number the keys by position 0..N-1 (as MXNet's rec2idx does) instead of using "
        "the records' header ids",
    )
    index.add_argument(
        "--force",
        action="store_true",
        help="overwrite an existing .idx even when it agrees with the .rec",
    )
    checksum.add_argument(
        "--force",
        action="store_true",
        help="replace an existing sidecar, even one that disagrees with the records",
    )
    index.add_argument(
        "--prefix-only",
        action="store_true",
        help="on a damaged .rec, index the complete records before the first problem and "
        "report what is left out (without it, a damaged .rec is refused)",
    )
