"""im2rec --layout insightface: InsightFace's face-recognition .rec, read back the way
arcface_torch's MXFaceDataset reads it (MXIndexedRecordIO + unpack, keys from the header)."""

from __future__ import annotations

import json
import logging
import numbers
import shutil
from pathlib import Path

import numpy as np
import pytest

from recio import im2rec
from recio.im2rec.layout import FaceIndex, float32_inexact, with_id
from recio.records.format import IRHeader, pack, parse_lst
from recio.records.recordio import MXIndexedRecordIO, unpack

from .conftest import decode_image, read_records, run

FACE = ("--layout", "insightface")
#: images per identity folder in the ``faces`` fixture: one identity has a single image
COUNTS = {"person_a": 5, "person_b": 1, "person_c": 3, "person_d": 4}


@pytest.fixture(scope="module")
def faces(images, tmp_path_factory) -> Path:
    """13 JPEGs in 4 identity folders of 5, 1, 3 and 4 images."""
    root = tmp_path_factory.mktemp("faces")
    for (name, n), source in zip(COUNTS.items(), sorted(images.iterdir()), strict=True):
        (root / name).mkdir()
        for path in sorted(source.iterdir())[:n]:
            shutil.copy(path, root / name / path.name)
    return root


def mx_face_dataset(stem: Path) -> dict:
    """What MXFaceDataset (and InsightFace's identity samplers) read from STEM.rec/.idx."""
    with MXIndexedRecordIO(f"{stem}.idx", f"{stem}.rec", "r") as rec:
        header, rest = unpack(rec.read_idx(0))
        assert header.flag > 0 and len(rest) == 0
        assert header.label.dtype == np.float32 and header.id == 0
        imgidx = np.array(range(1, int(header.label[0])))
        images = []
        for key in imgidx:
            h, img = unpack(rec.read_idx(int(key)))
            label = h.label if isinstance(h.label, numbers.Number) else h.label[0]
            images.append((int(key), h, int(label), bytes(img)))
        identities = []
        for key in range(int(header.label[0]), int(header.label[1])):
            h, rest = unpack(rec.read_idx(key))
            assert (h.flag, h.id, len(rest)) == (2, key, 0)
            identities.append((int(h.label[0]), int(h.label[1])))
        return {"header": header, "keys": list(rec.keys), "images": images, "ids": identities}


def check_face_layout(stem: Path, n: int, k: int) -> dict:
    """The face layout's invariants for N images of K identities; the dataset read back."""
    data = mx_face_dataset(stem)
    assert data["header"].label.tolist() == [n + 1, n + 1 + k]
    assert sorted(data["keys"]) == list(range(n + k + 1))  # the .idx has every key once
    assert [key for key, *_ in data["images"]] == list(range(1, n + 1))
    assert all(h.id == key for key, h, _, _ in data["images"])
    # identity ranges tile 1..N in order, one label each, labels grouped and increasing
    assert len(data["ids"]) == k
    assert [a for a, _ in data["ids"]] == [1, *(b for _, b in data["ids"][:-1])]
    assert data["ids"][-1][1] == n + 1
    labels = [label for _, _, label, _ in data["images"]]
    for a, b in data["ids"]:
        assert b > a and len(set(labels[a - 1 : b - 1])) == 1
    assert labels == sorted(labels) and len(set(labels)) == k
    return data


