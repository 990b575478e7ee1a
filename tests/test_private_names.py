"""How often one module of recio reaches into another's private names (ceiling: 3).

A name with a leading underscore is its module's own: another module that needs it is
either part of the same concept (then they belong in one module or one class) or wants a
public interface. The rule, counted per occurrence over every ``recio/**/*.py``:

1. ``from M import _n`` where ``M`` is a recio module other than the importer's own and
   ``M._n`` is a name, not a module. A private *module* is governed by the layer rule
   (DESIGN.md, "Layers"): the top-level ones (``recio._native``, ``recio._checks``, ...)
   are the base every layer uses; a subpackage's (``recio.decode._pillow``) is internal to
   that subpackage, so importing it from outside the subpackage counts.
2. ``m._n`` where ``m`` is bound in the module by an import of a recio module (a module's
   private name reached through the module).
3. ``x._n`` on any other object (``self`` and ``cls`` included), read or written, where
   ``_n`` is defined nowhere in the module (no ``def``/``class``, assignment, ``self._n``
   or ``cls._n`` assignment, parameter, ``__slots__`` entry or import of that name) but is
   defined in another recio module: a private member used by a module that does not
   define it (a mixin on its host's members, a helper on a pool's, a subclass on its
   base's state).

Dunder names (``__init__``) are not private. Hooks a subclass overrides (``_produce``)
are defined in the subclass's module, so they do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import recio

PACKAGE = Path(recio.__file__).parent
CEILING = 3


def _modules(root: Path, top: str) -> dict[str, Path]:
    found = {}
    for path in (root / top).rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined(tree: ast.AST) -> set[str]:
    """The private names a module defines or binds anywhere."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store | ast.Del)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)  # a class's own member
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
        ):
            names |= {
                c.value
                for c in ast.walk(node.value)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            }
    return {n for n in names if _private(n)}


def _target(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = (module if is_package else module.rpartition(".")[0]).split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def private_uses(root: Path, top: str) -> list[str]:
    """Every cross-module use of a private name in package ``top`` under ``root``."""
    modules = _modules(root, top)
    native = {f"{top}._native"}  # the extension: a module without a .py
    trees = {name: ast.parse(path.read_text()) for name, path in modules.items()}
    defined = {name: _defined(tree) for name, tree in trees.items()}
    anywhere = set().union(*defined.values())
    found = []
    for name, tree in sorted(trees.items()):
        is_package = modules[name].name == "__init__.py"
        imported_modules: set[str] = set()  # local names bound to recio modules
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _target(name, is_package, node)
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    if full in modules or full in native:
                        imported_modules.add(alias.asname or alias.name)
                        package = full.rpartition(".")[0]
                        outside = name != package and not name.startswith(package + ".")
                        if _private(alias.name) and package != top and outside:
                            found.append(f"{name}:{node.lineno} imports {full}")
                    elif _private(alias.name) and source in modules and source != name:
                        found.append(f"{name}:{node.lineno} from {source} import {alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules and alias.asname:
                        imported_modules.add(alias.asname)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            receiver = node.value
            if isinstance(receiver, ast.Name) and receiver.id in imported_modules:
                found.append(f"{name}:{node.lineno} {ast.unparse(node)} (a module's)")
            elif node.attr not in defined[name] and node.attr in anywhere:
                found.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    return found


def test_few_modules_reach_into_another_modules_private_names():
    uses = private_uses(PACKAGE.parent, "recio")
    assert len(uses) <= CEILING, "\n".join(uses)


def test_each_kind_of_reach_is_counted(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import _base\n")  # a top-level private module
    (pkg / "_base.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "_inner.py").write_text("")
    (pkg / "sub" / "pool.py").write_text(
        "from . import _inner\n"  # its own subpackage's private module: fine
        "class Pool:\n"
        "    def __init__(self):\n"
        "        self._last = None\n"
        "    def _finish(self):\n"
        "        return self._last\n"
        "    def _produce(self):\n"
        "        pass\n"
        "_helper = 1\n"
    )
    (pkg / "jobs.py").write_text(
        "from .sub import _inner\n"  # 1: another subpackage's private module
        "from .sub.pool import Pool, _helper\n"  # 2: a private name
        "from .sub import pool\n"
        "pool._helper\n"  # 3: through the module
        "def run(p: Pool):\n"
        "    p._last = 1\n"  # 4: another class's member, written
        "    return p._finish()\n"  # 5: defined only in pool.py
        "class Mine(Pool):\n"
        "    def _produce(self):\n"  # an overridden hook: defined here
        "        return self._produce, self.__class__\n"
    )
    uses = private_uses(tmp_path, "pkg")
    where = [use.split(" ", 1)[0] for use in uses]
    assert where == ["pkg.jobs:1", "pkg.jobs:2", "pkg.jobs:4", "pkg.jobs:6", "pkg.jobs:7"], uses
