"""recio.storage's public interface: the names the layers above use, importable from it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import recio.storage as storage
from recio.storage import atomic, base, buffers, mapped, options, prefetch, schedule, source

PACKAGE = Path(storage.__file__).resolve().parents[1]


def test_the_interface_is_exported_from_the_package():
    assert set(storage.__all__) <= set(dir(storage))
    for name, home in [
        ("ByteSource", base),
        ("MappedSource", mapped),
        ("CopiedSource", mapped),
        ("open_source", source),
        ("FetchOptions", options),
        ("Lease", buffers),
        ("Lookahead", prefetch),
        ("Prefetcher", prefetch),
        ("clock", schedule),
        ("AtomicOutput", atomic),
        ("remove_partials", atomic),
    ]:
        assert name in storage.__all__
        assert getattr(storage, name) is getattr(home, name), name


def test_the_old_homes_of_moved_names_still_give_them():
    from recio.storage import blockcache

    assert blockcache.clock is storage.clock and blockcache.NEVER is schedule.NEVER
    assert callable(blockcache.entry_bytes) and callable(blockcache.file_key)


def test_importing_it_loads_no_remote_client_and_no_block_cache():
    code = (
        "import sys, recio.storage; print(sorted(m for m in ('fsspec', 'crc32c', "
        "'recio.storage.blockcache', 'recio.storage.cache') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _storage_imports(path: Path) -> set[str]:
    """The recio.storage modules ``path`` imports (anywhere in it), as dotted names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:  # recio/<sub>/x.py: ".." is recio
                target = "recio" + (f".{target}" if target else "")
            if target == "recio":
                found |= {f"recio.{a.name}" for a in node.names if a.name == "storage"}
            elif target.startswith("recio.storage"):
                found.add(target)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("recio.storage")}
    return found


def test_the_pipeline_reaches_storage_only_through_its_interface():
    for path in sorted((PACKAGE / "pipeline").rglob("*.py")):
        assert _storage_imports(path) <= {"recio.storage"}, path
