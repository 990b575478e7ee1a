"""The benchmark's result as a table and as a bar chart."""

from __future__ import annotations

from .run import BASELINE


def print_report(result: dict, out=print) -> None:
    """Print a ``run_bench`` result as a table, one stage a line, then skips and the verdict."""
    stages = result["stages"]
    width = max(len(n) for n in stages)
    out(f"{'stage':<{width}}  {'images/s':>10}  {'min':>8}  {'max':>8}  {'MB/s':>8}  vs Pillow")
    for name, r in stages.items():
        ips = r["images_per_s"]
        ratio = r.get("ratio_to_baseline")
        ratio_text = f"{ratio:.2f}x" if ratio else "-"
        out(
            f"{name:<{width}}  {ips['median']:>10,.0f}  {ips['min']:>8,.0f}  {ips['max']:>8,.0f}"
            f"  {r['MB_per_s']['median']:>8,.1f}  {ratio_text}"
        )
    for name, why in result["skipped"].items():
        out(f"skipped {name}: {why}")
    out(f"verdict: {result['verdict']}")


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
