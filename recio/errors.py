"""Exceptions raised by recio (decode part; merged with the format errors upstream)."""

from __future__ import annotations


class DecodeError(ValueError):
    """An image of a batch could not be decoded.

    Attributes:
        index: position of the image in the batch.
        status: the decoder's status code (see ``recio.decode.STATUS_NAMES``).
    """

    def __init__(self, message: str, *, index: int, status: int) -> None:
        super().__init__(f"image {index} of the batch: {message}")
        self.index = index
        self.status = status
