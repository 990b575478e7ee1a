"""The ``recio`` command.

Shared argument helpers (:mod:`.args`), the dataset commands (:mod:`.records`) and the
dispatcher (:mod:`.main`).
"""

import os

# recio's commands do no linear algebra. Without this, numpy's OpenBLAS starts a thread per
# core at import and they spin for a while, taking CPU from the decode threads (about 4 % of
# an im2rec run on 2 cores). A value the user set wins. (Here, before any module of the
# package imports numpy.)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .args import (  # noqa: E402
    HelpFormatter,
    Parser,
    Refused,
    add_storage_option,
    at_least,
    describe,
    json_object,
    positive_float,
)
from .main import build_parser, main  # noqa: E402
from .records import check_idx, cmd_checksum, cmd_index, cmd_info, cmd_verify  # noqa: E402

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
