"""im2rec --list: MXNet-identical lists, labels from folders, shuffle and split."""

from __future__ import annotations

from recio import im2rec
from recio.records.format import parse_lst

from .._paths import GOLDEN
from .conftest import make_list, read_records, run


def test_list_equals_mxnet_golden(tmp_path):
    prefix = make_list(tmp_path, GOLDEN / "subset20_images", "subset20")
    assert (tmp_path / "subset20.lst").read_text() == (GOLDEN / "subset20.lst").read_text()
    assert prefix.with_suffix(".lst").exists()


def test_split_names_and_counts_follow_mxnet(tmp_path, images):
    prefix = make_list(tmp_path, images, "data", "--chunks", 2, "--train-ratio", 0.6,
                       "--test-ratio", 0.2)  # fmt: skip
    counts = {p.name: len(p.read_text().splitlines()) for p in sorted(tmp_path.glob("data*.lst"))}
    # 24 images → chunks of 12; train int(12*.6)=7, test int(12*.2)=2, val the rest (3)
    assert counts == {
        "data_0_test.lst": 2, "data_0_train.lst": 7, "data_0_val.lst": 3,
        "data_1_test.lst": 2, "data_1_train.lst": 7, "data_1_val.lst": 3,
    }  # fmt: skip
    # PREFIX packs every PREFIX*.lst, each into its own .rec/.idx
    assert run(prefix, images) == 0
    for name, n in counts.items():
        assert len(read_records(tmp_path / name[: -len(".lst")])) == n


def test_recursive_labels_and_no_shuffle(tmp_path, images):
    make_list(tmp_path, images, "data", "--no-shuffle")
    entries = list(parse_lst((tmp_path / "data.lst").read_text().splitlines()))
    assert [e.index for e in entries] == list(range(24))
    assert entries == sorted(entries, key=lambda e: e.path)
    for e in entries:
        assert e.labels == (float(int(e.path.split("/")[0][-2:])),)


def test_listing_mistakes_are_errors_with_a_hint(tmp_path, images, caplog):
    (tmp_path / "empty").mkdir()
    cases = {  # ROOT → what the error says
        tmp_path / "missing": "image folder ROOT",
        tmp_path / "empty": "no images (.jpeg .jpg .png) in",
        images: "found 4 sub-folders with images (class_00, ...): did you mean --recursive?",
    }
    for root, message in cases.items():
        caplog.clear()
        assert run("--list", tmp_path / "data", root) == im2rec.EXIT_FAILED, root
        assert message in caplog.text, caplog.text
        assert not (tmp_path / "data.lst").exists()
    caplog.clear()  # an output prefix in a folder that does not exist: one line, no traceback
    assert run("--list", "--recursive", tmp_path / "nowhere" / "data", images) == 2
    assert f"folder of PREFIX {tmp_path / 'nowhere'} does not exist" in caplog.text
    assert not (tmp_path / "nowhere").exists()


def test_list_says_one_summary_line_and_the_classes_only_when_verbose(tmp_path, images, caplog):
    import logging
    import shutil

    root = tmp_path / "folder"
    shutil.copytree(images, root)
    (root / "class_00" / "notes.txt").write_text("not an image")
    caplog.set_level(logging.INFO, logger="recio.im2rec")
    assert im2rec.main(["--list", "--recursive", str(tmp_path / "data"), str(root)]) == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "recio.im2rec"]
    assert lines == [
        f"listed 24 images in 4 classes from {root} (1 other file skipped: not "
        f".jpeg/.jpg/.png); wrote {tmp_path / 'data.lst'} (24)"
    ]
    caplog.clear()
    argv = ["--list", "--recursive", "--verbose", str(tmp_path / "data"), str(root)]
    assert im2rec.main(argv) == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "recio.im2rec"]
    assert lines[:4] == [f"label {i}: class_0{i} (6 images)" for i in range(4)]
    assert len(lines) == 5 and lines[4].startswith("listed 24 images in 4 classes")