def test_folder_to_face_rec_reads_back_as_mx_face_dataset(tmp_path, faces):
    prefix = tmp_path / "faces"
    assert run("--list", "--recursive", *FACE, prefix, faces) == 0
    assert run(*FACE, "--num-thread", 2, prefix, faces) == 0
    data = check_face_layout(prefix, n=13, k=4)
    sizes = [b - a for a, b in data["ids"]]
    assert sizes == list(COUNTS.values())  # labels 0..3 in sorted folder order
    lst = {e.index: e for e in parse_lst((tmp_path / "faces.lst").read_text().splitlines())}
    for key, _, label, img in data["images"]:
        entry = lst[key]  # the .lst written with --list holds the keys
        assert label == entry.labels[0] == list(COUNTS).index(entry.path.split("/")[0])
        source = decode_image((faces / entry.path).read_bytes())
        pixels = decode_image(img)
        assert pixels.shape == source.shape and np.abs(pixels - source).mean() < 4
    # what the file holds, in order: images, header, identities (as InsightFace writes it)
    assert [key for key, _, _ in read_records(prefix)] == [*range(1, 14), 0, *range(14, 18)]
    report = json.loads((tmp_path / "faces.report.json").read_text())
    assert (report["layout"], report["identities"], report["written"]) == ("insightface", 4, 13)


def test_list_in_face_layout_is_grouped_and_numbered_from_1(tmp_path, faces):
    assert run("--list", "--recursive", tmp_path / "plain", faces) == 0
    assert run("--list", "--recursive", *FACE, tmp_path / "face", faces) == 0
    plain = list(parse_lst((tmp_path / "plain.lst").read_text().splitlines()))
    face = list(parse_lst((tmp_path / "face.lst").read_text().splitlines()))
    assert [e.index for e in face] == list(range(1, 14))
    assert [e.labels for e in face] == sorted(e.labels for e in plain)
    # within a class, the shuffled order of the plain list (the same seed)
    for label in range(4):
        assert [e.path for e in face if e.labels[0] == label] == [
            e.path for e in plain if e.labels[0] == label
        ]


def write_lst(path: Path, rows) -> None:
    path.write_text("".join(f"{i}\t" + "".join(f"{x:f}\t" for x in ls) + f"{p}\n"
                            for i, ls, p in rows))  # fmt: skip


def interleaved_rows(faces: Path) -> list[tuple]:
    """A hand-made list: classes 7, 2 and 5 interleaved, arbitrary and repeated indices."""
    files = sorted(p.relative_to(faces).as_posix() for p in faces.rglob("*.jpg"))
    labels = [7, 2, 5, 2, 7, 5, 7, 2, 5, 2, 7, 5, 2]
    indices = [40, 3, 3, 17, 8, 0, 99, 5, 5, 12, 1, 2, 60]  # not keys in this layout
    return [(i, (float(c),), f) for i, c, f in zip(indices, labels, files, strict=True)]


def test_interleaved_list_is_grouped_and_keys_renumbered(tmp_path, faces, caplog):
    rows = interleaved_rows(faces)
    rows.insert(4, (77, (5.0,), "person_x/missing.jpg"))  # skipped: later keys move down
    rows.append((78, (9.0,), "person_y/missing.jpg"))  # a class with no image left
    write_lst(tmp_path / "mixed.lst", rows)
    assert run(*FACE, "--num-thread", 3, tmp_path / "mixed", faces) == im2rec.EXIT_SKIPPED
    data = check_face_layout(tmp_path / "mixed", n=13, k=3)
    got = [(label, img) for _, _, label, img in data["images"]]
    kept = [r for r in rows if "missing" not in r[2]]
    expected = sorted(kept, key=lambda r: r[1][0])  # stable: .lst order within a class
    assert [label for label, _ in got] == [int(r[1][0]) for r in expected]
    for (_, img), (_, _, path) in zip(got, expected, strict=True):
        assert decode_image(img).shape == decode_image((faces / path).read_bytes()).shape
    sizes = {int(label): b - a for (a, b), label in zip(data["ids"], (2, 5, 7), strict=True)}
    assert sizes == {2: 5, 5: 4, 7: 4}
    report = json.loads((tmp_path / "mixed.report.json").read_text())
    assert sorted(s["index"] for s in report["skipped"]) == [77, 78]  # the .lst's numbers
    assert report["identities"] == 3
    assert "1 class had every image skipped (first: label 9)" in caplog.text


