"""Intervals named for what they are (stats.interval): below 10 sessions the range of the N sessions, from 10 on the
seeded bootstrap CI; and the A/B speed-ups and their labels follow."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from decodegap import stats
from decodegap.analysis import cuda_graphs_ab as ab


def test_three_sessions_give_their_range_not_a_ci():
    low, high, label = stats.interval([2.807, 3.319, 2.9])
    assert (low, high, label) == (2.807, 3.319, "range of 3 sessions")
    assert stats.interval([4.0]) == (4.0, 4.0, "range of 1 session")
    lo, hi, label = stats.interval([])
    assert math.isnan(lo) and math.isnan(hi) and label == "no sessions"


def test_the_old_three_session_ci_was_exactly_the_range():
    """Why: the percentile bootstrap of a mean of 3 draws the all-minimum resample with probability 1/27 > 2.5 %."""
    from scipy import stats as sps

    x = np.array([2.807, 3.319, 2.9])
    res = sps.bootstrap((x,), np.mean, confidence_level=0.95, n_resamples=10_000, method="percentile",
                        random_state=np.random.default_rng(0), vectorized=False)
    assert (res.confidence_interval.low, res.confidence_interval.high) == pytest.approx((x.min(), x.max()))


def test_ten_sessions_give_a_seeded_bootstrap_ci_inside_their_range():
    x = np.arange(1.0, 11.0)  # mean 5.5; the standard error of the mean 2.87 / sqrt(10) = 0.91
    low, high, label = stats.interval(x, seed=3)
    assert label == "95 % bootstrap CI"
    assert 1.0 < low < 5.5 < high < 10.0  # strictly inside the range: not the range restated
    assert low == pytest.approx(5.5 - 1.96 * 0.908, abs=0.4) and high == pytest.approx(5.5 + 1.96 * 0.908, abs=0.4)
    assert stats.interval(x, seed=3) == (low, high, label)  # same seed, same interval
    assert (low, high) == stats.bootstrap_ci(x, seed=3)


def _ab_rows(sessions: int) -> pd.DataFrame:
    rows = []
    for s in range(sessions):
        for arm, ms in (("eager", 20.0 + s), ("graph", 8.0)):
            rows += [dict(run_id="r", session=s, gpu="h200", model="m", ctx=2048, arm=arm, attn="sdpa", quant="bf16",
                          step=i, step_ms=ms, status="ok", sweep="headline") for i in range(3)]
    return pd.DataFrame(rows)


def test_speedups_name_their_interval():
    few = ab.speedups(_ab_rows(3)).iloc[0]
    assert few["interval"] == "range of 3 sessions" and math.isnan(few["ci_low"]) and math.isnan(few["ci_high"])
    assert (few["low"], few["high"]) == pytest.approx((20.0 / 8, 22.0 / 8))
    many = ab.speedups(_ab_rows(10)).iloc[0]
    assert many["interval"] == "95 % bootstrap CI" and many["sessions"] == 10
    assert (many["low"], many["high"]) == (many["ci_low"], many["ci_high"])
    assert 20.0 / 8 < many["ci_low"] < many["speedup"] < many["ci_high"] < 29.0 / 8
    lines = [str(f) for f in ab.findings(ab.speedups(_ab_rows(3)), pd.DataFrame(columns=["launch_overhead_fraction"]),
                                         pd.DataFrame(columns=["ci_low", "ci_high", "gpu", "value"]), 2048)]
    assert any("range of 3 sessions" in line for line in lines) and not any("95 % CI" in line for line in lines)
