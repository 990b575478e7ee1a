"""The package as a whole: its front door, its import graph, the paths users import."""

from __future__ import annotations

import ast
import json
import os
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
    ["recio", "recio._args", "recio._install", "recio._checks", "recio._crc32c", "recio._moved",
     "recio._native", "recio._text", "recio.errors", "recio.dist"],
    ["recio.storage"],
    ["recio.records"],
    ["recio.sampling", "recio.augment"],
    ["recio.decode"],
    ["recio.pipeline"],
    ["recio.frameworks", "recio.dali", "recio.im2rec", "recio.bench", "recio.train", "recio.cli",
     "recio.mx", "recio._command"],
    ["recio.gpu"],
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
        # and type checkers see the names, in the old path's stub
        stub = ast.parse((PACKAGE / f"{old.rpartition('.')[2]}.pyi").read_text())
        imports = [node for node in stub.body if isinstance(node, ast.ImportFrom)]
        found = {a.asname for node in imports if node.module == home for a in node.names}
        assert set(names) <= found, sorted(set(names) - found)


_WARNINGS_OF_AN_IMPORT = """
import sys, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    exec(sys.argv[1])
for w in caught:
    print(w.category.__name__, w.filename, w.lineno, w.message, sep="|")
"""


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
@pytest.mark.parametrize("form", ["import {old}", "from {parent} import {leaf}"])
def test_importing_an_old_path_warns_naming_its_new_home_and_the_release(old, form):
    parent, _, leaf = old.rpartition(".")
    statement = form.format(old=old, parent=parent, leaf=leaf)
    out = subprocess.run(
        [sys.executable, "-c", _WARNINGS_OF_AN_IMPORT, statement], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    caught = [line.split("|") for line in out.stdout.splitlines()]
    if old in _moved.KEPT:  # a documented path, not an old one
        assert caught == []
        return
    assert len(caught) == 1, caught
    category, filename, lineno, message = caught[0]
    assert category == "DeprecationWarning"
    assert message == (
        f"{old} is an old import path, removed in recio {_moved.REMOVED_IN}: "
        f"import {_moved.MOVED[old]} instead"
    )
    assert (filename, lineno) == ("<string>", "1")  # the importing line, shown in __main__


def test_no_code_of_the_project_imports_an_old_path():
    root = PACKAGE.parent
    found = []
    for path in [
        p for top in ("recio", "tests", "tools", "examples") for p in root.glob(f"{top}/**/*.py")
    ]:
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        imports = module_imports(path.read_text(), name, path.name == "__init__.py")
        found += [f"{path.relative_to(root)}: {m}" for m in imports if m in _moved.DEPRECATED]
    assert not found, found


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
    section = design.split("## NOTE blocks", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| \[.*$", design, re.M)
    outside = [row for row in rows if row not in section]
    assert not outside, f"NOTE rows outside the NOTE table: {outside}"
    for name, where in table.items():
        assert f"NOTE [{name}]" in (root / where).read_text(), f"NOTE [{name}] not in {where}"
    defined = set()
    for path in [*root.glob("recio/**/*.py"), *root.glob("native/*.[ch]")]:
        defined |= set(re.findall(r"NOTE \[([^\]]+)\]:", path.read_text()))
    assert defined <= set(table), sorted(defined - set(table))


# What importing a module may change in the process, read before and after the import.
# DESIGN.md names nothing that an import changes: the map guard's SIGBUS handler is put in
# place by the first file map, not by an import.
_PROCESS_STATE = """
import faulthandler, json, os, signal, sys, threading

def state():
    handlers = {}
    for sig in sorted(signal.valid_signals()):
        try:
            handlers[str(sig)] = repr(signal.getsignal(sig))
        except (OSError, ValueError):
            pass
    return {
        "environ": dict(os.environ),
        "signals": handlers,
        "threads": sorted(t.name for t in threading.enumerate()),
        "stack_size": threading.stack_size(),
        "switch_interval": sys.getswitchinterval(),
        "excepthook": repr(threading.excepthook),
        "sys_excepthook": repr(sys.excepthook),
        "faulthandler": faulthandler.is_enabled(),
        "recursion_limit": sys.getrecursionlimit(),
    }

before = state()
try:
    __import__(sys.argv[1])
except ModuleNotFoundError as exc:
    if exc.name.partition(".")[0] == "recio":
        raise
    print(json.dumps({"missing": exc.name}))
    sys.exit(0)
after = state()
changed = {}
for key in before:
    if before[key] != after[key]:
        if isinstance(before[key], dict):
            changed[key] = {
                k: [before[key].get(k), after[key].get(k)]
                for k in set(before[key]) | set(after[key])
                if before[key].get(k) != after[key].get(k)
            }
        else:
            changed[key] = [before[key], after[key]]
print(json.dumps({"changed": changed}))
"""


def _every_module() -> list[str]:
    """Every module of recio but the ``__main__`` ones (importing one runs its command)."""
    names = []
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] != "__main__":
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


@pytest.mark.parametrize("module", _every_module())
def test_importing_a_module_changes_nothing_in_the_process(module):
    """The environment, the signal handlers, the threads and the interpreter's thread
    settings are the same after importing the module, in a fresh interpreter, as before.
    Only the commands' mains change the process (``recio._command``)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run(
        [sys.executable, "-c", _PROCESS_STATE, module], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    if "missing" in found:
        pytest.skip(f"{module} needs {found['missing']}, not installed")
    assert found["changed"] == {}, found["changed"]


def test_the_commands_main_limits_blas_threads_and_the_user_wins():
    code = "import os, recio._command as c; c.limit_blas_threads(); print(os.environ[{v!r}])"
    v = "OPENBLAS_NUM_THREADS"
    env = {k: x for k, x in os.environ.items() if k != v}
    out = subprocess.run([sys.executable, "-c", code.format(v=v)], env=env, capture_output=True)
    assert out.stdout.decode().strip() == "1"
    env[v] = "3"
    out = subprocess.run([sys.executable, "-c", code.format(v=v)], env=env, capture_output=True)
    assert out.stdout.decode().strip() == "3"


def test_patching_through_an_old_path_patches_the_module_at_its_new_home():
    code = (
        "import warnings; warnings.simplefilter('ignore', DeprecationWarning)\n"
        "from unittest import mock\n"
        "import recio.records.shards as new\n"
        "with mock.patch('recio.shards.open_records', 'patched'):\n"
        "    assert new.open_records == 'patched'\n"
        "assert new.open_records != 'patched'\n"
        "import recio.shards as old; assert old is new\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