def test_threads_and_processes_give_byte_identical_face_output(tmp_path, faces):
    rows = interleaved_rows(faces)
    rows.insert(2, (50, (2.0,), "person_x/missing.jpg"))  # a skip: ids rewritten after it
    outs = []
    for workers, pool, name in ((1, "thread", "a"), (3, "process", "b"), (2, "thread", "c")):
        write_lst(tmp_path / f"{name}.lst", rows)
        code = run(*FACE, "--num-thread", workers, "--pool", pool, "--resize", 40,
                   tmp_path / name, faces)  # fmt: skip
        assert code == im2rec.EXIT_SKIPPED
        outs.append([(tmp_path / f"{name}.{ext}").read_bytes() for ext in ("rec", "idx")])
    assert outs[0] == outs[1] == outs[2]
    check_face_layout(tmp_path / "a", n=13, k=3)


def test_labels_are_kept_as_in_the_list(tmp_path, faces):
    rows = [(i, (c, 1.0), p) for i, (c,), p in interleaved_rows(faces)]  # InsightFace's pair
    write_lst(tmp_path / "two.lst", rows)
    assert run(*FACE, "--pack-label", tmp_path / "two", faces) == 0
    data = check_face_layout(tmp_path / "two", n=13, k=3)
    assert {(h.flag, h.label[1]) for _, h, _, _ in data["images"]} == {(2, 1.0)}
    assert run(*FACE, tmp_path / "two", faces) == 0  # without --pack-label: the first only
    data = check_face_layout(tmp_path / "two", n=13, k=3)
    assert {h.flag for _, h, _, _ in data["images"]} == {0}
    assert [label for *_, label, _ in data["images"]] == [2] * 5 + [5] * 4 + [7] * 4


def test_failed_face_run_leaves_the_good_output(tmp_path, faces, monkeypatch):
    prefix = tmp_path / "faces"
    assert run("--list", "--recursive", *FACE, prefix, faces) == 0
    assert run(*FACE, prefix, faces) == 0
    good = {ext: (tmp_path / f"faces.{ext}").read_bytes() for ext in ("rec", "idx")}

    def full_disk(self):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(FaceIndex, "records", full_disk)  # fails after every image is written
    assert run(*FACE, "--resize", 32, prefix, faces) == im2rec.EXIT_FAILED
    assert {ext: (tmp_path / f"faces.{ext}").read_bytes() for ext in ("rec", "idx")} == good
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]
    assert json.loads((tmp_path / "faces.report.json").read_text())["status"] == "failed"


def test_rebuilt_idx_equals_the_written_one(tmp_path, faces):
    from recio.cli import main

    prefix = tmp_path / "faces"
    assert run("--list", "--recursive", *FACE, prefix, faces) == 0
    assert run(*FACE, prefix, faces) == 0
    written = (tmp_path / "faces.idx").read_bytes()
    assert main(["index", "--idx", str(tmp_path / "again.idx"), f"{prefix}.rec"]) == 0
    assert (tmp_path / "again.idx").read_bytes() == written  # every record's id is its key


@pytest.mark.parametrize("case", ["shards", "nan class", "unknown layout"])
def test_face_layout_refusals(tmp_path, faces, case, caplog):
    write_lst(tmp_path / "x.lst", interleaved_rows(faces))
    if case == "shards":
        assert run(*FACE, "--shards", 2, tmp_path / "x", faces) == im2rec.EXIT_FAILED
        assert "--layout insightface writes one .rec" in caplog.text
        with pytest.raises(ValueError, match="one .rec"):
            im2rec.pack_list(str(tmp_path / "x.lst"), str(faces), shards=2, layout="insightface")
    elif case == "nan class":
        rows = interleaved_rows(faces)
        rows[3] = (rows[3][0], (float("nan"),), rows[3][2])
        write_lst(tmp_path / "x.lst", rows)
        assert run(*FACE, tmp_path / "x", faces) == im2rec.EXIT_FAILED
        assert f"{tmp_path / 'x.lst'}:4: class label nan is not a finite number" in caplog.text
        assert json.loads((tmp_path / "x.report.json").read_text())["status"] == "aborted"
    else:
        with pytest.raises(ValueError, match="layout must be one of mxnet, insightface"):
            im2rec.pack_list(str(tmp_path / "x.lst"), str(faces), layout="face")
    assert not (tmp_path / "x.rec").exists()


