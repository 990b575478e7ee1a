"""decode_text: a text file's bytes as text with LF line ends, or the byte that is not UTF-8."""

from __future__ import annotations

import subprocess
import sys

import pytest

from recio._text import decode_text, lf_line_ends
from recio.errors import RecordIOError


def test_line_ends_as_python_text_files_read_them():
    assert decode_text(b"a\r\nb\rc\nd") == "a\nb\nc\nd"
    assert decode_text("é\n".encode()) == "é\n"
    assert lf_line_ends("x\r\n\r") == "x\n\n"


def test_a_byte_that_is_not_utf8_is_named_with_its_line():
    with pytest.raises(RecordIOError, match=r"byte 0xff on line 3") as info:
        decode_text(b"1\t0\n2\t8\n3\t\xff\n", path="x.idx")
    assert info.value.path == "x.idx" and info.value.offset == 10


def test_records_and_storage_read_text_files_with_one_decoder():
    from recio.records import format as record_format
    from recio.storage import whole

    assert record_format.decode_text is decode_text and whole.decode_text is decode_text


def test_the_record_format_loads_no_storage():
    code = "import sys, recio.records.format; print('recio.storage' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
