"""What an iterator is asked to do, checked once: ``IterConfig`` and its parameter groups.

Both iterators, the CPU ``ImageRecordIter`` and the DALI stage, take MXNet's
``ImageRecordIter`` keywords (all 61 of MXNet 1.9.1, docs/iterator.md, "MXNet's parameters").
:meth:`IterConfig.from_mxnet` sorts them into frozen groups (``CropSpec``, ``ColourSpec``,
``GeometrySpec``, ``Normalize``, ``Sharding``, ``Storage``) and the top-level settings, and
every group checks its own values, so a group built directly (``crop=CropSpec(...)``) is
checked the same way. A bad value is a ``ValueError`` (a wrong type a ``TypeError``) that
names the parameter and shows the value; a parameter recio cannot honour is a ValueError
that says what to use instead; one that changes nothing here (``ctx``, ``verbose``, ...) is
accepted with a note, once per process.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dist
from .._checks import check_choice, check_data_shape, check_int
from ..augment import ColourSpec, CropSpec, GeometrySpec
from ..records import OpenOptions
from ..sampling.mixing import Mixture, Source
from ..sampling.sampler import LastBatch, Shuffle

__all__ = [
    "AUGMENT_KEYWORDS",
    "ColourSpec",
    "CropSpec",
    "GeometrySpec",
    "IterConfig",
    "Normalize",
    "Sharding",
    "Storage",
    "augment_from_mxnet",
]

ON_ERROR = ("skip", "raise", "replace")
DTYPES = ("float32", "float16", "uint8")
LAYOUTS = ("NCHW", "NHWC")
CHANNEL_ORDERS = ("RGB", "BGR")
INTERPOLATIONS = ("bilinear", "area", "nearest")


@dataclass(frozen=True)
class Normalize:
    """Output pixels: ``(pixel - mean) / std * scale`` per channel on the 0..255 scale.

    ``mean_img``: a mean image file (MXNet's ``mean_img``: an NDArray file of one (3, H, W)
    array, or a ``.npy``) taken from each image instead of ``mean``; float32 outputs.
    """

    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    dtype: str = "float32"
    layout: str = "NCHW"
    channel_order: str = "RGB"
    scale: float = 1.0
    mean_img: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", tuple(float(v) for v in self.mean))
        object.__setattr__(self, "std", tuple(float(v) for v in self.std))
        if len(self.mean) != 3 or len(self.std) != 3:
            raise ValueError(f"mean and std need 3 values each, not {self.mean}, {self.std}")
        if min(self.std) <= 0:
            raise ValueError(f"std_r/g/b must be positive, not {self.std}")
        check_choice("dtype", self.dtype, DTYPES)
        check_choice("layout", self.layout, LAYOUTS)
        check_choice("channel_order", self.channel_order, CHANNEL_ORDERS)
        object.__setattr__(self, "scale", float(self.scale))
        if not (np.isfinite(self.scale) and self.scale != 0):
            raise ValueError(f"scale must be finite and non-zero, not {self.scale}")
        if self.dtype == "uint8" and self.enabled:
            raise ValueError(
                "mean/std/scale normalisation needs dtype float32 or float16, not uint8"
            )
        if self.mean_img is not None:
            if isinstance(self.mean_img, os.PathLike):
                object.__setattr__(self, "mean_img", os.fspath(self.mean_img))
            if not isinstance(self.mean_img, str) or not self.mean_img:
                raise TypeError(f"mean_img must be a file path, not {self.mean_img!r}")
            if self.dtype != "float32":
                raise ValueError(f"mean_img needs dtype float32, not {self.dtype}")
            if self.mean != (0.0, 0.0, 0.0):
                raise ValueError("give mean_img or mean_r/mean_g/mean_b, not both")

    @property
    def enabled(self) -> bool:
        """Whether mean/std/scale change the pixels at all (a mean image aside)."""
        return self.mean != (0.0, 0.0, 0.0) or self.std != (1.0, 1.0, 1.0) or self.scale != 1

    @property
    def channel_mean_std(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """``mean`` and ``std`` per output channel: ``channel_order``'s (reversed for BGR).

        ``mean``/``std`` are MXNet's ``mean_r/g/b``, ``std_r/g/b``: of the red, green and
        blue channels wherever the output puts them.
        """
        if self.channel_order == "BGR":
            return self.mean[::-1], self.std[::-1]
        return self.mean, self.std


@dataclass(frozen=True)
class Sharding:
    """Which part of the data this process reads.

    MXNet's ``kv`` or ``part_index``/``num_parts``; neither: the environment (torchrun, MPI,
    SLURM, torch.distributed), see :mod:`recio.dist`.
    """

    part_index: int | None = None
    num_parts: int | None = None
    kv: Any = None

    def resolve(self) -> dist.World:
        """This process's rank and world size, and where they came from."""
        return dist.discover(self.kv, self.part_index, self.num_parts)


