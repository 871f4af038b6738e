"""Notebook 04: the same quantised cell on two GPUs. If a step were bound by memory bandwidth, the GPU with more of
it would be faster by its bandwidth ratio; the share of that gain a path's step realises says how far it is from
bandwidth-bound. Read from the grid table (quant_profile.grid: every path's checked step on one arm per GPU, model
and context), so each time here is a counted cell of notebook 04.
"""

from __future__ import annotations

import math

import pandas as pd

from decodegap.finding import Finding, span as _values
from decodegap.stats import span as _span

PAIR_COLUMNS = ["gpu_slow", "gpu_fast", "model", "ctx", "arm", "quant", "ms_slow", "ms_fast", "speedup",
                "bandwidth_ratio", "gain_realised", "measured_slow", "measured_fast"]
"""One row per (GPU pair, model, context, path): `gpu_slow` the GPU of less datasheet bandwidth, its step `ms_slow`;
`speedup` = ms_slow / ms_fast; `bandwidth_ratio` the fast GPU's datasheet bandwidth over the slow one's;
`gain_realised` = ln(speedup) / ln(bandwidth_ratio), the share of the bandwidth gain the step realises: 1 where it
scales with bandwidth, 0 where it does not move (something else binds), in log terms so that a ratio and its inverse
weigh alike. `measured_slow`, `measured_fast`: when each cell was measured (its `measured` in the cell table; empty
without one): the two sides may be of different dates and code."""


def pairs(grid: pd.DataFrame, specs: pd.DataFrame, arm: str, cell_table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every pair of GPUs that both have a path's step at the same model and context in `grid` (the steps on `arm`:
    columns gpu, model, ctx and one per path, ms; NaN where a cell is not counted), with the GPUs' datasheet
    bandwidths from `specs` (data/specs/gpus.csv) and, from `cell_table` (quant_report.cells, where given), when each
    cell was measured. Empty (with PAIR_COLUMNS) where no cell is on two GPUs."""
    if grid.empty or "gpu" not in grid:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    bandwidth = specs.set_index("gpu")["bandwidth_gbps"].astype(float)
    path_columns = [c for c in grid.columns if c not in ("gpu", "model", "ctx")]
    long = grid.melt(id_vars=["gpu", "model", "ctx"], value_vars=path_columns, var_name="quant",
                     value_name="ms").dropna(subset=["ms"])
    long = long[long["gpu"].isin(bandwidth.index)].assign(bandwidth=lambda d: d["gpu"].map(bandwidth))
    when = {}
    if cell_table is not None and not cell_table.empty and "measured" in cell_table:
        on_arm = cell_table[(cell_table["arm"] == arm) & (cell_table["attn"] == "sdpa")
                            & cell_table["t_obs_ms"].notna()]
        when = {(r.gpu, r.model, int(r.ctx), r.quant): str(r.measured) for r in on_arm.itertuples()}
    rows = []
    for (model, ctx, key), cell in long.groupby(["model", "ctx", "quant"], sort=True):
        cell = cell.sort_values(["bandwidth", "gpu"]).reset_index(drop=True)
        for i in range(len(cell)):
            for j in range(i + 1, len(cell)):
                slow, fast = cell.iloc[i], cell.iloc[j]
                if slow["bandwidth"] == fast["bandwidth"]:
                    continue  # no bandwidth ratio to weigh the speed-up against
                speedup = slow["ms"] / fast["ms"]
                ratio = fast["bandwidth"] / slow["bandwidth"]
                rows.append(dict(gpu_slow=slow["gpu"], gpu_fast=fast["gpu"], model=model, ctx=int(ctx), arm=arm,
                                 quant=key, ms_slow=float(slow["ms"]), ms_fast=float(fast["ms"]), speedup=speedup,
                                 bandwidth_ratio=ratio, gain_realised=math.log(speedup) / math.log(ratio),
                                 measured_slow=when.get((slow["gpu"], model, int(ctx), key), ""),
                                 measured_fast=when.get((fast["gpu"], model, int(ctx), key), "")))
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def findings(pair_table: pd.DataFrame) -> list[Finding]:
    """Per GPU pair, model and arm: the bandwidth ratio, then each path's speed-up span over the contexts both
    GPUs have, with the share of the bandwidth gain it realises; each a Finding (gpu_slow, gpu_fast, model, arm, quant,
    contexts, the spans as `speedup_min/max` and `gain_realised_min/max`)."""
    out = []
    if pair_table.empty:
        return out
    for (slow, fast, model, arm), g in pair_table.groupby(["gpu_slow", "gpu_fast", "model", "arm"], sort=True):
        ratio = float(g["bandwidth_ratio"].iloc[0])
        ctx = _span(g["ctx"], ".0f")
        for key in dict.fromkeys(g["quant"]):
            r = g[g["quant"] == key]
            out.append(Finding(
                f"{fast} over {slow}, {model} {arm}, {key}: {_span(r['speedup'])}x faster over ctx {ctx}, "
                f"realising {_span(r['gain_realised'] * 100, '.0f')} % of the gain of its {ratio:.2f}x datasheet "
                "bandwidth (ln speed-up / ln bandwidth ratio: 100 % where the step scales with bandwidth, 0 % where it "
                "does not move)"
                + _dates(r, slow, fast) + ".",
                gpu_slow=slow, gpu_fast=fast, model=model, arm=arm, quant=key, contexts=len(r), bandwidth_ratio=ratio,
                **_values("speedup", r["speedup"]), **_values("gain_realised", r["gain_realised"])))
    return out


def bf16_and_fastest_quant(pair_table: pd.DataFrame, grid: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per GPU pair, model and arm: bf16's and the fastest checked non-bf16 path's speed-up spans and the shares of
    the bandwidth gain they realise, the contexts the scarcer of the two has (`contexts`) and, per side, the earliest
    `measured` of their cells (`first_measured_slow`, `first_measured_fast`; "" where a cell has none); the reading of
    the pair table that the gallery and claim R4o share. The fastest path (`fastest_quant`) is the faster GPU's
    (fastest_on over `grid`, notebook 04's grid on the arm: columns gpu, model, ctx and one per path), paired or not;
    without `grid`, the fastest of the paths both GPUs have. The spans are of `paired_quant`, the fastest of the paths
    both have; `fastest_paired` says whether it is the faster GPU's fastest (until 2026-12-06T23:59 only paired
    paths were weighed, so a path the slower GPU lacks could not be the fastest). Empty where no pair has bf16 and a
    quantised path."""
    rows = []
    for (slow, fast, model, arm), g in pair_table.groupby(["gpu_slow", "gpu_fast", "model", "arm"], sort=True):
        bf16, quantised = g[g["quant"] == "bf16"], g[g["quant"] != "bf16"]
        if bf16.empty or quantised.empty:
            continue
        paired = fastest_quant(g)
        best = fastest_on(grid, fast, model) or paired
        q = quantised[quantised["quant"] == paired]
        both = pd.concat([bf16, q])
        rows.append(dict(gpu_slow=slow, gpu_fast=fast, model=model, arm=arm,
                         bandwidth_ratio=float(g["bandwidth_ratio"].iloc[0]),
                         ctx_min=int(g["ctx"].min()), ctx_max=int(g["ctx"].max()), fastest_quant=best,
                         paired_quant=paired, fastest_paired=best == paired,
                         **_values("bf16_speedup", bf16["speedup"]), **_values("quant_speedup", q["speedup"]),
                         **_values("bf16_gain_realised", bf16["gain_realised"]),
                         **_values("quant_gain_realised", q["gain_realised"]), contexts=min(len(bf16), len(q)),
                         first_measured_slow=_earliest(both["measured_slow"]),
                         first_measured_fast=_earliest(both["measured_fast"]),
                         measured=_dates(both, slow, fast).removeprefix("; ")))
    return pd.DataFrame(rows)


