"""URLs to fsspec filesystems: a missing backend names the extra that installs it."""

from __future__ import annotations

import fsspec
import pytest

from recio import storage


def test_missing_extra_names_it(monkeypatch):
    def no_backend(url, **kw):
        raise ImportError("No module named 'hdfs_native'")

    monkeypatch.setattr(fsspec.core, "url_to_fs", no_backend)
    with pytest.raises(ImportError, match=r"hdfs://.*\[hdfs\]"):
        storage.open_source("hdfs://nn:9000/x.rec")
    with pytest.raises(ImportError, match=r"s3://.*\[s3\]"):
        storage.filesystem("s3://b/x.rec")
