"""A block cache's entries on disk: their names, header and check, writing and mapping them.

An entry is one file per block (NOTE [block cache]): a header (magic, the CRC32C of the
data, the block number, the data's length), then the data. Hits are served from the
entry's map (NOTE [mapped entries]); a process keeps the maps it has checked
(:class:`CheckedMaps`, NOTE [checked once]).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
import threading
from collections import OrderedDict
from typing import Any

from .._crc32c import crc32c

__all__ = [
    "HEADER",
    "SUFFIX",
    "TMP",
    "CheckedMaps",
    "entry_bytes",
    "entry_name",
    "file_key",
    "map_entry",
    "valid",
    "write_entry",
]

MAGIC = b"RBC1"
HEADER = struct.Struct("<4sIQQ")  # magic, crc32c of the data, block number, data length
SUFFIX = ".blk"
TMP = ".tmp"
_HELD = 1024  # maps of checked entries a process keeps, at most (NOTE [checked once])


def entry_name(key: str, block: int) -> str:
    """The file name of ``block`` of the file ``key`` in the cache's folder."""
    return f"{key}-{block:010d}{SUFFIX}"


def entry_bytes(n: int) -> int:
    """The bytes an entry holding ``n`` data bytes takes on disk (its header included)."""
    return HEADER.size + n


def file_key(url: str, size: int, version: str | None) -> str:
    """The name entries of one file's blocks start with: its URL, size and version."""
    return hashlib.sha256(f"{url}\n{size}\n{version}".encode()).hexdigest()[:24]


def write_entry(path: str, block: int, data: Any, priority: int) -> None:
    """Write ``block``'s entry at ``path`` through a temporary renamed into place.

    ``priority`` becomes its modification time (NOTE [block cache]: eviction). A reader
    never sees a partly written entry, and an entry is never written in place.
    """
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}{TMP}"
    with open(tmp, "wb") as f:
        f.write(HEADER.pack(MAGIC, crc32c(data), block, len(data)))
        f.write(data)
    os.utime(tmp, ns=(priority, priority))
    os.replace(tmp, path)


def map_entry(path: str, size: int) -> tuple[memoryview | None, int]:
    """The entry at ``path`` mapped read-only if it is ``size`` bytes (else None), its inode.

    NOTE [mapped entries]: a hit is served from the page cache's own pages, as a local
    file is (:class:`~recio.storage.mapped.MappedSource`): no copy into new memory, which
    the kernel would first have to fault in and zero. The pages are read ahead in the one
    ``mmap`` call (``MAP_POPULATE``) rather than faulted in a few at a time by the check.
    Entries are never written in place (a temporary renamed over them, NOTE [block
    cache]), and an entry removed while mapped keeps its pages until the map goes (the
    last view of it), so the map holds the bytes that were checked. Only a file truncated
    in place under a view (not something the cache does) could fault, as with a local
    file.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if st.st_size != size:
            return None, st.st_ino  # torn: the wrong length (an empty file cannot be mapped)
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        return memoryview(mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ)), st.st_ino
    finally:
        os.close(fd)


def valid(raw: Any, block: int, length: int) -> bool:
    """Whether ``raw`` is a whole entry of ``block`` with ``length`` data bytes (all checked)."""
    if len(raw) < HEADER.size:
        return False
    magic, crc, number, n = HEADER.unpack_from(raw)
    data = memoryview(raw)[HEADER.size :]
    return magic == MAGIC and number == block and n == length == len(data) and crc == crc32c(data)


# NOTE [checked once]: a process keeps the maps of the entries it has checked (the
# latest _HELD used), each with the entry's inode. A later read whose entry is still that
# inode is served from the map without reading and checking the block again: entries
# are never written in place (a new entry is a new file renamed over the name), and an
# inode cannot be reused for another file while a map of it is open, so the same inode
# is the same bytes that were checked. An entry another process has replaced is a new
# inode, checked again. What the check cannot see is the same file damaged in place
# after it (on disk, or by hand); with checksums in the sidecar the reader's check of
# every record still catches that. A map pins its file's disk blocks after the entry is
# removed, so maps are let go when this process evicts or invalidates an entry and
# whenever a scan of the folder (every store of fetched blocks) no longer finds their
# inode: the folder's bytes beyond the limit are at most what other processes evicted
# since.


class CheckedMaps:
    """The maps of the entries this process has checked, by name, with their inodes.

    The latest ``limit`` used are kept (NOTE [checked once]); safe from any thread.
    """

    def __init__(self, limit: int = _HELD) -> None:
        self.limit = limit
        # entry name -> (its inode, the checked data's view), oldest use first
        self._held: OrderedDict[str, tuple[int, memoryview]] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, name: str) -> bool:
        with self._lock:
            return name in self._held

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def recall(self, name: str, inode: int) -> memoryview | None:
        """The checked data of entry ``name`` if it is held and still ``inode``."""
        with self._lock:
            held = self._held.get(name)
            if held is None:
                return None
            if held[0] != inode:
                del self._held[name]  # replaced since: checked anew
                return None
            self._held.move_to_end(name)
            return held[1]

    def keep(self, name: str, inode: int, data: memoryview) -> None:
        """Hold ``data``, entry ``name``'s checked data at ``inode``."""
        with self._lock:
            self._held[name] = (inode, data)
            self._held.move_to_end(name)
            while len(self._held) > self.limit:
                self._held.popitem(last=False)

    def forget(self, name: str) -> None:
        """Let go of entry ``name``'s map (it is being removed)."""
        with self._lock:
            self._held.pop(name, None)

    def let_go(self, inodes: dict[str, int]) -> None:
        """Drop the maps of entries that are gone or replaced (``inodes``: those there)."""
        with self._lock:
            for name in [n for n, (i, _) in self._held.items() if inodes.get(n) != i]:
                del self._held[name]
