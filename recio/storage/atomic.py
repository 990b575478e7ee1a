"""Writing: a file that appears under its final name only when it is whole."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Any, BinaryIO

from .partials import PUBLISH_ON_CLOSE, partial_prefix, remove_stale_partials
from .retry import translate_error
from .stores import uses_obstore
from .urls import filesystem, is_local, local_path, split_protocol, with_client_defaults

# NOTE [early writeback]: a local output asks the kernel to start writing each
# _WRITEBACK_BYTES it is given to disk (sync_file_range, SYNC_FILE_RANGE_WRITE: it queues
# the pages and returns), so that prepare()'s fsync finds most of the file on disk already.
# Without it nothing is written until the fsync (the kernel's own writeback waits for 30 s
# or for 10 % of memory to be dirty), and a conversion's last fsync of hundreds of MB would
# wait with every core idle. Linux only; elsewhere the fsync does it all.
_WRITEBACK_BYTES = 16 << 20
_SYNC_FILE_RANGE_WRITE = 2


class AtomicOutput:
    """A file that appears under its name only on ``commit()``.

    Local files and file systems with a rename (HDFS, WebHDFS, memory, ...) are
    written under a hidden ``.name.<writer>.<random>.partial`` name beside the target
    and renamed into place; the temporaries that writers of the same name left when they
    were killed are removed first, where their writer is known to be gone (NOTE
    [partial owners] in :mod:`.partials`). Object stores (S3, GCS, Azure) write the
    object directly, as a multipart upload (through obstore where it serves the URL:
    :class:`~recio.storage.upload.ObjectUpload`, else fsspec's); the store publishes it
    only when the upload completes, and ``abort()`` aborts the upload.
    """

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        self.url = url
        self.closed = False
        self._prepared = False
        self._fs = None
        if is_local(url):
            path = local_path(url)
            directory = os.path.dirname(os.path.abspath(path))
            remove_stale_partials(url)
            fd, self._tmp = tempfile.mkstemp(
                prefix=partial_prefix(os.path.basename(path)), suffix=".partial", dir=directory
            )
            self._file: BinaryIO = os.fdopen(fd, "wb", buffering=1 << 20)
            self._written = self._submitted = 0  # NOTE [early writeback]
            return
        if uses_obstore(url):
            from .upload import ObjectUpload

            self._tmp = None  # the upload is published when it completes
            self._file = self._fs = ObjectUpload(url, storage_options)
            return
        fs, path = filesystem(url, with_client_defaults(url, storage_options))
        self._fs, self._path = fs, path
        protocol = split_protocol(url)[0]
        if protocol in PUBLISH_ON_CLOSE:
            self._tmp = None
            target = path
        else:
            head, _, base = path.rstrip("/").rpartition("/")
            import uuid

            remove_stale_partials(url, storage_options)
            self._tmp = f"{head}/{partial_prefix(base)}{uuid.uuid4().hex[:12]}.partial"
            target = self._tmp
        try:
            self._file = fs.open(target, "wb")
        except Exception as exc:
            new = translate_error(exc, url)
            raise (new if new is not exc else exc) from exc

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Append ``data``; the number of bytes written."""
        if self._prepared or self.closed:
            raise ValueError(f"{self.url}: write to an output already prepared or closed")
        n = self._file.write(data)
        if self._fs is None:
            self._written += n
            if self._written - self._submitted >= _WRITEBACK_BYTES:
                self._start_writeback()
        return n

    def _start_writeback(self) -> None:
        """Queue what was written since the last call for disk (NOTE [early writeback])."""
        self._file.flush()
        start_writeback(self._file.fileno(), self._submitted, self._written - self._submitted)
        self._submitted = self._written

    def prepare(self) -> None:
        """Write everything out without publishing it: the first half of ``commit()``.

        A local temporary is flushed, fsync'd and closed; a temporary on a file system
        with a rename is closed (uploaded). So a full disk or a failed upload fails here,
        before anything is renamed: a writer of several files (a ``.rec`` and its
        ``.idx``) prepares them all, then commits them all. Object stores (S3, GCS,
        Azure) publish on close: there everything happens in ``commit()``. After
        ``prepare()``, ``write()`` is refused. Once prepared or closed, a no-op. If
        writing out fails, the temporary is removed, the output closed and the error
        raised.
        """
        if self._prepared or self.closed:
            return
        try:
            if self._fs is None:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
            elif self._tmp is not None:
                self._file.close()
        except BaseException:
            self.closed = True
            self._discard()
            raise
        self._prepared = True

    def commit(self) -> None:
        """Close and publish the file under its name, replacing any file there.

        Prepares it first if ``prepare()`` was not called. Once closed (committed or
        aborted), a no-op. If writing out or publishing fails, the temporary file is
        removed and the error raised.
        """
        if self.closed:
            return
        self.prepare()
        self.closed = True
        try:
            if self._fs is None:
                path = local_path(self.url)
                os.chmod(self._tmp, 0o666 & ~_umask())
                os.replace(self._tmp, path)
                _fsync_directory(os.path.dirname(os.path.abspath(path)))
            elif self._tmp is None:
                self._file.close()  # the object store completes the upload
            else:
                if self._fs.exists(self._path):
                    self._fs.rm(self._path)  # HDFS rename refuses to overwrite
                self._fs.mv(self._tmp, self._path)
        except BaseException:
            self._remove_tmp()
            raise

    def abort(self) -> None:
        """Close and discard what was written: nothing appears under the name.

        Once closed (committed or aborted), a no-op.
        """
        if self.closed:
            return
        self.closed = True
        self._discard()

    def _discard(self) -> None:
        """Drop the temporary (or the object store's upload); never raises."""
        if self._fs is not None and self._tmp is None:
            discard = getattr(self._file, "discard", None)
            if discard is not None:
                with contextlib.suppress(Exception):
                    discard()
                # s3fs's discard leaves the file "open": its __del__ would flush a None buffer.
                with contextlib.suppress(Exception):
                    self._file.closed = True
                return
            # No way to abort: leave the half-written object? Never; remove it after close.
            with contextlib.suppress(Exception):
                self._file.close()
            with contextlib.suppress(Exception):
                self._fs.rm(self._path)
            return
        with contextlib.suppress(Exception):
            self._file.close()
        self._remove_tmp()

    def _remove_tmp(self) -> None:
        if self._tmp is None:
            return
        with contextlib.suppress(Exception):
            if self._fs is None:
                os.unlink(self._tmp)
            else:
                self._fs.rm(self._tmp)


def remove_partials(url: str, storage_options: dict[str, Any] | None = None) -> int:
    """Remove the hidden temporaries that killed writers of ``url`` left; how many.

    A process killed between ``AtomicOutput(url)`` and ``commit()`` leaves its
    ``.name.<random>.partial`` beside the target (object stores leave no object: an
    unfinished upload is none). Call it only when no other writer of ``url`` is at work.
    Best effort: a temporary that cannot be listed or removed is left.
    """
    removed = 0
    with contextlib.suppress(Exception):
        if is_local(url):
            folder, base = os.path.split(os.path.abspath(local_path(url)))
            for name in os.listdir(folder):
                if name.startswith(f".{base}.") and name.endswith(".partial"):
                    os.unlink(os.path.join(folder, name))
                    removed += 1
            return removed
        if split_protocol(url)[0] in PUBLISH_ON_CLOSE:
            return 0
        fs, path = filesystem(url, with_client_defaults(url, storage_options))
        head, _, base = path.rstrip("/").rpartition("/")
        for name in fs.glob(f"{head}/.{base}.*.partial"):
            fs.rm(name)
            removed += 1
    return removed


def _libc_sync_file_range():
    """The C library's ``sync_file_range`` through ctypes; None where it has none."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.sync_file_range
    except (OSError, AttributeError):  # not Linux (or no such libc symbol)
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


_sync_file_range = None if not sys.platform.startswith("linux") else _libc_sync_file_range()


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing ``length`` bytes of ``fd`` from ``offset`` to disk.

    Does not wait for them (NOTE [early writeback]); best effort: a system or file system
    without it is left to the fsync.
    """
    if _sync_file_range is not None and length > 0:
        _sync_file_range(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


def _fsync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable (best effort: not every system allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
