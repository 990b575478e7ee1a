"""DALI stage: recio reads, shards, shuffles and checks the bytes; DALI decodes and augments.

    RecordFile ─▶ Sampler plan ─▶ RecioSource (fn.external_source, batch mode) ─▶
        fn.decoders.image[_slice](device="mixed" | "cpu") ─▶ resize / random_resized_crop ─▶
        fn.crop_mirror_normalize ─▶ DALIImageRecordIter (torch on the GPU, numpy on the CPU)

recio keeps what DALI's ``fn.readers.mxnet`` lacks: any fsspec URL, equal-count sharding,
the global seeded shuffle, exact resume from ``(epoch, step)``, and skip-and-count of bad
records (NOTE [bad images] in :mod:`recio.dali.source`). The source is a picklable function
of DALI's ``BatchInfo``, so it also runs in DALI's parallel external source workers.

Without a GPU (``nvidia.dali.backend.GetCUDADeviceCount() == 0``) the same graph runs as a
DALI CPU pipeline (``device_id=None``), which is how CI tests it. DALI itself is imported
only when a pipeline is built (:func:`~recio.dali._device.load_dali`).

Modules: :mod:`~recio.dali.source` (the external source, DALI-free),
:mod:`~recio.dali.pipeline` (the graph), :mod:`~recio.dali.iterator` (the iterator),
:mod:`~recio.dali.bench` (side by side with DALI's own reader).
"""

from ._device import INSTALL_HINT, DeviceUnavailableError, gpu_count, load_dali, resolve_device
from .iterator import DALIImageRecordIter
from .pipeline import build_pipeline
from .source import RecioSource

__all__ = [
    "INSTALL_HINT",
    "DALIImageRecordIter",
    "DeviceUnavailableError",
    "RecioSource",
    "build_pipeline",
    "gpu_count",
    "load_dali",
    "resolve_device",
]
