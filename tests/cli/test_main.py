"""The `recio` dispatcher: --version, errors in one line, --debug, --help of every command."""

import os
import subprocess
import sys

import pytest

from recio.cli import main as cli

from .errors import one_line_error


def test_console_script_runs():
    result = subprocess.run(
        [sys.executable, "-m", "recio.cli", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0 and "recio" in result.stdout


def test_missing_file_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RECIO_DEBUG", raising=False)
    for command in ("info", "verify", "index", "bench"):
        assert cli([command, str(tmp_path / "nope.rec")]) == 2
        one_line_error(capsys, f"recio {command}:", "nope.rec")


def test_usage_error_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli(["bench", "--batch-size", "0"])
    assert exit_.value.code == 2
    one_line_error(capsys, "--batch-size", "at least 1", "recio bench --help")
    with pytest.raises(SystemExit):
        cli(["info", "x.rec", "--storage-options", "{not json"])
    one_line_error(capsys, "--storage-options", "JSON")


def test_error_inside_a_command_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RECIO_DEBUG", raising=False)

    def broken(*args, **kwargs):
        raise ValueError("batch_size must be at least 1, not 0")

    monkeypatch.setattr("recio.bench.cli.run_bench", broken)
    assert cli(["bench", "x.rec"]) == 2
    one_line_error(capsys, "recio bench: batch_size must be at least 1")
    # a missing extra: its install hint, in one line
    monkeypatch.setitem(sys.modules, "recio.train", None)
    assert cli(["train", "x.rec"]) == 2
    one_line_error(capsys, "recio train:")


def test_a_rec_without_index_is_a_one_line_warning_with_the_fix(tmp_path, capsys, monkeypatch):
    from recio.records import file
    from recio.records.recordio import IRHeader, MXRecordIO, pack

    monkeypatch.setattr(file, "_scanned", set())
    rec = str(tmp_path / "a.rec")
    with MXRecordIO(rec, "w") as w:  # no .idx
        for i in range(3):
            w.write(pack(IRHeader(0, float(i), i, 0), b"x" * 10))
    assert cli(["info", rec]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"recio info: warning: {rec} has no index")
    assert f"`recio index {rec}`" in err[0]


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


# --- --help: defaults, examples as written, plain text ----------------------------------


def _help(capsys, *args):
    with pytest.raises(SystemExit) as exit_:
        cli([*args, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out and ":mod:" not in out  # no reStructuredText
    assert "(default: False)" not in out and "(default: True)" not in out  # flags say it
    assert "(default: None)" not in out
    return out


def _every_option_has_help(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _every_option_has_help(sub)
        elif not isinstance(action, argparse._HelpAction):
            assert action.help, f"{parser.prog} {action.option_strings or action.dest}: no help"


def test_help_of_recio_and_its_own_commands(capsys):
    from recio.cli.main import build_parser

    _every_option_has_help(build_parser())
    out = _help(capsys)
    assert "  recio bench                                           # on the built-in sample\n" in (
        out
    )
    assert "--debug or RECIO_DEBUG=1" in out
    for command in ("info", "verify", "index"):
        out = _help(capsys, command)
        assert "exit status: 0" in out and "\nexample" in out
    out = _help(capsys, "index")
    assert "tools/rec2idx.py always numbers by position" in " ".join(out.split())
    assert "--renumber" in out and "--force" in out and "--prefix-only" in out


def test_help_of_bench(capsys):
    from recio.bench import add_arguments
    from recio.cli.main import Parser

    parser = Parser(prog="recio bench")
    add_arguments(parser)
    _every_option_has_help(parser)
    assert isinstance(parser.parse_args([]).shape, tuple)
    out = _help(capsys, "bench")
    # the usage example keeps its lines (the default formatter would merge them into prose)
    assert "\n    recio bench [URL-or-PATH] [--threads N] [--batch-size B]" in out
    assert "\n  recio bench --keep /tmp/sample " in out
    flat = " ".join(out.split())
    for default in ("(default: 64)", "(default: 3,224,224)", "(default: uint8)", "(default: 400)"):
        assert default in flat
    assert "vs Pillow" in flat and "MB/s counts the encoded (compressed) bytes" in flat
    assert "Modules:" not in out
