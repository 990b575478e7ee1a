"""Where the shared test vectors live: ../shared beside the repository."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
GOLDEN = SHARED / "golden"
