"""Figure of notebook 03: microseconds per decode-attention call against context per backend, host-inclusive
beside GPU-only (style.apply / style.save conventions)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from decodegap.figures import style
from decodegap.published import PUBLISHED_LABEL


BACKEND_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                  "#bcbd22", "#17becf", "#000000", "#aec7e8")
"""As many colours as there are backends (attention.BACKENDS): no two backends share one."""


def backend_color(attn: str) -> str:
    """One colour per attention backend (attention.BACKENDS order), the same in every panel and figure."""
    from decodegap.harness.attention import BACKENDS

    keys = list(BACKENDS)
    return BACKEND_COLORS[keys.index(attn) % len(BACKEND_COLORS)] if attn in keys else "#444444"


def _distinct_series(rows: pd.DataFrame, col: str):
    """(gpu, backends, rows) per GPU and distinct series of `col` over context: backends whose every point lies within
    2 % of another's (one kernel under two names, or two that time alike) are one series, named by all of them, so no
    line hides another."""
    out = {}
    for (gpu, attn), group in rows.groupby(["gpu", "attn"], sort=False):
        group = group.sort_values("ctx")
        same = next((k for k, (g, _, other) in out.items() if g == gpu and list(other["ctx"]) == list(group["ctx"])
                     and np.allclose(other[col].to_numpy(float), group[col].to_numpy(float), rtol=0.02)), None)
        if same is not None:
            out[same][1].append(attn)
        else:
            out[attn + gpu] = (gpu, [attn], group)
    return list(out.values())


LEGEND_ROWS = 12
"""The most entries attention_us_vs_context's legend holds in one column beside its 3.8-inch panels."""


def attention_us_vs_context(summ: pd.DataFrame, model: str, published: pd.DataFrame | None = None):
    """Microseconds per decode-attention call against context per backend: host-inclusive (left) and GPU-only
    (right) on one shared log axis, so the gap between the panels is the launch sequence's cost. `published`: the
    paper's per-layer rows (attn, gpu, value in microseconds), drawn as stars in the host-inclusive panel at the
    smallest context (the paper states neither model nor context), in their backend's colour."""
    style.apply()
    sub = summ[(summ["model"] == model) & (summ["status"] == "ok")]
    if sub.empty:
        return style.empty(f"No attention rows for {model}.")
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.8), sharey=True)
    gpus = list(dict.fromkeys(sub["gpu"]))
    dashes = dict(zip(gpus, ["-", "--", ":", "-."]))
    for ax, col, title in ((axes[0], "host_us", "host-inclusive (eager loop)"), (axes[1], "gpu_us", "GPU-only (graph replay)")):
        for gpu, attns, group in _distinct_series(sub.dropna(subset=[col]), col):
            ax.plot(group["ctx"], group[col], marker="o", markersize=4, color=backend_color(attns[0]),
                    linestyle=dashes.get(gpu, "-"), label=f"{gpu} {' = '.join(attns)}")
        style.context_axis(ax, sub["ctx"])
        ax.set_yscale("log")
        ax.set_title(title)
    if published is not None and not published.empty:
        from decodegap.analysis.attention_backends import PUBLISHED_TO_OURS

        x0 = sub["ctx"].min()
        for r in published.itertuples():
            axes[0].scatter([x0], [r.value], marker="*", s=90, color=backend_color(PUBLISHED_TO_OURS.get(r.attn, [r.attn])[0]),
                            edgecolors="black", linewidths=0.6, zorder=5, label=f"{r.gpu} {r.attn}, {PUBLISHED_LABEL} (ctx not stated)")
    axes[0].set_ylabel(f"{style.MICRO} per decode-attention call\n({model} shape, log scale)")
    legend = {}
    for ax in axes:  # both panels' series (a pair alike in one panel may differ in the other)
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    if len(legend) <= LEGEND_ROWS:
        axes[1].legend(list(legend.values()), list(legend), loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    style.title(fig, "03_attention_us_vs_context.png", f"every backend that ran, {model} shape; backends joined by '=' "
                "time within 2 % of each other")
    fig.tight_layout()
    if len(legend) > LEGEND_ROWS:  # the series of several GPUs: below both panels, clear of every tick label
        fig.legend(list(legend.values()), list(legend), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3,
                   fontsize=7)
    return fig
