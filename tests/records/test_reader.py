"""recio.records.reader (and recio.reader): the reader's names, from the modules that hold them."""

import contextlib
import importlib
import sys

import pytest

OLD_NAMES = [
    "RecordFile",
    "RecordCursor",
    "read_batch",
    "batch_headers",
    "BatchRecords",
    "default_idx_path",
    "scan_source",
    "IndexWarning",
    "check_label_width",
    "check_offsets",
    "check_pair",
    "not_a_record_start",
    "record_end",
]


@pytest.mark.parametrize("path", ["recio.reader", "recio.records.reader"])
def test_every_name_imports_from_the_old_paths(path, monkeypatch):
    old = path == "recio.reader"
    if old:  # imported afresh, so that it warns here (the same module object comes back)
        monkeypatch.delitem(sys.modules, path, raising=False)
    with (
        pytest.warns(DeprecationWarning, match="import recio.records.reader instead")
        if old
        else contextlib.nullcontext()
    ):
        module = importlib.import_module(path)
    new = {
        "RecordFile": "recio.records.file",
        "RecordCursor": "recio.records.cursor",
        "read_batch": "recio.records.batch",
        "batch_headers": "recio.records.batch",
        "BatchRecords": "recio.records.batch",
        "default_idx_path": "recio.records.index",
        "scan_source": "recio.records.scan",
        "IndexWarning": "recio.errors",
    }
    for name in OLD_NAMES:
        assert hasattr(module, name), name
    for name, home in new.items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name
