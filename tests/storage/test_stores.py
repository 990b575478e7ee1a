"""Which client serves a URL, and fsspec-style storage options mapped onto obstore's config.

The stores are built, not contacted: obstore's stores report the config they hold, so the
mapping is checked without a server. Azure has no emulator that installs here, so its
configuration and URL handling are tested this way only (docs/storage.md says so).
"""

from __future__ import annotations

import sys

import pytest

from recio import storage
from recio.storage import stores
from recio.storage.objectsource import ObjectStoreSource

obstore = pytest.importorskip("obstore", reason="the cloud extra (obstore)")


def config_of(url: str, options: dict | None = None) -> tuple[dict, dict, str]:
    """The store's config, its client options and the key, for ``url``."""
    loc = stores.store_for(url, options)
    return dict(loc.store.config), dict(loc.store.client_options or {}), loc.key


def test_which_urls_obstore_serves():
    for url in ("s3://b/k", "s3a://b/k", "gs://b/k", "az://c/k", "abfs://c/k", "https://h/x"):
        assert stores.uses_obstore(url), url
    for url in ("memory://x", "hdfs://nn/x", "http://h/x", "/tmp/x", "file:///x", "webhdfs://h/x"):
        assert not stores.uses_obstore(url), url
    assert not stores.uses_obstore("s3://b/k", storage.FetchOptions(client="fsspec"))


def test_without_obstore_every_url_falls_back_to_fsspec(monkeypatch, memfs):
    monkeypatch.setitem(sys.modules, "obstore", None)  # importing it fails
    assert stores.obstore_module() is None
    assert not stores.uses_obstore("s3://b/k") and not stores.uses_obstore("https://h/x")
    with pytest.raises(ImportError, match=r"needs obstore: pip install -e '\.\[cloud\]'"):
        stores.uses_obstore("s3://b/k", storage.FetchOptions(client="obstore"))
    memfs.pipe("/f.bin", b"0123456789")
    with storage.open_source("memory://f.bin") as src:  # fsspec's schemes: unchanged
        assert type(src) is storage.FsspecSource and bytes(src.read(2, 3)) == b"234"


def test_fetch_options_refuse_an_unknown_client():
    with pytest.raises(ValueError, match="'boto'"):
        storage.FetchOptions(client="boto")


def test_s3_names_that_s3fs_users_pass():
    config, client, key = config_of(
        "s3://data/train/d.rec",
        {"key": "AK", "secret": "SK", "token": "ST", "endpoint_url": "http://127.0.0.1:9000",
         "skip_instance_cache": True, "config_kwargs": {"connect_timeout": 2, "read_timeout": 7,
         "retries": {"max_attempts": 2}, "max_pool_connections": 64}},
    )  # fmt: skip
    assert key == "train/d.rec"
    assert config["access_key_id"] == "AK" and config["secret_access_key"] == "SK"
    assert config["session_token"] == "ST" and config["bucket"] == "data"
    assert config["endpoint"] == "http://127.0.0.1:9000"
    assert config["region"] == "us-east-1"  # an S3-compatible server: any region signs
    assert client["allow_http"] == "true"  # an http:// endpoint
    assert client["connect_timeout"] == "2s" and client["timeout"] == "7s"


def test_s3_client_kwargs_region_anon_and_requester_pays():
    config, client, _ = config_of(
        "s3://data/k",
        {"anon": True, "requester_pays": True,
         "client_kwargs": {"endpoint_url": "https://s3.example", "region_name": "eu-west-1",
                           "verify": False}},
    )  # fmt: skip
    assert config["skip_signature"] == "true" and config["request_payer"] == "true"
    assert config["endpoint"] == "https://s3.example"
    assert config["region"] == "eu-west-1"
    assert client["allow_invalid_certificates"] == "true" and "allow_http" not in client


def test_an_http_endpoint_from_the_environment_is_allowed(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    _, client, _ = config_of("s3://data/k", {"anon": True})
    assert client["allow_http"] == "true"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://s3.example")
    _, client, _ = config_of("s3://data/k", {"anon": True})
    assert "allow_http" not in client


def test_obstore_names_pass_as_they_are():
    config, _, _ = config_of(
        "s3://data/k", {"region": "ap-south-1", "access_key_id": "AK", "secret_access_key": "S"}
    )
    assert config["region"] == "ap-south-1" and config["access_key_id"] == "AK"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"profile": "dev"}, "'profile'"),
        ({"client_kwargs": {"aws_account_id": "1"}}, "aws_account_id"),
        ({"config_kwargs": {"signature_version": "s3v4"}}, "signature_version"),
    ],
)
def test_s3_options_obstore_cannot_take_are_refused_with_the_fix(options, named):
    with pytest.raises(ValueError, match=named) as refused:
        stores.store_for("s3://data/k", options)
    assert "FetchOptions(client='fsspec')" in str(refused.value)


