"""Import paths of modules that moved into subpackages: they still work, and warn.

``import recio.reader`` (or ``from recio.iterator import ImageRecordIter``) finds the module
in its new home and registers it under the old name too: one module object under both
names, so a class pickled or compared through either path is the same class, and
``unittest.mock.patch("recio.reader.RecordFile")`` patches the attribute of the module that
``recio.records.reader`` is (as patching the new path does; patch a name where it is looked
up, as always). The first import of an old path in a process warns (``DeprecationWarning``
naming the new home and the release that drops the old path, :data:`REMOVED_IN`); later
imports find the module in ``sys.modules`` and do not warn again.

Type checkers and IDEs see the old paths through the stubs beside this file
(``recio/reader.pyi``, ...), which re-export each old path's public names from its new home.

``recio.recordio`` is no old path: it is where MXNet's names are documented
(``from recio import recordio``, as ``from mxnet import recordio``), kept without a warning.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import warnings
from types import FrameType, ModuleType

#: The release that drops the old import paths.
REMOVED_IN = "0.3.0"

# old path -> the module that holds it now
MOVED = {
    "recio.format": "recio.records.format",
    "recio.reader": "recio.records.reader",
    "recio.recordio": "recio.records.recordio",
    "recio.layout": "recio.records.samples",
    "recio.shards": "recio.records.shards",
    "recio.checksum": "recio.records.checksum",
    "recio.spans": "recio.records.spans",
    "recio.sampler": "recio.sampling.sampler",
    "recio.mixing": "recio.sampling.mixing",
    "recio.geometry": "recio.augment.geometry",
    "recio.config": "recio.pipeline.config",
    "recio.consumer": "recio.pipeline.positioned",
    "recio.read_decode": "recio.pipeline.read_decode",
    "recio.iterator": "recio.pipeline.iterator",
    "recio.mxnet_inputs": "recio.pipeline.mxnet_inputs",
    "recio.trace": "recio.pipeline.trace",
    "recio.dataset": "recio.frameworks.dataset",
    "recio.torch_data": "recio.frameworks.torch_data",
}

# the paths that stay: documented homes, not old ones
KEPT = frozenset({"recio.recordio"})

#: The old paths that warn when imported.
DEPRECATED = {old: new for old, new in MOVED.items() if old not in KEPT}


def deprecation(old: str) -> str:
    """The warning an import of the old path ``old`` gives."""
    return (
        f"{old} is an old import path, removed in recio {REMOVED_IN}: "
        f"import {DEPRECATED[old]} instead"
    )


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and loads it as the module at its new one."""

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        if spec.name in DEPRECATED:
            level = _importer_level(sys._getframe())
            warnings.warn(deprecation(spec.name), DeprecationWarning, stacklevel=level)
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__  # its own, put back by exec_module
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module ran under its new name.

        The import system has just set ``__spec__`` to the old path's; the module's own
        comes back, so its relative imports still resolve from its new package.
        """
        module.__spec__ = module.__spec__.loader_state


# Frames between an import statement and the finder that are not the importer's: the
# import system's own (which ``warnings`` passes over), ``importlib.import_module`` and
# recio's ``__getattr__`` (``from recio import config``).
_PASSED_OVER = {importlib.__file__, os.path.join(os.path.dirname(__file__), "__init__.py")}


def _internal(frame: FrameType) -> bool:
    name = frame.f_code.co_filename
    return "importlib" in name and "_bootstrap" in name  # as ``warnings`` tells them


def _importer_level(frame: FrameType) -> int:
    """The ``stacklevel`` that points a warning given in ``frame`` at the importing line.

    So the default filters show it where ``__main__`` imports an old path.
    """
    level = 1
    while frame is not None and (level == 1 or frame.f_code.co_filename in _PASSED_OVER):
        frame = frame.f_back
        while frame is not None and _internal(frame):
            frame = frame.f_back
        level += 1
    return level


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
