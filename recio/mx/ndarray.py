"""MXNet's ``NDArray`` as InsightFace's recognition code uses it: a numpy array in a wrapper.

``from recio.mx import ndarray as nd`` ports ``from mxnet import ndarray as nd``. An
:class:`NDArray` holds a numpy array (CPU only, no autograd): ``asnumpy()``, ``shape``,
``dtype``, indexing and slice assignment (a slice is a view, so ``data[i][:] = img`` writes
into ``data`` as in MXNet), ``astype``, arithmetic; ``array``, ``empty``, ``zeros``,
``ones``, ``transpose``, ``flip`` and ``slice_axis`` as MXNet's functions of those names.
Any other MXNet ``nd`` name raises :class:`~recio.mx.unsupported.UnsupportedMXNetName`
saying what to use instead (numpy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .unsupported import unsupported

__all__ = [
    "NDArray",
    "array",
    "empty",
    "flip",
    "ones",
    "slice_axis",
    "transpose",
    "unwrap",
    "zeros",
]


def unwrap(value: Any) -> Any:
    """The numpy array behind an :class:`NDArray` (no copy); any other value as it is."""
    return value._data if isinstance(value, NDArray) else value


class NDArray:
    """A numpy array with MXNet's ``NDArray`` methods; ``np.asarray(x)`` gives the array."""

    __slots__ = ("_data",)

    def __init__(self, data: np.ndarray) -> None:
        self._data = data

    def asnumpy(self) -> np.ndarray:
        """The values as a numpy array (a copy, as MXNet's, so writing to it changes nothing)."""
        return self._data.copy()

    def asscalar(self) -> Any:
        """The one value of a size-1 array."""
        if self._data.size != 1:
            raise ValueError(f"asscalar needs an array of size 1, not of shape {self.shape}")
        return self._data.reshape(()).item()

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape."""
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of its values."""
        return self._data.dtype

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return self._data.ndim

    @property
    def size(self) -> int:
        """The number of values."""
        return self._data.size

    def astype(self, dtype: Any, copy: bool = True) -> NDArray:
        """The values as ``dtype`` (a new array unless ``copy=False`` allows the same)."""
        return NDArray(self._data.astype(dtype, copy=copy))

    def copy(self) -> NDArray:
        """A new array of the same values."""
        return NDArray(self._data.copy())

    def reshape(self, *shape: Any) -> NDArray:
        """The values in another shape (a view where numpy can)."""
        return NDArray(self._data.reshape(*shape))

    def transpose(self, axes: Sequence[int] | None = None) -> NDArray:
        """The axes permuted (reversed by default)."""
        return NDArray(self._data.transpose(axes))

    def __getattr__(self, name: str) -> Any:
        return unsupported(f"NDArray.{name}", name)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._data if dtype is None else self._data.astype(dtype)

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, key: Any) -> NDArray:
        return NDArray(self._data[unwrap(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        # MXNet casts on assignment (uint8 pixels into a float32 batch)
        self._data[unwrap(key)] = unwrap(value)

    def __repr__(self) -> str:
        return f"\n{self._data!r}\n<NDArray {'x'.join(map(str, self.shape))} @cpu(0)>"

    def _binary(self, other: Any, op: Any) -> NDArray:
        return NDArray(op(self._data, unwrap(other)))

    def _inplace(self, other: Any, op: Any) -> NDArray:
        op(self._data, unwrap(other), out=self._data, casting="unsafe")
        return self

    def __add__(self, o: Any) -> NDArray:
        return self._binary(o, np.add)

    def __radd__(self, o: Any) -> NDArray:
        return self._binary(o, np.add)

    def __sub__(self, o: Any) -> NDArray:
        return self._binary(o, np.subtract)

    def __rsub__(self, o: Any) -> NDArray:
        return NDArray(np.subtract(unwrap(o), self._data))

    def __mul__(self, o: Any) -> NDArray:
        return self._binary(o, np.multiply)

    def __rmul__(self, o: Any) -> NDArray:
        return self._binary(o, np.multiply)

    def __truediv__(self, o: Any) -> NDArray:
        return self._binary(o, np.true_divide)

    def __neg__(self) -> NDArray:
        return NDArray(-self._data)

    def __iadd__(self, o: Any) -> NDArray:
        return self._inplace(o, np.add)

    def __isub__(self, o: Any) -> NDArray:
        return self._inplace(o, np.subtract)

    def __imul__(self, o: Any) -> NDArray:
        return self._inplace(o, np.multiply)

    def __itruediv__(self, o: Any) -> NDArray:
        return self._inplace(o, np.true_divide)


def array(source_array: Any, ctx: Any = None, dtype: Any = None) -> NDArray:
    """A new array of ``source_array``'s values (float32 unless it is an array with a dtype)."""
    values = unwrap(source_array)
    if dtype is None:
        dtype = values.dtype if isinstance(values, np.ndarray) else np.float32
    return NDArray(np.array(values, dtype=dtype))


def empty(shape: int | Sequence[int], ctx: Any = None, dtype: Any = "float32") -> NDArray:
    """An array of ``shape`` whose values are not set (float32 by default, as MXNet's)."""
    return NDArray(np.empty(shape, dtype=dtype))


def zeros(shape: int | Sequence[int], ctx: Any = None, dtype: Any = "float32") -> NDArray:
    """An array of ``shape`` of zeros (float32 by default)."""
    return NDArray(np.zeros(shape, dtype=dtype))


def ones(shape: int | Sequence[int], ctx: Any = None, dtype: Any = "float32") -> NDArray:
    """An array of ``shape`` of ones (float32 by default)."""
    return NDArray(np.ones(shape, dtype=dtype))


def transpose(data: NDArray, axes: Sequence[int] = ()) -> NDArray:
    """``data`` with its axes permuted (reversed when ``axes`` is empty); a new array."""
    return NDArray(np.ascontiguousarray(np.transpose(unwrap(data), tuple(axes) or None)))


def flip(data: NDArray, axis: int | Sequence[int]) -> NDArray:
    """``data`` reversed along ``axis``; a new array."""
    return NDArray(np.ascontiguousarray(np.flip(unwrap(data), axis)))


def slice_axis(data: NDArray, axis: int, begin: int, end: int | None) -> NDArray:
    """``data[begin:end]`` along ``axis``; a new array."""
    index = [slice(None)] * unwrap(data).ndim
    index[axis] = slice(begin, end)
    return NDArray(unwrap(data)[tuple(index)].copy())


def __getattr__(name: str) -> Any:
    return unsupported(f"mx.nd.{name}", name)
