"""Figure of notebook 06: ms per decode step and R_floor per lever of the ladder, one line per measured cell
(model x context) of a GPU (plots.style / plots.save conventions). Levers without timed rows are gaps."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from . import plots
from .ladder import LEVERS, fitted_products, step_label


def ladder(table: pd.DataFrame, gpu: str):
    """Two panels over the levers of ladder.LEVERS: ms/step (log scale, with each cell's bf16 floor as a
    dotted line) and R_floor against the bf16 floor; one line per (model, ctx), coloured by model, one
    marker per context."""
    plots.style()
    rows = table[(table["gpu"] == gpu) & (table["status"] == "ok")]
    if rows.empty:
        return plots._empty(f"No measured lever on {gpu}.")
    fig, (ax_ms, ax_r) = plt.subplots(1, 2, figsize=(11.5, 4.2))
    names = [lever for lever, _, _ in LEVERS]
    contexts = sorted(set(rows["ctx"]))
    markers = dict(zip(contexts, "osD^v<>"))
    for (model, ctx), cell in table[table["gpu"] == gpu].groupby(["model", "ctx"]):
        cell = cell.sort_values("order")
        style = dict(color=plots._color(model), marker=markers.get(ctx, "o"), alpha=0.85, linewidth=1.2, markersize=4)
        ax_ms.plot(cell["order"], cell["t_obs_ms"], label=f"{model} ctx {ctx}", **style)
        ax_ms.plot(cell["order"], cell["t_floor_bf16_ms"], color=plots._color(model), linestyle=":", linewidth=0.8)
        ax_r.plot(cell["order"], cell["r_floor_bf16"], **style)
    ax_ms.set_yscale("log")
    ax_ms.set_ylabel("ms per decode step (dotted: bf16 floor)")
    ax_r.set_ylabel("R_floor (bf16 floor / step time)")
    ax_r.axhline(1.0, color="black", linewidth=0.8)
    for ax in (ax_ms, ax_r):
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=35, ha="right", fontsize=7)
    ax_ms.legend(fontsize=6, ncol=2)
    fig.suptitle(f"The ladder of levers on the {gpu} (a gap: not measured, failed its check, or measured at the "
                 "target cell only; 06_ladder.csv says which)")
    fig.tight_layout()
    return fig


def products(by_projection: pd.DataFrame, fits: pd.DataFrame, gpu: str, model: str, ctx: int, datasheet_gbps: float,
             arms=None):
    """Per-call GPU time of each matrix product against the bytes it reads (log-log), one colour per profiled
    step (arm and quantisation) of one cell (ladder.projection_table; `arms` picks arms), each with its line
    (ladder.product_cost_fit), and the datasheet bandwidth's line through zero: the products sit above it by a fixed
    cost per product, which weighs most on the small ones."""
    plots.style()
    rows = by_projection[(by_projection["gpu"] == gpu) & (by_projection["model"] == model)
                         & (by_projection["ctx"] == ctx)]
    if arms is not None:
        rows = rows[rows["arm"].isin(list(arms))]
    if rows.empty:
        return plots._empty(f"No profiled step of {model} ctx {ctx} on {gpu}.")
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    per_call_mb = rows["bytes"] / rows["calls"] / 1e6
    xs = np.geomspace(float(per_call_mb.min()) * 0.8, float(per_call_mb.max()) * 1.25, 100)
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, ((arm, quant), g) in enumerate(rows.groupby(["arm", "quant"], sort=False)):
        color = cycle[i % len(cycle)]
        mb, us = g["bytes"] / g["calls"] / 1e6, g["gpu_us"] / g["calls"]
        ax.scatter(mb, us, color=color, s=22, label=step_label(arm, quant), zorder=3)
        fit = fits[(fits["gpu"] == gpu) & (fits["model"] == model) & (fits["ctx"] == ctx) & (fits["arm"] == arm)
                   & (fits["quant"] == quant)]
        if not fit.empty:  # drawn over the products its line was fitted to (a quantised step's bf16 head is not)
            f, on_line = fit.iloc[0], fitted_products(g)
            span = on_line["bytes"] / on_line["calls"] / 1e6
            xs_fit = np.geomspace(float(span.min()) * 0.8, float(span.max()) * 1.25, 100)
            ax.plot(xs_fit, f["fixed_us"] + xs_fit * 1e3 / f["stream_gbps"], color=color, linewidth=0.9,
                    label=f"  {f['fixed_us']:.1f} us + bytes at {f['stream_gbps']:.0f} GB/s")
    ax.plot(xs, xs * 1e3 / datasheet_gbps, color="black", linestyle=":", linewidth=1.0,
            label=f"bytes at the datasheet {datasheet_gbps:.0f} GB/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("MB read per call (weights and bias)")
    ax.set_ylabel("GPU us per call")
    ax.legend(fontsize=6.5)
    ax.set_title(f"Matrix products of one decode step, {model} ctx {ctx} on the {gpu}", fontsize=9)
    fig.tight_layout()
    return fig
