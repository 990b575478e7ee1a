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


def test_one_client_makes_one_filesystem_per_protocol_and_options():
    """Inside one_client(), equal options give one instance even with skip_instance_cache
    (fsspec's cache would make one per call); outside it, and for other options, fsspec's own."""
    fresh = {"skip_instance_cache": True}
    with storage.one_client():
        a, pa = storage.filesystem("memory://one/a.rec", fresh)
        b, pb = storage.filesystem("memory://one/b.idx", dict(fresh))
        c, _ = storage.filesystem("memory://one/a.rec", {**fresh, "other": 1})
    assert a is b and c is not a
    assert (pa, pb) == ("/one/a.rec", "/one/b.idx")
    d, _ = storage.filesystem("memory://one/a.rec", fresh)
    e, _ = storage.filesystem("memory://one/a.rec", fresh)
    assert d is not a and e is not d
