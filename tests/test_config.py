"""IterConfig: MXNet keywords sorted into checked groups, the same for both iterators."""

from __future__ import annotations

import pytest

from recio.config import CropSpec, IterConfig, Normalize, Sharding, Storage


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
        ({"data_shape": (1, 32, 32)}, ValueError, "3 channels"),
        ({"data_shape": (3, 32)}, ValueError, "data_shape"),
        ({"min_aspect_ratio": 2.0, "max_aspect_ratio": 1.0}, ValueError, "min_aspect_ratio=2.0"),
        ({"max_random_area": 1.5}, ValueError, "max_random_area=1.5"),
        ({"dtype": "uint8", "mean_r": 100}, ValueError, "uint8"),
        ({"std_g": 0}, ValueError, "std_r/g/b must be positive"),
        ({"preprocess_threads": 0}, ValueError, "preprocess_threads"),
        ({"max_rotate": 10}, TypeError, "unsupported arguments: ['max_rotate']"),
        ({"max_rotate_angle": 10}, ValueError, "not supported yet: max_rotate_angle"),
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
