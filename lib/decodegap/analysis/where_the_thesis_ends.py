"""07: where the thesis ends. Each cell (model size, batch B, context, arm) against its floors, the two-term model of
the step fitted per GPU and arm, the batches and sizes where the fixed cost stops mattering, and the paper's
published points under the same model.

Floors of a step of B sequences (decodegap.accounting): the bandwidth floor (W_all + B x K(ctx)) / datasheet
bandwidth, the compute floor 2 x matmul parameters x B / datasheet dense bf16 TFLOP/s, t_floor the larger of the
two (the roofline's floor). R_floor stays the paper's: the bandwidth floor over the step.

The model: t = t_floor / a + c0 + n_layers x c1 per GPU and arm (claims rule W2a). Two terms: the bytes (or FLOPs)
at an efficiency a, and a fixed per-step cost F = c0 + n_layers x c1 that does not grow with bytes. Kernel counts
are not in every row, and a decode step launches the same kernels in every layer, so the layer count stands in for
n_kernels (c1 a layer's kernels' fixed cost, c0 what runs once per step: embedding, head, sampling, the host loop).
Fitted by least squares on relative residuals (each cell weighted by 1 / t), in-sample.

Every function takes frames and returns frames; `replay` builds every table of notebook 07 from the rows, the GPU
specs, the published numbers and the configs that experiments.where_the_thesis_ends reads. A table without rows says
"not measured" (NOT_MEASURED), never a number it does not have.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from decodegap import accounting, published, selection, sessions, stats

NOT_MEASURED = "not measured"
CELL = ["gpu", "model", "ctx", "batch", "arm", "attn", "quant"]
FIT_KEY = ["gpu", "arm", "attn"]
B_LARGE = 8
"""W1: the largest batch measured for both arms must be at least this for a cell to test the launch share."""
REL_TOL, EXPLAINED, MIN_POINTS = 0.10, 0.9, 6
"""W2a: a cell is explained within REL_TOL of the model beyond its noise; a fit holds with at least EXPLAINED of its
cells explained, fails with more than 1 - EXPLAINED unexplained; a fit needs MIN_POINTS cells."""
A_MAX = 1.0
"""W2b: the largest efficiency on the floor that explains a published point (a step faster than its floor is none)."""
WITHIN = 0.10
"""A step "within 10 % of its bandwidth floor": t <= (1 + WITHIN) x bandwidth floor."""
FIXED_HALF = 0.5
"""The fixed cost "more than half the step": F / t > FIXED_HALF."""


def with_batch(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with an int `batch` column: rows written before the column existed are batch 1."""
    if "batch" in rows:
        return rows.assign(batch=rows["batch"].fillna(1).astype(int))
    return rows.assign(batch=pd.Series(1, index=rows.index, dtype=int))


def newest_run_per_cell(rows: pd.DataFrame) -> pd.DataFrame:
    """Per cell (CELL), the rows of its newest run only (run ids begin with their UTC start): never two runs pooled."""
    rows = with_batch(rows)
    if rows.empty:
        return rows
    newest = rows.groupby(CELL, dropna=False)["run_id"].transform("max")
    return rows[rows["run_id"] == newest]


