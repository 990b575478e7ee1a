"""recio.storage.partials: a killed writer's .partial files are removed by the next writer of
the same output, never those of a writer that still runs or that cannot be told."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from recio import storage
from recio.cli import main
from recio.records.format import IRHeader, pack
from recio.records.recordio import MXIndexedRecordIO
from recio.storage.partials import GONE, RUNNING, UNKNOWN, find_partials
from tests.images import encode

# A writer of OUT.rec and OUT.idx that writes a record, says so, then waits to be killed.
_WRITER = """
import sys, time
from recio.records.format import IRHeader, pack
from recio.records.recordio import MXIndexedRecordIO
w = MXIndexedRecordIO(sys.argv[1][:-4] + ".idx", sys.argv[1], "w")
w.write_idx(0, pack(IRHeader(0, 0.0, 0, 0), b"x" * 4096))
print("writing", flush=True)
time.sleep(600)
"""


def start_writer(rec: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(rec)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "writing"
    return proc


def killed_writer(rec: Path) -> None:
    """A writer of ``rec`` SIGKILLed mid-write: its .partial files stay behind."""
    proc = start_writer(rec)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".partial"))


def write_rec(rec: Path, n: int = 3) -> None:
    with MXIndexedRecordIO(str(rec)[:-4] + ".idx", str(rec), "w") as w:
        for k in range(n):
            w.write_idx(k, pack(IRHeader(0, float(k), k, 0), encode(16, 16, seed=k)))


@pytest.fixture
def running(tmp_path):
    procs = []

    def start(rec):
        procs.append(start_writer(rec))
        return procs[-1]

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=30)


def test_the_next_writer_removes_a_killed_writers_partials_only(tmp_path, running):
    rec = tmp_path / "out.rec"
    live = running(rec)  # a writer of the output, still at work
    killed_writer(rec)  # (its start leaves the running writer's files alone)
    unknown = [
        ".out.rec.ab12cd34.partial",  # an earlier recio's: no owner in the name
        ".out.rec.w1-0-0@another-host.example.ab12cd34.partial",  # another host's
    ]
    for name in unknown:
        (tmp_path / name).write_bytes(b"?")
    found = {p.state: p for p in find_partials(str(rec))}
    assert set(found) == {GONE, RUNNING, UNKNOWN}
    assert f"pid {live.pid}" in found[RUNNING].writer
    before = hidden(tmp_path)
    assert len(before) == 6  # .rec and .idx of two writers, and the two planted
    write_rec(rec)  # the next run to the same output
    after = hidden(tmp_path)
    assert len(after) == 4 and set(unknown) <= set(after)
    assert sum(f".w{live.pid}-" in name for name in after) == 2  # the running writer's
    assert (tmp_path / "out.idx").exists()


def test_a_partial_of_a_reused_pid_is_the_gone_writers(tmp_path):
    """The pid runs again, but as a process started at another time: the writer is gone."""
    from recio.storage.partials import partial_prefix

    rec = tmp_path / "out.rec"
    mine = partial_prefix("out.rec")  # this process, started at its own time
    start = int(mine.split("-")[1])
    assert start > 0  # Linux: /proc gives it
    pid = os.getpid()
    reused = mine.replace(f".w{pid}-{start}-", f".w{pid}-{start + 1}-") + "zz.partial"
    (tmp_path / reused).write_bytes(b"x")
    assert [p.state for p in find_partials(str(rec))] == [GONE]
    storage.AtomicOutput(str(rec)).abort()
    assert not (tmp_path / reused).exists()


def test_im2rec_removes_a_killed_writers_partials(tmp_path):
    images = tmp_path / "images" / "a"
    images.mkdir(parents=True)
    for k in range(3):
        (images / f"{k}.jpg").write_bytes(encode(16, 16, seed=k))
    prefix, root = str(tmp_path / "data"), str(tmp_path / "images")
    assert main(["im2rec", "--list", "--quiet", "--recursive", prefix, root]) == 0
    killed_writer(tmp_path / "data.rec")
    assert len(hidden(tmp_path)) == 2
    assert main(["im2rec", "--quiet", prefix, root]) == 0
    assert hidden(tmp_path) == []


def test_info_and_verify_mention_unfinished_writes(tmp_path, capsys):
    rec = tmp_path / "out.rec"
    write_rec(rec)
    assert main(["info", str(rec)]) == 0
    assert main(["verify", str(rec)]) == 0
    assert "unfinished" not in capsys.readouterr().out
    killed_writer(rec)
    assert main(["info", str(rec)]) == 0  # the dataset itself is whole
    out = capsys.readouterr().out
    assert "unfinished_writes" in out and f"1 unfinished write of {rec} (" in out
    assert "writers that are gone: the next write of it removes them" in out
    assert main(["verify", str(rec)]) == 0
    out = capsys.readouterr().out
    assert f"NOTE {rec}: 1 unfinished write of {rec}" in out and f"OK {rec}" in out
    assert os.path.basename(hidden(tmp_path)[0]) in out or "first: " in out
