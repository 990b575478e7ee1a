"""A .rec truncated in place while it is read: no death by signal (NOTE [map guard]).

The iterator always has batches queued on the native pool, its threads reading records
straight from the map: without the guard the truncation killed the process with SIGBUS
in most runs. Each read runs in a subprocess; its return code must not be negative, and
what the map lost is counted exactly (replace), skipped, or raised as recio's
TruncatedRecordError naming the file and byte offset (raise).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

from recio.records.file import RecordFile
from recio.records.format import IRHeader, pack
from recio.records.recordio import MXIndexedRecordIO

from .._paths import REPO

pytestmark = pytest.mark.needs_native

N = 160  # records of ~25 kB: ~4 MB, batches of 16 queued 8 deep


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[str, int]:
    """The .rec and .idx, and where the truncation cuts them."""
    folder = tmp_path_factory.mktemp("cut")
    rng = np.random.default_rng(0)
    rec = str(folder / "t.rec")
    with MXIndexedRecordIO(str(folder / "t.idx"), rec, "w") as w:
        for k in range(N):
            out = io.BytesIO()
            pixels = rng.integers(0, 255, (120, 120, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(out, format="JPEG", quality=90)
            w.write_idx(k, pack(IRHeader(0, float(k % 7), k, 0), out.getvalue()))
    assert (folder / "t.crc").exists()  # the checksum sidecar, beside the .idx
    return str(folder), os.path.getsize(rec) // 3


_SCRIPT = """
import os, sys, threading, time
from recio.errors import RecordIOError, TruncatedRecordError
reader, policy, cut, crc = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "crc"
lost = 0
n = 0
try:
    if reader == "iterator":
        from recio import ImageRecordIter
        it = ImageRecordIter("t.rec", data_shape=(3, 64, 64), batch_size=16, shuffle=False,
                             on_error=policy, preprocess_threads=2, prefetch_buffer=8,
                             verify_checksums=crc)
        for batch in it:
            if n == 0:
                os.truncate("t.rec", cut)  # batches queued on the pool, reading the map
            n += 1
        print("ended", n, it.stats.skipped + it.stats.replaced)
    elif reader == "dataset":
        from recio.frameworks.dataset import RecordDataset
        ds = RecordDataset("t.rec", (3, 64, 64), on_error=policy, verify_checksums=crc)
        len(ds)  # opened: the .idx checked against the whole file
        cutter = threading.Timer(0.01, os.truncate, ("t.rec", cut))
        cutter.start()  # while the pool decodes the batch
        got = ds.__getitems__(list(range(len(ds))))
        cutter.join()
        got = ds.__getitems__(list(range(len(ds))))  # after: what the map holds now
        print("ended", 1, int(sum(not image.any() for image in got.images)))
    elif reader == "dali-iterator":  # cut after the source returned: DALI copies zeros
        from recio.dali import DALIImageRecordIter
        from recio.dali.source import RecioSource
        real = RecioSource.batch
        def batch_then_cut(self, epoch, step):
            out = real(self, epoch, step)
            if step == 3 and os.path.getsize("t.rec") > cut:
                os.truncate("t.rec", cut)  # the views handed out lose their pages
            return out
        RecioSource.batch = batch_then_cut
        it = DALIImageRecordIter("t.rec", data_shape=(3, 64, 64), batch_size=16,
                                 device="cpu", shuffle=False, on_error=policy,
                                 verify_checksums=crc)
        for batch in it:
            n += 1
        print("ended", n, it.stats.skipped + it.stats.replaced)
    else:
        from recio.dali.source import RecioSource
        from recio.records.file import RecordFile
        from recio.sampling.sampler import Sampler
        source = RecioSource(RecordFile("t.rec", verify_checksums=crc),
                             Sampler(160, 16, shuffle=False),
                             on_error=policy)
        bad = 0
        for step in range(10):
            if step == 1:
                os.truncate("t.rec", cut)
            out = source.batch(0, step)  # images, labels, meta, keep (0: replaced)
            bad += int((out[-1] == 0).sum())
            n += 1
        print("ended", n, bad)
