"""Certificates for a local HTTPS server on 127.0.0.1, made by the openssl command.

A self-signed CA and a server certificate it signs (rustls, obstore's TLS, refuses a CA
certificate used as the server's own, so the two are apart).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def self_signed(folder: Path) -> tuple[str, str, str]:
    """(CA certificate, server certificate, server key) files in ``folder``, for one day."""
    if shutil.which("openssl") is None:
        pytest.fail("the TLS tests need the openssl command (apt-get install openssl)")
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    cert, key, csr, ext = (
        folder / "cert.pem",
        folder / "key.pem",
        folder / "cert.csr",
        folder / "ext",
    )
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-keyout", str(ca_key), "-out", str(ca), "-subj", "/CN=recio test CA")  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
             "-subj", "/CN=127.0.0.1")  # fmt: skip
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                   "extendedKeyUsage=serverAuth\n")  # fmt: skip
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
             "-CAcreateserial", "-days", "1", "-out", str(cert), "-extfile", str(ext))  # fmt: skip
    return str(ca), str(cert), str(key)
