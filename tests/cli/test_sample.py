"""`recio sample`: the image folders the docs read, the same bytes every time."""

from recio.cli.main import main


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.jpg")}


def test_sample_writes_the_docs_folders_the_same_every_time(tmp_path, capsys):
    assert main(["sample", str(tmp_path / "a")]) == 0
    assert "wrote 21 JPEGs" in capsys.readouterr().out
    files = _files(tmp_path / "a")
    classes = {name.split("/")[1] for name in files if name.startswith("images/")}
    assert classes == {"cat", "dog", "fish"}
    assert sum(name.startswith("images/") for name in files) == 12
    faces = [name for name in files if name.startswith("faces/")]
    assert sorted({n.split("/")[1] for n in faces}) == ["id0", "id1", "id2"] and len(faces) == 9
    assert main(["sample", str(tmp_path / "b")]) == 0
    assert _files(tmp_path / "b") == files
