"""recio.records.protocol: one file and a set of shards are both Records, opened alike."""

import pickle

import numpy as np
import pytest

import recio.records
from recio.records import Records, open_records
from recio.records.file import RecordFile
from recio.records.format import unpack
from recio.records.shards import ShardedRecords

from .test_shards import COUNTS, write_shards


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    urls = write_shards(tmp_path_factory.mktemp("protocol"))
    return urls[1], urls


def test_both_kinds_are_records_and_answer_alike(opened):
    one, shards = opened
    for spec, kind, n in ((one, RecordFile, COUNTS[1]), (shards, ShardedRecords, sum(COUNTS))):
        with open_records(spec) as records:
            assert type(records) is kind and isinstance(records, Records)
            assert len(records) == len(records.keys) == len(records.offsets) == n
            positions = np.array([n - 1, 0])
            payloads = [bytes(p) for p in records.read_many(positions)]
            assert payloads == [bytes(records.read(int(p))) for p in positions]
            batch = records.read_batch(positions, 1)
            assert batch.ids.tolist() == [unpack(p)[0].id for p in payloads]
            extents = records.read_extents(positions)
            assert [len(e) for e in extents] == records.lengths[positions].tolist()
            assert records.detect_layout().num_samples == n
            assert "at byte" in records.describe(0)
            records.schedule_reads([(0, positions)])  # no cache: nothing to do
            records.check_open()
            clone = pickle.loads(pickle.dumps(records))
            assert type(clone) is kind and np.array_equal(clone.offsets, records.offsets)
            clone.close()
        assert records.closed
        with pytest.raises(ValueError, match=f"I/O on a closed {kind.__name__}"):
            records.check_open()
        with pytest.raises(ValueError, match="closed"):
            records.read(0)


def test_record_file_refuses_shards_and_names_open_records(opened):
    _, shards = opened
    for spec in (shards, shards[0].replace("00000-of", "0000[01]-of")):
        with pytest.raises(TypeError, match="open_records"):
            RecordFile(spec)


def test_the_package_exports_the_entry_point():
    assert recio.records.open_records is open_records
    assert recio.records.RecordFile is RecordFile
    assert recio.records.ShardedRecords is ShardedRecords
    with pytest.raises(AttributeError):
        recio.records.no_such_name  # noqa: B018
