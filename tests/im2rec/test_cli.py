"""im2rec's command line: interrupted runs, `recio im2rec`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import recio
from recio import im2rec
from recio.recordio import MXIndexedRecordIO

from .conftest import make_list, read_records, run


def test_interrupt_removes_partial_output(tmp_path, images, monkeypatch):
    prefix = make_list(tmp_path, images)
    real = im2rec.make_records
    calls = []

    def interrupted(entries, root, opts):  # a batch of 8: the second one is interrupted
        calls.append(entries)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(entries, root, opts)

    monkeypatch.setattr(im2rec.pack, "make_records", interrupted)
    # threads (the default with the extension): a process pool could not pickle the patch
    code = run("--num-thread", 2, "--pool", "thread", prefix, images)
    assert code == im2rec.EXIT_INTERRUPTED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.lst", "data.report.json"]
    assert json.loads((tmp_path / "data.report.json").read_text())["status"] == "interrupted"


def test_recio_cli_subcommand(tmp_path, images):
    from recio.cli import main

    assert main(["im2rec", "--list", "--quiet", str(tmp_path / "x"), str(images / "class_01")]) == 0
    assert main(["im2rec", "--quiet", str(tmp_path / "x"), str(images / "class_01")]) == 0
    assert len(read_records(tmp_path / "x")) == 6


def test_failed_publish_is_reported_and_exits_failed(tmp_path, images, monkeypatch, caplog):
    prefix = make_list(tmp_path, images)

    class FullDisk(MXIndexedRecordIO):
        def close(self):
            if self.writable and self.is_open:
                raise OSError(28, "No space left on device")
            super().close()

    monkeypatch.setattr(im2rec.pack, "MXIndexedRecordIO", FullDisk)
    assert run("--resize", 32, prefix, images) == im2rec.EXIT_FAILED
    assert "No space left on device" in caplog.text
    assert json.loads((tmp_path / "data.report.json").read_text())["status"] == "failed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.lst", "data.report.json"]
    # "failed or aborted" and "some images skipped" are told apart by the exit code
    codes = [im2rec.EXIT_OK, im2rec.EXIT_SKIPPED, im2rec.EXIT_FAILED, im2rec.EXIT_INTERRUPTED]
    assert len(set(codes)) == 4


def test_skips_in_one_list_do_not_stop_the_next_lists(tmp_path, images):
    prefix = make_list(tmp_path, images, "data", "--chunks", 3)
    with open(tmp_path / "data_0.lst", "a") as f:
        f.write("not a list line\n")
    assert run("--resize", 32, prefix, images) == im2rec.EXIT_SKIPPED
    assert [len(read_records(tmp_path / f"data_{k}")) for k in range(3)] == [8, 8, 8]


def recio_im2rec(*argv: object) -> subprocess.CompletedProcess:
    """``recio im2rec ARGV`` in a new process, as a user runs it (its own logging setup)."""
    env = dict(os.environ, PYTHONPATH=str(Path(recio.__file__).parents[1]))
    command = [sys.executable, "-m", "recio.cli", "im2rec", *map(str, argv)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def test_quiet_still_says_why_it_exits_non_zero(tmp_path, images):
    prefix = make_list(tmp_path, images)
    with open(tmp_path / "data.lst", "a") as f:
        f.write("99\t0\tmissing.jpg\n")
    done = recio_im2rec("--quiet", "--resize", 32, prefix, images)
    assert done.returncode == im2rec.EXIT_SKIPPED
    assert "1 skipped" in done.stderr and "skipped missing.jpg: file not found" in done.stderr
    assert "--allow-skips" in done.stderr and "Traceback" not in done.stderr
