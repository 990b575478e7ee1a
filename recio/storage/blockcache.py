"""A bounded local cache of remote files' blocks, shared by the processes of one node.

``BlockCache(cache_dir, limit)`` keeps fixed-size blocks of remote files on local disk, never
more than ``limit`` bytes of them; :class:`~recio.storage.cached.CachedSource` is the
``ByteSource`` that reads a remote file through it, and :mod:`~recio.storage.replay` replays a
trace of block uses to tell what hit rate a policy would have had. With the reads of the
coming steps known (``CachedSource.schedule``: the iterator gives this epoch's and the next
one's), what is needed furthest in the future is evicted (Belady's rule); without them, the
least recently used (NOTE [block cache]).

NOTE [block cache]

Entries. A block is ``FetchOptions.cache_block`` bytes of one file (the last one shorter),
one file per block in ``cache_dir``, named by the file's identity (URL, size and version,
as :func:`recio.storage.cache.file_version`) and the block number. An entry starts with a
header: magic, the CRC32C of the data, the block number and the data's length. Every read
checks all four; an entry that fails (torn by a crash, damaged on disk) is removed and the
block fetched again, never served. A hit is served from the entry's map (NOTE [mapped
entries]), and an entry checked once in a process is not checked again while it is the same
file (NOTE [checked once]).

The limit. Entries are written only under the cache's lock (an ``fcntl.flock`` on
``cache_dir/.lock``, shared by every process using the folder, and a thread lock within one
process), after evictions have made room, through a temporary that is renamed into place:
the bytes of the folder's entries never exceed ``limit``.

Eviction. An entry's priority lives in its modification time, so every process sees it. With
a schedule, it is the clock of the block's next use (``epoch << 32 | step``, the same on
every rank) after the steps the read is for: the entry with the latest next use goes first,
and a block whose next use comes after every resident entry's is not stored at all (Belady
with bypass). When several ranks use a block, the earliest next use that is still ahead of
the writer wins. Without a schedule the priority is the time of the last use (LRU), and the
oldest goes first. The processes sharing a folder should use the same policy.

Sharing. A miss claims the block under the lock: a process (or thread) that misses a block
someone else has claimed waits for that entry instead of fetching it too, so on one node
each block is fetched once while it fits (NOTE [claims]).

A record that fails its checksum. An entry's check covers the block as it was fetched, so
bytes that were already wrong at the store (or on the way) pass it. When the reader finds a
record wrong (its CRC32C in the sidecar), it asks for the record again with
:meth:`CachedSource.refetch`: the entries of the record's blocks are removed under the lock
and fetched again from the store, never read back from the folder; if the record is
still wrong, the reader's ``on_error`` handles it (the new entries stay: the store holds
those bytes, and a later read checks the record again).
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .claims import Claims
from .entries import (
    HEADER,
    SUFFIX,
    TMP,
    CheckedMaps,
    entry_bytes,
    entry_name,
    file_key,
    map_entry,
    valid,
    write_entry,
)
from .schedule import NEVER, clock

__all__ = [
    "NEVER",
    "BlockCache",
    "CacheStats",
    "clock",
    "entry_bytes",
    "file_key",
]

_WAIT_S = 120.0  # longest wait for a block another process claimed, then fetch it here
_POLL_S = 0.002


@dataclass
class CacheStats:
    """What one process's reads through a :class:`BlockCache` did, in blocks and bytes."""

    hits: int = 0  # blocks served from the cache
    misses: int = 0  # blocks fetched (by this process)
    waited: int = 0  # blocks another process (or thread) was fetching: served from its entry
    stored: int = 0  # entries written
    bypassed: int = 0  # fetched blocks not stored (Belady: needed later than all resident)
    evicted: int = 0  # entries removed to make room
    corrupt: int = 0  # entries that failed their check: removed, fetched again
    invalidated: int = 0  # whole entries dropped because a record in them was wrong (refetch)
    bytes_fetched: int = 0
    # (block, until) of every block use, for recio.storage.replay, while a list (None: not kept)
    trace: list[tuple[int, int]] | None = None
    # the prefetcher's threads read through one source at once: counts add under it
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        """Add to the named counts (from any thread)."""
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    @property
    def hit_rate(self) -> float:
        """Blocks served from the cache (or another's fetch) over all blocks used."""
        used = self.hits + self.waited + self.misses
        return (self.hits + self.waited) / used if used else 0.0


