"""Figure of notebook 06: ms per decode step and R_floor per lever of the ladder, one line per measured cell
(model x context) of a GPU (style.apply / style.save conventions). Levers without timed rows are gaps."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from decodegap.figures import style
from decodegap.analysis.closing_the_gap_targets import grid_target_findings
from decodegap.analysis.profiles import fitted_products, step_label
from decodegap.levers import GRID_TARGET, LEVERS, TARGETS


def _target_finding(rows: pd.DataFrame, gpu: str) -> str:
    """Where the best lever of the target cell stands against each target (TARGETS), and how many of `gpu`'s cells
    meet the grid's (GRID_TARGET), for the title."""
    parts = []
    for kind, t in TARGETS.items():
        cell = rows[(rows["model"] == t["model"]) & (rows["ctx"] == t["ctx"]) & rows["t_obs_ms"].notna()]
        cell = cell[(cell["quant"] == "bf16") if kind == "bf16" else (cell["quant"] != "bf16")]
        if cell.empty:
            continue
        best = cell.loc[cell["t_obs_ms"].idxmin()]
        if "r_floor" in t:
            met = best["r_floor_bf16"] >= t["r_floor"]
            parts.append(f"bf16 best R_floor {best['r_floor_bf16']:.2f} ({'meets' if met else 'short of'} {t['r_floor']:.2f})")
        else:
            met = best["t_obs_ms"] <= t["step_ms"]
            parts.append(f"int4 best {best['t_obs_ms']:.2f} ms ({'meets' if met else 'short of'} {t['step_ms']:.1f} ms)")
    t = TARGETS["bf16"]
    title = (f"At the target cell ({t['model']}, ctx {t['ctx']:,}): " + "; ".join(parts)) if parts else "The ladder of levers"
    [grid] = grid_target_findings(rows[rows["t_obs_ms"].notna()], target=dict(GRID_TARGET, gpu=gpu))
    if grid.values["measured"]:
        title += (f"; {grid.values['cells_met']} of {grid.values['cells']} cells at R_floor "
                  f"{GRID_TARGET['r_floor']:.2f} or more")
    return title


