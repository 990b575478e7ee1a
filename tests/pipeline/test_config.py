"""IterConfig: MXNet keywords sorted into checked groups, the same for both iterators."""

from __future__ import annotations

import warnings

import pytest

from recio.pipeline.config import (
    ColourSpec,
    CropSpec,
    GeometrySpec,
    IterConfig,
    Normalize,
    Sharding,
    Storage,
)


def make(**kw):
    kw.setdefault("path_imgrec", "x.rec")
    kw.setdefault("data_shape", (3, 32, 24))
    kw.setdefault("batch_size", 8)
    return IterConfig.from_mxnet(**kw)


def test_keywords_fill_their_groups():
    c = make(
        rand_crop=True, resize=40, min_random_area=0.2, rand_mirror=True, mean_r=1, std_b=2,
        dtype="float16", layout="NHWC", part_index=1, num_parts=3, path_imgidx="y.idx",
        storage_options={"anon": True}, shuffle=True, shuffle_mode="block", seed=5,
    )  # fmt: skip
    assert c.crop == CropSpec(32, 24, resize=40, rand_crop=True, min_area=0.2, rand_mirror=True)
    assert c.normalize == Normalize((1, 0, 0), (1, 1, 2), "float16", "NHWC")
    assert c.sharding == Sharding(part_index=1, num_parts=3)
    assert c.storage == Storage("y.idx", {"anon": True})
    assert (c.shuffle, c.shuffle_mode, c.seed) == (True, "block", 5)
    assert c.batch_shape == (8, 32, 24, 3)


def test_groups_given_whole_equal_the_keywords():
    crop = CropSpec(32, 24, random_resized_crop=True)
    assert make(crop=crop) == make(random_resized_crop=True)
    assert make(normalize=Normalize(dtype="uint8")) == make(dtype="uint8")


def test_a_group_and_its_keywords_together_are_refused():
    with pytest.raises(TypeError, match="crop= or the keywords"):
        make(crop=CropSpec(32, 24), rand_crop=True)


def test_round_batch_picks_last_batch():
    assert make().last_batch == "pad"
    assert make(round_batch=False).last_batch == "rollover"
    assert make(round_batch=False, last_batch="discard").last_batch == "discard"


@pytest.mark.parametrize(
    ("kw", "error", "words"),
    [
        ({"last_batch": "drop"}, ValueError, "'pad', 'discard', 'rollover'"),
        ({"on_error": "ignore"}, ValueError, "'skip', 'raise', 'replace'"),
        ({"shuffle_mode": "chunk"}, ValueError, "'global', 'block'"),
        ({"batch_size": "8"}, TypeError, "batch_size must be an int, not str '8'"),
        ({"batch_size": 0}, ValueError, "batch_size must be at least 1, not 0"),
        ({"label_width": 0}, ValueError, "label_width"),
        ({"data_shape": (1, 32, 32)}, ValueError, "RGB channels first"),
        ({"data_shape": (3, 32)}, ValueError, "data_shape"),
        ({"min_aspect_ratio": 2.0, "max_aspect_ratio": 1.0}, ValueError, "min_aspect_ratio=2.0"),
        ({"max_random_area": 1.5}, ValueError, "max_random_area=1.5"),
        ({"dtype": "uint8", "mean_r": 100}, ValueError, "uint8"),
        ({"std_g": 0}, ValueError, "std_r/g/b must be positive"),
        ({"preprocess_threads": 0}, ValueError, "preprocess_threads"),
        ({"max_rotate": 10}, TypeError, "unsupported arguments: ['max_rotate']"),
        ({"pad": 4, "random_resized_crop": True}, ValueError, "pad=4 does not combine"),
    ],
)
def test_bad_values_name_the_parameter_and_show_the_value(kw, error, words):
    with pytest.raises(error) as info:
        make(**kw)
    assert words in str(info.value)


def test_missing_required_arguments_are_named():
    with pytest.raises(TypeError, match="data_shape, batch_size"):
        IterConfig.from_mxnet("x.rec")


def test_groups_check_themselves():
    with pytest.raises(ValueError, match="min_random_area"):
        CropSpec(8, 8, min_area=0)
    with pytest.raises(ValueError, match="layout"):
        Normalize(layout="CHW")
    with pytest.raises(ValueError, match="crop gives 8x8"):
        IterConfig("x.rec", (3, 16, 16), 4, crop=CropSpec(8, 8))


