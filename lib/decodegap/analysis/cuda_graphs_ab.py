"""The CUDA-graphs A/B test: per-session speed-ups with seeded bootstrap CIs, and the decomposition of a
decode step into memory floor, GPU-side excess and host launch overhead.

The A/B sweep (experiments.cuda_graphs_ab.measure) writes ab.csv in two sweeps, each a run with its plan in
env.json: the grid (every arm, the compile arm included, at every context: a session process builds each model once
for all its cells and compiles) and the headline sweep (eager and graph at the headline context only, in processes that do
nothing else), which measures the headline cells in sessions of their own (an earlier run's part-measured headline
sweep is not topped up: experiments.cuda_graphs_ab.partly_measured). A row's `sweep` says which; no statistic here
pools the sessions of the two."""

from __future__ import annotations

import numpy as np
import pandas as pd

from decodegap import accounting, roofline, stats
from decodegap.finding import Finding

CELL = ["gpu", "model", "ctx", "attn", "quant"]
COMPILED_FIRST_CALL_S = 5.0  # a compile arm's first call longer than this compiled (a CUDA-graph record: < 0.1 s)
GRID, HEADLINE = "grid", "headline"
"""The two sweeps of the A/B (the module's docstring); a row whose run has no plan in env.json has sweep ''."""


def ab_rows(raw: pd.DataFrame, env_runs, verify: pd.DataFrame, history: bool = False) -> pd.DataFrame:
    """The A/B sweep's decode rows from `raw` (data/raw/<gpu>/ab.csv of every GPU, as experiments.cuda_graphs_ab.rows
    reads them): default attention, bf16, each with the `sweep` it belongs to (`sweep_of` its run's plan among
    `env_runs`, the (gpu, run id, env.json entry) of every run), of one run per cell and sweep: the newest run of the
    sweep that timed the cell (`newest_runs`: a headline sweep measured again, `ab --headline-only --again`, never
    pools with the earlier one). Timed rows without a passing check of their own run (checked.join_checks against
    `verify`: the graph and compile arms against eager) are status rows `unchecked` (checked.labelled), never a
    timing. `history`: the rows of the older runs instead, every timed row kept and marked (`checked`,
    `check_note`: reported, not counted)."""
    from decodegap import checked

    rows = raw[(raw["attn"] == "sdpa") & (raw["quant"] == "bf16")].reset_index(drop=True)
    plans = {(gpu, run_id): entry.get("plan") for gpu, run_id, entry in _ab_runs(env_runs, rows)}
    rows["sweep"] = [sweep_of(plans.get(key)) for key in zip(rows["gpu"], rows["run_id"])]
    newest = newest_runs(rows)
    if history:  # every row of the older runs, marked (`checked`, `check_note`): reported as they were timed
        return checked.join_checks(rows[~newest].reset_index(drop=True), verify)
    return checked.labelled(checked.join_checks(rows[newest].reset_index(drop=True), verify))


def newest_runs(rows: pd.DataFrame) -> pd.Series:
    """Per cell and sweep, whether a row is of the newest run (run ids begin with their start time) that timed the
    cell (an `ok` row of any arm); a cell no run timed keeps its newest run's status rows."""
    if rows.empty:
        return pd.Series(dtype=bool, index=rows.index)
    keys = [rows[c] for c in _keys(rows)]
    timed = rows["run_id"].where(rows["status"] == "ok")
    best = timed.groupby(keys).transform("max").fillna(rows["run_id"].groupby(keys).transform("max"))
    return rows["run_id"] == best


def sweep_of(plan) -> str:
    """The sweep of a run of experiments.cuda_graphs_ab.measure, from its plan (env.json): GRID where it planned the
    compile arm (the grid's arms are eager, graph and compile), HEADLINE where it did not (eager and graph only); ''
    without a plan."""
    if not plan:
        return ""
    return GRID if "compile" in plan.get("arms", ()) else HEADLINE


def of_sweep(rows: pd.DataFrame, sweep: str) -> pd.DataFrame:
    """The rows of one sweep (rows without a `sweep` column are taken as they are)."""
    return rows[rows["sweep"] == sweep] if "sweep" in rows else rows


def sweep_sessions(rows: pd.DataFrame) -> pd.DataFrame:
    """Per GPU, sweep and context: the runs, the arms and the fresh sessions (session processes) with timed rows."""
    cols = ["gpu", "sweep", "ctx", "runs", "arms", "sessions"]
    ok = rows[rows["status"] == "ok"] if "sweep" in rows else rows.iloc[0:0]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    out = ok.groupby(["gpu", "sweep", "ctx"]).agg(
        runs=("run_id", lambda r: ", ".join(sorted(set(r)))), arms=("arm", lambda a: ", ".join(sorted(set(a)))),
        sessions=("session", "nunique")).reset_index()
    return out[cols]


