"""The memory floor: t_floor = (W + K) / B and R_floor = t_floor / t_obs, under both byte conventions
(accounting.BYTE_CONVENTIONS) and against both the datasheet bandwidth and the measured copy bandwidth.
An R_floor above 1 means the step moved bytes faster than the bandwidth allows: a measurement or
accounting bug, flagged in the table, never plotted silently."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from decodegap import accounting, selection, stats
from decodegap.accounting import t_floor_ms
from decodegap.arms import HF_ARMS

CELL = ["gpu", "model", "ctx", "arm", "attn", "quant"]


def default_rows(decode_rows: pd.DataFrame, plans=None) -> pd.DataFrame:
    """Notebook 01's decode rows: default attention (SDPA), bf16, the HF model's arms (HF_ARMS), each cell's
    sessions from one sweep (`one_sweep`, where the runs' `plans` are given: selection.run_plans). The other
    backends and quantisation paths are notebooks 03 and 04's, the lean decoder's levers notebook 06's."""
    rows = decode_rows[(decode_rows["attn"] == "sdpa") & (decode_rows["quant"] == "bf16")
                       & decode_rows["arm"].isin(HF_ARMS)]
    return one_sweep(rows, plans) if plans is not None else rows


def left_out_sweeps(rows: pd.DataFrame, kept: pd.DataFrame, plans=None) -> list[str]:
    """Per GPU, context and arm, the sessions `one_sweep` left out (rows of `rows` not in `kept`): how many, from
    which runs, and their median step beside the kept sessions', so that what is not pooled is said. Given the runs'
    `plans`, a left-out session of the sweep kept (widest_sweep: a session number two of its runs measured, the
    newer kept) is said to be measured again by a later run of that sweep, the others to be another sweep's."""
    out = []
    ok = rows[rows["status"] == "ok"]
    dropped = ok[~ok.index.isin(kept.index)]
    same_sweep = widest_sweep(rows, plans).index if plans is not None else pd.Index([])
    for (gpu, ctx, arm), g in dropped.groupby(["gpu", "ctx", "arm"]):
        here = kept[(kept["gpu"] == gpu) & (kept["ctx"] == ctx) & (kept["arm"] == arm) & (kept["status"] == "ok")]
        n, models, n_kept = g[["run_id", "session"]].drop_duplicates().shape[0], g["model"].nunique(), \
            here["session"].nunique()
        what = _how_left_out(g.index.isin(same_sweep))
        out.append(f"{gpu} {arm}, ctx {ctx}: {n} session{'' if n == 1 else 's'} {what} (run "
                   f"{', '.join(sorted(set(g['run_id'])))}) {'is' if n == 1 else 'are'} left out, not pooled: their "
                   f"median step over {models} model{'' if models == 1 else 's'} {g['step_ms'].median():.2f} ms "
                   f"against {here['step_ms'].median():.2f} ms in the {n_kept} session{'' if n_kept == 1 else 's'} kept "
                   "(roofline.one_sweep).")
    return out


def _how_left_out(again) -> str:
    """Why left-out rows are left out, from `again` (per row: whether it is of the sweep kept, widest_sweep, so a
    session a later run of that sweep measured again): the words left_out_sweeps and left_out_by_path say."""
    if again.all():
        return "measured again by a later run of the same sweep"
    return "of another sweep" if not again.any() else "of another sweep or measured again by a later run"


def left_out_by_path(rows: pd.DataFrame, kept: pd.DataFrame, plans) -> list[str]:
    """Per GPU and quantisation path (bf16 left to notebook 01's left_out_sweeps), the timed cells of `rows` that
    `one_sweep` (`kept`) left sessions of out, in one sentence: how many cells and sessions, their contexts and arms,
    the runs, and whether they are another sweep's or a session a later run of the same sweep measured again
    (left_out_sweeps' distinction, by the runs' `plans`)."""
    out = []
    ok = rows[(rows["status"] == "ok") & (rows["quant"] != "bf16")]
    dropped = ok[~ok.index.isin(kept.index)]
    if dropped.empty:
        return out
    same_sweep = widest_sweep(rows, plans).index
    for (gpu, quant), g in dropped.groupby(["gpu", "quant"]):
        what = _how_left_out(g.index.isin(same_sweep))
        cells = g[CELL].drop_duplicates().shape[0]
        sessions = g[["run_id"] + CELL + ["session"]].drop_duplicates().shape[0]
        ctxs = ", ".join(str(c) for c in sorted(set(g["ctx"])))
        out.append(f"{gpu} {quant}: {sessions} session{'' if sessions == 1 else 's'} of {cells} "
                   f"cell{'' if cells == 1 else 's'} (ctx {ctxs}; {', '.join(sorted(set(g['arm'])))}) {what} "
                   f"(run{'' if g['run_id'].nunique() == 1 else 's'} {', '.join(sorted(set(g['run_id'])))}) "
                   f"{'is' if sessions == 1 else 'are'} left out, not "
                   "pooled with the sessions kept (roofline.one_sweep).")
    return out


def commits_across_contexts(rows: pd.DataFrame, commits: Mapping) -> list[str]:
    """Per GPU whose timed cells (`rows`, one sweep a cell) come from runs of more than one commit, which contexts and
    arms each commit's runs timed (`commits`: {(gpu, run id): its git commit}; a run without one is "unknown"): a trend across
    those contexts crosses code versions, which a reader comparing them should know. Nothing where one commit timed
    every cell of the GPU."""
    ok = rows[rows["status"] == "ok"]
    out = []
    for gpu, g in ok.groupby("gpu"):
        by_commit: dict = {}  # commit: (its contexts, its arms)
        for (run, ctx, arm) in sorted(set(zip(g["run_id"], g["ctx"].astype(int), g["arm"]))):
            commit = str(commits.get((gpu, run)) or "unknown")[:7]
            by_commit.setdefault(commit, (set(), set()))
            by_commit[commit][0].add(ctx)
            by_commit[commit][1].add(arm)
        if len(by_commit) < 2:
            continue
        parts = [f"{commit} (ctx {', '.join(map(str, sorted(c)))}; {', '.join(sorted(a))})"
                 for commit, (c, a) in sorted(by_commit.items(), key=lambda kv: (min(kv[1][0]), kv[0]))]
        out.append(f"{gpu}: its cells come from runs of {len(by_commit)} commits: {', '.join(parts[:-1])} and "
                   f"{parts[-1]}; comparing cells of different commits compares code versions too.")
    return out


def code_versions_within_cells(rows: pd.DataFrame, sources: Mapping, cell=CELL) -> list[str]:
    """Per GPU and quantisation path, the timed cells of `rows` (after one sweep, or one measurement, is kept a cell)
    whose sessions come from runs of more than one version of the code (`sources`: {(gpu, run id): the source digest
    env.json records, source_sha256; a run without one is "unknown"), in one sentence each: how many cells, their
    contexts and arms, and each version's short digest with its runs. A sweep cut and resumed at a later commit pools
    the sessions of both runs into the cell's median, and where the package's source changed between them that median
    mixes two codes. Nothing where every cell's sessions ran one source. Descriptive (2026-12-07): the cells and the
    rules that read them are as they were."""
    ok = rows[rows["status"] == "ok"] if not rows.empty else rows
    if ok.empty:
        return []
    ok = ok.assign(_source=[str(sources.get((g, r)) or "unknown")[:8] for g, r in zip(ok["gpu"], ok["run_id"])])
    versions = ok.groupby(list(cell))["_source"].transform("nunique")
    mixed = ok[versions > 1]
    out = []
    for (gpu, quant), g in mixed.groupby(["gpu", "quant"], sort=True):
        cells = g[list(cell)].drop_duplicates().shape[0]
        ctxs = ", ".join(str(c) for c in sorted(set(g["ctx"].astype(int))))
        runs = {source: sorted(set(r["run_id"])) for source, r in g.groupby("_source", sort=True)}
        which = "; ".join(f"{source} (run{'' if len(ids) == 1 else 's'} {', '.join(ids)})"
                          for source, ids in sorted(runs.items(), key=lambda kv: (kv[1][0], kv[0])))
        out.append(f"{gpu} {quant}: {cells} cell{'' if cells == 1 else 's'} (ctx {ctxs}; "
                   f"{', '.join(sorted(set(g['arm'])))}) {'pools' if cells == 1 else 'pool'} sessions of runs of "
                   f"{len(runs)} source digests, {which}: such a cell's median mixes code versions "
                   "(roofline.code_versions_within_cells).")
    return out


def one_sweep(rows: pd.DataFrame, plans) -> pd.DataFrame:
    """widest_sweep's rows, each session number from the newest of the sweep's runs that measured it."""
    kept = widest_sweep(rows, plans)
    if kept.empty:
        return kept
    newest = kept.groupby([kept[c] for c in CELL + ["session"]], dropna=False)["run_id"].transform("max")
    return kept[kept["run_id"] == newest]


def widest_sweep(rows: pd.DataFrame, plans) -> pd.DataFrame:
    """Per cell (CELL), the rows of one sweep only, never pooled with another: a sweep is the runs of one plan
    (its contexts and arms, env.json; runs of the same plan, such as a resumed one, pool: selection.sweep_of, by
    which a resumed sweep also counts its sessions done, harness.sweep.SweepPlan.pending), and a cell measured
    by several keeps the sweep whose plan spans the most contexts (the grid, whose cells were measured under the
    same conditions at every context), then the most arms. A top-up sweep of fewer contexts (the headline
    sessions) is left out of such a cell. A run without a plan is a sweep of its own of one context. Only sweeps
    that timed the cell (an `ok` row) compete where there is one: an earlier sweep's `error` rows never displace a
    later sweep's timings, whatever their plans. A sweep whose plan measured its cells again (`again`, ladder
    --again) is a sweep of its own run and ranks above every earlier sweep of the cell, the latest first.
    one_sweep then takes, within the sweep kept, a session number that several of its runs measured (a run that did
    not see the rows of an earlier one, as a call started before the last call's rows were merged) from its newest
    run alone, as selection.newest_measurement does: two fresh processes are never pooled into one session."""
    if rows.empty:
        return rows

    sig = pd.Series([selection.sweep_of(plans.get((g, r)), r) for g, r in zip(rows["gpu"], rows["run_id"])],
                    index=rows.index)
    # a sweep that timed the cell wins over one that only left status rows there (an earlier run's `error`, say):
    # among the sweeps with `ok` rows in a cell the widest plan wins, and only a cell that never ran keeps its status
    timed = (rows["status"] == "ok").groupby([rows[c] for c in CELL + ["run_id"]]).transform("any")
    ran = timed.groupby([rows[c] for c in CELL]).transform("any")
    rank = pd.Series([(t or not r, s) for t, r, s in zip(timed, ran, sig)], index=rows.index)
    best = rank.groupby([rows[c] for c in CELL]).transform("max")
    return rows[rank == best]


def measured_bandwidth(bandwidth_rows: pd.DataFrame) -> pd.Series:
    """Median copy bandwidth (GB/s) of each GPU from its `bandwidth` rows."""
    if bandwidth_rows.empty:
        return pd.Series(dtype=float, name="measured_gbps")
    ok = bandwidth_rows[bandwidth_rows["status"] == "ok"]
    return ok.groupby("gpu")["bandwidth_gbps"].median().rename("measured_gbps")


def cell_table(decode_rows: pd.DataFrame, specs: pd.DataFrame, configs: Mapping[str, Mapping],
               bandwidth_rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per measured cell (gpu, model, ctx, arm, attn, quant).

    t_obs_ms is the median over sessions of each session's median step time; `sessions` counts them.
    For each convention C in W_all / W_streamed: bytes_C, t_floor_ms_C and r_floor_C against the
    datasheet bandwidth, t_floor_measured_ms_C and r_floor_measured_C against the measured copy
    bandwidth (NaN when that GPU has none). Cells with no timed rows keep their status and reason.
    `configs` maps model key -> HF config dict.
    """
    per_session = stats.session_medians(decode_rows, CELL + ["max_cache_len"])
    table = (per_session.groupby(CELL, dropna=False)
             .agg(t_obs_ms=("step_ms", "median"), t_obs_min_ms=("step_ms", "min"),
                  t_obs_max_ms=("step_ms", "max"), sessions=("session", "nunique"),
                  steps_per_session=("steps", "min"), max_cache_len=("max_cache_len", "max"))
             .reset_index())
    table["max_cache_len"] = table["max_cache_len"].round().astype("Int64")  # NaN in rows of failed cells
    table["status"], table["reason"] = "ok", ""
    failed = decode_rows[~decode_rows["status"].isin(["ok", "warmup"])]
    if not failed.empty:
        lost = (failed.groupby(CELL, dropna=False)
                .agg(status=("status", "first"), reason=("reason", "first"), failed_sessions=("session", "nunique"))
                .reset_index())
        table = table.merge(lost, on=CELL, how="outer", suffixes=("", "_failed"))
        no_rows = table["t_obs_ms"].isna()
        table.loc[no_rows, "status"] = table.loc[no_rows, "status_failed"]
        table.loc[no_rows, "reason"] = table.loc[no_rows, "reason_failed"]
        table = table.drop(columns=["status_failed", "reason_failed"])
    table = table.merge(specs[["gpu", "bandwidth_gbps"]], on="gpu", how="left")
    measured = measured_bandwidth(bandwidth_rows if bandwidth_rows is not None else pd.DataFrame())
    table = table.merge(measured, left_on="gpu", right_index=True, how="left")
    if "measured_gbps" not in table:
        table["measured_gbps"] = np.nan
    flags = [[] for _ in range(len(table))]
    for conv in accounting.BYTE_CONVENTIONS:
        table[f"bytes_{conv}"] = [accounting.step_bytes(configs[m], c, conv) for m, c in zip(table["model"], table["ctx"])]
        table[f"t_floor_ms_{conv}"] = t_floor_ms(table[f"bytes_{conv}"], table["bandwidth_gbps"])
        table[f"r_floor_{conv}"] = table[f"t_floor_ms_{conv}"] / table["t_obs_ms"]
        table[f"t_floor_measured_ms_{conv}"] = t_floor_ms(table[f"bytes_{conv}"], table["measured_gbps"])
        table[f"r_floor_measured_{conv}"] = table[f"t_floor_measured_ms_{conv}"] / table["t_obs_ms"]
        for col in (f"r_floor_{conv}", f"r_floor_measured_{conv}"):
            for i in np.flatnonzero(table[col].gt(1.0).to_numpy()):  # NaN (no floor): not flagged, no warning
                flags[i].append(f"{col}>1")
    table["flag"] = [";".join(f) for f in flags]
    return table.sort_values(CELL).reset_index(drop=True)


def floors_by_gpu(configs: Mapping[str, Mapping], specs: pd.DataFrame, ctx: int,
                  convention: str = "W_all") -> pd.DataFrame:
    """t_floor (ms) of each model at `ctx` on every GPU in the registry: rows model, columns GPU key."""
    out = {}
    for _, gpu in specs.iterrows():
        out[gpu["gpu"]] = {m: t_floor_ms(accounting.step_bytes(cfg, ctx, convention), gpu["bandwidth_gbps"])
                           for m, cfg in configs.items()}
    return pd.DataFrame(out)


def model_bytes_table(configs: Mapping[str, Mapping], ctx: int = 2048) -> pd.DataFrame:
    """Per model: parameters, W_all and W_streamed (GB), K at `ctx` (GB), K per 1k tokens (MB)."""
    rows = []
    for key, cfg in configs.items():
        rows.append(dict(
            model=key, params=accounting.param_count(cfg).total,
            W_all_GB=accounting.weight_bytes(cfg, "W_all") / 1e9,
            W_streamed_GB=accounting.weight_bytes(cfg, "W_streamed") / 1e9,
            **{f"K_ctx{ctx}_GB": accounting.kv_bytes(cfg, ctx) / 1e9},
            K_per_1k_tokens_MB=accounting.kv_bytes(cfg, 1000) / 1e6,
        ))
    return pd.DataFrame(rows)


def findings(cells: pd.DataFrame, published: pd.DataFrame) -> list[str]:
    """Sentences generated from the data (never typed by hand) for the notebook narrative."""
    out = []
    for gpu, g in cells.dropna(subset=["t_obs_ms"]).groupby("gpu"):
        eager = g[g["arm"] == "eager"]
        if not eager.empty:
            out.append(f"{gpu}: eager R_floor (W_all, datasheet) spans {eager['r_floor_W_all'].min():.2f}-"
                       f"{eager['r_floor_W_all'].max():.2f} over {len(eager)} cells; "
                       f"eager step {eager['t_obs_ms'].min():.1f}-{eager['t_obs_ms'].max():.1f} ms.")
            if eager["measured_gbps"].notna().any():
                bw = eager["measured_gbps"].iloc[0]
                out.append(f"{gpu}: measured copy bandwidth {bw:.0f} GB/s = {bw / eager['bandwidth_gbps'].iloc[0]:.0%} "
                           f"of the datasheet; against it eager R_floor is {eager['r_floor_measured_W_all'].min():.2f}-"
                           f"{eager['r_floor_measured_W_all'].max():.2f}.")
        wide = g.pivot_table(index=["model", "ctx"], columns="arm", values="t_obs_ms")
        if {"eager", "hf_default"} <= set(wide.columns):
            ratio = (wide["hf_default"] / wide["eager"]).dropna()
            for model, r in ratio.groupby(level="model"):
                ctxs = r.index.get_level_values("ctx")
                over = "over contexts" if len(set(ctxs)) > 1 else f"at ctx {int(ctxs[0])}"
                out.append(f"{gpu} {model}: HF default dynamic cache / static cache step time = "
                           f"{stats.span(r)}x {over}.")
        if {"eager", "graph"} <= set(wide.columns):
            ratio = (wide["eager"] / wide["graph"]).dropna()
            out.append(f"{gpu}: graph replay is {stats.span(ratio)}x faster than eager over "
                       f"{len(ratio)} cells; best graph R_floor {g.loc[g['arm'] == 'graph', 'r_floor_W_all'].max():.2f}.")
        head = g[(g["model"] == "qwen2.5-7b") & (g["ctx"] == 2048) & (g["arm"] == "eager")]
        pub = published[(published["quantity"] == "r_floor") & (published["model"] == "qwen2.5-7b")]
        if not head.empty and not pub.empty:
            r = head["r_floor_W_all"].iloc[0]
            out.append(f"Headline cell Qwen-2.5-7B ctx 2048 eager: {gpu} R_floor {r:.2f} (published: "
                       + ", ".join(f"{p.gpu} {p.value:.2f}" for p in pub.itertuples()) + ").")
    flagged = cells[cells["flag"].astype(bool)]
    if not flagged.empty:
        out.append(f"FLAGGED: {len(flagged)} cell(s) with R_floor > 1 (a measurement or accounting bug): "
                   + "; ".join(f"{r.gpu} {r.model} ctx {r.ctx} {r.arm}: {r.flag}" for r in flagged.itertuples()))
    return out
