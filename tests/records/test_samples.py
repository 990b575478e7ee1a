"""recio.records.samples: InsightFace's header/identity records and label-only records are
not samples."""

from __future__ import annotations

import os

import numpy as np
import pytest

from recio.errors import RecordIOError
from recio.records.format import IRHeader
from recio.records.reader import RecordFile
from recio.records.recordio import MXIndexedRecordIO, pack, unpack
from recio.records.samples import INSIGHTFACE, PLAIN, detect_layout
from tests.faces import write_faces
from tests.images import encode


def mxface_reading(face):
    """What InsightFace's MXFaceDataset finds: its image keys and the header's ranges."""
    with MXIndexedRecordIO(face.idx, face.rec, "r") as r:
        header, _ = unpack(r.read_idx(0))
        assert header.flag > 0
        first, end = int(header.label[0]), int(header.label[1])
        ranges = [unpack(r.read_idx(k))[0].label.astype(int).tolist() for k in range(first, end)]
    return np.arange(1, first), ranges


def test_insightface_header_identities_and_samples(tmp_path):
    face = write_faces(tmp_path, (3, 1, 4, 2))
    with RecordFile(face.rec) as records:
        layout = detect_layout(records)
        keys, ranges = mxface_reading(face)
        assert layout.kind == INSIGHTFACE
        assert records.keys[layout.samples].tolist() == keys.tolist() == list(range(1, 11))
        assert layout.num_samples == 10
        assert layout.num_classes == 4
        assert layout.header.flag == 2
        assert layout.identities.tolist() == ranges == face.ranges().tolist()
        assert layout.identities.dtype == np.int64
        # header + 4 identity records, none of them a sample
        assert sorted(records.keys[layout.metadata].tolist()) == [0, 11, 12, 13, 14]
        assert "InsightFace" in layout.describe() and "4 identity records" in layout.describe()


def test_header_found_by_key_wherever_it_lies(tmp_path):
    face = write_faces(tmp_path)
    with RecordFile(face.rec) as records:
        position = int(np.flatnonzero(records.keys == 0)[0])
        assert position == face.num_images  # written after the images, as InsightFace does
        assert detect_layout(records).kind == INSIGHTFACE


def test_without_header_every_image_is_a_sample(tmp_path):
    face = write_faces(tmp_path, header=False)
    with RecordFile(face.rec) as records:
        layout = detect_layout(records)
        assert layout.kind == PLAIN
        assert layout.samples.tolist() == list(range(face.num_images))
        assert len(layout.metadata) == 0 and layout.num_classes is None
        assert layout.identities.shape == (0, 2)


def test_label_only_records_of_a_plain_file_are_not_samples(tmp_path):
    face = write_faces(tmp_path, header=False, label_only_at=(2, 5))
    with RecordFile(face.rec) as records:
        layout = detect_layout(records)
        assert layout.kind == PLAIN
        assert sorted(records.keys[layout.metadata].tolist()) == [10_002, 10_005]
        assert sorted(records.keys[layout.samples].tolist()) == list(range(1, 11))
        assert "2 label-only records" in layout.describe()


