"""Figure of notebook 06: ms per decode step and R_floor per lever of the ladder, one line per measured cell
(model x context) of a GPU (style.apply / style.save conventions). Levers without timed rows are gaps."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from decodegap.figures import style
from decodegap.analysis.profiles import fitted_products, step_label
from decodegap.accounting import HEAD_QUANTISED
from decodegap.levers import GRID_TARGET, LEVERS, TARGETS


LADDER_ROWS_IN = 10.5
"""Inches the ladder figure gives all its lever rows together, at most (0.2 inch a row until they fill it): with the
margins it stays within the figure checks' 1400 pixels of height (figures.checks.SIZE_LIMIT_PX)."""


def ladder(table: pd.DataFrame, gpu: str):
    """Two panels over the levers of levers.LEVERS, one row per lever (its name written across, top to bottom in the
    ladder's order), side by side: ms/step (log scale) and R_floor against the bf16 floor. Each measured cell is a
    point (colour: the lever's arm, as in every figure; marker: model; contexts one above the other within a lever;
    int4 levers hollow), never joined across levers, which are separate steps. The targets (TARGETS) are drawn: the
    bf16 R_floor target and the int4 step-time target, at the target cell (ringed), and the grid's R_floor target
    for every cell (GRID_TARGET, dotted)."""
    style.apply()
    rows = table[(table["gpu"] == gpu) & (table["status"] == "ok")]
    if rows.empty:
        return style.empty(f"No measured lever on {gpu}.")
    names = [lever for lever, _, _ in LEVERS]
    row_in = min(0.2, LADDER_ROWS_IN / len(names))  # the figure within the gallery's size as levers are added
    fig, (ax_ms, ax_r) = plt.subplots(1, 2, figsize=(12.6, row_in * len(names) + 1.6), sharey=True)
    contexts = sorted(set(rows["ctx"]))
    offset = {c: (i - (len(contexts) - 1) / 2) * 0.16 for i, c in enumerate(contexts)}
    target = TARGETS["bf16"]
    for (model, arm, quant), cell in rows.groupby(["model", "arm", "quant"]):
        y = cell["order"] + cell["ctx"].map(offset)
        color = style.arm_color(arm)
        marks = dict(marker=style.model_marker(model), s=18, alpha=0.9, zorder=3,
                     **({"facecolors": "none", "edgecolors": color} if quant != "bf16" else {"color": color}))
        ax_ms.scatter(cell["t_obs_ms"], y, **marks)
        ax_r.scatter(cell["r_floor_bf16"], y, **marks)
        at_target = cell[(cell["model"] == target["model"]) & (cell["ctx"] == target["ctx"])]
        for ax, col in ((ax_ms, "t_obs_ms"), (ax_r, "r_floor_bf16")):
            ax.scatter(at_target[col], at_target["order"] + at_target["ctx"].map(offset), s=100, facecolors="none",
                       edgecolors="black", linewidths=0.9, zorder=2)
    for order in range(len(names)):  # each lever's bf16 floor of its cells, as a short dash per lever and context
        cells = rows[rows["order"] == order]
        for ctx, c in cells.groupby("ctx"):
            ax_ms.vlines(c["t_floor_bf16_ms"], order + offset[ctx] - 0.07, order + offset[ctx] + 0.07,
                         color=style.FLOOR_COLOR, linewidth=0.6)
    ax_r.axvline(TARGETS["bf16"]["r_floor"], color=style.TARGET_COLOR, linestyle="--", linewidth=1.1)
    ax_r.axvline(GRID_TARGET["r_floor"], color=style.TARGET_COLOR, linestyle=":", linewidth=1.0)
    ax_r.axvline(1.0, color="grey", linewidth=0.8)
    ax_ms.axvline(TARGETS["int4"]["step_ms"], color=style.TARGET_COLOR, linestyle="--", linewidth=1.1)
    ax_ms.set_xscale("log")
    ax_ms.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax_ms.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if v in (3, 5, 20, 30) else ""))
    ax_ms.set_xlabel("ms per step (log; dashes: bf16 floor)")
    ax_r.set_xlabel("R_floor (bf16 floor / step time)")
    ax_ms.set_yticks(range(len(names)), names, fontsize=7)
    ax_ms.set_ylim(len(names) - 0.5, -0.5)  # the ladder's first lever on top
    for ax in (ax_ms, ax_r):
        ax.grid(axis="y", alpha=0.15)
    handles = [Line2D([], [], linestyle="none", marker=style.model_marker(m), color="black", label=m)
               for m in sorted(set(rows["model"]))]
    handles += [Line2D([], [], linestyle="none", marker="o", markerfacecolor="none", color="black",
                       label="int4 (hollow)"),
                Line2D([], [], linestyle="none", marker="o", markersize=10, markerfacecolor="none", color="black",
                       label=f"target cell ({target['model']}, ctx {target['ctx']:,})"),
                Line2D([], [], color=style.TARGET_COLOR, linestyle="--",
                       label=f"targets: int4 {TARGETS['int4']['step_ms']:.1f} ms, bf16 R_floor {TARGETS['bf16']['r_floor']:.2f}"),
                Line2D([], [], color=style.TARGET_COLOR, linestyle=":", label=f"every cell: R_floor {GRID_TARGET['r_floor']:.2f}"),
                Line2D([], [], color="grey", label="bf16 floor (int4 steps can pass it)")]
    ax_r.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                title=f"colour: the lever's arm;\ncontexts {', '.join(f'{c:,}' for c in contexts)} top to bottom",
                title_fontsize=7.5)
    style.title(fig, "06_ladder.png", f"every lever of every measured cell on the {gpu}; a lever with no point has no "
                "checked rows (06_ladder.csv)")
    fig.tight_layout()
    return fig


