"""Session medians and seeded bootstrap intervals on samples whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from decodegap import stats


def frame():
    rows = [
        # cell (m, 16): session 0 ok 3, 1, 2 -> median 2 (the 100 ms warm-up row is left out); session 1 -> 5
        ("m", 16, 0, 100.0, "warmup"), ("m", 16, 0, 3.0, "ok"), ("m", 16, 0, 1.0, "ok"), ("m", 16, 0, 2.0, "ok"),
        ("m", 16, 1, 4.0, "ok"), ("m", 16, 1, 6.0, "ok"),
        # cell (m, 32): session 0 median(7, 9, 8, 10) = 8.5; an oom row of session 1 gives no median
        ("m", 32, 0, 7.0, "ok"), ("m", 32, 0, 9.0, "ok"), ("m", 32, 0, 8.0, "ok"), ("m", 32, 0, 10.0, "ok"),
        ("m", 32, 1, None, "oom"),
    ]
    return pd.DataFrame(rows, columns=["model", "ctx", "session", "step_ms", "status"])


def test_session_medians():
    out = stats.session_medians(frame(), by=["model", "ctx"])
    assert list(out.columns) == ["model", "ctx", "session", "step_ms", "steps"]
    got = {(r.ctx, r.session): (r.step_ms, r.steps) for r in out.itertuples()}
    assert got == {(16, 0): (2.0, 3), (16, 1): (5.0, 2), (32, 0): (8.5, 4)}


def test_bootstrap_is_seeded():
    x = np.array([3.1, 2.7, 4.4, 3.9, 2.2, 5.0, 3.3, 4.1, 3.6, 2.9])
    a = stats.bootstrap_ci(x, seed=7, n_resamples=2000)
    b = stats.bootstrap_ci(x, seed=7, n_resamples=2000)
    assert a == b  # same seed, identical interval
    others = {stats.bootstrap_ci(x, seed=s, n_resamples=2000) for s in range(1, 6)}
    assert len(others | {a}) > 1  # another seed may (and here does) give another interval
    assert stats.median_ci(x, seed=3, n_resamples=2000) == stats.median_ci(x, seed=3, n_resamples=2000)


def test_constant_sample_gives_a_point_interval():
    assert stats.bootstrap_ci([4.25] * 10) == (4.25, 4.25)
    assert stats.median_ci([12.0] * 12) == (12.0, 12.0)


def test_too_few_values_give_nan():
    assert stats.MIN_SESSIONS_FOR_CI == 10  # below the paper's N a bootstrap restates the range (test_intervals)
    for values in ([7.0], [], [1.0, 2.0], [1.0, 2.0, 3.0], list(range(9))):
        lo, hi = stats.bootstrap_ci(values)
        assert math.isnan(lo) and math.isnan(hi)
        lo, hi = stats.median_ci(values)
        assert math.isnan(lo) and math.isnan(hi)


def test_interval_contains_the_sample_statistic():
    x = np.arange(1, 11)  # mean 5.5, median 5.5
    lo, hi = stats.bootstrap_ci(x, np.mean, n_resamples=5000)
    assert 1 <= lo < 5.5 < hi <= 10
    # the mean of 10 resampled values lies within about 2 standard errors (sd 2.87 / sqrt(10) = 0.91)
    assert lo == pytest.approx(5.5 - 1.96 * 0.908, abs=0.4)
    assert hi == pytest.approx(5.5 + 1.96 * 0.908, abs=0.4)
    lo, hi = stats.median_ci(x, n_resamples=5000)
    assert 1 <= lo < 5.5 < hi <= 10


def test_wider_confidence_gives_a_wider_interval():
    x = np.arange(1, 11)
    lo90, hi90 = stats.bootstrap_ci(x, confidence=0.90, n_resamples=4000)
    lo99, hi99 = stats.bootstrap_ci(x, confidence=0.99, n_resamples=4000)
    assert lo99 <= lo90 and hi90 <= hi99


def test_span_writes_a_range_as_the_findings_quote_it():
    from decodegap.stats import span

    assert span([2.5, 1.0, float("nan")]) == "1.00-2.50"
    assert span([-0.5, 0.25], ".0%") == "-50% to 25%"
    assert span([3.0, 3.001]) == "3.00" and span([]) == "-"
    assert span([10, 20], ".0f", " ms") == "10-20 ms"
