"""What every ``ByteSource`` does, run over each one (as fsspec's backends share one suite).

The sources: a mapped local file, a remote file's local copy, fsspec's remote reads
(memory://), the bounded block cache, S3 through the presigned range client and through
s3fs (fsspec), and obstore's source over S3 and over HTTPS (a local TLS server). Each
holds the same bytes; every test reads them back through the ``ByteSource`` interface
alone.
"""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import fsspec
import numpy as np
import pytest

from recio import storage
from recio.storage.cached import CachedSource
from recio.storage.objectsource import ObjectStoreSource

from ..conftest import S3_BUCKET
from ..rangeserver import RangeServer
from ..tlscert import self_signed

DATA = np.random.default_rng(46).integers(0, 256, 700_000, dtype=np.uint8).tobytes()
FSSPEC = storage.FetchOptions(client="fsspec")
# small requests and blocks, so that ranges span several of each
SMALL = {"max_request": 64 << 10, "min_request": 16 << 10, "cache_block": 32 << 10}

Opener = Callable[[], storage.ByteSource]


def _with_options(opener: Opener, options: dict) -> Opener:
    """``opener`` with the storage options its URLs need (``opener.options``)."""
    opener.options = options
    return opener


def _memory(name: str) -> str:
    fs = fsspec.filesystem("memory")
    fs.pipe(f"/conformance/{name}", DATA)
    return f"memory://conformance/{name}"


def _mapped(tmp_path: Path, request) -> Opener:
    path = tmp_path / "d.bin"
    path.write_bytes(DATA)
    return lambda: storage.open_source(str(path))


def _copied(tmp_path: Path, request) -> Opener:
    url = _memory("copied.bin")
    return lambda: storage.open_source(url, cache_dir=str(tmp_path / "copies"))


def _fsspec(tmp_path: Path, request) -> Opener:
    url = _memory("fsspec.bin")
    return lambda: storage.open_source(url, fetch=storage.FetchOptions(**SMALL))


def _cached(tmp_path: Path, request) -> Opener:
    url = _memory("cached.bin")
    fetch = storage.FetchOptions(**SMALL)
    folder = str(tmp_path / "blocks")
    return lambda: storage.open_source(url, fetch=fetch, cache_dir=folder, cache_limit=1 << 20)


def _s3_url(request) -> tuple[str, dict]:
    options = request.getfixturevalue("s3_server")
    url = f"s3://{S3_BUCKET}/conformance-{uuid.uuid4().hex[:10]}.bin"
    out = storage.AtomicOutput(url, options)
    out.write(DATA)
    out.commit()
    return url, options


def _ranges_client(tmp_path: Path, request) -> Opener:
    url, options = _s3_url(request)
    fetch = storage.FetchOptions(client="fsspec", **SMALL)
    return _with_options(lambda: storage.open_source(url, options, fetch=fetch), options)


def _s3fs(tmp_path: Path, request) -> Opener:
    url, options = _s3_url(request)
    fetch = storage.FetchOptions(client="fsspec", presign_s3=False, **SMALL)
    return _with_options(lambda: storage.open_source(url, options, fetch=fetch), options)


def _obstore_s3(tmp_path: Path, request) -> Opener:
    pytest.importorskip("obstore", reason="the cloud extra (obstore)")
    url, options = _s3_url(request)
    fetch = storage.FetchOptions(client="obstore", **SMALL)
    return _with_options(lambda: storage.open_source(url, options, fetch=fetch), options)


def _obstore_https(tmp_path: Path, request) -> Opener:
    pytest.importorskip("obstore", reason="the cloud extra (obstore)")
    ca, cert, key = self_signed(tmp_path)
    server = RangeServer({"/d.bin": DATA}, tls=(cert, key))
    request.addfinalizer(server.close)
    options = {"client_kwargs": {"verify": ca}}
    fetch = storage.FetchOptions(client="obstore", **SMALL)
    url = f"{server.url}/d.bin"
    return _with_options(lambda: storage.open_source(url, options, fetch=fetch), options)


SOURCES = {
    "mapped": (_mapped, storage.MappedSource),
    "copied": (_copied, storage.CopiedSource),
    "fsspec": (_fsspec, storage.FsspecSource),
    "cached": (_cached, CachedSource),
    "ranges-client": (_ranges_client, storage.FsspecSource),
    "s3fs": (_s3fs, storage.FsspecSource),
    "obstore-s3": (_obstore_s3, ObjectStoreSource),
    "obstore-https": (_obstore_https, ObjectStoreSource),
}
NEEDS_S3 = {"ranges-client", "s3fs", "obstore-s3"}


