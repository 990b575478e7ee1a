"""RecordDataset: MXFaceDataset's samples and labels, DataLoader workers, DistributedSampler."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from recio.augment import ColourSpec, CropSpec
from recio.augment.geometry import GeometrySpec
from recio.decode import DecodePool
from recio.errors import DecodeError
from recio.frameworks.dataset import RecordDataset, SampleBatch
from recio.pipeline.config import Normalize
from recio.records.format import IRHeader
from recio.records.recordio import MXIndexedRecordIO, pack, unpack
from tests.conftest import needs_torch
from tests.faces import write_faces
from tests.images import encode

pytestmark = pytest.mark.needs_native

CLASSES = (5, 1, 4, 3, 3)  # 16 images, one identity with a single image


@pytest.fixture(scope="module")
def face(tmp_path_factory):
    return write_faces(tmp_path_factory.mktemp("faces"), CLASSES, size=24)


def reference_images(face) -> np.ndarray:
    """Image key k at index k - 1, decoded whole by recio's decoder: uint8 CHW."""
    with MXIndexedRecordIO(face.idx, face.rec, "r") as r:
        images = [unpack(r.read_idx(k))[1] for k in range(1, face.num_images + 1)]
    out = np.empty((len(images), 3, 24, 24), dtype=np.uint8)
    with DecodePool(1) as pool:
        assert not pool.decode_batch(images, out, layout="NCHW").any()
    return out


def uint8_dataset(face, **kw) -> RecordDataset:
    return RecordDataset(face.rec, (3, 24, 24), normalize=Normalize(dtype="uint8"), **kw)


def test_samples_and_labels_are_mxfacedatasets(face):
    ds = uint8_dataset(face, label_dtype="int64")
    assert len(ds) == 16 and ds.num_classes == 5
    assert ds.layout.identities.tolist() == face.ranges().tolist()
    want = reference_images(face)
    for i in range(len(ds)):
        image, label = ds[i]
        np.testing.assert_array_equal(image, want[i])  # sample i is key i + 1
        assert label == face.classes()[i] and label.dtype == np.int64
    image, _ = ds[-1]
    np.testing.assert_array_equal(image, want[-1])
    with pytest.raises(IndexError, match="sample 16 of"):
        ds[16]


def test_getitems_decodes_a_batch_in_one_call(face, monkeypatch):
    calls = []
    original = DecodePool.submit_records  # decode_records' too

    def counting(self, base, offsets, out, **kw):
        calls.append(len(offsets))
        return original(self, base, offsets, out, **kw)

    monkeypatch.setattr(DecodePool, "submit_records", counting)
    ds = uint8_dataset(face)
    batch = ds.__getitems__([3, 0, 7])
    assert calls == [3]
    assert isinstance(batch, SampleBatch) and len(batch) == 3
    assert batch.images.shape == (3, 3, 24, 24)
    np.testing.assert_array_equal(batch[1][0], reference_images(face)[0])
    assert batch.labels.tolist() == face.classes()[[3, 0, 7]].tolist()


def test_normalised_float_output(face):
    norm = Normalize(mean=(127.5,) * 3, std=(127.5,) * 3)
    ds = RecordDataset(face.rec, (3, 24, 24), normalize=norm)
    image, _ = ds[2]
    want = (reference_images(face)[2].astype(np.float32) - 127.5) / 127.5
    assert image.dtype == np.float32
    np.testing.assert_allclose(image, want, atol=1e-6)


def test_flips_are_keyed_per_sample_and_epoch(face):
    plain = reference_images(face)
    ds = uint8_dataset(face, rand_mirror=True, seed=3)
    alone = [ds[i][0] for i in range(16)]
    together = ds.__getitems__(list(range(15, -1, -1))).images[::-1]
    flipped = []
    for i in range(16):
        np.testing.assert_array_equal(alone[i], together[i])  # batch makeup doesn't matter
        is_flip = np.array_equal(alone[i], plain[i][:, :, ::-1])
        assert is_flip or np.array_equal(alone[i], plain[i])
        flipped.append(is_flip)
    assert 0 < sum(flipped) < 16
    ds.set_epoch(1)
    later = [np.array_equal(ds[i][0], plain[i][:, :, ::-1]) for i in range(16)]
    assert later != flipped


