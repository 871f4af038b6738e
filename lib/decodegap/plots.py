"""Figures: one style; each function takes DataFrames and returns a matplotlib Figure. `save` writes a
deterministic PNG (no timestamp or version metadata)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .published import PUBLISHED_LABEL  # noqa: E402

ARM_STYLE = {
    "eager": dict(marker="o", linestyle="-"),
    "hf_default": dict(marker="v", linestyle=":"),
    "graph": dict(marker="s", linestyle="--"),
    "compile": dict(marker="D", linestyle="-."),
}
MODEL_COLOR = {"qwen2.5-7b": "#1b9e77", "mistral-7b-v0.3": "#d95f02", "llama-3.1-8b": "#7570b3"}
FLAG_COLOR = "#d62728"


def style() -> None:
    plt.rcParams.update({
        "figure.dpi": 110, "savefig.dpi": 110, "font.size": 9, "axes.grid": True, "grid.alpha": 0.3,
        "axes.spines.top": False, "axes.spines.right": False, "legend.fontsize": 7, "legend.frameon": False,
    })


def _color(model: str) -> str:
    return MODEL_COLOR.get(model, "#444444")


def _in_kernel() -> bool:
    """Whether this runs inside a Jupyter kernel (JupyterLab, or papermill executing a notebook)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def save(fig, path: Path) -> None:
    """Write `fig` as a deterministic PNG (the same data and library versions give the same bytes) and, inside a
    notebook, show that very PNG inline. Returns nothing, so a cell ending in `save(...)` shows the figure only."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None}, bbox_inches="tight")
    plt.close(fig)
    if _in_kernel():
        from IPython.display import Image, display

        display(Image(data=path.read_bytes(), format="png"))


def _empty(message: str):
    fig, ax = plt.subplots(figsize=(5, 1.5))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center")
    return fig


def r_floor_vs_bandwidth(cells: pd.DataFrame, published: pd.DataFrame, convention: str = "W_all"):
    """R_floor (datasheet bandwidth) against the GPU's peak bandwidth: our cells (every model, context and
    arm) and the paper's published points, labelled. Flagged cells (R_floor > 1) are drawn in red."""
    style()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    col = f"r_floor_{convention}"
    ok = cells.dropna(subset=[col])
    for (model, arm), group in ok.groupby(["model", "arm"]):
        good = group[group[col] <= 1.0]
        ax.scatter(good["bandwidth_gbps"] * (1 + 0.02 * np.log2(good["ctx"] / 2048)), good[col],
                   color=_color(model), marker=ARM_STYLE.get(arm, {}).get("marker", "o"), s=22, alpha=0.85,
                   label=f"{model} {arm} (measured)")
    bad = ok[ok[col] > 1.0]
    if not bad.empty:
        ax.scatter(bad["bandwidth_gbps"], bad[col], color=FLAG_COLOR, marker="x", s=40,
                   label="R_floor > 1: flagged, a measurement bug")
    if not published.empty:
        ax.scatter(published["bandwidth_gbps"], published["value"], color="black", marker="*", s=110,
                   label=PUBLISHED_LABEL + ", Qwen-2.5-7B ctx 2048", zorder=5)
        for _, row in published.iterrows():
            ax.annotate(f"{row['gpu']} {row['value']:.2f}", (row["bandwidth_gbps"], row["value"]),
                        textcoords="offset points", xytext=(6, 4), fontsize=7)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("datasheet peak bandwidth B_peak (GB/s, log)")
    ax.set_ylabel(f"R_floor = t_floor / t_obs ({convention}, datasheet)")
    ax.set_ylim(0, 1.1)
    ax.set_title("Achieved fraction of the memory floor against peak bandwidth")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def step_time_vs_context(cells: pd.DataFrame, convention: str = "W_all"):
    """Step time against context, one panel per model, one line per GPU and arm, with the memory floor
    at the datasheet bandwidth (dashed) and at the measured copy bandwidth (dotted)."""
    style()
    model_keys = list(dict.fromkeys(cells["model"]))
    fig, axes = plt.subplots(1, max(1, len(model_keys)), figsize=(3.4 * max(1, len(model_keys)), 3.6), squeeze=False)
    for ax, model in zip(axes[0], model_keys):
        sub = cells[(cells["model"] == model)].dropna(subset=["t_obs_ms"])
        for (gpu, arm), group in sub.groupby(["gpu", "arm"]):
            group = group.sort_values("ctx")
            ax.errorbar(group["ctx"], group["t_obs_ms"],
                        yerr=[group["t_obs_ms"] - group["t_obs_min_ms"], group["t_obs_max_ms"] - group["t_obs_ms"]],
                        label=f"{gpu} {arm}", capsize=2, markersize=4, **ARM_STYLE.get(arm, {}))
        floors = sub.drop_duplicates(["gpu", "ctx"]).sort_values("ctx")
        for gpu, group in floors.groupby("gpu"):
            ax.plot(group["ctx"], group[f"t_floor_ms_{convention}"], color="black", linestyle="--", linewidth=1,
                    label=f"{gpu} floor, datasheet")
            if group[f"t_floor_measured_ms_{convention}"].notna().any():
                ax.plot(group["ctx"], group[f"t_floor_measured_ms_{convention}"], color="black", linestyle=":",
                        linewidth=1, label=f"{gpu} floor, measured copy bandwidth")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context (tokens)")
        ax.set_title(model)
        ax.set_ylim(bottom=0)
    axes[0][0].set_ylabel("decode step (ms): median of session medians, bars = session range")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"Step time against context; floors under {convention}")
    return fig


