"""im2rec: MXNet-identical lists, records that decode to their sources, bad files, layouts."""

from __future__ import annotations

import io
import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from recio import im2rec
from recio.bench.sample import make_sample_folder
from recio.format import parse_lst, unpack
from recio.recordio import MXIndexedRecordIO

from .._paths import GOLDEN


def run(*argv: object) -> int:
    return im2rec.main([*map(str, argv), "--quiet"])


def read_records(stem: Path) -> list[tuple]:
    """(key, header, image bytes) of every record, in file order."""
    with MXIndexedRecordIO(f"{stem}.idx", f"{stem}.rec", "r") as r:
        out = []
        for key in r.keys:
            header, img = unpack(r.read_idx(key))
            out.append((key, header, bytes(img)))
        return out


def decode(data: bytes, mode: str = "RGB") -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert(mode), dtype=np.float64)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    """24 small JPEGs in 4 class folders."""
    root = tmp_path_factory.mktemp("images")
    return Path(make_sample_folder(str(root), 24, min_side=48, max_side=120))


def make_list(tmp_path: Path, root: Path, name: str = "data", *extra: object) -> Path:
    prefix = tmp_path / name
    assert run("--list", "--recursive", *extra, prefix, root) == 0
    return prefix


# --- MXNet compatibility (golden files written by MXNet 1.9.1) -------------------------


def test_list_equals_mxnet_golden(tmp_path):
    prefix = make_list(tmp_path, GOLDEN / "subset20_images", "subset20")
    assert (tmp_path / "subset20.lst").read_text() == (GOLDEN / "subset20.lst").read_text()
    assert prefix.with_suffix(".lst").exists()


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
        pixels = decode(img)
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


# --- records ---------------------------------------------------------------------------


def test_records_decode_to_their_sources(tmp_path, images):
    prefix = make_list(tmp_path, images)
    assert run("--num-thread", 3, prefix, images) == 0
    lst = {e.index: e for e in parse_lst((tmp_path / "data.lst").read_text().splitlines())}
    records = read_records(prefix)
    assert [k for k, _, _ in records] == [e.index for e in lst.values()]  # .lst order
    for key, header, img in records:
        assert header.id == key and float(header.label) == lst[key].labels[0]
        source = decode((images / lst[key].path).read_bytes())
        pixels = decode(img)
        assert pixels.shape == source.shape
        assert np.abs(pixels - source).mean() < 4  # quality 95 re-encode