def ladder(table: pd.DataFrame, gpu: str):
    """Two panels over the levers of levers.LEVERS, one above the other: ms/step (log scale) and R_floor against the
    bf16 floor. Each
    measured cell is a point (colour: the lever's arm, as in every figure; marker: model; contexts side by side
    within a lever; int4 levers hollow), never joined across levers, which are separate steps. The targets
    (TARGETS) are drawn: the bf16 R_floor target and the int4 step-time target, at the target cell (ringed), and
    the grid's R_floor target for every cell (GRID_TARGET, dotted)."""
    style.apply()
    rows = table[(table["gpu"] == gpu) & (table["status"] == "ok")]
    if rows.empty:
        return style.empty(f"No measured lever on {gpu}.")
    fig, (ax_ms, ax_r) = plt.subplots(2, 1, figsize=(13.0, 8.6), sharex=True)  # one row of lever names, below
    names = [lever for lever, _, _ in LEVERS]
    contexts = sorted(set(rows["ctx"]))
    offset = {c: (i - (len(contexts) - 1) / 2) * 0.11 for i, c in enumerate(contexts)}
    target = TARGETS["bf16"]
    for (model, arm, quant), cell in rows.groupby(["model", "arm", "quant"]):
        x = cell["order"] + cell["ctx"].map(offset)
        color = style.arm_color(arm)
        marks = dict(marker=style.model_marker(model), s=20, alpha=0.9, zorder=3,
                     **({"facecolors": "none", "edgecolors": color} if quant != "bf16" else {"color": color}))
        ax_ms.scatter(x, cell["t_obs_ms"], **marks)
        ax_r.scatter(x, cell["r_floor_bf16"], **marks)
        at_target = cell[(cell["model"] == target["model"]) & (cell["ctx"] == target["ctx"])]
        for ax, col in ((ax_ms, "t_obs_ms"), (ax_r, "r_floor_bf16")):
            ax.scatter(at_target["order"] + at_target["ctx"].map(offset), at_target[col], s=110, facecolors="none",
                       edgecolors="black", linewidths=0.9, zorder=2)
    for order in range(len(names)):  # each lever's bf16 floor of its cells, as a short dash per lever
        cells = rows[rows["order"] == order]
        for ctx, c in cells.groupby("ctx"):
            ax_ms.hlines(c["t_floor_bf16_ms"], order + offset[ctx] - 0.05, order + offset[ctx] + 0.05,
                         color=style.FLOOR_COLOR, linewidth=0.6)
    ax_r.axhline(TARGETS["bf16"]["r_floor"], color=style.TARGET_COLOR, linestyle="--", linewidth=1.1)
    ax_r.annotate(f"bf16 target: R_floor {TARGETS['bf16']['r_floor']:.2f}", (0, TARGETS["bf16"]["r_floor"]),
                  textcoords="offset points", xytext=(2, 3), color=style.TARGET_COLOR, fontsize=8)
    ax_r.axhline(GRID_TARGET["r_floor"], color=style.TARGET_COLOR, linestyle=":", linewidth=1.0)
    ax_r.annotate(f"every cell: R_floor {GRID_TARGET['r_floor']:.2f}", (0, GRID_TARGET["r_floor"]),
                  textcoords="offset points", xytext=(2, -9), color=style.TARGET_COLOR, fontsize=8)
    ax_ms.axhline(TARGETS["int4"]["step_ms"], color=style.TARGET_COLOR, linestyle="--", linewidth=1.1)
    ax_ms.annotate(f"int4 target: {TARGETS['int4']['step_ms']:.1f} ms", (0, TARGETS["int4"]["step_ms"]),
                   textcoords="offset points", xytext=(2, 3), color=style.TARGET_COLOR, fontsize=8)
    ax_ms.set_yscale("log")
    ax_ms.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax_ms.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if v in (3, 5, 20, 30) else ""))
    ax_ms.set_ylabel("ms per decode step (log scale; dashes: bf16 floor)")
    ax_r.set_ylabel("R_floor (bf16 floor / step time)")
    ax_r.axhline(1.0, color="grey", linewidth=0.8)
    ax_r.annotate("bf16 floor (int4 steps can pass it)", (0, 1.0),
                  textcoords="offset points", xytext=(2, 3), color="grey", fontsize=7)
    ax_r.set_xticks(range(len(names)))
    ax_r.set_xticklabels(names, rotation=40, ha="right", fontsize=8)
    for ax in (ax_ms, ax_r):
        ax.grid(axis="x", alpha=0.15)
    handles = [Line2D([], [], linestyle="none", marker=style.model_marker(m), color="black", label=m)
               for m in sorted(set(rows["model"]))]
    handles += [Line2D([], [], linestyle="none", marker="o", markerfacecolor="none", color="black",
                       label="int4 (hollow)"),
                Line2D([], [], linestyle="none", marker="o", markersize=10, markerfacecolor="none", color="black",
                       label=f"target cell ({target['model']}, ctx {target['ctx']:,})"),
                Line2D([], [], color=style.TARGET_COLOR, linestyle="--", label="targets")]
    ax_ms.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                title=f"colour: the lever's arm; contexts {', '.join(f'{c:,}' for c in contexts)} left to right",
                title_fontsize=7.5)
    style.finding_title(fig, _target_finding(rows, gpu), f"every lever of every measured cell on the {gpu}; a lever "
                        "without a point was not measured there, failed its check, or ran at the target cell only "
                        "(06_ladder.csv says which)")
    fig.tight_layout()
    return fig


