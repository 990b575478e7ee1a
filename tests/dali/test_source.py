"""RecioSource: the external_source callable, in DALI's parallel (pickled) mode."""

import numpy as np

from ..conftest import needs_dali
from .conftest import pair


@needs_dali
def test_parallel_source_pickles_and_agrees(rec):
    it, ref = pair(rec, {"parallel": True, "py_num_workers": 1}, shuffle=True, seed=1)
    got = [b.index.tolist() for b in it]
    assert got == [b.index.tolist() for b in ref]


def test_readable_bytes_of_a_batch_asks_only_its_own_files(tmp_path):
    """NOTE [dali map check]: the per-batch check costs an fstat per file of the batch, not
    one per shard of the dataset."""
    from recio.dali.source import readable_bytes
    from recio.records.shards import open_records

    from ..pipeline.test_iterator import make_rec

    recs = []
    for k in range(3):
        (tmp_path / str(k)).mkdir()
        recs.append(make_rec(tmp_path / str(k), n=6 + k, seed=k))
    with open_records(recs) as records:
        sizes = [shard.size for shard in records.shards]
        asked = []
        for shard in records.shards:
            readable = shard.source.readable
            shard.source.readable = lambda r=readable, s=shard: asked.append(s) or r()
        assert readable_bytes(records) == sum(sizes) and len(asked) == 3
        asked.clear()
        second = np.arange(records.starts[1], records.starts[2])  # the second file's records
        assert readable_bytes(records, second) == sizes[1]
        assert asked == [records.shards[1]]
        assert readable_bytes(records, np.array([0, records.starts[2]])) == sizes[0] + sizes[2]
