"""RecioSource: the external_source callable, in DALI's parallel (pickled) mode."""

from ..conftest import needs_dali
from .conftest import pair


@needs_dali
def test_parallel_source_pickles_and_agrees(rec):
    it, ref = pair(rec, {"parallel": True, "py_num_workers": 1}, shuffle=True, seed=1)
    got = [b.index.tolist() for b in it]
    assert got == [b.index.tolist() for b in ref]
