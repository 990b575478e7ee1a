"""The package as a whole: its front door, its import graph, the paths users import."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import recio
from recio import _moved

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


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of nodes inside ``if TYPE_CHECKING:`` blocks (they never run)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def module_imports(source: str, name: str, is_package: bool) -> set[str]:
    """The modules that module ``name`` imports anywhere: at module level, in functions and
    classes (imports deferred for start-up time are imports all the same), not in
    ``if TYPE_CHECKING:`` blocks. ``from p import x`` counts ``p`` and ``p.x``."""
    package = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(source)
    skip = _type_checking_only(tree)
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names}
    return found


def import_cycle(root: Path, top: str) -> list[str] | None:
    """An import cycle among the modules of package ``top`` (under ``root``), or None."""
    modules = {}
    for path in (root / top).rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    graph = {}
    for name, path in modules.items():
        found = module_imports(path.read_text(), name, path.name == "__init__.py")
        # A package's __init__ importing its own submodules is not a cycle; a submodule
        # that imports its package's __init__ back, or two modules that import each
        # other, is.
        graph[name] = {
            m for m in found if m in modules and m != name and not name.startswith(m + ".")
        }
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> list[str] | None:
        state[name] = 1
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                return trail[trail.index(dep) :] + [dep] if dep in trail else [name, dep]
            if dep not in state and (cycle := visit(dep, [*trail, dep])):
                return cycle
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state and (cycle := visit(name, [name])):
            return cycle
    return None


def test_no_import_cycles_anywhere_in_recio():
    cycle = import_cycle(PACKAGE.parent, "recio")
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    cycle = import_cycle(tmp_path, "pkg")
    assert cycle in (["pkg.a", "pkg.b", "pkg.a"], ["pkg.b", "pkg.a", "pkg.b"])
    (pkg / "b.py").write_text(  # for type hints only: never imported at run time
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n"
    )
    assert import_cycle(tmp_path, "pkg") is None


# The data flow, bottom up: a module imports from its own layer and the layers below it,
# never from one above (DESIGN.md, "Layers").
LAYERS = [
    ["recio", "recio._install", "recio._checks", "recio._crc32c", "recio._moved", "recio._native",
     "recio._text", "recio.errors", "recio.dist"],
    ["recio.storage"],
    ["recio.records"],
    ["recio.sampling", "recio.augment"],
    ["recio.decode"],
    ["recio.pipeline"],
    ["recio.frameworks", "recio.dali", "recio.im2rec", "recio.bench", "recio.train", "recio.cli",
     "recio.mx"],
]  # fmt: skip


def _layer(module: str) -> int:
    found = [
        (len(prefix), i)
        for i, layer in enumerate(LAYERS)
        for prefix in layer
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(found)[1]


def test_each_layer_imports_only_its_own_and_the_layers_below():
    upward = []
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for target in module_imports(path.read_text(), name, path.name == "__init__.py"):
            if target.startswith("recio.") and _layer(target) > _layer(name):
                upward.append(f"{name} -> {target}")
    assert not upward, upward
    assert _layer("recio.records.file") == 2 and _layer("recio.pipeline.iterator") == 5


def test_top_level_holds_few_public_modules_and_none_is_long():
    public = [p.stem for p in PACKAGE.glob("*.py") if not p.name.startswith("_")]
    assert len(public) <= 10, public
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 850
    }
    assert not long, long


IMPORT_PATHS = json.loads((PACKAGE.parent / "tests" / "data" / "import_paths.json").read_text())


@pytest.mark.parametrize("old", sorted(IMPORT_PATHS))
def test_every_public_name_imports_from_its_old_path(old):
    """The public names of each module as they were before the package was laid out in
    subpackages (tests/data/import_paths.json) import from their old paths, in a fresh
    interpreter, as the same objects as at their new homes."""
    names = IMPORT_PATHS[old]
    code = (
        f"import importlib, sys; from {old} import {', '.join(names)}; "
        f"m = importlib.import_module({old!r}); "
        "print(m.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    home = out.stdout.strip()
    if home != old:  # moved: the old path is the new module itself
        assert _moved.MOVED.get(old) == home


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


def test_design_md_indexes_every_note_where_it_is():
    """DESIGN.md's table of NOTE blocks names the file that holds each, and every NOTE
    block in the code is in the table."""
    root = PACKAGE.parent
    design = (root / "DESIGN.md").read_text()
    table = dict(re.findall(r"^\| \[([^\]]+)\] \| `([^`]+)` \|", design, re.M))
    assert len(table) > 30
    for name, where in table.items():
        assert f"NOTE [{name}]" in (root / where).read_text(), f"NOTE [{name}] not in {where}"
    defined = set()
    for path in [*root.glob("recio/**/*.py"), *root.glob("native/*.[ch]")]:
        defined |= set(re.findall(r"NOTE \[([^\]]+)\]:", path.read_text()))
    assert defined <= set(table), sorted(defined - set(table))
