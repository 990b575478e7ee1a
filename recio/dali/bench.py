"""DALI side by side: recio-fed DALI pipelines against DALI's own ``fn.readers.mxnet``.

Used by ``recio bench`` and ``tools/bench_dali.py``; the same decode + augment graph is fed
by recio (its sampler, with DALI's or recio's crop windows) and by DALI's reader, and each
is timed for the same number of seconds, in alternating rounds.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from ..augment import CropSpec
from ..pipeline.config import Normalize
from ..records.file import RecordFile
from ..records.index import default_idx_path
from ..sampling.sampler import Sampler
from ._device import load_dali, resolve_device
from .pipeline import build_pipeline
from .source import RecioSource


def mxnet_reader_pipeline(rec: str, idx: str, batch_size: int, shape, threads: int, device: str):
    """DALI's own ``fn.readers.mxnet`` → the same graph as the recio-fed ``crop_source='dali'``."""
    dali = load_dali()
    fn, types = dali.fn, dali.types
    gpu = device == "gpu"
    dev, decode_dev = ("gpu", "mixed") if gpu else ("cpu", "cpu")

    @dali.pipeline_def
    def graph():
        jpegs, labels = fn.readers.mxnet(path=rec, index_path=idx, random_shuffle=True, seed=1)
        images = fn.decoders.image(jpegs, device=decode_dev, output_type=types.RGB)
        images = fn.random_resized_crop(images, device=dev, size=shape, seed=1)
        images = fn.crop_mirror_normalize(
            images,
            device=dev,
            dtype=types.FLOAT,
            output_layout="CHW",
            mean=[123.7, 116.3, 103.5],
            std=[58.4, 57.1, 57.4],
            mirror=fn.random.coin_flip(seed=2),
        )
        return images, labels

    pipe = graph(batch_size=batch_size, num_threads=threads, device_id=0 if gpu else None, seed=1)
    pipe.build()
    return pipe


def bench_pipelines(
    rec: str,
    batch_size: int = 64,
    shape: tuple[int, int] = (224, 224),
    threads: int = 2,
    seconds: float = 3.0,
    *,
    rounds: int = 3,
    device: str = "cpu",
    idx: str | None = None,
) -> dict[str, Any]:
    """Images/s of the recio-fed DALI stage and of DALI's ``readers.mxnet``, side by side.

    Both run the same graph (decode → random_resized_crop → crop_mirror_normalize with a
    coin-flip mirror, float32 NCHW); ``recio_windows`` is the recio-fed stage with recio's
    own windows (``image_slice`` + ``resize``). The pipelines are timed in turns, ``rounds``
    times for ``seconds`` each after a warm-up; reported: medians, and the median of the
    per-round ratios (paired, so load shifts on a shared machine cancel).
    """
    device = resolve_device(device)
    idx = idx or default_idx_path(rec)
    h, w = int(shape[0]), int(shape[1])
    norm = Normalize((123.7, 116.3, 103.5), (58.4, 57.1, 57.4))
    records = RecordFile(rec, idx)
    sampler = Sampler(len(records), batch_size, shuffle=True, seed=1)
    crop = CropSpec(h, w, random_resized_crop=True, rand_mirror=True)
    pipes = {}
    for name, windows in (("recio", False), ("recio_windows", True)):
        src = RecioSource(records, sampler, crop=crop, windows=windows, seed=1)
        pipes[name] = build_pipeline(
            _Endless(src),
            batch_size=batch_size,
            device=device,
            num_threads=threads,
            normalize=norm,
            seed=1,
        )
    pipes["dali_mxnet"] = mxnet_reader_pipeline(rec, idx, batch_size, (h, w), threads, device)
    rates: dict[str, list[float]] = {name: [] for name in pipes}
    for pipe in pipes.values():
        for _ in range(3):
            pipe.run()
    for _ in range(rounds):
        for name, pipe in pipes.items():
            start, done = time.perf_counter(), 0
            while time.perf_counter() - start < seconds:
                out = pipe.run()
                if device == "gpu":
                    out[0].as_tensor()  # waits for the GPU work of this batch
                done += batch_size
            rates[name].append(done / (time.perf_counter() - start))
    medians = {name: statistics.median(r) for name, r in rates.items()}
    # Paired per-round ratios: a shared, noisy machine shifts neighbouring rounds alike.
    paired = {
        name: statistics.median(
            a / b for a, b in zip(rates[name], rates["dali_mxnet"], strict=True)
        )
        for name in ("recio", "recio_windows")
    }
    return {
        "device": device,
        "batch_size": batch_size,
        "shape": (h, w),
        "threads": threads,
        "images_per_s": medians,
        "rounds": rates,
        "ratio_recio_vs_dali_mxnet": paired["recio"],
        "ratio_recio_windows_vs_dali_mxnet": paired["recio_windows"],
    }


class _Endless:
    """Wraps a source so that it runs through epochs without StopIteration (benchmarks)."""

    def __init__(self, inner: RecioSource) -> None:
        self.inner = inner
        self.crop, self.windows, self.on_error = inner.crop, inner.windows, inner.on_error
        self.num_outputs = inner.num_outputs
        self._next = 0

    def __call__(self, info: Any) -> tuple:
        steps = self.inner.sampler.steps_in_epoch(0)
        epoch, step = divmod(self._next, steps)
        self._next += 1
        return self.inner.batch(epoch, step)
