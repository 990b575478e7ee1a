"""recio.decode.jpegcut: a crop's segments decode, under one decoder, to the whole's pixels."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from recio.gpu import JpegDecoder, cut_image
from recio.gpu.device import torchvision_io

from ..conftest import require_native
from .conftest import make_images, with_markers

DECODERS = ["pillow"] + (["torchvision"] if torchvision_io() is not None else [])


def windows(w: int, h: int, rng: np.random.Generator, n: int = 12) -> list[tuple]:
    """Corners, edges, the inside, thin and tiny windows, and random ones."""
    out = [
        (0, 0, w, h),
        (0, 0, 17, 9),
        (w - 20, h - 30, 20, 30),
        (w // 3, 0, 5, h),
        (0, h // 2, w, 3),
    ]
    for _ in range(n):
        x, y = int(rng.integers(0, w - 1)), int(rng.integers(0, h - 1))
        out.append((x, y, int(rng.integers(1, w - x + 1)), int(rng.integers(1, h - y + 1))))
    return out


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("restart", [1, 3, "row"])
def test_cut_decodes_to_the_whole_images_window_bit_for_bit(decoder, restart):
    require_native()
    jpeg = JpegDecoder(torch.device("cpu"), decoder)
    rng = np.random.default_rng(7)
    cuts = 0
    for body in with_markers(make_images(4, seed=1, sides=(90, 300)), restart):
        (whole,) = jpeg.decode([body])
        _, h, w = whole.shape
        for win in windows(w, h, rng):
            piece = cut_image(body, win)
            assert piece is not None
            (got,) = jpeg.decode([piece.data])
            x, y, ww, hh = piece.window
            assert piece.window[2:] == win[2:]
            expect = whole[:, win[1] : win[1] + hh, win[0] : win[0] + ww]
            assert torch.equal(got[:, y : y + hh, x : x + ww], expect), (body[:0], win)
            cuts += piece.cut
            if piece.cut:
                assert len(piece.data) < len(body)
    assert cuts > 20  # most windows leave segments out


def test_unmarked_jpegs_go_whole_and_other_formats_to_the_cpu():
    require_native()
    jpeg, png, cmyk = make_images(3, kinds=("jpeg", "png", "cmyk"))
    piece = cut_image(jpeg, (3, 4, 10, 10))
    assert piece.data is jpeg and piece.window == (3, 4, 10, 10) and not piece.cut
    assert cut_image(png, (0, 0, 5, 5)) is None
    assert cut_image(cmyk, (0, 0, 5, 5)) is None  # CMYK: recio's CPU decoder
    assert cut_image(b"\xff\xd8\xff\xe0garbage", (0, 0, 5, 5)) is None  # no header
    (marked,) = with_markers([jpeg])
    assert cut_image(marked, (3, 4, 10, 10), cut=False).data is marked


def test_a_grey_jpeg_decodes_to_three_equal_channels():
    (grey,) = make_images(1, kinds=("grey",))
    (rgb,) = JpegDecoder(torch.device("cpu"), "pillow").decode([grey])
    assert rgb.shape[0] == 3 and torch.equal(rgb[0], rgb[1]) and torch.equal(rgb[1], rgb[2])
    assert np.array_equal(rgb[0].numpy(), np.asarray(Image.open(io.BytesIO(grey))))
