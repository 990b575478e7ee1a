"""Throughput of every pipeline stage and end to end, with baselines, measured in one run.

    recio bench [URL-or-PATH] [--threads N] [--batch-size B] [--shape 3,224,224]
                [--seconds S] [--repeats R] [--json F] [--trace F] [--plot F.png]

With no argument it builds the built-in sample dataset (coloured shapes, JPEG),
packs it as .rec/.idx, and measures that. recio's stages and the Pillow baseline run in
``--repeats`` interleaved rounds, each stage ``--seconds`` per round after a warm-up
(:mod:`~recio.bench.noise`); figures are medians with min/max, and a verdict compares two
stages round by round, only where the difference is larger than the rounds' spread.

Modules: :mod:`~recio.bench.sample` (the built-in dataset), :mod:`~recio.bench.stages`
(the measured stages), :mod:`~recio.bench.noise` (interleaved rounds, comparisons beyond
their noise), :mod:`~recio.bench.mxnet` (MXNet's baseline), :mod:`~recio.bench.run`
(one run and its verdict), :mod:`~recio.bench.report` (table and plot),
:mod:`~recio.bench.cli` (the command line).
"""

from .cli import add_arguments, run
from .report import print_report, save_plot
from .run import BASELINE, machine_info, run_bench
from .sample import build_sample_rec, make_sample_folder

__all__ = [
    "BASELINE",
    "add_arguments",
    "build_sample_rec",
    "machine_info",
    "make_sample_folder",
    "print_report",
    "run",
    "run_bench",
    "save_plot",
]
