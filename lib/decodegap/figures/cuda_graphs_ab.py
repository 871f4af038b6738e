"""Figures of notebook 02: the CUDA graphs' speed-up over eager with its interval, the decomposition of a decode step
(floor, GPU-side excess, launch overhead), and R_floor per arm (style.apply / style.save conventions)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from decodegap.figures import style
from decodegap.published import PUBLISHED_LABEL


def speedup_ci(speed: pd.DataFrame, published: pd.DataFrame):
    """Speed-up over eager with its interval named for what it is (ab.speedups' `low`, `high`, `interval`: the 95 %
    bootstrap CI from 10 sessions, else the range of the N sessions): one group per GPU and model (measured), then
    the published points; colour: arm (graph, compile), the same colours as every other figure. Each point names its
    sessions, the sweep they are from (ab.headline) where `speed` has one, and its interval's kind."""
    style.apply()
    groups = list(dict.fromkeys(zip(speed["gpu"], speed["model"]))) if not speed.empty else []
    fig, ax = plt.subplots(figsize=(max(7.4, 1.25 * (len(groups) + len(published)) + 1.0), 3.9))  # a tick's room
    arms = [a for a in ("graph", "compile") if a in set(speed.get("arm", []))] or ["graph"]
    width = 0.8 / max(1, len(arms))
    labels, top, labelled = [], 1.0, set()
    for i, (gpu, model) in enumerate(groups):
        labels.append(f"{model}\n{gpu}")
        for j, arm in enumerate(arms):
            hit = speed[(speed["gpu"] == gpu) & (speed["model"] == model) & (speed["arm"] == arm)]
            if hit.empty:
                continue
            row = hit.iloc[0]
            low, high = (row["low"], row["high"]) if "low" in row else (row["ci_low"], row["ci_high"])
            kind = row["interval"] if isinstance(row.get("interval"), str) else ("95 % bootstrap CI" if pd.notna(
                row["ci_low"]) else "")
            has_interval = pd.notna(low) and pd.notna(high)
            yerr = [[row["speedup"] - low], [high - row["speedup"]]] if has_interval else None
            x = i - 0.4 + width * (j + 0.5)
            ax.errorbar([x], [row["speedup"]], yerr=yerr, color=style.arm_color(arm), capsize=3, linestyle="none",
                        marker=style.ARM_STYLE.get(arm, {}).get("marker", "o"), markersize=7,
                        label=None if arm in labelled else f"{arm} (measured)")  # each arm once, wherever first
            labelled.add(arm)
            sweep = row.get("sweep", "")
            top = max(top, high if has_interval else row["speedup"])
            ax.annotate(f"N={int(row['sessions'])} " + (f"{sweep} " if isinstance(sweep, str) and sweep else "")
                        + (("CI" if kind.startswith("95") else "range") if has_interval else "no interval"),
                        (x, high if has_interval else row["speedup"]), rotation=90,
                        textcoords="offset points", xytext=(0, 5), ha="center", va="bottom", fontsize=6.5)
    for k, (_, row) in enumerate(published.iterrows()):
        x = len(groups) + k
        lo = row["value"] - row["ci_low"] if pd.notna(row["ci_low"]) else 0
        hi = row["ci_high"] - row["value"] if pd.notna(row["ci_high"]) else 0
        ax.errorbar([x], [row["value"]], yerr=[[lo], [hi]], color=style.gpu_color(row["gpu"]), marker="*", markersize=12,
                    capsize=3, markeredgecolor="black", label=f"{row['gpu']} graph, {PUBLISHED_LABEL}")
        labels.append(f"{row['gpu']}\npublished")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("speed-up over eager (x)\nbars: 95 % bootstrap CI (N >= 10),\nelse range of N sessions",
                  fontsize=8)
    if not published.empty:
        top = max(top, float(published["ci_high"].fillna(published["value"]).max()))
    ax.set_ylim(0, top * 1.45)  # room above the highest bar for its label
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ctx = sorted(set(speed["ctx"])) if "ctx" in speed and not speed.empty else []
    style.title(fig, "02_speedup_ci.png", "speed-up over eager per model" + (f", ctx {ctx[0]:,}" if len(ctx) == 1 else "")
                + "; each point: its sessions N, its sweep and its interval")
    fig.tight_layout()
    return fig


