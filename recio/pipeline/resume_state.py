"""Checking a ``state_dict()`` before an iterator resumes from it (NOTE [resume state]).

A state comes back from a checkpoint: written by another recio, by hand, or by code that
turned its numbers into floats. Every field the resume reads is checked for its type and
range first, and refused naming the field: an ``epoch`` of 1.5 (or ``True``) would be
truncated, and an old-format ``step`` past its epoch's end would resume an epoch with no
batch left, both without a word.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral
from typing import Any

from ..errors import ResumeStateError, ResumeStateTypeError

__all__ = ["check_state", "check_step", "refuse"]

# field -> its smallest value; None is allowed where state_dict() may write it
_WHOLE_FIELDS = {
    "epoch": 0,
    "consumed": None,  # may be negative under rollover: the sampler checks its range
    "step": 0,
    "batch_size": 1,
    "num_parts": 1,
    "part_index": 0,
    "block_parts": 1,
    "block_size": 1,
    "window": 1,
    "num_records": 0,
}
_OPTIONAL = ("block_parts", "block_size", "window")
_LIMIT = 1 << 62  # far beyond any real count; keeps the sampler's int64 arithmetic exact
_WHAT = "a state is the dict that state_dict() returns"


def check_state(state: Any) -> None:
    """Refuse a ``state`` that is no resumable ``state_dict()``.

    Raises:
        ResumeStateTypeError: ``state`` is not a mapping, or a field is not a whole number
            (``True``, 1.5 and "3" are refused).
        ResumeStateError: a missing field, or a number out of its range.
    """
    if not isinstance(state, Mapping):
        raise ResumeStateTypeError(
            f"cannot resume from a {type(state).__name__} ({_short(state)}): {_WHAT}"
        )
    missing = [k for k in ("epoch",) if k not in state]
    if "consumed" not in state and "step" not in state:  # old states have step only
        missing.append("consumed")
    if missing:
        held = ", ".join(sorted(map(str, state))[:8]) or "nothing"
        raise ResumeStateError(
            f"cannot resume from this state: it has no {missing[0]!r} field (it holds "
            f"{held}); {_WHAT}"
        )
    for key, low in _WHOLE_FIELDS.items():
        if key not in state or (key in _OPTIONAL and state[key] is None):
            continue
        value = state[key]
        if isinstance(value, bool) or not isinstance(value, Integral):
            raise ResumeStateTypeError(
                f"cannot resume from this state: its field {key!r} is {value!r} "
                f"({type(value).__name__}), not a whole number"
            )
        if (low is not None and value < low) or abs(int(value)) >= _LIMIT:
            bound = f">= {low}" if low is not None else "in range"
            raise ResumeStateError(
                f"cannot resume from this state: its field {key!r} is {int(value)}, not {bound}"
            )


def check_step(step: int, steps: int, epoch: int) -> None:
    """Refuse an old-format ``step`` past the ``steps`` of its epoch (``steps``: the end)."""
    if step > steps:
        raise ResumeStateError(
            f"cannot resume from this state: its field 'step' is {step}, past the end of "
            f"epoch {epoch} (step {steps}) of the run that saved it"
        )


def refuse(key: str, theirs: Any, mine: Any, why: str = "") -> None:
    """Refuse a state saved with ``key=theirs`` where this iterator has ``key=mine``."""
    raise ResumeStateError(
        f"cannot resume from this state: it was saved with {key}={theirs!r}, this iterator "
        f"has {key}={mine!r}" + (f" ({why})" if why else "")
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