def _keys(rows: pd.DataFrame) -> list[str]:
    """A cell's key, with its sweep where the rows have one: sessions of two sweeps are never pooled."""
    return CELL + ["sweep"] if "sweep" in rows else CELL


def _ab_runs(env_runs, ab_rows: pd.DataFrame):
    """(gpu, run id, env.json entry) of every A/B sweep run of `env_runs` with rows in `ab_rows` (env.json also
    keeps the runs of earlier sweeps, whose rows moved to another file)."""
    in_ab = set(zip(ab_rows["gpu"], ab_rows["run_id"]))
    for gpu, run_id, entry in env_runs:
        if (gpu, run_id) in in_ab and (entry.get("experiment") == "ab" or "ab_sweep" in entry):
            yield gpu, run_id, entry


def sweep_walls(env_runs, ab_rows: pd.DataFrame) -> pd.DataFrame:
    """Wall seconds of each whole A/B sweep behind `ab_rows` (experiments.cuda_graphs_ab.measure: grid, headline
    sessions, kernels, total), from `env_runs` (gpu, run id, env.json entry)."""
    rows = [dict(gpu=g, run_id=r, **e["ab_sweep"]) for g, r, e in _ab_runs(env_runs, ab_rows) if "ab_sweep" in e]
    return pd.DataFrame(rows, columns=["gpu", "run_id", "grid_s", "headline_s", "kernels_s", "total_s"])


def session_walls(env_runs, ab_rows: pd.DataFrame) -> pd.DataFrame:
    """Where each A/B session process behind `ab_rows` spent its wall time (`env_runs`' sessions.<s>.timing):
    start-up (process spawn to first line), imports of torch and transformers, model builds and cells (summed
    over models)."""
    rows = []
    for gpu, run_id, entry in _ab_runs(env_runs, ab_rows):
        for session, info in entry.get("sessions", {}).items():
            t = info.get("timing")
            if t:
                rows.append(dict(gpu=gpu, run_id=run_id, session=int(session), startup_s=t["startup_s"],
                                 import_s=t["import_s"], build_s=sum(t["build_s"].values()),
                                 cells_s=sum(t["cells_s"].values()), total_s=t["total_s"]))
    return pd.DataFrame(rows, columns=["gpu", "run_id", "session", "startup_s", "import_s", "build_s", "cells_s",
                                       "total_s"])


def session_table(decode_rows: pd.DataFrame) -> pd.DataFrame:
    """Median step time (ms) of every session of every cell (and sweep, where the rows have one), one column
    per arm."""
    keys = _keys(decode_rows)
    per = stats.session_medians(decode_rows, keys + ["arm"])
    return per.pivot_table(index=keys + ["session"], columns="arm", values="step_ms").reset_index()


def speedups(decode_rows: pd.DataFrame, arm: str = "graph", base: str = "eager", seed: int = 0,
             confidence: float = 0.95) -> pd.DataFrame:
    """Speed-up of `arm` over `base` per cell and sweep: the mean over sessions of each session's ratio of
    median step times (base / arm), and its interval over sessions named for what it is (stats.interval):
    `low`, `high` and `interval`, the seeded percentile-bootstrap CI ("95 % bootstrap CI") from
    stats.MIN_SESSIONS_FOR_CI sessions on, else the range of the sessions' ratios ("range of N sessions");
    `ci_low`, `ci_high` hold the bootstrap CI only (NaN below that many sessions: no CI is claimed). Sessions where
    either arm is missing are left out; `sessions` counts the pairs used. A cell measured in both sweeps (the
    headline cells) has a row for each: their sessions ran under different conditions and are not pooled."""
    keys = _keys(decode_rows)
    cols = CELL + ["sweep", "arm", "base", "speedup", "low", "high", "interval", "ci_low", "ci_high", "sessions"]
    wide = session_table(decode_rows)
    if arm not in wide or base not in wide:
        return pd.DataFrame(columns=cols)
    wide = wide.dropna(subset=[arm, base])
    out = []
    for key, group in wide.groupby(keys):
        ratios = (group[base] / group[arm]).to_numpy()
        low, high, label = stats.interval(ratios, np.mean, confidence=confidence, seed=seed)
        boot = label == stats.CI_KIND
        out.append(dict(zip(keys, key), arm=arm, base=base, speedup=float(ratios.mean()), low=low, high=high,
                        interval=label, ci_low=low if boot else np.nan, ci_high=high if boot else np.nan,
                        sessions=len(ratios)))
    out = pd.DataFrame(out, columns=[c for c in cols if c != "sweep" or "sweep" in keys])
    if "sweep" not in out:
        out.insert(len(CELL), "sweep", "")
    return out[cols]


