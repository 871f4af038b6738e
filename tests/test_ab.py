"""The A/B statistics on hand-checkable cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from decodegap.analysis import cuda_graphs_ab as ab
from decodegap import roofline

CFG = {"model_type": "llama", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
       "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 10, "tie_word_embeddings": False}


def _rows(times: dict) -> pd.DataFrame:
    """times: {(arm, session): [step_ms, ...]} for one cell."""
    rows = []
    for (arm, session), steps in times.items():
        for i, ms in enumerate(steps):
            rows.append(dict(run_id="r", session=session, gpu="g", model="m", ctx=4, max_cache_len=8, arm=arm,
                             attn="sdpa", quant="bf16", step=i, step_ms=ms, status="ok", reason=""))
    return pd.DataFrame(rows)


def test_speedup_is_the_mean_of_per_session_ratios_of_medians():
    # session medians: eager 10, 12, 14; graph 5, 4, 7 -> ratios 2, 3, 2 -> mean 7/3
    rows = _rows({("eager", 0): [9, 10, 11], ("graph", 0): [5, 5, 6],
                  ("eager", 1): [12, 12, 40], ("graph", 1): [4, 3, 4],
                  ("eager", 2): [14, 13, 15], ("graph", 2): [7, 7, 7]})
    sp = ab.speedups(rows, arm="graph", seed=0).iloc[0]
    assert sp.speedup == pytest.approx(7 / 3)
    assert sp.sessions == 3
    # three sessions: the range of their ratios, named as such; no bootstrap CI (tests/test_intervals.py)
    assert (sp.low, sp.high, sp.interval) == (2.0, 3.0, "range of 3 sessions")
    assert np.isnan(sp.ci_low) and np.isnan(sp.ci_high)


def test_speedup_leaves_out_unpaired_sessions_and_gives_no_ci_below_three():
    rows = _rows({("eager", 0): [10], ("graph", 0): [5], ("eager", 1): [12], ("graph", 2): [4]})
    sp = ab.speedups(rows, arm="graph").iloc[0]
    assert sp.sessions == 1 and sp.speedup == 2.0
    assert np.isnan(sp.ci_low) and np.isnan(sp.ci_high)


def test_speedups_of_a_missing_arm_are_empty():
    rows = _rows({("eager", 0): [10]})
    assert ab.speedups(rows, arm="compile").empty


def test_decomposition_adds_up_to_the_eager_step():
    rows = _rows({("eager", 0): [10.0], ("graph", 0): [4.0]})
    specs = pd.DataFrame({"gpu": ["g"], "bandwidth_gbps": [1e-6]})  # 1 kB/s: floor in ms = bytes
    cells = roofline.cell_table(rows, specs, {"m": CFG})
    kernels = pd.DataFrame([dict(run_id="r", gpu="g", model="m", ctx=4, arm="eager", attn="sdpa", quant="bf16",
                                 kernels=100, status="ok", reason="")])
    d = ab.decomposition(cells, kernels).iloc[0]
    floor = cells.iloc[0]["t_floor_ms_W_all"]
    assert d.t_floor_ms == pytest.approx(floor)
    assert d.launch_overhead_ms == pytest.approx(6.0)
    assert d.gpu_excess_ms == pytest.approx(4.0 - floor)
    assert d.launch_overhead_fraction == pytest.approx(0.6)
    assert d.launch_overhead_us_per_kernel == pytest.approx(60.0)
    assert "60%-60%" in ab.launch_fraction_verdict(pd.DataFrame([d]))


def test_decomposition_without_graph_rows_is_empty_not_an_error():
    rows = _rows({("eager", 0): [10.0]})
    specs = pd.DataFrame({"gpu": ["g"], "bandwidth_gbps": [1.0]})
    assert ab.decomposition(roofline.cell_table(rows, specs, {"m": CFG})).empty


def test_compile_time_is_the_first_warmup_call_in_seconds_median_and_max_over_sessions():
    rows = []
    for session, first_ms in enumerate([42000.0, 11000.0, 12000.0]):  # session 0 compiles cold
        for step, ms in enumerate([first_ms, 40.0, 8.0]):
            rows.append(dict(run_id="r", session=session, gpu="h200", model="m", ctx=2048, max_cache_len=2083,
                             arm="compile", attn="sdpa", quant="bf16", step=step, step_ms=ms, status="warmup", reason=""))
        rows.append(dict(rows[-1], step=0, step_ms=6.0, status="ok"))  # a timed step 0 is not the compile
    out = ab.compile_seconds(pd.DataFrame(rows))
    assert len(out) == 1
    assert out.iloc[0]["compile_s"] == pytest.approx(12.0) and out.iloc[0]["compile_max_s"] == pytest.approx(42.0)
    assert ab.compile_seconds(pd.DataFrame(rows).query("arm != 'compile'")).empty


def test_session_spread_is_slowest_over_fastest_session_median_per_cell():
    rows = []
    for session, (eager, graph) in enumerate([(20.0, 8.0), (40.0, 8.08), (30.0, 8.04)]):
        for arm, ms in (("eager", eager), ("graph", graph)):
            rows += [dict(gpu="h200", model="m", ctx=2048, attn="sdpa", quant="bf16", arm=arm, session=session,
                          step=i, step_ms=ms, status="ok") for i in range(3)]
    rows.append(dict(rows[-1], ctx=4096, session=0))  # a one-session cell has no spread
    spread = ab.session_spread(pd.DataFrame(rows)).set_index("arm")
    assert spread.loc["eager", "max"] == pytest.approx(2.0) and spread.loc["graph", "max"] == pytest.approx(1.01)
    assert spread.loc["graph", "size"] == 1


def test_compile_settings_compared_pairs_cells_and_keeps_only_compile_first_calls():
    """Hand-checkable: one cell, two sessions per setting; medians 6 and 6.5 ms (ratio 12/13), compile first
    calls 30 s (regions) and 90/110 s (whole model: median 100); the later context's 0.2 s graph record is
    not a compile and stays NaN."""
    def rows(step_by_session, first_s):
        out = []
        for session, (ms, s) in enumerate(zip(step_by_session, first_s)):
            base = dict(gpu="h200", model="m", attn="sdpa", quant="bf16", arm="compile", session=session)
            out += [dict(base, ctx=2048, status="warmup", step=0, step_ms=s * 1e3)]
            out += [dict(base, ctx=2048, status="ok", step=i, step_ms=ms + d) for i, d in enumerate((-0.1, 0, 0.1))]
            out += [dict(base, ctx=4096, status="warmup", step=0, step_ms=200.0)]
            out += [dict(base, ctx=4096, status="ok", step=0, step_ms=ms + 1)]
        return pd.DataFrame(out)

    got = ab.compile_settings_compared(rows((6.0, 6.0), (30, 30)), rows((6.4, 6.6), (90, 110)))
    first = got[got["ctx"] == 2048].iloc[0]
    assert first["regions_ms"] == 6.0 and first["whole_model_ms"] == pytest.approx(6.5)
    assert first["regions_over_whole"] == pytest.approx(12 / 13)
    assert first["regions_compile_s"] == 30 and first["whole_model_compile_s"] == 100
    later = got[got["ctx"] == 4096].iloc[0]
    assert later["regions_ms"] == 7.0 and pd.isna(later["regions_compile_s"])


def _two_sweeps() -> pd.DataFrame:
    """One cell measured by both sweeps: grid sessions 0-2 (ratios 3, 3, 3), headline sessions 3-6 (ratios 2, 2, 2,
    2.5); the compile arm in the grid sessions only (ratio 4)."""
    times = {("eager", s): [30.0] for s in range(3)} | {("graph", s): [10.0] for s in range(3)}
    times |= {("compile", s): [7.5] for s in range(3)}
    times |= {("eager", s): [20.0] for s in range(3, 6)} | {("graph", s): [10.0] for s in range(3, 6)}
    times |= {("eager", 6): [25.0], ("graph", 6): [10.0]}
    rows = _rows(times)
    rows["sweep"] = np.where(rows["session"] < 3, ab.GRID, ab.HEADLINE)
    return rows


def test_sweep_of_a_run_is_read_from_its_plan():
    assert ab.sweep_of({"arms": ["eager", "graph", "compile"], "contexts": [2048, 4096]}) == ab.GRID
    assert ab.sweep_of({"arms": ["eager", "graph"], "contexts": [2048]}) == ab.HEADLINE
    assert ab.sweep_of(None) == "" and ab.sweep_of({}) == ""


def test_speedups_never_pool_the_two_sweeps():
    rows = _two_sweeps()
    sp = ab.speedups(rows, arm="graph").set_index("sweep")
    assert sp.loc[ab.GRID, "speedup"] == pytest.approx(3.0) and sp.loc[ab.GRID, "sessions"] == 3
    assert sp.loc[ab.HEADLINE, "speedup"] == pytest.approx(8.5 / 4) and sp.loc[ab.HEADLINE, "sessions"] == 4
    pooled = ab.speedups(rows.drop(columns="sweep"), arm="graph").iloc[0]  # rows without sweeps: one cell, as before
    assert pooled.speedup == pytest.approx((9 + 8.5) / 7) and pooled.sessions == 7



def test_older_runs_are_history_run_by_run_on_their_own_gpu():
    """Two older runs of one cell (ratios 2, 2 and 3, 3, 3: pooled they would read 2.6x, N = 5) and one of another
    GPU: each run its own speed-up and sentence, each naming its run alone; a run with a failing check says so."""
    a = _rows({("eager", s): [20.0] for s in range(2)} | {("graph", s): [10.0] for s in range(2)}).assign(run_id="r1")
    b = _rows({("eager", s): [30.0] for s in range(3)} | {("graph", s): [10.0] for s in range(3)}).assign(run_id="r2")
    c = _rows({("eager", 0): [40.0], ("graph", 0): [10.0]}).assign(run_id="r3", gpu="other")
    older = pd.concat([a, b, c], ignore_index=True).assign(sweep=ab.HEADLINE, checked=True)
    older.loc[older.run_id == "r1", "checked"] = False
    hist = ab.history_speedups(older, ["graph", "compile"])
    got = {(r.gpu, r.runs): (round(r.speedup, 6), r.sessions, r.checked) for r in hist.itertuples()}
    assert got == {("g", "r1"): (2.0, 2, False), ("g", "r2"): (3.0, 3, True), ("other", "r3"): (4.0, 1, True)}
    lines = ab.history_findings(hist)
    assert len(lines) == 3 and all(line.count(" run r") == 1 for line in lines)
    assert "older run r1: m 2.000x" in lines[0] and "no passing check of its own run" in lines[0]
    assert lines[2].startswith("History, not counted: other headline sweep") and "older run r3: m 4.000x" in lines[2]
    assert ab.history_speedups(older.iloc[:0], ["graph"]).empty and ab.history_findings(None) == []

def test_the_headline_statistic_is_the_headline_sweep_and_the_grid_is_kept_apart():
    rows = _two_sweeps()
    speed = pd.concat([ab.speedups(rows, arm=a) for a in ("graph", "compile")], ignore_index=True)
    head = ab.headline(speed, ctx=4).set_index("arm")
    assert head.loc["graph", "sweep"] == ab.HEADLINE and head.loc["graph", "speedup"] == pytest.approx(8.5 / 4)
    assert head.loc["compile", "sweep"] == ab.GRID and head.loc["compile", "speedup"] == pytest.approx(4.0)
    apart = ab.kept_apart(speed, ctx=4)
    assert list(apart["arm"]) == ["graph"] and list(apart["sweep"]) == [ab.GRID]
    [line] = ab.sweep_findings(speed, headline_ctx=4)
    v = line.values
    assert (v["sweep"], v["sessions_min"], v["sessions_max"], v["speedup_min"]) == (ab.HEADLINE, 4, 4, pytest.approx(8.5 / 4))
    assert (v["apart_sweep"], v["apart_sessions_max"], v["apart_speedup_max"]) == (ab.GRID, 3, pytest.approx(3.0))
    assert "keeps apart the 3 of the grid sweep" in line  # the sentence renders its values
    found = ab.findings(speed, pd.DataFrame(), pd.DataFrame(columns=["gpu", "value", "ci_low", "ci_high"]), 4)
    graph = next(f.values for f in found if f.values.get("arm") == "graph" and "speedup" in f.values)
    assert (graph["speedup"], graph["sessions"], graph["sweep"]) == (pytest.approx(8.5 / 4), 4, ab.HEADLINE)
    by_ctx = next(f.values for f in found if "speedup_ctx4" in f.values)
    assert by_ctx["speedup_ctx4"] == pytest.approx(3.0)  # the grid sweep's, not the headline's 2.125


def test_the_arm_table_pools_no_sweeps():
    rows = _two_sweeps()
    specs = pd.DataFrame({"gpu": ["g"], "bandwidth_gbps": [1.0]})
    with pytest.raises(ValueError, match="pools no sweeps"):
        ab.arm_table(rows, specs, {"m": CFG})
    table = ab.arm_table(ab.of_sweep(rows, ab.GRID), specs, {"m": CFG}).iloc[0]
    assert table["sessions_eager"] == 3 and table["speedup_graph"] == pytest.approx(3.0)
