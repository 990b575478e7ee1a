"""The files beside the .rec that MXNet's ImageRecordIter reads: a mean image (checked against
MXNet 1.9.1's own file and output, tests/data/mxnet_colour) and an image list."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from recio import ImageRecordIter
from recio.errors import RecordIOError
from recio.pipeline.mxnet_inputs import ImageList, load_mean_image
from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack

DATA = Path(__file__).parents[1] / "data" / "mxnet_colour"


def test_reads_the_mean_image_mxnet_saved():
    m = load_mean_image(str(DATA / "mean.nd"), (3, 16, 16))
    assert m.dtype == np.float32 and m.shape == (3, 16, 16)
    assert m[0, 0, 0] == 5 and (m[0].ravel()[1:] == 10).all()
    assert (m[1] == 20).all() and (m[2] == 30).all()


def test_reads_a_npy_mean_image_and_checks_the_shape(tmp_path):
    path = tmp_path / "m.npy"
    np.save(path, np.full((3, 4, 5), 7.0))
    assert (load_mean_image(str(path), (3, 4, 5)) == 7).all()
    with pytest.raises(ValueError, match=r"m.npy: shape \(3, 4, 5\), data_shape is \(3, 5, 4\)"):
        load_mean_image(str(path), (3, 5, 4))


def test_bad_mean_image_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.nd: no such file.*MXNet computes"):
        load_mean_image(str(tmp_path / "missing.nd"), (3, 16, 16))
    junk = tmp_path / "junk.nd"
    junk.write_bytes(b"\x00" * 40)
    with pytest.raises(ValueError, match="junk.nd: not an NDArray file or .npy"):
        load_mean_image(str(junk), (3, 16, 16))
    cut = tmp_path / "cut.nd"
    cut.write_bytes((DATA / "mean.nd").read_bytes()[:200])
    with pytest.raises(ValueError, match="cut.nd: ends at byte 200 inside the array data"):
        load_mean_image(str(cut), (3, 16, 16))
    bad = bytearray((DATA / "mean.nd").read_bytes())
    bad[24:28] = b"\x01\x02\x03\x04"
    (tmp_path / "magic.nd").write_bytes(bytes(bad))
    with pytest.raises(ValueError, match="magic.nd: byte 24: unknown NDArray magic"):
        load_mean_image(str(tmp_path / "magic.nd"), (3, 16, 16))


def png_rec(path: Path, images: list[np.ndarray], ids=None) -> str:
    rec, idx = str(path / "p.rec"), str(path / "p.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for i, a in enumerate(images):
            b = io.BytesIO()
            Image.fromarray(a).save(b, "PNG")
            key = i if ids is None else ids[i]
            w.write_idx(i, pack(IRHeader(0, float(i), key, 0), b.getvalue()))
    return rec


def test_mean_image_scale_and_std_give_mxnets_output(tmp_path):
    """The same 8 images through MXNet 1.9.1 (mean_img, scale=0.5, std 2): the same floats."""
    source = np.load(DATA / "hls.npz")["source"]
    rec = png_rec(tmp_path, list(source))
    with ImageRecordIter(rec, data_shape=(3, 16, 16), batch_size=8, mean_img=str(DATA / "mean.nd"),
                         scale=0.5, std_r=2, std_g=2, std_b=2) as it:  # fmt: skip
        got = next(iter(it)).data
    want = np.load(DATA / "mean.npz")["mxnet"]
    assert np.allclose(got, want, rtol=0, atol=1e-5)


def test_mean_image_follows_the_channel_order(tmp_path):
    source = np.load(DATA / "hls.npz")["source"]
    rec = png_rec(tmp_path, list(source))
    kw = dict(data_shape=(3, 16, 16), batch_size=8, mean_img=str(DATA / "mean.nd"))
    with ImageRecordIter(rec, **kw) as it:
        rgb = next(iter(it)).data
    with ImageRecordIter(rec, **kw, channel_order="BGR") as it:
        bgr = next(iter(it)).data
    assert np.array_equal(bgr, rgb[:, ::-1])


def test_image_list_labels_replace_the_records(tmp_path):
    images = [np.full((8, 8, 3), 10 * i, np.uint8) for i in range(4)]
    rec = png_rec(tmp_path, images, ids=[7, 3, 5, 1])
    lst = tmp_path / "p.lst"
    lst.write_text("".join(f"{i}\t{i * 10}.0\t{i + 0.5}\timg{i}.png\n" for i in (1, 3, 5, 7)))
    with ImageRecordIter(rec, data_shape=(3, 8, 8), batch_size=4, path_imglist=str(lst)) as it:
        b = next(iter(it))
    assert b.index.tolist() == [7, 3, 5, 1]
    assert b.label.tolist() == [70.0, 30.0, 50.0, 10.0]  # the list's, not 0, 1, 2, 3
    with ImageRecordIter(rec, data_shape=(3, 8, 8), batch_size=4, path_imglist=str(lst),
                         label_width=2) as it:  # fmt: skip
        assert next(iter(it)).label[0].tolist() == [70.0, 7.5]


def test_image_list_problems_are_named(tmp_path):
    lst = tmp_path / "a.lst"
    lst.write_text("1\t2.0\tx.png\n")
    with pytest.raises(KeyError, match="a.lst has no image with index 4"):
        ImageList(str(lst), 1).lookup(np.array([1, 4]))
    with pytest.raises(RecordIOError, match="index 1 has 1 labels, label_width is 2"):
        ImageList(str(lst), 2)
    lst.write_text("1\t2.0\tx.png\n1\t3.0\ty.png\n")
    with pytest.raises(RecordIOError, match="index 1 listed twice"):
        ImageList(str(lst), 1)
    lst.write_text("1\tx.png\n")
    with pytest.raises(RecordIOError, match="bad .lst line 1"):
        ImageList(str(lst), 1)