def test_given_takes_a_config_or_keywords_not_both():
    config = make(rand_mirror=True)
    assert IterConfig.given(config) is config
    assert IterConfig.given(None, "x.rec", (3, 32, 24), 8, rand_mirror=True) == config
    with pytest.raises(TypeError, match="not both"):
        IterConfig.given(config, shuffle=True)
    with pytest.raises(TypeError, match="not both"):
        IterConfig.given(config, "y.rec")


# ---- every MXNet 1.9.1 ImageRecordIter parameter ----

# The 61 parameters of mx.io.ImageRecordIter in MXNet 1.9.1 (its docstring, in its order),
# each with a value other than its default: what recio does with it is docs/iterator.md's table.
MXNET_PARAMETERS = {
    "path_imglist": None, "path_imgrec": None, "path_imgidx": "y.idx", "aug_seq": "aug_default",
    "label_width": 2, "data_shape": None, "preprocess_threads": 2, "verbose": False,
    "num_parts": 2, "part_index": 1, "device_id": 1, "shuffle_chunk_size": 64,
    "shuffle_chunk_seed": 3, "seed_aug": 7, "shuffle": True, "seed": 2, "batch_size": None,
    "round_batch": False, "prefetch_buffer": 2, "ctx": "cpu", "dtype": "float32",
    "resize": 40, "rand_crop": True, "random_resized_crop": True, "max_rotate_angle": 10,
    "max_aspect_ratio": 0.25, "min_aspect_ratio": 0.5, "max_shear_ratio": 0.1,
    "max_crop_size": 24, "min_crop_size": 16, "max_random_scale": 1.2,
    "min_random_scale": 0.8, "max_random_area": 0.9, "min_random_area": 0.2,
    "max_img_size": 300.0, "min_img_size": 10.0, "brightness": 0.4, "contrast": 0.4,
    "saturation": 0.4, "pca_noise": 0.1, "random_h": 10, "random_s": 20, "random_l": 30,
    "rotate": 30, "fill_value": 0, "inter_method": 2, "pad": 4, "mirror": True,
    "rand_mirror": True, "mean_img": None, "mean_r": 1.0, "mean_g": 2.0, "mean_b": 3.0,
    "mean_a": 4.0, "std_r": 2.0, "std_g": 2.0, "std_b": 2.0, "std_a": 2.0, "scale": 0.5,
    "max_random_contrast": 0.2, "max_random_illumination": 10.0,
}  # fmt: skip
# The affine warp's, padding's and square crops' (recio.augment.geometry).
GEOMETRY = {"max_rotate_angle", "max_shear_ratio", "max_crop_size", "min_crop_size",
            "max_random_scale", "min_random_scale", "max_img_size", "min_img_size", "rotate",
            "inter_method", "pad", "fill_value"}  # fmt: skip


def test_mxnet_has_61_parameters_and_the_docs_list_each():
    from pathlib import Path

    assert len(MXNET_PARAMETERS) == 61
    page = (Path(__file__).parents[2] / "docs" / "iterator.md").read_text()
    table = page[page.index("## MXNet's parameters") :]
    rows = [line.split("|")[1].strip().strip("`") for line in table.splitlines()[6:67]]
    assert rows == list(MXNET_PARAMETERS)


@pytest.mark.parametrize("name", sorted(set(MXNET_PARAMETERS) - {"path_imgrec", "data_shape",
                                                                 "batch_size"}))  # fmt: skip
def test_every_mxnet_parameter_is_accepted_and_goes_somewhere(name, tmp_path):
    value = MXNET_PARAMETERS[name]
    if name in ("path_imglist", "mean_img"):
        value = str(tmp_path / "file")
    kw = {name: value}
    if name in ("mean_r", "mean_g", "mean_b"):
        kw["dtype"] = "float32"
    if name in ("min_aspect_ratio", "max_aspect_ratio"):
        kw["random_resized_crop"] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = make(**kw)
    if name in GEOMETRY:  # the geometry's, under MXNet's name
        assert getattr(c.geometry, name) == value and c.geometry.non_default() == [name]
    # it went somewhere; the noted ones nowhere (dtype float32 is the default already, and
    # shuffle_chunk_seed does nothing without shuffle_chunk_size, as in MXNet)
    nowhere = {"verbose", "device_id", "ctx", "aug_seq", "mean_a", "std_a", "dtype",
               "shuffle_chunk_seed"}  # fmt: skip
    assert (c == make()) == (name in nowhere)


