"""Throughput of every pipeline stage and end to end, with baselines, measured in one run.

    recio bench [URL-or-PATH] [--threads N] [--batch-size B] [--shape 3,224,224]
                [--seconds S] [--repeats R] [--json F] [--trace F] [--plot F.png]

With no argument it builds the built-in sample dataset (coloured shapes, JPEG),
packs it as .rec/.idx, and measures that. Each stage runs after a warm-up,
``--repeats`` times for ``--seconds`` each; figures are medians with min/max.
The stages are measured one after another on the same data, so their ratios
are comparable even on a noisy machine; absolute numbers are not.

Modules: :mod:`~recio.bench.sample` (the built-in dataset), :mod:`~recio.bench.stages`
(the measured stages), :mod:`~recio.bench.mxnet` (MXNet's baseline), :mod:`~recio.bench.run`
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