DECOMPOSITION_COLORS = {"floor": "#4c72b0", "excess": "#dd8452", "launch": "#c44e52"}


def decomposition(decomp: pd.DataFrame):
    """Stacked bars per cell: memory floor, GPU-side excess (graph - floor), host launch overhead
    (eager - graph); the bar's top is the eager step time. Cells grouped by GPU and model, contexts as ticks."""
    style.apply()
    if decomp.empty:
        return style.empty("No cell has both eager and graph rows: nothing to decompose.")
    d = decomp.sort_values(["gpu", "model", "ctx"]).reset_index(drop=True)
    groups = list(dict.fromkeys(zip(d["gpu"], d["model"])))
    x, pos = [], 0.0
    for i, (gpu, model) in enumerate(groups):
        n = int(((d["gpu"] == gpu) & (d["model"] == model)).sum())
        x += [pos + k for k in range(n)]
        pos += n + 0.8
    x = np.array(x)
    fig, ax = plt.subplots(figsize=(max(6.5, 0.45 * len(d) + 3.5), 4.0))
    ax.bar(x, d["t_floor_ms"], color=DECOMPOSITION_COLORS["floor"], label="memory floor t_floor (W_all, datasheet)")
    ax.bar(x, d["gpu_excess_ms"], bottom=d["t_floor_ms"], color=DECOMPOSITION_COLORS["excess"],
           label="GPU-side excess (graph - floor)")
    ax.bar(x, d["launch_overhead_ms"], bottom=d["graph_ms"], color=DECOMPOSITION_COLORS["launch"],
           label="launch overhead (eager - graph)")
    ax.set_xticks(x, [f"{int(c) // 1024}k" for c in d["ctx"]], fontsize=8)
    for gpu, model in groups:
        sel = x[((d["gpu"] == gpu) & (d["model"] == model)).to_numpy()]
        # two lines: a group of three contexts is narrower than "mistral-7b-v0.3 (h100-sxm)" on one
        ax.annotate(f"{model}\n({gpu})", (sel.mean(), 0), xycoords=("data", "axes fraction"), xytext=(0, -18),
                    textcoords="offset points", ha="center", va="top", fontsize=8)
    ax.set_xlabel("context (tokens)", labelpad=32)
    ax.set_ylabel("ms per decode step")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    style.title(fig, "02_decomposition.png", "the eager step of each cell: the bar's top is its step time")
    fig.tight_layout()
    return fig


def r_floor_per_arm(cells: pd.DataFrame, convention: str = "W_all"):
    """R_floor against context per model (shared y axis), one line per GPU and arm (colour: arm)."""
    style.apply()
    model_keys = list(dict.fromkeys(cells["model"]))
    n = max(1, len(model_keys))
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n + 1.6, 3.4), squeeze=False, sharey=True)
    col = f"r_floor_{convention}"
    for ax, model in zip(axes[0], model_keys):
        sub = cells[cells["model"] == model].dropna(subset=[col])
        for (gpu, arm), group in sub.groupby(["gpu", "arm"]):
            group = group.sort_values("ctx")
            ax.plot(group["ctx"], group[col], label=f"{gpu} {arm}", color=style.arm_color(arm), **style.ARM_STYLE.get(arm, {}))
        style.context_axis(ax, sub["ctx"])
        ax.set_title(model)
        ax.set_ylim(0, 1.05)
        ax.axhline(1.0, color="grey", linewidth=0.8)
    axes[0][0].set_ylabel(f"R_floor ({convention}, datasheet)")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    style.title(fig, "02_r_floor_per_arm.png", "R_floor per arm against context")
    fig.tight_layout()
    return fig