def interval_text(row) -> str:
    """A speed-up's interval as the findings write it: "95 % bootstrap CI [lo, hi]" or "range of N sessions [lo,
    hi]" (speedups' `interval`; rows without one read their ci_low / ci_high as a CI)."""
    label = getattr(row, "interval", None)
    low, high = getattr(row, "low", row.ci_low), getattr(row, "high", row.ci_high)
    if not isinstance(label, str):
        label = stats.CI_KIND if pd.notna(row.ci_low) else None
    if label is None or pd.isna(low):
        return "no interval"
    return f"{label} [{low:.3f}, {high:.3f}]"


def headline(speed: pd.DataFrame, ctx: int) -> pd.DataFrame:
    """The headline statistic: the speed-ups at `ctx` from the headline sweep's sessions alone, and, for an arm
    or cell that sweep did not measure (the compile arm), the grid's; `sweep` says which. Never pooled."""
    at = speed[speed["ctx"] == ctx]
    if at.empty:
        return at
    rank = at["sweep"].map({HEADLINE: 0, GRID: 1}).fillna(2)
    return (at.assign(_rank=rank).sort_values(CELL + ["arm", "_rank"])
            .drop_duplicates(CELL + ["arm"]).drop(columns="_rank").reset_index(drop=True))


def kept_apart(speed: pd.DataFrame, ctx: int) -> pd.DataFrame:
    """The speed-ups at `ctx` that the headline statistic leaves out: the other sweep's, at the same cells."""
    at = speed[speed["ctx"] == ctx]
    used = headline(speed, ctx)
    merged = at.merge(used[CELL + ["arm", "sweep"]], on=CELL + ["arm"], suffixes=("", "_used"))
    return merged[merged["sweep"] != merged["sweep_used"]].drop(columns="sweep_used").reset_index(drop=True)


def decomposition(cells: pd.DataFrame, kernels: pd.DataFrame | None = None, convention: str = "W_all") -> pd.DataFrame:
    """Per cell (from roofline.cell_table rows of arms eager and graph): the memory floor t_floor
    (datasheet), graph - floor (GPU-side excess: kernels slower than the floor, gaps between them),
    eager - graph (host launch overhead) and its fraction of the eager step; kernels per eager step."""
    columns = CELL + ["t_floor_ms", "gpu_excess_ms", "launch_overhead_ms", "eager_ms", "graph_ms",
                      "launch_overhead_fraction"]
    wide = cells.pivot_table(index=CELL, columns="arm", values="t_obs_ms").reset_index()
    if not {"eager", "graph"} <= set(wide.columns):
        return pd.DataFrame(columns=columns)
    floors = cells.drop_duplicates(CELL).set_index(CELL)[f"t_floor_ms_{convention}"]
    wide = wide.join(floors, on=CELL).rename(columns={f"t_floor_ms_{convention}": "t_floor_ms"})
    wide = wide.dropna(subset=["eager", "graph"])
    out = wide[CELL].copy()
    out["t_floor_ms"] = wide["t_floor_ms"]
    out["gpu_excess_ms"] = wide["graph"] - wide["t_floor_ms"]
    out["launch_overhead_ms"] = wide["eager"] - wide["graph"]
    out["eager_ms"], out["graph_ms"] = wide["eager"], wide["graph"]
    out["launch_overhead_fraction"] = out["launch_overhead_ms"] / wide["eager"]
    if kernels is not None and not kernels.empty:
        k = kernels[(kernels["arm"] == "eager") & (kernels["status"] == "ok")]
        k = k.groupby(CELL)["kernels"].median().rename("kernels_per_step")
        out = out.join(k, on=CELL)
        out["launch_overhead_us_per_kernel"] = out["launch_overhead_ms"] * 1e3 / out["kernels_per_step"]
    return out.reset_index(drop=True)


