"""Figures: one style; each function takes DataFrames and returns a matplotlib Figure. `save` writes a
deterministic PNG (no timestamp or version metadata)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from decodegap.published import PUBLISHED_LABEL  # noqa: E402

ARM_COLOR = {
    "eager": "#1f77b4", "hf_default": "#8c564b", "graph": "#2ca02c", "compile": "#d62728",
    "lean": "#9467bd", "lean_graph": "#17becf", "lean_compile": "#e377c2", "lean_kernels": "#bcbd22",
    "lean_kernels_graph": "#7f7f7f", "lean_attn_graph": "#ff7f0e", "lean_attn_compile": "#000080",
    "lean_fused_graph": "#8c6d31", "lean_fused_pdl_graph": "#637939", "lean_fused_pdl_norm_graph": "#843c39",
    "lean_fused_pdl_epilogues_graph": "#ad494a", "lean_fused_early_graph": "#d6616b",
    "lean_fused_early_products_graph": "#e7969c",
}
"""One colour per arm, the same in every figure (decode.ARMS)."""
ARM_STYLE = {
    "eager": dict(marker="o", linestyle="-"),
    "hf_default": dict(marker="v", linestyle=":"),
    "graph": dict(marker="s", linestyle="--"),
    "compile": dict(marker="D", linestyle="-."),
}
GPU_COLOR = {"l4": "#b35806", "l40s": "#e08214", "a100-80gb": "#8073ac", "h100-sxm": "#542788", "h200": "#1b7837",
             "b200": "#5aae61"}
"""One colour per GPU, the same in every figure that tells GPUs apart by colour."""
MODEL_MARKER = {"qwen2.5-7b": "o", "mistral-7b-v0.3": "s", "llama-3.1-8b": "D"}
"""One marker per model where colour already says the arm."""
FLOOR_COLOR = "black"
TARGET_COLOR = "#b2182b"
FLAG_COLOR = "#d62728"
MICRO = "\u00b5s"  # microseconds, as the axis labels write them


def arm_color(arm: str) -> str:
    return ARM_COLOR.get(arm, "#444444")


def gpu_color(gpu: str) -> str:
    return GPU_COLOR.get(gpu, "#444444")


def model_marker(model: str) -> str:
    return MODEL_MARKER.get(model, "o")


def style() -> None:
    plt.rcParams.update({
        "figure.dpi": 110, "savefig.dpi": 110, "font.size": 9, "axes.grid": True, "grid.alpha": 0.3,
        "axes.spines.top": False, "axes.spines.right": False, "legend.fontsize": 8, "legend.frameon": False,
        "axes.titlesize": 9, "figure.titlesize": 10,
    })


def finding_title(fig, finding: str, subtitle: str = "") -> None:
    """The figure's title: its finding (generated from the rows it plots), with what is plotted below it."""
    fig.suptitle(finding + (f"\n{subtitle}" if subtitle else ""), x=0.01, y=1.0, ha="left", va="bottom", fontsize=10)


def context_axis(ax, contexts) -> None:
    """A log2 context axis with the measured contexts as plain tick labels (2048, 4096, ...)."""
    ticks = sorted({int(c) for c in contexts})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("context (tokens)")


