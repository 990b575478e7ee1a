"""recio's exceptions."""

from recio.errors import RecordIOError


def test_errors_are_value_errors():
    assert issubclass(RecordIOError, ValueError)
