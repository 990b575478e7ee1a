"""The argument helpers every ``recio`` command shares (``im2rec``, ``bench``, ``train``, ``cli``).

It sits below all of them (in the base layer), so none of them imports back up into
:mod:`recio.cli` for its arguments.

Argument types (:func:`json_object`, :func:`at_least`, :func:`positive_float`), the
common options (:func:`add_storage_option`, :func:`add_debug_option`), recio's parser
(:class:`Parser`, :class:`HelpFormatter`, :func:`describe`), and :class:`Refused`, what a
command raises to decline.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import signal
import threading
from collections.abc import Iterator
from typing import NoReturn

__all__ = [
    "HelpFormatter",
    "Parser",
    "Refused",
    "add_debug_option",
    "add_storage_option",
    "at_least",
    "describe",
    "json_object",
    "positive_float",
    "restart_interval",
    "sigterm_as_interrupt",
]


def json_object(text: str) -> dict:
    """An argparse type: a JSON object (such as fsspec ``storage_options``)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object {{...}}, not {text!r}")
    return value


def at_least(minimum: int):
    """An argparse type: an integer no smaller than ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def positive_float(text: str) -> float:
    """An argparse type: a number greater than zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, not {text}")
    return value


def restart_interval(minimum: int):
    """An argparse type: a JPEG restart interval in MCUs (``minimum``..65535), or ``row``."""
    whole = at_least(minimum)

    def parse(text: str) -> int | str:
        if text == "row":
            return text
        value = whole(text)
        if value > 65535:  # the DRI segment's 16 bits
            raise argparse.ArgumentTypeError(f"must be at most 65535, not {value}")
        return value

    parse.__name__ = "MCUs or 'row'"
    return parse


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--storage-options JSON`` (fsspec options for remote URLs) to ``parser``."""
    parser.add_argument(
        "--storage-options",
        type=json_object,
        metavar="JSON",
        help="fsspec options for remote URLs as a JSON object, e.g. "
        '\'{"endpoint_url": "http://127.0.0.1:8333"}\'',
    )


class Refused(Exception):
    """A command declines to do what was asked (exit status 1); the message says why."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions and epilogs as written (examples keep their lines), defaults shown.

    A default is added to an option's help unless the help already speaks of one, the
    default is None, or the option is an on/off flag (its help says what it turns on).
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            "default" in text
            or action.default in (None, argparse.SUPPRESS)
            or isinstance(action.default, bool)
            or action.nargs == 0
        ):
            return text
        return super()._get_help_string(action)


def describe(doc: str | None) -> str:
    """A module docstring as a command's ``--help`` description: plain text, no Sphinx markup.

    Drops the "Modules:" paragraph (it is for readers of the code), reStructuredText's
    double backticks and roles such as ``:mod:`~x```; keeps the line breaks as written.
    """
    text = (doc or "").split("\n\nModules:")[0].strip("\n")
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "")


class Parser(argparse.ArgumentParser):
    """recio's ``ArgumentParser``: ``HelpFormatter``, and usage errors in one line on stderr."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE (see PROG --help)`` on stderr and exit with 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_debug_option(parser: argparse.ArgumentParser, dest: str = "debug") -> None:
    """Add ``--debug``: on an error, the whole traceback instead of one line."""
    parser.add_argument(
        "--debug",
        dest=dest,
        action="store_true",
        help="on an error, print the whole traceback instead of one line (also RECIO_DEBUG=1)",
    )


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops like Ctrl-C, so the writers are aborted rather than left half-written."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
