"""recio.records.shard_names: which forms name several files, and the URLs they name."""

import os

from recio.records.shard_names import expand_shards, is_shard_spec


def test_brace_ranges_pad_like_the_shell():
    assert expand_shards("a-{8..11}.rec") == ["a-8.rec", "a-9.rec", "a-10.rec", "a-11.rec"]
    assert expand_shards("a-{008..010}.rec") == ["a-008.rec", "a-009.rec", "a-010.rec"]
    assert expand_shards("{x,y}-{0..1}.rec") == ["x-0.rec", "x-1.rec", "y-0.rec", "y-1.rec"]


def test_several_files_are_named_by_form_alone(tmp_path):
    for spec in (["a.rec"], ("a.rec", "b.rec"), "t-{0..3}.rec", "data/*.rec", "d/t-0[12].rec"):
        assert is_shard_spec(spec), spec
    for spec in ("a.rec", tmp_path / "a.rec", "data/train", "https://host/x*y.rec"):
        assert not is_shard_spec(spec), spec
    assert not os.path.exists("data/train")  # STEM is found by expand_shards, not by form
