"""Every MXNet 1.9.1 ImageRecordIter parameter given its own documented default value.

The table (tests/data/mxnet_defaults.json) was taken from MXNet 1.9.1's sources, each
entry naming the file and parameter struct it is declared in. Given its default, each
parameter is accepted, says nothing, and gives the batches that leaving it out gives.
"""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from recio import ImageRecordIter
from recio.pipeline import config
from recio.pipeline.config import IterConfig
from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack

TABLE = json.loads((Path(__file__).parents[1] / "data" / "mxnet_defaults.json").read_text())
PARAMETERS = TABLE["parameters"]
DEFAULTS = {p["name"]: p["default"] for p in PARAMETERS + TABLE["python"] if not p.get("required")}
SHAPE, BATCH = (3, 16, 16), 4


@pytest.fixture(scope="module")
def rec(tmp_path_factory) -> str:
    """Ten JPEGs of different sizes (labels key % 3, ids 100 + key), and their .idx."""
    path = tmp_path_factory.mktemp("defaults")
    rng = np.random.default_rng(3)
    rec = str(path / "d.rec")
    with MXIndexedRecordIO(str(path / "d.idx"), rec, "w") as w:
        for key in range(10):
            pixels = rng.integers(0, 256, (int(rng.integers(18, 40)), 24, 3), dtype=np.uint8)
            out = io.BytesIO()
            Image.fromarray(pixels).save(out, "JPEG", quality=90)
            w.write_idx(key, pack(IRHeader(0, float(key % 3), 100 + key, 0), out.getvalue()))
    return rec


def epoch(rec: str, **kw) -> list[tuple]:
    with ImageRecordIter(rec, SHAPE, BATCH, **kw) as it:
        return [(b.data.copy(), b.label.copy(), b.index.copy(), b.pad) for b in it]


@pytest.fixture(scope="module")
def omitted(rec) -> list[tuple]:
    return epoch(rec)


def test_the_table_is_mxnets_61_parameters():
    names = [p["name"] for p in PARAMETERS]
    assert len(names) == len(set(names)) == 61
    required = {p["name"] for p in PARAMETERS if p.get("required")}
    assert required == {"path_imgrec", "data_shape", "batch_size"}
    assert all(p["source"].startswith(("src/io/", "python/mxnet/")) for p in PARAMETERS)


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_each_parameter_takes_mxnets_default_and_behaves_as_left_out(
    name, rec, omitted, monkeypatch
):
    monkeypatch.setattr(config, "_noted", set())  # a note would show here, not be spent
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # MXNet's default is nothing to note
        got = epoch(rec, **{name: DEFAULTS[name]})
    assert len(got) == len(omitted)
    for (data, label, index, pad), want in zip(got, omitted, strict=True):
        np.testing.assert_array_equal(data, want[0])
        np.testing.assert_array_equal(label, want[1])
        np.testing.assert_array_equal(index, want[2])
        assert pad == want[3]


def test_all_defaults_at_once_are_the_config_left_out_gives(rec):
    given = IterConfig.from_mxnet(rec, SHAPE, BATCH, **DEFAULTS)
    left_out = IterConfig.from_mxnet(rec, SHAPE, BATCH)
    # what MXNet's defaults say explicitly, recio's left-out values leave to itself
    assert given.preprocess_threads == 4 and given.prefetch_buffer == 4
    assert (given.sharding.part_index, given.sharding.num_parts) == (0, 1)
    assert given.crop.min_area == 1.0  # MXNet's; left out, recio takes torchvision's 0.08
    explicit = {"preprocess_threads", "prefetch_buffer", "sharding", "crop"}
    for field in set(IterConfig.__dataclass_fields__) - explicit:
        assert getattr(given, field) == getattr(left_out, field), field
    assert given.crop.resize == -1 and not given.crop.random_resized_crop


def test_empty_file_names_mean_no_file(rec):
    c = IterConfig.from_mxnet(rec, SHAPE, BATCH, path_imglist="", path_imgidx="", mean_img="")
    assert (c.path_imglist, c.storage.path_imgidx, c.normalize.mean_img) == (None, None, None)


def test_mxnets_one_part_is_one_part_under_a_launcher_too(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    c = IterConfig.from_mxnet("x.rec", SHAPE, BATCH, num_parts=DEFAULTS["num_parts"])
    assert (c.sharding.resolve().rank, c.sharding.resolve().size) == (0, 1)
    assert IterConfig.from_mxnet("x.rec", SHAPE, BATCH).sharding.resolve().size == 2
