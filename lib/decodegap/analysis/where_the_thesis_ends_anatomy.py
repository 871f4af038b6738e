"""Notebook 07, what its steps are made of, beside the rules' fits (analysis.where_the_thesis_ends): descriptive
tables read after the rows were seen, so they carry no verdict.

- `copy_shares`: per profiled step (breakdown.csv, one step's kernels with their GPU time), the share of its GPU time
  in PyTorch's copy kernel (`direct_copy_kernel`). In HF's step and the lean step on SDPA under a mask, K and V are
  expanded to every query head over the whole cache before the attention (repeat_kv): a copy whose bytes grow with
  batch x cache length x query heads, so past batch 1 it, not the launches or the weights, sets the step.
- `axis_fits`: the two-term model t = t_floor / a + n_kernels x c fitted on one axis at a time (the size axis at
  batch 1; the batch axis of one model), n_kernels the kernels one step launches (kernels.csv: a graph replays the
  eager step's kernels, lean_graph the lean step's). The rules' fit (W2a) pools both axes with n_layers and was fixed
  before the rows; this one was chosen after seeing that fit fail, and says where the two-term form holds."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from decodegap import selection

COPY_KERNEL = "direct_copy_kernel"
"""The name PyTorch's elementwise copy kernel carries in a profile (repeat_kv's expand + reshape lands there)."""
PROFILED_OF = {"eager": "eager", "graph": "eager", "lean": "lean", "lean_graph": "lean",
               "lean_attn_graph": "lean_attn_graph"}
"""Whose kernel count an arm's step has: a graph replays the eager step's kernels, lean_graph the lean step's;
lean_attn_graph (the lean levers' step at every batch) is profiled as itself."""
COPY_COLUMNS = ["gpu", "model", "ctx", "arm", "batch", "kernels", "gpu_ms", "copy_ms", "copy_share"]
FIT_COLUMNS = ["gpu", "axis", "arm", "points", "a", "c_us", "rms_rel_residual", "max_rel_residual"]


def copy_shares(breakdown: pd.DataFrame) -> pd.DataFrame:
    """Per profiled bf16 step (gpu, model, ctx, arm, batch; its latest profile, selection.latest_profiles; notebook 07
    reads bf16 steps only), its kernels, GPU time (ms), the
    time in COPY_KERNEL (ms) and that share."""
    latest = selection.latest_profiles(breakdown)
    ok = latest[(latest["status"] == "ok") & (latest["quant"] == "bf16")] if not latest.empty else latest
    if ok.empty:
        return pd.DataFrame(columns=COPY_COLUMNS)
    key = ["gpu", "model", "ctx", "arm", "batch"]
    is_copy = ok["kernel"].astype(str).str.contains(COPY_KERNEL, regex=False)
    out = (ok.assign(copy_us=ok["gpu_us"].where(is_copy, 0.0))
           .groupby(key).agg(kernels=("kernel", "size"), gpu_us=("gpu_us", "sum"), copy_us=("copy_us", "sum"))
           .reset_index())
    out["gpu_ms"], out["copy_ms"] = out["gpu_us"] / 1e3, out["copy_us"] / 1e3
    out["copy_share"] = out["copy_ms"] / out["gpu_ms"]
    return out[COPY_COLUMNS].sort_values(key, ignore_index=True)


def kernel_counts(kernels: pd.DataFrame) -> pd.DataFrame:
    """(gpu, model, ctx, arm, batch) -> the kernels one bf16 step launches (kernels.csv, `ok`, the latest profile of each:
    selection.latest_profiles)."""
    latest = selection.latest_profiles(kernels)
    ok = latest[(latest["status"] == "ok") & (latest["quant"] == "bf16")] if not latest.empty else latest
    if ok.empty:
        return pd.DataFrame(columns=["gpu", "model", "ctx", "arm", "batch", "n_kernels"])
    key = ["gpu", "model", "ctx", "arm", "batch"]
    return ok.groupby(key)["kernels"].last().rename("n_kernels").reset_index()


def fit_two_terms(t_floor_ms, n_kernels, t_ms) -> dict:
    """Least squares of t = t_floor / a + n_kernels x c without an intercept: a (dimensionless), c (us), and the
    relative residuals' rms and largest magnitude. Two points at least; NaN below."""
    x = np.column_stack([np.asarray(t_floor_ms, float), np.asarray(n_kernels, float)])
    y = np.asarray(t_ms, float)
    if len(y) < 2:
        return dict(points=len(y), a=np.nan, c_us=np.nan, rms_rel_residual=np.nan, max_rel_residual=np.nan)
    (inv_a, c_ms), *_ = np.linalg.lstsq(x, y, rcond=None)
    rel = (x @ np.array([inv_a, c_ms]) - y) / y
    return dict(points=len(y), a=1.0 / inv_a if inv_a else np.inf, c_us=c_ms * 1e3,
                rms_rel_residual=float(np.sqrt(np.mean(rel ** 2))), max_rel_residual=float(np.abs(rel).max()))


def axis_fits(scope: pd.DataFrame, counts: pd.DataFrame, size_models, batch_model: str) -> pd.DataFrame:
    """fit_two_terms per GPU, axis and arm (PROFILED_OF's graphed arms) on notebook 07's cells (`scope`: its
    sweeps' cell table) joined to their kernel counts: the size axis (`size_models`, batch 1, every context) and the
    batch axis (`batch_model`, every batch). Cells without a count are left out."""
    if scope.empty or counts.empty:
        return pd.DataFrame(columns=FIT_COLUMNS)
    cells = scope[scope["arm"].isin(["graph", "lean_graph", "lean_attn_graph"])].assign(
        profiled=lambda d: d["arm"].map(PROFILED_OF))
    cells = cells.merge(counts.rename(columns={"arm": "profiled"}), on=["gpu", "model", "ctx", "profiled", "batch"])
    axes = {"size": cells[cells["model"].isin(size_models) & (cells["batch"] == 1)],
            "batch": cells[cells["model"] == batch_model]}
    out = []
    for axis, sel in axes.items():
        for (gpu, arm), g in sel.groupby(["gpu", "arm"]):
            out.append(dict(gpu=gpu, axis=axis, arm=arm,
                            **fit_two_terms(g["t_floor_bw_ms"], g["n_kernels"], g["t_obs_ms"])))
    return pd.DataFrame(out, columns=FIT_COLUMNS)


def findings(copies: pd.DataFrame, fits: pd.DataFrame, configs: Mapping | None = None) -> list[str]:
    """The sentences of both tables: per profiled model and arm the copy share from its smallest to its largest
    batch; per fit its two numbers and residuals, said to be descriptive."""
    out = []
    for (gpu, model, ctx, arm), g in copies.groupby(["gpu", "model", "ctx", "arm"]):
        if g["batch"].nunique() < 2:
            continue
        lo, hi = g.loc[g["batch"].idxmin()], g.loc[g["batch"].idxmax()]
        out.append(f"{gpu} {model} ctx {ctx}, {arm}'s profiled step: the copy kernel ({COPY_KERNEL}, K and V expanded "
                   f"to every query head) takes {lo.copy_share:.0%} of its GPU time at batch {lo.batch} "
                   f"({lo.copy_ms:.2f} of {lo.gpu_ms:.2f} ms) and {hi.copy_share:.0%} at batch {hi.batch} "
                   f"({hi.copy_ms:.2f} of {hi.gpu_ms:.2f} ms).")
    for r in fits.itertuples():
        if not r.points >= 2:
            continue
        if r.points <= 2:  # as many cells as terms: any two cells fit exactly, so nothing is described
            out.append(f"{r.gpu} {r.arm}, the {r.axis} axis alone: {r.points} cells with a kernel count, no more than "
                       "the fit's two terms (an exact fit whatever the cells): not reported.")
            continue
        physical = 0 < r.a <= 1 and r.c_us >= 0
        out.append(f"{r.gpu} {r.arm}, the {r.axis} axis alone (descriptive, chosen after the rows): t = t_floor / "
                   f"{r.a:.2f} + n_kernels x {r.c_us:.2f} us over {r.points} cells, rms residual "
                   f"{r.rms_rel_residual:.1%} (largest {r.max_rel_residual:.1%})"
                   + ("." if physical else ": not a physical fit (a rate past the datasheet or a negative cost per "
                      "kernel), so the two terms do not describe this axis; on the batch axis the step grows with "
                      "the copies above, which neither term holds."))
    return out
