"""Mutation fuzz of record framing and IRHeaders, read by the iterator and RecordDataset.

Each mutation damages a small ``.rec`` (bits or bytes of a record's magic, length word,
IRHeader fields, or the file cut short) and the damaged file is read by the iterator
(skip, replace, raise) and RecordDataset (replace, raise), checksums on and off, in a
subprocess (tests/records/fuzz_child.py; several mutations per subprocess). Must hold:
no signal death (return code >= 0), no hang (timeout), no exception that is not recio's,
no wrong image or label delivered with checksums on, and skip and replace read to the end
of the epoch (a file cut short may be refused at open: its .idx names bytes it lacks).

The CI part runs a bounded number of mutations from a fixed seed; the slow test runs
more from a new seed each run (so runs add up). RECIO_FUZZ_MUTATIONS=N sets the first.
"""

from __future__ import annotations

import collections
import json
import os
import random
import subprocess
import sys
import time

import numpy as np
import pytest

from recio.records.file import RecordFile
from recio.records.format import IRHeader, pack
from recio.records.recordio import MXIndexedRecordIO

from .._paths import REPO
from ..images import encode

pytestmark = pytest.mark.needs_native

RECORDS = 8
PER_PROCESS = 12  # mutations read by one subprocess
# (name, first byte, size) of the fields of a record: the frame header, then the IRHeader
FIELDS = [
    ("magic", 0, 4), ("length", 4, 3), ("cflag", 7, 1), ("flag", 8, 4), ("label", 12, 4),
    ("id", 16, 8), ("id2", 24, 8),
]  # fmt: skip


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> tuple[str, list[int], int]:
    """RECORDS records (id = key, images of the iterator's size), their offsets, the size."""
    folder = tmp_path_factory.mktemp("fuzz")
    with MXIndexedRecordIO(str(folder / "f.idx"), str(folder / "f.rec"), "w") as w:
        for key in range(RECORDS):
            image = encode(24, 24, seed=key)
            w.write_idx(key, pack(IRHeader(0, float(key % 3), key, 0), image))
    assert (folder / "f.crc").exists()
    with RecordFile(str(folder / "f.rec")) as records:
        return str(folder), records.offsets.tolist(), records.size


def mutations(rng: random.Random, offsets: list[int], size: int, count: int) -> list[dict]:
    """``count`` damages: 1 to 3 field mutations of a record, or the file cut inside one."""
    out = []
    for _ in range(count):
        if rng.random() < 0.1:
            out.append({"cut": rng.randrange(offsets[1], size)})
            continue
        changes = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            start = rng.choice(offsets)
            _, first, width = rng.choice(FIELDS)
            at = start + first + rng.randrange(width)
            how = rng.choice(("flip", "flip", "zero", "ones", "random"))
            value = {"zero": 0x00, "ones": 0xFF, "random": rng.randrange(256)}.get(how)
            changes.append((at, how, value))
        out.append({"changes": changes})
    return out


def _bytes_of(folder: str, mutation: dict, rng: random.Random) -> dict:
    """The mutation as (offset, new byte) pairs over the clean file, for the child."""
    if "cut" in mutation:
        return mutation
    data = bytearray(open(os.path.join(folder, "f.rec"), "rb").read())
    pairs = []
    for at, how, value in mutation["changes"]:
        data[at] = data[at] ^ (1 << rng.randrange(8)) if how == "flip" else value
        pairs.append((at, data[at]))
    return {"bytes": pairs}


def run_fuzz(clean, tmp_path, seed: int, count: int) -> collections.Counter:
    """Read ``count`` mutations from ``seed``; return the outcome counts (asserting them)."""
    folder, offsets, size = clean
    rng = random.Random(seed)
    jobs = [_bytes_of(folder, m, rng) for m in mutations(rng, offsets, size, count)]
    counts: collections.Counter = collections.Counter()
    for zero in ("signal deaths", "hangs", "outcome foreign", "wrong with checksums"):
        counts[zero] = 0  # shown in the summary when they stay 0
    failures = []
    for start in range(0, len(jobs), PER_PROCESS):
        work = tmp_path / f"w{start}"
        work.mkdir()
        job = {"folder": folder, "work": str(work), "records": RECORDS,
               "mutations": jobs[start : start + PER_PROCESS]}  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        try:
            result = subprocess.run(
                [sys.executable, "-m", "tests.records.fuzz_child"], input=json.dumps(job),
                cwd=REPO, env=env, capture_output=True, text=True, timeout=240,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            counts["hangs"] += 1
            failures.append(("hang", seed, start, job["mutations"]))
            continue
        if result.returncode < 0:
            counts["signal deaths"] += 1
            failures.append(("signal", -result.returncode, seed, start, result.stderr[-2000:]))
            continue
        assert result.returncode == 0, result.stderr[-3000:]
        for line in result.stdout.splitlines():
            read = json.loads(line)
            counts["reads"] += 1
            counts[f"outcome {read['outcome']}"] += 1
            counts["bad records counted"] += read.get("bad", 0)
            counts["wrong with checksums"] += read.get("wrong", 0)
            mutation = job["mutations"][read["mutation"]]
            # skip and replace go on past a damaged record: only a cut .idx stops them (at open)
            stopped = read["outcome"] != "ok" and read["policy"] != "raise"
            stopped = stopped and "cut" not in mutation
            if read["outcome"] == "foreign" or read.get("wrong") or stopped:
                failures.append((read, mutation))
    print(f"record fuzz, seed {seed}, {count} mutations:", dict(sorted(counts.items())))
    assert not failures, failures[:3]
    assert counts["reads"] == count * 10
    return counts


def test_fuzz_framing_and_headers(clean, tmp_path):
    count = int(os.environ.get("RECIO_FUZZ_MUTATIONS", "36"))
    counts = run_fuzz(clean, tmp_path, seed=35, count=count)
    assert counts["outcome ok"] > 0 and counts["bad records counted"] > 0  # it did read damage


@pytest.mark.slow
def test_fuzz_framing_and_headers_more(clean, tmp_path):
    seed = int(time.time())
    run_fuzz(clean, tmp_path, seed=seed, count=int(os.environ.get("RECIO_FUZZ_SLOW", "480")))


def test_fuzz_mutations_hit_the_fields_they_name(clean):
    """The harness itself: each change lands inside a record's frame or IRHeader."""
    folder, offsets, size = clean
    rng = random.Random(1)
    heads = {o + k for o in offsets for k in range(32)}
    for mutation in mutations(rng, offsets, size, 200):
        if "cut" in mutation:
            assert offsets[1] <= mutation["cut"] < size
        else:
            assert all(at in heads for at, _, _ in mutation["changes"])
    assert np.diff(offsets).min() > 32
