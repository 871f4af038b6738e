"""Summaries of raw step rows and seeded bootstrap confidence intervals."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd


def session_medians(rows: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Median step time of each session of each cell: the unit the paper's N fresh sessions count.
    `rows` are raw decode rows; only `ok` rows enter. Columns: by + session, step_ms (median), steps."""
    ok = rows[rows["status"] == "ok"]
    keys = list(by) + ["session"]
    out = ok.groupby(keys, dropna=False)["step_ms"].agg(step_ms="median", steps="size").reset_index()
    return out


MIN_SESSIONS_FOR_CI = 3
"""Fewer values give no interval: a bootstrap over two sessions only restates their range."""


def median_ci(values: Sequence[float], confidence: float = 0.95, seed: int = 0,
              n_resamples: int = 10_000) -> tuple[float, float]:
    """Percentile-bootstrap CI of the median of `values` (scipy.stats.bootstrap, seeded: same seed,
    same interval). Fewer than MIN_SESSIONS_FOR_CI values give (nan, nan)."""
    return bootstrap_ci(values, np.median, confidence, seed, n_resamples)


def bootstrap_ci(values: Sequence[float], statistic=np.mean, confidence: float = 0.95, seed: int = 0,
                 n_resamples: int = 10_000, method: str = "percentile") -> tuple[float, float]:
    """Bootstrap CI of `statistic` over `values` (one value per fresh session), seeded.
    Fewer than MIN_SESSIONS_FOR_CI values give (nan, nan); identical values give (v, v)."""
    from scipy import stats

    data = np.asarray(values, dtype=float)
    if data.size < MIN_SESSIONS_FOR_CI:
        return (float("nan"), float("nan"))
    if np.all(data == data[0]):
        return (float(data[0]), float(data[0]))
    res = stats.bootstrap((data,), statistic, confidence_level=confidence, n_resamples=n_resamples,
                          method=method, random_state=np.random.default_rng(seed), vectorized=False)
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def span(values, fmt: str = ".2f", unit: str = "") -> str:
    """The range of `values` as text: "lo-hi" (one value where both print alike, "lo to hi" where lo is
    negative, "-" with no values), NaN left out, `unit` after each number."""
    v = pd.Series(values, dtype=float).dropna()
    if v.empty:
        return "-"
    lo, hi = format(v.min(), fmt), format(v.max(), fmt)
    if lo == hi:
        return f"{lo}{unit}"
    return f"{lo}{unit} to {hi}{unit}" if v.min() < 0 else f"{lo}-{hi}{unit}"
