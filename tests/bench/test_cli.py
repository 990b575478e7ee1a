"""`recio bench` on the default sample: it builds it, says what it measures, writes JSON."""

import json
import os

from recio.cli import main as cli

SMALL = ["--num-images", "24", "--batch-size", "8", "--shape", "3,48,48", "--seconds", "0.1"]
SMALL += ["--repeats", "1", "--threads", "2"]


def test_cli_default_sample(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert cli(["bench", *SMALL, "--json", str(out)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "built the sample dataset" in text
    # where the sample is, and that it goes away
    assert "recio-bench-" in text and "removed when the benchmark ends; --keep DIR" in text
    # what was measured: shape, batch size, dtype, threads
    assert "batches of 8 x 3x48x48 uint8, 2 decode threads" in text
    assert "batches of 8 images of 3x48x48 (C,H,W) uint8" in text
    # what the columns mean
    assert "MB/s: encoded bytes consumed per second" in text
    assert "vs Pillow: the stage's images/s divided by the Pillow baseline's" in text
    # the input pipeline's verdict apart from the training step's
    assert "verdict, input pipeline: end to end" in text
    assert "verdict, training step: " in text
    # the built-in sample's JPEGs have no restart markers: an optimized copy is measured too
    assert "iterator end to end, optimized input" in text
    assert "verdict, recio optimize: the JPEGs carry no restart markers" in text
    assert json.loads(out.read_text())["data"]["records"] == 24


def test_keep_keeps_the_sample(tmp_path, capsys):
    keep = tmp_path / "sample"
    assert cli(["bench", *SMALL, "--keep", str(keep)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    rec = keep / "sample.rec"
    assert rec.is_file() and (keep / "sample.idx").is_file() and (keep / "images").is_dir()
    assert f"packed into {rec}" in text and f"`recio bench {rec}`" in text
    # a directory with files in it is refused, in one line, before anything is built
    before = sorted(os.listdir(keep))
    assert cli(["bench", *SMALL, "--keep", str(keep)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not empty" in err
    assert sorted(os.listdir(keep)) == before
    # --keep is for the built-in sample only
    assert cli(["bench", str(rec), "--keep", str(tmp_path / "other")]) == 2
    assert "--keep is for the built-in sample" in capsys.readouterr().err


def test_bad_arguments_are_refused_before_any_work(tmp_path, capsys, monkeypatch):
    import recio.bench.cli as bench_cli

    def no_work(*args, **kwargs):
        raise AssertionError("the benchmark started before its arguments were checked")

    monkeypatch.setattr(bench_cli, "build_sample_rec", no_work)
    monkeypatch.setattr(bench_cli, "run_bench", no_work)
    for bad, words in [
        (["--shape", "1,224,224"], "C must be 3 (give 3,224,224)"),
        (["--shape", "224,224,3"], "C must be 3 (give 3,224,224)"),  # channels last
        (["--shape", "112,96,3"], "C must be 3 (give 3,112,96)"),
        (["--json", str(tmp_path / "no" / "b.json")], f"no directory {tmp_path / 'no'}"),
        (["--trace", str(tmp_path)], "is a directory; give a file name"),
        (["--mxnet-python", str(tmp_path / "python")], "no such executable"),
        (["--optimize-limit", "-1"], "a number of at least 0, not '-1'"),
    ]:
        try:
            status = cli(["bench", *SMALL, *bad])
        except SystemExit as exc:  # argparse's own refusal
            status = exc.code
        assert status == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and words in err, err


def test_run_bench_checks_its_arguments_first(tmp_path):
    import pytest

    from recio.bench import run_bench

    missing = str(tmp_path / "never-read.rec")  # a bad argument is said before the file
    for kw, words in [
        ({"shape": (1, 64, 64)}, "C must be 3"),
        ({"batch_size": 0}, "batch size must be an integer of at least 1"),
        ({"dtype": "int8"}, "dtype must be one of uint8, float32, float16"),
    ]:
        with pytest.raises(ValueError, match=words):
            run_bench(missing, **kw, log=lambda _: None)