def test_an_unknown_obstore_key_names_the_url():
    with pytest.raises(ValueError, match="no_such_key") as refused:
        storage.open_source("s3://data/k", {"no_such_key": 1})
    assert "s3://data/k" in str(refused.value)


def test_gcs_names_that_gcsfs_users_pass(tmp_path):
    config, _, key = config_of("gs://bkt/a/b.rec", {"token": "anon", "project": "p"})
    assert key == "a/b.rec" and config["bucket"] == "bkt"
    assert config["skip_signature"] == "true"
    config, client, _ = config_of("gs://bkt/x", {"endpoint_url": "http://127.0.0.1:4443"})
    assert config["base_url"] == "http://127.0.0.1:4443" and client["allow_http"]
    # a token file is the service account's key file: read (here missing, so refused)
    with pytest.raises(ValueError, match=r"gs://bkt/x: .*service account file .*sa\.json"):
        stores.store_for("gs://bkt/x", {"token": str(tmp_path / "sa.json")})


def test_azure_urls_and_adlfs_names():
    config, _, key = config_of(
        "abfs://box/data/train.rec", {"account_name": "acct", "account_key": "a2V5"}
    )
    assert key == "data/train.rec"
    assert config["container_name"] == "box"
    assert config["account_name"] == "acct"
    assert config["account_key"] == "a2V5"
    config, _, key = config_of("abfss://box@acct2.dfs.core.windows.net/d/t.rec", {"anon": True})
    assert key == "d/t.rec" and config["account_name"] == "acct2"
    assert config["skip_signature"] == "true"
    config, _, key = config_of(
        "az://box/t.rec",
        {"connection_string": "DefaultEndpointsProtocol=https;AccountName=acct3;"
                              "AccountKey=a2V5;EndpointSuffix=core.windows.net"},
    )  # fmt: skip
    assert key == "t.rec" and config["account_name"] == "acct3"
    assert config["account_key"] == "a2V5"
    config, _, _ = config_of("az://box/t.rec", {"account_name": "a", "sas_token": "sv=1&sig=2"})
    assert config["sas_key"] == "sv=1&sig=2"


def test_azure_without_an_account_says_how_to_name_it():
    with pytest.raises(ValueError, match="account_name"):
        stores.store_for("az://box/t.rec")
    with pytest.raises(ValueError, match="az://CONTAINER/KEY"):
        stores.store_for("az://box", {"account_name": "a"})


def test_urls_without_a_bucket_or_key_are_refused():
    with pytest.raises(ValueError, match="s3://BUCKET/KEY"):
        stores.store_for("s3://just-a-bucket")
    with pytest.raises(ValueError, match="not memory://"):
        stores.store_for("memory://x")


def test_one_store_per_bucket_and_options_within_one_client():
    with storage.one_client():
        a = stores.store_for("s3://data/a.rec", {"anon": True})
        b = stores.store_for("s3://data/b.idx", {"anon": True})
        c = stores.store_for("s3://other/b.idx", {"anon": True})
        d = stores.store_for("https://h.example/x/a.rec")
        e = stores.store_for("https://h.example/y/a.rec")
    assert a.store is b.store and a.key == "a.rec" and b.key == "b.idx"
    assert c.store is not a.store and d.store is not e.store  # HTTP: one store per folder
    assert stores.store_for("s3://data/a.rec", {"anon": True}).store is not a.store


def test_errors_name_the_store_the_key_and_the_fix():
    from obstore import exceptions as ox

    url = "s3://data/k"
    missing = stores.translate(ox.NotFoundError("Object at location k not found"), url, "S3 x")
    assert isinstance(missing, FileNotFoundError) and missing.filename == url
    assert "no such object in S3 x" in str(missing)
    denied = stores.translate(ox.PermissionDeniedError("403"), url, "S3 bucket 'data'")
    assert isinstance(denied, PermissionError) and "check the credentials" in str(denied)
    token = stores.translate(ox.GenericError("Error performing token request"), url, "GCS b")
    assert isinstance(token, PermissionError) and "pass credentials" in str(token)
    flaky = stores.translate(ox.GenericError("503 Slow Down"), url, "S3 bucket 'data'")
    assert isinstance(flaky, ConnectionError) and storage.is_transient(flaky)
    assert "S3 bucket 'data', key s3://data/k" in str(flaky)


def test_an_object_store_source_pickles_as_its_url(monkeypatch):
    source = ObjectStoreSource.__new__(ObjectStoreSource)
    source.url, source.storage_options = "s3://data/k", {"anon": True}
    source.fetch = storage.FetchOptions(client="obstore")
    state = source.__getstate__()
    assert state == {"url": "s3://data/k", "storage_options": {"anon": True},
                     "fetch": storage.FetchOptions(client="obstore")}  # fmt: skip