def test_a_crop_spec_is_applied(face):
    crop = CropSpec(12, 12, rand_crop=True)
    ds = RecordDataset(face.rec, (3, 12, 12), crop=crop, normalize=Normalize(dtype="uint8"))
    image, _ = ds[0]
    assert image.shape == (3, 12, 12)
    with pytest.raises(ValueError, match="crop gives 12x12"):
        RecordDataset(face.rec, (3, 24, 24), crop=crop)


def test_colour_and_geometry_are_the_iterators(face):
    """The map-style reader warps and colours a sample as ImageRecordIter does that record."""
    from recio.pipeline.iterator import ImageRecordIter

    colour = ColourSpec(brightness=0.4, contrast=0.4, saturation=0.4, random_h=10)
    geometry = GeometrySpec(max_rotate_angle=20, max_shear_ratio=0.1)
    ds = uint8_dataset(face, colour=colour, geometry=geometry, seed=3)
    it = ImageRecordIter(
        face.rec, (3, 24, 24), 16, dtype="uint8", seed=3, brightness=0.4, contrast=0.4,
        saturation=0.4, random_h=10, max_rotate_angle=20, max_shear_ratio=0.1,
    )  # fmt: skip
    with it:
        batch = next(iter(it))
    images = np.stack([ds[i][0] for i in range(16)])
    np.testing.assert_array_equal(images, batch.data)
    plain = np.stack([uint8_dataset(face, seed=3)[i][0] for i in range(16)])
    assert (images != plain).mean() > 0.5  # the augmentation did change the pixels


def test_pickles_as_its_settings_and_reopens(face):
    ds = uint8_dataset(face)
    first = ds[4][0]
    copy = pickle.loads(pickle.dumps(ds))
    assert copy._records is None  # nothing open travels
    np.testing.assert_array_equal(copy[4][0], first)
    ds.close()
    np.testing.assert_array_equal(ds[4][0], first)  # reopened on use


def test_plain_file_without_header(tmp_path):
    face = write_faces(tmp_path, (2, 2), header=False, label_only_at=(1,))
    ds = uint8_dataset(face)
    assert len(ds) == 4 and ds.num_classes is None
    assert [float(ds[i][1]) for i in range(4)] == [0.0, 0.0, 1.0, 1.0]