def bandwidth_axis(ax, specs_bw: dict) -> None:
    """A log bandwidth axis with one tick per GPU (its key and datasheet GB/s), so labels never collide."""
    ax.set_xscale("log")
    ticks = sorted(specs_bw.items(), key=lambda kv: kv[1])
    ax.set_xticks([bw for _, bw in ticks], [f"{g}\n{bw:,.0f}" for g, bw in ticks], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("datasheet peak bandwidth B_peak (GB/s, log scale)")


def _span(values, fmt=".2f") -> str:
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return lo if lo == hi else f"{lo}-{hi}"


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
    """R_floor (datasheet bandwidth) against the GPU's peak bandwidth: our cells (colour: arm; marker: model;
    contexts spread slightly right of their GPU) and the paper's published points (stars in the GPU's colour,
    labelled). Flagged cells (R_floor > 1) are red crosses. The title states the finding, GPU by GPU."""
    style()
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    col = f"r_floor_{convention}"
    ok = cells.dropna(subset=[col])
    for (model, arm), group in ok.groupby(["model", "arm"]):
        good = group[group[col] <= 1.0]
        ax.scatter(good["bandwidth_gbps"] * (1 + 0.025 * np.log2(good["ctx"] / 2048)), good[col],
                   color=arm_color(arm), marker=model_marker(model), s=22, alpha=0.85, label=f"{model}, {arm}")
    bad = ok[ok[col] > 1.0]
    if not bad.empty:
        ax.scatter(bad["bandwidth_gbps"], bad[col], color=FLAG_COLOR, marker="x", s=40,
                   label="R_floor > 1: flagged, a measurement bug")
    parts = {}
    for gpu, g in ok.groupby("gpu"):
        parts[gpu] = (float(g["bandwidth_gbps"].iloc[0]), f"{gpu} {_span(g[col])} (measured)")
    if not published.empty:
        for _, row in published.iterrows():
            ax.scatter([row["bandwidth_gbps"]], [row["value"]], color=gpu_color(row["gpu"]), edgecolors="black",
                       marker="*", s=160, zorder=5)
            ax.annotate(f"{row['gpu']} {row['value']:.2f}\n({PUBLISHED_LABEL})", (row["bandwidth_gbps"], row["value"]),
                        textcoords="offset points", xytext=(8, -4), fontsize=7.5)
            parts.setdefault(row["gpu"], (float(row["bandwidth_gbps"]), f"{row['gpu']} {row['value']:.2f} (published)"))
        ax.scatter([], [], color="white", edgecolors="black", marker="*", s=120,
                   label=PUBLISHED_LABEL + ", Qwen-2.5-7B ctx 2048")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    bandwidths = {gpu: bw for gpu, (bw, _) in parts.items()}
    if bandwidths:
        bandwidth_axis(ax, bandwidths)
        lo, hi = min(bandwidths.values()), max(bandwidths.values())
        ax.set_xlim(lo / 1.4, hi * 1.5)
    ax.set_ylabel(f"R_floor = t_floor / t_obs ({convention}, datasheet)")
    ax.set_ylim(0, 1.1)
    ordered = [text for _, text in sorted(parts.values())]
    finding_title(fig, "R_floor falls as peak bandwidth rises: " + ", ".join(ordered),
                  "every measured cell (model, context, arm) against the published L4 and H100 points")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="measured: model, arm", title_fontsize=8)
    return fig


def step_time_vs_context(cells: pd.DataFrame, convention: str = "W_all"):
    """Step time against context, one panel per model (shared y axis), one line per GPU and arm (colour: arm),
    with the memory floor at the datasheet bandwidth (dashed) and at the measured copy bandwidth (dotted)."""
    style()
    model_keys = list(dict.fromkeys(cells["model"]))
    n = max(1, len(model_keys))
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n + 1.8, 3.6), squeeze=False, sharey=True)
    for ax, model in zip(axes[0], model_keys):
        sub = cells[(cells["model"] == model)].dropna(subset=["t_obs_ms"])
        for (gpu, arm), group in sub.groupby(["gpu", "arm"]):
            group = group.sort_values("ctx")
            ax.errorbar(group["ctx"], group["t_obs_ms"],
                        yerr=[group["t_obs_ms"] - group["t_obs_min_ms"], group["t_obs_max_ms"] - group["t_obs_ms"]],
                        label=f"{gpu} {arm}", capsize=2, markersize=4, color=arm_color(arm), **ARM_STYLE.get(arm, {}))
        floors = sub.drop_duplicates(["gpu", "ctx"]).sort_values("ctx")
        for gpu, group in floors.groupby("gpu"):
            ax.plot(group["ctx"], group[f"t_floor_ms_{convention}"], color=FLOOR_COLOR, linestyle="--", linewidth=1,
                    label=f"{gpu} memory floor, datasheet")
            if group[f"t_floor_measured_ms_{convention}"].notna().any():
                ax.plot(group["ctx"], group[f"t_floor_measured_ms_{convention}"], color=FLOOR_COLOR, linestyle=":",
                        linewidth=1, label=f"{gpu} memory floor, measured copy bandwidth")
        context_axis(ax, sub["ctx"])
        ax.set_title(model)
        ax.set_ylim(bottom=0)
    axes[0][0].set_ylabel("ms per decode step\n(median of sessions; bars: session range)")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    eager = cells[(cells["arm"] == "eager")].dropna(subset=["t_obs_ms"])
    if not eager.empty:
        over = eager["t_obs_ms"] / eager[f"t_floor_ms_{convention}"]
        finding = (f"The eager step stays {over.min():.0f}-{over.max():.0f}x above its memory floor from "
                   f"{int(eager['ctx'].min()):,} to {int(eager['ctx'].max()):,} tokens: it is not paying for bytes")
    else:
        finding = "Step time against context"
    finding_title(fig, finding, f"floors under {convention}; every GPU and arm with rows")
    fig.tight_layout()
    return fig


