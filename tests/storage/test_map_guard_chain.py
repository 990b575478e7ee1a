"""The map guard's SIGBUS handler among other handlers (NOTE [map guard]).

Each case runs in a subprocess with a timeout: a handler chain that forms a cycle hangs
(the fault bounces between two handlers for ever) instead of ending the process. For every
order of installs, a page a guarded map lost reads as zeros, a fault outside recio's maps
ends the process by SIGBUS with one faulthandler report where faulthandler is enabled (none
where it is not), and a SIGBUS sent by ``kill`` ends it at once.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from recio.records.format import IRHeader, pack
from recio.records.recordio import MXIndexedRecordIO
from tests.conftest import needs_torch

from .._paths import REPO

pytestmark = pytest.mark.needs_native

REPORT = "Fatal Python error: Bus error"

_CASE = """
import faulthandler, mmap, os, signal, sys
from recio.storage.mapped import MappedSource
steps, fault = sys.argv[1].split(","), sys.argv[2]
sources = []
for step in steps:
    if step == "map":  # a 64 KiB file, mapped by recio
        name = f"f{len(sources)}.bin"
        open(name, "wb").write(bytes(range(256)) * 256)
        sources.append(MappedSource(name))
    elif step == "read":
        sources[-1].read(0, 4)
    elif step == "enable":
        faulthandler.enable()
    elif step == "disable":
        faulthandler.disable()
    elif step == "torch":  # the handler torch installs in a DataLoader worker
        from torch.utils.data._utils.signal_handling import _set_worker_signal_handlers
        _set_worker_signal_handlers()
print("ready", flush=True)
if fault == "inside":  # a page the guarded map lost: zeros, then a truncation reported
    view = sources[-1].current_view()
    os.truncate(sources[-1].url, 10_000)
    print("read", view[40_000], sources[-1].fault_offset(), flush=True)
elif fault == "outside":  # a map recio did not make
    open("other.bin", "wb").write(bytes(65_536))
    with open("other.bin", "rb") as f:
        other = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    os.truncate("other.bin", 10_000)
    print("read", other[40_000], flush=True)
else:  # a SIGBUS sent by another process
    os.kill(os.getpid(), signal.SIGBUS)
    print("survived", flush=True)
