"""Verification .bin files: written from a pairs file, read back, as InsightFace reads them."""

import pickle

import pytest

from recio.cli.main import main
from recio.im2rec.facebin import read_bin

from .._paths import REPO

GOLDEN = REPO / "tests" / "data" / "mx_golden"


def test_write_then_read_a_bin(tmp_path, capsys):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text(f"{GOLDEN}/face420.jpg {GOLDEN}/lfw420.jpg 1\n\nface.png odd422.jpg 0\n")
    out = tmp_path / "lfw.bin"
    assert main(["facebin", "write", str(out), str(pairs), "--root", str(GOLDEN)]) == 0
    bins, issame = read_bin(str(out))
    names = ["face420.jpg", "lfw420.jpg", "face.png", "odd422.jpg"]
    assert bins == [(GOLDEN / n).read_bytes() for n in names] and issame == [True, False]
    with open(out, "rb") as f:  # as InsightFace's load_bin reads it
        assert pickle.load(f, encoding="bytes")[1] == [True, False]
    capsys.readouterr()
    assert main(["facebin", "info", str(out)]) == 0
    assert "2 pairs, 1 same, 4 images (97x61, 112x112, 250x250)" in capsys.readouterr().out


def test_a_bad_pairs_line_names_the_file_and_line(tmp_path, capsys):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("a.jpg b.jpg yes\n")
    assert main(["facebin", "write", str(tmp_path / "x.bin"), str(pairs)]) == 2
    assert f"{pairs}:1: a pair is 'PATH_A PATH_B SAME'" in capsys.readouterr().err
    assert not (tmp_path / "x.bin").exists()


def test_a_python2_pickle_and_a_wrong_file(tmp_path):
    path = tmp_path / "old.bin"
    path.write_bytes(pickle.dumps(([b"a", b"b"], [1]), protocol=2))
    assert read_bin(str(path)) == ([b"a", b"b"], [True])
    path.write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="not a verification .bin"):
        read_bin(str(path))