def test_a_multi_label_image_at_key_0_is_no_header(tmp_path):
    rec, idx = str(tmp_path / "m.rec"), str(tmp_path / "m.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for key in range(3):
            w.write_idx(key, pack(IRHeader(0, [5.0, 9.0], key, 0), encode(16, 16, seed=key)))
    with RecordFile(rec) as records:
        layout = detect_layout(records)
        assert layout.kind == PLAIN and layout.num_samples == 3


def test_header_announcing_missing_keys_names_the_index(tmp_path):
    rec, idx = str(tmp_path / "h.rec"), str(tmp_path / "h.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        w.write_idx(0, pack(IRHeader(0, [6.0, 7.0], 0, 0), b""))  # images 1..5: only 1..3
        for key in range(1, 4):
            w.write_idx(key, pack(IRHeader(0, 0.0, key, 0), encode(16, 16, seed=key)))
        w.write_idx(6, pack(IRHeader(0, [1.0, 4.0], 0, 0), b""))
        for key in (100, 101):  # records enough for keys 1..6: the lookup finds 4, 5 missing
            w.write_idx(key, pack(IRHeader(0, 0.0, key, 0), encode(16, 16, seed=key)))
    with RecordFile(rec) as records, pytest.raises(RecordIOError) as info:
        detect_layout(records)
    assert "h.idx" in str(info.value) and "first: key 4" in str(info.value)


def test_identity_record_without_two_labels_is_reported(tmp_path):
    rec, idx = str(tmp_path / "i.rec"), str(tmp_path / "i.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        w.write_idx(0, pack(IRHeader(0, [2.0, 3.0], 0, 0), b""))
        w.write_idx(1, pack(IRHeader(0, 0.0, 1, 0), encode(16, 16)))
        w.write_idx(2, pack(IRHeader(0, 1.0, 2, 0), b""))  # one label, not a key range
    with RecordFile(rec) as records:
        layout = detect_layout(records)
        assert layout.num_samples == 1
        with pytest.raises(RecordIOError, match="identity record key 2 has 0 labels") as info:
            _ = layout.identities
        assert info.value.offset == int(records.offsets[2])


@pytest.mark.parametrize("extra_key", [None, 10**12, -5])  # dense keys: a table; else a sort
def test_keys_are_found_in_any_order(tmp_path, extra_key):
    rec, idx = str(tmp_path / "k.rec"), str(tmp_path / "k.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        if extra_key is not None:
            w.write_idx(extra_key, pack(IRHeader(0, 9.0, 0, 0), encode(16, 16, seed=9)))
        for key in (3, 1, 2):
            w.write_idx(key, pack(IRHeader(0, float(key), key, 0), encode(16, 16, seed=key)))
        w.write_idx(4, pack(IRHeader(0, [1.0, 4.0], 0, 0), b""))
        w.write_idx(0, pack(IRHeader(0, [4.0, 5.0], 0, 0), b""))
    with RecordFile(rec) as records:
        layout = detect_layout(records)
        assert records.keys[layout.samples].tolist() == [1, 2, 3]
        assert records.keys[layout.identity_positions].tolist() == [4]
        assert layout.identities.tolist() == [[1, 4]]


def _hostile_header(tmp_path, label, identity=(1.0, 2.0)):
    """A small InsightFace file (one image) whose header (and identity) labels are given."""
    rec, idx = str(tmp_path / "hostile.rec"), str(tmp_path / "hostile.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        w.write_idx(1, pack(IRHeader(0, 0.0, 1, 0), encode(16, 16)))
        w.write_idx(0, pack(IRHeader(0, list(label), 0, 0), b""))
        w.write_idx(2, pack(IRHeader(0, list(identity), 0, 0), b""))
    return rec


# Under a bound on address space, a BLAS that starts a thread per core (each with its
# stack and malloc arena reserved) could fail before the test does anything: one thread.
_FEW_THREADS = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1"}  # fmt: skip

_OPEN_UNDER_LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from recio.records.reader import RecordFile
from recio.records.samples import detect_layout
try:
    with RecordFile(sys.argv[1]) as records:
        detect_layout(records)
except BaseException as exc:
    print(type(exc).__name__, exc)
"""


def test_header_claiming_billions_of_identities_is_refused_under_a_memory_limit(tmp_path):
    """3e9 identities: refused from the header (naming the file), not a 22 GiB lookup."""
    import subprocess
    import sys

    rec = _hostile_header(tmp_path, [2.0, 3e9])
    run = subprocess.run(
        [sys.executable, "-c", _OPEN_UNDER_LIMIT, rec], capture_output=True, text=True,
        timeout=120, env=_FEW_THREADS,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("RecordIOError"), run.stdout
    assert rec in run.stdout and "3 records" in run.stdout


@pytest.mark.parametrize("label", [[float("nan"), 3.0], [2.0, float("inf")], [1.5, 3.0]])
def test_header_labels_that_are_not_whole_numbers_name_the_file(tmp_path, label):
    rec = _hostile_header(tmp_path, label)
    with RecordFile(rec) as records, pytest.raises(RecordIOError) as info:
        detect_layout(records)
    assert info.value.path == rec and "not whole numbers" in str(info.value)
    assert info.value.offset == int(records.offsets[1])  # the header record


@pytest.mark.parametrize("identity", [[float("nan"), 2.0], [1.0, 1e9], [0.0, 2.0]])
def test_identity_labels_outside_the_image_keys_are_refused(tmp_path, identity):
    rec = _hostile_header(tmp_path, [2.0, 3.0], identity)
    with RecordFile(rec) as records:
        layout = detect_layout(records)
        with pytest.raises(RecordIOError, match="identity record key 2") as info:
            _ = layout.identities
        assert info.value.path == rec and info.value.offset == int(records.offsets[2])
