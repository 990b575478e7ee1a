"""The HTTPS paths: the presigned range client's TLS and obstore's, against a local TLS
server whose certificate a CA made by the test signs (tests/tlscert.py)."""

from __future__ import annotations

import ssl

import numpy as np
import pytest

from recio import storage
from recio.storage.httprange import RangeClient

from ..rangeserver import RangeServer
from ..tlscert import self_signed

DATA = np.random.default_rng(7).integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> tuple[str, RangeServer]:
    """(the CA file, an HTTPS RangeServer serving /d.bin)."""
    ca, cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    server = RangeServer({"/d.bin": DATA}, tls=(cert, key))
    yield ca, server
    server.close()


def test_the_range_client_reads_over_tls(tls, monkeypatch):
    ca, server = tls
    monkeypatch.setenv("SSL_CERT_FILE", ca)  # the default context trusts the test's CA
    client = RangeClient(piece=128 << 10)
    url = f"{server.url}/d.bin"
    assert bytes(client.cat_file(url, 5, 70_000)) == DATA[5:70_000]
    # a large body read a piece at a time, and kept spans with the bytes between dropped
    assert bytes(client.cat_file(url, 0, len(DATA))) == DATA
    keep = [(1000, 2000), (600_000, 900_000)]
    got = bytes(client.cat_file(url, 1000, 900_000, keep=keep))
    assert got == DATA[1000:2000] + DATA[600_000:900_000]
    conn, fresh = client._connection("https", server.url.split("://")[1])
    assert conn.tls and not fresh  # the same kept-alive TLS connection throughout


def test_the_range_client_refuses_an_untrusted_certificate_at_once(tls, monkeypatch):
    ca, server = tls
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    client = RangeClient()
    url = f"{server.url}/d.bin"
    with pytest.raises(ssl.SSLCertVerificationError):
        client.cat_file(url, 0, 10)
    attempts = []
    fetch = storage.FetchOptions(retries=3, backoff=0.01)
    with pytest.raises(ssl.SSLCertVerificationError):  # not worth retrying: not retried
        storage.retrying(lambda: client.cat_file(url, 0, 10), url, 0, 10, fetch, attempts.append)
    assert attempts == []


def test_obstore_reads_over_tls_with_the_ca_given(tls):
    pytest.importorskip("obstore", reason="the cloud extra (obstore)")
    ca, server = tls
    url = f"{server.url}/d.bin"
    with storage.open_source(url, {"client_kwargs": {"verify": ca}}) as src:
        assert type(src).__name__ == "ObjectStoreSource" and src.size == len(DATA)
        ranges = [(0, 10), (2 << 20, 1 << 20), (12345, 300_000)]
        got = src.read_ranges(ranges)
        assert [bytes(g) for g in got] == [DATA[o : o + n] for o, n in ranges]


def test_obstore_names_an_untrusted_certificate_and_the_fix(tls):
    pytest.importorskip("obstore", reason="the cloud extra (obstore)")
    _, server = tls
    url = f"{server.url}/d.bin"
    with pytest.raises(ssl.SSLCertVerificationError, match="not trusted.*'verify'") as refused:
        storage.open_source(url, fetch=storage.FetchOptions(retries=2))
    assert url in str(refused.value)
