"""The files MXNet's ImageRecordIter reads beside the ``.rec``: a mean image, an image list.

``mean_img`` is an NDArray file (``mx.nd.save``: MXNet writes ``{"mean_img": array}``) of
one (3, H, W) array in RGB order on the 0..255 scale, or a ``.npy`` of one. ``path_imglist``
is an im2rec ``.lst``: each image's labels by its index, which is the record's header id.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from ..errors import RecordIOError
from ..records.format import decode_text, parse_lst

_LIST_MAGIC = 0x112  # NDArray list file
_ARRAY_MAGICS = {0xF993FAC8: 1, 0xF993FAC9: 2, 0xF993FACA: 3}  # NDArray versions
_DTYPES = {0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32, 5: np.int8,
           6: np.int64}  # fmt: skip


def load_mean_image(path: str, shape: tuple[int, int, int]) -> np.ndarray:
    """The mean image at ``path`` as float32 (3, H, W), checked against ``shape``.

    Raises:
        FileNotFoundError: no such file (MXNet would compute one from the data and save it;
            recio does not: make it once, e.g. with numpy, and pass its path).
        ValueError: not an NDArray or .npy file of one array of ``shape``; the message names
            the file (and the byte offset).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"mean_img {path}: no such file (MXNet computes a missing one from the data; "
            "recio reads it only: save the mean of your images as (3, H, W) float32 with "
            "numpy.save or mx.nd.save and pass that)"
        )
    data = p.read_bytes()
    if data[:6] == b"\x93NUMPY":
        array = np.load(p, allow_pickle=False)
    else:
        array = _read_ndarray(data, path)
    array = np.asarray(array, dtype=np.float32)
    if array.shape != tuple(shape):
        raise ValueError(f"mean_img {path}: shape {array.shape}, data_shape is {tuple(shape)}")
    if not np.isfinite(array).all():
        raise ValueError(f"mean_img {path}: values must be finite")
    return array


def _read_ndarray(data: bytes, path: str) -> np.ndarray:
    """The one array of an ``mx.nd.save`` file (dense, on any device)."""
    pos = 0

    def take(fmt: str) -> tuple:
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > len(data):
            raise ValueError(f"mean_img {path}: ends at byte {len(data)} inside an NDArray")
        values = struct.unpack_from(fmt, data, pos)
        pos += size
        return values

    magic, _reserved, count = take("<QQQ")
    if magic != _LIST_MAGIC:
        raise ValueError(f"mean_img {path}: not an NDArray file or .npy (byte 0: {magic:#x})")
    if count != 1:
        raise ValueError(f"mean_img {path}: holds {count} arrays, needs one")
    at = pos
    (array_magic,) = take("<I")
    version = _ARRAY_MAGICS.get(array_magic)
    if version is None:
        raise ValueError(f"mean_img {path}: byte {at}: unknown NDArray magic {array_magic:#x}")
    if version >= 2:
        (stype,) = take("<i")
        if stype != 0:
            raise ValueError(f"mean_img {path}: byte {at + 4}: a sparse array (storage {stype})")
    (ndim,) = take("<I")
    shape = take(f"<{ndim}q" if version >= 2 else f"<{ndim}I")
    take("<ii")  # the device it was saved from
    at = pos
    (type_flag,) = take("<i")
    if type_flag not in _DTYPES:
        raise ValueError(f"mean_img {path}: byte {at}: unknown dtype code {type_flag}")
    dtype = np.dtype(_DTYPES[type_flag]).newbyteorder("<")
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if pos + nbytes > len(data):
        raise ValueError(f"mean_img {path}: ends at byte {len(data)} inside the array data")
    return np.frombuffer(data, dtype=dtype, count=int(np.prod(shape)), offset=pos).reshape(shape)


class ImageList:
    """Labels from an im2rec ``.lst`` by image index (MXNet's ``path_imglist``).

    A record's labels are the list's for its header id; MXNet takes them instead of the
    labels in the record's header.
    """

    def __init__(self, path: str, label_width: int) -> None:
        text = decode_text(Path(path).read_bytes(), path=path)
        entries = list(parse_lst(text.splitlines(), path=path))
        if not entries:
            raise RecordIOError("path_imglist: no images listed", path=path)
        self.path = path
        indices = np.array([e.index for e in entries], dtype=np.int64)
        order = np.argsort(indices, kind="stable")
        self.indices = indices[order]
        if (np.diff(self.indices) == 0).any():
            twice = int(self.indices[1:][np.diff(self.indices) == 0][0])
            raise RecordIOError(f"path_imglist: index {twice} listed twice", path=path)
        self.labels = np.zeros((len(entries), label_width), dtype=np.float32)
        for row, i in enumerate(order.tolist()):
            labels = entries[i].labels
            if len(labels) < label_width:
                raise RecordIOError(
                    f"path_imglist: index {entries[i].index} has {len(labels)} labels, "
                    f"label_width is {label_width}",
                    path=path,
                )
            self.labels[row] = labels[:label_width]

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """The labels (float32 N x label_width) of the records with header ``ids``.

        Raises:
            KeyError: an id the list does not have (named, with the list's path).
        """
        ids = np.asarray(ids, dtype=np.int64)
        rows = np.searchsorted(self.indices, ids)
        rows = np.minimum(rows, len(self.indices) - 1)
        missing = self.indices[rows] != ids
        if missing.any():
            raise KeyError(
                f"path_imglist {self.path} has no image with index {int(ids[missing][0])} "
                "(a record's header id)"
            )
        return self.labels[rows]
