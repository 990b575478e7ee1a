"""Checks of user-given parameters, each error naming the parameter."""

from __future__ import annotations

import math
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
