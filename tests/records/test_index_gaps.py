"""An .idx that leaves out records the .rec holds: a warning as records are read, with the
count and the `recio index` command; a FAIL from `recio verify` (NOTE [index gaps])."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from recio.cli import main as cli
from recio.errors import IndexWarning
from recio.frameworks.dataset import RecordDataset
from recio.pipeline.iterator import ImageRecordIter
from recio.records.batch import read_batch
from recio.records.file import RecordFile
from recio.records.format import IRHeader, pack
from recio.records.recordio import MXIndexedRecordIO
from tests.images import encode

N = 64


def write_skipping(tmp_path, skipped=(5,), n=N):
    """``n`` JPEG records with an .idx that leaves out the keys ``skipped``."""
    rec, idx = str(tmp_path / "g.rec"), str(tmp_path / "g.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for k in range(n):
            w.write_idx(k, pack(IRHeader(0, float(k % 3), k, 0), encode(24, 24, seed=k)))
    lines = open(idx).read().splitlines(True)
    open(idx, "w").writelines(line for k, line in enumerate(lines) if k not in skipped)
    os.remove(rec[:-4] + ".crc")  # else the sidecar refuses the .idx at open (another write)
    return rec, idx


def gap_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, IndexWarning)]


def assert_one_gap_warning(caught, rec, idx, count=1, after=4):
    found = gap_warnings(caught)
    assert len(found) == 1, found
    text = found[0]
    assert f"{idx} skips records of {rec}" in text and f"after key {after}" in text
    assert f"hold {count} record{'s' if count > 1 else ''} it does not list" in text
    assert f"`recio index {rec}`" in text and f"`recio verify {rec}`" in text


def test_the_iterator_warns_of_a_skipped_record_with_its_count(tmp_path):
    rec, idx = write_skipping(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ImageRecordIter(rec, (3, 16, 16), 8, preprocess_threads=1) as it:
            assert gap_warnings(caught) == []  # not at open: nothing read yet
            delivered = sum(len(b.index) - b.pad for b in it)
    assert delivered == N - 1  # the .idx's records, as it says
    assert_one_gap_warning(caught, rec, idx)


def test_the_dataset_and_batch_reads_warn_once_per_file(tmp_path):
    rec, idx = write_skipping(tmp_path, skipped=(5, 6, 20))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = RecordDataset(rec, (3, 16, 16))
        for i in range(len(dataset)):
            dataset[i]
    assert_one_gap_warning(caught, rec, idx, count=2)  # the first gap; once per file
    for read in (
        lambda r: read_batch(r, np.arange(len(r)), 1),  # a local batch's parse
        lambda r: r.read_many(np.arange(len(r))),
        lambda r: [r.read(i) for i in range(len(r))],
    ):
        with RecordFile(rec) as records, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            read(records)
        assert_one_gap_warning(caught, rec, idx, count=2)


def test_a_whole_index_says_nothing(tmp_path):
    rec, _ = write_skipping(tmp_path, skipped=())
    with warnings.catch_warnings():
        warnings.simplefilter("error", IndexWarning)
        with ImageRecordIter(rec, (3, 16, 16), 8, preprocess_threads=1) as it:
            assert sum(len(b.index) - b.pad for b in it) == N
        with RecordFile(rec) as records:
            [records.read(i) for i in range(len(records))]
            read_batch(records, np.arange(N), 1)


def test_records_before_the_first_listed_one_are_seen_at_open(tmp_path):
    rec, idx = write_skipping(tmp_path, skipped=(0, 1))
    with pytest.warns(IndexWarning, match="before its first record") as caught:
        RecordFile(rec).close()
    assert "hold 2 records it does not list" in str(caught[0].message)


def test_verify_fails_with_the_count_and_the_command(tmp_path, capsys):
    rec, idx = write_skipping(tmp_path, skipped=(5, 6, 20))
    assert cli(["verify", rec]) == 1
    out = capsys.readouterr().out
    assert f"FAIL {rec}: {idx} leaves out 3 of the {N} records" in out
    assert f"`recio index {rec}` rebuilds it" in out
    assert cli(["index", rec]) == 0
    assert cli(["verify", rec]) == 0


def test_a_remote_iterator_warns_too(tmp_path, memfs):
    """The records' extents as fetched (the remote path's native call) show the gap."""
    rec, idx = write_skipping(tmp_path)
    memfs.put_file(rec, "/gaps/g.rec")
    memfs.put_file(idx, "/gaps/g.idx")
    url = "memory:///gaps/g.rec"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ImageRecordIter(url, (3, 16, 16), 8, preprocess_threads=1) as it:
            delivered = sum(len(b.index) - b.pad for b in it)
    assert delivered == N - 1
    assert_one_gap_warning(caught, url, "memory:///gaps/g.idx")