def test_mxnet_layout_still_refuses_repeated_indices(tmp_path, faces, caplog):
    write_lst(tmp_path / "x.lst", interleaved_rows(faces))  # index 3 twice: fine for faces
    assert run(tmp_path / "x", faces) == im2rec.EXIT_FAILED
    assert "index 3 is already on line 2" in caplog.text


def test_face_index_records_and_float32_limit(caplog):
    index = FaceIndex()
    assert [index.add(c) for c in (0.0, 0.0, 3.0, 4.0, 4.0, 4.0)] == [1, 2, 3, 4, 5, 6]
    assert index.ranges() == [(0.0, 1, 3), (3.0, 3, 4), (4.0, 4, 7)]
    got = [(key, unpack(payload)) for key, payload in index.records()]
    assert [(k, h.flag, h.label.tolist(), h.id, len(rest)) for k, (h, rest) in got] == [
        (0, 2, [7, 10], 0, 0), (7, 2, [1, 3], 7, 0), (8, 2, [3, 4], 8, 0), (9, 2, [4, 7], 9, 0),
    ]  # fmt: skip
    with pytest.raises(ValueError, match="class 0 is not consecutive"):
        index.add(0.0)
    assert index.inexact() == []
    assert float32_inexact([2**24, 2**24 + 1, 2**24 + 2, 2**25 + 2]) == [2**24 + 1, 2**25 + 2]
    big = FaceIndex()
    big.images = 2**24 - 1  # as after 16,777,215 images
    big.add(1.0)
    assert big.inexact() == [2**24 + 1]  # the identity's end key
    from recio.im2rec.layout import warn_index

    with caplog.at_level(logging.WARNING, "recio.im2rec"):
        warn_index("big.lst", [], big)
    assert "1 key in the identity index (first: 16777217) beyond float32" in caplog.text


def test_with_id_rewrites_only_the_id():
    payload = pack(IRHeader(0, 3.0, 41, 7), b"\xff\xd8image")
    assert with_id(payload, 41) is payload
    header, img = unpack(with_id(payload, 2**40))
    assert (header.flag, header.label, header.id, header.id2, bytes(img)) == (
        0, 3.0, 2**40, 7, b"\xff\xd8image"
    )  # fmt: skip


def test_help_says_how_classes_are_ordered(capsys):
    with pytest.raises(SystemExit):
        im2rec.main(["--help"])
    flat = " ".join(capsys.readouterr().out.split())
    assert "--layout {mxnet,insightface}" in flat
    assert "classes sorted by label value and each class in .lst order" in flat


def test_face_output_is_read_by_recios_layout_and_iterator(tmp_path, faces):
    from recio.pipeline.iterator import ImageRecordIter
    from recio.records.samples import INSIGHTFACE

    prefix = tmp_path / "faces"
    assert run("--list", "--recursive", *FACE, prefix, faces) == 0
    assert run(*FACE, prefix, faces) == 0
    kw = dict(data_shape=(3, 16, 16), batch_size=4, shuffle=True, last_batch="discard")
    with ImageRecordIter(f"{prefix}.rec", **kw) as it:
        assert it.layout.kind == INSIGHTFACE and it.layout.num_classes == 4
        assert it.layout.identities.tolist() == [list(r) for r in mx_face_dataset(prefix)["ids"]]
        ids = [i for batch in it for i in batch.index.tolist()]
        assert len(ids) == 12 and len(set(ids)) == 12 and set(ids) <= set(range(1, 14))
        assert it.stats.bad_records == {}
