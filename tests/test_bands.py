"""Notebook 06's cross-check of its sweeps (analysis.closing_the_gap_bands): the same cell measured by sweeps of
different session bands, each band's newest measurement, and whether their session ranges overlap, on hand-made
rows whose answers are checked by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from decodegap.analysis import closing_the_gap_bands as bands

CELL = dict(gpu="h200", model="m", ctx=2048, quant="bf16", batch=1, max_cache_len=2086)


def _rows(run: str, arm: str, medians: dict, attn: str = "sdpa", status: str = "ok") -> list[dict]:
    """Three steps a session around each session median {session: ms} (its median is the value itself)."""
    return [dict(CELL, run_id=run, session=s, arm=arm, attn=attn, step=i, step_ms=ms + d, status=status)
            for s, ms in medians.items() for i, d in enumerate((-0.01, 0.0, 0.01))]


def _table():
    rows = (_rows("r1-grid-old", "fused", {0: 3.0, 1: 3.0, 2: 3.0})  # superseded by the grid's newer run
            + _rows("r2-grid", "fused", {0: 4.0, 1: 4.1, 2: 4.2})
            + _rows("r5-confirm", "fused", {200: 4.3, 201: 4.4, 202: 4.5})  # apart: 4.2 < 4.3
            + _rows("r2-grid", "graph", {0: 8.0, 1: 8.1, 2: 8.2})
            + _rows("r3-scope", "graph", {100: 8.1, 101: 8.2, 102: 8.3})  # overlapping: agree
            + _rows("r3-scope", "graph", {100: 9.9}, status="unchecked")  # no passing check of its run: left out
            + _rows("r4-grid", "graph", {0: 7.0}, attn="sdpa_cudnn")  # another attention: another cell
            + _rows("r2-grid", "lean", {0: 5.0, 1: 5.0}))  # one band only: not compared
    return bands.band_table(pd.DataFrame(rows))


def test_each_band_reads_its_newest_measurement_and_only_cells_of_two_bands_are_compared():
    t = _table()
    assert set(zip(t.arm, t.band)) == {("fused", "grid"), ("fused", "confirm"), ("graph", "grid"), ("graph", "scope")}
    fused = t[t.arm == "fused"].set_index("band")
    assert fused.loc["grid", "run_ids"] == "r2-grid" and fused.loc["grid", "t_ms"] == pytest.approx(4.1)
    assert (fused.loc["confirm", "t_min_ms"], fused.loc["confirm", "t_max_ms"]) == (pytest.approx(4.3),
                                                                                    pytest.approx(4.5))
    assert t[(t.arm == "graph") & (t.band == "scope")]["t_max_ms"].iloc[0] == pytest.approx(8.3)  # 9.9 unchecked


def test_agreement_is_overlapping_session_ranges_and_the_gap_is_the_medians_ratio():
    a = bands.agreement(_table()).set_index("arm")
    assert not a.loc["fused", "agree"] and a.loc["fused", "gap"] == pytest.approx(4.4 / 4.1 - 1)
    assert (a.loc["fused", "fastest_band"], a.loc["fused", "slowest_band"]) == ("grid", "confirm")
    assert a.loc["graph", "agree"] and a.loc["graph", "gap"] == pytest.approx(8.2 / 8.1 - 1)
    assert not a["single"].any()
    [line] = bands.findings(_table())
    assert line.values == dict(gpu="h200", cells=2, agree=1, apart=1, apart_ranged=1,
                               gap_max=pytest.approx(4.4 / 4.1 - 1))
    # 4.4 / 4.1 - 1 = 7.317 %: one gap prints as one number, not a range with two equal ends
    assert "2 cells, 1 of them with overlapping session ranges; 1 apart by 7.32 %, 0 of them with a single" in line
    assert "the most apart: m ctx 2048 fused (bf16) 4.10 ms in the grid band, 4.40 ms in the confirm" in line
    assert bands.band_table(pd.DataFrame(columns=list(CELL) + ["run_id", "session", "arm", "attn", "step_ms",
                                                             "status"])).empty
