"""OpenOptions: how records are opened, one value from the iterator down to each shard."""

import pickle

import pytest

from recio.pipeline.config import Storage
from recio.records import OpenOptions, open_records
from recio.records.file import RecordFile
from recio.records.format import IRHeader, pack
from recio.records.recordio import MXIndexedRecordIO
from recio.sampling.mixing import Mixture, Source, open_mixture


def write(folder, name: str, n: int = 3) -> str:
    rec = str(folder / f"{name}.rec")
    with MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w") as w:
        for i in range(n):
            w.write_idx(i, pack(IRHeader(0, float(i), i, 0), b"image %d" % i))
    return rec


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cache_limit": 10}, "cache_limit=10 needs a cache_dir"),
        ({"cache_dir": "c", "cache_limit": 0}, "cache_limit must be a number of bytes >= 1"),
        ({"verify_checksums": "yes"}, 'verify_checksums must be True, False or "auto"'),
    ],
)
def test_the_value_checks_its_fields_for_every_opener(tmp_path, fields, message):
    rec = write(tmp_path, "a")
    for make in (
        lambda: OpenOptions(**fields),
        lambda: Storage(**fields),
        lambda: RecordFile(rec, **fields),
        lambda: open_records(rec, **fields),
    ):
        with pytest.raises(ValueError, match=message):
            make()


def test_keywords_or_one_value_open_alike_and_not_both(tmp_path):
    rec = write(tmp_path, "a")
    options = OpenOptions(verify_checksums=False)
    with RecordFile(rec, verify_checksums=False) as by_keyword:
        assert by_keyword.options == options
    with RecordFile(rec, options=options) as by_value:
        assert by_value.options is options and by_value.verify_checksums is False
        copy = pickle.loads(pickle.dumps(by_value))  # reopened with the same options
        assert copy.options == options
        copy.close()
    with pytest.raises(TypeError, match="give options= or verify_checksums, not both"):
        RecordFile(rec, verify_checksums=True, options=options)


def test_one_value_reaches_every_shard_and_every_source(tmp_path):
    recs = [write(tmp_path, f"s-{k:05d}-of-00002") for k in range(2)]
    options = OpenOptions(storage_options={"anon": True}, verify_checksums=True)
    with open_records(recs, options=options) as union:
        assert union.options is options
        assert all(shard.options is options for shard in union.shards)
    mixture = Mixture([Source(recs[0]), Source(recs[1])])
    records, _ = open_mixture(mixture, options=options)
    with records:
        assert all(shard.options is options for shard in records.shards)
    storage = Storage(storage_options={"anon": True}, verify_checksums=True)
    assert storage.open_options() == options
