"""The package as a whole: its front door, its import graph, the paths users import."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import recio

PACKAGE = Path(recio.__file__).parent


def test_front_door_names_resolve_to_their_modules():
    from recio.pipeline import iterator
    from recio.records import reader, recordio

    assert recio.ImageRecordIter is iterator.ImageRecordIter
    assert recio.RecordFile is reader.RecordFile
    assert recio.MXIndexedRecordIO is recordio.MXIndexedRecordIO
    for name in recio.__all__:
        assert getattr(recio, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        recio.nope  # noqa: B018


def test_import_recio_loads_nothing_heavy():
    code = (
        "import sys, recio; "
        "print(sorted(m for m in ('numpy', 'PIL', 'fsspec') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "statement",
    [
        "from recio import recordio; recordio.MXIndexedRecordIO, recordio.pack_img",
        "from recio.records.recordio import MXIndexedRecordIO, IRHeader, pack, unpack, pack_img",
        "from recio.pipeline.iterator import ImageRecordIter",
        "from recio.storage import FetchOptions, open_source",
        "from recio.records.reader import RecordFile",
        "from recio.dali import DALIImageRecordIter",
        "from recio.train.model import resnet",
        "import recio.decode as d; d.default_backend()",
    ],
)
def test_documented_import_paths(statement):
    subprocess.run([sys.executable, "-c", statement], check=True)


def _module_imports(path: Path, name: str) -> set[str]:
    """recio modules that ``name`` (at ``path``) imports at module level."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If):  # `if TYPE_CHECKING:` blocks do not run
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("recio")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("recio"):
                found.add(target)
                found |= {f"{target}.{a.name}" for a in node.names}
    return found


def test_no_import_cycles():
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    graph = {
        name: {m for m in _module_imports(path, name) if m in modules and m != name}
        for name, path in modules.items()
    }
    # A package's own __init__ importing its submodules is not a cycle; a submodule that
    # imports its package's __init__ back, or two modules that import each other, is.
    for name in graph:
        graph[name] = {m for m in graph[name] if not name.startswith(m + ".")}
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                cycle = trail[trail.index(dep) :] + [dep] if dep in trail else [name, dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, [*trail, dep])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_every_subpackage_ships_in_the_wheel():
    tomllib = pytest.importorskip("tomllib")
    from setuptools import find_packages

    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    shipped = set(find_packages(str(PACKAGE.parent), include=include))
    on_disk = {
        ".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")
    }
    assert on_disk <= shipped