def fastest_on(grid: pd.DataFrame, gpu: str, model: str) -> str | None:
    """The fastest checked non-bf16 path of `model` on `gpu` in `grid` (notebook 04's grid on one arm: columns gpu,
    model, ctx and one per path, ms, NaN where a cell is not counted): `lowest_median` of each path's steps over the
    contexts that GPU has it at, every path it has, whether another GPU has it or not; None without one."""
    if grid is None or grid.empty:
        return None
    here = grid[(grid["gpu"] == gpu) & (grid["model"] == model)]
    return lowest_median({c: here[c] for c in here.columns if c not in ("gpu", "model", "ctx", "bf16")})


def lowest_median(steps_ms: dict) -> str | None:
    """The path whose steps (a Series of ms per path; NaN where a context is not counted) have the lowest median, ties
    to the path whose name sorts first; None where no path has a step. The one rule fastest_on and fastest_quant
    choose by."""
    medians = {path: float(ms.median()) for path, ms in steps_ms.items() if ms.notna().any()}
    return min(sorted(medians), key=medians.get) if medians else None


def nearer(row) -> str:
    """Which of bf16 and the fastest quantised path of one bf16_and_fastest_quant row is nearer bandwidth-bound beyond
    the other's span: "bf16" where bf16's smallest share of the gain exceeds the path's largest, "quant" where the
    path's smallest exceeds bf16's largest, "" where the spans overlap."""
    if row.bf16_gain_realised_min > row.quant_gain_realised_max:
        return "bf16"
    if row.quant_gain_realised_min > row.bf16_gain_realised_max:
        return "quant"
    return ""


def _earliest(measured: pd.Series) -> str:
    """The earliest of cells' `measured` ('YYYY-MM-DD HH:MM UTC' sorts as it reads), "" where one has none."""
    values = [v for v in measured if isinstance(v, str) and v]
    return min(values) if values and len(values) == len(measured) else ""


def fastest_quant(group: pd.DataFrame) -> str | None:
    """The fastest checked non-bf16 path of one (GPU pair, model, arm) of the pair table: `lowest_median` of each
    path's steps on the faster GPU over the contexts both GPUs have; None without a quantised path."""
    quantised = group[group["quant"] != "bf16"]
    return lowest_median({path: g["ms_fast"] for path, g in quantised.groupby("quant", sort=True)})


def _dates(rows: pd.DataFrame, slow: str, fast: str) -> str:
    """"; measured <dates> on <slow> and <dates> on <fast>" from the pairs' `measured_*` (their days), or "" where
    neither side has one."""
    def days(col):
        d = sorted({str(v)[:10] for v in rows[col] if isinstance(v, str) and v})
        return d[0] if len(d) == 1 else f"{d[0]} to {d[-1]}" if d else "-"
    slow_days, fast_days = days("measured_slow"), days("measured_fast")
    if slow_days == fast_days == "-":
        return ""
    return f"; measured {slow_days} on the {slow} and {fast_days} on the {fast}"