@dataclass(frozen=True)
class Storage:
    """Where the records are read from, beside the ``.rec`` URL itself.

    ``path_imgidx``, and the fields of the :class:`~recio.records.OpenOptions` the records are
    opened with (:meth:`open_options`), which check them.
    """

    # default: the .rec name with .idx, else a scan; several shards: one per shard
    path_imgidx: str | tuple[str, ...] | None = None
    storage_options: dict[str, Any] | None = None  # fsspec options (credentials, endpoint)
    # remote data kept on local disk: blocks up to cache_limit bytes (NOTE [block cache]),
    # or, without a limit, each file copied whole
    cache_dir: str | None = None
    cache_limit: int | None = None
    fetch: Any = None  # storage.FetchOptions: request sizes, retries, the cache's blocks
    # check reads against the checksum sidecar: "auto" remote data, True always, False never
    verify_checksums: bool | str = "auto"

    def __post_init__(self) -> None:
        idx = check_rec_spec("path_imgidx", self.path_imgidx, optional=True)
        object.__setattr__(self, "path_imgidx", idx)
        self.open_options()  # checks the fields

    def open_options(self) -> OpenOptions:
        """How the records are opened: these fields but ``path_imgidx``, as one value."""
        return OpenOptions(
            storage_options=self.storage_options,
            fetch=self.fetch,
            cache_dir=self.cache_dir,
            cache_limit=self.cache_limit,
            verify_checksums=self.verify_checksums,
        )


# MXNet keyword -> (group, field) for the keywords that belong to a group.
_GROUP_KEYWORDS: dict[str, tuple[str, str]] = {
    "resize": ("crop", "resize"),
    "rand_crop": ("crop", "rand_crop"),
    "random_resized_crop": ("crop", "random_resized_crop"),
    "min_random_area": ("crop", "min_area"),
    "max_random_area": ("crop", "max_area"),
    "rand_mirror": ("crop", "rand_mirror"),
    "mirror": ("crop", "mirror"),
    "scale": ("normalize", "scale"),
    "mean_img": ("normalize", "mean_img"),
    "dtype": ("normalize", "dtype"),
    "layout": ("normalize", "layout"),
    "channel_order": ("normalize", "channel_order"),
    "part_index": ("sharding", "part_index"),
    "num_parts": ("sharding", "num_parts"),
    "kv": ("sharding", "kv"),
    "path_imgidx": ("storage", "path_imgidx"),
    "storage_options": ("storage", "storage_options"),
    "cache_dir": ("storage", "cache_dir"),
    "cache_limit": ("storage", "cache_limit"),
    "fetch": ("storage", "fetch"),
    "verify_checksums": ("storage", "verify_checksums"),
}
_GROUP_KEYWORDS |= {f.name: ("colour", f.name) for f in dataclasses.fields(ColourSpec)}
_GROUP_KEYWORDS |= {
    f.name: ("geometry", f.name)
    for f in dataclasses.fields(GeometrySpec)
    if f.name not in ("max_aspect_ratio", "min_aspect_ratio")  # (their meaning: _aspect)
}
_MEAN_STD = ("mean_r", "mean_g", "mean_b", "std_r", "std_g", "std_b")
_GROUP_TYPES = {
    "normalize": Normalize,
    "sharding": Sharding,
    "storage": Storage,
    "colour": ColourSpec,
    "geometry": GeometrySpec,
}
# MXNet keywords that change nothing in recio, and what it does instead (said once).
_NOTED = {
    "ctx": "recio decodes on the CPU threads; for GPU decoding use recio.dali",
    "device_id": "batches are host numpy arrays (torch.from_numpy(...).pin_memory() pins them)",
    "verbose": "recio logs through the 'recio' logger",
    "data_name": "a Batch's images are batch.data",
    "label_name": "a Batch's labels are batch.label",
    "aug_seq": "recio's augmenter is MXNet's aug_default",
    "mean_a": "the output has no alpha channel",
    "std_a": "the output has no alpha channel",
}
# Their MXNet 1.9.1 defaults: given explicitly (as ported code often does) they say nothing.
_NOTED_DEFAULTS = {"ctx": "gpu", "device_id": 0, "verbose": True, "data_name": "data",
                   "label_name": "softmax_label", "aug_seq": "aug_default", "mean_a": 0.0,
                   "std_a": 1.0}  # fmt: skip
