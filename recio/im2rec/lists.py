""".lst files: made from a folder, and read for packing.

Making one: the images of a folder, MXNet's labels, shuffle and split. Reading one for
packing: its entries, the lines that cannot be read, the checks of what it holds.
"""

from __future__ import annotations

import logging
import math
import os
import random
from collections.abc import Iterable, Sequence
from typing import Any

from .. import storage
from ..errors import RecordIOError
from ..records.format import ListEntry, format_lst_line, parse_lst
from .layout import check_classes, check_layout, group_by_class, numbered
from .report import PackReport, TooManyErrors
from .transcode import EncodeOptions

log = logging.getLogger("recio.im2rec")

DEFAULT_EXTS = (".jpeg", ".jpg", ".png")
#: MXNet's im2rec hard-codes this shuffle seed.
MXNET_SEED = 100


def list_images(root: str, recursive: bool = False, exts: Iterable[str] = DEFAULT_EXTS):
    """``(index, relpath, label)`` for every image under ``root``, as MXNet lists them.

    Recursive: a top-down walk with sorted sub-folders and files; each folder that
    holds an image gets the next label when its first image is seen.

    Raises:
        FileNotFoundError: ``root`` is not a folder.
    """
    return _walk_images(root, recursive, exts)[0]


def _walk_images(root: str, recursive: bool, exts: Iterable[str]) -> tuple[list[ListEntry], int]:
    """:func:`list_images`'s entries, and how many other files it passed over."""
    if not os.path.isdir(root):
        what = "is not a folder" if os.path.exists(root) else "does not exist"
        raise FileNotFoundError(f"image folder ROOT {root} {what}")
    exts = {e.lower() for e in exts}
    items: list[ListEntry] = []
    skipped = 0
    if recursive:
        cat: dict[str, int] = {}
        for path, dirs, files in os.walk(root, followlinks=True):
            dirs.sort()  # in place: os.walk descends in this order
            files.sort()
            for fname in files:
                fpath = os.path.join(path, fname)
                if os.path.splitext(fname)[1].lower() in exts and os.path.isfile(fpath):
                    label = cat.setdefault(path, len(cat))
                    items.append(
                        ListEntry(len(items), (float(label),), os.path.relpath(fpath, root))
                    )
                else:
                    skipped += 1
    else:
        for fname in sorted(os.listdir(root)):
            fpath = os.path.join(root, fname)
            if os.path.splitext(fname)[1].lower() in exts and os.path.isfile(fpath):
                items.append(ListEntry(len(items), (0.0,), os.path.relpath(fpath, root)))
            elif not os.path.isdir(fpath):  # (a sub-folder is not listed without recursive)
                skipped += 1
    return items, skipped


def _class_table(items: Sequence[ListEntry]) -> list[tuple[int, str, int]]:
    """``(label, folder, images)`` per class, in label order (the folder of its images)."""
    classes: dict[int, list] = {}
    for e in items:
        entry = classes.setdefault(int(e.labels[0]), [os.path.dirname(e.path) or ".", 0])
        entry[1] += 1
    return [(label, folder, n) for label, (folder, n) in sorted(classes.items())]


def split_list(
    items: Sequence[ListEntry],
    prefix: str,
    *,
    chunks: int = 1,
    train_ratio: float = 1.0,
    test_ratio: float = 0.0,
) -> list[tuple[str, list[ListEntry]]]:
    """``(lst_name, entries)`` for each file MXNet's ``make_list`` writes, same names and cuts."""
    if chunks < 1:
        raise ValueError(f"chunks must be >= 1, not {chunks}")
    n = len(items)
    chunk_size = (n + chunks - 1) // chunks
    out = []
    for i in range(chunks):
        chunk = list(items[i * chunk_size : (i + 1) * chunk_size])
        suffix = f"_{i}" if chunks > 1 else ""
        # MXNet cuts by the nominal chunk size, not len(chunk): kept for equal outputs.
        sep = int(chunk_size * train_ratio)
        sep_test = int(chunk_size * test_ratio)
        if train_ratio == 1.0:
            out.append((f"{prefix}{suffix}.lst", chunk))
            continue
        if test_ratio:
            out.append((f"{prefix}{suffix}_test.lst", chunk[:sep_test]))
        if train_ratio + test_ratio < 1.0:
            out.append((f"{prefix}{suffix}_val.lst", chunk[sep_test + sep :]))
        out.append((f"{prefix}{suffix}_train.lst", chunk[sep_test : sep_test + sep]))
    return out


