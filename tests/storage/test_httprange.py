"""The standard-library range client of the presigned S3 path."""

from __future__ import annotations

import pytest

from recio import storage
from recio.storage.httprange import HTTPStatusError, RangeClient

from ..faultproxy import FaultProxy
from ..rangeserver import RangeServer


@pytest.fixture(scope="module")
def server():
    s = RangeServer({"/f": bytes(range(256)) * 4096})  # 1 MiB
    yield s
    s.close()


def test_ranges_on_one_kept_alive_connection(server):
    client = RangeClient()
    data = server.files["/f"]
    for start, end in [(0, 10), (1000, 300_000), (len(data) - 5, len(data))]:
        got = client.cat_file(f"{server.url}/f", start, end)
        assert bytes(got) == data[start:end]
    assert len(client._local.conns) == 1


def test_statuses_and_faults_read_as_retry_knows_them(server):
    client = RangeClient()
    with pytest.raises(HTTPStatusError) as missing:
        client.cat_file(f"{server.url}/nope", 0, 10)
    assert storage.http_status(missing.value) == 404 and not storage.is_transient(missing.value)
    assert isinstance(storage.translate_error(missing.value, "s3://b/nope"), FileNotFoundError)
    proxy = FaultProxy(server.port)
    try:
        for fault in ("reset", "503", "cut"):
            proxy.inject(fault)
            with pytest.raises(ConnectionError) as failed:
                client.cat_file(f"{proxy.endpoint}/f", 0, 200_000)
            assert storage.is_transient(failed.value), fault
            # the next request (a new connection) is whole
            assert bytes(client.cat_file(f"{proxy.endpoint}/f", 5, 50)) == server.files["/f"][5:50]
    finally:
        proxy.close()


def test_a_server_that_closed_the_idle_connection_is_reconnected(server):
    client = RangeClient()
    assert len(client.cat_file(f"{server.url}/f", 0, 10)) == 10
    (conn,) = client._local.conns.values()
    conn.sock.close()  # as a server does with an idle keep-alive connection
    assert bytes(client.cat_file(f"{server.url}/f", 0, 10)) == server.files["/f"][:10]
