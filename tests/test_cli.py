"""The `recio` command: info, verify, index, --version."""

import os
import subprocess
import sys

import pytest

from recio.cli import main as cli
from recio.format import IRHeader, pack
from recio.reader import RecordFile
from recio.recordio import MXIndexedRecordIO


def test_cli_info_verify_index(tmp_path, capsys):
    rec, idx = str(tmp_path / "c.rec"), str(tmp_path / "c.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for i in range(6):
            w.write_idx(i, pack(IRHeader(0, float(i % 3), i, 0), b"img%d" % i))
    assert cli(["info", rec]) == 0
    out = capsys.readouterr().out
    assert "records" in out and "6" in out and "index_agrees" in out and "True" in out
    assert cli(["verify", rec]) == 0
    os.remove(idx)
    assert cli(["index", rec]) == 0
    assert open(idx).read().splitlines() == [
        f"{i}\t{o}" for i, o in enumerate(RecordFile(rec).offsets.tolist())
    ]
    # a wrong .idx is detected by info
    open(idx, "w").write("0\t0\n")
    assert cli(["info", rec]) == 1
    # a corrupt file: verify names the byte offset and exits non-zero
    data = bytearray(open(rec, "rb").read())
    data[40:44] = b"\0\0\0\0"
    open(rec, "wb").write(bytes(data))
    assert cli(["verify", rec]) == 1
    assert "at byte" in capsys.readouterr().out


def test_console_script_runs():
    result = subprocess.run(
        [sys.executable, "-m", "recio.cli", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0 and "recio" in result.stdout


# --- errors: one line on stderr, a non-zero exit; --debug / RECIO_DEBUG=1 for the traceback


def _one_line_error(capsys, *words):
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word in err, err
    return err


def test_missing_file_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RECIO_DEBUG", raising=False)
    for command in ("info", "verify", "index", "bench"):
        assert cli([command, str(tmp_path / "nope.rec")]) == 2
        _one_line_error(capsys, f"recio {command}:", "nope.rec")


def test_usage_error_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli(["bench", "--batch-size", "0"])
    assert exit_.value.code == 2
    _one_line_error(capsys, "--batch-size", "at least 1", "recio bench --help")
    with pytest.raises(SystemExit):
        cli(["info", "x.rec", "--storage-options", "{not json"])
    _one_line_error(capsys, "--storage-options", "JSON")


def test_error_inside_a_command_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RECIO_DEBUG", raising=False)

    def broken(*args, **kwargs):
        raise ValueError("batch_size must be at least 1, not 0")

    monkeypatch.setattr("recio.bench.cli.run_bench", broken)
    assert cli(["bench", "x.rec"]) == 2
    _one_line_error(capsys, "recio bench: batch_size must be at least 1")
    # a missing extra: its install hint, in one line
    monkeypatch.setitem(sys.modules, "recio.train", None)
    assert cli(["train", "x.rec"]) == 2
    _one_line_error(capsys, "recio train:")


def test_debug_shows_the_traceback(tmp_path, monkeypatch):
    missing = str(tmp_path / "nope.rec")
    monkeypatch.delenv("RECIO_DEBUG", raising=False)
    with pytest.raises(FileNotFoundError):
        cli(["--debug", "verify", missing])
    with pytest.raises(FileNotFoundError):
        cli(["verify", "--debug", missing])
    with pytest.raises(FileNotFoundError):
        cli(["bench", "--debug", missing])
    monkeypatch.setenv("RECIO_DEBUG", "1")
    with pytest.raises(FileNotFoundError):
        cli(["info", missing])


def test_bench_errors_in_a_shell(tmp_path):
    """What a user sees: `recio bench nope.rec` and `--batch-size 0`, one line each, exit 2."""
    env = {k: v for k, v in os.environ.items() if k != "RECIO_DEBUG"}
    for args in (["bench", str(tmp_path / "nope.rec")], ["bench", "--batch-size", "0"]):
        result = subprocess.run(
            [sys.executable, "-m", "recio.cli", *args], capture_output=True, text=True, env=env
        )
        assert result.returncode == 2, result
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "Traceback" not in result.stderr and not result.stdout
