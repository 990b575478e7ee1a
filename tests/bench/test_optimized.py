"""recio bench's optimized-input row: restart markers found, the copy measured, the verdict."""

import io

import numpy as np
import pytest
from PIL import Image

from recio.bench import print_report, run_bench
from recio.bench.noise import compare
from recio.bench.optimized import (
    OPTIMIZED,
    MarkerCensus,
    marker_census,
    optimize_verdict,
    restart_interval,
    why_not_optimize,
)
from recio.im2rec.optimize import optimize


def jpeg(**options) -> bytes:
    pixels = np.random.default_rng(0).integers(0, 256, (40, 72, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", **options)
    return out.getvalue()


def test_restart_interval_reads_the_dri_before_the_first_scan():
    assert restart_interval(jpeg()) == 0
    assert restart_interval(jpeg(restart_marker_blocks=3)) == 3
    assert restart_interval(bytearray(jpeg(restart_marker_blocks=1))) == 1
    assert restart_interval(memoryview(jpeg(restart_marker_rows=1))) == 5  # 72 px: 5 MCUs
    # after an APP1 (Exif) segment, as cameras write them
    exif = Image.Exif()
    exif[0x010F] = "camera"
    assert restart_interval(jpeg(exif=exif.tobytes(), restart_marker_blocks=2)) == 2
    # a progressive frame's markers are not what the crop path segments: optimize would help
    assert restart_interval(jpeg(progressive=True, restart_marker_blocks=1)) == 0


def test_restart_interval_walks_segments_rather_than_searching_bytes():
    plain = jpeg()
    dri = b"\xff\xdd\x00\x04\x00\x07"
    # a DRI segment's bytes inside a comment are not a DRI
    comment = b"\xff\xfe" + (2 + len(dri)).to_bytes(2, "big") + dri
    assert restart_interval(plain[:2] + comment + plain[2:]) == 0
    assert restart_interval(plain[:2] + dri + plain[2:]) == 7
    assert restart_interval(plain[:2] + b"\xff\xdd\x00\x04\x00\x00" + plain[2:]) == 0  # off
    # not a JPEG, or a header cut short or with a bad length: unknown
    png = io.BytesIO()
    Image.new("RGB", (8, 8)).save(png, "PNG")
    assert restart_interval(png.getvalue()) is None
    assert restart_interval(b"") is None
    assert restart_interval(plain[:40]) is None
    assert restart_interval(plain[:2] + b"\xff\xfe\x00\x01" + plain[2:]) is None


def test_marker_census_samples_spread_over_the_file():
    marked, plain = jpeg(restart_marker_blocks=1), jpeg()
    assert marker_census([plain] * 100) == MarkerCensus(32, 32, 0)
    # the sample reaches the file's end: 90 plain records, then 10 marked ones
    census = marker_census([plain] * 90 + [marked] * 10)
    assert census.sampled == 32 and census.jpegs == 32 and 0 < census.marked < 32
    assert marker_census([b"not an image", marked, marked]) == MarkerCensus(3, 2, 2)
    assert marker_census([]) == MarkerCensus(0, 0, 0)


def test_why_not_and_the_verdict_without_the_row(tmp_path):
    rec = tmp_path / "x.rec"
    rec.write_bytes(b"\0" * 2_000_000)
    none = MarkerCensus(8, 8, 0)
    assert why_not_optimize(str(rec), None, none, 300.0) is None
    assert why_not_optimize(str(rec), None, none, None) is None
    too_big = why_not_optimize(str(rec), None, none, 1.0)
    assert "2 MB is more than the bench copies (--optimize-limit 1 MB)" in too_big
    assert "--optimize-limit 0" in why_not_optimize(str(rec), None, none, 0)
    remote = why_not_optimize("s3://bucket/train.rec", None, none, None)
    assert "a remote file" in remote
    verdict = optimize_verdict({}, none, remote)
    assert verdict.startswith("the JPEGs carry no restart markers; recio optimize would add")
    assert "a remote file" in verdict
    no_jpegs = why_not_optimize(str(rec), None, MarkerCensus(8, 0, 0), None)
    assert "no JPEG among the 8 records sampled" in optimize_verdict(
        {}, MarkerCensus(8, 0, 0), no_jpegs
    )
    some = optimize_verdict({}, MarkerCensus(8, 8, 6), too_big)
    assert some.startswith("2 of the 8 JPEGs sampled carry no restart markers")


@pytest.mark.parametrize(("optimized", "words"), [
    (1300.0, "would make the iterator 1.30x as fast here"),
    (1000.0, "would not change the iterator's speed here (1.00x"),
    (800.0, "would slow the iterator here (0.80x as fast, 0.78x to 0.82x"),
])  # fmt: skip
def test_the_verdict_gives_the_measured_ratio(optimized, words):
    stages = {  # three interleaved rounds: their ratios 2 % apart
        "iterator end to end": {"rounds": [990.0, 1000.0, 1010.0]},
        OPTIMIZED: {"rounds": [optimized * 1.01, optimized, optimized * 0.99]},
    }
    assert words in optimize_verdict(stages, MarkerCensus(8, 8, 0), None)


def test_the_built_in_sample_gets_the_row_and_the_verdict(result):
    stages = result["stages"]
    row, iterator = stages[OPTIMIZED], stages["iterator end to end"]
    assert 0 < row["images_per_s"]["min"] <= row["images_per_s"]["median"]
    assert row["ratio_to_baseline"] > 0 and row["MB_per_s"]["median"] > 0  # the same work
    census = result["optimized_input"]["census"]
    assert census["jpegs"] == census["sampled"] > 0 and census["marked"] == 0
    assert result["optimized_input"]["transcoded"] == result["data"]["records"]
    assert OPTIMIZED not in result["skipped"]
    assert len(row["rounds"]) == len(iterator["rounds"]) == result["config"]["repeats"]
    ratio = compare(row["rounds"], iterator["rounds"]).ratio  # the rounds' median ratio
    verdict = result["optimize_verdict"]
    assert verdict.startswith("the JPEGs carry no restart markers")
    assert f"{ratio:.2f}x" in verdict and "interleaved rounds" in verdict
    lines = []
    print_report(result, out=lines.append)
    text = " ".join(" ".join(lines).split())
    assert OPTIMIZED in text and f"verdict, recio optimize: {verdict}" in text


def test_a_file_already_optimized_has_no_row(result, tmp_path):
    src = str(result["_workdir"] / "sample.rec")
    dst = str(tmp_path / "optimized.rec")
    optimize(src, dst, num_thread=2)
    again = run_bench(
        dst, threads=2, batch_size=8, shape=(3, 48, 48), seconds=0.1, repeats=1,
        log=lambda _: None,
    )  # fmt: skip
    assert OPTIMIZED not in again["stages"] and OPTIMIZED not in again["skipped"]
    assert "iterator end to end" in again["stages"]
    assert again["optimize_verdict"].startswith("the JPEGs carry restart markers already")
    census = again["optimized_input"]["census"]
    assert census["marked"] == census["jpegs"] > 0


def test_a_file_over_the_limit_is_skipped_with_its_reason(result):
    src = str(result["_workdir"] / "sample.rec")
    small = run_bench(
        src, threads=2, batch_size=8, shape=(3, 48, 48), seconds=0.1, repeats=1,
        optimize_limit_mb=0.01, log=lambda _: None,
    )  # fmt: skip
    assert OPTIMIZED not in small["stages"]
    assert "more than the bench copies" in small["skipped"][OPTIMIZED]
    assert "not measured: " in small["optimize_verdict"]
    assert "more than the bench copies" in small["optimize_verdict"]