def speedup_ci(speed: pd.DataFrame, published: pd.DataFrame):
    """Speed-up over eager with its 95 % bootstrap CI per GPU, model and arm; published points labelled."""
    style()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    labels, x = [], 0
    for _, row in speed.sort_values(["gpu", "arm", "model"]).iterrows():
        has_ci = pd.notna(row["ci_low"])
        yerr = [[row["speedup"] - row["ci_low"]], [row["ci_high"] - row["speedup"]]] if has_ci else None
        ax.errorbar([x], [row["speedup"]], yerr=yerr,
                    color=_color(row["model"]), capsize=3, **{**ARM_STYLE.get(row["arm"], {}), "linestyle": "none"})
        labels.append(f"{row['gpu']} {row['model']} {row['arm']} N={row['sessions']}" + ("" if has_ci else " (no CI: N<3)"))
        x += 1
    for _, row in published.iterrows():
        lo = row["value"] - row["ci_low"] if pd.notna(row["ci_low"]) else 0
        hi = row["ci_high"] - row["value"] if pd.notna(row["ci_high"]) else 0
        ax.errorbar([x], [row["value"]], yerr=[[lo], [hi]], color="black", marker="*", markersize=10, capsize=3)
        labels.append(f"{row['gpu']} graph, {PUBLISHED_LABEL}")
        x += 1
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(labels)), labels, fontsize=6, rotation=45, ha="right")
    ax.set_ylabel("speed-up over eager (x), 95 % bootstrap CI")
    ax.set_title("CUDA graphs (and torch.compile) against eager, ctx 2048")
    return fig


def decomposition(decomp: pd.DataFrame):
    """Stacked bars per cell: memory floor, GPU-side excess (graph - floor), host launch overhead
    (eager - graph). The bar's top is the eager step time."""
    style()
    if decomp.empty:
        return _empty("No cell has both eager and graph rows: nothing to decompose.")
    d = decomp.sort_values(["gpu", "model", "ctx"]).reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(d)), 4.0))
    x = np.arange(len(d))
    ax.bar(x, d["t_floor_ms"], color="#4c72b0", label="memory floor t_floor (W_all, datasheet)")
    ax.bar(x, d["gpu_excess_ms"], bottom=d["t_floor_ms"], color="#dd8452", label="GPU-side excess (graph - floor)")
    ax.bar(x, d["launch_overhead_ms"], bottom=d["graph_ms"], color="#c44e52", label="launch overhead (eager - graph)")
    ax.set_xticks(x, [f"{g} {m}\nctx {c}" for g, m, c in zip(d["gpu"], d["model"], d["ctx"])], fontsize=6,
                  rotation=60, ha="right")
    ax.set_ylabel("ms per decode step")
    ax.set_title("Where a batch-1 decode step goes")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def r_floor_per_arm(cells: pd.DataFrame, convention: str = "W_all"):
    """R_floor against context per model, one line per GPU and arm."""
    style()
    model_keys = list(dict.fromkeys(cells["model"]))
    fig, axes = plt.subplots(1, max(1, len(model_keys)), figsize=(3.4 * max(1, len(model_keys)), 3.4),
                             squeeze=False, sharey=True)
    col = f"r_floor_{convention}"
    for ax, model in zip(axes[0], model_keys):
        sub = cells[cells["model"] == model].dropna(subset=[col])
        for (gpu, arm), group in sub.groupby(["gpu", "arm"]):
            group = group.sort_values("ctx")
            ax.plot(group["ctx"], group[col], label=f"{gpu} {arm}", **ARM_STYLE.get(arm, {}))
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context (tokens)")
        ax.set_title(model)
        ax.set_ylim(0, 1.05)
    axes[0][0].set_ylabel(f"R_floor ({convention}, datasheet)")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def attention_us_vs_context(summ: pd.DataFrame, model: str):
    """Microseconds per layer call against context per backend: host-inclusive (left), GPU-only (right)."""
    style()
    sub = summ[(summ["model"] == model) & (summ["status"] == "ok")]
    if sub.empty:
        return _empty(f"No attention rows for {model}.")
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.6), sharey=False)
    for ax, col, title in ((axes[0], "host_us", "host-inclusive (eager loop)"), (axes[1], "gpu_us", "GPU-only (graph replay)")):
        for (gpu, attn), group in sub.dropna(subset=[col]).groupby(["gpu", "attn"]):
            group = group.sort_values("ctx")
            ax.plot(group["ctx"], group[col], marker="o", label=f"{gpu} {attn}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context (tokens)")
        ax.set_title(title)
    axes[0].set_ylabel(f"us per decode-attention call ({model} shape)")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
