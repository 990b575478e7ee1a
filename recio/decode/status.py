"""The decoder's status codes: one per image, 0 for success.

The codes are defined once, by the C core (``RC_STATUS_LIST`` in ``native/decode_core.h``,
exported as ``recio._native.STATUS_NAMES``); this enum names them in Python, where the
Pillow path and the JPEG checks report them too, and works without the extension. A test
checks the two against each other both ways.
"""

from __future__ import annotations

import enum


class Status(enum.IntEnum):
    """Why an image of a batch did (not) decode."""

    OK = 0
    EMPTY = 1
    UNSUPPORTED = 2  # not a JPEG: the native path hands it to Pillow
    CORRUPT = 3  # an error, or a warning that the data is damaged (bad Huffman code)
    TRUNCATED = 4  # data ended early, or an EOI marker padded it: pixels written, incomplete
    TOO_LARGE = 5  # over max_pixels or max_decode_bytes: refused before anything is allocated
    NOMEM = 6
    BAD_PARAM = 7  # e.g. a crop window that misses the image
    RECORD = 8  # decode_records: a record header the reader parses the exact way (never kept)

    @property
    def text(self) -> str:
        """Lower-case words for messages ("too large")."""
        return STATUS_NAMES[self]


STATUS_OK = Status.OK
STATUS_EMPTY = Status.EMPTY
STATUS_UNSUPPORTED = Status.UNSUPPORTED
STATUS_CORRUPT = Status.CORRUPT
STATUS_TRUNCATED = Status.TRUNCATED
STATUS_TOO_LARGE = Status.TOO_LARGE
STATUS_NOMEM = Status.NOMEM
STATUS_BAD_PARAM = Status.BAD_PARAM
# as a plain int, for the per-batch comparisons (an enum member's lookup costs a microsecond)
UNSUPPORTED_CODE = int(Status.UNSUPPORTED)
STATUS_RECORD = Status.RECORD
STATUS_NAMES: dict[int, str] = {
    Status.OK: "ok",
    Status.EMPTY: "empty",
    Status.UNSUPPORTED: "unsupported",
    Status.CORRUPT: "corrupt",
    Status.TRUNCATED: "truncated",
    Status.TOO_LARGE: "too large",
    Status.NOMEM: "out of memory",
    Status.BAD_PARAM: "bad parameter",
    Status.RECORD: "record left to the exact parse",
}
