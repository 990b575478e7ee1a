"""The device side of the GPU path: JPEG decode, then crop, resize, flip and normalise in torch.

The JPEG decoder is torchvision's ``decode_jpeg`` on a list of tensors: nvJPEG with
``device="cuda"`` (batched), libjpeg-turbo on the CPU. Where torchvision is not installed a
CPU device decodes with Pillow (libjpeg-turbo too, with the same defaults: islow IDCT, fancy
upsampling), so the same code runs and is tested on any machine.

On CUDA the encoded bytes are staged in pinned host memory (two buffers used in turn, each
reused only once the copy that read it is done), and the decode and the pixel work run on
a stream of the iterator's own: the consumer's stream waits for it with an event, so the
CPU goes on to the next batch's reads and cuts while the device works on this one.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .._install import install_hint

DECODERS = ("auto", "torchvision", "pillow")
INSTALL_HINT = install_hint("gpu")

# recio's interpolation names → torch.nn.functional.interpolate's (antialiased where it
# has the option: a shrink then averages as Pillow's filters, and recio's, do)
_MODES = {"bilinear": ("bilinear", True), "area": ("area", None), "nearest": ("nearest", None)}


def torchvision_io() -> Any | None:
    """``torchvision.io``, or None where torchvision is not installed or does not load."""
    try:
        import torchvision.io as tvio
    except (ImportError, RuntimeError, OSError):
        return None
    return tvio


def resolve_decoder(decoder: str, device: torch.device) -> str:
    """``"torchvision"`` or ``"pillow"``; ``"auto"`` picks torchvision where it loads.

    Raises:
        ImportError: torchvision was asked for (or is needed: a CUDA device) and is missing.
    """
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {DECODERS}, not {decoder!r}")
    if decoder == "pillow":
        return decoder
    if torchvision_io() is not None:
        return "torchvision"
    if decoder == "auto" and device.type == "cpu":
        return "pillow"
    raise ImportError(f"recio.gpu decodes on {device.type} with torchvision: {INSTALL_HINT}")


class _Staging:
    """Pinned host buffers the encoded bytes of a batch are packed into, two used in turn."""

    def __init__(self) -> None:
        self._buffers: list[torch.Tensor | None] = [None, None]
        self._done: list[torch.cuda.Event | None] = [None, None]
        self._turn = 0

    def pack(self, pieces: Sequence[Any]) -> list[torch.Tensor]:
        """Each piece as a 1-D uint8 view of one pinned buffer."""
        k, self._turn = self._turn, 1 - self._turn
        if self._done[k] is not None:
            self._done[k].synchronize()  # the copy that read this buffer last is done
        sizes = [len(p) for p in pieces]
        total = sum(sizes)
        buf = self._buffers[k]
        if buf is None or buf.numel() < total:
            buf = self._buffers[k] = torch.empty(
                max(total, 1 << 20), dtype=torch.uint8
            ).pin_memory()
        views, at = [], 0
        host = buf.numpy()
        for piece, size in zip(pieces, sizes, strict=True):
            host[at : at + size] = np.frombuffer(piece, dtype=np.uint8)
            views.append(buf[at : at + size])
            at += size
        self._done[k] = None
        self._last = k
        return views

    def record(self, stream: torch.cuda.Stream) -> None:
        """The work queued on ``stream`` so far is the last to read the last packed buffer."""
        event = torch.cuda.Event()
        event.record(stream)
        self._done[self._last] = event


class JpegDecoder:
    """Decodes a batch of JPEGs to (3, H, W) uint8 tensors on ``device``.

    Args:
        device: where the pixels end up (``cpu`` or ``cuda[:k]``).
        decoder: ``"torchvision"`` or ``"pillow"`` (see :func:`resolve_decoder`).
    """

    def __init__(self, device: torch.device, decoder: str) -> None:
        self.device = device
        self.name = resolve_decoder(decoder, device)
        self._tvio = torchvision_io() if self.name == "torchvision" else None
        self._staging = _Staging() if device.type == "cuda" else None

    def decode(self, pieces: Sequence[Any]) -> list[torch.Tensor | None]:
        """Each piece's pixels, None where it does not decode."""
        if not pieces:
            return []
        if self._tvio is None:
            return [self._pillow(p) for p in pieces]
        if self._staging is not None:
            tensors = self._staging.pack(pieces)
        else:
            tensors = [torch.from_numpy(np.frombuffer(p, dtype=np.uint8).copy()) for p in pieces]
        rgb = self._tvio.ImageReadMode.RGB
        try:
            out = self._tvio.decode_jpeg(tensors, mode=rgb, device=self.device)
        except RuntimeError:  # one bad image fails the batch call: each alone
            out = [self._one(t, rgb) for t in tensors]
        if self._staging is not None:
            self._staging.record(torch.cuda.current_stream(self.device))
        return list(out)

    def _one(self, tensor: torch.Tensor, mode: Any) -> torch.Tensor | None:
        try:
            return self._tvio.decode_jpeg(tensor, mode=mode, device=self.device)
        except RuntimeError:
            return None

    def _pillow(self, piece: Any) -> torch.Tensor | None:
        from PIL import Image

        try:
            with Image.open(io.BytesIO(piece)) as im:
                rgb = np.array(im.convert("RGB"))
        except (OSError, ValueError, SyntaxError):
            return None
        return torch.from_numpy(rgb).permute(2, 0, 1).to(self.device)


def resize_crops(
    images: Sequence[torch.Tensor],
    windows: Sequence[tuple[int, int, int, int]],
    flips: Sequence[bool],
    out: torch.Tensor,
    interpolation: str = "bilinear",
) -> None:
    """Each image's window resized to ``out``'s (H, W), flipped where asked, into ``out[i]``.

    The pixels stay on the 0..255 scale, rounded to whole values as an 8-bit resample's are
    (the CPU decoder's), so normalising them is the same arithmetic as there.
    """
    mode, antialias = _MODES[interpolation]
    height, width = out.shape[-2:]
    extra = {} if antialias is None else {"antialias": antialias}
    for i, (image, (x, y, w, h), flip) in enumerate(zip(images, windows, flips, strict=True)):
        crop = image[:, y : y + h, x : x + w].unsqueeze(0).float()
        if (h, w) != (height, width):
            crop = F.interpolate(crop, size=(height, width), mode=mode, **extra)
            crop = crop.round_().clamp_(0, 255)
        out[i] = crop[0].flip(-1) if flip else crop[0]


def normalise(pixels: torch.Tensor, mean, std, scale: float, bgr: bool) -> torch.Tensor:
    """``(pixel - mean) / std * scale`` per channel (MXNet's), channels reversed for BGR.

    ``mean``/``std`` are per output channel (``Normalize.channel_mean_std``).
    """
    if bgr:
        pixels = pixels.flip(1)
    m = torch.tensor(mean, dtype=pixels.dtype, device=pixels.device).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=pixels.dtype, device=pixels.device).view(1, 3, 1, 1)
    return (pixels - m) / s * scale