class BlockCache:
    """Blocks of remote files on local disk, at most ``limit`` bytes (NOTE [block cache]).

    Args:
        cache_dir: the folder; processes that share it share the entries and the limit.
        limit: the most bytes the entries (headers included) may take.
        policy: "belady" (next use furthest ahead goes first, when a schedule is known;
            otherwise as "lru") or "lru" (least recently used goes first).

    Raises:
        ValueError: ``limit`` < 1 or an unknown ``policy``.
    """

    def __init__(self, cache_dir: str, limit: int, *, policy: str = "belady") -> None:
        if int(limit) < 1:
            raise ValueError(f"cache_limit must be >= 1 byte, not {limit}")
        if policy not in ("belady", "lru"):
            raise ValueError(f"cache policy must be 'belady' or 'lru', not {policy!r}")
        self.dir = os.fspath(cache_dir)
        self.limit = int(limit)
        self.policy = policy
        os.makedirs(self.dir, exist_ok=True)
        self._thread_lock = threading.Lock()
        self._fd: int | None = None
        self._fd_pid = -1
        self._claims = Claims(self.dir, self._thread_lock)  # NOTE [claims]
        self._held = CheckedMaps()  # NOTE [checked once]

    def __getstate__(self) -> dict:
        return {"dir": self.dir, "limit": self.limit, "policy": self.policy}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["dir"], state["limit"], policy=state["policy"])

    # --- the lock ---------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self):
        """Hold the folder's lock (every process and thread using it waits meanwhile)."""
        with self._thread_lock:
            if self._fd_pid != os.getpid():
                # A forked child's inherited descriptor shares its parent's lock: open anew.
                self._fd = os.open(os.path.join(self.dir, ".lock"), os.O_RDWR | os.O_CREAT)
                self._fd_pid = os.getpid()
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    # --- entries ----------------------------------------------------------------------

    def entry(self, key: str, block: int) -> str:
        """The path of ``block`` of the file ``key``."""
        return os.path.join(self.dir, entry_name(key, block))

    def usage(self) -> int:
        """Bytes the entries take now."""
        return sum(size for size, _ in self._scan().values())

    def _scan(self, locked: bool = False) -> dict[str, tuple[int, int]]:
        """Entries: name -> (size, priority).

        ``locked``: the caller holds the lock, so a temporary seen now is a dead writer's
        (entries are written only under the lock): it is removed.
        """
        entries: dict[str, tuple[int, int]] = {}
        inodes: dict[str, int] = {}
        for e in os.scandir(self.dir):
            name = e.name
            if locked and name.endswith(TMP):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(e.path)
            elif name.endswith(SUFFIX):
                with contextlib.suppress(FileNotFoundError):
                    st = e.stat()
                    entries[name] = (st.st_size, st.st_mtime_ns)
                    inodes[name] = e.inode()
        self._held.let_go(inodes)
        return entries

    def load(self, key: str, block: int, length: int) -> memoryview | None:
        """The data of an entry if it is there and whole (checked), else None.

        An entry that fails its check is removed (and counted by the caller).
        """
        name = entry_name(key, block)
        path = os.path.join(self.dir, name)
        try:
            inode = os.stat(path).st_ino
        except FileNotFoundError:
            self._held.forget(name)
            return None
        held = self._held.recall(name, inode)
        if held is not None:
            return held
        try:
            raw, inode = map_entry(path, entry_bytes(length))
        except FileNotFoundError:
            return None
        if raw is not None and valid(raw, block, length):
            data = raw[HEADER.size :]  # the page cache's pages: no copy of the block
            self._held.keep(name, inode, data)
            return data
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        raise _Corrupt(path)

    def invalidate(self, key: str, blocks: Iterable[int]) -> int:
        """Remove the entries of ``blocks`` of the file ``key``; how many there were.

        For data whose own check passed but that the reader found wrong (a record's
        checksum): the next read of those blocks fetches them from the store.
        """
        removed = 0
        with self.locked():
            for block in blocks:
                self._held.forget(entry_name(key, block))
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.entry(key, block))
                    removed += 1
        return removed

    def _priority(self, next_use: int | None) -> int:
        return time.time_ns() if next_use is None or self.policy == "lru" else next_use

    # --- what a source calls ----------------------------------------------------------

    def get(
        self,
        key: str,
        blocks: Sequence[tuple[int, int, int | None]],
        fetch: Callable[[list[tuple[int, int]]], list[Any]],
        stats: CacheStats,
        until: int | None = None,
    ) -> dict[int, Any]:
        """The data of each ``(block, length, next_use)``: from the cache, else fetched.

        ``fetch`` gets the missing ``(block, length)`` pairs and returns their data, in
        that order (one coalesced, concurrent read). ``next_use`` is the block's clock of
        next use after ``until`` (None without a schedule: LRU; NEVER: no use ahead).
        """
        out: dict[int, Any] = {}
        missing = []
        for block, length, next_use in blocks:
            data = self._checked_load(key, block, length, stats)
            if data is None:
                missing.append((block, length, next_use))
            else:
                out[block] = data
                stats.add(hits=1)
        # The hits' next uses first: what this read just used must not look needed now
        # when the misses' room is made.
        self._touch(key, [(b, u) for b, _, u in blocks if b in out], until)
        mine, theirs = self._claim(key, missing) if missing else ([], [])
        try:
            if mine:
                got = fetch([(b, n) for b, n, _ in mine])
                stats.add(misses=len(mine), bytes_fetched=sum(len(d) for d in got))
                for (block, _, _), data in zip(mine, got, strict=True):
                    out[block] = data
                self._store(key, [(b, u, out[b]) for b, _, u in mine], stats, until)
        finally:
            if mine:
                self._unclaim(key, [b for b, _, _ in mine])
        if theirs:
            self._wait_for(key, theirs, fetch, stats, out)
            self._touch(key, [(b, u) for b, _, u, _ in theirs], until)
        return out

    def _checked_load(self, key: str, block: int, length: int, stats: CacheStats) -> Any:
        try:
            return self.load(key, block, length)
        except _Corrupt:
            stats.add(corrupt=1)
            return None

    def _claim(self, key: str, missing: list) -> tuple[list, list]:
        """Split ``missing`` into the blocks this thread fetches and those others are.

        Theirs are ``(block, length, next_use, owner)``: "here" (another thread of this
        object), "there" (another process or object), or None for a block stored since the
        first look (NOTE [claims]).
        """
        mine, theirs = [], []
        with self.locked():
            for item in missing:
                name = entry_name(key, item[0])
                if os.path.exists(os.path.join(self.dir, name)):
                    theirs.append((*item, None))  # stored since the first look
                elif (owner := self._claims.owner(name)) is not None:
                    theirs.append((*item, owner))
                else:
                    self._claims.take(name)
                    mine.append(item)
        return mine, theirs

    def _unclaim(self, key: str, blocks: Iterable[int]) -> None:
        self._claims.release([entry_name(key, block) for block in blocks])

    def _wait_for(self, key, theirs, fetch, stats: CacheStats, out: dict) -> None:
        """Read the blocks others are fetching once they are stored.

        A block they do not store (bypassed, evicted at once, their fetch failed) is
        fetched here.
        """
        deadline = time.monotonic() + _WAIT_S
        pending = list(theirs)
        while pending:
            still = []
            for item in pending:
                block, length, _, owner = item
                # The claim first: it goes only after the entry is stored (or not stored at
                # all), so no claim and no entry means this thread must fetch the block.
                name = entry_name(key, block)
                claimed = (
                    owner is not None
                    and time.monotonic() < deadline
                    and self._claims.still_held(name, owner)
                )
                data = self._checked_load(key, block, length, stats)
                if data is not None:
                    out[block] = data
                    stats.add(waited=1)
                elif claimed:
                    still.append(item)
                else:
                    got = fetch([(block, length)])[0]
                    stats.add(misses=1, bytes_fetched=len(got))
                    out[block] = got
            pending = still
            if pending:
                time.sleep(_POLL_S)

    def _store(self, key: str, items: list, stats: CacheStats, until: int | None) -> None:
        """Write fetched blocks, evicting to stay within the limit (NOTE [block cache])."""
        belady = self.policy == "belady"
        with self.locked():
            entries = self._scan(locked=True)
            used = sum(size for size, _ in entries.values())
            # (priority, name), lowest first: LRU's victim is the first, Belady's the last
            ranked = sorted((p, n) for n, (_, p) in entries.items())
            # Soonest-needed first: when room runs out, the later ones are the ones bypassed.
            for block, next_use, data in sorted(items, key=lambda t: _order(t[1])):
                need = entry_bytes(len(data))
                priority = self._priority(next_use)
                name = entry_name(key, block)
                if need > self.limit:
                    stats.add(bypassed=1)
                    continue
                # A read with no schedule behind it (next_use None) evicts as LRU does: its
                # priority is a time, later than every other entry's.
                latest = belady and next_use is not None
                while used + need > self.limit and ranked:
                    at = -1 if latest else 0
                    victim_priority, victim = ranked[at]
                    if entries.get(victim, (0, None))[1] != victim_priority:
                        del ranked[at]  # stale: the entry was written again since
                        continue
                    if latest and victim_priority <= priority:
                        break  # every resident block is needed sooner
                    del ranked[at]
                    self._held.forget(victim)
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(self.dir, victim))
                    used -= entries.pop(victim)[0]
                    stats.add(evicted=1)
                if used + need > self.limit:
                    stats.add(bypassed=1)
                    continue
                write_entry(os.path.join(self.dir, name), block, data, priority)
                used += need - entries.get(name, (0, 0))[0]
                entries[name] = (need, priority)
                bisect.insort(ranked, (priority, name))
                stats.add(stored=1)

    def _touch(self, key: str, uses: list[tuple[int, int | None]], until: int | None) -> None:
        """Give the entries just used their next priority (the earliest use still ahead)."""
        if not uses:
            return
        floor = -1 if until is None else until
        with self.locked():
            for block, next_use in uses:
                path = self.entry(key, block)
                priority = self._priority(next_use)
                try:
                    stored = os.stat(path).st_mtime_ns
                except FileNotFoundError:
                    continue
                if self.policy == "belady" and next_use is not None and floor < stored < priority:
                    priority = stored  # another rank needs it sooner than this one
                with contextlib.suppress(FileNotFoundError):
                    os.utime(path, ns=(priority, priority))


class _Corrupt(Exception):
    pass


def _order(next_use: int | None) -> int:
    return NEVER if next_use is None else next_use
