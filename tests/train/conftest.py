"""The training tests run torch on one thread."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def one_thread():
    # Two busy threads on two shared cores mostly spin; one is faster and deterministic.
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
