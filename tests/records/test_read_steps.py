"""A local batch's read steps on a RecordFile (records/batch.py and pipeline/read_decode.py
share them): the map and offsets, the check after the parse, the records' head words."""

from __future__ import annotations

import numpy as np

from recio.errors import ChecksumError
from recio.records.file import RecordFile
from recio.records.format import FRAME_HEADER_SIZE, IR_HEADER_SIZE, MAGIC, IRHeader, pack
from recio.records.recordio import MXIndexedRecordIO

N = 6


def write(tmp_path):
    rec, idx = str(tmp_path / "s.rec"), str(tmp_path / "s.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:  # with its checksum sidecar
        for k in range(N):
            w.write_idx(k, pack(IRHeader(0, float(k), 100 + k, 0), bytes(range(20 + k))))
    return rec


def test_the_check_after_the_parse_names_a_damaged_record(tmp_path):
    rec = write(tmp_path)
    with RecordFile(rec) as records:
        damaged = int(records.offsets[3]) + FRAME_HEADER_SIZE + IR_HEADER_SIZE + 5
    data = bytearray(open(rec, "rb").read())
    data[damaged] ^= 0xFF  # in the image: the frames still chain
    open(rec, "wb").write(data)
    positions = np.arange(N)
    with RecordFile(rec) as records:
        view, offsets = records.mapped_batch(positions)
        assert offsets.tolist() == records.offsets.tolist()
        problems = records.view_problems(view, positions)
        assert list(problems) == [3]
        error = problems[3]
        assert isinstance(error, ChecksumError)
        assert error.key == 3 and error.offset == offsets[3] and rec in str(error)
        assert records.checksum_stats["mismatched"] == 1
        assert records.view_problems(view, np.array([0, 1, 2])) == {}


def test_head_words_are_the_frame_and_irheader_words(tmp_path):
    rec = write(tmp_path)
    with RecordFile(rec) as records:
        words = records.head_words(np.array([0, 4]), 3)
    assert words[:, 0].tolist() == [MAGIC, MAGIC]
    assert (words[:, 1] & ((1 << 29) - 1)).tolist() == [IR_HEADER_SIZE + 20, IR_HEADER_SIZE + 24]
    assert words[:, 2].tolist() == [0, 0]  # flag 0: one label
