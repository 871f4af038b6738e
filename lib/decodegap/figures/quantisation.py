"""Figures of notebook 04: ms per decode step of each quantisation path against the path's own memory floor,
for the published L4 column and every measured GPU and arm, one panel per context (ms_vs_floor); every path's step
on one arm over the grid, a panel per model, a line per path and GPU (grid_lines). style.apply / style.save
conventions."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from decodegap.figures import style
from decodegap.published import PUBLISHED_LABEL

SERIES_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3")
FAILED_COLOR = "#b2182b"  # a cell whose correctness check failed
NOT_RUN_COLOR = "#777777"  # a cell that never ran here (unavailable, or not measured)
UNCHECKED_COLOR = "#e08214"  # a cell timed only without the current rule's checks of its own run (not counted)
UNCHECKED_LABEL = "drawn unchecked: timed without the current rule's checks of its run (no time counted)"
GPU_HATCHES = ("", "..", "\\\\", "++", "oo")
"""The measured GPUs' hatches, in the order their series come: an arm's colour is the same on every GPU, so two GPUs'
bars of one arm differ by their hatch (the published column keeps "//")."""


def _gpu_hatch(gpu: str, measured_gpus: list) -> str | None:
    """A measured GPU's hatch (GPU_HATCHES, by its place among `measured_gpus`); None for the first (solid)."""
    return GPU_HATCHES[measured_gpus.index(gpu) % len(GPU_HATCHES)] or None


def _series_color(name: str, published: bool, i: int) -> str:
    """A series' colour: its arm's (style.ARM_COLOR) for a measured GPU and arm, its GPU's for a published column."""
    parts = name.split(" ")
    if published:
        return style.gpu_color(parts[0])
    if len(parts) > 1 and parts[-1] in style.ARM_COLOR:
        return style.arm_color(parts[-1])
    return SERIES_COLORS[i % len(SERIES_COLORS)]


def _series(table: pd.DataFrame) -> list[tuple[str, str]]:
    out = [(c[: -len(" ms (published)")], c) for c in table.columns if c.endswith(" ms (published)")]
    return out + [(c[: -len(" ms")], c) for c in table.columns if c.endswith(" ms") and not c.endswith("floor ms")]


def _bf16_only(table: pd.DataFrame, series, measured_gpus: list) -> list:
    """The measured GPUs of `table` (a paper_table) with a time in some series but none in a quantised row: the
    figure draws only their bf16 bars, and says so (another model may hold their quantised cells)."""
    quantised = table["quant"] != "bf16" if "quant" in table else pd.Series(False, index=table.index)
    out = []
    for gpu in measured_gpus:
        cols = [col for name, col in series if name.split(" ")[0] == gpu and not col.endswith("(published)")]
        if cols and table[cols].notna().any().any() and table.loc[quantised, cols].isna().all().all():
            out.append(gpu)
    return out