def products(by_projection: pd.DataFrame, fits: pd.DataFrame, gpu: str, model: str, ctx: int, datasheet_gbps: float,
             arms=None):
    """Per-call GPU time of each matrix product against the bytes it reads (log-log), one colour per profiled
    step's arm (style.ARM_COLOR; a quantised step hollow and dashed) of one cell (profiles.projection_table; `arms`
    picks arms), each product labelled (q, qkv, lm_head, ...), each step with its line (profiles.product_cost_fit),
    and the datasheet bandwidth's line through zero: the products sit above it by a fixed cost per product, which
    weighs most on the small ones."""
    style.apply()
    rows = by_projection[(by_projection["gpu"] == gpu) & (by_projection["model"] == model)
                         & (by_projection["ctx"] == ctx)]
    if arms is not None:
        rows = rows[rows["arm"].isin(list(arms))]
    if rows.empty:
        return style.empty(f"No profiled step of {model} ctx {ctx} on {gpu}.")
    fig, ax = plt.subplots(figsize=(8.6, 4.8))
    per_call_mb = rows["bytes"] / rows["calls"] / 1e6
    xs = np.geomspace(float(per_call_mb.min()) * 0.8, float(per_call_mb.max()) * 1.25, 100)
    labelled_at = {}
    for (arm, quant), g in rows.groupby(["arm", "quant"], sort=False):
        color, hollow = style.arm_color(arm), quant != "bf16"
        mb, us = g["bytes"] / g["calls"] / 1e6, g["gpu_us"] / g["calls"]
        ax.scatter(mb, us, s=24, zorder=3, label=step_label(arm, quant),
                   **({"facecolors": "none", "edgecolors": color} if hollow else {"color": color}))
        for name, x, y in zip(g["projection"], mb, us):
            key = (round(np.log10(x), 1), name)
            if key not in labelled_at:  # each product's name once where several steps share its size
                labelled_at[key] = True
                ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4 if not hollow else -10), fontsize=7,
                            color=color)
        fit = fits[(fits["gpu"] == gpu) & (fits["model"] == model) & (fits["ctx"] == ctx) & (fits["arm"] == arm)
                   & (fits["quant"] == quant)]
        if not fit.empty:  # drawn over the products its line was fitted to (a quantised step's bf16 head is not)
            f, on_line = fit.iloc[0], fitted_products(g)
            span = on_line["bytes"] / on_line["calls"] / 1e6
            xs_fit = np.geomspace(float(span.min()) * 0.8, float(span.max()) * 1.25, 100)
            ax.plot(xs_fit, f["fixed_us"] + xs_fit * 1e3 / f["stream_gbps"], color=color, linewidth=0.9,
                    linestyle="--" if hollow else "-",
                    label=f"  {f['fixed_us']:.1f} {style.MICRO} + bytes at {f['stream_gbps']:,.0f} GB/s")
    ax.plot(xs, xs * 1e3 / datasheet_gbps, color="black", linestyle=":", linewidth=1.0,
            label=f"bytes at the datasheet {datasheet_gbps:,.0f} GB/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("MB read per call (weights and bias; log scale)")
    ax.set_ylabel(f"GPU {style.MICRO} per call (log scale)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    bf16 = fits[(fits["gpu"] == gpu) & (fits["model"] == model) & (fits["ctx"] == ctx) & (fits["quant"] == "bf16")]
    if arms is not None:
        bf16 = bf16[bf16["arm"].isin(list(arms))]
    finding = (f"Every product pays a fixed {bf16['fixed_us'].min():.1f}-{bf16['fixed_us'].max():.1f} {style.MICRO} "
               f"beyond its weights, streamed at {bf16['stream_gbps'].min():,.0f}-{bf16['stream_gbps'].max():,.0f} GB/s: "
               "the small products fall furthest short of the datasheet" if not bf16.empty else "Matrix products")
    style.finding_title(fig, finding, f"matrix products of one decode step, {model} ctx {ctx:,} on the {gpu}, per profiled step")
    fig.tight_layout()
    return fig
