"""recio.records.reader (and recio.reader): the reader's names, from the modules that hold them."""

import importlib

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
def test_every_name_imports_from_the_old_paths(path):
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