except TruncatedRecordError as exc:
    print("raised", n, exc)
except Exception as exc:  # not recio's
    print("other", n, type(exc).__name__, str(exc).splitlines()[:1])
"""


def _run(data, tmp_path, reader: str, policy: str, checksums: bool = False) -> str:
    folder, cut = data
    for name in ("t.rec", "t.idx", "t.crc"):
        shutil.copy(os.path.join(folder, name), tmp_path / name)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_SCRIPT), reader, policy, str(cut),
         "crc" if checksums else "-"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode >= 0, f"killed by signal {-result.returncode}: {result.stderr}"
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def _lost(data) -> int:
    """The records the truncation cuts: those that do not end before it."""
    folder, cut = data
    with RecordFile(os.path.join(folder, "t.rec")) as records:
        return int((records.offsets + records.lengths > cut).sum())


@pytest.mark.parametrize("checksums", [False, True])
def test_truncation_while_the_iterator_reads_replaces_exactly_what_was_lost(
    data, tmp_path, checksums
):
    outcome, _, count = _run(data, tmp_path, "iterator", "replace", checksums).split()
    assert outcome == "ended" and int(count) == _lost(data)


@pytest.mark.parametrize("checksums", [False, True])
def test_truncation_while_the_iterator_reads_raises_recios_error(data, tmp_path, checksums):
    line = _run(data, tmp_path, "iterator", "raise", checksums)
    assert line.startswith("raised") and "t.rec was truncated while open" in line, line
    assert "at byte" in line and "with key" in line


def test_truncation_while_the_iterator_reads_skips(data, tmp_path):
    """No signal death under skip either: the lost records skipped and counted, and a batch
    the file lost whole refilled from good records (NOTE [refill]), so the epoch ends."""
    line = _run(data, tmp_path, "iterator", "skip")
    outcome, _, count = line.split()
    assert outcome == "ended" and int(count) == _lost(data)


@pytest.mark.parametrize("checksums", [False, True])
@pytest.mark.parametrize("policy", ["replace", "raise"])
def test_truncation_while_the_dataset_reads(data, tmp_path, policy, checksums):
    line = _run(data, tmp_path, "dataset", policy, checksums)
    if policy == "raise":
        assert line.startswith("raised") and "truncated while open" in line, line
    else:
        outcome, _, zeroed = line.split()
        assert outcome == "ended" and int(zeroed) == _lost(data)


@pytest.mark.parametrize("policy", ["replace", "raise"])
def test_truncation_while_the_dali_source_reads(data, tmp_path, policy):
    line = _run(data, tmp_path, "dali", policy)
    first_lost = N - _lost(data)
    if policy == "raise":  # at the first batch holding a record the file lost
        assert line.startswith(f"raised {first_lost // 16} "), line
        assert "truncated while open" in line and f"with key {first_lost}" in line, line
    else:
        outcome, steps, bad = line.split()
        assert outcome == "ended" and steps == "10" and int(bad) == _lost(data)


@pytest.mark.dali
@pytest.mark.parametrize("policy", ["skip", "replace", "raise"])
def test_truncation_after_the_dali_source_returned(data, tmp_path, policy):
    """Cut after the source handed DALI views of the map, before DALI copied them: the
    iterator sees the maps lost bytes (NOTE [dali map check]) and runs the batch again, so
    the lost records are counted (skip, replace) or raised as recio's error (raise)."""
    pytest.importorskip("nvidia.dali")
    line = _run(data, tmp_path, "dali-iterator", policy)
    first_lost = N - _lost(data)
    if policy == "raise":  # at that batch, or one before it (DALI runs the source ahead)
        outcome, consumed, _ = line.split(None, 2)
        assert outcome == "raised" and int(consumed) in (first_lost // 16 - 1, first_lost // 16)
        assert "truncated while open" in line and f"with key {first_lost}" in line, line
    else:
        assert line.startswith("ended"), line  # not DALI's decode error of the zeros
        outcome, steps, count = line.split()
        assert steps == "10" and int(count) == _lost(data), line
