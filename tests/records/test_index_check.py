"""An .idx compared with a walk of its .rec (records/index_check.py): each kind of
disagreement named with its count and first byte, the keys of a rebuilt .idx."""

from __future__ import annotations

from recio import storage
from recio.records.format import IRHeader, pack
from recio.records.index_check import check_idx, counted, index_keys, records_left_out
from recio.records.recordio import MXIndexedRecordIO
from recio.records.scan import walk_records


def write(tmp_path, n=6, ids=None):
    rec, idx = str(tmp_path / "d.rec"), str(tmp_path / "d.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for k in range(n):
            rid = k if ids is None else ids[k]
            w.write_idx(k, pack(IRHeader(0, 1.0, rid, 0), bytes(10 + k)))
    with storage.open_source(rec) as source:
        return rec, idx, walk_records(source, headers=True), source.size


def test_an_idx_that_matches_its_walk_has_no_problem(tmp_path):
    rec, idx, walk, size = write(tmp_path)
    entries, problem = check_idx(idx, None, walk, rec, size)
    assert problem is None and [o for _, o in entries] == walk.offsets
    assert records_left_out(rec, walk.offsets, None) is None


def test_each_disagreement_is_counted_with_its_first_byte(tmp_path):
    rec, idx, walk, size = write(tmp_path)
    lines = open(idx).read().splitlines()
    lines[2] = f"2\t{walk.offsets[2] + 4}"  # no record starts there
    lines[4] = f"4\t{size + 8}"  # past the end
    del lines[5]  # record 5 left out
    open(idx, "w").write("\n".join(lines) + "\n")
    _, problem = check_idx(idx, None, walk, rec, size)
    assert problem.startswith(f"{idx} has 5 entries for the 6 complete records of {rec}: ")
    assert f"1 past its end ({size} bytes; first: key 4 at byte {size + 8} of {rec})" in problem
    assert f"1 at bytes that are no record start (first: key 2 at byte {walk.offsets[2] + 4}" in (
        problem
    )
    assert f"3 records not listed (first at byte {walk.offsets[2]} of {rec})" in problem
    left = records_left_out(rec, walk.offsets, None)
    assert left.startswith(f"{idx} leaves out 3 of the 6 records (first at byte {walk.offsets[2]}")


def test_rebuilt_keys_are_the_header_ids_unless_they_repeat(tmp_path):
    *_, walk, _ = write(tmp_path, ids=[10, 11, 12, 13, 14, 15])
    assert index_keys(walk) == ([10, 11, 12, 13, 14, 15], "keys = the records' header ids (10..15)")
    assert index_keys(walk, renumber=True)[0] == list(range(6))
    *_, walk, _ = write(tmp_path, ids=[7, 7, 1, 2, 3, 4])
    keys, why = index_keys(walk)
    assert keys == list(range(6)) and "(id 7 is in 2 records)" in why


def test_counted_says_one_or_many():
    assert counted(1, "record") == "1 record"
    assert counted(2, "entry", "entries") == "2 entries"