def test_resize_center_crop_gray_png(tmp_path, images):
    prefix = make_list(tmp_path, images)
    lst = list(parse_lst((tmp_path / "data.lst").read_text().splitlines()))
    assert run("--resize", 40, "--center-crop", "--color", 0, prefix, images) == 0
    for _, _, img in read_records(prefix):
        im = Image.open(io.BytesIO(img))
        assert im.mode == "L" and im.size == (40, 40)
    assert run("--resize", 40, "--encoding", ".png", "--quality", 3, prefix, images) == 0
    for (_, _, img), entry in zip(read_records(prefix), lst, strict=True):
        im = Image.open(io.BytesIO(img))
        w, h = Image.open(images / entry.path).size
        assert im.format == "PNG" and min(im.size) == 40
        assert im.size == ((40, h * 40 // w) if h > w else (w * 40 // h, 40))


def test_pass_through_keeps_bytes(tmp_path, images):
    prefix = make_list(tmp_path, images)
    assert run("--pass-through", prefix, images) == 0
    lst = {e.index: e for e in parse_lst((tmp_path / "data.lst").read_text().splitlines())}
    for key, _, img in read_records(prefix):
        assert img == (images / lst[key].path).read_bytes()


def test_exif_orientation_applied_when_reencoding(tmp_path):
    root = tmp_path / "img"
    root.mkdir()
    pixels = np.zeros((30, 60, 3), np.uint8)
    pixels[:, :30] = 255  # left half white
    exif = Image.Exif()
    exif[0x0112] = 6  # stored sideways: display rotated 90° clockwise
    Image.fromarray(pixels).save(root / "a.jpg", quality=95, exif=exif)
    assert im2rec.transcode.jpeg_info((root / "a.jpg").read_bytes()) == (60, 30, 6)
    assert run("--list", tmp_path / "x", root) == 0
    assert run(tmp_path / "x", root) == 0
    (_, _, img), = read_records(tmp_path / "x")  # fmt: skip
    out = decode(img, "L")
    assert out.shape == (60, 30)  # upright: taller than wide
    assert out[:25].mean() > 200 and out[35:].mean() < 50  # white part on top
    assert run("--pass-through", tmp_path / "x", root) == 0
    assert read_records(tmp_path / "x")[0][2] == (root / "a.jpg").read_bytes()


def test_png_inputs_are_resized_like_jpegs(tmp_path):
    """PNGs are decoded by Pillow, then resized and encoded in C (RGBA loses its alpha)."""
    root = tmp_path / "img"
    root.mkdir()
    yy, xx = np.mgrid[0:90, 0:120]
    rgb = np.stack([xx * 2, yy * 2, (xx + yy) % 256], -1).astype(np.uint8)
    Image.fromarray(rgb).save(root / "rgb.png")
    Image.fromarray(np.dstack([rgb, np.full((90, 120), 128, np.uint8)])).save(root / "rgba.png")
    Image.fromarray(rgb[..., 0]).save(root / "grey.png")
    assert run("--list", "--no-shuffle", tmp_path / "x", root) == 0
    assert run("--resize", 60, "--quality", 95, tmp_path / "x", root) == 0
    lst = list(parse_lst((tmp_path / "x.lst").read_text().splitlines()))
    for (_, _, img), entry in zip(read_records(tmp_path / "x"), lst, strict=True):
        got = decode(img)
        assert got.shape == (60, 80, 3), entry.path
        source = Image.open(root / entry.path).convert("RGB")
        want = np.asarray(source.resize((80, 60), Image.Resampling.BILINEAR)).astype(int)
        assert np.abs(got.astype(int) - want).mean() < 3, entry.path


def test_grayscale_and_cmyk_inputs_become_rgb(tmp_path):
    root = tmp_path / "img"
    root.mkdir()
    rng = np.random.default_rng(1)
    gray = rng.integers(0, 255, (40, 50), np.uint8)
    Image.fromarray(gray).save(root / "g.jpg", quality=95)
    Image.fromarray(np.dstack([gray] * 3)).convert("CMYK").save(root / "c.jpg", quality=95)
    assert run("--list", "--no-shuffle", tmp_path / "x", root) == 0
    assert run(tmp_path / "x", root) == 0
    for _, _, img in read_records(tmp_path / "x"):
        im = Image.open(io.BytesIO(img))
        assert im.mode == "RGB" and im.size == (50, 40)
        assert np.abs(decode(img, "L") - gray).mean() < 8


# --- bad files, reports, exit codes --------------------------------------------------


@pytest.fixture
def bad_folder(tmp_path, images) -> Path:
    root = tmp_path / "bad"
    shutil.copytree(images / "class_00", root)
    good = sorted(root.iterdir())[0].read_bytes()
    (root / "empty.jpg").write_bytes(b"")
    (root / "truncated.jpg").write_bytes(good[: len(good) // 2])
    (root / "text.jpg").write_text("this is not an image\n")
    png = io.BytesIO()
    Image.new("RGB", (20, 20)).save(png, format="PNG")
    (root / "cut.png").write_bytes(png.getvalue()[:-20])
    (root / "garbage.jpg").write_bytes(b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8 + b"\xff\xd9")
    return root


BAD = {"empty.jpg", "truncated.jpg", "text.jpg", "cut.png", "garbage.jpg"}


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


def test_max_errors_aborts_and_leaves_nothing(tmp_path, bad_folder):
    prefix = tmp_path / "badlist"
    assert run("--list", "--no-shuffle", prefix, bad_folder) == 0
    assert run("--max-errors", 2, prefix, bad_folder) == im2rec.EXIT_FAILED
    assert not list(tmp_path.glob("badlist.rec*")) and not list(tmp_path.glob("badlist.idx*"))
    assert not list(tmp_path.glob(".*partial"))
    assert json.loads(Path(f"{prefix}.report.json").read_text())["status"] == "aborted"
    assert run("--max-errors", 5, prefix, bad_folder) == im2rec.EXIT_SKIPPED


def test_interrupt_removes_partial_output(tmp_path, images, monkeypatch):
    prefix = make_list(tmp_path, images)
    real = im2rec.make_records
    calls = []

    def interrupted(entries, root, opts):  # a batch of 8: the second one is interrupted
        calls.append(entries)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(entries, root, opts)

    monkeypatch.setattr(im2rec.pack, "make_records", interrupted)
    assert run("--num-thread", 2, prefix, images) == im2rec.EXIT_INTERRUPTED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.lst", "data.report.json"]
    assert json.loads((tmp_path / "data.report.json").read_text())["status"] == "interrupted"


# --- layouts, determinism, storage ---------------------------------------------------


def test_shards_are_balanced_and_complete(tmp_path, images):
    prefix = make_list(tmp_path, images)
    assert run("--shards", 5, "--resize", 32, prefix, images) == 0
    shards = [read_records(tmp_path / f"data-{k:05d}-of-00005") for k in range(5)]
    assert [len(s) for s in shards] == [5, 5, 5, 5, 4]
    keys = [k for s in shards for k, _, _ in s]
    assert sorted(keys) == list(range(24))
    assert not (tmp_path / "data.rec").exists()


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
            "data-00000-of-00002.idx", "data-00000-of-00002.rec",
            "data-00001-of-00002.idx", "data-00001-of-00002.rec",
            "data.lst", "data.report.json",
        ]  # fmt: skip
        with MXIndexedRecordIO(f"{url}-00001-of-00002.idx", f"{url}-00001-of-00002.rec", "r") as r:
            assert len(r.keys) == 12
    finally:
        fs.rm("/im2rec-test", recursive=True)


def test_recio_cli_subcommand(tmp_path, images):
    from recio.cli import main

    assert main(["im2rec", "--list", "--quiet", str(tmp_path / "x"), str(images / "class_01")]) == 0
    assert main(["im2rec", "--quiet", str(tmp_path / "x"), str(images / "class_01")]) == 0
    assert len(read_records(tmp_path / "x")) == 6


def test_jpeg_header_checks():
    with pytest.raises(im2rec.SkipImage, match="truncated"):
        im2rec.transcode.check_image(b"\xff\xd8\xff\xe0\x00\x10JFIF")
    with pytest.raises(im2rec.SkipImage, match="not an image"):
        im2rec.transcode.check_image(b"GIF? no")
    sof = b"\xff\xc0\x00\x11\x08" + struct.pack(">HH", 0, 10) + b"\x03" + b"\x00" * 9
    with pytest.raises(im2rec.SkipImage, match="frame size"):
        im2rec.transcode.jpeg_info(b"\xff\xd8" + sof + b"\xff\xd9")


# --- other readers ---------------------------------------------------------------------


@pytest.mark.dali
def test_dali_reads_the_output(tmp_path, images):
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn, pipeline_def

    prefix = make_list(tmp_path, images)
    assert run("--resize", 40, prefix, images) == 0
    expected = [(float(h.label), decode(img).shape) for _, h, img in read_records(prefix)]

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
