"""recio bench's report: the text (what was measured, the columns, the verdicts) and the plot."""

import pytest

from recio.bench import BASELINE, print_report, save_plot
from recio.bench.run import pipeline_verdict, training_verdict


def _stages(**rates):
    """Stages at these rates in three interleaved rounds, 2 % apart."""
    return {
        name: {
            "images_per_s": {"median": r, "min": 0.98 * r, "max": 1.02 * r},
            "rounds": [0.98 * r, r, 1.02 * r],
        }
        for name, r in rates.items()
    }


def _synthetic(train_rate):
    stages = _stages(
        **{
            "read": 50_000.0,
            "decode+augment (native pool)": 2_000.0,
            "iterator end to end": 1_800.0,
            BASELINE: 600.0,
        }
    )
    for s in stages.values():
        s["MB_per_s"] = {"median": 1.0}
    if train_rate:
        stages["train step"] = _stages(t=train_rate)["t"]
    bound, verdict = pipeline_verdict(stages, 4)
    return {
        "data": {"url": "x.rec", "records": 400, "mean_image_bytes": 25_000.0},
        "config": {
            "threads": 4,
            "batch_size": 64,
            "shape": [3, 224, 224],
            "dtype": "float16",
            "seconds": 2.0,
            "repeats": 3,
            "augmentation": "RandomResizedCrop + flip",
        },
        "stages": stages,
        "skipped": {} if train_rate else {"train step": "the train extra is not installed"},
        "bound_by": bound,
        "verdict": verdict,
        "training_verdict": training_verdict(stages, 64, (3, 224, 224)),
    }


def test_the_training_step_does_not_decide_the_pipeline_verdict():
    slow_model = _synthetic(train_rate=100.0)
    # the pipeline is bound by its own slowest stage, not by a slower training step
    assert slow_model["bound_by"] == "decode+augment (native pool)"
    assert "bound by decode+augment (native pool)" in slow_model["verdict"]
    assert "450 images/s per core" in slow_model["verdict"]
    assert "3.00x the Pillow baseline" in slow_model["verdict"]
    assert "compute-bound" in slow_model["training_verdict"]
    assert "18.0x" in slow_model["training_verdict"]
    fast_model = _synthetic(train_rate=9_000.0)["training_verdict"]
    assert "input-bound" in fast_model and "delivers 20% of it" in fast_model
    assert _synthetic(train_rate=None)["training_verdict"] is None


def test_report_says_what_was_measured_and_what_the_columns_are():
    lines = []
    result = _synthetic(train_rate=100.0)
    result["stages"]["train step"]["ratio_to_baseline"] = 1 / 6
    print_report(result, out=lines.append)
    text = "\n".join(lines)
    flat = " ".join(text.split())
    assert "batches of 64 images of 3x224x224 (C,H,W) float16" in flat
    assert "4 decode threads" in flat and "3 x 2 s after a warm-up" in flat
    assert "x.rec (400 records, 25.0 kB per encoded image" in flat
    assert "MB/s: encoded bytes consumed per second" in flat and "vs Pillow:" in flat
    train_row = next(line for line in lines if line.startswith("train step"))
    assert train_row.split()[-2] == "-"  # no bytes: a step on random tensors
    # like with like: a read (or a step) is no ratio against the baseline's decode
    assert train_row.split()[-1] == "-"
    result["stages"]["read"]["ratio_to_baseline"] = 50_000 / 600  # (an older result's)
    result["stages"]["iterator end to end"]["ratio_to_baseline"] = 1_800 / 600
    lines.clear()
    print_report(result, out=lines.append)
    read_row = next(line for line in lines if line.startswith("read"))
    assert read_row.split()[-1] == "-"
    e2e_row = next(line for line in lines if line.startswith("iterator end to end"))
    assert e2e_row.split()[-1] == "3.00x"
    assert "verdict, input pipeline: end to end 1,800 images/s" in flat
    assert "verdict, training step: the training step" in flat
    table = ("stage", "read", "decode", "iterator", "Pillow", "train")
    text_lines = text.splitlines()
    assert max(len(line) for line in text_lines if not line.startswith(table)) <= 100
    lines.clear()
    print_report(_synthetic(train_rate=None), out=lines.append)
    assert "verdict, training step: none (the train extra is not installed)" in "\n".join(lines)


def test_plot_is_png(result):
    pytest.importorskip("matplotlib")
    path = result["_workdir"] / "bench.png"
    save_plot(result, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
