"""Summaries of raw step rows, and intervals named for what they are: a seeded bootstrap confidence interval where
there are MIN_SESSIONS_FOR_CI sessions or more, else the range of the sessions (`interval`)."""

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


MIN_SESSIONS_FOR_CI = 10
"""Fewer values give no bootstrap interval. A percentile bootstrap of the mean over n sessions draws the all-minimum
resample with probability n^-n: 1/27 = 3.7 % at n = 3, above the 2.5 % tail, so its "95 % CI" is exactly the
minimum and maximum of the three values (and the range of 3 holds the median with probability 75 %, not 95 %). The
paper's N is 10 fresh sessions; below it a table or figure gives the range of the N sessions (`interval`)."""
CI_KIND, RANGE_KIND = "95 % bootstrap CI", "range"
"""`interval`'s kinds: a bootstrap confidence interval, or the minimum and maximum of the values."""


def interval_label(kind: str, n: int) -> str:
    """What an interval is, for a table or figure: "95 % bootstrap CI" or "range of N sessions"."""
    if kind == CI_KIND:
        return CI_KIND
    return f"range of {n} session{'s' if n != 1 else ''}" if n else "no sessions"


def interval(values: Sequence[float], statistic=np.mean, confidence: float = 0.95, seed: int = 0,
             n_resamples: int = 10_000) -> tuple[float, float, str]:
    """(low, high, label) of `values` (one per fresh session): with MIN_SESSIONS_FOR_CI values or more, the seeded
    percentile-bootstrap CI of `statistic` (bootstrap_ci) and CI_KIND's label; with fewer, their minimum and
    maximum and the label "range of N sessions" (interval_label). No values: (nan, nan, "no sessions")."""
    data = np.asarray(values, dtype=float)
    if data.size >= MIN_SESSIONS_FOR_CI:
        low, high = bootstrap_ci(data, statistic, confidence, seed, n_resamples)
        return low, high, interval_label(CI_KIND, data.size)
    if data.size == 0:
        return float("nan"), float("nan"), interval_label(RANGE_KIND, 0)
    return float(data.min()), float(data.max()), interval_label(RANGE_KIND, int(data.size))


def median_ci(values: Sequence[float], confidence: float = 0.95, seed: int = 0,
              n_resamples: int = 10_000) -> tuple[float, float]:
    """Percentile-bootstrap CI of the median of `values` (scipy.stats.bootstrap, seeded: same seed,
    same interval). Fewer than MIN_SESSIONS_FOR_CI values give (nan, nan): `interval` gives their range."""
    return bootstrap_ci(values, np.median, confidence, seed, n_resamples)


def bootstrap_ci(values: Sequence[float], statistic=np.mean, confidence: float = 0.95, seed: int = 0,
                 n_resamples: int = 10_000, method: str = "percentile") -> tuple[float, float]:
    """Bootstrap CI of `statistic` over `values` (one value per fresh session), seeded.
    Fewer than MIN_SESSIONS_FOR_CI values give (nan, nan) (`interval` gives their range instead); identical values
    give (v, v)."""
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
