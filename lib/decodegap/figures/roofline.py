"""Figures of notebook 01: R_floor against each GPU's peak bandwidth, and step time against context beside the
memory floors (style.apply / style.save conventions)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from decodegap.figures import style
from decodegap.published import PUBLISHED_LABEL


def r_floor_vs_bandwidth(cells: pd.DataFrame, published: pd.DataFrame, convention: str = "W_all"):
    """R_floor (datasheet bandwidth) against the GPU's peak bandwidth: our cells (colour: arm; marker: model;
    contexts spread slightly right of their GPU) and the paper's published points (stars in the GPU's colour,
    labelled). Flagged cells (R_floor > 1) are red crosses. The title states the finding, GPU by GPU."""
    style.apply()
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    col = f"r_floor_{convention}"
    ok = cells.dropna(subset=[col])
    for (model, arm), group in ok.groupby(["model", "arm"]):
        good = group[group[col] <= 1.0]
        ax.scatter(good["bandwidth_gbps"] * (1 + 0.025 * np.log2(good["ctx"] / 2048)), good[col],
                   color=style.arm_color(arm), marker=style.model_marker(model), s=22, alpha=0.85, label=f"{model}, {arm}")
    bad = ok[ok[col] > 1.0]
    if not bad.empty:
        ax.scatter(bad["bandwidth_gbps"], bad[col], color=style.FLAG_COLOR, marker="x", s=40,
                   label="R_floor > 1: flagged, a measurement bug")
    parts = {}
    for gpu, g in ok.groupby("gpu"):
        parts[gpu] = (float(g["bandwidth_gbps"].iloc[0]), f"{gpu} {style.value_range(g[col])} (measured)")
    if not published.empty:
        for _, row in published.iterrows():
            ax.scatter([row["bandwidth_gbps"]], [row["value"]], color=style.gpu_color(row["gpu"]), edgecolors="black",
                       marker="*", s=160, zorder=5)
            ax.annotate(f"{row['gpu']} {row['value']:.2f}\n({PUBLISHED_LABEL})", (row["bandwidth_gbps"], row["value"]),
                        textcoords="offset points", xytext=(-9, 4), ha="right", fontsize=7.5)
            parts.setdefault(row["gpu"], (float(row["bandwidth_gbps"]), f"{row['gpu']} {row['value']:.2f} (published)"))
        ax.scatter([], [], color="white", edgecolors="black", marker="*", s=120,
                   label=PUBLISHED_LABEL + ", Qwen-2.5-7B ctx 2048")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    bandwidths = {gpu: bw for gpu, (bw, _) in parts.items()}
    if bandwidths:
        style.bandwidth_axis(ax, bandwidths)
        lo, hi = min(bandwidths.values()), max(bandwidths.values())
        ax.set_xlim(lo / 2.6, hi * 1.5)  # room left of the slowest GPU for its published label
    ax.set_ylabel(f"R_floor = t_floor / t_obs ({convention}, datasheet)")
    ax.set_ylim(0, 1.1)
    style.title(fig, "01_r_floor_vs_bandwidth.png",
                "every measured cell (model, context, arm) against the published L4 and H100 points")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="measured: model, arm", title_fontsize=8)
    return fig


def step_time_vs_context(cells: pd.DataFrame, convention: str = "W_all"):
    """Step time against context, one panel per model (shared y axis), one line per GPU and arm (colour: arm),
    with the memory floor at the datasheet bandwidth (dashed) and at the measured copy bandwidth (dotted)."""
    style.apply()
    model_keys = list(dict.fromkeys(cells["model"]))
    n = max(1, len(model_keys))
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n + 1.8, 3.6), squeeze=False, sharey=True)
    for ax, model in zip(axes[0], model_keys):
        sub = cells[(cells["model"] == model)].dropna(subset=["t_obs_ms"])
        for (gpu, arm), group in sub.groupby(["gpu", "arm"]):
            group = group.sort_values("ctx")
            ax.errorbar(group["ctx"], group["t_obs_ms"],
                        yerr=[group["t_obs_ms"] - group["t_obs_min_ms"], group["t_obs_max_ms"] - group["t_obs_ms"]],
                        label=f"{gpu} {arm}", capsize=2, markersize=4, color=style.arm_color(arm), **style.ARM_STYLE.get(arm, {}))
        floors = sub.drop_duplicates(["gpu", "ctx"]).sort_values("ctx")
        for gpu, group in floors.groupby("gpu"):
            ax.plot(group["ctx"], group[f"t_floor_ms_{convention}"], color=style.FLOOR_COLOR, linestyle="--", linewidth=1,
                    label=f"{gpu} memory floor, datasheet")
            if group[f"t_floor_measured_ms_{convention}"].notna().any():
                ax.plot(group["ctx"], group[f"t_floor_measured_ms_{convention}"], color=style.FLOOR_COLOR, linestyle=":",
                        linewidth=1, label=f"{gpu} memory floor, measured copy bandwidth")
        style.context_axis(ax, sub["ctx"])
        ax.set_title(model)
    axes[0][0].set_ylim(bottom=0)  # once, after every panel's data: the shared axis autoscaled over all of them
    axes[0][0].set_ylabel("ms per decode step\n(median of sessions; bars: session range)")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    style.title(fig, "01_step_time_vs_context.png", f"floors under {convention}; every GPU and arm with rows")
    fig.tight_layout()
    return fig
