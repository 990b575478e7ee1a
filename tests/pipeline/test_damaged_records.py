"""A damaged frame or IRHeader is a bad record: counted with its file, byte offset and key
under skip and replace (the .idx finds the records after it), recio's error under raise.

Each damage is read by the iterator (checksums on and off), the DALI stage's source and
RecordDataset, and never escapes as a bare OverflowError, ValueError or KeyError.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from recio.dali.source import RecioSource
from recio.errors import RecordIOError
from recio.frameworks.dataset import RecordDataset
from recio.pipeline.config import Normalize
from recio.pipeline.iterator import ImageRecordIter
from recio.records.file import RecordFile
from recio.sampling.sampler import Sampler

from .test_iterator import make_rec

pytestmark = pytest.mark.needs_native

N = 12
BAD = 5  # the damaged record's key (its position too)

# byte (from the record's start) and XOR mask of each damage
DAMAGES = {
    "header id high byte": (8 + 8 + 7, 0x80),  # frame, then flag, label, id (u64 LE)
    "length word, a payload past the file": (4 + 2, 0x40),
    "length word, continuation flag": (4 + 3, 0x40),
    "magic": (1, 0xFF),
    "label count": (8 + 3, 0x10),  # flag's high byte: millions of labels
}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """N records (id = 1000 + key), with the checksum sidecar their writer leaves."""
    folder = tmp_path_factory.mktemp("damaged")
    rec = make_rec(folder, n=N)
    assert (folder / "data.crc").exists()
    with RecordFile(rec) as records:
        return folder, records.offsets.tolist()


def damaged(clean, tmp_path, where: str) -> tuple[str, int]:
    folder, offsets = clean
    for name in ("data.rec", "data.idx", "data.crc"):
        shutil.copy(folder / name, tmp_path / name)
    rec = str(tmp_path / "data.rec")
    at, mask = DAMAGES[where]
    with open(rec, "r+b") as f:
        f.seek(offsets[BAD] + at)
        byte = f.read(1)[0]
        f.seek(offsets[BAD] + at)
        f.write(bytes([byte ^ mask]))
    return rec, offsets[BAD]


def _names_the_record(message: str, rec: str, offset: int) -> None:
    assert rec in message and f"at byte {offset}" in message, message
    assert f"key {BAD}" in message, message


@pytest.mark.parametrize("checksums", [False, True])
@pytest.mark.parametrize("where", list(DAMAGES))
def test_damaged_record_is_a_bad_record_for_the_iterator(clean, tmp_path, where, checksums):
    rec, offset = damaged(clean, tmp_path, where)
    kw = dict(data_shape=(3, 32, 32), batch_size=4, verify_checksums=checksums, dtype="uint8")
    with ImageRecordIter(rec, on_error="skip", **kw) as it:
        ids = [i for b in it for i in b.index[: 4 - b.pad].tolist()]
        stats = it.stats
    assert stats.skipped == 1 and list(stats.bad_records) == [BAD]
    _names_the_record(stats.bad_records[BAD], rec, offset)
    assert 1000 + BAD not in ids and set(ids) == {1000 + k for k in range(N)} - {1000 + BAD}
    with ImageRecordIter(rec, on_error="replace", **kw) as it:
        batches = list(it)
        stats = it.stats
    assert stats.replaced == 1 and list(stats.bad_records) == [BAD]
    slot = batches[BAD // 4].data[BAD % 4]
    assert not slot.any() and batches[BAD // 4].index[BAD % 4] == BAD  # zeros, by its key
    with ImageRecordIter(rec, on_error="raise", **kw) as it, pytest.raises(RecordIOError) as info:
        list(it)
    _names_the_record(str(info.value), rec, offset)


@pytest.mark.parametrize("where", list(DAMAGES))
def test_damaged_record_in_the_dali_source_and_the_dataset(clean, tmp_path, where):
    rec, offset = damaged(clean, tmp_path, where)
    _, _, meta = RecioSource(RecordFile(rec), Sampler(N, N, shuffle=False)).batch(0, 0)
    assert meta[BAD, 4] == BAD and BAD not in meta[:BAD, 0].tolist()  # the bad one, by its key
    raising = RecioSource(RecordFile(rec), Sampler(N, N, shuffle=False), on_error="raise")
    with pytest.raises(RecordIOError) as info:
        raising.batch(0, 0)
    _names_the_record(str(info.value), rec, offset)
    for checksums in (False, True):
        dataset = RecordDataset(rec, (3, 32, 32), verify_checksums=checksums)
        with pytest.raises(RecordIOError) as info:
            dataset[BAD]
        _names_the_record(str(info.value), rec, offset)
        assert dataset[BAD + 1][0].shape == (3, 32, 32)  # the records after it read
    replacing = RecordDataset(
        rec, (3, 32, 32), on_error="replace", normalize=Normalize(dtype="uint8")
    )
    got = replacing.__getitems__(list(range(N)))
    images, labels = got.images, got.labels
    assert not images[BAD].any() and images[BAD + 1].any()
    np.testing.assert_array_equal(labels[BAD + 1 :], [(k % 5) for k in range(BAD + 1, N)])
