"""What a newcomer meets first with RecordDataset: the iterator's keywords, on_error, a folder."""

from __future__ import annotations

import numpy as np
import pytest

from recio.errors import DecodeError
from recio.frameworks.dataset import RecordDataset
from recio.pipeline.config import Normalize
from recio.pipeline.iterator import ImageRecordIter
from recio.records.format import IRHeader
from recio.records.recordio import MXIndexedRecordIO, pack
from tests.faces import write_faces
from tests.images import encode

from .._paths import REPO

pytestmark = pytest.mark.needs_native

AUGMENT = {
    "random_resized_crop": {"random_resized_crop": True, "min_random_area": 0.3,
                            "max_aspect_ratio": 0.25, "rand_mirror": True},
    "rand_crop": {"rand_crop": True, "rand_mirror": True, "max_random_scale": 1.2,
                  "min_random_scale": 0.8, "max_rotate_angle": 10},
}  # fmt: skip


@pytest.fixture(scope="module")
def face(tmp_path_factory):
    return write_faces(tmp_path_factory.mktemp("faces"), (5, 1, 4, 3, 3), size=24)


@pytest.mark.parametrize("name", sorted(AUGMENT))
def test_the_iterators_augmentation_keywords_give_the_iterators_pixels(face, name):
    keywords = AUGMENT[name]
    ds = RecordDataset(
        face.rec, (3, 16, 16), normalize=Normalize(dtype="uint8"), seed=5, **keywords
    )
    with ImageRecordIter(face.rec, (3, 16, 16), 16, dtype="uint8", seed=5, **keywords) as it:
        batch = next(iter(it))
    images = np.stack([ds[i][0] for i in range(16)])
    np.testing.assert_array_equal(images, batch.data)
    centre = RecordDataset(face.rec, (3, 16, 16), normalize=Normalize(dtype="uint8"), seed=5)
    plain = np.stack([centre[i][0] for i in range(16)])
    assert (images != plain).mean() > 0.3  # the keywords did augment


def test_rand_mirror_goes_with_the_keywords_into_one_crop(face):
    ds = RecordDataset(face.rec, (3, 16, 16), rand_mirror=True, rand_crop=True)
    assert ds.settings["crop"].rand_mirror and ds.settings["crop"].rand_crop


@pytest.mark.parametrize(
    ("keywords", "words"),
    [
        ({"batch_size": 8}, r"batch_size: DataLoader\(batch_size=...\)"),
        ({"part_index": 1, "num_parts": 2}, "a DistributedSampler"),
        ({"mean_r": 127.5}, r"normalize=Normalize\(mean=..., std=...\)"),
        ({"random_crop": True}, r"not augmentation keywords of ImageRecordIter: \['random_crop'\]"),
    ],
)
def test_other_keywords_say_what_to_use(face, keywords, words):
    with pytest.raises(TypeError, match=words):
        RecordDataset(face.rec, (3, 16, 16), **keywords)


def test_on_error_default_raises_and_skip_says_why_not(tmp_path):
    rec, idx = str(tmp_path / "b.rec"), str(tmp_path / "b.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        w.write_idx(0, pack(IRHeader(0, 1.0, 0, 0), encode(16, 16)[:60]))  # cut short
    with pytest.raises(DecodeError, match="record id 0"):
        RecordDataset(rec, (3, 16, 16))[0]
    with pytest.raises(ValueError, match="cannot skip.*'replace'"):
        RecordDataset(rec, (3, 16, 16), on_error="skip")
    said = " ".join(RecordDataset.__doc__.split())  # the class docstring and the docs say why
    assert 'default "skip"' in said
    assert "a map-style dataset cannot skip one" in said
    frameworks = " ".join((REPO / "docs" / "frameworks.md").read_text().split())
    assert "so a map-style dataset cannot skip one" in frameworks


def test_a_folder_is_not_a_rec(face, tmp_path):
    folder = face.rec.rsplit("/", 1)[0]
    for make in (
        lambda: RecordDataset(folder, (3, 16, 16)),
        lambda: ImageRecordIter(folder, (3, 16, 16), 4),
    ):
        with pytest.raises(
            IsADirectoryError, match=f"is a folder, not a .rec: did you mean {face.rec}"
        ):
            make()
    (tmp_path / "faces").mkdir()
    with pytest.raises(IsADirectoryError, match="recio im2rec"):
        RecordDataset(str(tmp_path / "faces"), (3, 16, 16))
    (tmp_path / "faces.rec").write_bytes(b"")
    with pytest.raises(IsADirectoryError, match=f"did you mean {tmp_path / 'faces.rec'}"):
        RecordDataset(str(tmp_path / "faces"), (3, 16, 16))
