"""One image file → record bytes: the encoder for JPEGs (tests/im2rec/test_encoder.py),
Pillow for PNG & co.; EXIF orientation; pass-through; the output bounds."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from recio import decode, im2rec
from recio.im2rec.transcode import EncodeOptions, encode_image, read_file
from recio.records.format import parse_lst

from ..images import encode
from .conftest import decode_image, make_list, psnr, read_records, reference, run

native_only = pytest.mark.needs_native


def test_im2rec_encode_image_uses_it(encoder):
    data = encode(413, 545, quality=95)
    out = encode_image(data, EncodeOptions(resize=256, quality=90))
    im = Image.open(io.BytesIO(out))
    assert im.size == (256, 337)
    assert psnr(np.asarray(im), reference(data, (256, 337), (0, 0, 413, 545), "RGB")) > 30


def test_read_file_reads_whole_files(tmp_path):
    big = np.random.default_rng(0).bytes(3 << 20)
    (tmp_path / "big").write_bytes(big)
    (tmp_path / "empty").write_bytes(b"")
    assert read_file(str(tmp_path / "big")) == big
    assert read_file(str(tmp_path / "empty")) == b""
    # a file whose size stat does not know (0) is read to its end
    assert read_file("/proc/self/status").startswith(b"Name:")
    with pytest.raises(FileNotFoundError):
        read_file(str(tmp_path / "missing"))


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
    out = decode_image(img, "L")
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
        got = decode_image(img)
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
        assert np.abs(decode_image(img, "L") - gray).mean() < 8


def test_jpeg_header_checks():
    with pytest.raises(im2rec.SkipImage, match="truncated"):
        im2rec.transcode.check_image(b"\xff\xd8\xff\xe0\x00\x10JFIF")
    with pytest.raises(im2rec.SkipImage, match="not an image"):
        im2rec.transcode.check_image(b"GIF? no")
    sof = b"\xff\xc0\x00\x11\x08" + struct.pack(">HH", 0, 10) + b"\x03" + b"\x00" * 9
    with pytest.raises(im2rec.SkipImage, match="frame size"):
        im2rec.transcode.jpeg_info(b"\xff\xd8" + sof + b"\xff\xd9")


def test_jpeg_padded_with_eoi_is_skipped_as_truncated(encoder):
    """im2rec: a JPEG cut short and padded with an EOI marker was re-encoded with grey rows;
    it is skipped as truncated now, as one without the EOI is."""
    good = encode(320, 240)
    sos = good.find(b"\xff\xda")
    padded = good[: (sos + len(good)) // 2] + b"\xff\xd9"
    status, out = encoder.transcode_jpeg([good, padded], np.array([[160, 120]] * 2, np.int32))
    assert status.tolist() == [0, decode.STATUS_TRUNCATED] and out[1] is None
    assert "premature end of data segment" in encoder.last_errors()[1]
    with pytest.raises(im2rec.transcode.SkipImage, match="truncated JPEG"):
        encode_image(padded, EncodeOptions(resize=100))


# A long thin strip: a few KB of PNG whose --resize (shorter side to 64) asks for 82 M pixels.
STRIP_SCRIPT = """
import io, json, sys
from PIL import Image
from recio.im2rec.transcode import EncodeOptions, SkipImage, encode_image

def status_kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])

b = io.BytesIO()
Image.new("RGB", (40000, 2), (10, 200, 60)).save(b, "PNG")
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
except OSError:
    pass
base = status_kib("VmRSS")
try:
    out = encode_image(b.getvalue(), EncodeOptions(encoding=".png", resize=64, quality=1))
    result = f"{len(out)} bytes"
except SkipImage as e:
    result = str(e)
print(json.dumps({"result": result, "grew": (status_kib("VmHWM") - base) << 10}))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmHWM")
def test_resize_of_a_strip_is_bounded_by_max_output_bytes():
    """im2rec --encoding .png --resize 64 of a 40000x2 PNG (a few hundred bytes): 1280000x64
    pixels, 245 MB before encoding (hundreds of MB of peak RSS; a 68 KB strip reached 3.8 GB).
    Now skipped, with the reason, before anything is decoded."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    res = subprocess.run(
        [sys.executable, "-c", STRIP_SCRIPT], capture_output=True, text=True, env=env, timeout=300
    )
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.splitlines()[-1])
    assert "output 1280000x64 from a 40000x2 image is 234 MiB" in got["result"], got
    assert "max_output_bytes" in got["result"]
    assert got["grew"] < 16 << 20, got


@native_only
def test_output_bound_in_the_native_jpeg_path_and_for_larger_sources(tmp_path):
    strip = encode(60000, 4)  # --resize 64: 960000x64, 176 MiB of RGB
    with pytest.raises(im2rec.transcode.SkipImage, match="max_output_bytes"):
        encode_image(strip, EncodeOptions(resize=64))
    kept = encode_image(strip, EncodeOptions(resize=4))  # no larger than its source
    assert Image.open(io.BytesIO(kept)).size == (60000, 4)
    # an output no larger than its source is made, whatever the limit
    big = encode(600, 400)
    opts = EncodeOptions(max_output_bytes=1000)
    assert Image.open(io.BytesIO(encode_image(big, opts))).size == (600, 400)
    with pytest.raises(im2rec.transcode.SkipImage, match="max_output_bytes"):
        encode_image(big, EncodeOptions(resize=500, max_output_bytes=1000))
    png = encode(600, 400, fmt="PNG")
    with pytest.raises(im2rec.transcode.SkipImage, match="output 750x500 from a 600x400"):
        encode_image(png, EncodeOptions(resize=500, max_output_bytes=1000, encoding=".png"))
    with pytest.raises(ValueError, match="max_output_bytes"):
        EncodeOptions(max_output_bytes=0)
