"""The benchmark's result as a table and as a bar chart."""

from __future__ import annotations

import textwrap

from .run import BASELINE, UNLIKE_BASELINE


def describe_config(result: dict) -> list[str]:
    """What was measured, in words: the data, the output batches, the threads, the timing."""
    data, config = result["data"], result["config"]
    c, h, w = config["shape"]
    return [
        f"data: {data['url']} ({data['records']:,} records, "
        f"{data['mean_image_bytes'] / 1e3:,.1f} kB per encoded image on average)",
        f"output: batches of {config['batch_size']} images of {c}x{h}x{w} (C,H,W) "
        f"{config['dtype']}, {config['augmentation']}; {config['threads']} decode threads",
        f"timing: each stage {config['repeats']} x {config['seconds']:g} s after a warm-up; "
        "images/s is the median of the repeats (min and max beside it)",
    ]


LEGEND = (
    "MB/s: encoded bytes consumed per second (1 MB = 10^6 bytes), i.e. the compressed image "
    "bytes as stored in the .rec, not decoded pixels. 'read' counts whole record payloads "
    "(a local file is memory-mapped, not copied, so it measures the reader itself, not the "
    "disk); 'iterator end to end', MXNet and DALI are estimated as images/s x the mean "
    "record size; the training step reads none (-).",
    "vs Pillow: the stage's images/s divided by the Pillow baseline's: Pillow decode plus the "
    "same random crop, resize and flip, per image, from memory, on the same threads (what a "
    "torchvision ImageFolder loader does). Given only for stages that do that same work "
    "(decode+augment, the iterator, MXNet, DALI); read, full-size decode and the training "
    "step do other work: '-'.",
)


def _wrap(line: str) -> str:
    # whole words only: paths, URLs and stage names stay in one piece
    return textwrap.fill(
        line, 100, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )


def print_report(result: dict, out=print) -> None:
    """Print a ``run_bench`` result: what was measured, the table, skips, the verdicts."""
    for line in describe_config(result):
        out(_wrap(line))
    stages = result["stages"]
    width = max(len(n) for n in stages)
    out("")
    out(f"{'stage':<{width}}  {'images/s':>10}  {'min':>8}  {'max':>8}  {'MB/s':>8}  vs Pillow")
    for name, r in stages.items():
        ips = r["images_per_s"]
        ratio = None if name in UNLIKE_BASELINE else r.get("ratio_to_baseline")
        ratio_text = f"{ratio:.2f}x" if ratio else "-"
        mb = r.get("MB_per_s")
        mb_text = f"{mb['median']:>8,.1f}" if mb else f"{'-':>8}"
        out(
            f"{name:<{width}}  {ips['median']:>10,.0f}  {ips['min']:>8,.0f}  {ips['max']:>8,.0f}"
            f"  {mb_text}  {ratio_text}"
        )
    out("")
    lines = list(LEGEND)
    lines += [f"skipped {name}: {why}" for name, why in result["skipped"].items()]
    lines.append(f"verdict, input pipeline: {result['verdict']}")
    training = result.get("training_verdict")
    if not training:
        training = f"none ({result['skipped'].get('train step', 'not measured')})"
    lines.append(f"verdict, training step: {training}")
    for line in lines:
        out(_wrap(line))


def save_plot(result: dict, path: str) -> None:
    """Save a ``run_bench`` result as a PNG bar chart (log scale) at ``path``; needs matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["stages"])
    med = [result["stages"][n]["images_per_s"]["median"] for n in names]
    lo = [m - result["stages"][n]["images_per_s"]["min"] for n, m in zip(names, med, strict=True)]
    hi = [result["stages"][n]["images_per_s"]["max"] - m for n, m in zip(names, med, strict=True)]
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(names) + 1.5))
    colours = ["tab:gray" if n == BASELINE else "tab:blue" for n in names]
    ax.barh(names, med, xerr=[lo, hi], color=colours)
    ax.invert_yaxis()
    ax.set_xscale("log")  # raw reads run orders of magnitude faster than decoding
    ax.set_xlabel("images/s (median, min-max; log scale)")
    ax.set_title(
        f"recio bench: {result['config']['threads']} threads, batch "
        f"{result['config']['batch_size']}, {tuple(result['config']['shape'])}"
    )
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