def ms_vs_floor(table: pd.DataFrame, title: str = ""):
    """Grouped bars, one panel per context of quant_report.paper_table (rows: path x ctx): one group per
    path, one bar per series (the published L4 column, hatched and labelled published, on the panel of the
    first context only; each measured GPU and arm: the arm's colour, the GPU's hatch, GPU_HATCHES), each series'
    floor for that path as a black tick over its bar. A cell whose correctness check failed keeps its bar,
    cross-hatched and labelled; a cell drawn unchecked (timed only without the current rule's checks of its own
    run: the table's `<gpu> <arm> unchecked`) has a hollow square at its floor, labelled so; a path with no other
    time in a series has a hollow circle at its floor (never ran here). A measured GPU with bf16 bars alone is named
    under the title (_bf16_only)."""
    style.apply()
    series = _series(table)
    if table.empty or not series:
        return style.empty("No quantisation rows and no published values.")
    contexts = sorted(set(table["ctx"])) if "ctx" in table else [None]
    fig, axes = plt.subplots(len(contexts), 1, figsize=(min(9.5, max(6.4, 1.3 * len(set(table["quant"])))),
                                                         2.9 * len(contexts) + 0.6), squeeze=False, sharex=True)
    axes = axes.T  # one panel per context, one above the other: the figure stays a page wide
    width = 0.8 / len(series)
    measured_gpus = list(dict.fromkeys(name.split(" ")[0] for name, col in series if not col.endswith("(published)")))
    labelled = set()
    for ax, ctx in zip(axes[0], contexts):
        panel = table[table["ctx"] == ctx].reset_index(drop=True) if ctx is not None else table
        x = np.arange(len(panel))
        for i, (name, col) in enumerate(series):
            gpu = name.split(" ")[0]
            pos = x - 0.4 + width * (i + 0.5)
            published = col.endswith("(published)")
            if published and panel[col].isna().all():
                continue
            check = panel.get(f"{name} check")
            failed = check.astype(str).str.contains("failed") if check is not None else pd.Series(False, index=panel.index)
            drawn = panel.get(f"{name} unchecked")
            drawn = drawn.fillna(False).astype(bool) if drawn is not None else pd.Series(False, index=panel.index)
            color = _series_color(name, published, i)
            label = f"{gpu}, {PUBLISHED_LABEL}" if published else f"{name} (measured)"
            ok = panel[col].where(~failed)
            hatch = "//" if published else _gpu_hatch(gpu, measured_gpus)
            ax.bar(pos, ok, width, color=color, hatch=hatch, edgecolor="black" if hatch else None, linewidth=0.5,
                   label=None if label in labelled else label)
            labelled.add(label)
            if (failed & panel[col].notna()).any():
                lab = "correctness check failed (timing shown, no verdict)"
                ax.bar(pos, panel[col].where(failed), width, color=color, alpha=0.45, hatch="xx", edgecolor="black",
                       linewidth=0.5, label=None if lab in labelled else lab)
                labelled.add(lab)
            floor = panel.get(f"{gpu} floor ms")
            if floor is not None:
                lab = "each path's own memory floor (datasheet bandwidth)"
                ax.hlines(floor, pos - width / 2, pos + width / 2, color="black", linewidth=1.6,
                          label=None if lab in labelled else lab)
                labelled.add(lab)
                if not published:
                    for p, t, f, bad, unchecked in zip(pos, panel[col], floor, failed, drawn):
                        if pd.isna(t) and pd.notna(f):
                            lab = ("check failed (no time kept)" if bad else UNCHECKED_LABEL if unchecked
                                   else "never ran here (see the table's status)")
                            mark = (dict(marker="x", color=FAILED_COLOR) if bad else
                                    dict(marker="s", facecolors="none", edgecolors=UNCHECKED_COLOR) if unchecked else
                                    dict(marker="o", facecolors="none", edgecolors=NOT_RUN_COLOR))
                            ax.scatter([p], [f], s=28, zorder=4, label=None if lab in labelled else lab, **mark)
                            labelled.add(lab)  # the marker and its legend entry say it: no text over the bars
        ax.set_xticks(x, panel["quant"], rotation=30, ha="right")
        ax.set_ylim(bottom=0)
        ax.set_title(f"ctx {ctx:,}" if ctx is not None else "", loc="left")
        ax.set_ylabel("ms per decode step")
    subtitle = title or "median of session medians; black ticks: each path's floor"
    bare = _bf16_only(table, series, measured_gpus)
    if bare:
        subtitle += (f"\n{', '.join(bare)}: bf16 only here, no quantised cell of this model "
                     "(other models: 04_quant_grid.png, 04_findings)")
    style.title(fig, "04_quant_ms_vs_floor.png", subtitle)
    fig.tight_layout()
    fig.legend(loc="upper left", bbox_to_anchor=(1.0, 0.9))
    return fig


GPU_LINESTYLES = ("-", "--", ":", "-.")
"""The GPUs' line styles, in the order of their names: a path's colour is the same on every GPU."""


def grid_lines(grid: pd.DataFrame, arm: str):
    """quant_profile.grid (columns gpu, model, ctx and one per path, ms; NaN where a cell is not counted) as lines
    over the context, one panel per model; a path with a single context on a GPU is a point."""
    style.apply()
    paths = [c for c in grid.columns if c not in ("gpu", "model", "ctx")]
    if grid.empty or not paths or grid[paths].isna().all().all():
        return style.empty(f"No counted quantised cells on {arm} yet.")
    models = sorted(set(grid["model"]))
    gpus = sorted(set(grid["gpu"]))
    fig, axes = plt.subplots(1, len(models), figsize=(max(6.4, 3.4 * len(models)), 3.8), squeeze=False, sharey=True)
    for ax, model in zip(axes[0], models):
        here = grid[grid["model"] == model]
        for i, key in enumerate(paths):
            for gpu in gpus:
                line = here[here["gpu"] == gpu].dropna(subset=[key]).sort_values("ctx")
                if line.empty:
                    continue
                ax.plot(line["ctx"], line[key], color=SERIES_COLORS[i % len(SERIES_COLORS)],
                        linestyle=GPU_LINESTYLES[gpus.index(gpu) % len(GPU_LINESTYLES)], marker="o", markersize=3)
        style.context_axis(ax, here["ctx"])
        ax.set_title(model, loc="left")
        ax.set_xlabel("context (tokens)")
        ax.set_ylim(bottom=0)
    axes[0][0].set_ylabel(f"ms per decode step ({arm})")
    handles = ([Line2D([], [], color=SERIES_COLORS[i % len(SERIES_COLORS)], marker="o", markersize=3, label=key)
                for i, key in enumerate(paths)]
               + [Line2D([], [], color="black", linestyle=GPU_LINESTYLES[i % len(GPU_LINESTYLES)],
                         label=f"{gpu} (measured)") for i, gpu in enumerate(gpus)])
    style.title(fig, "04_quant_grid.png", f"{arm}, SDPA: median of session medians of counted cells\n"
                                          "a colour per path, a line style per GPU")
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 0.9))
    return fig
