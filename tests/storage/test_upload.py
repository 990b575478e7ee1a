"""Writes to S3 through obstore's multipart upload: published only when whole.

Against the S3 test server (SeaweedFS): an interrupted or killed upload leaves no object
and (interrupted) no unfinished upload; ``recio im2rec``, ``optimize`` and ``checksum``
write their outputs to s3:// URLs and read back with their checksums verified.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from recio import storage
from recio.cli import main as cli
from recio.records.reader import RecordFile
from recio.storage.objectsource import ObjectStoreSource
from recio.storage.upload import PART_BYTES

from ..images import encode

pytestmark = [pytest.mark.s3, pytest.mark.filterwarnings("ignore::UserWarning")]
pytest.importorskip("obstore", reason="the cloud extra (obstore)")

PARTS = np.random.default_rng(3).integers(0, 256, 3 * PART_BYTES, dtype=np.uint8).tobytes()


def unfinished_uploads(options: dict, key: str) -> list[str]:
    """Keys of the bucket's multipart uploads not completed nor aborted, under ``key``."""
    import s3fs

    fs = s3fs.S3FileSystem(**options)
    bucket, _, prefix = key.removeprefix("s3://").partition("/")
    found = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix)
    return [u["Key"] for u in found.get("Uploads") or []]


def test_a_whole_upload_appears_and_reads_back(s3_server, s3_prefix):
    url = f"{s3_prefix}/whole.bin"
    out = storage.AtomicOutput(url, s3_server)
    for k in range(0, len(PARTS), 3 << 20):  # writes smaller than a part, parts sent as filled
        out.write(memoryview(PARTS)[k : k + (3 << 20)])
    assert not storage.exists(url, s3_server)  # nothing visible before the commit
    out.commit()
    with storage.open_source(url, s3_server) as src:
        assert isinstance(src, ObjectStoreSource) and src.size == len(PARTS)
        assert bytes(src.read(PART_BYTES - 10, 20)) == PARTS[PART_BYTES - 10 : PART_BYTES + 10]
    assert unfinished_uploads(s3_server, url) == []


def test_an_interrupted_upload_leaves_nothing(s3_server, s3_prefix):
    url = f"{s3_prefix}/interrupted.bin"
    out = storage.AtomicOutput(url, s3_server)
    try:
        out.write(PARTS)  # parts uploaded: the upload exists at the store
        assert unfinished_uploads(s3_server, url) != []
        raise KeyboardInterrupt
    except KeyboardInterrupt:  # what the writers do on any exception
        out.abort()
    assert not storage.exists(url, s3_server)
    assert unfinished_uploads(s3_server, url) == []  # aborted, not left behind


def test_a_killed_writer_publishes_nothing(s3_server, s3_prefix):
    url = f"{s3_prefix}/killed.bin"
    child = (
        "import sys, json, time\n"
        "from recio import storage\n"
        "out = storage.AtomicOutput(sys.argv[1], json.loads(sys.argv[2]))\n"
        f"out.write(bytes({3 * PART_BYTES}))\n"
        "print('written', flush=True)\n"
        "time.sleep(60)\n"
        "out.commit()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", child, url, json.dumps(s3_server)],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ),
    )  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "written"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert not storage.exists(url, s3_server)


def test_a_refused_upload_names_the_store_and_publishes_nothing(s3_server, s3_prefix):
    url = f"{s3_prefix}/refused.bin"
    out = storage.AtomicOutput(url, dict(s3_server, secret="wrong-secret"))
    out.write(b"x" * 100)
    with pytest.raises(PermissionError, match="S3 bucket 'test'.*check the credentials"):
        out.commit()
    assert not storage.exists(url, s3_server)


@pytest.fixture
def image_list(tmp_path):
    """A folder of small JPEGs and its .lst (written by recio im2rec --list)."""
    folder = tmp_path / "images" / "cls"
    folder.mkdir(parents=True)
    for k in range(12):
        (folder / f"{k:02d}.jpg").write_bytes(encode(40 + k, 32, seed=k))
    prefix = str(tmp_path / "data")
    assert cli(["im2rec", "--list", "--recursive", prefix, str(tmp_path / "images")]) == 0
    return prefix, str(tmp_path / "images")


def test_im2rec_optimize_and_checksum_write_to_s3(s3_server, s3_prefix, image_list):
    prefix, root = image_list
    options = json.dumps(s3_server)
    argv = ["im2rec", "--output", s3_prefix, "--storage-options", options, prefix, root]
    assert cli(argv) == 0
    rec = f"{s3_prefix}/data.rec"
    packed = RecordFile(rec, storage_options=s3_server, verify_checksums=True)
    assert isinstance(packed.source, ObjectStoreSource) and len(packed) == 12
    records = [bytes(r) for r in packed.read_many(range(12))]

    optimized = f"{s3_prefix}/opt.rec"
    assert cli(["optimize", "--quiet", "--storage-options", options, rec, optimized]) == 0
    opt = RecordFile(optimized, storage_options=s3_server, verify_checksums=True)
    assert len(opt) == 12 and opt.checksums is not None
    assert opt.read_many(range(12)) and storage.exists(f"{s3_prefix}/opt.idx", s3_server)

    # a dataset without a sidecar: recio checksum writes the same one im2rec did
    for ext in ("rec", "idx"):
        data = storage.read_bytes(f"{s3_prefix}/data.{ext}", s3_server)
        out = storage.AtomicOutput(f"{s3_prefix}/plain.{ext}", s3_server)
        out.write(data)
        out.commit()
    assert not storage.exists(f"{s3_prefix}/plain.crc", s3_server)
    assert cli(["checksum", "--storage-options", options, f"{s3_prefix}/plain.rec"]) == 0
    sidecar = storage.read_bytes(f"{s3_prefix}/plain.crc", s3_server)
    assert sidecar == storage.read_bytes(f"{s3_prefix}/data.crc", s3_server)
    plain = RecordFile(f"{s3_prefix}/plain.rec", storage_options=s3_server)
    assert [bytes(r) for r in plain.read_many(range(12))] == records