def make_lists(
    prefix: str,
    root: str,
    *,
    recursive: bool = False,
    exts: Iterable[str] = DEFAULT_EXTS,
    chunks: int = 1,
    train_ratio: float = 1.0,
    test_ratio: float = 0.0,
    shuffle: bool = True,
    seed: int = MXNET_SEED,
    storage_options: dict[str, Any] | None = None,
    layout: str = "mxnet",
    verbose: bool = False,
) -> list[str]:
    """Write the ``.lst`` file(s) for the images under ``root``; returns their names.

    Logs one summary line (images, classes, files skipped, the lists written) at INFO on
    the ``recio.im2rec`` logger; ``verbose``: a line per class before it (label, folder,
    images), which for ImageNet is a thousand.

    With ``layout="insightface"`` each list is written as packing in that layout orders
    it: grouped by label (classes in increasing label value, each in the shuffled or
    folder order), and numbered 1..N, the keys its images get when none is skipped.

    Raises:
        FileNotFoundError: ``root`` is not a folder.
        ValueError: no image to list (with a hint when sub-folders hold images and
            ``recursive`` is off); nothing is written then.
    """
    face = check_layout(layout) == "insightface"
    exts = list(exts)
    items, skipped = _walk_images(root, recursive, exts)
    if not items:
        raise ValueError(_nothing_to_list(root, recursive, exts))
    classes = _class_table(items)
    if verbose:
        for label, folder, n in classes:
            log.info("label %d: %s (%d images)", label, folder, n)
    if shuffle:
        random.Random(seed).shuffle(items)  # same sequence as random.seed(seed); shuffle()
    written, counts = [], []
    for name, entries in split_list(
        items, prefix, chunks=chunks, train_ratio=train_ratio, test_ratio=test_ratio
    ):
        if face:
            entries = numbered(group_by_class(entries))
        out = storage.AtomicOutput(name, storage_options)
        try:
            out.write("".join(format_lst_line(e) for e in entries).encode())
        except BaseException:
            out.abort()
            raise
        out.commit()
        written.append(name)
        counts.append(f"{name} ({len(entries):,})")
        if not entries:  # a ratio too small for the chunk: packing this list will be refused
            log.warning("wrote %s with no image (ratios too small for chunks of %d?)", name,
                        (len(items) + chunks - 1) // chunks)  # fmt: skip
    others = "/".join(sorted({e.lower() for e in exts}))
    log.info(
        "listed %s from %s (%s skipped: not %s); wrote %s",
        f"{_count(len(items), 'image')} in {_count(len(classes), 'class', 'classes')}", root,
        _count(skipped, "other file"), others, ", ".join(counts),
    )  # fmt: skip
    return written


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def _nothing_to_list(root: str, recursive: bool, exts: Sequence[str]) -> str:
    """Why no image was listed, and what the user probably meant."""
    kinds = " ".join(sorted({e.lower() for e in exts}))
    if recursive:
        return f"no images ({kinds}) in {root} or its sub-folders"
    message = f"no images ({kinds}) in {root}"
    with_images = [d for d in sorted(os.listdir(root)) if _has_images(os.path.join(root, d), exts)]
    if with_images:
        n = len(with_images)
        message += (
            f"; found {n} sub-folder{'s' if n > 1 else ''} with images ({with_images[0]}"
            f"{', ...' if n > 1 else ''}): did you mean --recursive?"
        )
    return message


def _has_images(folder: str, exts: Sequence[str]) -> bool:
    if not os.path.isdir(folder):
        return False
    exts = {e.lower() for e in exts}
    for _, _, files in os.walk(folder, followlinks=True):
        if any(os.path.splitext(f)[1].lower() in exts for f in files):
            return True
    return False


def find_lists(prefix: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The ``.lst`` files MXNet would pack for ``prefix``: every ``PREFIX*.lst`` in its folder.

    A prefix that is a folder means every ``.lst`` in it.
    """
    if storage.is_local(prefix):
        prefix = os.path.abspath(storage.local_path(prefix))
        folder = prefix if os.path.isdir(prefix) else os.path.dirname(prefix)
        if not os.path.isdir(folder):
            return []
        names = [os.path.join(folder, f) for f in sorted(os.listdir(folder))]
        names = [n for n in names if os.path.isfile(n)]
    else:
        fs, path = storage.filesystem(prefix, storage_options)
        protocol = storage.split_protocol(prefix)[0]
        folder = path if fs.isdir(path) else path.rsplit("/", 1)[0]
        names = sorted(f"{protocol}://{p}" for p in fs.ls(folder, detail=False))
        prefix = f"{protocol}://{path}"
    return [n for n in names if n.startswith(prefix) and n.endswith(".lst")]


def read_list(url: str, storage_options: dict[str, Any] | None = None):
    """``(entries, bad_lines)`` of a .lst; bad lines are kept to report, as MXNet skips them."""
    entries, _, bad = _read_list(url, storage_options)
    return entries, bad


def read_list_into(
    report: PackReport, lst: str, storage_options: dict[str, Any] | None, max_errors: int | None
) -> tuple[list[ListEntry], list[int], list[dict]]:
    """:func:`_read_list` of ``lst``, its unreadable lines also put into ``report``.

    Raises:
        TooManyErrors: more unreadable lines than ``max_errors``.
    """
    entries, linenos, bad_lines = _read_list(lst, storage_options)
    report.images = len(entries)
    report.skipped.extend(bad_lines)
    if max_errors is not None and len(bad_lines) > max_errors:
        raise TooManyErrors(
            f"{len(bad_lines)} lines of the list unreadable, more than --max-errors "
            f"{max_errors} (first: {bad_lines[0]['path']}: {bad_lines[0]['reason']})"
        )
    return entries, linenos, bad_lines


def _read_list(url: str, storage_options: dict[str, Any] | None):
    """``(entries, line numbers of the entries, bad_lines)`` of a .lst."""
    entries: list[ListEntry] = []
    linenos: list[int] = []
    bad: list[dict] = []
    for lineno, line in enumerate(_list_text(url, storage_options).splitlines(), 1):
        try:
            # no path in the message: the report names the line as FILE:LINE
            for entry in parse_lst([line], start=lineno):
                entries.append(entry)
                linenos.append(lineno)
        except ValueError as exc:
            bad.append({"index": None, "path": f"{url}:{lineno}", "reason": str(exc)})
    return entries, linenos, bad


def _list_text(url: str, storage_options: dict[str, Any] | None) -> str:
    """A .lst's text (UTF-8, as MXNet's Python 3 writes it; a leading BOM is dropped).

    Raises:
        RecordIOError: the file is not UTF-8, naming the line and byte.
    """
    try:
        text = storage.read_text(url, storage_options)
    except UnicodeDecodeError:
        if storage.is_local(url):
            with open(storage.local_path(url), "rb") as f:
                data = f.read()
        else:
            fs, path = storage.filesystem(url, storage_options)
            data = fs.cat_file(path)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            err = RecordIOError(
                f"{url}:{line}: not UTF-8 text (byte {exc.start} is "
                f"0x{data[exc.start]:02x}: {exc.reason}); save the list as UTF-8"
            )
            err.path, err.offset = url, exc.start
            raise err from None
        raise  # it decodes now: the file changed under us; say what read_text said
    return text.removeprefix("\ufeff")


def check_list(
    url: str,
    entries: Sequence[ListEntry],
    linenos: Sequence[int],
    root: str,
    opts: EncodeOptions,
    layout: str = "mxnet",
) -> None:
    """Refuse a list with repeated indices; warn (once per kind) about odd but packable lines.

    A repeated index is refused, not skipped: it is the record's key in the ``.idx`` (and
    its id), so the reader keeps one record per index and the other image vanishes
    silently; which of the two lines is meant cannot be known, and a repeat usually means
    lists were concatenated or edited by hand, which the user should look at. In the
    insightface layout the keys are given anew (the index is not used), so repeats are
    fine there, but each first label names a class and must be a finite number.
    """
    if layout == "insightface":
        check_classes(url, entries, linenos)
    else:
        _refuse_repeats(url, entries, linenos)
    width = None if opts.pack_label else 1  # the labels that are stored
    odd = [(e, n) for e, n in zip(entries, linenos, strict=True) if not _finite(e.labels[:width])]
    if odd:
        (entry, lineno), count = odd[0], len(odd)
        log.warning(
            "%s:%d: label %s is not finite (%d line%s with NaN or infinite labels): "
            "packed as they are",
            url, lineno, ",".join(f"{x:g}" for x in entry.labels[:width]),
            count, "" if count == 1 else "s",
        )  # fmt: skip
    # MXNet reads these too (os.path.join drops ROOT before an absolute path): warned only
    outside = [(e, n) for e, n in zip(entries, linenos, strict=True) if _outside(e.path)]
    if outside:
        (entry, lineno), count = outside[0], len(outside)
        log.warning(
            "%s:%d: %s is outside ROOT %s (%d path%s outside it): read anyway, as MXNet does",
            url, lineno, entry.path, root, count, "" if count == 1 else "s",
        )  # fmt: skip


def _refuse_repeats(url: str, entries: Sequence[ListEntry], linenos: Sequence[int]) -> None:
    seen: dict[int, int] = {}
    repeats = []
    for e, lineno in zip(entries, linenos, strict=True):
        first = seen.setdefault(e.index, lineno)
        if first != lineno:
            repeats.append((e.index, first, lineno))
    if repeats:
        index, first, again = repeats[0]
        err = RecordIOError(
            f"{url}:{again}: index {index} is already on line {first} "
            f"({len(repeats)} repeated {'index' if len(repeats) == 1 else 'indices'} in all): "
            "each image needs its own index, its record's key in the .idx; "
            "renumber the first column"
        )
        err.path = url
        raise err


def _outside(path: str) -> bool:
    """Whether a .lst path leaves ROOT: absolute, or climbing out with ``..``."""
    if os.path.isabs(path) or ".." not in path:
        return os.path.isabs(path)
    path = os.path.normpath(path)
    return path == os.pardir or path.startswith(os.pardir + os.sep)


def _finite(labels: Sequence[float]) -> bool:
    return all(math.isfinite(x) for x in labels)