def newest_cells(rows: pd.DataFrame, read: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per cell (CELL), the rows `cells` reads: its newest run's (newest_run_per_cell: never two runs pooled), or,
    where that run is one of notebook 07's own sweeps (its band of sessions), the sessions its rules read of the cell
    (scope_rows: a sweep cut and resumed keeps the sessions of both runs, as `scope` does). Until 2026-12-06 every cell
    was its newest run's alone, so a resumed sweep's cell counted only the sessions of its last run. `read`:
    scope_rows(rows), where computed already."""
    newest = newest_run_per_cell(rows)
    if newest.empty:
        return newest
    own = sessions.in_band(newest["session"], sessions.SCOPE)
    if not own.any():
        return newest
    read = scope_rows(rows) if read is None else read
    keys = pd.MultiIndex.from_frame(newest.loc[own, CELL].drop_duplicates().astype(str))
    of_own = pd.MultiIndex.from_frame(read[CELL].astype(str)).isin(keys)
    return pd.concat([newest[~own], read[of_own]], ignore_index=True)


# ------------------------------------------------------------------------------------------------- cells
def gpu_peaks(specs: pd.DataFrame) -> pd.DataFrame:
    """gpu, bandwidth_gbps, bf16_tflops_dense (NaN where the registry lacks it) of every GPU of the registry."""
    out = specs[["gpu", "bandwidth_gbps"]].copy()
    out["bf16_tflops_dense"] = specs["bf16_tflops_dense"] if "bf16_tflops_dense" in specs else np.nan
    return out


def floors(config: Mapping, ctx: int, batch: int, bandwidth_gbps: float, tflops: float) -> dict:
    """The floors of one step (ms): bandwidth (W_all + B x K), compute (NaN without `tflops`), their max."""
    bw = accounting.t_floor_ms(accounting.batch_step_bytes(config, ctx, batch), bandwidth_gbps)
    comp = accounting.compute_floor_ms(config, batch, tflops) if pd.notna(tflops) else np.nan
    return dict(bytes_W_all=accounting.batch_step_bytes(config, ctx, batch), t_floor_bw_ms=bw,
                t_floor_compute_ms=comp, t_floor_ms=np.nanmax([bw, comp]))


def cell_table(rows: pd.DataFrame, specs: pd.DataFrame, configs: Mapping[str, Mapping]) -> pd.DataFrame:
    """One row per timed cell (CELL) of `rows` (checked decode rows, status ok; batch read as 1 where absent):
    t_obs_ms (median over sessions of each session's median step of all B sequences), its session range
    (t_min_ms, t_max_ms, noise = max / min - 1), sessions, n_layers, params, the floors (`floors`), r_floor
    (bandwidth floor / t_obs), tokens_per_s_per_stream and tokens_per_s_aggregate."""
    rows = with_batch(rows)
    ok = rows[rows["status"] == "ok"]
    cols = CELL + ["t_obs_ms", "t_min_ms", "t_max_ms", "noise", "sessions", "n_layers", "params", "bytes_W_all",
                   "t_floor_bw_ms", "t_floor_compute_ms", "t_floor_ms", "r_floor", "tokens_per_s_per_stream",
                   "tokens_per_s_aggregate"]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    missing = sorted(set(ok["model"]) - set(configs))
    if missing:
        raise KeyError(f"no config for model(s) {missing}: add data/models/<key>.json (the HF config.json)")
    per_session = stats.session_medians(ok, CELL)
    table = (per_session.groupby(CELL).agg(t_obs_ms=("step_ms", "median"), t_min_ms=("step_ms", "min"),
                                           t_max_ms=("step_ms", "max"), sessions=("session", "nunique"))
             .reset_index())
    table["noise"] = table["t_max_ms"] / table["t_min_ms"] - 1
    peaks = gpu_peaks(specs).set_index("gpu")
    unknown = sorted(set(table["gpu"]) - set(peaks.index))
    if unknown:
        raise KeyError(f"GPU(s) {unknown} not in data/specs/gpus.csv: add a row with its datasheet bandwidth")
    extra = []
    for r in table.itertuples():
        cfg, p = configs[r.model], peaks.loc[r.gpu]
        extra.append(dict(n_layers=int(cfg["num_hidden_layers"]), params=accounting.param_count(cfg).total,
                          **floors(cfg, r.ctx, r.batch, p["bandwidth_gbps"], p["bf16_tflops_dense"])))
    table = pd.concat([table, pd.DataFrame(extra, index=table.index)], axis=1)
    table["r_floor"] = table["t_floor_bw_ms"] / table["t_obs_ms"]
    table["tokens_per_s_per_stream"] = accounting.tokens_per_s_per_stream(table["t_obs_ms"])
    table["tokens_per_s_aggregate"] = [accounting.tokens_per_s_aggregate(t, b)
                                       for t, b in zip(table["t_obs_ms"], table["batch"])]
    return table[cols].sort_values(CELL).reset_index(drop=True)



UNTIMED_COLUMNS = CELL + ["status", "sessions", "reason"]


def untimed_cells(scope: pd.DataFrame) -> pd.DataFrame:
    """Per cell (CELL) of `scope` (notebook 07's own rows: scope_rows) that its sweep tried and could not time (no
    row of status ok): the status its rows record (oom, unavailable, error, skipped), the sessions that recorded it
    and the first line of the reason its newest run recorded (a later run may say more: the lean decoder's preflight
    names the memory its copies need where an earlier run had only CUDA's message). Such a cell is named here, never
    dropped: cell_table keeps only timed cells."""
    if scope.empty:
        return pd.DataFrame(columns=UNTIMED_COLUMNS)
    timed = scope[scope["status"] == "ok"].groupby(CELL, dropna=False).size()  # scope_rows gave every row a batch
    tried = scope[~scope["status"].isin(["ok", "warmup"])]
    out = []
    for key, g in tried.groupby(CELL, dropna=False):
        if key in timed.index:
            continue
        newest_first = g.sort_values("run_id", ascending=False, kind="stable")["reason"]
        reason = next((str(r).splitlines()[0] for r in newest_first if isinstance(r, str) and r.strip()), "")
        out.append(dict(zip(CELL, key), status=", ".join(sorted(set(g["status"]))),
                        sessions=int(g["session"].nunique()), reason=reason))
    return pd.DataFrame(out, columns=UNTIMED_COLUMNS).sort_values(CELL).reset_index(drop=True)


def untimed_findings(untimed: pd.DataFrame) -> list[str]:
    """One sentence per GPU, status and model of `untimed` (untimed_cells): its arms, contexts and batches (each
    cell on its own where they are not every combination of the three) and the reason the sweep recorded for the
    first of them, to its third sentence."""
    out = []
    for (gpu, status, model), g in untimed.groupby(["gpu", "status", "model"]) if not untimed.empty else []:
        arms_, ctxs, batches = (sorted(set(g[c])) for c in ("arm", "ctx", "batch"))
        if len(g) == len(arms_) * len(ctxs) * len(batches):
            where = (f"{', '.join(arms_)} at ctx {', '.join(map(str, ctxs))}, batch {', '.join(map(str, batches))}")
        else:
            where = "; ".join(f"{r.arm} at ctx {r.ctx}, batch {r.batch}" for r in g.itertuples())
        why = ". ".join(g["reason"].iloc[0].split(". ")[:3]).rstrip(".")
        out.append(f"{gpu} {model}: {len(g)} cell(s) of notebook 07's sweeps not timed ({status}): {where}"
                   + (f"; the sweep recorded: {why}." if why else "."))
    return out

# --------------------------------------------------------------------------------------------- the model
FIT_COLUMNS = FIT_KEY + ["points", "layer_counts", "a", "c0_ms", "c1_ms", "rms_rel_residual", "fitted", "reason"]


def fit_one(t_floor_ms, n_layers, t_ms) -> dict:
    """t = t_floor / a + c0 + n_layers x c1 by least squares on relative residuals (rows divided by t). With one
    layer count c1 is 0 (c0 alone is the fixed cost); fewer than two distinct t_floor: not fitted."""
    tf, L, t = (np.asarray(x, dtype=float) for x in (t_floor_ms, n_layers, t_ms))
    n_layers_distinct = len(np.unique(L))
    if len(np.unique(tf)) < 2 or len(t) < (3 if n_layers_distinct > 1 else 2):
        return dict(a=np.nan, c0_ms=np.nan, c1_ms=np.nan, rms_rel_residual=np.nan, fitted=False,
                    reason="fewer than two distinct floors or too few cells to fit")
    columns = [tf, np.ones_like(tf)] + ([L] if n_layers_distinct > 1 else [])
    X = np.column_stack(columns) / t[:, None]
    coef, *_ = np.linalg.lstsq(X, np.ones_like(t), rcond=None)
    u, c0 = coef[0], coef[1]
    c1 = coef[2] if n_layers_distinct > 1 else 0.0
    model = u * tf + c0 + c1 * L
    return dict(a=1 / u if u != 0 else np.inf, c0_ms=c0, c1_ms=c1,
                rms_rel_residual=float(np.sqrt(np.mean((t / model - 1) ** 2))), fitted=True, reason="")


def fit(cells: pd.DataFrame, min_points: int = 1) -> pd.DataFrame:
    """FIT_COLUMNS per (gpu, arm, attn) of `cells` (cell_table); an arm with fewer than `min_points` cells is not
    fitted (its reason says so)."""
    out = []
    for key, g in cells.groupby(FIT_KEY) if not cells.empty else []:
        few = dict(a=np.nan, c0_ms=np.nan, c1_ms=np.nan, rms_rel_residual=np.nan, fitted=False,
                   reason=f"{len(g)} cell(s), fewer than {min_points}")
        out.append(dict(zip(FIT_KEY, key), points=len(g), layer_counts=g["n_layers"].nunique(),
                        **(few if len(g) < min_points else fit_one(g["t_floor_ms"], g["n_layers"], g["t_obs_ms"]))))
    return pd.DataFrame(out, columns=FIT_COLUMNS)


def residuals(cells: pd.DataFrame, fits: pd.DataFrame, rel_tol: float) -> pd.DataFrame:
    """`cells` with their fit's t_model_ms, fixed_ms (F), residual r = t / t_model - 1 and `explained` (|r| + noise
    <= rel_tol), `unexplained` (|r| - noise > rel_tol); cells of an unfitted arm get NaN and neither."""
    if cells.empty:
        return cells.assign(t_model_ms=[], fixed_ms=[], residual=[], explained=[], unexplained=[])
    m = cells.merge(fits[FIT_KEY + ["a", "c0_ms", "c1_ms", "fitted"]], on=FIT_KEY, how="left")
    m["fixed_ms"] = m["c0_ms"] + m["n_layers"] * m["c1_ms"]
    m["t_model_ms"] = m["t_floor_ms"] / m["a"] + m["fixed_ms"]
    m["residual"] = m["t_obs_ms"] / m["t_model_ms"] - 1
    ok = m["fitted"].fillna(False).astype(bool)
    m["explained"] = ok & (m["residual"].abs() + m["noise"] <= rel_tol)
    m["unexplained"] = ok & (m["residual"].abs() - m["noise"] > rel_tol)
    return m.drop(columns=["a", "c0_ms", "c1_ms", "fitted"])


def fit_verdicts(resid: pd.DataFrame, fits: pd.DataFrame, explained: float, min_points: int) -> pd.DataFrame:
    """Per fit: cells, explained and unexplained beyond noise (counts and shares), whether it is testable (fitted,
    >= min_points cells) and its outcome: holds (explained share >= `explained`), fails (unexplained share >
    1 - `explained`), else inconclusive."""
    out = []
    for f in fits.itertuples():
        g = resid[(resid["gpu"] == f.gpu) & (resid["arm"] == f.arm) & (resid["attn"] == f.attn)]
        n, e, u = len(g), int(g["explained"].sum()), int(g["unexplained"].sum())
        testable = bool(f.fitted) and n >= min_points
        outcome = ("not testable" if not testable else "holds" if e / n >= explained
                   else "fails" if u / n > 1 - explained else "inconclusive")
        out.append(dict(gpu=f.gpu, arm=f.arm, attn=f.attn, cells=n, explained=e, unexplained=u,
                        explained_share=e / n if n else np.nan, unexplained_share=u / n if n else np.nan,
                        testable=testable, outcome=outcome))
    return pd.DataFrame(out, columns=["gpu", "arm", "attn", "cells", "explained", "unexplained", "explained_share",
                                      "unexplained_share", "testable", "outcome"])


# ---------------------------------------------------------------------------------- where the thesis ends
def batch_within_floor(cells: pd.DataFrame, within: float = WITHIN) -> pd.DataFrame:
    """Per (gpu, model, ctx, arm, attn) with more than one batch measured: the smallest batch whose step is within
    `within` of its bandwidth floor (t_obs <= (1 + within) x t_floor_bw), the largest batch measured and the best
    R_floor; NOT_MEASURED where no such cell exists, 'not reached' where none of its batches is within."""
    cols = ["gpu", "model", "ctx", "arm", "attn", "batches", "largest_batch", "best_r_floor", "batch_within"]
    out = []
    for key, g in cells.groupby(["gpu", "model", "ctx", "arm", "attn"]) if not cells.empty else []:
        if g["batch"].nunique() < 2:
            continue
        g = g.sort_values("batch")
        hit = g[g["t_obs_ms"] <= (1 + within) * g["t_floor_bw_ms"]]
        out.append(dict(zip(cols[:5], key), batches=",".join(str(b) for b in g["batch"]),
                        largest_batch=int(g["batch"].max()), best_r_floor=float(g["r_floor"].max()),
                        batch_within=str(int(hit["batch"].iloc[0])) if not hit.empty
                        else f"not reached up to {int(g['batch'].max())}"))
    return pd.DataFrame(out, columns=cols) if out else pd.DataFrame([dict.fromkeys(cols, NOT_MEASURED)])


def compute_crossover_batch(config: Mapping, ctx: int, bandwidth_gbps: float, tflops: float) -> float:
    """The batch B* where the compute floor passes the bandwidth floor: 2 P B / F = (W + B K) / BW, i.e.
    B* = (W / BW) / (2 P / F - K / BW) (P matmul parameters, F FLOP/s, BW bytes/s); inf when the KV bytes of a
    sequence take longer than its FLOPs (the compute floor never passes), NaN without `tflops`."""
    if pd.isna(tflops):
        return np.nan
    w = accounting.weight_bytes(config) / (bandwidth_gbps * 1e9)
    per_seq = 2 * accounting.matmul_params(config) / (tflops * 1e12) - accounting.kv_bytes(config, ctx) / (
        bandwidth_gbps * 1e9)
    return w / per_seq if per_seq > 0 else np.inf


def longest_crossing_context(config: Mapping, bandwidth_gbps: float, tflops: float) -> float:
    """The context below which the compute floor can pass the bandwidth floor at some batch: where one sequence's
    FLOPs take as long as its KV bytes, ctx* = (2 P / F) / (K per token / BW). At or above it a step of any batch
    stays under the bandwidth floor's roof (NaN without `tflops`)."""
    if pd.isna(tflops):
        return np.nan
    return (2 * accounting.matmul_params(config) / (tflops * 1e12)) / (
        accounting.kv_bytes(config, 1) / (bandwidth_gbps * 1e9))


def crossover_table(configs: Mapping[str, Mapping], specs: pd.DataFrame, contexts) -> pd.DataFrame:
    """Per GPU of the registry, model and context: B* (compute_crossover_batch) and ctx* (longest_crossing_context),
    the same for every arm (the floors do not depend on how the step runs). Arithmetic on the configs and
    datasheets, no rows."""
    out = []
    for p in gpu_peaks(specs).itertuples():
        for m, cfg in configs.items():
            ctx_star = longest_crossing_context(cfg, p.bandwidth_gbps, p.bf16_tflops_dense)
            for ctx in contexts:
                out.append(dict(gpu=p.gpu, model=m, ctx=int(ctx),
                                crossover_batch=compute_crossover_batch(cfg, ctx, p.bandwidth_gbps,
                                                                        p.bf16_tflops_dense),
                                longest_crossing_ctx=ctx_star))
    return pd.DataFrame(out, columns=["gpu", "model", "ctx", "crossover_batch", "longest_crossing_ctx"])


def first_batch_past(crossover: float, batches) -> str:
    """The first measured batch at or above B* ('none measured' above it, 'never' when B* is inf)."""
    if np.isinf(crossover):
        return "never"
    above = sorted(b for b in batches if b >= crossover)
    return str(above[0]) if above else "none measured"


def fixed_share_by_size(resid: pd.DataFrame) -> pd.DataFrame:
    """Per (gpu, arm, attn, ctx) at batch 1 over the model sizes measured: each size's fixed share F / t_obs (F of
    its arm's fit) and the size below which F is more than FIXED_HALF of the step: the largest size above half
    below the smallest at or below it ('all above' / 'none above' when no size changes side); NOT_MEASURED with
    fewer than two sizes."""
    cols = ["gpu", "arm", "attn", "ctx", "sizes", "fixed_shares", "below_size"]
    out = []
    one = resid[(resid["batch"] == 1) & resid["fixed_ms"].notna()] if not resid.empty else resid
    for key, g in one.groupby(["gpu", "arm", "attn", "ctx"]) if not one.empty else []:
        if g["model"].nunique() < 2:
            continue
        g = g.sort_values("params")
        share = g["fixed_ms"] / g["t_obs_ms"]
        above = share > FIXED_HALF
        if above.all():
            below = f"all above (up to {g['model'].iloc[-1]})"
        elif not above.any():
            below = f"none above (from {g['model'].iloc[0]})"
        else:
            first_not = int(np.argmax(~above.to_numpy()))
            below = (f"between {g['model'].iloc[first_not - 1]} and {g['model'].iloc[first_not]}" if first_not > 0
                     else f"none above (from {g['model'].iloc[0]})")
        out.append(dict(zip(cols[:4], key), sizes=",".join(g["model"]),
                        fixed_shares=",".join(f"{s:.2f}" for s in share), below_size=below))
    return pd.DataFrame(out, columns=cols) if out else pd.DataFrame([dict.fromkeys(cols, NOT_MEASURED)])


def fixed_share_by_batch(resid: pd.DataFrame, verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per (gpu, arm, attn, model, ctx) with more than one batch: the fixed share F / t_obs at each batch (F of its
    arm's fit, the same at every batch: the model has no term in B) and that fit's W2a outcome, so a share read off
    a fit that does not hold says so; NOT_MEASURED without such a cell. Descriptive: the rules judge the fit, not
    this table."""
    cols = ["gpu", "arm", "attn", "model", "ctx", "fixed_ms", "batches", "fixed_shares", "fit_outcome"]
    out = []
    have = resid[resid["fixed_ms"].notna()] if not resid.empty else resid
    outcome = ({(v.gpu, v.arm, v.attn): v.outcome for v in verdicts.itertuples()} if not verdicts.empty else {})
    for key, g in have.groupby(["gpu", "arm", "attn", "model", "ctx"]) if not have.empty else []:
        if g["batch"].nunique() < 2:
            continue
        g = g.sort_values("batch")
        out.append(dict(zip(cols[:5], key), fixed_ms=float(g["fixed_ms"].iloc[0]),
                        batches=",".join(str(b) for b in g["batch"]),
                        fixed_shares=",".join(f"{x:.2f}" for x in g["fixed_ms"] / g["t_obs_ms"]),
                        fit_outcome=outcome.get(key[:3], "not testable")))
    return pd.DataFrame(out, columns=cols) if out else pd.DataFrame([dict.fromkeys(cols, NOT_MEASURED)])


# ----------------------------------------------------------------------------------- the launch share (W1)
def launch_shares(cells: pd.DataFrame) -> pd.DataFrame:
    """Per (gpu, model, ctx, batch) with eager and graph cells: the launch tax eager - graph (ms) and its share f of
    the eager step, with its session range f_lo = 1 - max(graph) / min(eager), f_hi = 1 - min(graph) / max(eager)."""
    cols = ["gpu", "model", "ctx", "batch", "eager_ms", "graph_ms", "launch_ms", "f", "f_lo", "f_hi"]
    if cells.empty:
        return pd.DataFrame(columns=cols)
    key = ["gpu", "model", "ctx", "batch"]
    e = cells[(cells["arm"] == "eager") & (cells["attn"] == "sdpa")].set_index(key)
    g = cells[(cells["arm"] == "graph") & (cells["attn"] == "sdpa")].set_index(key)
    both = e.merge(g, left_index=True, right_index=True, suffixes=("_e", "_g"))
    out = pd.DataFrame(dict(eager_ms=both["t_obs_ms_e"], graph_ms=both["t_obs_ms_g"]))
    out["launch_ms"] = out["eager_ms"] - out["graph_ms"]
    out["f"] = out["launch_ms"] / out["eager_ms"]
    out["f_lo"] = 1 - both["t_max_ms_g"] / both["t_min_ms_e"]
    out["f_hi"] = 1 - both["t_min_ms_g"] / both["t_max_ms_e"]
    return out.reset_index()[cols]


def launch_shrinks(shares: pd.DataFrame, b_large: int) -> pd.DataFrame:
    """Per (gpu, model, ctx) with B = 1 and a largest batch B_max >= b_large: the shares at both ends and the
    outcome of claims rule W1: holds when f_hi(B_max) < f_lo(1), fails when f_lo(B_max) > f_hi(1), else
    inconclusive."""
    cols = ["gpu", "model", "ctx", "b_max", "f_1", "f_1_lo", "f_1_hi", "f_max", "f_max_lo", "f_max_hi",
            "launch_1_ms", "launch_max_ms", "outcome"]
    out = []
    for key, g in shares.groupby(["gpu", "model", "ctx"]) if not shares.empty else []:
        one, big = g[g["batch"] == 1], g[g["batch"] == g["batch"].max()]
        if one.empty or g["batch"].max() < b_large:
            continue
        o, b = one.iloc[0], big.iloc[0]
        outcome = "holds" if b.f_hi < o.f_lo else "fails" if b.f_lo > o.f_hi else "inconclusive"
        out.append(dict(zip(cols[:3], key), b_max=int(b.batch), f_1=o.f, f_1_lo=o.f_lo, f_1_hi=o.f_hi, f_max=b.f,
                        f_max_lo=b.f_lo, f_max_hi=b.f_hi, launch_1_ms=o.launch_ms, launch_max_ms=b.launch_ms,
                        outcome=outcome))
    return pd.DataFrame(out, columns=cols)


# ------------------------------------------------------------------------------------ the published points
def published_points(pub: pd.DataFrame, configs: Mapping[str, Mapping]) -> pd.DataFrame:
    """The paper's GPUs with a published eager step: gpu, model and ctx (of its R_floor row), the published
    bandwidth, eager_ms, graph_ms (the H100's published; the L4's eager / its published speed-up), graph_lo_ms /
    graph_hi_ms (eager / the speed-up CI where stated), speedup, the published r_floor, our t_floor_bw_ms (W_all +
    K(ctx) at the published bandwidth), n_layers. All from data/published/paper.csv, labelled published."""
    def one(claim, quantity, **where):
        hit = published.select(pub, claim, quantity, **where)
        return hit.iloc[0] if not hit.empty else None

    out = []
    for rf in published.select(pub, "inverted_ladder", "r_floor").itertuples():
        steps = published.select(pub, "quantisation", "step_ms", gpu=rf.gpu)
        eager = steps[(steps["arm"] == "eager") & (steps["quant"] == "bf16")]
        if eager.empty:
            continue
        e = float(eager["value"].iloc[0])
        graph = steps[steps["arm"] == "graph"]
        speed = one("cuda_graphs", "speedup", gpu=rf.gpu)
        bw = one("inverted_ladder", "bandwidth_gbps", gpu=rf.gpu)
        if bw is None or (graph.empty and speed is None):
            continue
        s = float(speed["value"]) if speed is not None else e / float(graph["value"].iloc[0])
        g = float(graph["value"].iloc[0]) if not graph.empty else e / s
        has_ci = speed is not None and pd.notna(speed["ci_low"])
        cfg = configs[rf.model]
        out.append(dict(gpu=rf.gpu, model=rf.model, ctx=int(rf.ctx), bandwidth_gbps=float(bw["value"]), eager_ms=e,
                        graph_ms=g, graph_lo_ms=e / float(speed["ci_high"]) if has_ci else g,
                        graph_hi_ms=e / float(speed["ci_low"]) if has_ci else g, speedup=s,
                        graph_source="published" if not graph.empty else "eager / published speed-up",
                        r_floor_published=float(rf.value), n_layers=int(cfg["num_hidden_layers"]),
                        t_floor_bw_ms=accounting.t_floor_ms(accounting.step_bytes(cfg, int(rf.ctx)), float(bw["value"]))))
    return pd.DataFrame(out)


def lambdas(fits: pd.DataFrame, n_layers: int) -> pd.DataFrame:
    """Per GPU of ours with fitted eager and graph arms (SDPA): F_eager, F_graph at `n_layers` and lambda = 1 -
    F_graph / F_eager, the share of the fixed cost a CUDA graph removes."""
    f = fits[fits["fitted"].astype(bool) & (fits["attn"] == "sdpa")] if not fits.empty else fits
    out = []
    for gpu, g in f.groupby("gpu") if not f.empty else []:
        arms = g.set_index("arm")
        if not {"eager", "graph"} <= set(arms.index):
            continue
        fe = float(arms.loc["eager", "c0_ms"] + n_layers * arms.loc["eager", "c1_ms"])
        fg = float(arms.loc["graph", "c0_ms"] + n_layers * arms.loc["graph", "c1_ms"])
        out.append(dict(gpu=gpu, n_layers=n_layers, fixed_eager_ms=fe, fixed_graph_ms=fg,
                        lam=1 - fg / fe if fe != 0 else np.nan))
    return pd.DataFrame(out, columns=["gpu", "n_layers", "fixed_eager_ms", "fixed_graph_ms", "lam"])


def solve_two_numbers(eager_ms: float, graph_ms: float, t_floor_ms: float, lam: float) -> tuple[float, float]:
    """(a, F) from eager = t_floor / a + F and graph = t_floor / a + (1 - lam) F: F = (eager - graph) / lam,
    a = t_floor / (eager - F) (negative or inf where F >= eager: no efficiency explains it)."""
    F = (eager_ms - graph_ms) / lam
    rest = eager_ms - F
    return (t_floor_ms / rest if rest > 0 else (-np.inf if rest < 0 else np.inf)), F


def published_fit(points: pd.DataFrame, lams: pd.DataFrame, a_max: float) -> pd.DataFrame:
    """Per published GPU and lambda of ours (`lambdas`) and each end of the graph step's band: the solved a and F
    and whether the point is explained (0 < a <= a_max and F >= 0)."""
    out = []
    for p in points.itertuples():
        for lam in lams.itertuples():
            for end, g in (("graph_lo", p.graph_lo_ms), ("graph_hi", p.graph_hi_ms)):
                a, F = solve_two_numbers(p.eager_ms, g, p.t_floor_bw_ms, lam.lam)
                out.append(dict(gpu=p.gpu, lambda_from=lam.gpu, lam=lam.lam, band_end=end, graph_ms=g, a=a,
                                fixed_ms=F, fixed_share=F / p.eager_ms, explained=bool(0 < a <= a_max and F >= 0)))
    return pd.DataFrame(out, columns=["gpu", "lambda_from", "lam", "band_end", "graph_ms", "a", "fixed_ms",
                                      "fixed_share", "explained"])


def published_outcome(solved: pd.DataFrame) -> pd.DataFrame:
    """Per published GPU: holds when every end of its band (and every lambda) is explained, fails when none is,
    else inconclusive (claims rule W2b)."""
    out = []
    for gpu, g in solved.groupby("gpu") if not solved.empty else []:
        ex = g["explained"]
        out.append(dict(gpu=gpu, outcome="holds" if ex.all() else "fails" if not ex.any() else "inconclusive",
                        a_lo=g["a"].min(), a_hi=g["a"].max(), fixed_lo_ms=g["fixed_ms"].min(),
                        fixed_hi_ms=g["fixed_ms"].max()))
    return pd.DataFrame(out, columns=["gpu", "outcome", "a_lo", "a_hi", "fixed_lo_ms", "fixed_hi_ms"])


def transferred(points: pd.DataFrame, fits: pd.DataFrame) -> pd.DataFrame:
    """Shown, not judged: each published point predicted by a fit of ours (same arm, SDPA) moved to the paper's GPU:
    t = t_floor(paper GPU) / a + F(n_layers); residual = published / predicted - 1. It tests whether a and F are
    the GPU's and the host's alone (they need not be: the paper's host is not ours)."""
    out = []
    f = fits[fits["fitted"].astype(bool) & (fits["attn"] == "sdpa")] if not fits.empty else fits
    for p in points.itertuples():
        for arm, t in (("eager", p.eager_ms), ("graph", p.graph_ms)):
            for r in f[f["arm"] == arm].itertuples():
                pred = p.t_floor_bw_ms / r.a + r.c0_ms + p.n_layers * r.c1_ms
                out.append(dict(gpu=p.gpu, arm=arm, fit_from=r.gpu, published_ms=t, predicted_ms=pred,
                                residual=t / pred - 1))
    return pd.DataFrame(out, columns=["gpu", "arm", "fit_from", "published_ms", "predicted_ms", "residual"])


# --------------------------------------------------------------------------------------------------- replay
def bf16_rows(labelled: pd.DataFrame) -> pd.DataFrame:
    """The decode rows notebook 07 reads from `labelled` (decode.csv, each timed row joined to the checks of its own
    run: checked.labelled): bf16, every arm and model, batch read as 1 where absent."""
    loaded = with_batch(labelled)
    return loaded[loaded["quant"] == "bf16"] if not loaded.empty else loaded


def scope_rows(decode_rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of notebook 07's own sweeps: its band of session numbers (sessions.SCOPE, from which
    experiments.where_the_thesis_ends.FIRST_SESSION numbers them), apart from the other notebooks' sweeps of the same
    cells, the grid's below and notebook 06's confirmations above; the rows the claims' rules read (W1, W2a, W2b:
    claims.rules SCOPE_CELLS); each cell from its newest measurement among them (selection.newest_measurement: a
    sweep measured again replaces a cell's rows whole; a sweep cut and resumed keeps the sessions of both runs)."""
    if decode_rows.empty:
        return decode_rows
    rows = with_batch(decode_rows[sessions.in_band(decode_rows["session"], sessions.SCOPE)])
    return selection.newest_measurement(rows, CELL)


def replay(decode_rows: pd.DataFrame, specs: pd.DataFrame, pub: pd.DataFrame, configs: Mapping) -> dict:
    """Notebook 07's tables from its rows `decode_rows` (bf16_rows, of every GPU or one), the GPU `specs`
    (hardware.specs_table), the published numbers `pub` and the `configs` of the rows' and the published models:
    `cells` (every model and arm, each cell from its newest run, or its newest sweep's where that is one of notebook
    07's own: newest_cells), `scope_rows` (the rows of notebook 07's own sweeps: scope_rows) and `scope` (their
    cells), `untimed` (the cells those sweeps could not time: untimed_cells), `fits`, `residuals` and
    `fit_verdicts` of the rules' cells, `within_floor`, `crossover` (every GPU of the registry, the configs' models,
    the contexts measured), `fixed_by_size`, `fixed_by_batch`, `launch` (shares) and `launch_shrinks`, `published`
    points, `lambdas`, `published_fit`, `published_outcome`, `transferred`. The thresholds are this module's, which
    the claims rules W1, W2a and W2b reference."""
    in_scope = scope_rows(decode_rows)
    cells = cell_table(newest_cells(decode_rows, in_scope), specs, configs)
    scope = cell_table(in_scope, specs, configs)
    fits = fit(scope, MIN_POINTS)
    resid = residuals(scope, fits, REL_TOL)
    points = published_points(pub, configs)
    lams = lambdas(fits, int(points["n_layers"].iloc[0])) if not points.empty else lambdas(fits, 0)
    solved = published_fit(points, lams, A_MAX)
    shares = launch_shares(scope)
    contexts = sorted(set(cells["ctx"])) if not cells.empty else [2048]
    verdicts = fit_verdicts(resid, fits, EXPLAINED, MIN_POINTS)
    return dict(rows=decode_rows, scope_rows=in_scope, cells=cells, scope=scope, untimed=untimed_cells(in_scope),
                configs=configs, specs=specs, fits=fits, residuals=resid,
                fit_verdicts=verdicts, fixed_by_batch=fixed_share_by_batch(resid, verdicts),
                within_floor=batch_within_floor(scope), crossover=crossover_table(configs, specs, contexts),
                fixed_by_size=fixed_share_by_size(resid), launch=shares,
                launch_shrinks=launch_shrinks(shares, B_LARGE), published=points, lambdas=lams,
                published_fit=solved, published_outcome=published_outcome(solved),
                transferred=transferred(points, fits))


# ------------------------------------------------------------------------------------------------ findings
def crossover_findings(cross: pd.DataFrame) -> list[str]:
    """Where the compute floor passes the bandwidth floor (crossover_table): one sentence for the contexts where it
    never does, then one a context where it does, a range a GPU over the models (the table has each model)."""
    out = []
    if cross.empty:
        return out
    never = cross[np.isinf(cross["crossover_batch"])]
    if not never.empty:
        ctx_min = int(never["ctx"].min())
        star = never.drop_duplicates(["gpu", "model"])
        out.append(f"At every context measured from {ctx_min} tokens the compute floor never passes the bandwidth "
                   f"floor, at any batch, for {never['model'].nunique()} models on {never['gpu'].nunique()} GPUs of "
                   "the registry: one sequence's KV bytes take longer to read than its weight products take at "
                   f"the dense bf16 peak. It can pass only below {stats.span(star['longest_crossing_ctx'], '.0f')} "
                   "tokens of context (attention's own FLOPs left out).")
    finite = cross[np.isfinite(cross["crossover_batch"])]
    for ctx, g in finite.groupby("ctx"):
        per_gpu = "; ".join(f"{gpu} {stats.span(gg['crossover_batch'], '.0f')}"
                            for gpu, gg in g.groupby("gpu", sort=False))
        out.append(f"At ctx {ctx} the compute floor passes the bandwidth floor above a batch of "
                   f"{stats.span(g['crossover_batch'], '.0f')} over {g['model'].nunique()} models: {per_gpu}.")
    return out


def fit_sentence(v, f) -> str:
    """W2a's sentence of one testable fit: `v` its row of fit_verdicts, `f` its row of fit (a, c0_ms, c1_ms,
    rms_rel_residual). Where a is outside (0, A_MAX] the sentence says the terms trade against each other; the outcome
    reads the residuals alone either way (descriptive, not part of the rule)."""
    return (f"{v.gpu} {v.arm} ({v.attn}): t = t_floor / {f['a']:.2f} + {f['c0_ms']:.2f} ms + n_layers x "
            f"{f['c1_ms'] * 1e3:.0f} us; {v.explained} of {v.cells} cells within {REL_TOL:.0%} beyond noise, "
            f"{v.unexplained} outside (rms residual {f['rms_rel_residual']:.1%}): {v.outcome}"
            + ("." if 0 < f["a"] <= A_MAX else
               f"; its a is outside (0, {A_MAX:g}] (a rate on the floor past the datasheet, or not positive), so its "
               "terms trade against each other and a, c0 and c1 are not each meaningful: the outcome reads the "
               "residuals alone (descriptive)."))

def findings(t: Mapping) -> list[str]:
    """Notebook 07's sentences, generated from `replay`'s tables (never typed): what its own sweeps measured or that
    they are not measured yet, the batch-1 cells of the other notebooks it draws, the compute crossover on every GPU
    of the registry, the paper's points under our byte accounting, and each table's reading where it has rows."""
    out = []
    cells, scope = t["cells"], t["scope"]
    if scope.empty:
        out.append(f"Not measured yet: no row of notebook 07's own sweeps (sessions from {sessions.SCOPE.start}); the batch "
                   "and size tables say so, and the figure draws the cells the other notebooks measured.")
    else:
        for gpu, g in scope.groupby("gpu"):
            out.append(f"{gpu}: {len(g)} cells of notebook 07's sweeps, models {', '.join(sorted(set(g['model'])))}, "
                       f"batches {', '.join(str(b) for b in sorted(set(g['batch'])))}, contexts "
                       f"{', '.join(str(c) for c in sorted(set(g['ctx'])))}; "
                       + ", ".join(f"{n} cells of {k} session{'s' if k > 1 else ''}"
                                   for k, n in sorted(g["sessions"].value_counts().items(), reverse=True))
                       + " (W2a's noise is a cell's session range: none with one session).")
    out += untimed_findings(t["untimed"])
    one = cells[(cells["batch"] == 1) & (cells["attn"] == "sdpa")] if not cells.empty else cells
    for (gpu, arm), g in one[one["arm"].isin(["eager", "graph"])].groupby(["gpu", "arm"]) if not one.empty else []:
        out.append(f"{gpu} {arm}, batch 1: R_floor {stats.span(g['r_floor'])} over {len(g)} cells "
                   f"({', '.join(sorted(set(g['model'])))}; bandwidth floor {stats.span(g['t_floor_bw_ms'])} ms).")
    out += crossover_findings(t["crossover"])
    for p in t["published"].itertuples():
        out.append(f"{p.gpu} ({PUBLISHED}): eager {p.eager_ms:.2f} ms, graph {p.graph_ms:.2f} ms ({p.graph_source}); "
                   f"its bandwidth floor under our accounting (W_all + K, {p.model} ctx {p.ctx}, {p.bandwidth_gbps:.0f} "
                   f"GB/s) is {p.t_floor_bw_ms:.2f} ms, R_floor {p.t_floor_bw_ms / p.eager_ms:.2f} against the "
                   f"published {p.r_floor_published:.2f}.")
    for v in t["fit_verdicts"][t["fit_verdicts"]["testable"].astype(bool)].itertuples() if not t["fit_verdicts"].empty else []:
        out.append(fit_sentence(v, t["fits"].set_index(FIT_KEY).loc[(v.gpu, v.arm, v.attn)]))
    for name, table, col in (("batch within 10 % of the bandwidth floor", t["within_floor"], "batch_within"),
                             ("size below which the fixed cost is more than half the step", t["fixed_by_size"],
                              "below_size")):
        if (table[col] == NOT_MEASURED).all():
            out.append(f"The {name}: not measured yet.")
        else:
            for r in table.itertuples():
                where = f"{r.gpu} {r.arm} ({r.attn}) ctx {r.ctx}" + (f" {r.model}" if "model" in table else "")
                out.append(f"The {name}, {where}: {getattr(r, col)}.")
    for r in t["fixed_by_batch"].itertuples() if (t["fixed_by_batch"]["batches"] != NOT_MEASURED).all() else []:
        shares, batches = r.fixed_shares.split(","), r.batches.split(",")
        out.append(f"{r.gpu} {r.arm} ({r.attn}) {r.model} ctx {r.ctx}: the fit's fixed cost {r.fixed_ms:.2f} ms is "
                   f"{shares[0]} of the step at batch {batches[0]} and {shares[-1]} at batch {batches[-1]} (its fit "
                   f"{r.fit_outcome}; descriptive).")
    for r in t["launch_shrinks"].itertuples():
        out.append(f"{r.gpu} {r.model} ctx {r.ctx}: launch share {r.f_1:.2f} at batch 1, {r.f_max:.2f} at batch "
                   f"{r.b_max} (launch tax {r.launch_1_ms:.2f} -> {r.launch_max_ms:.2f} ms): {r.outcome}.")
    for o in t["published_outcome"].itertuples():
        out.append(f"{o.gpu} ({PUBLISHED}) under the model: a {stats.span([o.a_lo, o.a_hi])}, fixed cost "
                   f"{stats.span([o.fixed_lo_ms, o.fixed_hi_ms], unit=' ms')}: {o.outcome}.")
    for r in t["transferred"].itertuples():
        out.append(f"{r.gpu} {r.arm} ({PUBLISHED}) {r.published_ms:.2f} ms against {r.predicted_ms:.2f} ms predicted by "
                   f"the {r.fit_from} fit moved to its bandwidth: residual {r.residual:+.0%}.")
    return out


PUBLISHED = "published"
