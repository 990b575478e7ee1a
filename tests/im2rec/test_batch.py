"""im2rec's C batches (NOTE [im2rec in C]): the records they frame are make_records' bytes,
and what they cannot make goes back to the Python path unchanged."""

from __future__ import annotations

import io
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from recio.im2rec import batches, transcode
from recio.im2rec.pack import pack_list
from recio.im2rec.transcode import EncodeOptions, make_batch, make_records
from recio.records.checksum import _walk_end, crc32c
from recio.records.format import MAGIC, ListEntry, encode_record
from recio.records.recordio import MXIndexedRecordIO

from .conftest import BAD

pytestmark = pytest.mark.skipif(
    not transcode.native_available(), reason="the C batches need the native extension"
)

# the float32 whose bits are RecordIO's magic: a label that puts the magic in the IRHeader
MAGIC_LABEL = struct.unpack("<f", struct.pack("<I", MAGIC))[0]


def _photo(width: int, height: int, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    rgb = np.stack([xx * 3, yy * 2, (xx + yy) % 256], -1) + rng.integers(0, 40, (height, width, 3))
    return Image.fromarray(rgb.clip(0, 255).astype(np.uint8))


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, images) -> tuple[Path, list[str], set[str]]:
    """A folder of files C makes and files it leaves to Python: (root, paths, C's paths)."""
    root = tmp_path_factory.mktemp("mixed")
    plain = []
    for i, src in enumerate(sorted(images.rglob("*.jpg"))[:6]):
        shutil.copy(src, root / f"plain{i}.jpg")
        plain.append(f"plain{i}.jpg")
    _photo(70, 40, 1).save(root / "progressive.jpg", quality=90, progressive=True)
    _photo(37, 53, 2).convert("L").save(root / "grey.jpg", quality=90)
    _photo(50, 50, 3).convert("CMYK").save(root / "cmyk.jpg", quality=90)
    upright, turned = Image.Exif(), Image.Exif()
    upright[0x0112], turned[0x0112] = 1, 6
    _photo(60, 30, 4).save(root / "exif1.jpg", quality=90, exif=upright)
    _photo(60, 30, 5).save(root / "exif6.jpg", quality=90, exif=turned)
    _photo(40, 30, 6).save(root / "a.png")
    (root / "folder.jpg").mkdir()
    good = (root / "plain0.jpg").read_bytes()
    (root / "empty.jpg").write_bytes(b"")
    (root / "truncated.jpg").write_bytes(good[: len(good) // 2])
    (root / "text.jpg").write_text("this is not an image\n")
    (root / "garbage.jpg").write_bytes(b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8 + b"\xff\xd9")
    png = io.BytesIO()
    Image.new("RGB", (20, 20)).save(png, format="PNG")
    (root / "cut.png").write_bytes(png.getvalue()[:-20])
    names = sorted(p.name for p in root.iterdir()) + ["missing.jpg"]
    in_c = {*plain, "progressive.jpg", "grey.jpg", "cmyk.jpg", "exif1.jpg"}
    return root, names, in_c


def _sidecar_crc(framed: bytes) -> int:
    """The checksum the sidecar keeps of a record's frames (to its last frame's data)."""
    return crc32c(framed[: _walk_end(memoryview(framed), 0)])


def _entries(paths: list[str], labels=lambda i: (float(i % 3),)) -> list[ListEntry]:
    return [ListEntry(i, labels(i), p) for i, p in enumerate(paths)]


def _check_batch(batch, want, entries) -> set[str]:
    """Each entry's record is ``want``'s (framed, with its checksum); the paths C made."""
    frames = memoryview(batch.frames)
    pos, in_c = 0, set()
    for entry, other, n, crc, (payload, reason) in zip(
        entries, batch.others, batch.lengths, batch.crcs, want, strict=True
    ):
        if other is not None:
            assert n == 0 and other == (payload, reason), entry.path
            continue
        assert payload is not None, f"{entry.path}: C made what Python skips ({reason})"
        framed = encode_record(payload)
        assert bytes(frames[pos : pos + n]) == framed, entry.path
        assert crc == _sidecar_crc(framed), entry.path
        pos += n
        in_c.add(entry.path)
    assert pos == len(batch.frames)
    return in_c


@pytest.mark.parametrize(
    "opts",
    [
        EncodeOptions(),
        EncodeOptions(resize=24, quality=80),
        EncodeOptions(resize=32, center_crop=True),
        EncodeOptions(color=0),
        EncodeOptions(color=-1, resize=20),
        EncodeOptions(resize=4000, max_output_bytes=1 << 20),  # over the limit: Python's
    ],
    ids=["default", "resize", "center-crop", "grey", "as-is", "over-limit"],
)
def test_batch_makes_make_records_bytes_and_leaves_the_rest_to_python(mixed, opts):
    root, names, c_paths = mixed
    entries = _entries(names)
    batch = make_batch(entries, str(root), opts)
    in_c = _check_batch(batch, make_records(entries, str(root), opts), entries)
    assert in_c == (set() if opts.max_output_bytes == 1 << 20 else c_paths)
    skipped = {e.path for e, o in zip(entries, batch.others, strict=True) if o and o[0] is None}
    assert BAD | {"folder.jpg", "missing.jpg"} <= skipped


def test_labels_that_hold_the_magic_split_the_record_as_dmlc_does(mixed):
    root, names, c_paths = mixed
    paths = sorted(c_paths)
    for labels, pack_label, frames in [
        (lambda i: (MAGIC_LABEL,), False, 2),  # the magic at offset 4: two frames
        (lambda i: (MAGIC_LABEL, MAGIC_LABEL, 1.0, MAGIC_LABEL), True, 4),  # 24, 28, 36
    ]:
        entries = _entries(paths, labels)
        opts = EncodeOptions(resize=20, pack_label=pack_label)
        batch = make_batch(entries, str(root), opts)
        assert all(o is None for o in batch.others)
        _check_batch(batch, make_records(entries, str(root), opts), entries)
        # each frame header holds one magic, and none is left in the data
        assert batch.frames.count(struct.pack("<I", MAGIC)) == frames * len(entries)


def test_a_path_with_a_nul_fails_as_in_python(mixed):
    root, _, _ = mixed
    entries = [ListEntry(0, (0.0,), "plain0.jpg"), ListEntry(1, (0.0,), "pla\0in1.jpg")]
    with pytest.raises(ValueError, match="null"):
        make_records(entries, str(root), EncodeOptions())
    with pytest.raises(ValueError, match="null"):
        make_batch(entries, str(root), EncodeOptions())


@pytest.mark.parametrize("shards", [1, 3])
def test_pack_list_writes_the_bytes_of_the_python_path(tmp_path, mixed, monkeypatch, shards):
    root, names, _ = mixed
    lst = tmp_path / "x.lst"
    lst.write_text("".join(f"{i}\t{i % 4}\t{p}\n" for i, p in enumerate(names * 3)))
    opts = EncodeOptions(resize=24)
    outputs = {}
    for way in ("c", "python"):
        if way == "python":
            monkeypatch.setattr(transcode, "native_batches", lambda opts: False)
        report = pack_list(
            str(lst), str(root), opts, out_stem=str(tmp_path / way), num_thread=2,
            pool="thread", shards=shards,
        )  # fmt: skip
        files = [Path(p) for p in report.outputs]
        files += [f.with_suffix(".crc") for f in files if f.suffix == ".idx"]
        outputs[way] = {f.name.removeprefix(way): f.read_bytes() for f in files}
        outputs[way + " skipped"] = report.skipped
    assert outputs["c"] == outputs["python"]
    assert outputs["c skipped"] == outputs["python skipped"]
    assert len(outputs["c skipped"]) == 3 * (len(BAD) + 2)


def test_write_framed_writes_what_write_idx_writes(tmp_path):
    payloads = [b"a" * 13, struct.pack("<I", MAGIC) * 3 + b"xy", b"", b"bcd" * 100]
    for way in ("idx", "framed"):
        with MXIndexedRecordIO(f"{tmp_path}/{way}.idx", f"{tmp_path}/{way}.rec", "w") as w:
            if way == "idx":
                for key, p in enumerate(payloads):
                    w.write_idx(key * 7, p)
                continue
            frames = [encode_record(p) for p in payloads]
            crcs = [_sidecar_crc(f) for f in frames]
            w.write_framed([0, 7], b"".join(frames[:2]), [len(f) for f in frames[:2]], crcs[:2])
            w.write_framed([14, 21], b"".join(frames[2:]), [len(f) for f in frames[2:]], crcs[2:])
            with pytest.raises(ValueError, match="2 keys, 2 lengths summing to 3"):
                w.write_framed([1, 2], b"abcd", [1, 2], [0, 0])
    for ext in ("rec", "idx", "crc"):
        assert (tmp_path / f"framed.{ext}").read_bytes() == (tmp_path / f"idx.{ext}").read_bytes()


def test_native_batches_are_larger_and_share_a_pool_of_num_thread(monkeypatch):
    entries = _entries([f"{i}.jpg" for i in range(40)])
    seen = []

    def make(chunk, root, opts, threads=None):
        seen.append((len(chunk), threads))
        return [(None, "x")] * len(chunk)

    list(batches.batch_stream(entries, "r", EncodeOptions(), 1, "thread", make))
    assert seen == [(batches._BATCH, None)] * 5
    monkeypatch.setattr(batches, "make_batch", make)
    callers = []
    real_pool = batches._make_pool
    monkeypatch.setattr(batches, "_make_pool", lambda k, n: callers.append(n) or real_pool(k, n))
    cases = [(2, "thread", 2), (3, "thread", 3), (1, "process", 1), (1, "thread", 1)]
    for num_thread, kind, threads in cases:
        seen.clear()
        list(batches.batch_stream(entries, "r", EncodeOptions(), num_thread, kind, make))
        assert (
            seen[0] == (batches._NATIVE_BATCH, threads) and batches._NATIVE_BATCH > batches._BATCH
        )
    # NOTE [batch callers]: two Python threads feed each native one
    assert callers == [4, 6, 2] and batches._CALLERS_PER_THREAD == 2