@pytest.fixture(
    params=[
        pytest.param(name, marks=[pytest.mark.s3] if name in NEEDS_S3 else []) for name in SOURCES
    ]
)
def opener(request, tmp_path) -> Iterator[Opener]:
    make, kind = SOURCES[request.param]
    opened = make(tmp_path, request)
    with opened() as first:
        assert type(first) is kind, (request.param, type(first))
    yield opened
    fsspec.filesystem("memory").store.clear()


def _ranges(n: int, seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    offsets = rng.integers(0, len(DATA), n)
    lengths = rng.integers(0, 40_000, n)
    return list(zip(offsets.tolist(), lengths.tolist(), strict=True))


def test_size_and_single_reads(opener):
    with opener() as src:
        assert src.size == len(DATA)
        assert bytes(src.read(0, 16)) == DATA[:16]
        assert bytes(src.read(123_456, 100_000)) == DATA[123_456:223_456]
        assert bytes(src.read(len(DATA) - 10, 100)) == DATA[-10:]  # short at the end
        assert bytes(src.read(len(DATA), 10)) == b""
        assert bytes(src.read(5, 0)) == b""


def test_read_ranges_unordered_overlapping_repeated_and_clipped(opener):
    ranges = _ranges(200, 1)
    ranges += [(100, 50), (100, 50), (120, 10), (len(DATA) - 5, 50), (7, 0), (0, len(DATA))]
    with opener() as src:
        got = src.read_ranges(ranges)
        assert len(got) == len(ranges)
        for (offset, length), data in zip(ranges, got, strict=True):
            assert bytes(data) == DATA[offset : offset + length], (offset, length)
        assert src.read_ranges([]) == []


def test_refetch_gives_the_stores_bytes(opener):
    with opener() as src:
        src.read(300_000, 50_000)
        assert bytes(src.refetch(300_000, 50_000)) == DATA[300_000:350_000]
        assert bytes(src.refetch(len(DATA) - 3, 10)) == DATA[-3:]


def test_a_schedule_changes_no_bytes(opener):
    ranges = _ranges(50, 2)
    with opener() as src:
        when = [storage.clock(0, k) for k in range(len(ranges))]
        src.schedule(when, [o for o, _ in ranges], [n for _, n in ranges])
        got = src.read_ranges(ranges)
        assert [bytes(g) for g in got] == [DATA[o : o + n] for o, n in ranges]


def test_a_mapped_view_is_the_whole_file_or_none(opener):
    with opener() as src:
        view = src.mapped_view()
        assert src.mapped == (view is not None)
        if view is not None:
            assert bytes(view) == DATA


def test_reads_stay_valid_after_close_and_later_reads_are_refused(opener):
    src = opener()
    got = src.read_ranges([(10, 1000), (500_000, 30_000)])
    src.close()
    assert bytes(got[0]) == DATA[10:1010] and bytes(got[1]) == DATA[500_000:530_000]
    with pytest.raises(ValueError):
        src.read(0, 10)


def test_a_pickled_remote_source_reads_the_same(opener):
    """Remote sources pickle as their URL and options (the copy reconnects); a map
    (a local file, a local copy) does not pickle: its readers open the path again."""
    with opener() as src:
        if src.mapped:
            with pytest.raises(TypeError, match="pickle"):
                pickle.dumps(src)
            return
        copy = pickle.loads(pickle.dumps(src))
        try:
            assert copy.size == src.size
            assert bytes(copy.read(42, 4242)) == DATA[42:4284]
        finally:
            copy.close()


def test_threads_read_one_source_at_once(opener):
    from concurrent.futures import ThreadPoolExecutor

    with opener() as src, ThreadPoolExecutor(4) as pool:
        jobs = [_ranges(20, seed) for seed in range(8)]
        results = list(pool.map(src.read_ranges, jobs))
    for ranges, got in zip(jobs, results, strict=True):
        assert [bytes(g) for g in got] == [DATA[o : o + n] for o, n in ranges]


def test_a_missing_file_is_a_file_not_found_naming_it(opener):
    with opener() as src:
        url = src.url
    head, _, name = url.rpartition("/")
    missing = f"{head}/missing-{name}"
    with pytest.raises(FileNotFoundError) as missed:
        storage.open_source(missing, getattr(opener, "options", None))
    assert missing in str(missed.value)
