"""im2rec's command line: interrupted runs, `recio im2rec`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import recio
from recio import im2rec
from recio.records.recordio import MXIndexedRecordIO

from .conftest import make_list, read_records, run


def test_interrupt_removes_partial_output(tmp_path, images, monkeypatch):
    prefix = make_list(tmp_path, images)
    real = im2rec.pack.make_batch  # what the threads run
    calls = []

    def interrupted(entries, root, opts, **kw):  # the second batch is interrupted
        calls.append(entries)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(entries, root, opts, **kw)

    monkeypatch.setattr(im2rec.pack, "make_batch", interrupted)
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


def test_help_shows_defaults_examples_and_exit_codes(capsys):
    from recio.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["im2rec", "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    flat = " ".join(text.split())
    assert "``" not in text and ":mod:" not in text
    assert (
        "JPEG quality 1-100, or PNG compression level 0-9 with --encoding .png (default: 95)"
        in flat
    )
    assert "(default: True)" not in text and "(default: False)" not in text  # no flag defaults
    assert (
        "--no-shuffle write the list in the order of the folder walk (sorted); without it" in flat
    )
    assert "--no-report do not write NAME.report.json" in flat
    # the examples as written, one per line
    assert (
        "\n  recio im2rec --list --recursive data/train images/     # images/ → data/train.lst\n"
        in text
    )
    assert (
        "\n  recio im2rec --resize 256 --quality 90 data/train images/   # .lst → .rec/.idx\n"
        in text
    )
    for code in (im2rec.EXIT_OK, im2rec.EXIT_SKIPPED, im2rec.EXIT_FAILED, im2rec.EXIT_INTERRUPTED):
        assert f"\n  {code:<4} " in text


@pytest.mark.parametrize(
    "case", ["missing root", "missing list", "bad value", "bad int", "bad quality"]
)
def test_errors_are_one_line_and_non_zero(tmp_path, images, case):
    prefix = make_list(tmp_path, images)
    argv, says = {
        "missing root": (["--list", prefix, tmp_path / "nope"], "image folder ROOT"),
        "missing list": ([tmp_path / "other", images], "no .lst file with prefix"),
        "bad value": (["--num-thread", 0, prefix, images], "--num-thread: must be at least 1"),
        "bad int": (
            ["--chunks", "x", "--list", prefix, images],
            "--chunks: expected an integer, not 'x'",
        ),
        "bad quality": (["--quality", 200, prefix, images], "JPEG quality must be 1..100"),
    }[case]
    done = recio_im2rec(*argv)
    assert done.returncode == im2rec.EXIT_FAILED
    assert len(done.stderr.splitlines()) == 1 and says in done.stderr, done.stderr


def test_python_dash_m_runs_the_command():
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "recio.im2rec", "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and "PREFIX ROOT" in proc.stdout