def test_bad_image_raises_or_is_replaced(tmp_path):
    rec, idx = str(tmp_path / "b.rec"), str(tmp_path / "b.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        w.write_idx(0, pack(IRHeader(0, 0.0, 0, 0), encode(16, 16)))
        w.write_idx(1, pack(IRHeader(0, 1.0, 1, 0), encode(16, 16)[:60]))  # cut short
    ds = RecordDataset(rec, (3, 16, 16))
    with pytest.raises(DecodeError, match=r"record id 1 \(record 1, at byte \d+ of .*b.rec\)"):
        ds.__getitems__([0, 1])
    ds = RecordDataset(rec, (3, 16, 16), on_error="replace")
    batch = ds.__getitems__([0, 1])
    assert not batch.images[1].any() and batch.images[0].any()
    assert batch.labels.tolist() == [0.0, 1.0] and list(ds.bad_records) == [1]


def test_bad_arguments(face):
    with pytest.raises(ValueError, match="data_shape"):
        RecordDataset(face.rec, (24, 24))
    with pytest.raises(ValueError, match="on_error"):
        RecordDataset(face.rec, (3, 24, 24), on_error="skip")
    with pytest.raises(ValueError, match="label_dtype"):
        RecordDataset(face.rec, (3, 24, 24), label_dtype="int8")


_LOADER_CHECK = """
import sys
import numpy as np
from torch.utils.data import DataLoader, DistributedSampler
from recio.pipeline.config import Normalize
from recio.frameworks.dataset import RecordDataset
from recio.decode import DecodePool
from recio.records.recordio import MXIndexedRecordIO, unpack

rec, idx, n, collate, context = sys.argv[1:4] + [sys.argv[4] == "collate", sys.argv[5]]
n, url = int(n), sys.argv[6] if len(sys.argv) > 6 else rec
with MXIndexedRecordIO(idx, rec, "r") as r:
    images = [unpack(r.read_idx(k))[1] for k in range(1, n + 1)]
want = np.empty((n, 3, 24, 24), dtype=np.uint8)
with DecodePool(1) as pool:
    pool.decode_batch(images, want, layout="NCHW")
owner = {want[i].tobytes(): i for i in range(n)}
ds = RecordDataset(url, (3, 24, 24), normalize=Normalize(dtype="uint8"), label_dtype="int64")
ds[0]  # the parent's decoder is running when the workers fork
seen, labels = [], []
for rank in range(2):
    sampler = DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=1)
    kw = {"collate_fn": RecordDataset.collate} if collate else {}
    loader = DataLoader(
        ds, batch_size=3, sampler=sampler, num_workers=2, multiprocessing_context=context, **kw
    )
    for images, label in loader:
        assert images.shape[1:] == (3, 24, 24)
        seen += [owner[np.ascontiguousarray(image.numpy()).tobytes()] for image in images]
        labels += label.tolist()
print(seen)
print(labels)
"""


def _run_loader_check(face, collate: str, url: str | None = None, context: str = "fork") -> None:
    # In a fresh interpreter: forked workers inherit whatever the test process holds (an
    # HDFS client's runtime from other tests cannot be torn down in a fork).
    import subprocess
    import sys

    args = [face.rec, face.idx, str(face.num_images), collate, context, *([url] if url else [])]
    proc = subprocess.run(
        [sys.executable, "-c", _LOADER_CHECK, *args], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen, labels = (eval(line) for line in proc.stdout.splitlines()[-2:])
    assert sorted(seen) == list(range(16))
    assert labels == face.classes()[seen].tolist()


@needs_torch
@pytest.mark.parametrize("collate", ["default", "collate"])
def test_dataloader_workers_and_distributed_sampler_give_every_image_once(face, collate):
    _run_loader_check(face, collate)


@needs_torch
@pytest.mark.hdfs
def test_forkserver_workers_read_from_hdfs(face, hdfs_prefix):
    # README's advice for HDFS: a forked worker inherits an hdfs-native client that does not
    # survive the fork (its first read waits about a minute), a forkserver's starts afresh.
    from recio import storage

    fs, root = storage.filesystem(hdfs_prefix)
    fs.makedirs(root, exist_ok=True)
    fs.put(face.rec, f"{root}/train.rec")
    fs.put(face.idx, f"{root}/train.idx")
    try:
        _run_loader_check(face, "collate", f"{hdfs_prefix}/train.rec", context="forkserver")
    finally:
        fs.rm(root, recursive=True)


def test_positions_map_to_record_keys_as_the_iterator_gives_them(face, tmp_path):
    from recio import ImageRecordIter

    ds = uint8_dataset(face)
    n = face.num_images
    assert ds.keys.tolist() == list(range(1, n + 1))  # after the header, key 0
    assert (ds.key(0), ds.key(5), ds.key(-1)) == (1, 6, n)
    with pytest.raises(IndexError, match=f"sample {n} of"):
        ds.key(n)
    with ImageRecordIter(face.rec, (3, 24, 24), 4, dtype="uint8", last_batch="discard") as it:
        seen = np.concatenate([batch.index for batch in it])
    assert sorted(seen.tolist()) == ds.keys.tolist()  # batch.index: the same keys
    # a label-only record has no position: the keys skip it
    plain = write_faces(tmp_path, (2, 2), header=False, label_only_at=(2,))
    assert uint8_dataset(plain).keys.tolist() == [1, 2, 3, 4]
