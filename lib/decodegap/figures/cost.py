"""Figure of notebook 05: the cost ladder, $ per million tokens against peak bandwidth, with each GPU's
naive and best configuration and the cost a bandwidth-bound step would have (style.apply / style.save)."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter
import pandas as pd

from decodegap.figures import style
from decodegap.analysis.closing_the_gap_confirmation import CONFIRMED, NOT_CONFIRMED
from decodegap.analysis.cost import MEASURED_LABEL, confirmation_status, price_label
from decodegap.levers import CONFIRM_SESSIONS

KERNEL_STYLE = {"naive": dict(facecolors="none", s=60), "best": dict(s=60)}
SOURCE_MARKER = {MEASURED_LABEL: "s"}
PUBLISHED_MARKER = "*"


def confirmed_label(r) -> str:
    """A measured best's label beside its $/Mtok: its confirmed $/Mtok (notebook 06's fresh sessions, the ladder's
    confirmed_* columns, cost.confirmation_status) or 'not confirmed'; '' for a naive or published point, or a ladder
    without the columns."""
    sessions = getattr(r, "confirmed_sessions", float("nan"))
    status = confirmation_status(sessions) if r.kernels == "best" and r.source == MEASURED_LABEL else None
    if status is None:
        return ""
    if status == NOT_CONFIRMED:
        return " (one sweep, not confirmed)"
    if status == CONFIRMED:
        return f" (confirmed ${r.confirmed_usd_per_mtok:.2f})"
    return f" (partly confirmed ${r.confirmed_usd_per_mtok:.2f}, {int(sessions)} of {CONFIRM_SESSIONS} sessions)"


def cost_ladder(ladder: pd.DataFrame, floors: pd.DataFrame, floor_label: str, notes: list[str] = ()):
    """$/Mtok (log) against datasheet bandwidth (log): per source and GPU (colour: GPU; marker: published star or
    measured square) the naive configuration (hollow) and the best (filled), labelled with configuration and
    $/Mtok (and the price's provider where it is not the paper's; a measured best with its confirmed $/Mtok, or
    "not confirmed": confirmed_label); the cost at the memory floor of every priced
    GPU (a bar mark each; no line joins separate GPUs). `notes` (e.g. GPUs without a price) go under the axes."""
    style.apply()
    if ladder.empty:
        return style.empty("No priced configuration: add prices to data/specs/prices.csv.")
    fig, ax = plt.subplots(figsize=(9.0, 5.0))
    for (source, gpu), g in ladder.groupby(["source", "gpu"]):
        color, marker = style.gpu_color(gpu), SOURCE_MARKER.get(source, PUBLISHED_MARKER)
        g = g.sort_values("usd_per_mtok", ascending=False)
        ax.plot(g["bandwidth_gbps"], g["usd_per_mtok"], color=color, linewidth=0.8)  # one GPU: naive to best
        for r in g.itertuples():
            ax.scatter([r.bandwidth_gbps], [r.usd_per_mtok], marker=marker, edgecolors=color,
                       **({"color": color} if r.kernels == "best" else {}), **KERNEL_STYLE[r.kernels], zorder=4)
            priced = price_label(gpu, getattr(r, "price_provider", None))  # the GPU is its tick; its price's provider
            star = "" if priced == gpu else "*"  # is marked where not the paper's, and named under the axes
            label = f"{r.configuration}{star}: ${r.usd_per_mtok:.2f}{confirmed_label(r)}"
            ax.annotate(label.replace("$", r"\$"), (r.bandwidth_gbps, r.usd_per_mtok),  # two $ would be mathtext
                        textcoords="offset points", xytext=(-8, 0), ha="right", va="center", fontsize=7)
            note = f"* {priced}: no price of the paper's provider was found"
            if star and note not in notes:
                notes = [*notes, note]
    for source in ladder["source"].unique():
        marker = SOURCE_MARKER.get(source, PUBLISHED_MARKER)
        for kernels in ("naive", "best"):
            ax.scatter([], [], marker=marker, edgecolors="black", **({"color": "black"} if kernels == "best" else {}),
                       **KERNEL_STYLE[kernels], label=f"{source}, {kernels} kernels")
    if not floors.empty:
        f = floors.sort_values("bandwidth_gbps")  # one mark per GPU, no line: the GPUs are separate machines
        ax.scatter(f["bandwidth_gbps"], f["usd_per_mtok"], marker="_", s=220, linewidths=2.0,
                   color=[style.gpu_color(g) for g in f["gpu"]], zorder=3)
        ax.scatter([], [], marker="_", s=220, linewidths=2.0, color="grey", label=floor_label)
        for r in f.itertuples():
            ax.annotate(f"${r.usd_per_mtok:.2f}", (r.bandwidth_gbps, r.usd_per_mtok),
                        textcoords="offset points", xytext=(10, 0), va="center", fontsize=6.5, color="grey")
    bandwidths = dict(zip(ladder["gpu"], ladder["bandwidth_gbps"]))
    if not floors.empty:
        bandwidths.update(dict(zip(floors["gpu"], floors["bandwidth_gbps"])))
    style.bandwidth_axis(ax, bandwidths)
    ax.set_yscale("log")
    dollars = FuncFormatter(lambda v, _: f"${v:g}")
    ax.yaxis.set_major_formatter(dollars)
    ax.yaxis.set_minor_formatter(dollars)
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_xlim(min(bandwidths.values()) / 4.0, max(bandwidths.values()) * 1.6)  # labels sit left of their points
    ax.set_ylabel("$ per million tokens, batch 1 (log scale)")
    style.title(fig, "05_cost_ladder.png", "each GPU's naive and best configuration, and its cost at the memory floor")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if notes:
        fig.text(0.01, -0.02, "\n".join(notes), fontsize=7, va="top")
    return fig
