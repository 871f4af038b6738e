"""Figure of notebook 06: ms per decode step and R_floor per lever of the ladder, one line per measured cell
(model x context) of a GPU (plots.style / plots.save conventions). Levers without timed rows are gaps."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from . import plots
from .ladder import LEVERS


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
