"""``recio optimize``: a .rec rewritten with every JPEG losslessly restart-marked.

What must hold: each JPEG decodes to its source's pixels and carries restart markers; every
record keeps its key, IRHeader, labels and place; non-JPEG records and damaged JPEGs are
copied byte for byte; shards keep their names, InsightFace files their index records; a run
that fails or is interrupted leaves the destination as it was.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from recio.cli.main import main
from recio.errors import ChecksumError
from recio.im2rec import optimize as optimize_module
from recio.im2rec.optimize import optimize
from recio.records.checksum import sidecar_path
from recio.records.file import RecordFile
from recio.records.format import IRHeader, unpack
from recio.records.recordio import MXIndexedRecordIO, pack

from ..conftest import require_native
from ..faces import write_faces
from ..images import encode

pytestmark = pytest.mark.usefixtures("native")


@pytest.fixture(scope="module")
def native() -> None:
    require_native()


def records(rec: Path | str) -> list[tuple[int, bytes]]:
    """(key, payload) of every record, in index order."""
    with RecordFile(str(rec), verify_checksums=False) as f:
        return [(int(k), bytes(f.read(i))) for i, k in enumerate(f.keys)]


def pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)))


def has_restart_markers(jpeg: bytes) -> bool:
    return b"\xff\xdd\x00\x04" in jpeg and any(bytes([0xFF, 0xD0 + k]) in jpeg for k in range(8))


def mixed_payloads() -> list[tuple[int, bytes]]:
    """Keys out of order; JPEGs of every sampling, progressive, grey; a PNG, a label-only
    record, a multi-label header, a JPEG cut short."""
    jpeg = encode(57, 41, seed=1)
    out = [
        (7, pack(IRHeader(0, 1.0, 7, 0), jpeg)),
        (3, pack(IRHeader(0, 2.0, 3, 0), encode(33, 65, seed=2, subsampling=0))),
        (11, pack(IRHeader(0, [1.0, 2.5, 3.0], 11, 0), encode(40, 30, seed=3, subsampling=1))),
        (12, pack(IRHeader(0, 0.0, 12, 0), encode(50, 44, seed=4, progressive=True))),
        (13, pack(IRHeader(0, 4.0, 13, 0), encode(29, 31, mode="L", seed=5))),
        (14, pack(IRHeader(0, 5.0, 14, 0), encode(20, 20, fmt="PNG", seed=6))),
        (15, pack(IRHeader(0, 6.0, 15, 0), b"")),
        (16, pack(IRHeader(0, 7.0, 16, 0), jpeg[: len(jpeg) // 2])),
    ]
    return out + [(100 + i, pack(IRHeader(0, i, 100 + i, 0), encode(48, 48, seed=10 + i)))
                  for i in range(70)]  # fmt: skip


def write(rec: Path, payloads, checksums: bool = True) -> None:
    with MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "w", checksums=checksums) as w:
        for key, payload in payloads:
            w.write_idx(key, payload)


def check_optimized(src: list[tuple[int, bytes]], dst: list[tuple[int, bytes]]) -> int:
    """Asserts ``dst`` is ``src`` with its clean JPEGs transcoded; how many were."""
    assert [k for k, _ in dst] == [k for k, _ in src]
    transcoded = 0
    for (_, a), (_, b) in zip(src, dst, strict=True):
        ha, ia = unpack(a)
        hb, ib = unpack(b)
        assert a[: len(a) - len(ia)] == b[: len(b) - len(ib)]  # IRHeader and labels
        assert ha.id == hb.id and np.array_equal(ha.label, hb.label)
        if ia != ib:
            assert has_restart_markers(ib) and np.array_equal(pixels(ia), pixels(ib))
            transcoded += 1
    return transcoded


def test_a_file_is_rewritten_losslessly(tmp_path) -> None:
    src = tmp_path / "src.rec"
    payloads = mixed_payloads()
    write(src, payloads)
    report = optimize(str(src), str(tmp_path / "out.rec"), restart=2)
    out = records(tmp_path / "out.rec")
    assert check_optimized(payloads, out) == len(payloads) - 3  # all but PNG, empty, cut
    by_key = dict(out)
    for key in (14, 15, 16):  # the PNG, the label-only record, the cut JPEG: as they were
        assert by_key[key] == dict(payloads)[key]
    assert report.status == "complete" and report.records == len(payloads)
    assert report.transcoded == len(payloads) - 3 and report.other == 2
    assert [k["key"] for k in report.kept] == [16] and "JPEG" in report.kept[0]["reason"]
    # the new checksum sidecar matches the new file
    with RecordFile(str(tmp_path / "out.rec"), verify_checksums=True) as f:
        assert len(f.read_many(list(range(len(f))))) == len(payloads)


def test_no_sidecar_in_none_out(tmp_path) -> None:
    src = tmp_path / "src.rec"
    write(src, mixed_payloads()[:5], checksums=False)
    optimize(str(src), str(tmp_path / "out") + "/", restart="row")
    assert (tmp_path / "out" / "src.rec").exists() and (tmp_path / "out" / "src.idx").exists()
    assert not os.path.exists(sidecar_path(str(tmp_path / "out" / "src.rec")))


def test_shards_keep_their_names_and_records(tmp_path) -> None:
    payloads = mixed_payloads()
    names = [f"part-{k:05d}-of-00003.rec" for k in range(3)]
    for k, name in enumerate(names):
        write(tmp_path / name, payloads[k::3])
    report = optimize(str(tmp_path / "part-*-of-00003.rec"), str(tmp_path / "opt"))
    assert report.outputs == [str(tmp_path / "opt" / n) for n in names]
    for k, name in enumerate(names):
        assert check_optimized(payloads[k::3], records(tmp_path / "opt" / name)) > 0


def test_an_insightface_file_keeps_its_index_records(tmp_path) -> None:
    faces = write_faces(tmp_path, (3, 1, 4, 2))
    src = records(faces.rec)
    optimize(faces.rec, str(tmp_path / "opt.rec"))
    out = records(tmp_path / "opt.rec")
    assert check_optimized(src, out) == faces.num_images
    images = {k for k, _ in src if 1 <= k <= faces.num_images}
    assert [(k, p) for k, p in out if k not in images] == [
        (k, p) for k, p in src if k not in images
    ]  # the header record (key 0) and the identity records, byte for byte
    with RecordFile(str(tmp_path / "opt.rec")) as f:
        assert f.detect_layout().describe() == RecordFile(faces.rec).detect_layout().describe()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_an_interrupted_run_leaves_the_destination_as_it_was(tmp_path, monkeypatch) -> None:
    src = tmp_path / "src.rec"
    write(src, mixed_payloads())
    dst = tmp_path / "dst"
    dst.mkdir()
    write(dst / "src.rec", mixed_payloads()[:3])  # an earlier output
    before = snapshot(dst)
    real, calls = optimize_module._write, []

    def interrupted(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(*args)

    monkeypatch.setattr(optimize_module, "_write", interrupted)
    report = optimize_module.OptimizeReport([], [])
    with pytest.raises(KeyboardInterrupt):
        optimize(str(src), str(dst) + "/", report=report)
    assert report.status == "interrupted" and report.records == 64
    assert snapshot(dst) == before  # no partial file left beside it either


def test_a_damaged_source_fails_and_publishes_nothing(tmp_path) -> None:
    src = tmp_path / "src.rec"
    payloads = mixed_payloads()
    write(src, payloads)
    data = bytearray(src.read_bytes())
    data[len(data) // 2] ^= 0x40  # a flipped bit the sidecar catches
    src.write_bytes(bytes(data))
    with pytest.raises(ChecksumError):
        optimize(str(src), str(tmp_path / "out.rec"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.crc", "src.idx", "src.rec"]


def test_the_command_line(tmp_path, capsys) -> None:
    src = tmp_path / "src.rec"
    write(src, mixed_payloads()[:10])
    report = tmp_path / "report.json"
    argv = ["optimize", str(src), str(tmp_path / "o.rec"), "--quiet", "--report", str(report)]
    assert main([*argv, "--restart-interval", "4", "--num-thread", "1"]) == 0
    data = json.loads(report.read_text())
    assert data["status"] == "complete" and data["transcoded"] == 7 and data["restart"] == 4
    with pytest.raises(SystemExit) as exc:  # argparse's usage error
        main(["optimize", str(src), str(tmp_path / "o.rec"), "--restart-interval", "0"])
    assert exc.value.code == 2
    assert main(["optimize", str(tmp_path / "missing.rec"), str(tmp_path / "x.rec")]) == 2
    assert "missing.rec" in capsys.readouterr().err
    assert main(["optimize", str(src), str(tmp_path / "not-a-rec")]) == 2


def test_fsspec_urls_in_and_out(tmp_path) -> None:
    fsspec = pytest.importorskip("fsspec")
    payloads = mixed_payloads()[:6]
    write(tmp_path / "src.rec", payloads)
    fs = fsspec.filesystem("memory")
    for ext in ("rec", "idx", "crc"):
        fs.pipe(f"/optimize-test/src.{ext}", (tmp_path / f"src.{ext}").read_bytes())
    optimize("memory://optimize-test/src.rec", "memory://optimize-test/out/")
    local = tmp_path / "back.rec"
    for ext in ("rec", "idx", "crc"):
        local.with_suffix(f".{ext}").write_bytes(fs.cat(f"/optimize-test/out/src.{ext}"))
    assert check_optimized(payloads, records(local)) == 5
    fs.rm("/optimize-test", recursive=True)


def im2rec_jpegs(tmp_path: Path, root: Path, name: str, *options: object) -> dict[str, bytes]:
    """``recio im2rec`` of ``root`` with ``options``: {relative path: the stored image}."""
    from .conftest import make_list, read_records, run

    prefix = make_list(tmp_path, root, name)
    assert run(*options, "--num-thread", 2, prefix, root) == 0
    paths = [
        line.split("\t")[-1].strip() for line in Path(f"{prefix}.lst").read_text().splitlines()
    ]
    return {p: img for p, (_, _, img) in zip(paths, read_records(prefix), strict=True)}


def test_im2rec_writes_restart_markers_when_it_encodes(tmp_path, images) -> None:
    default = im2rec_jpegs(tmp_path, images, "default", "--resize", 40)
    assert all(has_restart_markers(img) for img in default.values())
    none = im2rec_jpegs(tmp_path, images, "none", "--resize", 40, "--restart-interval", 0)
    assert not any(b"\xff\xdd" in img for img in none.values())
    for path, img in none.items():  # the markers change nothing else
        assert np.array_equal(pixels(img), pixels(default[path]))


def test_im2rec_pass_through_adds_them_losslessly_when_asked(tmp_path, images) -> None:
    kept = im2rec_jpegs(tmp_path, images, "kept", "--pass-through")
    assert all(img == (images / p).read_bytes() for p, img in kept.items())
    marked = im2rec_jpegs(tmp_path, images, "marked", "--pass-through", "--restart-interval", "row")
    for path, img in marked.items():
        assert has_restart_markers(img) and img != kept[path]
        assert np.array_equal(pixels(img), pixels(kept[path]))
