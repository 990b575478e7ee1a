"""``resample="opencv"``: MXNet's resampling (OpenCV's cv::resize) without any geometry
parameter, through ImageRecordIter and RecordDataset, against the MXNet 1.9.1 vectors of
tests/data/warp (see its README) and the GeometrySpec route it stands for."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from recio import ImageRecordIter, RecordDataset
from recio.augment import CropSpec
from recio.augment.geometry import GeometrySpec
from recio.pipeline.config import IterConfig, Normalize
from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack

VECTORS = Path(__file__).parents[1] / "data" / "warp" / "mxnet_warp.npz"


@pytest.fixture(scope="module")
def recs(tmp_path_factory) -> tuple[dict, dict]:
    """The vectors' three images as a .rec each for PNG and JPEG, and MXNet's outputs."""
    with np.load(VECTORS) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(bytes(arrays.pop("meta")))
    path = tmp_path_factory.mktemp("opencv")
    files = {}
    for fmt in ("png", "jpeg"):
        rec, idx = str(path / f"{fmt}.rec"), str(path / f"{fmt}.idx")
        with MXIndexedRecordIO(idx, rec, "w") as w:
            for i in range(len(meta["sizes"])):
                w.write_idx(i, pack(IRHeader(0, float(i), i, 0), arrays[f"{fmt}_{i}"].tobytes()))
        files[fmt] = rec
    return files, arrays


def first_batch(rec: str, **kw) -> np.ndarray:
    args = dict(data_shape=(3, 18, 18), batch_size=3, resize=20, dtype="uint8",
                preprocess_threads=1)  # fmt: skip
    with ImageRecordIter(rec, **{**args, **kw}) as it:
        return next(iter(it)).data.transpose(0, 2, 3, 1).copy()  # NCHW -> MXNet's vectors' HWC


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
@pytest.mark.parametrize("inter", [None, 2])
def test_iterator_resamples_as_mxnet(recs, fmt: str, inter: int | None) -> None:
    """resize 20 then the centre 18x18: MXNet's bilinear (and bicubic) pixels exactly."""
    files, arrays = recs
    kw = {} if inter is None else {"inter_method": inter}
    got = first_batch(files[fmt], resample="opencv", **kw)
    want = arrays[f"out_resize20_inter{1 if inter is None else inter}_{fmt}"]
    np.testing.assert_array_equal(got, want)
    if inter is None:  # recio's own filters antialias: other pixels
        assert not np.array_equal(first_batch(files[fmt]), want)


@pytest.mark.parametrize("how", ["keyword", "geometry"])
def test_dataset_resamples_as_mxnet(recs, how: str) -> None:
    files, arrays = recs
    crop = CropSpec(18, 18, resize=20)
    kw = (
        {"resample": "opencv"}
        if how == "keyword"
        else {"geometry": GeometrySpec(resample="opencv")}
    )
    norm = Normalize(dtype="uint8", layout="NHWC")
    got = np.stack([RecordDataset(files["png"], (3, 18, 18), crop=crop, normalize=norm, **kw)[i][0]
                    for i in range(3)])  # fmt: skip
    np.testing.assert_array_equal(got, arrays["out_resize20_inter1_png"])
    plain = RecordDataset(files["png"], (3, 18, 18), crop=crop, normalize=norm)
    assert not np.array_equal(plain[0][0], got[0])


def test_bad_values_name_the_choices() -> None:
    with pytest.raises(ValueError, match="resample must be one of 'pillow', 'opencv', not 'cv2'"):
        GeometrySpec(resample="cv2")
    with pytest.raises(ValueError, match="resample must be one of"):
        IterConfig.from_mxnet("x.rec", (3, 8, 8), 2, resample="OpenCV")
    with pytest.raises(ValueError, match="inter_method"):
        IterConfig.from_mxnet("x.rec", (3, 8, 8), 2, resample="opencv", interpolation="area")
    with pytest.raises(ValueError, match="resample must be one of"):
        RecordDataset("x.rec", (3, 8, 8), resample="linear")
    with pytest.raises(ValueError, match="in the GeometrySpec"):
        RecordDataset("x.rec", (3, 8, 8), geometry=GeometrySpec(rotate=5), resample="opencv")


def test_opencv_turns_the_geometry_on() -> None:
    assert GeometrySpec(resample="opencv").enabled and not GeometrySpec(resample="pillow").enabled
    config = IterConfig.from_mxnet("x.rec", (3, 8, 8), 2, resample="opencv")
    assert config.geometry.resample == "opencv"
    assert "resample" in config.dali_unsupported()  # the DALI stage resamples its own way
