"""Figures of notebook 07: R_floor against the bandwidth floor t_floor for every size, batch and arm, with the paper's
published GPUs on the same axes, and the residuals of the two-term step model (style.apply / style.save
conventions)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from decodegap.figures import checks, style
from decodegap.published import PUBLISHED_LABEL

HF_ARMS = ("eager", "graph", "compile")
"""The arms drawn in their own colour; every other arm (the lean levers) is drawn as one grey series."""
OTHER = "other arms (lean levers)"


def _series(cells: pd.DataFrame):
    """(label, colour, rows) per drawn series: the HF arms with SDPA, then every other cell together."""
    sdpa = cells[cells["attn"] == "sdpa"]
    for arm in HF_ARMS:
        rows = sdpa[sdpa["arm"] == arm]
        if not rows.empty:
            yield arm, style.arm_color(arm), rows
    rest = cells[~((cells["attn"] == "sdpa") & cells["arm"].isin(HF_ARMS))]
    if not rest.empty:
        yield OTHER, "#bbbbbb", rest


def _ms_axis(ax, lo: float, hi: float) -> None:
    """A log axis of milliseconds from lo to hi with plain ticks at 1, 2, 5 x 10^k (no minor labels to collide)."""
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ticks = [m * 10.0 ** k for k in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
             for m in (1, 2, 5) if lo <= m * 10.0 ** k <= hi]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()


def _size(batch) -> np.ndarray:
    return 14 * (1 + np.log2(np.asarray(batch, dtype=float)))


LABEL_PLACES = (((8, 4), "left", "bottom"), ((8, -4), "left", "top"), ((-8, 4), "right", "bottom"),
                ((-8, -4), "right", "top"), ((8, 14), "left", "bottom"), ((8, -14), "left", "top"),
                ((-8, 14), "right", "bottom"), ((-8, -14), "right", "top"))
"""Where a published point's label may sit, in order: (offset in points, ha, va)."""
LABEL_PLACES_LEFT = tuple(p for p in LABEL_PLACES if p[1] == "right") + tuple(p for p in LABEL_PLACES if p[1] == "left")
"""The same for a point with nothing to its right (its label to the left first)."""
FAR_PLACES = tuple(((round(r * np.cos(a)), round(r * np.sin(a))), "left" if np.cos(a) >= 0 else "right",
                    "bottom" if np.sin(a) >= 0 else "top")
                   for r in (40, 60, 80, 100) for a in np.linspace(0, 2 * np.pi, 16, endpoint=False))
"""Farther places, tried after the near ones for a point among many cells (rings of 16 directions, 40-100 points
out), the label joined to its point by a line."""


def r_floor_vs_t_floor(cells: pd.DataFrame, points: pd.DataFrame):
    """R_floor (bandwidth floor / step) against the bandwidth floor (ms, log), one panel per GPU measured (its
    floor is its own datasheet bandwidth's; the panels share both axes): each cell of ours (colour: arm, marker:
    model, size: batch) and, in every panel, the paper's published points (stars, their t_floor from their published
    bandwidth)."""
    style.apply()
    gpus = sorted(set(cells["gpu"])) if not cells.empty else [None]
    fig, axes = plt.subplots(1, len(gpus), figsize=(2.4 + 4.2 * len(gpus), 4.4), sharex=True, sharey=True,
                             squeeze=False)
    axes = list(axes[0])
    xs = pd.concat([cells["t_floor_bw_ms"], points.get("t_floor_bw_ms", pd.Series(dtype=float))]).dropna()
    labels = []
    rightmost = max(points["t_floor_bw_ms"], default=np.nan)
    for ax, gpu in zip(axes, gpus):
        mine = cells[cells["gpu"] == gpu] if gpu is not None else cells
        for label, colour, rows in _series(mine):
            for model, g in rows.groupby("model"):
                ax.scatter(g["t_floor_bw_ms"], g["r_floor"], s=_size(g["batch"]), color=colour,
                           marker=style.model_marker(model), alpha=0.8, zorder=2 if label == OTHER else 3)
        for p in points.itertuples():
            ax.scatter([p.t_floor_bw_ms], [p.r_floor_published], marker="*", s=160, color=style.gpu_color(p.gpu),
                       edgecolors="black", zorder=5)
            left = p.t_floor_bw_ms == rightmost and p.t_floor_bw_ms > cells["t_floor_bw_ms"].max()  # nothing right
            labels.append((ax.annotate(f"{p.gpu} {p.r_floor_published:.2f}\n{PUBLISHED_LABEL}",
                                       (p.t_floor_bw_ms, p.r_floor_published), xytext=(0, 0),
                                       textcoords="offset points", fontsize=7.5,
                                       arrowprops=dict(arrowstyle="-", color="black", linewidth=0.6, shrinkA=0,
                                                       shrinkB=6)), left))
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_ylim(0, 1.1)
        if gpu is not None:
            ax.set_title(f"measured on the {gpu}", fontsize=9)
        ax.set_xlabel("t_floor = (W_all + B x K(ctx)) / datasheet bandwidth (ms, log)")
    if not xs.empty:
        _ms_axis(axes[0], xs.min() / 1.6, xs.max() * 1.6)
    axes[0].set_ylabel("R_floor = t_floor / t_obs")
    legend_ax = axes[-1]
    for label, colour, _ in _series(cells):
        legend_ax.scatter([], [], s=30, color=colour, marker="o", label=label)  # the legend: colour is the arm
    for model in sorted(set(cells["model"])) if not cells.empty else []:
        legend_ax.scatter([], [], s=30, color="white", edgecolors="grey", marker=style.model_marker(model),
                          label=model)
    if not points.empty:
        legend_ax.scatter([], [], marker="*", s=120, color="white", edgecolors="black",
                          label=PUBLISHED_LABEL + ", eager, Qwen-2.5-7B ctx 2048")
    for b in sorted(set(cells["batch"])) if not cells.empty else []:
        legend_ax.scatter([], [], s=_size([b]), color="white", edgecolors="grey", label=f"batch {b}")
    style.title(fig, "07_r_floor_vs_t_floor.png", "every measured cell (size, batch, context, arm), a panel per GPU, "
                "and the paper's GPUs")
    for text, left in labels:  # placed once the axes are final: the first side that covers no measured point
        checks.place_clear_of_markers(text, (LABEL_PLACES_LEFT if left else LABEL_PLACES) + FAR_PLACES)
    legend_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="measured: arm (colour), model (marker)",
                     title_fontsize=8, fontsize=7)
    return fig


