"""The DALI graph recio feeds: decode, crop, resize, flip, normalise.

RecioSource (fn.external_source, batch mode) ─▶ fn.decoders.image[_slice](device=
    "mixed" | "cpu") ─▶ resize / random_resized_crop ─▶ fn.crop_mirror_normalize
"""

from __future__ import annotations

from typing import Any

from ..augment import CropSpec
from ..pipeline.config import Normalize
from ._device import load_dali
from .source import RecioSource


def dali_crop(fn, images, crop: CropSpec, dev: str, seed: int):
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
        batch_size: samples per batch, as the source's sampler plans them.
        device: ``"gpu"`` (mixed decode, nvJPEG, GPU operators) or ``"cpu"``.
        device_id: the GPU with ``device="gpu"``; not used on the CPU.
        num_threads: DALI's CPU worker threads.
        prefetch_queue_depth: batches DALI prepares ahead of the one consumed.
        seed: the pipeline's seed, and DALI's crop and flip draws without ``source.windows``.
        normalize: mean/std, dtype, layout and channel order of the output images.
        interpolation: ``"bilinear"`` or ``"nearest"`` (a ValueError for anything else).
        parallel: run the source in DALI's parallel external source worker processes.
        py_num_workers: how many of those worker processes, with ``parallel``.
        pipeline_kwargs: passed to the DALI ``Pipeline`` (override anything here).

    Returns:
        The built ``nvidia.dali.Pipeline``; outputs ``(images, labels, meta)``.
    """
    dali = load_dali()
    fn, types = dali.fn, dali.types
    crop = source.crop
    if crop is None:
        raise ValueError("the source needs a CropSpec: it gives the output size")
    crop_source = "recio" if source.windows else "dali"
    interp = {"bilinear": types.INTERP_LINEAR, "nearest": types.INTERP_NN}.get(interpolation)
    if interp is None:
        raise ValueError(f"interpolation must be 'bilinear' or 'nearest', not {interpolation!r}")
    output_type = {"RGB": types.RGB, "BGR": types.BGR}[normalize.channel_order]
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
            images = dali_crop(fn, images, crop, dev, seed)
            mirror = fn.random.coin_flip(seed=seed + 1) if crop.rand_mirror else 0
            if crop.mirror:  # MXNet's mirror: every image
                mirror = 1
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
            mean=list(normalize.channel_mean_std[0]),
            std=list(normalize.channel_mean_std[1]),
            scale=normalize.scale,
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