# MXNet's "" for a file it reads beside the .rec: no such file (recio's None).
_EMPTY_MEANS_NONE = ("path_imglist", "path_imgidx", "mean_img")
_noted: set[str] = set()


def _note(name: str, value: Any) -> None:
    """A one-time note that ``name`` is accepted and what recio does instead."""
    if name in _noted:
        return
    _noted.add(name)
    warnings.warn(
        f"ImageRecordIter: {name}={value!r} accepted, and changes nothing: {_NOTED[name]}",
        stacklevel=4,
    )


def check_geometry(geometry: GeometrySpec, crop: CropSpec | None) -> None:
    """Refuses a geometry that does not combine with the crop (as MXNet refuses it)."""
    if geometry.pad and crop is not None and crop.random_resized_crop:
        raise ValueError(
            f"pad={geometry.pad} does not combine with random_resized_crop (as in MXNet): "
            "drop one of them"
        )


@dataclass(frozen=True)
class IterConfig:
    """Everything an iterator needs to know, checked: the records, the order, the augmentation.

    Build it from MXNet's keywords with :meth:`from_mxnet` (what the iterators do), or
    directly. ``preprocess_threads`` and ``prefetch_buffer`` may stay None: each iterator
    has its own default.
    """

    # a URL, pattern or glob; or several (records.shards); or a Mixture (sampling.mixing)
    path_imgrec: str | tuple[str, ...] | Mixture
    data_shape: tuple[int, int, int]
    batch_size: int
    shuffle: bool = False
    shuffle_mode: str = "global"
    block_parts: int | None = None  # block shuffle's canonical partitions (None: 8)
    seed: int = 0
    label_width: int = 1
    last_batch: str = "pad"
    on_error: str = "skip"
    interpolation: str = "bilinear"
    preprocess_threads: int | str | None = None  # None or "auto": NOTE [resource plan]
    prefetch_buffer: int | None = None
    memory_budget: int | None = None  # bytes for batches in flight (NOTE [resource plan])
    crop: CropSpec | None = None  # None: the centre crop of the output size
    colour: ColourSpec = field(default_factory=ColourSpec)
    geometry: GeometrySpec = field(default_factory=GeometrySpec)
    seed_aug: int | None = None  # the augmentation draws' seed (MXNet's); None: seed's
    path_imglist: str | None = None  # a .lst whose labels replace the records' (by id)
    normalize: Normalize = field(default_factory=Normalize)
    sharding: Sharding = field(default_factory=Sharding)
    storage: Storage = field(default_factory=Storage)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path_imgrec", _check_path_imgrec(self.path_imgrec))
        if isinstance(self.path_imgrec, Mixture) and self.storage.path_imgidx is not None:
            raise TypeError(
                "a Mixture's .idx files are its sources' (Source(idx=)), not path_imgidx"
            )
        shape = check_data_shape(self.data_shape)
        object.__setattr__(self, "data_shape", shape)
        check_int("batch_size", self.batch_size, 1)
        check_int("seed", self.seed)
        if self.seed_aug is not None:
            check_int("seed_aug", self.seed_aug)
        if self.path_imglist is not None:
            if isinstance(self.path_imglist, os.PathLike):
                object.__setattr__(self, "path_imglist", os.fspath(self.path_imglist))
            if not isinstance(self.path_imglist, str) or not self.path_imglist:
                raise TypeError(f"path_imglist must be a .lst path, not {self.path_imglist!r}")
            if isinstance(self.path_imgrec, Mixture):  # ids of several sources: whose list?
                raise TypeError(
                    "path_imglist does not combine with a Mixture: give each source's labels "
                    "with Source(labels=)"
                )
        if self.colour.affine and self.normalize.dtype != "float32":
            raise ValueError(
                "max_random_contrast/max_random_illumination need dtype float32, "
                f"not {self.normalize.dtype}"
            )
        check_geometry(self.geometry, self.crop)
        if self.block_parts is not None:
            check_int("block_parts", self.block_parts, 1)
        check_int("label_width", self.label_width, 1)
        check_choice(
            "shuffle_mode", self.shuffle_mode, [s.value for s in Shuffle if s.value != "none"]
        )
        check_choice("last_batch", self.last_batch, [b.value for b in LastBatch])
        check_choice("on_error", self.on_error, ON_ERROR)
        check_choice("interpolation", self.interpolation, INTERPOLATIONS)
        if self.geometry.resample == "opencv" and self.interpolation != "bilinear":
            raise ValueError(
                f"interpolation={self.interpolation!r} picks one of recio's own filters; with "
                "resample='opencv' the filter is OpenCV's inter_method (0 nearest, 1 bilinear, "
                "2 bicubic, 3 area, 4 Lanczos, 9 by direction, 10 random)"
            )
        if self.preprocess_threads is not None and self.preprocess_threads != "auto":
            check_int("preprocess_threads", self.preprocess_threads, 1)
        if self.memory_budget is not None:
            check_int("memory_budget", self.memory_budget, 1)
        if self.prefetch_buffer is not None:
            check_int("prefetch_buffer", self.prefetch_buffer, 1)
        if self.crop is None:
            object.__setattr__(self, "crop", CropSpec(shape[1], shape[2]))
        elif (self.crop.out_height, self.crop.out_width) != shape[1:]:
            raise ValueError(
                f"crop gives {self.crop.out_height}x{self.crop.out_width} images, "
                f"data_shape asks for {shape[1]}x{shape[2]}"
            )

    def dali_unsupported(self) -> list[str]:
        """The settings the DALI stage does not do (yet): colour, geometry, a mean image, ..."""
        names = [f.name for f in dataclasses.fields(ColourSpec)]
        names = [n for n in names if getattr(self.colour, n) != getattr(ColourSpec(), n)]
        if self.normalize.mean_img is not None:
            names.append("mean_img")
        if self.seed_aug is not None:
            names.append("seed_aug")
        if self.path_imglist is not None:
            names.append("path_imglist")
        if self.geometry.enabled:  # (its windows are the box the warp reads, not a crop)
            names += self.geometry.non_default()
        return names

    @property
    def draw_seed(self) -> int:
        """The seed of the augmentation draws: ``seed_aug``, else ``seed``."""
        return self.seed if self.seed_aug is None else self.seed_aug

    @property
    def shuffle_kind(self) -> Shuffle:
        """The sampler's shuffle: none, or ``shuffle_mode`` when ``shuffle`` is on."""
        return Shuffle(self.shuffle_mode) if self.shuffle else Shuffle.NONE

    @property
    def batch_shape(self) -> tuple[int, int, int, int]:
        """The shape of one batch's data, in the configured layout."""
        c, h, w = self.data_shape
        n = self.batch_size
        return (n, c, h, w) if self.normalize.layout == "NCHW" else (n, h, w, c)

    @classmethod
    def given(
        cls,
        config: IterConfig | None,
        path_imgrec: str | None = None,
        data_shape: Sequence[int] | None = None,
        batch_size: int | None = None,
        **keywords: Any,
    ) -> IterConfig:
        """``config`` if the caller gave one (and nothing else), else :meth:`from_mxnet`."""
        if config is None:
            return cls.from_mxnet(path_imgrec, data_shape, batch_size, **keywords)
        if keywords or path_imgrec is not None or data_shape is not None or batch_size:
            raise TypeError("give config= or the ImageRecordIter keywords, not both")
        return config

    @classmethod
    def from_mxnet(
        cls,
        path_imgrec: str | None = None,
        data_shape: Sequence[int] | None = None,
        batch_size: int | None = None,
        *,
        crop: CropSpec | None = None,
        colour: ColourSpec | None = None,
        geometry: GeometrySpec | None = None,
        normalize: Normalize | None = None,
        sharding: Sharding | None = None,
        storage: Storage | None = None,
        round_batch: bool = True,
        **keywords: Any,
    ) -> IterConfig:
        """The config that MXNet's ``ImageRecordIter`` keywords describe.

        Group keywords (``rand_crop``, ``brightness``, ``mean_r``, ``part_index``,
        ``path_imgidx``, ...) fill their group; a group may instead be given whole
        (``crop=CropSpec(...)``), but not both. ``round_batch`` (MXNet) picks ``last_batch``
        when that is not given: pad, or roll over into the next epoch. ``max_aspect_ratio``
        and ``min_aspect_ratio`` mean what they mean in MXNet: with ``random_resized_crop``
        the window's aspect ratios (``[min, max]``; ``max`` alone: ``[1 - max, 1 + max]``),
        else the affine warp's (:class:`GeometrySpec`). ``shuffle_chunk_size`` > 0 (MXNet's
        shuffle of chunks of the file) is recio's block shuffle, and ``shuffle_chunk_seed``
        its seed where ``seed`` is not given. The keywords that change nothing here
        (``ctx``, ``device_id``, ``verbose``, ``data_name``, ``label_name``, ``aug_seq``,
        ``mean_a``, ``std_a``) are accepted with a note, once per process, unless given
        MXNet's default. Every keyword takes MXNet 1.9.1's default value and then does
        what omitting it does in MXNet: ``""`` for ``path_imglist``, ``path_imgidx`` and
        ``mean_img`` means no such file, ``None`` for ``dtype``, ``seed_aug`` and
        ``min_aspect_ratio`` means not set, ``num_parts=1`` one part (not the environment's).

        Raises:
            TypeError: an unknown keyword (the message lists them) or a value of the wrong
                type.
            ValueError: a value out of range, or one recio cannot honour; the message names
                it and shows the value, or says what to use instead.
        """
        required = {"path_imgrec": path_imgrec, "data_shape": data_shape, "batch_size": batch_size}
        missing = [name for name, value in required.items() if value is None]
        if missing:
            raise TypeError(f"ImageRecordIter needs {', '.join(missing)}")
        given = {"crop": crop, "colour": colour, "geometry": geometry, "normalize": normalize,
                 "sharding": sharding, "storage": storage}  # fmt: skip
        fields: dict[str, dict[str, Any]] = {name: {} for name in given}  # per group
        top: dict[str, Any] = {}
        top_fields = {f.name for f in dataclasses.fields(cls)} - set(given)
        mean_std: dict[str, float] = {}
        aspect: dict[str, Any] = {}
        unknown = []
        for key, value in _mxnet_only(keywords, top).items():
            if key in ("max_aspect_ratio", "min_aspect_ratio"):
                aspect[key] = value
            elif key in _GROUP_KEYWORDS:
                group, name = _GROUP_KEYWORDS[key]
                fields[group][name] = value
            elif key in _MEAN_STD:
                mean_std[key] = float(value)
            elif key in top_fields:
                top[key] = value
            else:
                unknown.append(key)
        if unknown:
            raise TypeError(f"ImageRecordIter got unsupported arguments: {sorted(unknown)}")
        if mean_std:  # MXNet's six scalars become Normalize's two triples
            fields["normalize"]["mean"] = tuple(mean_std.get(f"mean_{c}", 0.0) for c in "rgb")
            fields["normalize"]["std"] = tuple(mean_std.get(f"std_{c}", 1.0) for c in "rgb")
        if fields["normalize"].get("dtype", "") is None:  # MXNet's None: no change (float32)
            fields["normalize"]["dtype"] = "float32"
        if aspect:
            _aspect(aspect, fields)
        shape = check_data_shape(data_shape)  # (before the crop is made from it)
        groups: dict[str, Any] = {}
        for name, group in given.items():
            if group is not None and fields[name]:
                raise TypeError(f"give {name}= or the keywords {sorted(fields[name])}, not both")
            if group is None and name == "crop":
                group = CropSpec(int(shape[1]), int(shape[2]), **fields[name])
            elif group is None:
                group = _GROUP_TYPES[name](**fields[name])
            groups[name] = group
        if top.get("last_batch") is None:
            top["last_batch"] = "pad" if round_batch else "rollover"
        return cls(path_imgrec, shape, batch_size, **top, **groups)


