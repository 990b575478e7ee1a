"""RecordDataset: map-style access to a ``.rec`` for code that keeps its own DataLoader.

``dataset[i]`` is sample ``i``'s decoded, augmented image and its label; the samples are
the file's images (:mod:`recio.records.samples`: for InsightFace's layout, sample ``i`` is key
``i + 1``, as in ``MXFaceDataset``). A position is not a record key:
:meth:`RecordDataset.key` and :attr:`RecordDataset.keys` map one to the other (the keys
``ImageRecordIter``'s ``batch.index`` gives, for files whose header ids are their keys, as
im2rec writes them). It is a ``torch.utils.data.Dataset`` in all but
inheritance (``__len__``, ``__getitem__``, ``__getitems__``), so it works with
``DataLoader(num_workers=...)`` and ``DistributedSampler``; torch is not needed to use it.

``__getitems__`` decodes a whole DataLoader batch in one call of the native pool, and
:meth:`RecordDataset.collate` (as ``collate_fn``) turns that batch into tensors without
copying it again.

Each process opens what it needs on first use: the object pickles as its settings, and
after a fork (DataLoader workers) a worker's decoder starts threads of its own (threads do
not survive a fork) and, for remote storage, the worker opens its own connections. A local
file's index is kept across a fork (the mmap and the arrays are shared copy-on-write).

Augmentation draws (crop window, flip) are a function of ``(seed, epoch, record)``
(:class:`~recio.augment.KeyedDraw`, the same as ``ImageRecordIter``'s for that record), so
they do not depend on the number of workers, the batch size or the rank; call
:meth:`RecordDataset.set_epoch` at the start of each epoch (before iterating the
DataLoader: non-persistent workers take a copy of the dataset then).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._checks import check_choice, check_data_shape, check_int
from ..augment import ColourSpec, CropSpec, GeometrySpec, KeyedDraw
from ..decode import DecodeOptions, DecodePool
from ..errors import DecodeError
from ..pipeline.config import Normalize, augment_from_mxnet, check_rec_spec
from ..pipeline.read_decode import read_and_decode
from ..records.file import RecordFile
from ..records.open_options import OpenOptions
from ..records.samples import RecordLayout, detect_layout
from ..records.shards import ShardedRecords, open_records

__all__ = ["RecordDataset", "SampleBatch"]

_LABEL_DTYPES = ("float32", "int64")
# ImageRecordIter keywords that are not augmentation -> what a DataLoader user gives instead
_ITERATOR_ONLY = {
    "batch_size": "DataLoader(batch_size=...)",
    "shuffle": "DataLoader(shuffle=True) or a DistributedSampler",
    "part_index": "a DistributedSampler (its rank)",
    "num_parts": "a DistributedSampler (its num_replicas)",
    "kv": "a DistributedSampler",
    "round_batch": "DataLoader(drop_last=...)",
    "last_batch": "DataLoader(drop_last=...)",
    "preprocess_threads": "decode_threads=",
    "prefetch_buffer": "DataLoader(prefetch_factor=...)",
    **{
        f"{k}_{c}": "normalize=Normalize(mean=..., std=...)" for k in ("mean", "std") for c in "rgb"
    },
}
_INHERITED: list = []  # remote files opened before a fork (see RecordDataset._open)


class SampleBatch(list):
    """What :meth:`RecordDataset.__getitems__` returns: a list of ``(image, label)`` pairs.

    The images are views of one batch array, ``images``, and the labels of ``labels``;
    :meth:`RecordDataset.collate` hands those over as they are.
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray) -> None:
        super().__init__(zip(images, labels, strict=True))
        self.images, self.labels = images, labels


def _on_error(value: Any) -> str:
    if value == "skip":
        raise ValueError(
            "on_error='skip': ds[i] must be sample i, so a map-style dataset cannot skip one; "
            "give 'replace' (a blank image, counted in bad_records) or 'raise'"
        )
    return check_choice("on_error", value, ("raise", "replace"))


