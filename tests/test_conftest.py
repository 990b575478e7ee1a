"""The suite's own rule for the C extension (tests/conftest.py): a test that needs
recio._native skips where it is not built, and fails under CI, which builds it."""

from __future__ import annotations

import pytest

from recio import decode

from .conftest import native_built, native_decision, require_native


@pytest.mark.parametrize(
    ("available", "ci", "decision"),
    [(True, False, "run"), (True, True, "run"), (False, False, "skip"), (False, True, "fail")],
)
def test_native_decision(available, ci, decision):
    assert native_decision(available, ci) == decision


def test_a_missing_extension_skips_here_and_fails_under_ci(monkeypatch):
    monkeypatch.setattr(decode, "native_available", lambda: False)
    monkeypatch.setenv("CI", "true")
    message = r"recio._native is not built: run pip install -e . \(CI expects it\)"
    with pytest.raises(pytest.fail.Exception, match=message):
        require_native()
    with pytest.raises(pytest.fail.Exception, match=message):
        native_built()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="recio._native is not built"):
        require_native()
    assert native_built() is False
    monkeypatch.setattr(decode, "native_available", lambda: True)
    monkeypatch.setenv("CI", "true")
    require_native()
    assert native_built() is True
