"""Checks of user-given parameters, each error naming the parameter."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np


def check_int(name: str, value: Any, minimum: int | None = None) -> int:
    """``value`` as an int (numpy's too; bools and strings refused), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, not {type(value).__name__} {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value}")
    return int(value)


def check_number(
    name: str, value: Any, *, finite: bool = True, minimum: float | None = None
) -> float:
    """``value`` as a float (an int or numpy number too), finite, at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a number, not {type(value).__name__} {value!r}")
    if finite and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, not {value}")
    if minimum is not None and not value >= minimum:  # (NaN fails too)
        raise ValueError(f"{name} must be at least {minimum}, not {value}")
    return float(value)


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``, else a ValueError listing them."""
    if value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {listed}, not {value!r}")
    return value


def check_data_shape(value: Any) -> tuple[int, int, int]:
    """``data_shape``: ``(3, height, width)``, channels first as in MXNet, sizes >= 1.

    Raises:
        ValueError: anything else, in one sentence that shows the value and what to give
            (the channels-first order when the value looks like ``(height, width, 3)``).
    """
    shape: tuple = ()
    if not isinstance(value, str | bytes):
        try:
            shape = tuple(_whole(v) for v in value)
        except (TypeError, ValueError):
            shape = ()
    if len(shape) == 3 and min(shape) >= 1 and shape[0] != 3 and shape[2] == 3:
        raise ValueError(
            f"data_shape is channels first, (3, height, width): give {(3, *shape[:2])}, not "
            f"{value!r}"
        )
    if len(shape) != 3 or shape[0] != 3 or min(shape) < 1:
        raise ValueError(
            f"data_shape must be (3, height, width): RGB channels first, positive sizes, not "
            f"{value!r}"
        )
    return shape  # type: ignore[return-value]


def _whole(value: Any) -> int:
    """An integer, or a float that is one (224.0); anything else a TypeError/ValueError."""
    if isinstance(value, bool):
        raise TypeError("a bool is no size")
    if isinstance(value, float | np.floating):
        if not float(value).is_integer():
            raise ValueError(f"{value} is no whole size")
        return int(value)
    return operator.index(value)
