"""MXNet's baseline script: it runs in another Python, so it must stand on its own."""

from __future__ import annotations

import ast

from recio.bench.mxnet import MXNET_SCRIPT


def test_the_baseline_script_imports_nothing_of_recio():
    tree = ast.parse(MXNET_SCRIPT)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import cannot run under python -c"
            imported.add(node.module)
    assert imported == {"json", "sys", "time", "mxnet"}
