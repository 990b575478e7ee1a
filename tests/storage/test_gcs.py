"""gs:// URLs through obstore's GCS client, against the GCS emulator (gcp-storage-emulator).

The emulator is started by this module on a free port of 127.0.0.1 and stopped at its end.
It implements GCS's JSON API (uploads, metadata) but little of the XML API that
obstore's client speaks: no HEAD on an object (501), no ETag in a PUT's answer, no
Last-Modified in a GET's, no XML multipart upload (501) nor listing (501), and no route
for a bucket name with a "-" (obstore escapes it as %2D: 501). So what is
tested against it is what holds there: the store's configuration reaching it (the base URL,
anonymous access), ranged GETs arriving, and recio's errors naming the store, the key and
the server's answer where obstore's client stops (docs/storage.md lists these gaps).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from recio import storage
from recio.storage import stores

pytest.importorskip("obstore", reason="the cloud extra (obstore)")
pytest.importorskip("gcp_storage_emulator", reason="the test extra (gcp-storage-emulator)")

BUCKET = "recio"  # no "-": obstore sends it as %2D, which the emulator does not route
DATA = bytes(range(256)) * 400


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def emulator() -> str:
    """The base URL of an emulator this module started, holding ``BUCKET/d/data.bin``."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
         "--port", str(port), "--in-memory", "--default-bucket", BUCKET],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"the GCS emulator did not start on {base}")
                time.sleep(0.1)
        upload = urllib.request.Request(
            f"{base}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=d/data.bin",
            data=DATA, method="POST", headers={"Content-Type": "application/octet-stream"},
        )  # fmt: skip
        with urllib.request.urlopen(upload, timeout=10) as answer:
            assert json.load(answer)["size"] == str(len(DATA))
        yield base
    finally:
        proc.terminate()
        proc.wait(30)


def options(base: str) -> dict:
    return {"endpoint_url": base, "token": "anon"}


def test_ranged_gets_reach_the_emulator_and_its_answers_lack_what_obstore_needs(emulator):
    import obstore

    loc = stores.store_for(f"gs://{BUCKET}/d/data.bin", options(emulator))
    assert loc.key == "d/data.bin" and loc.where == f"GCS bucket '{BUCKET}'"
    # the GET is sent to the emulator and answered (206), but without Last-Modified,
    # which obstore's client requires of every GET
    with pytest.raises(Exception, match="Last-Modified Header missing"):
        obstore.get_range(loc.store, loc.key, start=10, end=20)


def test_opening_names_the_store_the_key_and_the_servers_answer(emulator):
    url = f"gs://{BUCKET}/d/data.bin"
    fetch = storage.FetchOptions(retries=1, backoff=0.01)
    with pytest.raises(OSError) as refused:  # HEAD: 501 Not Implemented, retried, then this
        storage.open_source(url, options(emulator), fetch=fetch)
    message = str(refused.value)
    assert url in message and f"GCS bucket '{BUCKET}'" in message and "501" in message


def test_a_missing_object_is_a_file_not_found(emulator):
    import obstore

    loc = stores.store_for(f"gs://{BUCKET}/d/none.bin", options(emulator))
    with pytest.raises(FileNotFoundError):
        obstore.get_range(loc.store, loc.key, start=0, end=10)