def _augment(shape, crop, colour, geometry, rand_mirror, keywords: dict[str, Any]):
    """The groups ImageRecordIter's augmentation keywords describe, or why not."""
    instead = {k: _ITERATOR_ONLY[k] for k in sorted(keywords) if k in _ITERATOR_ONLY}
    if instead:
        said = "; ".join(f"{k}: {v}" for k, v in instead.items())
        raise TypeError(f"RecordDataset takes no {sorted(instead)} (a DataLoader's part): {said}")
    if rand_mirror:
        keywords = {**keywords, "rand_mirror": True}
    try:
        return augment_from_mxnet(shape, crop=crop, colour=colour, geometry=geometry, **keywords)
    except TypeError as e:
        raise TypeError(
            f"RecordDataset: {e} (it takes ImageRecordIter's augmentation keywords: rand_crop, "
            "random_resized_crop, min_random_area, max_aspect_ratio, rand_mirror, brightness, "
            "max_rotate_angle, ...; docs/iterator.md lists them)"
        ) from e


class RecordDataset:
    """Sample ``i`` of a ``.rec``: ``(image, label)``, decoded and augmented by recio's decoder.

    Samples are numbered 0..len-1 over the file's images; ``key(i)`` (or ``keys[i]``) is
    the record key of sample ``i``.

    Args:
        path_imgrec: the ``.rec`` (local path or fsspec URL), or a set of shards read as
            one (a list of URLs, a shard pattern, a glob or ``STEM``: :mod:`recio.records.shards`).
        data_shape: ``(3, height, width)`` of every image, as ``ImageRecordIter``'s.
        path_imgidx: the ``.idx`` (default: beside the ``.rec``; none: a scan); for
            shards, one per shard (default: each beside its ``.rec``).
        rand_mirror: flip each image horizontally with probability 1/2.
        crop: how the window of each image is chosen (:class:`~recio.augment.CropSpec`;
            default: the centre crop of ``data_shape``, the whole image when it has that
            size). Its ``out_height``/``out_width`` must match ``data_shape``.
        colour: MXNet's colour augmentation (:class:`~recio.augment.ColourSpec`: HLS
            jitter, brightness, contrast, saturation, PCA lighting), as the iterator's.
        geometry: MXNet's geometry (:class:`~recio.augment.geometry.GeometrySpec`: rotation,
            shear, scale, aspect, pad), each image warped once, as the iterator's.
        resample: "pillow" (recio's antialiasing filters) or "opencv" (MXNet's resampling,
            ``cv::resize``, even without geometry parameters); the same as
            ``GeometrySpec(resample=)``. None: the geometry's (default "pillow").
        normalize: ``(pixel - mean) / std``, dtype and layout of the images
            (:class:`~recio.pipeline.config.Normalize`; default float32 CHW, unnormalised).
        label_width: labels per sample; 1 gives a scalar label (the first, for records with
            several, as ``MXFaceDataset`` does).
        label_dtype: "float32" or "int64" (class indices, as a loss wants them).
        seed: the seed of the augmentation draws.
        decode_threads: threads of the native decoder per process (1 under a DataLoader
            with workers; more when the DataLoader runs in the main process).
        on_error: "raise" (a :class:`~recio.errors.DecodeError` naming the record and byte
            offset) or "replace" (a blank image with its label, counted in
            ``bad_records``). Not ``ImageRecordIter``'s default "skip": ``ds[i]`` must
            be sample ``i`` (samplers and a DataLoader count on one sample per index), so
            a map-style dataset cannot skip one.
        storage_options: fsspec options for remote storage.
        cache_dir: keep remote data on local disk here: blocks up to ``cache_limit`` bytes
            (shared by the DataLoader's workers and other processes; least recently used
            evicted first, as the order a sampler draws is not known here), or, without a
            limit, each file copied whole.
        cache_limit: the most bytes the block cache in ``cache_dir`` holds.
        verify_checksums: check each record read against its checksum sidecar
            (:class:`~recio.records.file.RecordFile`; "auto": wherever a sidecar exists).
            A record that does not match is a bad image for ``on_error``.
        **mxnet_augment: ``ImageRecordIter``'s augmentation keywords (``rand_crop``,
            ``random_resized_crop``, ``min_random_area``, ``max_aspect_ratio``,
            ``brightness``, ``max_rotate_angle``, ...:
            :data:`~recio.pipeline.config.AUGMENT_KEYWORDS`), read as the iterator reads
            them, in place of ``crop=``, ``colour=`` and ``geometry=``. Its other keywords
            (``batch_size``, ``shuffle``, ``part_index``, ...) raise a ``TypeError`` naming
            the DataLoader's or sampler's equivalent.
    """

    def __init__(
        self,
        path_imgrec: str | Sequence[str],
        data_shape: tuple[int, int, int],
        *,
        path_imgidx: str | Sequence[str] | None = None,
        rand_mirror: bool = False,
        crop: CropSpec | None = None,
        colour: ColourSpec | None = None,
        geometry: GeometrySpec | None = None,
        resample: str | None = None,
        normalize: Normalize | None = None,
        label_width: int = 1,
        label_dtype: str = "float32",
        seed: int = 0,
        decode_threads: int = 1,
        on_error: str = "raise",
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | None = None,
        cache_limit: int | None = None,
        verify_checksums: bool | str = "auto",
        **mxnet_augment: Any,
    ) -> None:
        shape = check_data_shape(data_shape)
        if mxnet_augment:
            crop, colour, geometry = _augment(
                shape, crop, colour, geometry, rand_mirror, mxnet_augment
            )
            rand_mirror = False  # (in the crop now)
        if crop is None:
            crop = CropSpec(shape[1], shape[2], rand_mirror=rand_mirror)
        elif (crop.out_height, crop.out_width) != shape[1:]:
            raise ValueError(f"crop gives {crop.out_height}x{crop.out_width}, data_shape {shape}")
        elif rand_mirror and not crop.rand_mirror:
            raise ValueError("give rand_mirror in the CropSpec when a crop= is given")
        if resample is not None:
            if geometry is not None and geometry.resample != resample:
                raise ValueError("give resample in the GeometrySpec when a geometry= is given")
            geometry = dataclasses.replace(geometry or GeometrySpec(), resample=resample)
        self.settings = {
            "path_imgrec": check_rec_spec("path_imgrec", path_imgrec),
            "path_imgidx": check_rec_spec("path_imgidx", path_imgidx, optional=True),
            "data_shape": shape,
            "crop": crop,
            "colour": colour or ColourSpec(),
            "geometry": geometry if geometry is not None and geometry.enabled else None,
            "normalize": normalize or Normalize(),
            "label_width": check_int("label_width", label_width, 1),
            "label_dtype": check_choice("label_dtype", label_dtype, _LABEL_DTYPES),
            "seed": check_int("seed", seed),
            "decode_threads": check_int("decode_threads", decode_threads, 1),
            "on_error": _on_error(on_error),
            "open": OpenOptions(
                storage_options=storage_options,
                cache_dir=cache_dir,
                cache_limit=cache_limit,
                verify_checksums=verify_checksums,
            ),
        }
        self.epoch = 0
        self.bad_records: dict[int, str] = {}  # record id -> error, in this process
        self._records: RecordFile | ShardedRecords | None = None
        self._layout: RecordLayout | None = None
        self._pool: DecodePool | None = None
        self._pid = -1

    # --- what it holds ------------------------------------------------------------------

    @property
    def layout(self) -> RecordLayout:
        """The file's layout: samples, InsightFace header, identities, number of classes."""
        self._open()
        return self._layout

    @property
    def num_classes(self) -> int | None:
        """Identities an InsightFace header announces (None without one)."""
        return self.layout.num_classes

    def __len__(self) -> int:
        return self.layout.num_samples

    @property
    def keys(self) -> np.ndarray:
        """The record key of each sample, by position: ``keys[i]`` is sample ``i``'s (int64).

        A position counts samples only: records that are not images (an InsightFace
        header at key 0, its identity records, label-only records) have no position, so
        sample ``i`` of an InsightFace file is key ``i + 1``. A key is the ``.idx``'s (a
        file read without one: the record's place in the file, from 0); for several
        shards, the key within its own shard.
        """
        self._open()
        return self._records.keys[self._layout.samples]

    def key(self, index: int) -> int:
        """The record key of sample ``index`` (negative counts from the end): see :attr:`keys`.

        Raises:
            IndexError: an index outside ``0..len-1``.
        """
        self._open()
        (sample,) = self._sample_indices([index])
        return int(self._records.keys[self._layout.samples[sample]])

    def set_epoch(self, epoch: int) -> None:
        """Draw the augmentations of ``epoch`` from now on (as ``DistributedSampler``'s)."""
        self.epoch = check_int("epoch", epoch, 0)

    # --- samples ------------------------------------------------------------------------

    def __getitem__(self, index: int) -> tuple[np.ndarray, Any]:
        """Sample ``index``: its image (C×H×W or H×W×C array) and label."""
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> SampleBatch:
        """Several samples, decoded together by the native pool (a DataLoader batch).

        Raises:
            IndexError: an index outside ``0..len-1`` (negative ones count from the end).
            DecodeError: a bad image, under ``on_error="raise"``.
        """
        self._open()
        samples = self._sample_indices(indices)
        positions = self._layout.samples[samples]
        settings = self.settings
        norm: Normalize = settings["normalize"]
        out = np.empty(self._batch_shape(len(samples)), dtype=norm.dtype)
        got = read_and_decode(
            self._records,
            positions,
            self._pool,
            out,
            label_width=settings["label_width"],
            draw=KeyedDraw(
                settings["crop"],
                settings["seed"],
                self.epoch,
                settings["colour"],
                settings["geometry"],
            ),
            options=DecodeOptions(
                mean=norm.channel_mean_std[0] if norm.enabled else None,
                std=norm.channel_mean_std[1] if norm.enabled else None,
                layout=norm.layout,
                channel_order=norm.channel_order,
            ),
            raise_bad_headers=settings["on_error"] == "raise",
        )
        if got.reasons is not None:
            self._bad_images(got.status, got.reasons, positions, got.ids)
        label = got.labels[:, 0] if settings["label_width"] == 1 else got.labels
        return SampleBatch(out, label.astype(settings["label_dtype"]))

    @staticmethod
    def collate(batch: Any) -> Any:
        """A DataLoader ``collate_fn``: a :class:`SampleBatch` as ``(images, labels)`` tensors.

        The batch array becomes the tensor as it is (no copy); anything else goes to
        torch's ``default_collate``.
        """
        import torch  # the extra: collate is only for torch users
        from torch.utils.data import default_collate

        if isinstance(batch, SampleBatch):
            return torch.from_numpy(batch.images), torch.from_numpy(batch.labels)
        return default_collate(batch)

    def _sample_indices(self, indices: Sequence[int]) -> np.ndarray:
        n = self._layout.num_samples
        samples = np.asarray(indices, dtype=np.int64).reshape(-1)
        if len(samples) and (samples.min() < -n or samples.max() >= n):
            bad = samples[(samples < -n) | (samples >= n)][0]
            raise IndexError(f"sample {bad} of {self.settings['path_imgrec']} ({n} samples)")
        return np.where(samples < 0, samples + n, samples)

    def _batch_shape(self, n: int) -> tuple[int, int, int, int]:
        c, h, w = self.settings["data_shape"]
        return (n, c, h, w) if self.settings["normalize"].layout == "NCHW" else (n, h, w, c)

    def _bad_images(self, status, reasons, positions, ids) -> None:
        bad = np.flatnonzero(status)
        if self.settings["on_error"] == "raise":
            j = int(bad[0])
            where = self._records.describe(int(positions[j]), int(ids[j]))
            raise DecodeError(f"cannot decode {where}: {reasons[j]}", status=int(status[j]))
        for j in bad:
            self.bad_records[int(ids[j])] = reasons[j] or "bad image"

    # --- per process --------------------------------------------------------------------

    def _open(self) -> None:
        """Open the records and the decoder in this process (the records again after a fork)."""
        if self._pid == os.getpid():
            return
        settings = self.settings
        if self._records is not None and not self._records.is_local:
            # Connections and their event loops do not survive a fork, and some clients
            # (HDFS's) hang when released in the child: the parent's is kept, unused (a
            # DataLoader worker ends with os._exit, so it is never released).
            _INHERITED.append(self._records)
            self._records = None
        if self._records is None:
            self._records = open_records(
                settings["path_imgrec"],
                settings["path_imgidx"],
                options=settings["open"],
            )
            self._layout = detect_layout(self._records)
        if self._pool is None:  # after a fork, the pool starts threads of its own
            self._pool = DecodePool(settings["decode_threads"])
        self._pid = os.getpid()

    def close(self) -> None:
        """Release the decoder and the file (reopened if used again)."""
        if self._pool is not None:
            self._pool.close()
        if self._records is not None:
            self._records.close()
        self._records = self._layout = self._pool = None
        self._pid = -1

    def __getstate__(self) -> dict:
        return {"settings": self.settings, "epoch": self.epoch}

    def __setstate__(self, state: dict) -> None:
        self.settings, self.epoch = state["settings"], state["epoch"]
        self.bad_records = {}
        self._records = self._layout = self._pool = None
        self._pid = -1

    def __repr__(self) -> str:
        return f"RecordDataset({self.settings['path_imgrec']!r})"
