"""The reading side of the record fuzz (test_fuzz.py), run in a subprocess.

Reads a JSON job from stdin: the clean ``.rec`` folder and a list of mutations. For each
mutation it makes a damaged copy and reads it with the iterator (skip, replace, raise) and
RecordDataset (replace, raise), checksums on and off, and prints one JSON line per read:
its outcome (ok, recio's error class, or a foreign exception) and, with checksums on, how
many delivered images or labels differ from the clean file's. A signal death or a hang
shows in the parent as the return code or the timeout.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import traceback
import warnings

import numpy as np

from recio.errors import DecodeError, RecordIOError
from recio.frameworks.dataset import RecordDataset
from recio.pipeline.config import Normalize
from recio.pipeline.iterator import ImageRecordIter

SHAPE = (3, 24, 24)
BATCH = 4


def mutate(folder: str, work: str, mutation: dict) -> str:
    """A copy of the clean files in ``work`` with ``mutation`` applied; returns the .rec."""
    for name in ("f.rec", "f.idx", "f.crc"):
        shutil.copy(os.path.join(folder, name), os.path.join(work, name))
    rec = os.path.join(work, "f.rec")
    with open(rec, "r+b") as f:
        for at, value in mutation.get("bytes", []):
            f.seek(at)
            f.write(bytes([value]))
        if "cut" in mutation:
            f.truncate(mutation["cut"])
    return rec


def iterate(rec: str, policy: str, checksums: bool) -> tuple[dict, dict]:
    """Key -> (image, label) of each slot delivered, and the keys reported bad."""
    got = {}
    with ImageRecordIter(
        rec, data_shape=SHAPE, batch_size=BATCH, on_error=policy, verify_checksums=checksums,
        preprocess_threads=1, dtype="uint8", shuffle=False,
    ) as it:  # fmt: skip
        for batch in it:
            for j in range(BATCH - batch.pad):
                got.setdefault(int(batch.index[j]), []).append(
                    (batch.data[j].copy(), float(batch.label[j]))
                )
        bad = dict(it.stats.bad_records)
    return got, bad


def from_dataset(rec: str, policy: str, checksums: bool, n: int) -> tuple[dict, dict]:
    dataset = RecordDataset(
        rec, SHAPE, on_error=policy, verify_checksums=checksums,
        normalize=Normalize(dtype="uint8"),
    )  # fmt: skip
    got: dict = {}
    for start in range(0, n, BATCH):
        batch = dataset.__getitems__(list(range(start, min(start + BATCH, n))))
        for j, (image, label) in enumerate(batch):
            got.setdefault(start + j, []).append((image.copy(), float(label)))
    return got, {}


def wrong(got: dict, bad: dict, reference: dict, by_key: bool) -> int:
    """Delivered images or labels that are not the clean file's (replaced ones excepted)."""
    count = 0
    for key, items in got.items():
        for image, label in items:
            if not image.any() and (key in bad or not by_key):
                continue  # zero-filled in place of a bad record (replace)
            want = reference.get(key)
            if want is None or not np.array_equal(image, want[0]) or label != want[1]:
                count += 1
    return count


def main() -> None:
    job = json.load(sys.stdin)
    folder, work = job["folder"], job["work"]
    n = job["records"]
    clean, _ = iterate(os.path.join(folder, "f.rec"), "raise", True)
    reference = {key: items[0] for key, items in clean.items()}
    assert len(reference) == n, len(reference)
    warnings.simplefilter("ignore")  # IndexWarning and the bad-image log: counted, not shown
    reads = [("iterator", p, c) for p in ("skip", "replace", "raise") for c in (False, True)]
    reads += [("dataset", p, c) for p in ("replace", "raise") for c in (False, True)]
    for number, mutation in enumerate(job["mutations"]):
        rec = mutate(folder, work, mutation)
        for reader, policy, checksums in reads:
            line = {"mutation": number, "reader": reader, "policy": policy, "crc": checksums}
            try:
                if reader == "iterator":
                    got, bad = iterate(rec, policy, checksums)
                else:
                    got, bad = from_dataset(rec, policy, checksums, n)
            except (RecordIOError, DecodeError) as exc:
                line["outcome"] = type(exc).__name__
            except Exception as exc:  # noqa: BLE001 - what the fuzz looks for
                line["outcome"] = "foreign"
                line["error"] = "".join(traceback.format_exception(exc))[-2000:]
            else:
                line["outcome"] = "ok"
                line["bad"] = len(bad)
                if checksums:
                    line["wrong"] = wrong(got, bad, reference, reader == "iterator")
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
