"""The ``recio`` command.

Argument helpers (from :mod:`recio._args`, which ``im2rec``, ``bench`` and ``train``
share), the dataset commands (:mod:`.records`) and the dispatcher (:mod:`.main`). The
console script's entry point is :func:`recio._command.main`.
"""

from .._args import (
    HelpFormatter,
    Parser,
    Refused,
    add_storage_option,
    at_least,
    describe,
    json_object,
    positive_float,
)
from .main import build_parser, main
from .records import check_idx, cmd_checksum, cmd_index, cmd_info, cmd_verify

__all__ = [
    "HelpFormatter",
    "Parser",
    "Refused",
    "add_storage_option",
    "at_least",
    "build_parser",
    "check_idx",
    "cmd_checksum",
    "cmd_index",
    "cmd_info",
    "cmd_verify",
    "describe",
    "json_object",
    "main",
    "positive_float",
]
