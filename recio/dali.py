"""DALI stage: recio reads, shards, shuffles and checks the bytes; DALI decodes and augments.

    RecordFile ─▶ Sampler plan ─▶ RecioSource (fn.external_source, batch mode) ─▶
        fn.decoders.image[_slice](device="mixed" | "cpu") ─▶ resize / random_resized_crop ─▶
        fn.crop_mirror_normalize ─▶ DALIImageRecordIter (torch on the GPU, numpy on the CPU)

recio keeps what DALI's ``fn.readers.mxnet`` lacks: any fsspec URL, equal-count sharding,
the global seeded shuffle, exact resume from ``(epoch, step)``, and skip-and-count of bad
records. The source is a picklable function of DALI's ``BatchInfo``, so it also runs in
DALI's parallel external source workers.

NOTE [bad images]: DALI stops the whole pipeline on one image it cannot decode, and its
decoders treat libjpeg *warnings* such as "Premature end of JPEG data" as errors. The source
therefore checks every image before feeding it (see :mod:`recio.jpegcheck`): libjpeg's header
parse (tables, frame, scan headers) plus a walk of the marker structure that needs an
end-of-image marker after the last scan, which is what catches truncation. Bit flips inside
the entropy-coded data decode (to wrong pixels) in both libjpeg and DALI and pass, as they
do in the CPU iterator. ``validate="decode"`` adds a full libjpeg decode at 1/8 scale.

Without a GPU (``nvidia.dali.backend.GetCUDADeviceCount() == 0``) the same graph runs as a
DALI CPU pipeline (``device_id=None``), which is how CI tests it. DALI is imported only here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .augment import CropSpec
from .dali_source import RecioSource
from .decode import STATUS_NAMES
from .iterator import Batch, IterStats
from .params import PlannedIterator, read_plan

log = logging.getLogger("recio")

INSTALL_HINT = "pip install 'recio[dali]' (the nvidia-dali-cuda130 wheel)"


class DeviceUnavailableError(RuntimeError):
    """The GPU was asked for, but DALI sees no CUDA device."""


def _dali():
    try:
        import nvidia.dali as dali
    except ImportError as exc:
        raise ImportError(f"recio.dali needs NVIDIA DALI: {INSTALL_HINT}") from exc
    return dali


def gpu_count() -> int:
    """CUDA devices DALI can use; 0 (never an exception) where there is no driver or GPU."""
    from nvidia.dali import backend

    try:
        return int(backend.GetCUDADeviceCount())
    except Exception:  # noqa: BLE001 - any failure to query the driver means "no GPU"
        return 0


def resolve_device(device: str = "auto") -> str:
    """``"gpu"`` or ``"cpu"``; ``"auto"`` picks the GPU when DALI sees one.

    Raises:
        DeviceUnavailableError: ``device="gpu"`` and no CUDA device is visible; the message
            says what to install and which fallback to use (instead of DALI's raw
            ``dlopen libcuda.so failed`` at pipeline build).
    """
    _dali()
    if device not in ("auto", "gpu", "cpu"):
        raise ValueError(f"device must be 'auto', 'gpu' or 'cpu', not {device!r}")
    if device == "cpu":
        return "cpu"
    if gpu_count() > 0:
        return "gpu"
    if device == "auto":
        return "cpu"
    raise DeviceUnavailableError(
        "recio.dali: device='gpu' but DALI finds no CUDA device "
        "(nvidia.dali.backend.GetCUDADeviceCount() is 0: no NVIDIA driver / libcuda.so, or "
        "CUDA_VISIBLE_DEVICES hides the GPUs). On a GPU machine install the NVIDIA driver and "
        f"{INSTALL_HINT}. Without a GPU use device='cpu' (the same DALI graph on the CPU) or "
        "recio.iterator.ImageRecordIter (recio's native CPU decoder, usually faster there)."
    )


# --- the pipeline --------------------------------------------------------------------------


@dataclass(frozen=True)
class Normalize:
    """``fn.crop_mirror_normalize`` settings: mean/std on the 0..255 scale, layout, dtype."""

    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    dtype: str = "float32"
    layout: str = "NCHW"


def _dali_crop(fn, images, crop: CropSpec, dev: str, seed: int):
    """The resize/crop DALI draws itself (``crop_source="dali"``), before crop_mirror_normalize."""
    if crop.random_resized_crop:
        return fn.random_resized_crop(
            images,
            device=dev,
            size=(crop.out_height, crop.out_width),
            random_area=[crop.min_area, crop.max_area],
            random_aspect_ratio=[crop.min_aspect, crop.max_aspect],
            seed=seed,
        )
    if crop.resize > 0:
        return fn.resize(images, device=dev, resize_shorter=crop.resize)
    return images


def build_pipeline(
    source: RecioSource,
    *,
    batch_size: int,
    device: str = "cpu",
    device_id: int | None = 0,
    num_threads: int = 2,
    prefetch_queue_depth: int = 2,
    seed: int = 0,
    normalize: Normalize = Normalize(),  # noqa: B008 - frozen dataclass, immutable
    channel_order: str = "RGB",
    interpolation: str = "bilinear",
    parallel: bool = False,
    py_num_workers: int = 1,
    **pipeline_kwargs: Any,
):
    """A DALI pipeline fed by ``source``: decode, crop, resize, flip, normalise.

    Args:
        source: the :class:`RecioSource`; its ``crop`` spec gives the output size. With
            ``source.windows`` the windows and flips recio draws (ImageRecordIter's, so a
            resumed run repeats them) go to ``fn.decoders.image_slice`` + ``fn.resize``;
            without, DALI draws them (``fn.random_resized_crop``, ``fn.random.coin_flip``,
            seeded by ``seed``).
        device: ``"gpu"`` (mixed decode, nvJPEG, GPU operators) or ``"cpu"``.
        parallel: run the source in DALI's parallel external source worker processes.
        pipeline_kwargs: passed to the DALI ``Pipeline`` (override anything here).

    Returns:
        The built ``nvidia.dali.Pipeline``; outputs ``(images, labels, meta)``.
    """
    dali = _dali()
    fn, types = dali.fn, dali.types
    crop = source.crop
    if crop is None:
        raise ValueError("the source needs a CropSpec: it gives the output size")
    crop_source = "recio" if source.windows else "dali"
    interp = {"bilinear": types.INTERP_LINEAR, "nearest": types.INTERP_NN}.get(interpolation)
    if interp is None:
        raise ValueError(f"interpolation must be 'bilinear' or 'nearest', not {interpolation!r}")
    output_type = {"RGB": types.RGB, "BGR": types.BGR}[channel_order]
    dtype = {"float32": types.FLOAT, "float16": types.FLOAT16, "uint8": types.UINT8}[
        normalize.dtype
    ]
    gpu = device == "gpu"
    dev, decode_dev = ("gpu", "mixed") if gpu else ("cpu", "cpu")
    h, w = crop.out_height, crop.out_width

    @dali.pipeline_def
    def graph():
        outs = fn.external_source(
            source=source,
            num_outputs=source.num_outputs,
            batch=True,
            batch_info=True,
            parallel=parallel,
            dtype=[types.UINT8, types.FLOAT, types.INT64]
            + ([types.INT32, types.INT32] if crop_source == "recio" else [])
            + ([types.FLOAT] if source.on_error == "replace" else []),
        )
        jpegs, labels, meta = outs[0], outs[1], outs[2]
        if crop_source == "recio":
            windows, flips = outs[3], outs[4]
            anchor = fn.slice(windows, 0, 2, axes=[0])
            shape = fn.slice(windows, 2, 2, axes=[0])
            images = fn.decoders.image_slice(
                jpegs,
                anchor,
                shape,
                device=decode_dev,
                output_type=output_type,
                axis_names="WH",
            )
            images = fn.resize(
                images, device=dev, resize_x=w, resize_y=h, interp_type=interp, antialias=True
            )
            mirror = flips
        else:
            images = fn.decoders.image(jpegs, device=decode_dev, output_type=output_type)
            images = _dali_crop(fn, images, crop, dev, seed)
            mirror = fn.random.coin_flip(seed=seed + 1) if crop.rand_mirror else 0
        if not crop.random_resized_crop and crop_source == "dali":
            crop_args = {"crop": (h, w)}
            if crop.rand_crop:
                crop_args["crop_pos_x"] = fn.random.uniform(range=(0.0, 1.0), seed=seed + 2)
                crop_args["crop_pos_y"] = fn.random.uniform(range=(0.0, 1.0), seed=seed + 3)
        else:
            crop_args = {}
        images = fn.crop_mirror_normalize(
            images,
            device=dev,
            dtype=dtype,
            output_layout="CHW" if normalize.layout == "NCHW" else "HWC",
            mean=list(normalize.mean),
            std=list(normalize.std),
            mirror=mirror,
            **crop_args,
        )
        if source.on_error == "replace":
            keep = outs[-1].gpu() if gpu else outs[-1]
            images = fn.cast(images * keep, dtype=dtype)
        return images, labels, meta

    kwargs: dict[str, Any] = {
        "batch_size": batch_size,
        "num_threads": num_threads,
        "device_id": device_id if gpu else None,
        "seed": seed,
        "prefetch_queue_depth": prefetch_queue_depth,
    }
    if parallel:
        kwargs.update(py_num_workers=py_num_workers, py_start_method="spawn")
    kwargs.update(pipeline_kwargs)
    pipe = graph(**kwargs)
    pipe.build()
    return pipe


# --- the iterator --------------------------------------------------------------------------


class DALIImageRecordIter(PlannedIterator):
    """``ImageRecordIter``'s interface over a DALI pipeline fed by recio.

    Takes the iterator's parameter names where they overlap (``path_imgrec``, ``data_shape``,
    ``batch_size``, ``shuffle``, ``seed``, ``rand_crop``, ``random_resized_crop``,
    ``rand_mirror``, ``resize``, ``mean_*``/``std_*``, ``dtype``, ``layout``, ``part_index``/
    ``num_parts`` (or DALI's ``shard_id``/``num_shards``), ``last_batch``, ``on_error``, ``kv``,
    ``storage_options``, ...), and gives the same record ids per rank and step, and the same
    ``state_dict()``. ``preprocess_threads`` is DALI's ``num_threads``; ``prefetch_buffer`` its
    ``prefetch_queue_depth``.

    Yields :class:`recio.iterator.Batch` whose ``data`` is a torch tensor on the GPU
    (``device="gpu"``; copied out of DALI's buffer, so it stays valid) or a numpy array
    (``device="cpu"``). ``device="auto"`` picks the GPU when DALI sees one.
    ``crop_source="recio"`` (default) crops the windows ImageRecordIter would draw, so
    augmentation repeats exactly after a resume; ``"dali"`` uses DALI's own random operators.
    """

    def __init__(
        self,
        path_imgrec: str,
        data_shape: Sequence[int],
        batch_size: int,
        path_imgidx: str | None = None,
        shuffle: bool = False,
        seed: int = 0,
        rand_crop: bool = False,
        random_resized_crop: bool = False,
        min_random_area: float = 0.08,
        max_random_area: float = 1.0,
        min_aspect_ratio: float = 3 / 4,
        max_aspect_ratio: float = 4 / 3,
        rand_mirror: bool = False,
        resize: int = -1,
        mean_r: float = 0.0,
        mean_g: float = 0.0,
        mean_b: float = 0.0,
        std_r: float = 1.0,
        std_g: float = 1.0,
        std_b: float = 1.0,
        dtype: str = "float32",
        layout: str = "NCHW",
        label_width: int = 1,
        preprocess_threads: int = 2,
        prefetch_buffer: int = 2,
        part_index: int | None = None,
        num_parts: int | None = None,
        round_batch: bool = True,
        *,
        last_batch: str | None = None,
        on_error: str = "skip",
        kv: Any = None,
        storage_options: dict[str, Any] | None = None,
        shuffle_mode: str = "global",
        interpolation: str = "bilinear",
        channel_order: str = "RGB",
        shard_id: int | None = None,
        num_shards: int | None = None,
        device: str = "auto",
        device_id: int = 0,
        crop_source: str = "recio",
        validate: str = "structure",
        parallel: bool = False,
        py_num_workers: int = 1,
    ) -> None:
        self.device = resolve_device(device)  # first: a missing GPU is the clearest error
        if shard_id is not None or num_shards is not None:  # DALI's names for the shard
            part_index = shard_id if part_index is None else part_index
            num_parts = num_shards if num_parts is None else num_parts
        mean, std = (mean_r, mean_g, mean_b), (std_r, std_g, std_b)
        plan = read_plan(
            path_imgrec, data_shape, batch_size, path_imgidx=path_imgidx, shuffle=shuffle,
            seed=seed, rand_crop=rand_crop, random_resized_crop=random_resized_crop,
            min_random_area=min_random_area, max_random_area=max_random_area,
            min_aspect_ratio=min_aspect_ratio, max_aspect_ratio=max_aspect_ratio,
            rand_mirror=rand_mirror, resize=resize, mean=mean, std=std, dtype=dtype,
            layout=layout, label_width=label_width, part_index=part_index,
            num_parts=num_parts, round_batch=round_batch, last_batch=last_batch,
            on_error=on_error, kv=kv, storage_options=storage_options,
            shuffle_mode=shuffle_mode,
        )  # fmt: skip
        self.records, self.sampler, self.crop = plan.records, plan.sampler, plan.crop
        self.batch_size = batch_size
        self.data_shape = plan.data_shape
        self.label_width = label_width
        self.on_error = on_error
        self.validate = validate
        self.seed = seed
        self.part_index, self.num_parts = plan.part_index, plan.num_parts
        if crop_source not in ("recio", "dali"):
            raise ValueError(f"crop_source must be 'recio' or 'dali', not {crop_source!r}")
        self.crop_source = crop_source
        self.stats = IterStats()
        self._pipe_args = {
            "batch_size": batch_size,
            "device": self.device,
            "device_id": device_id,
            "num_threads": preprocess_threads,
            "prefetch_queue_depth": prefetch_buffer,
            "seed": seed,
            "normalize": Normalize(mean, std, dtype, layout),
            "channel_order": channel_order,
            "interpolation": interpolation,
            "parallel": parallel,
            "py_num_workers": py_num_workers,
        }
        self._pipe: Any = None
        self._torch: Any = None

    def source(self, start_epoch: int = 0, start_step: int = 0) -> RecioSource:
        """A source for this iterator's settings that starts at ``(start_epoch, start_step)``."""
        return RecioSource(
            self.records,
            self.sampler,
            label_width=self.label_width,
            on_error=self.on_error,
            validate=self.validate,
            crop=self.crop,
            windows=self.crop_source == "recio",
            seed=self.seed,
            start_epoch=start_epoch,
            start_step=start_step,
        )

    def _build(self) -> None:
        # The pipeline starts where the iterator stands: a resume is a new source start.
        self._pipe = build_pipeline(self.source(self._epoch, self._step), **self._pipe_args)

    def __iter__(self) -> DALIImageRecordIter:
        if self._epoch_done:
            self._epoch += 1
            self._step = 0
            self._epoch_done = False
            if self._pipe is not None:
                self._pipe.reset()  # DALI's next epoch is the source's next epoch
        return self

    def __next__(self) -> Batch:
        if self._epoch_done:
            raise StopIteration
        if self._step >= len(self):
            self._epoch_done = True
            self._drain()
            raise StopIteration
        if self._pipe is None:
            self._build()
        try:
            images, labels, meta = self._pipe.run()
        except StopIteration:  # cannot happen while step < len; keep the pipeline honest
            self._close_pipe()
            raise RuntimeError("recio.dali: the source ended before the epoch did") from None
        except Exception:
            self._close_pipe()  # DALI's pipeline is invalid after an error
            raise
        meta = meta.as_array()
        labels = labels.as_array().reshape(len(meta), self.label_width)
        epoch, step, pad = (int(v) for v in meta[0, 1:4])
        if (epoch, step) != (self._epoch, self._step):
            raise RuntimeError(
                f"recio.dali: got batch {epoch}/{step}, expected {self._epoch}/{self._step}"
            )
        self._count_bad(meta)
        self._step += 1
        label = labels[:, 0] if self.label_width == 1 else labels
        return Batch(self._to_output(images), label, meta[:, 0].copy(), pad, epoch, step)

    next = __next__

    def _to_output(self, images: Any) -> Any:
        if self.device == "cpu":
            return images.as_array()
        if self._torch is None:
            import torch

            self._torch = torch
        # Copy out of DALI's buffer (reused after prefetch_queue_depth runs) on torch's stream.
        return self._torch.from_dlpack(images.as_tensor()).clone()

    def _count_bad(self, meta: np.ndarray) -> None:
        real = len(meta) - int(meta[0, 3])
        bad = np.flatnonzero(meta[:, 4] >= 0)
        self.stats.decoded += real - int(np.count_nonzero(bad < real))
        for j in bad:
            rid, status = int(meta[j, 4]), int(meta[j, 5])
            if rid not in self.stats.bad_records:
                log.warning("recio: bad image, record id %d of %s", rid, self.records.url)
            self.stats.bad_records[rid] = STATUS_NAMES.get(status, "bad image")
            if j < real:
                if self.on_error == "replace":
                    self.stats.replaced += 1
                else:
                    self.stats.skipped += 1

    def _drain(self) -> None:
        # The source raises StopIteration at the end; DALI wants that seen before reset().
        if self._pipe is None:
            return
        try:
            while True:
                self._pipe.run()
        except StopIteration:
            pass

    def reset(self) -> None:
        """Start the next epoch (as ImageRecordIter.reset)."""
        if self._step > 0 or self._epoch_done:
            if not self._epoch_done:
                self._close_pipe()  # mid-epoch: rebuild at the next epoch's start
            self._epoch_done = True
            self.__iter__()

    def _close_pipe(self) -> None:
        self._pipe = None  # DALI frees the pipeline (and its workers) when it is collected

    _restart = _close_pipe

    def close(self) -> None:
        self._close_pipe()
        self.records.close()
