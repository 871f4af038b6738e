"""Figure of notebook 05: the cost ladder, $ per million tokens against peak bandwidth, with each GPU's
naive and best configuration and the cost a bandwidth-bound step would have (plots.style / plots.save)."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter
import pandas as pd

from . import plots
from .cost import MEASURED_LABEL

KERNEL_STYLE = {"naive": dict(facecolors="none", s=60), "best": dict(s=60)}
SOURCE_STYLE = {MEASURED_LABEL: dict(marker="s", color="#1b9e77")}
PUBLISHED_STYLE = dict(marker="*", color="black")


def cost_ladder(ladder: pd.DataFrame, floors: pd.DataFrame, floor_label: str, notes: list[str] = ()):
    """$/Mtok (log) against datasheet bandwidth (log): per source and GPU the naive configuration (hollow)
    and the best (filled), joined by a line and labelled with configuration and $/Mtok; the cost at the
    memory floor of every priced GPU (dashed). `notes` (e.g. GPUs without a price) go under the axes."""
    plots.style()
    if ladder.empty:
        return plots._empty("No priced configuration: add prices to data/specs/prices.csv.")
    fig, ax = plt.subplots(figsize=(7.0, 4.6))
    for (source, gpu), g in ladder.groupby(["source", "gpu"]):
        style = SOURCE_STYLE.get(source, PUBLISHED_STYLE)
        g = g.sort_values("usd_per_mtok", ascending=False)
        ax.plot(g["bandwidth_gbps"], g["usd_per_mtok"], color=style["color"], linewidth=0.8)
        for r in g.itertuples():
            ax.scatter([r.bandwidth_gbps], [r.usd_per_mtok], marker=style["marker"],
                       edgecolors=style["color"], **({"color": style["color"]} if r.kernels == "best" else {}),
                       **KERNEL_STYLE[r.kernels], zorder=4)
            ax.annotate(f"{gpu} {r.configuration}: ${r.usd_per_mtok:.2f}", (r.bandwidth_gbps, r.usd_per_mtok),
                        textcoords="offset points", xytext=(7, -3), fontsize=7)
    for source in ladder["source"].unique():
        style = SOURCE_STYLE.get(source, PUBLISHED_STYLE)
        for kernels in ("naive", "best"):
            ax.scatter([], [], marker=style["marker"], edgecolors=style["color"],
                       **({"color": style["color"]} if kernels == "best" else {}), **KERNEL_STYLE[kernels],
                       label=f"{source}, {kernels} kernels")
    if not floors.empty:
        f = floors.sort_values("bandwidth_gbps")
        ax.plot(f["bandwidth_gbps"], f["usd_per_mtok"], color="grey", linestyle="--", marker=".", label=floor_label)
        for r in f.itertuples():
            ax.annotate(r.gpu, (r.bandwidth_gbps, r.usd_per_mtok), textcoords="offset points", xytext=(-4, -11),
                        fontsize=6, color="grey")
    ax.set_xscale("log")
    ax.set_yscale("log")
    dollars = FuncFormatter(lambda v, _: f"${v:g}")
    ax.yaxis.set_major_formatter(dollars)
    ax.yaxis.set_minor_formatter(dollars)
    ax.tick_params(axis="y", which="minor", labelsize=6)
    ax.set_xlim(right=ax.get_xlim()[1] * 2.5)
    ax.set_xlabel("datasheet peak bandwidth B_peak (GB/s, log)")
    ax.set_ylabel("$ per million tokens, batch 1 (log)")
    ax.set_title("The cost ladder: $ per million tokens against peak bandwidth")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if notes:
        fig.text(0.01, -0.02, "\n".join(notes), fontsize=7, va="top")
    return fig