"""

# Orders of installs: recio's guard is installed at a map and put back in front at a read.
ORDERS = {
    "alone": "map",
    "faulthandler before": "enable,map",
    "faulthandler after": "map,enable",
    "faulthandler between maps": "map,enable,map",
    "faulthandler between reads": "map,read,enable,read",
    "faulthandler twice": "map,enable,map,enable,map",
    "faulthandler disabled": "map,enable,map,disable",
    "faulthandler disabled, read": "map,enable,read,disable,read",
    "faulthandler before, disabled": "enable,map,disable,map",
    "faulthandler again": "map,enable,read,disable,read,enable,map",
}


def enabled_at_end(order: str) -> bool:
    steps = [s for s in order.split(",") if s in ("enable", "disable")]
    return bool(steps) and steps[-1] == "enable"


def run_case(tmp_path, order: str, fault: str) -> subprocess.CompletedProcess:
    run = [sys.executable, "-c", _CASE, order, fault]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTHONFAULTHANDLER", None)  # faulthandler only where the case enables it
    try:
        return subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired as exc:  # a cycle: the fault bounces for ever
        tail = (exc.stderr or b"")[-300:].decode(errors="replace")
        pytest.fail(f"{order} / {fault}: no end in 60 s (a handler cycle): {tail}")


def under_asan() -> bool:
    return "libasan" in os.environ.get("LD_PRELOAD", "")


def assert_ended_by_sigbus(result: subprocess.CompletedProcess, reports: int) -> None:
    stderr = result.stderr.decode(errors="replace")
    if under_asan():  # the action before recio's is ASan's: its report, then abort
        assert result.returncode == -signal.SIGABRT and "BUS" in stderr, stderr[-2000:]
        return
    assert result.returncode == -signal.SIGBUS, (result.returncode, stderr[-2000:])
    assert stderr.count(REPORT) == reports, stderr[-2000:]


@pytest.mark.parametrize("order", list(ORDERS.values()), ids=list(ORDERS))
def test_a_page_a_guarded_map_lost_reads_as_zeros_whatever_came_before(tmp_path, order):
    result = run_case(tmp_path, order, "inside")
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.decode().splitlines() == ["ready", "read 0 36864"]
    assert REPORT not in result.stderr.decode(errors="replace")


@pytest.mark.parametrize("order", list(ORDERS.values()), ids=list(ORDERS))
def test_a_fault_outside_recios_maps_ends_the_process_with_one_report(tmp_path, order):
    result = run_case(tmp_path, order, "outside")
    assert result.stdout.decode().splitlines() == ["ready"]
    assert_ended_by_sigbus(result, reports=int(enabled_at_end(order)))


@pytest.mark.parametrize("order", list(ORDERS.values()), ids=list(ORDERS))
def test_a_sent_sigbus_takes_the_previous_action_at_once(tmp_path, order):
    result = run_case(tmp_path, order, "sent")
    assert result.stdout.decode().splitlines() == ["ready"]  # never "survived"
    assert_ended_by_sigbus(result, reports=int(enabled_at_end(order)))


@needs_torch
@pytest.mark.parametrize("fault", ["inside", "outside"])
def test_under_torchs_worker_handler(tmp_path, fault):
    """torch's worker handler (installed after the map, as in a DataLoader worker) does
    not take recio's faults, and still ends the process on one that is not recio's."""
    result = run_case(tmp_path, "map,torch", fault)
    stderr = result.stderr.decode(errors="replace")
    if fault == "inside":
        assert result.returncode == 0, (result.returncode, stderr[-2000:])
        assert result.stdout.decode().splitlines() == ["ready", "read 0 36864"]
    elif not under_asan():
        assert result.returncode == -signal.SIGBUS, (result.returncode, stderr[-2000:])
        assert stderr.count("Unexpected bus error encountered in worker") == 1, stderr


N = 48  # records of ~25 kB


@pytest.fixture(scope="module")
def rec(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("workers")
    rng = np.random.default_rng(0)
    path = str(folder / "t.rec")
    with MXIndexedRecordIO(str(folder / "t.idx"), path, "w") as w:
        for k in range(N):
            out = io.BytesIO()
            pixels = rng.integers(0, 255, (120, 120, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(out, format="JPEG", quality=90)
            w.write_idx(k, pack(IRHeader(0, float(k), k, 0), out.getvalue()))
    return path


_WORKERS = """
import os, sys
from torch.utils.data import DataLoader
from recio.frameworks.dataset import RecordDataset
from recio.storage.mapped import MappedSource

path, cut = sys.argv[1], int(sys.argv[2])
ds = RecordDataset(path, (3, 32, 32), verify_checksums=False)
print("records", len(ds), flush=True)  # opened in the parent: the workers inherit the map


def cut_under_the_read(worker_id):
    # The file is truncated once the worker's read holds its view of the map, so the decode
    # touches pages the file lost: a SIGBUS, which the map guard must take, not torch.
    whole = MappedSource.current_view

    def view_then_cut(self):
        view = whole(self)
        os.truncate(self.url, cut)
        return view

    MappedSource.current_view = view_then_cut


loader = DataLoader(ds, batch_size=N, num_workers=2, worker_init_fn=cut_under_the_read)
try:
    for _ in loader:
        print("batch", flush=True)
except Exception as exc:
    print(type(exc).__name__, "|", str(exc).replace(chr(10), " "), flush=True)
"""


@needs_torch
def test_a_truncation_in_a_dataloader_worker_is_a_truncated_record_error(rec):
    """NOTE [map guard]: torch's worker SIGBUS handler does not take the guard's place: a
    record the file lost under a worker's read is recio's TruncatedRecordError, raised in
    the parent by the DataLoader, never a worker killed by a bus error."""
    cut = os.path.getsize(rec) // 3
    code = _WORKERS.replace("batch_size=N", f"batch_size={N}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", code, rec, str(cut)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    lines = result.stdout.splitlines()
    assert lines[0] == f"records {N}", result.stdout
    assert "bus error" not in result.stderr.lower(), result.stderr[-3000:]
    kind, message = lines[-1].split(" | ", 1)
    assert "TruncatedRecordError" in kind + message, (lines, result.stderr[-3000:])
    assert "t.rec" in message and "byte" in message, message