PRODUCT_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "<", ">", "h", "*", "p")
"""One marker per matrix product (q, k, v, o, qkv, ...), in the order the step runs them: names need no labels."""


def products(by_projection: pd.DataFrame, fits: pd.DataFrame, gpu: str, model: str, ctx: int, datasheet_gbps: float,
             arms=None):
    """Per-call GPU time of each matrix product against the bytes it reads (log-log), one colour per profiled
    step's arm (style.ARM_COLOR; a quantised step hollow and dashed, dash-dot where its int4 LM head is on its line)
    of one cell (profiles.projection_table; `arms` picks arms), each product labelled (q, qkv, lm_head, ...), each
    step with its line (profiles.product_cost_fit), and the datasheet bandwidth's line through zero: the products
    sit above it by a fixed cost per product, which weighs most on the small ones."""
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
    markers = {name: PRODUCT_MARKERS[i % len(PRODUCT_MARKERS)] for i, name in enumerate(dict.fromkeys(rows["projection"]))}
    for (arm, quant), g in rows.groupby(["arm", "quant"], sort=False):
        color, hollow = style.arm_color(arm), quant != "bf16"
        mb, us = g["bytes"] / g["calls"] / 1e6, g["gpu_us"] / g["calls"]
        ax.scatter([], [], s=24, label=step_label(arm, quant),  # the step's colour; each product's own marker
                   **({"facecolors": "none", "edgecolors": color} if hollow else {"color": color}))
        for name in markers:
            at = (g["projection"] == name).to_numpy()
            if at.any():
                ax.scatter(mb[at], us[at], s=26, zorder=3, marker=markers[name],
                           **({"facecolors": "none", "edgecolors": color} if hollow else {"color": color}))
        fit = fits[(fits["gpu"] == gpu) & (fits["model"] == model) & (fits["ctx"] == ctx) & (fits["arm"] == arm)
                   & (fits["quant"] == quant)]
        if not fit.empty:  # drawn over the products its line was fitted to (a quantised step's bf16 head is not)
            f, on_line = fit.iloc[0], fitted_products(g)
            span = on_line["bytes"] / on_line["calls"] / 1e6
            xs_fit = np.geomspace(float(span.min()) * 0.8, float(span.max()) * 1.25, 100)
            ax.plot(xs_fit, f["fixed_us"] + xs_fit * 1e3 / f["stream_gbps"], color=color, linewidth=0.9,
                    linestyle="-." if quant in HEAD_QUANTISED else "--" if hollow else "-",
                    label=f"  {f['fixed_us']:.1f} {style.MICRO} + bytes at {f['stream_gbps']:,.0f} GB/s")
    ax.plot(xs, xs * 1e3 / datasheet_gbps, color="black", linestyle=":", linewidth=1.0,
            label=f"bytes at the datasheet {datasheet_gbps:,.0f} GB/s")
    for name, marker in markers.items():
        ax.scatter([], [], marker=marker, color="black", s=26, label=f"product: {name}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("MB read per call (weights and bias; log scale)")
    ax.set_ylabel(f"GPU {style.MICRO} per call (log scale)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    style.title(fig, "06_products.png", f"matrix products of one decode step, {model} ctx {ctx:,}, {gpu}, per "
                "profiled step; lines: each step's fit")
    fig.tight_layout()
    return fig


def int4_products(step: pd.DataFrame, datasheet_gbps: float):
    """One decoder layer's int4 products of a fused int4 step (analysis.closing_the_gap_int4_products.target_step),
    each timed alone at the config the step runs, beside the same product in bf16 where the bf16 bench has it, with
    each one's weight floor at the datasheet's bandwidth as a tick: the int4 bars stand further above their floor
    than the bf16 bars do above theirs."""
    style.apply()
    if step.empty or "step_us" not in step or step["step_us"].isna().all():
        fig = style.empty("Nothing drawn: no product of this cell's confirmed fused int4 levers is timed alone\n"
                          "(bench/fused_int4_gemv.py has no rows of their products' flavour).")
        fig.set_size_inches(8.0, 1.6)
        style.title(fig, "06_int4_products.png", "no rows to draw for this cell's confirmed levers (below)")
        return fig
    first = step.iloc[0]
    fig, ax = plt.subplots(figsize=(8.0, 3.6))
    y = np.arange(len(step))
    has_bf16 = "bf16_us" in step and not step["bf16_us"].isna().all()
    height = 0.38 if has_bf16 else 0.6
    int4_at = y - height / 2 if has_bf16 else y
    ax.barh(int4_at, step["step_us"], height=height, color="#2ca02c", label="int4 (the step's config)")
    ax.scatter(step["bytes"] / datasheet_gbps / 1e3, int4_at, marker="|", s=220, color="black", zorder=3,
               label=f"weight floor at the datasheet {datasheet_gbps:,.0f} GB/s")
    if has_bf16:
        ax.barh(y + height / 2, step["bf16_us"], height=height, color="#9aa0a6", label="bf16 (its table's config)")
        ax.scatter(step["bf16_bytes"] / datasheet_gbps / 1e3, y + height / 2, marker="|", s=220, color="black",
                   zorder=3)
    ax.set_yticks(y, [f"{p} ({launch})" for p, launch in zip(step["product"], step["launch"])])
    ax.invert_yaxis()
    ax.set_xlabel(f"{style.MICRO} per call, alone in a CUDA graph of back-to-back calls")
    ax.legend(loc="lower right", fontsize=7)
    style.title(fig, "06_int4_products.png", f"one layer's int4 products of {first['arm']}, {first['model']}, "
                f"{first['gpu']}\nticks: each product's weights at the datasheet bandwidth")
    fig.tight_layout()
    return fig