def test_noted_parameters_say_so_once(monkeypatch):
    from recio.pipeline import config

    monkeypatch.setattr(config, "_noted", set())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make(ctx="gpu", verbose=True)  # MXNet's defaults: nothing to note
    with pytest.warns(UserWarning, match="ctx='cpu' accepted, and changes nothing.*recio.dali"):
        make(ctx="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make(ctx="cpu")  # once per process
    with pytest.raises(ValueError, match="aug_seq='aug_torch'.*aug_default"):
        make(aug_seq="aug_torch")


def test_aspect_ratios_mean_what_they_mean_in_mxnet():
    rrc = {"random_resized_crop": True}
    c = make(**rrc, max_aspect_ratio=0.25)  # [1 - 0.25, 1 + 0.25]
    assert (c.crop.min_aspect, c.crop.max_aspect) == (0.75, 1.25)
    c = make(**rrc, min_aspect_ratio=0.5, max_aspect_ratio=2.0)  # [min, max]
    assert (c.crop.min_aspect, c.crop.max_aspect) == (0.5, 2.0)
    assert make(**rrc).crop.min_aspect == 3 / 4  # neither: recio's (torchvision's) default
    with pytest.raises(ValueError, match=r"\[1 - 1.5, 1 \+ 1.5\].*min_aspect_ratio too"):
        make(**rrc, max_aspect_ratio=1.5)
    # without random_resized_crop they are the affine warp's
    c = make(max_aspect_ratio=0.25)
    assert c.geometry.aspect_range == (0.75, 1.25) and c.crop == make().crop
    assert GeometrySpec(max_aspect_ratio=0.25).aspect_range == (0.75, 1.25)
    assert GeometrySpec(max_aspect_ratio=2, min_aspect_ratio=0.5).aspect_range == (0.5, 2)


def test_geometry_spec_checks_its_values():
    for kw, words in [
        ({"max_rotate_angle": -1}, "max_rotate_angle must be in [0, 360], not -1"),
        ({"min_crop_size": 20, "max_crop_size": 10}, "min_crop_size <= max_crop_size"),
        ({"min_random_scale": 1.5}, "min_random_scale <= max_random_scale"),
        ({"fill_value": 256}, "fill_value must be in [0, 255]"),
        ({"inter_method": 5}, "inter_method must be one of OpenCV's (0 nearest"),
        ({"max_aspect_ratio": 1.0}, "aspect ratio range must be positive"),
    ]:
        with pytest.raises(ValueError) as info:
            GeometrySpec(**kw)
        assert words in str(info.value)
    assert not GeometrySpec(fill_value=0).enabled and GeometrySpec(pad=2).enabled
    assert GeometrySpec(rotate=30).warp and not GeometrySpec(rotate=0).warp
    assert GeometrySpec(max_crop_size=24).crop_sizes == (24, 24)


def test_mxnet_settings_map_onto_recio():
    c = make(shuffle=True, shuffle_chunk_size=64, shuffle_chunk_seed=9)
    assert (c.shuffle_mode, c.seed) == ("block", 9)  # chunks of the file: block shuffle
    c = make(shuffle=True, shuffle_chunk_size=64, shuffle_chunk_seed=9, seed=2)
    assert c.seed == 2  # seed given: it stays the order's seed
    assert make(shuffle_chunk_size=0).shuffle_mode == "global"
    assert make(dtype=None).normalize.dtype == "float32"  # MXNet's None: no change
    assert make(seed=3).draw_seed == 3 and make(seed=3, seed_aug=5).draw_seed == 5
    assert make(mirror=True).crop.mirror and make(scale=1 / 255).normalize.scale == 1 / 255
    assert make(brightness=0.4).colour == ColourSpec(brightness=0.4)


def test_what_needs_float32_says_so():
    with pytest.raises(ValueError, match="max_random_contrast/max_random_illumination need"):
        make(max_random_contrast=0.2, dtype="float16")
    with pytest.raises(ValueError, match="mean_img needs dtype float32"):
        make(mean_img="m.nd", dtype="float16")
    with pytest.raises(ValueError, match="mean_img or mean_r"):
        make(mean_img="m.nd", mean_g=3)
    with pytest.raises(ValueError, match="scale normalisation needs dtype float32 or float16"):
        make(scale=0.5, dtype="uint8")


def test_the_dali_stage_names_what_it_does_not_do():
    assert make().dali_unsupported() == []
    got = make(brightness=0.4, mean_img="m.nd", seed_aug=1, path_imglist="a.lst")
    assert got.dali_unsupported() == ["brightness", "mean_img", "seed_aug", "path_imglist"]
    got = make(max_rotate_angle=10, pad=2)
    assert got.dali_unsupported() == ["max_rotate_angle", "pad"]
    assert make(fill_value=0).dali_unsupported() == []  # (alone it changes nothing)
