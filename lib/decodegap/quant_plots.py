"""Figure of notebook 04: ms per decode step of each quantisation path against the path's own memory floor,
for the published L4 column and every measured GPU and arm (plots.style / plots.save conventions)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from . import plots
from .published import PUBLISHED_LABEL

SERIES_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3")


def ms_vs_floor(table: pd.DataFrame, title: str = ""):
    """Grouped bars: one group per path (rows of quant_report.paper_table), one bar per series (the
    published L4 column, hatched and labelled published; each measured GPU and arm), each series' floor for
    that path as a black tick over its bar. A path with no time in a series has no bar."""
    plots.style()
    series = [(c[: -len(" ms (published)")], c) for c in table.columns if c.endswith(" ms (published)")]
    series += [(c[: -len(" ms")], c) for c in table.columns if c.endswith(" ms") and not c.endswith("floor ms")]
    if table.empty or not series:
        return plots._empty("No quantisation rows and no published values.")
    fig, ax = plt.subplots(figsize=(max(6.4, 1.3 * len(table)), 4.0))
    x = np.arange(len(table))
    width = 0.8 / len(series)
    for i, (name, col) in enumerate(series):
        gpu = name.split(" ")[0]
        pos = x - 0.4 + width * (i + 0.5)
        published = col.endswith("(published)")
        ax.bar(pos, table[col], width, color=SERIES_COLORS[i % len(SERIES_COLORS)], hatch="//" if published else None,
               edgecolor="black" if published else None, linewidth=0.5,
               label=f"{gpu}, {PUBLISHED_LABEL}" if published else f"{name} (measured)")
        floor = table.get(f"{gpu} floor ms")
        if floor is not None:
            ax.hlines(floor, pos - width / 2, pos + width / 2, color="black", linewidth=1.6,
                      label="each path's own memory floor (datasheet bandwidth)" if i == 0 else None)
    ax.set_xticks(x, table["quant"], rotation=20, ha="right")
    ax.set_ylabel("ms per decode step (median of session medians)")
    ax.set_ylim(bottom=0)
    ax.set_title(title or "Quantisation paths against their own memory floors")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
