"""Claims on a block cache's entries: which blocks a process (or thread) is fetching now.

A miss claims its block, so that the others that miss it wait for its entry instead of
fetching it too (NOTE [block cache]: sharing).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct
import threading

__all__ = ["Claims"]

# Byte-range locks on the claims file: open file description locks where the system has
# them (Linux), else POSIX record locks (NOTE [claims]).
_SETLK = getattr(fcntl, "F_OFD_SETLK", fcntl.F_SETLK)
_GETLK = getattr(fcntl, "F_OFD_GETLK", fcntl.F_GETLK)
_FLOCK = struct.Struct("hhqqi4x")  # Linux's struct flock: type, whence, start, length, pid

# NOTE [claims]: a claim is a write lock on one byte of ``cache_dir/.claims``, at an
# offset hashed from the entry's name: taking it and letting it go creates and removes
# no file. (With an empty file per claim, ext4 under the cache's churn spent about
# 180 us on each inode it allocated, skipping recently deleted ones; without them, file
# creation fell from 2.1 % to 0.4 % of the client's CPU in the cache epochs of
# tools/bench_far_remote.py, by perf.) The locks belong to this object's open of the
# file (an open file description lock; a POSIX record lock, which is the process's,
# where the system has none), so the kernel drops them when the process ends: a dead
# claimer's claims go with it. This object's own threads share its open, so their
# claims are also kept in ``_mine``, which is read first. Two names hashed to one byte
# look claimed while either is: the waiter then finds no entry once the claim goes,
# and fetches the block.


class Claims:
    """The claims of one cache object on the entries of its folder (NOTE [claims]).

    Args:
        folder: the cache's folder (its ``.claims`` file holds the locks).
        thread_lock: the cache's thread lock; :meth:`owner` and :meth:`take` are called
            with it held, :meth:`still_held` and :meth:`release` take it.
    """

    def __init__(self, folder: str, thread_lock: threading.Lock) -> None:
        self.folder = folder
        self._thread_lock = thread_lock
        self._fd: int | None = None
        self._pid = -1
        self._mine: set[str] = set()  # entries this object's threads have claimed

    def _file(self) -> int:
        """This process's descriptor of the claims file (the caller holds the thread lock)."""
        if self._pid != os.getpid():
            # A forked child shares its parent's open (and so its locks): open anew.
            self._fd = os.open(os.path.join(self.folder, ".claims"), os.O_RDWR | os.O_CREAT)
            self._pid = os.getpid()
            self._mine = set()
        return self._fd

    def _lock_byte(self, name: str, kind: int, command: int = _SETLK) -> bytes:
        slot = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest()) >> 2
        return fcntl.fcntl(self._file(), command, _FLOCK.pack(kind, os.SEEK_SET, slot, 1, 0))

    def _claimed_elsewhere(self, name: str) -> bool:
        """Whether another process (or cache object) holds the claim of entry ``name``."""
        held = self._lock_byte(name, fcntl.F_WRLCK, _GETLK)
        return _FLOCK.unpack(held)[0] != fcntl.F_UNLCK

    def owner(self, name: str) -> str | None:
        """Who holds entry ``name``'s claim, if anyone (the caller holds the thread lock).

        "here" (a thread of this object), "there" (another process or object), or None.
        """
        if name in self._mine:
            return "here"
        return "there" if self._claimed_elsewhere(name) else None

    def take(self, name: str) -> None:
        """Claim entry ``name`` (unclaimed: :meth:`owner` said None, under the same lock)."""
        self._lock_byte(name, fcntl.F_WRLCK)
        self._mine.add(name)

    def release(self, names: list[str]) -> None:
        """Let go of the claims of ``names`` (this object's)."""
        with self._thread_lock:
            for name in names:
                self._mine.discard(name)
                self._lock_byte(name, fcntl.F_UNLCK)

    def still_held(self, name: str, owner: str) -> bool:
        """Whether the claim :meth:`owner` saw (``owner``: "here" or "there") is still held."""
        with self._thread_lock:
            if owner == "here":
                return name in self._mine
            return self._claimed_elsewhere(name)
