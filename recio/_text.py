"""The bytes of a text file (an ``.idx``, a ``.lst``) as text, or an error that names the byte."""

from __future__ import annotations

from .errors import RecordIOError

__all__ = ["decode_text", "lf_line_ends"]


def decode_text(data: bytes, *, path: str | None = None) -> str:
    """The bytes of a text file (an ``.idx``, a ``.lst``) as UTF-8 text.

    Line ends are read as Python's text files read them (CRLF and CR as LF).

    Raises:
        RecordIOError: the bytes are not UTF-8 (names the file, byte and line).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise RecordIOError(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} on line {line} ({exc.reason})",
            path=path,
            offset=exc.start,
        ) from None
    return lf_line_ends(text)


def lf_line_ends(text: str) -> str:
    """``text`` with CRLF and lone CR line ends as LF."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text
