"""recio bench's verdicts hold under load: interleaved rounds, and no verdict inside the noise.

The verdict logic is fed made-up rounds (recio.bench.noise.compare, the pipeline and
optimize verdicts); the whole bench runs once quiet and once with CPU-burning processes
beside it, and the loaded run never contradicts the quiet one.
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from recio.bench import BASELINE, build_sample_rec, run_bench
from recio.bench.noise import MIN_EFFECT, compare, interleaved
from recio.bench.optimized import OPTIMIZED, MarkerCensus, optimize_verdict
from recio.bench.run import pipeline_verdict

READ, DECODE, END = "read", "decode+augment (native pool)", "iterator end to end"


def test_a_clear_effect_is_decided():
    got = compare([1300.0, 1250.0, 1400.0], [1000.0, 980.0, 1050.0])
    assert got.decided and not got.same
    assert got.ratio == pytest.approx(1300 / 1000)
    assert got.low == pytest.approx(1250 / 980) and got.high == pytest.approx(1400 / 1050)
    assert got.noise == pytest.approx(math.exp(abs(math.log((1400 / 1050) / 1.3))) - 1)


def test_one_busy_round_leaves_the_effect_undecided():
    # The loaded run of the issue: one round at 0.89x, two at about 1.3x.
    got = compare([890.0, 1300.0, 1400.0], [1000.0, 1000.0, 1000.0])
    assert got.ratio == pytest.approx(1.3) and got.noise > got.effect
    assert not got.decided and not got.same


def test_no_effect_within_little_noise_is_the_same():
    got = compare([1010.0, 1000.0, 990.0], [1000.0, 1000.0, 1000.0])
    assert got.same and not got.decided
    below = compare([1030.0, 1040.0, 1035.0], [1000.0, 1000.0, 1000.0])  # 3.5 %: too small
    assert below.effect < MIN_EFFECT and not below.decided


def test_one_round_decides_nothing():
    got = compare([2000.0], [1000.0])
    assert got.ratio == 2.0 and got.noise == math.inf and not got.decided and not got.same
    assert "--repeats 3" in got.cannot_tell("it", "it ran at")


def test_rounds_must_pair():
    with pytest.raises(ValueError, match="same rounds"):
        compare([1.0, 2.0], [1.0])


def _stages(**rounds):
    out = {}
    for name, values in rounds.items():
        ordered = sorted(values)
        median = ordered[len(values) // 2]
        out[name] = {
            "images_per_s": {"median": median, "min": ordered[0], "max": ordered[-1]},
            "rounds": list(values),
        }
    return out


def test_the_optimize_verdict_under_noise_says_too_busy_and_by_how_much():
    stages = _stages(**{END: [1000.0, 1000.0, 1000.0], OPTIMIZED: [890.0, 1300.0, 1400.0]})
    words = optimize_verdict(stages, MarkerCensus(8, 8, 0), None)
    assert "too busy to tell whether recio optimize would speed the iterator" in words
    assert "0.89x to 1.40x in 3 interleaved rounds" in words and "noise ±" in words
    assert "larger than the 1.30x measured" in words
    assert "--repeats" in words and "would slow" not in words and "as fast here" not in words


def test_end_to_end_share_never_above_100_percent():
    stages = _stages(
        **{
            READ: [50_000.0, 52_000.0, 51_000.0],
            DECODE: [1_000.0, 1_010.0, 990.0],
            END: [1_270.0, 1_280.0, 1_260.0],  # the "127 %"
            BASELINE: [500.0, 500.0, 500.0],
        }
    )
    bound, words = pipeline_verdict(stages, 2, MarkerCensus(8, 8, 8))
    assert bound == DECODE and "100 %" in words and "127%" not in words
    assert "recio optimize" not in words  # every JPEG sampled carries markers
    below = _stages(**{**{k: v["rounds"] for k, v in stages.items()}, END: [800.0, 810.0, 790.0]})
    assert "of which end to end reaches 80%" in pipeline_verdict(below, 2)[1]


def test_a_decode_bound_names_recio_optimize_where_markers_are_missing():
    stages = _stages(
        **{
            READ: [50_000.0, 52_000.0, 51_000.0],
            DECODE: [1_000.0, 1_010.0, 990.0],
            END: [900.0, 910.0, 890.0],
            BASELINE: [500.0, 500.0, 500.0],
        }
    )
    bound, words = pipeline_verdict(stages, 2, MarkerCensus(8, 8, 0))
    assert bound == DECODE and "8 of the 8 JPEGs sampled carry no restart markers" in words
    assert "`recio optimize` adds them" in words


def test_stages_within_each_others_noise_bind_nothing():
    stages = _stages(
        **{
            READ: [900.0, 1_400.0, 1_000.0],
            DECODE: [1_000.0, 1_000.0, 1_050.0],
            END: [800.0, 810.0, 790.0],
            BASELINE: [500.0, 500.0, 500.0],
        }
    )
    bound, words = pipeline_verdict(stages, 2)
    assert bound is None and "too busy to tell which stage binds" in words
    assert "--step-ms" in words and "bound by" not in words


def test_interleaved_runs_every_stage_once_per_round_in_a_rotated_order():
    order = []

    def stage(name):
        def factory():
            order.append(name)
            return (lambda: (1, 10)), (lambda: order.append(f"close {name}"))

        return factory

    got = interleaved({"a": stage("a"), "b": stage("b")}, 0.001, 3, log=lambda _: None)
    opened = [o for o in order if not o.startswith("close")]
    assert opened == ["a", "b", "b", "a", "a", "b"]
    assert order.count("close a") == 3 and order.count("close b") == 3
    assert len(got["a"]["rounds"]) == 3 and got["a"]["images_per_s"]["median"] > 0


def _kind_of_optimize(words: str) -> str:
    for kind, mark in (
        ("busy", "cannot tell"),
        ("busy", "too busy"),
        ("faster", "as fast here"),
        ("slower", "would slow"),
        ("same", "would not change"),
    ):
        if mark in words:
            return kind
    raise AssertionError(words)


@pytest.mark.slow
def test_a_cpu_burner_beside_the_bench_never_flips_a_verdict(tmp_path):
    rec = build_sample_rec(str(tmp_path), num_images=48)

    def bench():
        return run_bench(
            rec, threads=2, batch_size=8, shape=(3, 64, 64), seconds=0.4, repeats=3,
            log=lambda _: None,
        )  # fmt: skip

    quiet = bench()
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)
    ]  # fmt: skip
    try:
        loaded = bench()
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    # The stage that binds: the quiet one's, or none (too busy to tell).
    assert loaded["bound_by"] in (quiet["bound_by"], None), (quiet["verdict"], loaded["verdict"])
    before = _kind_of_optimize(quiet["optimize_verdict"])
    after = _kind_of_optimize(loaded["optimize_verdict"])
    assert {before, after} != {"faster", "slower"}, (
        quiet["optimize_verdict"],
        loaded["optimize_verdict"],
    )
    for result in (quiet, loaded):
        assert "end to end reaches" in result["verdict"] or result["bound_by"] is None
        assert all(len(s["rounds"]) == 3 for n, s in result["stages"].items() if "rounds" in s)