def compile_seconds(decode_rows: pd.DataFrame) -> pd.DataFrame:
    """The compile arm's compile time per cell, recorded apart from its step times: the wall time of its
    first warm-up call, in seconds; the median and the largest over sessions. The first compile cell of a
    model in a session carries its compile (traced once for every context: decode.COMPILE_OPTIONS); later
    contexts' first calls only record their CUDA graph. A later session finds the inductor cache warm."""
    first = decode_rows[(decode_rows["arm"] == "compile") & (decode_rows["status"] == "warmup")
                        & (decode_rows["step"] == 0)]
    if first.empty:
        return pd.DataFrame(columns=CELL + ["compile_s", "compile_max_s"])
    return (first.assign(s=first["step_ms"] / 1e3).groupby(CELL)["s"]
            .agg(compile_s="median", compile_max_s="max").reset_index())


def compile_settings_compared(ab: pd.DataFrame, whole_model: pd.DataFrame) -> pd.DataFrame:
    """The compile arm under two compile settings, per cell: the median over sessions of the median step
    (ms) with each decoder layer a nested compile region (`ab`, ab.csv) and with the whole model compiled as
    one region (`whole_model`, ab_whole_model.csv), their ratio, and each setting's compile time (the median
    over sessions of the first call, s, at the cell that carried the compile; NaN at later contexts)."""
    cols = CELL + ["regions_ms", "whole_model_ms", "regions_over_whole", "regions_compile_s", "whole_model_compile_s"]
    parts = []
    for name, rows in (("regions", ab), ("whole_model", whole_model)):
        ok = rows[(rows["arm"] == "compile") & (rows["status"] == "ok")]
        if ok.empty:
            return pd.DataFrame(columns=cols)
        step = ok.groupby(CELL + ["session"])["step_ms"].median().groupby(CELL).median().rename(f"{name}_ms")
        first = compile_seconds(rows).set_index(CELL)["compile_s"]
        first = first[first > COMPILED_FIRST_CALL_S].rename(f"{name}_compile_s")
        parts += [step, first]
    out = pd.concat(parts, axis=1).dropna(subset=["regions_ms", "whole_model_ms"]).reset_index()
    out["regions_over_whole"] = out["regions_ms"] / out["whole_model_ms"]
    return out[cols]


def arm_table(decode_rows: pd.DataFrame, specs: pd.DataFrame, configs, bandwidth_rows=None,
              kernels: pd.DataFrame | None = None, seed: int = 0) -> pd.DataFrame:
    """The notebook-02 table, one row per cell: ms per arm, speed-ups over eager with their intervals (speedups:
    the bootstrap CI from 10 sessions, else the range of the sessions, named in `speedup_<arm>_interval`), R_floor per
    arm (W_all, datasheet), sessions per arm, the compile arm's compile time (s), kernels per eager step.
    `decode_rows` are one sweep's (of_sweep: the grid's, for the table over every context)."""
    if "sweep" in decode_rows and decode_rows["sweep"].nunique() > 1:
        raise ValueError(f"arm_table pools no sweeps: pass one sweep's rows (of {sorted(set(decode_rows['sweep']))})")
    cells = roofline.cell_table(decode_rows, specs, configs, bandwidth_rows)
    cells = cells[cells["status"] == "ok"]
    ms = cells.pivot_table(index=CELL, columns="arm", values="t_obs_ms").add_suffix("_ms")
    rf = cells.pivot_table(index=CELL, columns="arm", values="r_floor_W_all").add_prefix("r_floor_")
    n = cells.pivot_table(index=CELL, columns="arm", values="sessions").add_prefix("sessions_")
    table = ms.join(rf).join(n).reset_index()
    for arm in ("graph", "compile"):
        sp = speedups(decode_rows, arm=arm, seed=seed)
        if not sp.empty:
            sp = sp[CELL + ["speedup", "low", "high", "interval", "ci_low", "ci_high"]].rename(columns={
                "speedup": f"speedup_{arm}", "low": f"speedup_{arm}_low", "high": f"speedup_{arm}_high",
                "interval": f"speedup_{arm}_interval", "ci_low": f"speedup_{arm}_ci_low",
                "ci_high": f"speedup_{arm}_ci_high"})
            table = table.merge(sp, on=CELL, how="left")
    compiled = compile_seconds(decode_rows)
    if not compiled.empty:
        table = table.merge(compiled, on=CELL, how="left")
    if kernels is not None and not kernels.empty:
        k = kernels[(kernels["arm"] == "eager") & (kernels["status"] == "ok")].groupby(CELL)["kernels"].median()
        table = table.join(k.rename("kernels_per_step"), on=CELL)
    counts = [c for c in table.columns if c.startswith("sessions_") or c == "kernels_per_step"]
    table[counts] = table[counts].round().astype("Int64")
    return table


