"""recio bench's report: the plot."""

import pytest

from recio.bench import save_plot


def test_plot_is_png(result):
    pytest.importorskip("matplotlib")
    path = result["_workdir"] / "bench.png"
    save_plot(result, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
