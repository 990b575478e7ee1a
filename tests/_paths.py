"""Paths the tests share: the repository root and the in-repo MXNet golden files."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "data" / "golden"
