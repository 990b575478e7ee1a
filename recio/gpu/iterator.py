"""``recio.gpu.ImageRecordIter``: ImageRecordIter's batches, decoded by torchvision on a device.

    RecioSource (read, shard, check, windows and flips as ImageRecordIter draws them) ─▶
        cut (restart-marked JPEGs to their crops' segments, on the CPU) ─▶
        torchvision.io.decode_jpeg(list, device=) (nvJPEG on CUDA) ─▶
        crop, resize, flip, normalise in torch ─▶ an N×3×H×W tensor on the device

PNG, CMYK and whatever the JPEG decoder refuses go through recio's CPU decoder with the
same window and flip, and land in the same batch; what that decoder cannot read either is
skipped, replaced or raised by ``on_error``, as everywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..dali.source import RecioSource, readable_bytes
from ..decode import DecodeOptions, DecodePool, Status
from ..decode.jpegcut import Piece, cut_batch
from ..pipeline.config import IterConfig
from ..pipeline.positioned import Batch, PositionedIterator
from ..records.checksum import CHECKSUM_MISMATCH
from .device import JpegDecoder, normalise, resize_crops

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "uint8": torch.uint8}


class ImageRecordIter(PositionedIterator):
    """:class:`recio.ImageRecordIter`'s records, order, windows and flips, decoded on ``device``.

    Takes the same keywords as :class:`recio.pipeline.iterator.ImageRecordIter` (or
    ``config=``), and gives the same record ids per rank and step, the same crop windows
    and flips, and the same ``state_dict()`` (a state of either iterator loads in the
    other). Colour, geometry, ``mean_img``, ``seed_aug`` and ``path_imglist`` are refused
    (recio's CPU iterator does them).

    Args:
        device: where the batches are made: ``"cuda"`` (nvJPEG), ``"cuda:k"``, ``"cpu"``.
        decoder: ``"torchvision"``, ``"pillow"`` (CPU only, for machines without
            torchvision) or ``"auto"`` (torchvision where it loads).
        cut: hand the decoder restart-marked JPEGs cut to their crop's segments (NOTE
            [restart cut]); False hands every JPEG whole.
        validate: how bad images are found before decoding (:mod:`recio.dali.source`).

    Yields :class:`~recio.pipeline.positioned.Batch` whose ``data`` is a torch tensor on
    ``device`` (float32 by default, N×3×H×W; ``layout="NHWC"`` gives N×H×W×3) and whose
    ``label`` and ``index`` are numpy arrays.
    """

    def __init__(
        self,
        path_imgrec: str | None = None,
        data_shape: tuple[int, int, int] | None = None,
        batch_size: int | None = None,
        *,
        config: IterConfig | None = None,
        device: str | torch.device = "cuda",
        decoder: str = "auto",
        cut: bool = True,
        validate: str = "structure",
        **keywords: Any,
    ) -> None:
        self.device = torch.device(device)
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda[:k]', not {device!r}")
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(
                "recio.gpu: device='cuda' but torch sees no CUDA device; use device='cpu' "
                "or recio.ImageRecordIter (recio's CPU decoder) on this machine"
            )
        self.jpeg = JpegDecoder(self.device, decoder)  # a missing torchvision fails first
        super().__init__(IterConfig.given(config, path_imgrec, data_shape, batch_size, **keywords))
        self.cut = cut
        self.validate = validate
        self._source: RecioSource | None = None
        try:
            self._check_config()
        except BaseException:
            self.records.close()
            raise
        self._cpu: DecodePool | None = None
        self._stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None

    def _check_config(self) -> None:
        config = self.config
        unsupported = config.dali_unsupported()
        if unsupported:
            raise ValueError(
                f"not supported by recio.gpu: {', '.join(unsupported)}: use "
                "recio.ImageRecordIter (the CPU decoder) for them"
            )
        self.norm = config.normalize
        self.dtype = _DTYPES[self.norm.dtype]
        self.decode_options = DecodeOptions(
            interpolation=config.interpolation,
            mean=self.norm.channel_mean_std[0] if self.norm.enabled else None,
            std=self.norm.channel_mean_std[1] if self.norm.enabled else None,
            layout="NCHW",
            channel_order=self.norm.channel_order,
            scale=self.norm.scale,
        )
        self.source()  # a bad validate value fails here

    def source(self) -> RecioSource:
        """The source of this iterator's batches (its reads, checks, windows and flips)."""
        if self._source is None:
            self._source = RecioSource(
                self.records,
                self.sampler,
                label_width=self.label_width,
                on_error=self.config.on_error,
                validate=self.validate,
                crop=self.config.crop,
                windows=True,
                seed=self.seed,
                label_maps=() if self.mix is None else self.mix.label_maps,
            )
        return self._source

    # --- PositionedIterator ------------------------------------------------------------

    def _produce(self) -> Batch:
        while True:
            out = self.source().batch(self.epoch, self.step)
            images, labels, meta, windows, flips = out[:5]
            data, status, reasons = self._decode(images, windows, flips)
            # the maps lost bytes under the decode: the batch again (NOTE [dali map check])
            if readable_bytes(self.records, meta[:, 8]) >= meta[0, 7]:
                break
            self._source = None
        if self.config.on_error == "replace":
            keep = torch.from_numpy(out[5]).to(self.device)
            data *= keep.view(-1, 1, 1, 1).to(data.dtype)
        epoch, step, pad = (int(v) for v in meta[0, 1:4])
        ids = meta[:, 0].copy()
        bad = meta[:, 4] >= 0
        source_status = np.where(bad, meta[:, 5], 0).astype(np.int32)
        source_reasons = [
            CHECKSUM_MISMATCH if m else None for m in (bad & (meta[:, 6] == 1)).tolist()
        ]
        labels = np.asarray(labels, dtype=np.float32).reshape(len(meta), self.label_width)
        if self.config.on_error == "skip" and bad.any():
            self._same_pixels(data, ids, bad)
        if status.any():
            self._apply_policy(data, labels, ids, status, reasons, meta)
            source_status = np.where(status != 0, status, source_status)
            source_reasons = [r or s for r, s in zip(reasons, source_reasons, strict=True)]
        self.stats.count_batch(
            source_status,
            np.where(bad, meta[:, 4], ids),
            source_reasons,
            pad=pad,
            on_error=self.config.on_error,
            url=self.records.url,
        )
        if self.norm.layout == "NHWC":
            data = data.permute(0, 2, 3, 1).contiguous()
        label = labels[:, 0] if self.label_width == 1 else labels
        return Batch(data, label, ids, pad, epoch, step)

    def _decode(
        self, images: list, windows: np.ndarray, flips: np.ndarray
    ) -> tuple[torch.Tensor, np.ndarray, list[str | None]]:
        """The batch's pixels on the device, and a status and reason per slot (0: decoded)."""
        crop = self.config.crop
        n = len(images)
        pieces = cut_batch(images, windows, cut=self.cut)
        on_device = [j for j, p in enumerate(pieces) if p is not None]
        if self._stream is None:
            data, failed = self._device_part(pieces, on_device, flips, n, crop)
        else:
            with torch.cuda.stream(self._stream):
                data, failed = self._device_part(pieces, on_device, flips, n, crop)
            torch.cuda.current_stream(self.device).wait_stream(self._stream)
            data.record_stream(torch.cuda.current_stream(self.device))
        status = np.zeros(n, dtype=np.int32)
        reasons: list[str | None] = [None] * n
        on_cpu = [j for j, p in enumerate(pieces) if p is None] + failed
        if on_cpu:
            self._cpu_part(images, windows, flips, sorted(on_cpu), data, status, reasons)
        return data, status, reasons

    def _device_part(self, pieces: list[Piece | None], slots, flips, n, crop):
        """Decode the JPEG decoder's slots; the float batch and the slots it could not decode."""
        data = torch.zeros((n, 3, crop.out_height, crop.out_width), device=self.device)
        decoded = self.jpeg.decode([pieces[j].data for j in slots])
        good = [k for k, image in enumerate(decoded) if image is not None]
        failed = [slots[k] for k, image in enumerate(decoded) if image is None]
        rows = [slots[k] for k in good]
        if rows:
            part = torch.empty((len(rows), 3, crop.out_height, crop.out_width), device=self.device)
            resize_crops(
                [decoded[k] for k in good],
                [pieces[j].window for j in rows],
                [bool(flips[j]) for j in rows],
                part,
                self.config.interpolation,
            )
            if self.norm.enabled or self.norm.channel_order == "BGR":
                mean, std = self.norm.channel_mean_std
                part = normalise(part, mean, std, self.norm.scale, self.norm.channel_order == "BGR")
            data[torch.tensor(rows, device=self.device)] = part
        return data.to(self.dtype), failed

    def _cpu_part(self, images, windows, flips, slots, data, status, reasons) -> None:
        """Decode the slots the JPEG decoder does not take with recio's CPU decoder."""
        crop = self.config.crop
        if self._cpu is None:
            self._cpu = DecodePool(1)
        host = np.zeros((len(slots), 3, crop.out_height, crop.out_width), dtype=np.float32)
        got = self._cpu.decode_batch(
            [images[j] for j in slots],
            host,
            crops=windows[slots],
            flips=flips[slots],
            options=self.decode_options,
        )
        errors = self._cpu.last_errors()
        for k, j in enumerate(slots):
            status[j] = got[k]
            reasons[j] = errors[k] or (Status(int(got[k])).text if got[k] else None)
        data[torch.tensor(slots, device=self.device)] = torch.from_numpy(host).to(
            self.device, self.dtype
        )

    @staticmethod
    def _same_pixels(data: torch.Tensor, ids: np.ndarray, bad: np.ndarray) -> None:
        """Give each skipped slot the pixels of the good slot the source filled it from.

        As in the CPU iterator; the source drew the slot's window with the bad record's key.
        """
        good = np.flatnonzero(~bad)
        for j in np.flatnonzero(bad):
            same = good[ids[good] == ids[j]]
            if len(same):
                data[j] = data[int(same[0])]

    def _apply_policy(self, data, labels, ids, status, reasons, meta) -> None:
        """on_error for the slots no decoder could read (NOTE [bad images])."""
        fill = self.policy.fill_from(
            status,
            reasons,
            lambda j: self.records.describe(int(meta[j, 8]), int(ids[j])),
        )
        bad = np.flatnonzero(status)
        if fill is None or fill[0] < 0:  # replace, or no good image in the batch: blank
            data[torch.tensor(bad, device=self.device)] = 0
            return
        for j in bad:
            k = int(fill[j])
            data[j], labels[j], ids[j] = data[k], labels[k], ids[k]

    def _sampler_changed(self) -> None:
        self._source = None  # it plans with the sampler it was made with

    def _restart(self) -> None:
        pass  # nothing runs ahead of the position

    def close(self) -> None:
        """Close the records and the CPU decoder."""
        self._closed = True
        if self._cpu is not None:
            self._cpu.close()
            self._cpu = None
        self.records.close()