def residuals(resid: pd.DataFrame, transferred: pd.DataFrame, rel_tol: float):
    """The two-term model's residual t_obs / t_model - 1 of each fitted cell against its floor (colour: arm; bars:
    the cell's session range), the band +-rel_tol, and the paper's points predicted by our fits (stars), or a figure
    that says there is no fit yet."""
    fitted = resid.dropna(subset=["residual"]) if not resid.empty else resid
    if fitted.empty and transferred.empty:
        return _no_fit()
    style.apply()
    fig, ax = plt.subplots(figsize=(7.2, 4.0))
    for label, colour, rows in _series(fitted):
        ax.errorbar(rows["t_floor_ms"], rows["residual"], yerr=rows["noise"] * (1 + rows["residual"]), fmt="o",
                    markersize=4, capsize=2, color=colour, label=label)
    bad = transferred[~(transferred["predicted_ms"] > 0)]
    if not bad.empty:  # a fit that predicts no positive step for a paper GPU: said, not drawn off a log axis
        ax.plot([], [], " ", label=f"{len(bad)} published point(s) predicted at <= 0 ms: not drawn")
    for (gpu, arm), g in transferred[transferred["predicted_ms"] > 0].groupby(["gpu", "arm"]):
        ax.scatter(g["predicted_ms"], g["residual"], marker="*", s=140, color=style.gpu_color(gpu),
                   edgecolors="black", zorder=5, label=f"{gpu} {arm}, {PUBLISHED_LABEL}, against our fit")
    for y, label in ((rel_tol, f"+-{rel_tol:.0%}: explained within"), (-rel_tol, None)):
        ax.axhline(y, color="grey", linewidth=0.8, linestyle=":", label=label)
    ax.axhline(0, color="grey", linewidth=0.8)
    xs = pd.concat([fitted["t_floor_ms"] if not fitted.empty else pd.Series(dtype=float),
                    transferred["predicted_ms"]]).dropna()
    xs = xs[xs > 0]
    if not xs.empty:
        _ms_axis(ax, xs.min() / 1.6, xs.max() * 1.6)
    ax.set_xlabel("t_floor (ms, log scale): ours, the roofline's floor; the paper's points at their predicted step")
    ax.set_ylabel("t_obs / t_model - 1")
    style.title(fig, "07_step_model_residuals.png", "t = t_floor / a + c0 + n_layers x c1, per GPU and arm")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    return fig


def _no_fit():
    style.apply()
    fig, ax = plt.subplots(figsize=(7.2, 1.6))
    ax.axis("off")
    ax.text(0.5, 0.5, "not measured yet: no arm has enough cells of notebook 07's own sweeps to fit",
            ha="center", va="center")
    style.title(fig, "07_step_model_residuals.png")
    return fig