def session_spread(decode_rows: pd.DataFrame) -> pd.DataFrame:
    """Per arm: the smallest and largest, over cells (each sweep's sessions of a cell apart), of the ratio of a
    cell's slowest to its fastest session median (cells with at least two sessions): how much a fresh session
    moves each arm."""
    keys = _keys(decode_rows)
    per = stats.session_medians(decode_rows, keys + ["arm"])
    ratio = per.groupby(keys + ["arm"])["step_ms"].agg(lambda x: x.max() / x.min() if len(x) > 1 else float("nan"))
    ratio = ratio.dropna().rename("spread").reset_index()
    return ratio.groupby("arm")["spread"].agg(["min", "max", "size"]).reset_index()


def launch_fraction_verdict(decomp: pd.DataFrame, claimed: float = 0.20) -> str:
    """One sentence: is launch overhead about `claimed` of the eager step on these cells?"""
    if decomp.empty:
        return "No cell has both eager and graph rows: the launch-overhead claim cannot be tested here."
    frac = decomp["launch_overhead_fraction"]
    return (f"Launch overhead (eager - graph) is {frac.min():.0%}-{frac.max():.0%} of the eager step over "
            f"{len(decomp)} cells (median {frac.median():.0%}), against the paper's ~{claimed:.0%} on the H100.")


def bytes_note(config) -> str:
    """How a model's bytes split, for narrative cells."""
    w, s = accounting.weight_bytes(config, "W_all"), accounting.weight_bytes(config, "W_streamed")
    return f"W_all {w / 1e9:.2f} GB, W_streamed {s / 1e9:.2f} GB"


SWEEP_CONDITIONS = {GRID: "whose session processes also ran the compile arm and every context",
                    HEADLINE: "whose session processes ran eager and graph at the headline context only"}


def _span(values, fmt: str = ".3f") -> str:
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return lo if lo == hi else f"{lo}-{hi}"


def sweep_findings(speed: pd.DataFrame, headline_ctx: int) -> list[str]:
    """Per GPU and arm, the sessions of the sweep that the headline statistic leaves out at `headline_ctx`
    (`kept_apart`), beside those it uses: how many of each, and the speed-ups each gives."""
    out = []
    used = headline(speed, headline_ctx)
    for (gpu, arm), apart in kept_apart(speed, headline_ctx).groupby(["gpu", "arm"]):
        mine = used[(used["gpu"] == gpu) & (used["arm"] == arm)]
        out.append(Finding(
            f"{gpu} ctx {headline_ctx}, {arm}: the headline statistic takes the {_span(mine['sessions'], 'd')} "
            f"sessions of the {mine['sweep'].iloc[0]} sweep ({_span(mine['speedup'])}x over "
            f"{len(mine)} models) and keeps apart the {_span(apart['sessions'], 'd')} of the "
            f"{apart['sweep'].iloc[0]} sweep {SWEEP_CONDITIONS.get(apart['sweep'].iloc[0], '')} "
            f"({_span(apart['speedup'])}x): the two are not pooled.",
            gpu=gpu, arm=arm, ctx=headline_ctx, sweep=mine["sweep"].iloc[0], sessions_min=int(mine["sessions"].min()),
            sessions_max=int(mine["sessions"].max()), speedup_min=mine["speedup"].min(),
            speedup_max=mine["speedup"].max(), models=len(mine), apart_sweep=apart["sweep"].iloc[0],
            apart_sessions_min=int(apart["sessions"].min()), apart_sessions_max=int(apart["sessions"].max()),
            apart_speedup_min=apart["speedup"].min(), apart_speedup_max=apart["speedup"].max()))
    return out


def history_speedups(older: pd.DataFrame, arms, seed: int = 0) -> pd.DataFrame:
    """speedups of each of `arms` in each older run of `older` (ab_rows(history=True)) on its own, the run's id in
    `runs`, with `checked`: whether every row behind it had a passing check of its own run. Two runs of a cell are two
    code versions or two days of a host, so they are never pooled (until 2026-12-05 this pooled every older run of a
    GPU's cell and sweep, and named every GPU's older runs; descriptive, no verdict reads it)."""
    parts = [speedups(g, arm=arm, seed=seed).assign(runs=run) for run, g in older.groupby("run_id", sort=True)
             for arm in arms]
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if out.empty:
        return out
    ok = older.groupby(["run_id"] + CELL + ["sweep"])["checked"].all().rename("checked")
    return out.join(ok, on=["runs"] + CELL + ["sweep"])


