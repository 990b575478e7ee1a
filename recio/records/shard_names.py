"""Naming a dataset's shards: a list, a shard pattern, a glob or ``STEM``, as shard URLs.

The forms (see :mod:`.shards`): a list of URLs (each may itself be a pattern or glob); a
shard pattern, ``train-{00000..00063}-of-00064.rec``; a glob, ``data/train-*.rec``; or
``STEM``, when no file ``STEM`` exists and ``STEM-*-of-*.rec`` do. :func:`expand_shards`
turns any of them into the list of shard URLs.
"""

from __future__ import annotations

import errno
import glob as _glob
import itertools
import os
import re
from collections.abc import Sequence
from typing import Any

from .. import storage

__all__ = ["MAX_SHARDS", "Spec", "expand_shards", "is_shard_spec"]

Spec = str | Sequence[str]

_BRACE = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"(-?\d+)\.\.(-?\d+)")
_GLOB_CHARS = re.compile(r"[*?\[]")
_ANY_SHARD = re.compile(r"-\*-of-(\d+|\*)\.rec$")
_SHARD_NAME = re.compile(r"^(?P<stem>.*)-(?P<k>\d+)-of-(?P<n>\d+)\.rec$")

# The most names one pattern may give: counted before any is made, so that a typo such
# as {0..99999999} is an error, not 10**8 strings (and as many files to open).
MAX_SHARDS = 1_000_000


def is_shard_spec(spec: Any) -> bool:
    """Whether ``spec`` names several files by its form alone: a list, a pattern or a glob.

    No I/O: ``STEM`` (a name that is no file, with ``STEM-*-of-*.rec`` beside it) is
    found by :func:`expand_shards`, not here.
    """
    if isinstance(spec, str | os.PathLike):
        text = os.fspath(spec)
        return bool(_BRACE.search(text)) or _globbable(text)
    return isinstance(spec, Sequence)


def _globbable(url: str) -> bool:
    protocol, path = storage.split_protocol(url)
    return protocol not in ("http", "https") and bool(_GLOB_CHARS.search(path))


def expand_shards(spec: Spec, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The shard URLs ``spec`` names, in shard order (see the module docstring).

    A plain ``.rec`` name costs no I/O; a glob lists its folder; a name that is not a
    ``.rec`` is looked up (``STEM`` when it is no file).

    Raises:
        FileNotFoundError: a glob or ``STEM`` that matches nothing (naming it), or
            ``-K-of-N.rec`` shards of which some are missing (naming the first missing).
        ValueError: an empty list, a malformed ``{...}`` or a shard named twice.
    """
    if isinstance(spec, str | os.PathLike):
        urls = _expand_one(os.fspath(spec), storage_options)
    elif isinstance(spec, Sequence):
        if not spec:
            raise ValueError("an empty list of shards")
        urls = [u for item in spec for u in _expand_one(os.fspath(item), storage_options)]
    else:
        raise TypeError(f"a .rec URL, a shard pattern or a list of URLs, not {spec!r}")
    seen: set[str] = set()
    for url in urls:
        if url in seen:
            raise ValueError(f"shard {url} is named twice in {spec!r}")
        seen.add(url)
    return urls


def _expand_one(text: str, options: dict[str, Any] | None) -> list[str]:
    if not text:
        raise ValueError("an empty .rec URL")
    names = _expand_braces(text)
    if any(_globbable(name) for name in names):
        urls = [u for name in names for u in _glob_urls(name, options)]
        if not urls:
            raise FileNotFoundError(errno.ENOENT, "no shards match", text)
        if _ANY_SHARD.search(text):  # "every shard": all N of them must be there
            _check_complete(urls, text)
        return urls
    if len(names) > 1 or text.endswith(".rec") or storage.exists(text, options):
        return names
    urls = _glob_urls(_glob.escape(text) + "-*-of-*.rec", options)
    if not urls:
        raise FileNotFoundError(errno.ENOENT, f"no such file, nor {text}-*-of-*.rec shards", text)
    _check_complete(urls, text)
    return urls


def _expand_braces(text: str) -> list[str]:
    """``a{1..3}b`` -> ``a1b a2b a3b``; ``{x,y}`` alternatives; several braces: every mix."""
    _check_count(text)
    parts: list[list[str]] = []
    at = 0
    for match in _BRACE.finditer(text):
        parts.append([text[at : match.start()]])
        parts.append(_brace_items(match.group(1), text))
        at = match.end()
    if not parts:
        return [text]
    parts.append([text[at:]])
    return ["".join(p) for p in itertools.product(*parts)]


def _check_count(text: str) -> None:
    """Refuse a pattern that names more than :data:`MAX_SHARDS` files, before expanding it."""
    count = 1
    for match in _BRACE.finditer(text):
        body = match.group(1)
        found = _RANGE.fullmatch(body)
        if found:
            count *= abs(int(found.group(2)) - int(found.group(1))) + 1
        elif "," in body:
            count *= body.count(",") + 1
        if count > MAX_SHARDS:
            raise ValueError(
                f"shard pattern {text!r} names more than {MAX_SHARDS:,} files "
                f"({{{body}}} and the braces before it): a typo in a range?"
            )


def _brace_items(body: str, text: str) -> list[str]:
    found = _RANGE.fullmatch(body)
    if found:
        a, b = found.groups()
        padded = any(len(v.lstrip("-")) > 1 and v.lstrip("-")[0] == "0" for v in (a, b))
        width = max(len(a), len(b)) if padded else 0
        lo, hi = int(a), int(b)
        step = 1 if hi >= lo else -1
        return [f"{v:0{width}d}" for v in range(lo, hi + step, step)]
    if "," in body:
        return body.split(",")
    raise ValueError(
        f"bad shard pattern {text!r}: {{{body}}} is neither a range {{A..B}} nor "
        "alternatives {a,b}"
    )


def _glob_urls(pattern: str, options: dict[str, Any] | None) -> list[str]:
    """The files ``pattern`` matches, as URLs of its own form, in name order (no ``.idx``)."""
    if storage.is_local(pattern):
        prefix = pattern[: len(pattern) - len(storage.local_path(pattern))]
        paths = _glob.glob(storage.local_path(pattern))
        urls = [prefix + p for p in paths if os.path.isfile(p)]
    else:
        fs, path = storage.filesystem(pattern, storage.urls.with_client_defaults(pattern, options))
        found = storage.retrying(lambda: fs.glob(path, detail=True), pattern, 0, 0, _NO_FETCH)
        urls = [fs.unstrip_protocol(p) for p, info in found.items() if info["type"] == "file"]
    return sorted(u for u in urls if not u.endswith(".idx"))


_NO_FETCH = storage.FetchOptions()


def _check_complete(urls: list[str], spec: str) -> None:
    """``STEM-K-of-N.rec`` shards of one stem and one N must be all N of them."""
    found = [_SHARD_NAME.match(u) for u in urls]
    if not all(found) or len({(m["stem"], m["n"]) for m in found}) != 1:
        return
    first = found[0]
    total, width = int(first["n"]), len(first["k"])
    have = {int(m["k"]) for m in found}
    missing = [k for k in range(total) if k not in have]
    if missing:
        name = f"{first['stem']}-{missing[0]:0{width}d}-of-{first['n']}.rec"
        raise FileNotFoundError(
            errno.ENOENT,
            f"{spec} matches {len(have)} of {total} shards; missing {len(missing)}, first",
            name,
        )
