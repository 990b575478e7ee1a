"""`recio optimize` against MXNet 1.9.1's decoder, through a golden vector made once.

tests/data/optimize_golden holds a small .rec of every JPEG sampling (and a progressive
JPEG), ``recio optimize``'s output of it, and what MXNet 1.9.1's ``mx.image.imdecode`` (the
OpenCV decode of its ImageRecordIter) made of each record of both files
(tools/make_optimize_golden.py).
"""

import json

import pytest

from recio.im2rec.optimize import optimize
from recio.records.recordio import MXIndexedRecordIO

from .._paths import REPO

GOLDEN = REPO / "tests" / "data" / "optimize_golden"


def _records(rec) -> dict[int, bytes]:
    with MXIndexedRecordIO(str(rec)[:-4] + ".idx", str(rec), "r") as r:
        return {key: bytes(r.read_idx(key)) for key in r.keys}


def test_mxnet_decodes_the_optimized_file_to_the_originals_pixels():
    golden = json.loads((GOLDEN / "mxnet_pixels.json").read_text())
    assert golden["mxnet"] == "1.9.1"
    records = golden["records"]
    assert sorted(map(int, records)) == sorted(_records(GOLDEN / "src.rec"))
    for key, entry in records.items():
        assert entry["src"] == entry["opt"], f"record {key}: MXNet saw other pixels"


def test_every_optimized_jpeg_carries_restart_markers():
    for key, payload in _records(GOLDEN / "opt.rec").items():
        assert b"\xff\xdd" in payload, key  # a DRI segment (0xFF is stuffed in the entropy data)


def test_recio_optimize_still_writes_the_golden_file(tmp_path):
    """The golden speaks for the transcoder only while it writes the same bytes."""
    out = tmp_path / "opt.rec"
    optimize(str(GOLDEN / "src.rec"), str(out))
    now, golden = _records(out), _records(GOLDEN / "opt.rec")
    assert now.keys() == golden.keys()
    changed = [key for key in now if now[key] != golden[key]]
    if changed:
        pytest.fail(
            f"recio optimize now writes other bytes for records {changed}: run both steps of "
            "tools/make_optimize_golden.py (MXNet 1.9.1 for the second) and check MXNet still "
            "decodes them to the original's pixels"
        )
