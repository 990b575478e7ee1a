"""im2rec packing: records that decode to their sources and match MXNet's, bad files
skipped and reported, shards, byte-identical output, any fsspec URL, DALI reads it."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from recio import im2rec
from recio.records.format import parse_lst
from recio.records.recordio import MXIndexedRecordIO

from .._paths import GOLDEN
from ..conftest import needs_dali
from .conftest import BAD, decode_image, make_list, read_records, run


def test_pack_mxnet_list_matches_golden_records(tmp_path):
    shutil.copy(GOLDEN / "subset20.lst", tmp_path)
    assert run("--resize", 64, "--quality", 90, "--num-thread", 2, tmp_path / "subset20",
               GOLDEN / "subset20_images") == 0  # fmt: skip
    golden = json.loads((GOLDEN / "golden.json").read_text())["subset20"]["records"]
    mine = read_records(tmp_path / "subset20")
    lst = {e.index: e for e in parse_lst((GOLDEN / "subset20.lst").read_text().splitlines())}
    assert [k for k, _, _ in mine] == [g["key"] for g in golden]
    for (key, header, img), g in zip(mine, golden, strict=True):
        assert (header.flag, float(header.label), header.id, header.id2) == (
            g["flag"], g["label"], g["id"], g["id2"]
        )  # fmt: skip
        pixels = decode_image(img)
        assert list(pixels.shape) == g["decoded_shape_bgr"]  # MXNet's --resize arithmetic
        # Within JPEG tolerance of the source, area-resized to the same size
        source = Image.open(GOLDEN / "subset20_images" / lst[key].path).convert("RGB")
        ref = np.asarray(source.resize(pixels.shape[1::-1], Image.Resampling.BOX), np.float64)
        assert np.abs(pixels - ref).mean() < 12, lst[key].path


def test_pack_label_matches_golden_multilabel(tmp_path):
    shutil.copy(GOLDEN / "multilabel.lst", tmp_path)
    code = run("--pack-label", "--resize", 64, "--quality", 90, tmp_path / "multilabel",
               GOLDEN / "subset20_images")  # fmt: skip
    assert code == 0
    golden = json.loads((GOLDEN / "golden.json").read_text())["multilabel"]["records"]
    raw = (tmp_path / "multilabel.rec").read_bytes()
    mine = read_records(tmp_path / "multilabel")
    assert len(mine) == len(golden) == 3
    for (key, header, _), g in zip(mine, golden, strict=True):
        assert key == g["key"] and header.flag == 3
        assert header.label.tolist() == g["label"]
        assert bytes.fromhex(g["header_hex"]) in raw  # the 24-byte IRHeader, bit for bit
    # The same list without --pack-label keeps only the first label, as MXNet does
    assert run("--resize", 64, tmp_path / "multilabel", GOLDEN / "subset20_images") == 0
    assert [float(h.label) for _, h, _ in read_records(tmp_path / "multilabel")] == [0, 1, 2]


def test_records_decode_to_their_sources(tmp_path, images):
    prefix = make_list(tmp_path, images)
    assert run("--num-thread", 3, prefix, images) == 0
    lst = {e.index: e for e in parse_lst((tmp_path / "data.lst").read_text().splitlines())}
    records = read_records(prefix)
    assert [k for k, _, _ in records] == [e.index for e in lst.values()]  # .lst order
    for key, header, img in records:
        assert header.id == key and float(header.label) == lst[key].labels[0]
        source = decode_image((images / lst[key].path).read_bytes())
        pixels = decode_image(img)
        assert pixels.shape == source.shape
        assert np.abs(pixels - source).mean() < 4  # quality 95 re-encode


@pytest.mark.parametrize("mode", [[], ["--pass-through"], ["--resize", "32"]])
def test_bad_files_skipped_and_reported(tmp_path, bad_folder, mode):
    prefix = tmp_path / "badlist"
    assert run("--list", prefix, bad_folder) == 0
    with open(f"{prefix}.lst", "a") as f:
        f.write("999\t0.000000\tmissing.jpg\nnot a list line\n")
    assert run(*mode, prefix, bad_folder) == im2rec.EXIT_SKIPPED
    report = json.loads(Path(f"{prefix}.report.json").read_text())
    skipped = {Path(s["path"]).name: s["reason"] for s in report["skipped"]}
    assert set(skipped) == BAD | {"missing.jpg", "badlist.lst:13"}, skipped
    assert "empty" in skipped["empty.jpg"] and "truncated" in skipped["truncated.jpg"]
    assert "not an image" in skipped["text.jpg"] and "not found" in skipped["missing.jpg"]
    assert report["status"] == "complete" and report["written"] == 6
    assert len(read_records(prefix)) == 6
    assert run(*mode, "--allow-skips", prefix, bad_folder) == 0


def test_max_errors_aborts_and_leaves_nothing(tmp_path, bad_folder, caplog):
    prefix = tmp_path / "badlist"
    assert run("--list", "--no-shuffle", prefix, bad_folder) == 0
    caplog.set_level(logging.INFO, "recio.im2rec")
    assert run("--max-errors", 2, prefix, bad_folder) == im2rec.EXIT_FAILED
    # what it says is consistent: nothing published, so nothing "written"
    said = [r.getMessage().splitlines()[0] for r in caplog.records if "badlist.lst:" in r.message]
    assert "nothing published (existing outputs left as they were): 3 skipped, more than " \
        "--max-errors 2" in said[0]  # fmt: skip
    assert "aborted, nothing published;" in said[1] and "images packed before it stopped" in said[1]
    assert not [line for line in said if "written" in line]
    assert not list(tmp_path.glob("badlist.rec*")) and not list(tmp_path.glob("badlist.idx*"))
    assert not list(tmp_path.glob(".*partial"))
    assert json.loads(Path(f"{prefix}.report.json").read_text())["status"] == "aborted"
    assert run("--max-errors", 5, prefix, bad_folder) == im2rec.EXIT_SKIPPED


def test_shards_are_balanced_and_complete(tmp_path, images):
    prefix = make_list(tmp_path, images)
    assert run("--shards", 5, "--resize", 32, prefix, images) == 0
    shards = [read_records(tmp_path / f"data-{k:05d}-of-00005") for k in range(5)]
    assert [len(s) for s in shards] == [5, 5, 5, 5, 4]
    keys = [k for s in shards for k, _, _ in s]
    assert sorted(keys) == list(range(24))
    assert not (tmp_path / "data.rec").exists()


def test_shard_k_holds_the_lists_entries_k_k_plus_n_less_the_skipped(tmp_path, bad_folder):
    prefix = make_list(tmp_path, bad_folder)
    assert run("--shards", 3, "--resize", 32, prefix, bad_folder) == im2rec.EXIT_SKIPPED
    report = json.loads(Path(f"{prefix}.report.json").read_text())
    skipped = {s["index"] for s in report["skipped"]}
    assert len(skipped) == len(BAD)
    lines = Path(f"{prefix}.lst").read_text().splitlines()
    for k in range(3):
        keys = [int(line.split("\t")[0]) for line in lines[k::3]]
        got = [key for key, _, _ in read_records(tmp_path / f"data-{k:05d}-of-00003")]
        assert got == [i for i in keys if i not in skipped]


def test_same_input_and_seed_give_identical_bytes(tmp_path, images):
    outs = []
    for workers, pool, name in ((1, "thread", "a"), (3, "process", "b"), (2, "thread", "c")):
        folder = tmp_path / name
        folder.mkdir()
        prefix = make_list(folder, images, "data", "--seed", 7)
        assert run("--num-thread", workers, "--pool", pool, "--resize", 50, prefix, images) == 0
        outs.append([(folder / f"data.{ext}").read_bytes() for ext in ("lst", "rec", "idx")])
    assert outs[0] == outs[1] == outs[2]
    make_list(tmp_path, images, "default")
    assert (tmp_path / "default.lst").read_bytes() != outs[0][0]  # seed 100 differs


def test_output_to_fsspec_url(tmp_path, images):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    url = "memory://im2rec-test/data"
    try:
        assert run("--list", "--recursive", url, images) == 0
        assert run("--resize", 32, "--shards", 2, url, images) == 0
        names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls("/im2rec-test", detail=False))
        assert names == [
            "data-00000-of-00002.crc", "data-00000-of-00002.idx", "data-00000-of-00002.rec",
            "data-00001-of-00002.crc", "data-00001-of-00002.idx", "data-00001-of-00002.rec",
            "data.lst", "data.report.json",
        ]  # fmt: skip
        with MXIndexedRecordIO(f"{url}-00001-of-00002.idx", f"{url}-00001-of-00002.rec", "r") as r:
            assert len(r.keys) == 12
    finally:
        fs.rm("/im2rec-test", recursive=True)


@needs_dali
def test_dali_reads_the_output(tmp_path, images):
    from nvidia.dali import fn, pipeline_def

    prefix = make_list(tmp_path, images)
    assert run("--resize", 40, prefix, images) == 0
    expected = [(float(h.label), decode_image(img).shape) for _, h, img in read_records(prefix)]

    @pipeline_def(batch_size=8, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.mxnet(
            path=[f"{prefix}.rec"], index_path=[f"{prefix}.idx"], random_shuffle=False
        )
        return fn.decoders.image(jpegs, device="cpu"), labels

    p = pipe()
    p.build()
    got = []
    for _ in range(3):
        imgs, labels = p.run()
        for i in range(len(imgs)):
            got.append((float(np.asarray(labels.at(i)).ravel()[0]), imgs.at(i).shape))
    assert got == expected


@pytest.mark.parametrize("mode", ["wrong root", "max errors", "empty list", "no good line"])
def test_failed_run_never_replaces_a_good_dataset(tmp_path, images, bad_folder, mode, caplog):
    prefix = make_list(tmp_path, images)
    assert run("--resize", 32, prefix, images) == 0
    good = {ext: (tmp_path / f"data.{ext}").read_bytes() for ext in ("rec", "idx")}
    if mode == "wrong root":  # a folder that exists, but not the one the .lst is relative to
        code = run("--resize", 32, prefix, images.parent)
    elif mode in ("empty list", "no good line"):
        (tmp_path / "data.lst").write_text("" if mode == "empty list" else "a\tb\n")
        code = run("--resize", 32, prefix, images)
        said = "the list has no entries" if mode == "empty list" else "no line of the list"
        assert said in caplog.text
    else:
        (tmp_path / "data.lst").write_text(
            "".join(
                f"{i}\t0.000000\t{p.name}\n" for i, p in enumerate(sorted(bad_folder.iterdir()))
            )
        )
        code = run("--resize", 32, "--max-errors", 1, prefix, bad_folder)
    assert code == im2rec.EXIT_FAILED
    assert {ext: (tmp_path / f"data.{ext}").read_bytes() for ext in ("rec", "idx")} == good
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]
    assert json.loads((tmp_path / "data.report.json").read_text())["status"] == "aborted"
    if mode == "wrong root":
        assert "every file failed" in caplog.text and "is ROOT" in caplog.text
        assert str(images.parent / "class_0") in caplog.text  # names where it looked


@pytest.mark.parametrize("pack_label", [False, True])
def test_labels_beyond_float32_are_skipped_and_non_finite_ones_warned(
    tmp_path, images, pack_label, caplog
):
    prefix = make_list(tmp_path, images, "data", "--no-shuffle")
    entries = list(parse_lst((tmp_path / "data.lst").read_text().splitlines()))
    lines = []
    for e in entries:
        label = {2: "1e40", 4: "nan", 5: "-inf"}.get(e.index, "1")
        labels = f"0\t{label}" if pack_label else label  # with --pack-label: the 2nd column
        lines.append(f"{e.index}\t{labels}\t{e.path}\n")
    (tmp_path / "data.lst").write_text("".join(lines))
    flags = ["--pack-label"] if pack_label else []
    assert run(*flags, "--resize", 32, prefix, images) == im2rec.EXIT_SKIPPED
    report = json.loads((tmp_path / "data.report.json").read_text())
    assert [s["path"] for s in report["skipped"]] == [f"{prefix}.lst:3"]
    assert "1e40 does not fit float32" in report["skipped"][0]["reason"]
    assert len(read_records(prefix)) == 23
    warnings = [r.getMessage() for r in caplog.records if "not finite" in r.getMessage()]
    assert len(warnings) == 1 and f"{prefix}.lst:5:" in warnings[0] and "2 lines" in warnings[0]


def test_repeated_index_is_refused_before_packing(tmp_path, images, caplog):
    prefix = make_list(tmp_path, images, "data", "--no-shuffle")
    assert run("--resize", 32, prefix, images) == 0
    good = (tmp_path / "data.rec").read_bytes()
    lines = (tmp_path / "data.lst").read_text().splitlines(True)
    for n in (7, 20):  # lines 8 and 21 take the index of line 4 (MXNet would pack both)
        lines[n] = "3" + lines[n][lines[n].index("\t") :]
    (tmp_path / "data.lst").write_text("".join(lines))
    assert run("--resize", 32, prefix, images) == im2rec.EXIT_FAILED
    assert f"{prefix}.lst:8: index 3 is already on line 4 (2 repeated indices" in caplog.text
    assert (tmp_path / "data.rec").read_bytes() == good
    assert json.loads((tmp_path / "data.report.json").read_text())["status"] == "aborted"


def test_paths_outside_root_are_read_with_one_warning(tmp_path, images, caplog):
    prefix = make_list(tmp_path, images, "data", "--no-shuffle")
    entries = list(parse_lst((tmp_path / "data.lst").read_text().splitlines()))
    root = images / "class_00"  # the others are reached with ../ or an absolute path
    lines = []
    for e in entries:
        folder, name = e.path.split("/")
        path = name if folder == "class_00" else f"../{e.path}"
        path = str(images / e.path) if folder == "class_03" else path
        lines.append(f"{e.index}\t{e.labels[0]:f}\t{path}\n")
    (tmp_path / "data.lst").write_text("".join(lines))
    assert run("--resize", 32, prefix, root) == 0
    assert len(read_records(prefix)) == 24
    warnings = [r.getMessage() for r in caplog.records if "outside ROOT" in r.getMessage()]
    assert warnings == [
        f"{prefix}.lst:7: ../class_01/{entries[6].path.split('/')[1]} is outside ROOT {root} "
        "(18 paths outside it): read anyway, as MXNet does"
    ]


def test_list_not_utf8_is_an_error_naming_line_and_byte(tmp_path, images, caplog):
    prefix = make_list(tmp_path, images, "data", "--no-shuffle")
    text = (tmp_path / "data.lst").read_text()
    (tmp_path / "data.lst").write_text("\ufeff" + text, encoding="utf-8")  # a BOM is fine
    assert run("--resize", 32, prefix, images) == 0
    lines = text.splitlines(True)
    lines[2] = lines[2].replace(".jpg", "é.jpg")
    (tmp_path / "data.lst").write_bytes("".join(lines).encode("latin-1"))
    assert run("--resize", 32, prefix, images) == im2rec.EXIT_FAILED
    offset = len("".join(lines[:2])) + lines[2].index("é")
    assert "not UTF-8 text: byte 0xe9 on line 3" in caplog.text
    assert f"at byte {offset} of {prefix}.lst" in caplog.text
    assert json.loads((tmp_path / "data.report.json").read_text())["status"] == "aborted"


def test_pass_through_warns_about_exif_rotated_jpegs(tmp_path, images, caplog):
    root = tmp_path / "photos"
    shutil.copytree(images / "class_00", root)
    pixels = np.zeros((30, 60, 3), np.uint8)
    for name, turn in (("b_upright.jpg", 1), ("c_sideways.jpg", 6), ("d_sideways.jpg", 8)):
        exif = Image.Exif()
        exif[0x0112] = turn
        Image.fromarray(pixels).save(root / name, quality=90, exif=exif)
    prefix = tmp_path / "exif"
    assert run("--list", "--no-shuffle", prefix, root) == 0
    assert run("--pass-through", prefix, root) == 0
    lst = {e.index: e for e in parse_lst((tmp_path / "exif.lst").read_text().splitlines())}
    for key, _, img in read_records(prefix):
        assert img == (root / lst[key].path).read_bytes()  # still byte-exact
    warnings = [r.getMessage() for r in caplog.records if "EXIF" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].startswith("2 JPEGs with an EXIF orientation other than 1 "
                                  "(first: c_sideways.jpg, orientation 6)")  # fmt: skip
    assert "decoded unrotated" in warnings[0] and "without --pass-through" in warnings[0]
    caplog.clear()
    assert run(prefix, root) == 0  # re-encoding applies the orientation: nothing to say
    assert not [r for r in caplog.records if "EXIF" in r.getMessage()]


def test_pack_freezes_the_heap_out_of_gc_while_it_runs_and_thaws_it_after(
    tmp_path, images, monkeypatch
):
    """The list's entries are left out of garbage collection during the run (they live to
    its end); afterwards, finished or failed, the collector sees everything again."""
    import gc

    from recio.im2rec import pack

    prefix = make_list(tmp_path, images)
    seen = []
    real = pack.batch_stream

    def watched(*args, **kwargs):
        seen.append(gc.get_freeze_count())
        yield from real(*args, **kwargs)

    monkeypatch.setattr(pack, "batch_stream", watched)
    lst = f"{prefix}.lst"
    n = len(list(parse_lst(Path(lst).read_text().splitlines())))
    assert gc.get_freeze_count() == 0
    report = pack.pack_list(lst, str(images), im2rec.EncodeOptions(resize=32), num_thread=2)
    assert report.written == n and seen and seen[0] > n  # entries (and more) frozen
    assert gc.get_freeze_count() == 0

    def broken(*args, **kwargs):
        raise RuntimeError("writer failed")
        yield

    monkeypatch.setattr(pack, "batch_stream", broken)
    with pytest.raises(RuntimeError, match="writer failed"):
        pack.pack_list(lst, str(images), im2rec.EncodeOptions(resize=32))
    assert gc.get_freeze_count() == 0
