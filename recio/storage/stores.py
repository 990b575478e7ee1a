"""Object stores through obstore: which URLs it serves, and the store for one.

obstore (Python bindings to the Rust ``object_store`` crate) serves ``s3://``, ``gs://``,
``az://`` / ``abfs://`` and ``https://`` URLs by default where it is installed (the
``cloud`` extra); every other scheme, and these too without obstore or with
``FetchOptions(client="fsspec")``, goes through fsspec. ``storage_options`` take the
names fsspec's backends (s3fs, gcsfs, adlfs, HTTP) take and are mapped onto obstore's
configuration here (:func:`store_for`); obstore's own key names pass as they are. An
option that has no obstore meaning is refused naming the key and what to do instead.

Retries are recio's (:mod:`recio.storage.retry`: one loop that names the range and counts
its attempts): the store is built with obstore's own retries off.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .._install import install_hint
from .urls import shared_client, split_protocol

if TYPE_CHECKING:
    from .options import FetchOptions

__all__ = ["SCHEMES", "StoreLocation", "obstore_module", "store_for", "translate", "uses_obstore"]

#: URL scheme -> the obstore store that serves it.
SCHEMES = {
    "s3": "s3",
    "s3a": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "az": "azure",
    "azure": "azure",
    "abfs": "azure",
    "abfss": "azure",
    "https": "http",
}

# fsspec options that tune fsspec's own machinery (its instance and listing caches, its
# buffered files, botocore's pool and retries): obstore has nothing of them to set.
_FSSPEC_ONLY = {
    "skip_instance_cache",
    "use_listings_cache",
    "listings_expiry_time",
    "max_paths",
    "default_block_size",
    "default_fill_cache",
    "default_cache_type",
    "asynchronous",
    "loop",
    "version_aware",
    "cache_regions",
    "project",
    "consistency",
    "block_size",
}


_FSSPEC_HINT = "pass fetch=FetchOptions(client='fsspec') to go through fsspec"


def obstore_module() -> Any:
    """The ``obstore`` module, or None where it cannot be imported."""
    try:
        import obstore
    except ImportError:
        return None
    return obstore


def uses_obstore(url: str, fetch: FetchOptions | None = None) -> bool:
    """Whether ``url`` is read and written through obstore (see the module's docstring).

    Raises:
        ImportError: ``fetch.client`` is "obstore" and obstore is not installed.
    """
    client = "auto" if fetch is None else fetch.client
    if client == "fsspec" or split_protocol(url)[0] not in SCHEMES:
        return False
    if obstore_module() is not None:
        return True
    if client == "obstore":
        raise ImportError(
            f"FetchOptions(client='obstore') for {url} needs obstore: {install_hint('cloud')}"
        )
    return False


class StoreLocation:
    """Where a URL's object is: its store (made once) and the key within it.

    ``where`` names the store for messages (``"S3 bucket 'data'"``).
    """

    def __init__(self, store: Any, key: str, where: str) -> None:
        self.store, self.key, self.where = store, key, where


def store_for(url: str, storage_options: dict[str, Any] | None = None) -> StoreLocation:
    """The obstore store and key for ``url``, configured from fsspec-style options.

    Raises:
        ValueError: the URL names no bucket or container, or an option has no obstore
            meaning (the message names it and what to pass instead).
        ImportError: obstore is not installed.
    """
    if obstore_module() is None:
        raise ImportError(f"reading {url} through obstore needs it: {install_hint('cloud')}")
    from fsspec.utils import tokenize

    protocol, rest = split_protocol(url)
    if protocol not in SCHEMES:
        raise ValueError(f"{url}: obstore serves {sorted(SCHEMES)} URLs, not {protocol}://")
    # one store per bucket (container; for HTTP, folder: its store is rooted there)
    head = rest.rpartition("/")[0] if SCHEMES[protocol] == "http" else rest.split("/", 1)[0]
    try:
        location = shared_client(
            ("obstore", protocol, head, tokenize(storage_options or {})),
            lambda: _make_store(url, storage_options),
        )
    except ValueError:
        raise
    except Exception as exc:  # obstore's own check of the config: names no URL
        text = str(exc).split("\n\nDebug source:", 1)[0].strip()
        raise ValueError(f"{url}: the store's configuration is refused: {text}") from exc
    return StoreLocation(location.store, _key(url, protocol, rest), location.where)


def _key(url: str, protocol: str, rest: str) -> str:
    """The object's key within its store (for https://, its name within its folder)."""
    if SCHEMES[protocol] == "http":
        return urlsplit(url).path.rpartition("/")[2]
    return rest.partition("/")[2]


def _make_store(url: str, storage_options: dict[str, Any] | None) -> StoreLocation:
    from obstore import store as stores

    protocol, rest = split_protocol(url)
    kind = SCHEMES[protocol]
    options = dict(storage_options or {})
    client = _client_options(url, options)
    retry = {"max_retries": 0, "retry_timeout": timedelta(seconds=60)}  # recio's loop retries
    if kind == "http":
        parts = urlsplit(url)
        base, _, key = parts.path.rpartition("/")
        _refuse_left(url, options, "HTTP")
        store = stores.HTTPStore.from_url(
            f"{parts.scheme}://{parts.netloc}{base}/", client_options=client, retry_config=retry
        )
        return StoreLocation(store, key, f"HTTP server {parts.netloc}")
    if kind == "azure":
        container, key, config = _azure(url, rest, options)
        store = stores.AzureStore(
            container, config=config, client_options=client, retry_config=retry
        )
        return StoreLocation(store, key, f"Azure container '{container}'")
    bucket, _, key = rest.partition("/")
    if not bucket or not key:
        raise ValueError(f"{url}: an object URL is {protocol}://BUCKET/KEY")
    if kind == "s3":
        config = _s3(options)
        store = stores.S3Store(bucket, config=config, client_options=client, retry_config=retry)
        return StoreLocation(store, key, f"S3 bucket '{bucket}'")
    config = _gcs(options)
    store = stores.GCSStore(bucket, config=config, client_options=client, retry_config=retry)
    return StoreLocation(store, key, f"GCS bucket '{bucket}'")


def _client_options(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """HTTP client settings: bounded timeouts (so a dead server fails in seconds), TLS.

    ``client_kwargs.verify`` (botocore's) maps to TLS checks: False turns them off, a path
    adds that CA bundle to the trusted roots.
    """
    config = dict(options.pop("config_kwargs", None) or {})
    client_kwargs = options.get("client_kwargs") or {}
    client = {
        "connect_timeout": timedelta(seconds=float(config.pop("connect_timeout", 5))),
        "timeout": timedelta(seconds=float(config.pop("read_timeout", 30))),
    }
    for key in ("retries", "max_pool_connections"):  # recio retries; obstore pools itself
        config.pop(key, None)
    addressing = (config.pop("s3", None) or {}).get("addressing_style")
    if addressing == "virtual":
        options["virtual_hosted_style_request"] = True
    if config:
        raise ValueError(
            f"{url}: config_kwargs {sorted(config)} have no obstore setting; {_FSSPEC_HINT}"
        )
    verify = client_kwargs.get("verify", options.pop("verify", None))
    if verify is False:
        client["allow_invalid_certificates"] = True
    elif isinstance(verify, str):
        with open(verify, "rb") as f:
            client["root_certificate"] = f.read()
    client.update(options.pop("client_options", None) or {})
    endpoint = client_kwargs.get("endpoint_url") or options.get("endpoint_url") or ""
    if not endpoint and SCHEMES[split_protocol(url)[0]] == "s3":  # obstore reads it too
        endpoint = os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT") or ""
    if endpoint.startswith("http://") or url.startswith("http://"):
        client["allow_http"] = True
    return client


def _s3(options: dict[str, Any]) -> dict[str, Any]:
    """S3Store's config from s3fs's option names, and obstore's own.

    s3fs's: ``key``, ``secret``, ``token``, ``anon``, ``endpoint_url``, ``client_kwargs``
    (``endpoint_url``, ``region_name``, ``verify``), ``requester_pays``.
    """
    client_kwargs = dict(options.pop("client_kwargs", None) or {})
    names = {
        "key": "access_key_id",
        "aws_access_key_id": "access_key_id",
        "secret": "secret_access_key",
        "aws_secret_access_key": "secret_access_key",
        "token": "session_token",
        "aws_session_token": "session_token",
        "endpoint_url": "endpoint",
        "region_name": "region",
    }
    config: dict[str, Any] = {}
    for source in (client_kwargs, options):
        for name in list(source):
            if name in names:
                config[names[name]] = source.pop(name)
    client_kwargs.pop("verify", None)
    if client_kwargs:
        raise ValueError(
            f"client_kwargs {sorted(client_kwargs)} have no obstore setting; {_FSSPEC_HINT}"
        )
    if options.pop("anon", False):
        config["skip_signature"] = True
    if options.pop("requester_pays", False):
        config["request_payer"] = True
    if "profile" in options:
        raise ValueError(
            f"storage option 'profile' ({options['profile']!r}): obstore reads "
            "credentials from the environment (AWS_ACCESS_KEY_ID ...), IMDS, ECS "
            "and web identity, not from profiles; pass key/secret, or "
            f"{_FSSPEC_HINT} (botocore reads profiles)"
        )
    if "endpoint" in config:  # S3-compatible servers: signed for a region all accept
        config.setdefault("region", "us-east-1")
    _pass_through(options, config)
    return config


def _gcs(options: dict[str, Any]) -> dict[str, Any]:
    """GCSStore's config from gcsfs's option names (``token``, ``endpoint_url``)."""
    config: dict[str, Any] = {}
    token = options.pop("token", None)
    if token == "anon" or options.pop("anon", False):
        config["skip_signature"] = True
    elif isinstance(token, dict):
        config["service_account_key"] = json.dumps(token)
    elif isinstance(token, str) and token not in ("google_default", "cloud", "browser"):
        config["service_account"] = token  # a service account's JSON key file
    if "endpoint_url" in options:
        config["base_url"] = options.pop("endpoint_url")
    _pass_through(options, config)
    return config


def _azure(url: str, rest: str, options: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """The container, the key and AzureStore's config from adlfs's option names.

    URLs: ``az://CONTAINER/KEY`` and ``abfs[s]://CONTAINER/KEY`` (the account in
    ``account_name``, as adlfs takes it), ``abfs[s]://CONTAINER@ACCOUNT.dfs.core.windows.net/KEY``.
    """
    head, _, key = rest.partition("/")
    container, _, host = head.partition("@")
    config: dict[str, Any] = {}
    if host:
        config["account_name"] = host.split(".", 1)[0]
        if ".fabric.microsoft.com" in host:
            config["use_fabric_endpoint"] = True
    if not container or not key:
        raise ValueError(
            f"{url}: an Azure object URL is az://CONTAINER/KEY or "
            "abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/KEY"
        )
    connection = options.pop("connection_string", None)
    if connection:
        fields = dict(p.split("=", 1) for p in connection.split(";") if "=" in p)
        names = {
            "AccountName": "account_name",
            "AccountKey": "account_key",
            "SharedAccessSignature": "sas_key",
            "BlobEndpoint": "endpoint",
        }
        config.update({names[k]: v for k, v in fields.items() if k in names})
    names = {"sas_token": "sas_key", "credential": "account_key"}
    for name in list(options):
        if name in names and isinstance(options[name], str):
            config[names[name]] = options.pop(name)
    if options.pop("anon", False):
        config["skip_signature"] = True
    options.pop("client_kwargs", None)
    _pass_through(options, config)
    if "account_name" not in config:
        raise ValueError(
            f"{url}: which Azure storage account? pass "
            "storage_options={'account_name': ...} or use "
            "abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/KEY"
        )
    return container, key, config


def _pass_through(options: dict[str, Any], config: dict[str, Any]) -> None:
    """The options left: fsspec-only ones dropped, the rest taken as obstore config keys."""
    for name in list(options):
        if name in _FSSPEC_ONLY:
            options.pop(name)
    config.update(options)
    options.clear()


def _refuse_left(url: str, options: dict[str, Any], store: str) -> None:
    headers = options.pop("headers", None)
    for name in list(options):
        if name in _FSSPEC_ONLY or name == "client_kwargs":
            options.pop(name)
    left = sorted(options) + (["headers"] if headers else [])
    if left:
        raise ValueError(f"{url}: {store} options {left} have no obstore setting; {_FSSPEC_HINT}")


def translate(exc: BaseException, url: str, where: str) -> BaseException:
    """An obstore error as the builtin error recio raises for it, naming store and key.

    Missing objects: FileNotFoundError; refused or missing credentials: PermissionError
    (what to check in the message); a bad configuration key or path: ValueError; anything
    else (5xx, resets, timeouts): ConnectionError, which recio's loop retries.
    """
    import errno
    import ssl

    from obstore import exceptions as ox

    text = str(exc).split("\n\nDebug source:", 1)[0].strip()
    if isinstance(exc, ox.NotFoundError | FileNotFoundError):
        new: BaseException = FileNotFoundError(errno.ENOENT, f"no such object in {where}", url)
    elif isinstance(exc, ox.PermissionDeniedError) or "lacked the necessary privileges" in text:
        new = PermissionError(
            errno.EACCES,
            f"access denied by {where}: check the credentials and the bucket's policy ({text})",
            url,
        )
    elif isinstance(exc, ox.UnauthenticatedError) or "token request" in text:
        new = PermissionError(
            errno.EACCES,
            f"{where} could not authenticate: pass credentials "
            f"in storage_options or the environment ({text})",
            url,
        )
    elif "InvalidCertificate" in str(exc):
        new = ssl.SSLCertVerificationError(
            ssl.SSL_ERROR_SSL,
            f"{where} ({url}): its TLS certificate is not trusted; pass the CA bundle that "
            "signed it as storage_options={'client_kwargs': {'verify': PATH}}",
        )
    elif isinstance(exc, ox.UnknownConfigurationKeyError | ox.InvalidPathError):
        new = ValueError(f"{url} ({where}): {text}")
    elif isinstance(exc, ox.BaseError) or type(exc) is OSError:  # the writer's: plain OSError
        new = ConnectionError(f"{where}, key {url}: {text}")
    else:
        return exc
    new.__cause__ = exc
    return new