# The augmentation keywords of ImageRecordIter: what RecordDataset takes too.
AUGMENT_KEYWORDS = frozenset(
    [k for k, (group, _) in _GROUP_KEYWORDS.items() if group in ("crop", "colour", "geometry")]
    + ["max_aspect_ratio", "min_aspect_ratio"]
)


def augment_from_mxnet(
    data_shape: Sequence[int],
    *,
    crop: CropSpec | None = None,
    colour: ColourSpec | None = None,
    geometry: GeometrySpec | None = None,
    **keywords: Any,
) -> tuple[CropSpec, ColourSpec, GeometrySpec]:
    """The crop, colour and geometry that ImageRecordIter's augmentation keywords describe.

    ``keywords`` are among :data:`AUGMENT_KEYWORDS` (``rand_crop``, ``random_resized_crop``,
    ``min_random_area``, ``max_aspect_ratio``, ``rand_mirror``, ``brightness``,
    ``max_rotate_angle``, ...), read exactly as :meth:`IterConfig.from_mxnet` reads them.
    """
    other = sorted(set(keywords) - AUGMENT_KEYWORDS)
    if other:
        raise TypeError(f"not augmentation keywords of ImageRecordIter: {other}")
    config = IterConfig.from_mxnet(
        "augment.rec", data_shape, 1, crop=crop, colour=colour, geometry=geometry, **keywords
    )
    return config.crop, config.colour, config.geometry