def speedup_ci(speed: pd.DataFrame, published: pd.DataFrame):
    """Speed-up over eager with its 95 % bootstrap CI: one group per GPU and model (measured), then the published
    points; colour: arm (graph, compile), the same colours as every other figure. Each point names its sessions and,
    where `speed` has one, the sweep they are from (ab.headline)."""
    style()
    fig, ax = plt.subplots(figsize=(7.4, 3.9))
    groups = list(dict.fromkeys(zip(speed["gpu"], speed["model"]))) if not speed.empty else []
    arms = [a for a in ("graph", "compile") if a in set(speed.get("arm", []))] or ["graph"]
    width = 0.8 / max(1, len(arms))
    labels = []
    for i, (gpu, model) in enumerate(groups):
        labels.append(f"{model}\n{gpu}")
        for j, arm in enumerate(arms):
            hit = speed[(speed["gpu"] == gpu) & (speed["model"] == model) & (speed["arm"] == arm)]
            if hit.empty:
                continue
            row = hit.iloc[0]
            has_ci = pd.notna(row["ci_low"])
            yerr = [[row["speedup"] - row["ci_low"]], [row["ci_high"] - row["speedup"]]] if has_ci else None
            x = i - 0.4 + width * (j + 0.5)
            ax.errorbar([x], [row["speedup"]], yerr=yerr, color=arm_color(arm), capsize=3, linestyle="none",
                        marker=ARM_STYLE.get(arm, {}).get("marker", "o"), markersize=7,
                        label=f"{arm} (measured)" if i == 0 else None)
            sweep = row.get("sweep", "")
            ax.annotate(f"N={int(row['sessions'])}" + (f" {sweep}" if isinstance(sweep, str) and sweep else "")
                        + ("" if has_ci else ", no CI"), (x, row["speedup"]),
                        textcoords="offset points", xytext=(7, -3), ha="left", fontsize=7)
    for k, (_, row) in enumerate(published.iterrows()):
        x = len(groups) + k
        lo = row["value"] - row["ci_low"] if pd.notna(row["ci_low"]) else 0
        hi = row["ci_high"] - row["value"] if pd.notna(row["ci_high"]) else 0
        ax.errorbar([x], [row["value"]], yerr=[[lo], [hi]], color=gpu_color(row["gpu"]), marker="*", markersize=12,
                    capsize=3, markeredgecolor="black", label=f"{row['gpu']} graph, {PUBLISHED_LABEL}")
        labels.append(f"{row['gpu']}\npublished")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("speed-up over eager (x), 95 % bootstrap CI")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    graph = speed[speed["arm"] == "graph"] if not speed.empty else speed
    parts = []
    for gpu, g in graph.groupby("gpu"):
        parts.append(f"CUDA graphs make the {gpu} step {_span(g['speedup'])}x faster")
    pub = [f"the paper's {r['gpu']} {r['value']:.3g}x" for _, r in published.iterrows()]
    ctx = sorted(set(speed["ctx"])) if "ctx" in speed and not speed.empty else []
    finding_title(fig, "; ".join(parts + pub) or "Speed-up over eager",
                  "speed-up over eager per model" + (f", ctx {ctx[0]:,}" if len(ctx) == 1 else ""))
    fig.tight_layout()
    return fig


DECOMPOSITION_COLORS = {"floor": "#4c72b0", "excess": "#dd8452", "launch": "#c44e52"}


def decomposition(decomp: pd.DataFrame):
    """Stacked bars per cell: memory floor, GPU-side excess (graph - floor), host launch overhead
    (eager - graph); the bar's top is the eager step time. Cells grouped by GPU and model, contexts as ticks."""
    style()
    if decomp.empty:
        return _empty("No cell has both eager and graph rows: nothing to decompose.")
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
        ax.annotate(f"{model} ({gpu})", (sel.mean(), 0), xycoords=("data", "axes fraction"), xytext=(0, -26),
                    textcoords="offset points", ha="center", fontsize=8)
    ax.set_xlabel("context (tokens)", labelpad=18)
    ax.set_ylabel("ms per decode step")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    parts = []
    for gpu, g in d.groupby("gpu"):
        lo_ctx, hi_ctx = g["ctx"].min(), g["ctx"].max()
        f_lo, f_hi = g[g["ctx"] == lo_ctx]["launch_overhead_fraction"], g[g["ctx"] == hi_ctx]["launch_overhead_fraction"]
        parts.append(f"launch overhead is {f_lo.min():.0%}-{f_lo.max():.0%} of the {gpu} eager step at ctx "
                     f"{int(lo_ctx):,} and {f_hi.min():.0%}-{f_hi.max():.0%} at {int(hi_ctx):,}")
    text = "; ".join(parts)
    finding_title(fig, text[:1].upper() + text[1:] if parts else "Where a batch-1 decode step goes",
                  "where a batch-1 eager decode step goes, cell by cell")
    fig.tight_layout()
    return fig


