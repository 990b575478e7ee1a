"""Import paths of modules that moved into subpackages, kept working.

``import recio.reader`` (or ``from recio.iterator import ImageRecordIter``) finds the module
in its new home and registers it under the old name too: one module object under both
names, so a class pickled, patched or compared through either path is the same class.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

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


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and loads it as the module at its new one."""

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__  # its own, put back by exec_module
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module ran under its new name.

        The import system has just set ``__spec__`` to the old path's; the module's own
        comes back, so its relative imports still resolve from its new package.
        """
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