def _mxnet_only(keywords: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``keywords`` less MXNet's own that are noted or mapped here (``top`` gets those)."""
    rest = {}
    chunk_size = keywords.get("shuffle_chunk_size", 0)
    for key, value in keywords.items():
        if key in _NOTED:
            if key == "aug_seq" and value != "aug_default":
                raise ValueError(
                    f"aug_seq={value!r}: recio has MXNet's default augmenter only "
                    "(aug_seq='aug_default'); its parameters are ImageRecordIter's keywords"
                )
            if value != _NOTED_DEFAULTS[key]:
                _note(key, value)
        elif key in _EMPTY_MEANS_NONE and isinstance(value, str) and not value:
            rest[key] = None
        elif key == "shuffle_chunk_size":
            check_int("shuffle_chunk_size", value, 0)
            if value and "shuffle_mode" not in keywords:  # chunks of the file: blocks
                top["shuffle_mode"] = "block"
        elif key == "shuffle_chunk_seed":
            check_int("shuffle_chunk_seed", value)
            if chunk_size and "seed" not in keywords:
                top["seed"] = value
        else:
            rest[key] = value
    return rest


def _aspect(aspect: dict[str, Any], fields: dict[str, dict[str, Any]]) -> None:
    """MXNet's ``max_aspect_ratio``/``min_aspect_ratio`` into the group that uses them."""
    hi, lo = aspect.get("max_aspect_ratio"), aspect.get("min_aspect_ratio")
    if not fields["crop"].get("random_resized_crop"):
        fields["geometry"].update(aspect)  # the affine warp's (GeometrySpec)
        return
    for name, value in aspect.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise TypeError(f"{name} must be a number, not {type(value).__name__} {value!r}")
    if lo is not None:  # [min, max]; max not given: recio's default
        fields["crop"]["min_aspect"] = float(lo)
        if hi is not None:
            fields["crop"]["max_aspect"] = float(hi)
    elif hi is not None:  # MXNet: [1 - max, 1 + max]
        if not 0 <= hi < 1:
            raise ValueError(
                f"max_aspect_ratio={hi} without min_aspect_ratio means the aspect ratios "
                f"[1 - {hi}, 1 + {hi}] (MXNet), so it must be in [0, 1); give "
                "min_aspect_ratio too for a range [min, max]"
            )
        fields["crop"]["min_aspect"] = 1.0 - hi
        fields["crop"]["max_aspect"] = 1.0 + hi


def _check_path_imgrec(value: Any) -> str | tuple[str, ...] | Mixture:
    """``path_imgrec``: a ``.rec`` spec (:func:`check_rec_spec`), or a mixture of sources.

    A list of :class:`~recio.sampling.mixing.Source` is their
    :class:`~recio.sampling.mixing.Mixture`.
    """
    if isinstance(value, Mixture):
        return value
    if isinstance(value, list | tuple) and value and any(isinstance(v, Source) for v in value):
        if not all(isinstance(v, Source) for v in value):
            raise TypeError(
                "path_imgrec mixes Source and plain paths: make each one a Source (or put "
                "the shards of one source in its path)"
            )
        return Mixture(tuple(value))
    return check_rec_spec("path_imgrec", value)


def _not_a_folder(name: str, path: str) -> None:
    """Refuse a local folder given as a ``.rec``, naming the files it may have meant.

    (arcface_torch's dataset takes the folder holding ``train.rec``; recio takes the file.)
    """
    local = path[len("file://") :] if path.startswith("file://") else path
    if "://" in local or not os.path.isdir(local):
        return
    folder = local.rstrip("/\\") or local
    inside = sorted(f for f in os.listdir(folder) if f.endswith((".rec", ".idx")))
    recs = [os.path.join(folder, f) for f in inside if f.endswith(".rec")]
    if name == "path_imgidx":
        guesses = [os.path.join(folder, f) for f in inside if f.endswith(".idx")]
    else:
        guesses = recs or ([folder + ".rec"] if os.path.isfile(folder + ".rec") else [])
    if guesses:
        meant = " or ".join(guesses[:3])
        hint = f"did you mean {meant}?"
    else:
        hint = "did you mean a .rec made from its images (recio im2rec, docs/im2rec.md)?"
    raise IsADirectoryError(f"{name}={path!r} is a folder, not a .rec: {hint}")


def check_rec_spec(
    name: str, value: Any, *, optional: bool = False
) -> str | tuple[str, ...] | None:
    """A ``.rec`` (or ``.idx``) argument: a URL string, or several as a tuple of them.

    Raises:
        TypeError: anything else (None too, unless ``optional``).
    """
    if value is None and optional:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str) and value:
        _not_a_folder(name, value)
        return value
    if isinstance(value, list | tuple) and value:
        items = tuple(os.fspath(v) if isinstance(v, os.PathLike) else v for v in value)
        if all(isinstance(v, str) and v for v in items):
            for item in items:
                _not_a_folder(name, item)
            return items
    raise TypeError(
        f"{name} must be a path or URL string (a shard pattern or glob too), or a list of "
        f"them, not {value!r}"
    )