def r_floor_per_arm(cells: pd.DataFrame, convention: str = "W_all"):
    """R_floor against context per model (shared y axis), one line per GPU and arm (colour: arm)."""
    style()
    model_keys = list(dict.fromkeys(cells["model"]))
    n = max(1, len(model_keys))
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n + 1.6, 3.4), squeeze=False, sharey=True)
    col = f"r_floor_{convention}"
    for ax, model in zip(axes[0], model_keys):
        sub = cells[cells["model"] == model].dropna(subset=[col])
        for (gpu, arm), group in sub.groupby(["gpu", "arm"]):
            group = group.sort_values("ctx")
            ax.plot(group["ctx"], group[col], label=f"{gpu} {arm}", color=arm_color(arm), **ARM_STYLE.get(arm, {}))
        context_axis(ax, sub["ctx"])
        ax.set_title(model)
        ax.set_ylim(0, 1.05)
        ax.axhline(1.0, color="grey", linewidth=0.8)
    axes[0][0].set_ylabel(f"R_floor ({convention}, datasheet)")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ok = cells.dropna(subset=[col])
    parts = [f"{arm} {_span(g[col])}" for arm, g in ok.groupby("arm", sort=False)]
    finding_title(fig, "No arm comes near its memory floor: R_floor " + ", ".join(parts) if parts else "R_floor per arm",
                  "R_floor per arm against context")
    fig.tight_layout()
    return fig


BACKEND_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                  "#bcbd22", "#17becf", "#000000", "#aec7e8")
"""As many colours as there are backends (attention.BACKENDS): no two backends share one."""


def backend_color(attn: str) -> str:
    """One colour per attention backend (attention.BACKENDS order), the same in every panel and figure."""
    from decodegap.harness.attention import BACKENDS

    keys = list(BACKENDS)
    return BACKEND_COLORS[keys.index(attn) % len(BACKEND_COLORS)] if attn in keys else "#444444"


def attention_us_vs_context(summ: pd.DataFrame, model: str, published: pd.DataFrame | None = None):
    """Microseconds per decode-attention call against context per backend: host-inclusive (left) and GPU-only
    (right) on one shared log axis, so the gap between the panels is the launch sequence's cost. `published`: the
    paper's per-layer rows (attn, gpu, value in microseconds), drawn as stars in the host-inclusive panel at the
    smallest context (the paper states neither model nor context), in their backend's colour."""
    style()
    sub = summ[(summ["model"] == model) & (summ["status"] == "ok")]
    if sub.empty:
        return _empty(f"No attention rows for {model}.")
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.8), sharey=True)
    gpus = list(dict.fromkeys(sub["gpu"]))
    dashes = dict(zip(gpus, ["-", "--", ":", "-."]))
    for ax, col, title in ((axes[0], "host_us", "host-inclusive (eager loop)"), (axes[1], "gpu_us", "GPU-only (graph replay)")):
        for (gpu, attn), group in sub.dropna(subset=[col]).groupby(["gpu", "attn"]):
            group = group.sort_values("ctx")
            ax.plot(group["ctx"], group[col], marker="o", markersize=4, color=backend_color(attn),
                    linestyle=dashes.get(gpu, "-"), label=f"{gpu} {attn}")
        context_axis(ax, sub["ctx"])
        ax.set_yscale("log")
        ax.set_title(title)
    if published is not None and not published.empty:
        from decodegap.analysis.attention_backends import PUBLISHED_TO_OURS

        x0 = sub["ctx"].min()
        for r in published.itertuples():
            axes[0].scatter([x0], [r.value], marker="*", s=90, color=backend_color(PUBLISHED_TO_OURS.get(r.attn, [r.attn])[0]),
                            edgecolors="black", linewidths=0.6, zorder=5, label=f"{r.gpu} {r.attn}, {PUBLISHED_LABEL} (ctx not stated)")
    axes[0].set_ylabel(f"{MICRO} per decode-attention call\n({model} shape, log scale)")
    handles, labels = axes[0].get_legend_handles_labels()
    axes[1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    first = sub[sub["ctx"] == sub["ctx"].min()]
    ratio = first["host_us"] / first["gpu_us"]
    finding = (f"At ctx {int(first['ctx'].iloc[0]):,} one call costs a median {ratio.median():.1f}x its GPU time once "
               "the host is counted: the launch sequence binds" if ratio.notna().any() else "Decode attention per backend")
    finding_title(fig, finding, f"every backend that ran, {model} shape")
    fig.tight_layout()
    return fig
