"""User-style scripts written for MXNet run on recio.mx with only their imports changed.

``FACE_DATASET`` reads a face .rec as arcface_torch's dataset does (the header record, the
image keys, ``mx.image.imdecode``); ``LOAD_BIN`` loads a verification .bin as its
``eval/verification.py`` does (``imdecode``, ``resize_short``, ``nd.transpose``,
``mx.ndarray.flip``, slice assignment into ``nd.empty`` batches). Both are this project's own
code, written against MXNet's API; the test swaps the two import lines and runs them.
"""

import hashlib
import io
import json

import numpy as np
import pytest
from PIL import Image

from recio.im2rec.facebin import write_bin

from .._paths import REPO
from ..faces import write_faces

GOLDEN = REPO / "tests" / "data" / "mx_golden"

FACE_DATASET = """
import numbers
import os

import mxnet as mx
import numpy as np


class FaceRecords:
    def __init__(self, root_dir):
        rec = os.path.join(root_dir, "train.rec")
        idx = os.path.join(root_dir, "train.idx")
        self.imgrec = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
        header, _ = mx.recordio.unpack(self.imgrec.read_idx(0))
        if header.flag > 0:
            self.header0 = (int(header.label[0]), int(header.label[1]))
            self.imgidx = np.array(range(1, int(header.label[0])))
        else:
            self.imgidx = np.array(list(self.imgrec.keys))

    def __getitem__(self, index):
        header, img = mx.recordio.unpack(self.imgrec.read_idx(self.imgidx[index]))
        label = header.label
        if not isinstance(label, numbers.Number):
            label = label[0]
        return mx.image.imdecode(img).asnumpy(), int(label)

    def __len__(self):
        return len(self.imgidx)


dataset = FaceRecords(ROOT)
samples = [dataset[i] for i in range(len(dataset))]
"""

LOAD_BIN = """
import pickle

import mxnet as mx
from mxnet import ndarray as nd


def load_bin(path, image_size):
    with open(path, "rb") as f:
        bins, issame_list = pickle.load(f, encoding="bytes")
    data_list = []
    for flip in [0, 1]:
        data = nd.empty((len(issame_list) * 2, 3, image_size[0], image_size[1]))
        data_list.append(data)
    for i in range(len(issame_list) * 2):
        img = mx.image.imdecode(bins[i])
        if img.shape[1] != image_size[0]:
            img = mx.image.resize_short(img, image_size[0])
        img = nd.transpose(img, axes=(2, 0, 1))
        for flip in [0, 1]:
            if flip == 1:
                img = mx.ndarray.flip(data=img, axis=2)
            data_list[flip][i][:] = img
    return data_list, issame_list


data_list, issame = load_bin(BIN, (112, 112))
"""

IMPORTS = {
    "import mxnet as mx": "import recio.mx as mx",
    "from mxnet import ndarray as nd": "from recio.mx import ndarray as nd",
}


def _run_ported(source: str, **names) -> dict:
    for mxnet, recio in IMPORTS.items():
        source = source.replace(mxnet, recio)
    assert "mxnet" not in source
    namespace = dict(names)
    exec(compile(source, "user_script.py", "exec"), namespace)
    return namespace


def _golden(call: str, name: str, **kwargs) -> str:
    for case in json.loads((GOLDEN / "mxnet_calls.json").read_text())["calls"]:
        if (case["call"], case["input"], case["kwargs"]) == (call, name, kwargs):
            return case["sha256"]
    raise KeyError((call, name, kwargs))


def test_a_face_dataset_script_reads_the_images_and_labels(tmp_path):
    faces = write_faces(tmp_path, class_sizes=(3, 1, 4, 2))
    samples = _run_ported(FACE_DATASET, ROOT=str(tmp_path))["samples"]
    assert len(samples) == faces.num_images  # the header and identity records are not samples
    assert [label for _, label in samples] == faces.classes().tolist()
    from recio.records.recordio import MXIndexedRecordIO, unpack

    with MXIndexedRecordIO(faces.idx, faces.rec, "r") as r:
        for key, (pixels, _) in enumerate(samples, 1):
            _, jpeg = unpack(r.read_idx(key))
            expected = np.asarray(Image.open(io.BytesIO(bytes(jpeg))).convert("RGB"))
            assert pixels.dtype == np.uint8 and np.array_equal(pixels, expected), key


def test_the_script_reads_a_face_rec_that_recio_im2rec_wrote(tmp_path):
    """`recio im2rec --layout insightface` of a folder per identity, read as arcface_torch does."""
    from recio.cli.main import main
    from recio.im2rec.cli import main as im2rec

    assert main(["sample", str(tmp_path)]) == 0  # faces/id0..id2: 2, 3 and 4 images
    prefix, faces = str(tmp_path / "train"), str(tmp_path / "faces")
    assert (
        im2rec(["--list", "--recursive", "--layout", "insightface", "--quiet", prefix, faces]) == 0
    )
    assert im2rec(["--layout", "insightface", "--quiet", prefix, faces]) == 0
    samples = _run_ported(FACE_DATASET, ROOT=str(tmp_path))["samples"]
    assert [label for _, label in samples] == [0, 0, 1, 1, 1, 2, 2, 2, 2]
    assert all(pixels.shape == (112, 112, 3) for pixels, _ in samples)


@pytest.mark.parametrize("first", ["lfw420.jpg", "face420.jpg"])
def test_a_load_bin_script_gives_mxnets_pixels(tmp_path, first):
    """250x250 images are resized to 112 (bicubic), 112x112 ones taken as they are."""
    a, b = (GOLDEN / first).read_bytes(), (GOLDEN / "face420.jpg").read_bytes()
    write_bin(str(tmp_path / "t.bin"), [(a, b, True), (b, a, False)])
    ns = _run_ported(LOAD_BIN, BIN=str(tmp_path / "t.bin"))
    plain, flipped = (d.asnumpy() for d in ns["data_list"])
    assert ns["issame"] == [True, False]
    assert plain.shape == (4, 3, 112, 112) and plain.dtype == np.float32  # nd.empty's dtype

    def sha(chw: np.ndarray) -> str:
        return hashlib.sha256(chw.astype(np.uint8).transpose(1, 2, 0).tobytes()).hexdigest()

    face = _golden("imdecode", "face420.jpg")
    first_sha = face if first == "face420.jpg" else _golden("resize_short", first, size=112)
    assert [sha(plain[i]) for i in range(4)] == [first_sha, face, face, first_sha]
    mirrored = hashlib.sha256(flipped[1].astype(np.uint8).tobytes()).hexdigest()
    assert mirrored == _golden("transpose_flip", "face420.jpg")  # MXNet's CHW, mirrored
