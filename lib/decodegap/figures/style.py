"""The figures' one style, shared by every notebook's figures module (figures.roofline, figures.cuda_graphs_ab,
figures.attention_backends, figures.quantisation, figures.cost, figures.closing_the_gap,
figures.where_the_thesis_ends): one colour per arm and per
GPU, a short title that states the finding (TITLES, its numbers in the findings files), the shared axes, and `save`, which writes a deterministic PNG (no timestamp or
version metadata). Each figure function there takes DataFrames and returns a matplotlib Figure."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ARM_COLOR = {
    "eager": "#1f77b4", "hf_default": "#8c564b", "graph": "#2ca02c", "compile": "#d62728",
    "lean": "#9467bd", "lean_graph": "#17becf", "lean_compile": "#e377c2", "lean_kernels": "#bcbd22",
    "lean_kernels_graph": "#7f7f7f", "lean_attn_graph": "#ff7f0e", "lean_attn_compile": "#000080",
    "lean_fused_graph": "#8c6d31", "lean_fused_pdl_graph": "#637939", "lean_fused_pdl_norm_graph": "#843c39",
    "lean_fused_pdl_epilogues_graph": "#ad494a", "lean_fused_early_graph": "#d6616b",
    "lean_fused_early_products_graph": "#e7969c", "lean_fused_merged_graph": "#7b4173",
    "lean_fused_silu_epilogue_graph": "#3182bd", "lean_fused_all_epilogues_graph": "#31a354",
    "lean_fused_epilogue_norms_graph": "#e6550d", "lean_fused_next_token_graph": "#756bb1",
    "lean_fused_norms_next_token_graph": "#636363", "lean_fused_all_next_token_graph": "#8c2d04",
    "lean_fused_norm_scale_graph": "#54278f", "lean_fused_all_norm_scale_graph": "#a63603",
    "lean_fused_kv_together_graph": "#006d2c", "lean_fused_kv_together_merged_graph": "#08519c",
    "lean_fused_all_kv_together_graph": "#cb181d", "lean_fused_rotary_attention_graph": "#00441b",
    "lean_fused_all_rotary_attention_graph": "#67000d", "lean_fused_rotary_prefetch_graph": "#4a1486",
    "lean_fused_all_rotary_prefetch_graph": "#7f2704", "lean_fused_l2_prefetch_graph": "#3f007d",
    "lean_fused_all_l2_prefetch_graph": "#525252",
}
"""One colour per arm, the same in every figure (arms.ARMS)."""
ARM_STYLE = {
    "eager": dict(marker="o", linestyle="-"),
    "hf_default": dict(marker="v", linestyle=":"),
    "graph": dict(marker="s", linestyle="--"),
    "compile": dict(marker="D", linestyle="-."),
}
GPU_COLOR = {"l4": "#b35806", "l40s": "#e08214", "a100-80gb": "#8073ac", "h100-sxm": "#542788", "h200": "#1b7837",
             "b200": "#5aae61"}
"""One colour per GPU, the same in every figure that tells GPUs apart by colour."""
MODEL_MARKER = {"qwen2.5-7b": "o", "mistral-7b-v0.3": "s", "llama-3.1-8b": "D", "qwen2.5-0.5b": "v",
                "qwen2.5-1.5b": "^", "qwen2.5-3b": "<", "qwen2.5-14b": ">", "qwen2.5-32b": "P"}
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


def apply() -> None:
    """The rcParams every figure is drawn with (each figure function calls it first)."""
    plt.rcParams.update({
        "figure.dpi": 110, "savefig.dpi": 110, "font.size": 9, "axes.grid": True, "grid.alpha": 0.3,
        "axes.spines.top": False, "axes.spines.right": False, "legend.fontsize": 8, "legend.frameon": False,
        "axes.titlesize": 9, "figure.titlesize": 10,
    })


TITLES = {
    "01_r_floor_vs_bandwidth.png": "R_floor falls as peak bandwidth rises",
    "01_step_time_vs_context.png": "The decode step stays far above its memory floor at every context",
    "02_speedup_ci.png": "CUDA graphs speed up the batch-1 decode step",
    "02_decomposition.png": "Where a batch-1 decode step goes: floor, GPU-side excess, launch overhead",
    "02_r_floor_per_arm.png": "No arm comes near its memory floor",
    "03_attention_us_vs_context.png": "Decode attention: the launch sequence, not the kernel, binds one call",
    "04_quant_ms_vs_floor.png": "Quantisation paths against their own memory floors",
    "04_quant_grid.png": "Each quantisation path over the grid: a faster GPU's gain against its bandwidth ratio",
    "05_cost_ladder.png": "The cost ladder: $ per million tokens against peak bandwidth",
    "06_ladder.png": "The ladder of levers towards the memory floor",
    "06_products.png": "Each matrix product pays a fixed cost beyond streaming its weights",
    "06_int4_products.png": "The int4 products stand further above their weight floor than the bf16 ones",
    "07_r_floor_vs_t_floor.png": "R_floor against the bandwidth floor, over sizes, batches and GPUs",
    "07_step_model_residuals.png": "The two-term step model: floor at an efficiency plus a fixed cost",
}
"""Each figure's title: a short finding without numbers (the numbers are in the generated findings files and the
README gallery's line, which starts with the same title: figures.gallery), the same wherever the figure is drawn."""


def title(fig, name: str, subtitle: str = "") -> None:
    """The figure `name`'s title (TITLES), with what is plotted below it."""
    finding_title(fig, TITLES[name], subtitle)


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


def value_range(values, fmt=".2f") -> str:
    """The range of `values` as "lo-hi" text (one value where both print alike), for a finding title."""
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


CHECK_FIGURES = "DECODEGAP_CHECK_FIGURES"
"""Environment variable: a folder where `save` writes, beside drawing each figure, `<file name>.json` with the
problems the renderer finds in it (figures.checks.problems, and a title other than TITLES'): how tests/test_figures.py
checks the figures of the very notebook runs that replay them."""


def save(fig, path: Path) -> None:
    """Write `fig` as a deterministic PNG (the same data and library versions give the same bytes) and, inside a
    notebook, show that very PNG inline. Returns nothing, so a cell ending in `save(...)` shows the figure only.
    With the environment variable CHECK_FIGURES set, the figure's problems are written there first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if os.environ.get(CHECK_FIGURES):
        _write_problems(fig, path.name, Path(os.environ[CHECK_FIGURES]))
    fig.savefig(path, metadata={"Software": None}, bbox_inches="tight")
    plt.close(fig)
    if _in_kernel():
        from IPython.display import Image, display

        display(Image(data=path.read_bytes(), format="png"))


def _write_problems(fig, name: str, folder: Path) -> None:
    """figures.checks.problems of `fig`, and its title against TITLES[name], as folder/<name>.json."""
    import json

    from decodegap.figures import checks

    title = fig._suptitle.get_text().splitlines()[0] if fig._suptitle is not None else ""
    found = checks.problems(fig) + ([] if title == TITLES.get(name) else [f"title {title!r}"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(found))


def empty(message: str):
    """A figure that says, in `message`, why there is nothing to draw."""
    fig, ax = plt.subplots(figsize=(5, 1.5))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center")
    return fig
