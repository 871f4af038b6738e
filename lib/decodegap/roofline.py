"""The memory floor: t_floor = (W + K) / B and R_floor = t_floor / t_obs, under both byte conventions
(accounting.BYTE_CONVENTIONS) and against both the datasheet bandwidth and the measured copy bandwidth.
An R_floor above 1 means the step moved bytes faster than the bandwidth allows: a measurement or
accounting bug, flagged in the table, never plotted silently."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from . import accounting, stats

CELL = ["gpu", "model", "ctx", "arm", "attn", "quant"]


def t_floor_ms(step_bytes: float, bandwidth_gbps: float) -> float:
    """Time to move `step_bytes` at `bandwidth_gbps` (1e9 bytes/s), in milliseconds."""
    return step_bytes / (bandwidth_gbps * 1e9) * 1e3


def r_floor(t_floor: float, t_obs: float) -> float:
    """R_floor = t_floor / t_obs: 1.0 is perfect use of the bandwidth."""
    return t_floor / t_obs


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
            for i in np.flatnonzero(table[col].to_numpy() > 1.0):
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