def history_findings(history: pd.DataFrame | None) -> list[str]:
    """One sentence per GPU, sweep, arm, context and older A/B run (ab_rows(history=True); `history` holds each run's
    speed-ups apart, its id in `runs`, with `checked`: whether every row behind each had a passing check of its own
    run): what it gave, said so that nothing measured is hidden, and that no statistic counts it (the newest run of a
    cell and sweep does)."""
    if history is None or history.empty:
        return []
    out = []
    for (gpu, sweep, arm, ctx, run), g in history.groupby(["gpu", "sweep", "arm", "ctx", "runs"]):
        out.append(f"History, not counted: {gpu} {sweep or 'unplanned'} sweep, {arm} at ctx {ctx} in the older run "
                   f"{run}: " + ", ".join(
                       f"{r.model} {r.speedup:.3f}x ({interval_text(r)}, N = {r.sessions}"
                       f"{'' if getattr(r, 'checked', True) else ', no passing check of its own run'})"
                       for r in g.itertuples())
                   + "; the newest run of the cell and sweep is the one counted.")
    return out


def findings(speed: pd.DataFrame, decomp: pd.DataFrame, published_speed: pd.DataFrame, headline_ctx: int = 2048,
             decode_rows: pd.DataFrame | None = None) -> list[str]:
    """Sentences generated from the data for the notebook narrative: the headline statistic (`headline`) and
    the sessions it keeps apart (`sweep_findings`), the published speed-ups, the speed-up by context over the
    grid sweep, the launch overhead, the session spread and the kernels."""
    out = []
    for row in headline(speed, headline_ctx).sort_values(["gpu", "arm", "model"]).itertuples():
        ci = interval_text(row)
        sweep = f" of the {row.sweep} sweep" if row.sweep else ""
        out.append(Finding(f"{row.gpu} {row.model} ctx {row.ctx}: {row.arm} is {row.speedup:.3f}x faster than eager, "
                           f"{ci}, N = {row.sessions} sessions{sweep}.", gpu=row.gpu, model=row.model, ctx=int(row.ctx),
                           arm=row.arm, speedup=row.speedup, ci_low=row.ci_low, ci_high=row.ci_high,
                           low=row.low, high=row.high, interval=row.interval,
                           sessions=int(row.sessions), sweep=row.sweep))
    out += sweep_findings(speed, headline_ctx)
    for row in published_speed.itertuples():
        ci = f" [{row.ci_low:.3f}, {row.ci_high:.3f}]" if pd.notna(row.ci_low) else " (no CI given)"
        out.append(f"published: {row.gpu} graph {row.value:.3f}x{ci}.")
    graph = speed[speed["arm"] == "graph"]
    if (graph["sweep"] == GRID).any():
        graph = graph[graph["sweep"] == GRID]  # every context from one sweep
    if not graph.empty:
        for gpu, g in graph.groupby("gpu"):
            by_ctx = g.groupby("ctx")["speedup"].median()
            over = f", {GRID} sweep" if (g["sweep"] == GRID).all() else ""
            out.append(Finding(f"{gpu}: graph speed-up by context (median over models{over}): "
                               + ", ".join(f"{c}: {s:.2f}x" for c, s in by_ctx.items()) + ".", gpu=gpu,
                               **{f"speedup_ctx{c}": s for c, s in by_ctx.items()}))
    out.append(launch_fraction_verdict(decomp))
    if decode_rows is not None:
        spread = session_spread(decode_rows)
        if not spread.empty:
            out.append("Slowest over fastest session median of a cell: " + ", ".join(
                f"{r.arm} {r.min:.3f}-{r.max:.3f}x" for r in spread.itertuples())
                + " (over cells with 2+ sessions, each sweep's sessions of a cell apart).")
    if "kernels_per_step" in decomp and decomp["kernels_per_step"].notna().any():
        out.append(f"Kernels per eager step: {int(decomp['kernels_per_step'].min())}-{int(decomp['kernels_per_step'].max())}; "
                   f"launch overhead per kernel {decomp['launch_overhead_us_per_kernel'].min():.1f}-"
                   f"{decomp['launch_overhead_us_per_kernel'].max():.1f} us.")
    if not decomp.empty:
        excess = decomp["gpu_excess_ms"] / decomp["graph_ms"]
        out.append(f"GPU-side excess (graph - floor) is {excess.min():.0%}-{excess.max():.0%} of the graphed step.")
    return out
