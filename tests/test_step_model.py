"""Notebook 07's reading side on hand-made rows: the floors of a batch step, the two-term fit (a known case recovered
exactly), the batch within 10 % of the bandwidth floor, the compute crossover, the size below which the fixed cost
is more than half the step, the paper's points under the model, and each claim (W1, W2a, W2b) both ways."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from decodegap import accounting, hardware, published, sessions
from decodegap.analysis import where_the_thesis_ends as w
from decodegap.claims import rules, verdicts
from decodegap.claims import where_the_thesis_ends as claims_scope
from decodegap.claims.evidence import Evidence
from decodegap.harness import models


def frame(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text.strip()), skipinitialspace=True)


TINY = {"llama-tiny": models.load_spec("llama-tiny").config, "qwen2-tiny": models.load_spec("qwen2-tiny").config}
SPECS = frame("""
gpu, bandwidth_gbps, bf16_tflops_dense
cpu-test, 10, 0.001
""")


# ------------------------------------------------------------------------------------------ floors and cells
def test_floors_of_a_batch_step_by_hand():
    # llama-tiny: W_all 213,632 bytes, K = 256 bytes per token (tests/test_accounting.py); 10 GB/s
    f1 = w.floors(TINY["llama-tiny"], 100, 1, 10, 0.001)
    f4 = w.floors(TINY["llama-tiny"], 100, 4, 10, 0.001)
    assert f1["t_floor_bw_ms"] == pytest.approx(239_232 / 10e9 * 1e3)
    assert f4["t_floor_bw_ms"] == pytest.approx(316_032 / 10e9 * 1e3)
    # compute: 2 * 90,112 * 4 FLOPs at 1e9 FLOP/s = 0.720896 ms, above the bandwidth floor: t_floor is the larger
    assert f4["t_floor_compute_ms"] == pytest.approx(720_896 / 1e9 * 1e3)
    assert f4["t_floor_ms"] == f4["t_floor_compute_ms"]
    assert np.isnan(w.floors(TINY["llama-tiny"], 100, 4, 10, np.nan)["t_floor_compute_ms"])


ROWS = """
run_id, session, gpu, model, ctx, max_cache_len, arm, attn, quant, step, step_ms, status, reason, batch
20261203T000000-aaaaaa, 100, cpu-test, llama-tiny, 100, 110, eager, sdpa, bf16, 0, 9.0, warmup, , 4
20261203T000000-aaaaaa, 100, cpu-test, llama-tiny, 100, 110, eager, sdpa, bf16, 1, 2.0, ok, , 4
20261203T000000-aaaaaa, 100, cpu-test, llama-tiny, 100, 110, eager, sdpa, bf16, 2, 4.0, ok, , 4
20261203T000000-aaaaaa, 101, cpu-test, llama-tiny, 100, 110, eager, sdpa, bf16, 1, 5.0, ok, , 4
20261203T000000-aaaaaa, 101, cpu-test, llama-tiny, 100, 110, eager, sdpa, bf16, 2, 5.0, ok, , 4
20261201T000000-bbbbbb, 100, cpu-test, llama-tiny, 100, 110, eager, sdpa, bf16, 1, 50.0, ok, , 4
"""


def test_cell_table_of_a_batch_cell_from_its_newest_run():
    rows = w.newest_run_per_cell(frame(ROWS))  # the older run's 50 ms is another run: never pooled
    cells = w.cell_table(rows, SPECS, TINY)
    assert len(cells) == 1
    c = cells.iloc[0]
    # session medians 3.0 (2, 4) and 5.0; the median of the two is 4.0, the range 3.0-5.0
    assert (c.t_obs_ms, c.t_min_ms, c.t_max_ms, c.sessions) == (4.0, 3.0, 5.0, 2)
    assert c.noise == pytest.approx(5 / 3 - 1)
    assert c.bytes_W_all == 316_032 and c.n_layers == 2
    assert c.tokens_per_s_per_stream == 250.0 and c.tokens_per_s_aggregate == 1000.0
    assert c.r_floor == pytest.approx(316_032 / 10e9 * 1e3 / 4.0)


def test_cells_of_a_resumed_sweep_keep_both_runs_sessions_and_other_cells_their_newest_run():
    """newest_cells: a cell of notebook 07's own sweeps cut and resumed (run aaaaaa session 100, then run cccccc
    sessions 101 and 102) keeps all three sessions, as its rules read them (scope_rows); a cell whose newest run is of
    the grid's band (sessions 0 and 1 from two runs) keeps its newest run's session alone."""
    rows = frame("""
run_id, session, gpu, model, ctx, max_cache_len, arm, attn, quant, step, step_ms, status, reason, batch
20261203T000000-aaaaaa, 100, cpu-test, llama-tiny, 100, 110, eager, sdpa, bf16, 1, 2.0, ok, , 1
20261203T010000-cccccc, 101, cpu-test, llama-tiny, 100, 110, eager, sdpa, bf16, 1, 4.0, ok, , 1
20261203T010000-cccccc, 102, cpu-test, llama-tiny, 100, 110, eager, sdpa, bf16, 1, 6.0, ok, , 1
20261203T000000-aaaaaa, 0, cpu-test, llama-tiny, 200, 210, eager, sdpa, bf16, 1, 7.0, ok, , 1
20261203T010000-cccccc, 1, cpu-test, llama-tiny, 200, 210, eager, sdpa, bf16, 1, 9.0, ok, , 1
""")
    cells = w.cell_table(w.newest_cells(rows), SPECS, TINY).set_index("ctx")
    assert (cells.loc[100, "sessions"], cells.loc[100, "t_obs_ms"]) == (3, 4.0)  # newest run alone: 2 sessions, 5.0
    assert (cells.loc[200, "sessions"], cells.loc[200, "t_obs_ms"]) == (1, 9.0)


def test_rows_without_a_batch_column_read_as_batch_1():
    rows = frame(ROWS).drop(columns="batch")
    assert set(w.with_batch(rows)["batch"]) == {1}
    assert w.cell_table(w.newest_run_per_cell(rows), SPECS, TINY).iloc[0].bytes_W_all == 239_232



UNTIMED = """
run_id, session, gpu, model, ctx, max_cache_len, arm, attn, quant, step, step_ms, status, reason, batch
20261203T000000-aaaaaa, 100, cpu-test, llama-tiny, 100, 110, eager, sdpa, bf16, 1, 2.0, ok, , 1
20261203T000000-aaaaaa, 100, cpu-test, llama-tiny, 100, 110, lean_graph, sdpa, bf16, , , oom, out of memory: CUDA out of memory. Tried to allocate 540.00 MiB. GPU 0 has 79 GiB. More, 1
20261203T000000-aaaaaa, 100, cpu-test, llama-tiny, 200, 210, lean_graph, sdpa, bf16, , , oom, out of memory: again, 1
20261204T000000-cccccc, 100, cpu-test, llama-tiny, 200, 210, lean_graph, sdpa, bf16, , , oom, out of memory: the newest run's, 1
20261203T000000-aaaaaa, 100, cpu-test, llama-tiny, 100, 110, lean_fused_graph, sdpa, bf16, , , unavailable, takes one row, 4
20261203T000000-aaaaaa, 101, cpu-test, llama-tiny, 100, 110, lean_fused_graph, sdpa, bf16, , , unavailable, takes one row, 4
20261203T000000-aaaaaa, 100, cpu-test, llama-tiny, 200, 210, graph, sdpa, bf16, , , oom, out of memory: once, 1
20261203T000000-aaaaaa, 101, cpu-test, llama-tiny, 200, 210, graph, sdpa, bf16, 1, 3.0, ok, , 1
20261201T000000-bbbbbb, 100, cpu-test, llama-tiny, 100, 110, graph, sdpa, bf16, , , oom, out of memory: old, 1
20261203T000000-aaaaaa, 100, cpu-test, llama-tiny, 100, 110, graph, sdpa, bf16, 1, 1.0, ok, , 1
20261203T000000-aaaaaa, 5, cpu-test, llama-tiny, 100, 110, compile, sdpa, bf16, , , oom, not notebook 07's session band, 1
"""


def test_the_cells_a_sweep_could_not_time_are_named_not_dropped():
    untimed = w.untimed_cells(w.scope_rows(frame(UNTIMED)))
    # timed cells (eager; graph at ctx 200 whose other session timed it; graph at ctx 100, timed by the newer run)
    # and a row outside notebook 07's band of sessions are not listed
    assert [(r.arm, r.ctx, r.batch, r.status, r.sessions) for r in untimed.itertuples()] == [
        ("lean_graph", 100, 1, "oom", 1), ("lean_fused_graph", 100, 4, "unavailable", 2),
        ("lean_graph", 200, 1, "oom", 1)]
    assert list(untimed.reason) == [  # each cell's newest run's reason
        "out of memory: CUDA out of memory. Tried to allocate 540.00 MiB. GPU 0 has 79 GiB. More", "takes one row",
        "out of memory: the newest run's"]
    assert set(w.cell_table(w.scope_rows(frame(UNTIMED)), SPECS, TINY)["arm"]) == {"eager", "graph"}
    lines = w.untimed_findings(untimed)
    assert lines == [
        "cpu-test llama-tiny: 2 cell(s) of notebook 07's sweeps not timed (oom): lean_graph at ctx 100, 200, batch 1; "
        "the sweep recorded: out of memory: CUDA out of memory. Tried to allocate 540.00 MiB. GPU 0 has 79 GiB.",
        "cpu-test llama-tiny: 1 cell(s) of notebook 07's sweeps not timed (unavailable): lean_fused_graph at ctx 100, "
        "batch 4; the sweep recorded: takes one row."]
    # cells that are not every combination of arm, context and batch are listed one by one
    mixed = untimed.assign(status="oom")
    assert w.untimed_findings(mixed)[0].split("(oom): ")[1].startswith(
        "lean_graph at ctx 100, batch 1; lean_fused_graph at ctx 100, batch 4; lean_graph at ctx 200, batch 1;")
    assert w.untimed_findings(w.untimed_cells(frame(UNTIMED).iloc[:0])) == []


def test_the_findings_count_each_gpus_cells_by_their_sessions():
    """ROWS' cell has two sessions; UNTIMED's three timed cells of notebook 07's band one each (its compile row is
    another notebook's session): the GPU's line counts them so, and says a one-session cell has no noise."""
    pub = published.load()
    configs = {**TINY, **models.configs(set(pub["model"].dropna()))}
    t = w.replay(pd.concat([frame(ROWS), frame(UNTIMED)], ignore_index=True), SPECS, pub, configs)
    line = w.findings(t)[0]
    assert line.startswith("cpu-test: 4 cells of notebook 07's sweeps, models llama-tiny, batches 1, 4, contexts 100, "
                           "200; ")
    assert line.endswith("1 cells of 2 sessions, 3 cells of 1 session (W2a's noise is a cell's session range: none "
                         "with one session).")

def test_a_model_without_a_config_or_a_gpu_without_specs_is_named():
    with pytest.raises(KeyError, match="llama-tiny.*data/models"):
        w.cell_table(frame(ROWS), SPECS, {})
    with pytest.raises(KeyError, match="cpu-test.*gpus.csv"):
        w.cell_table(frame(ROWS), SPECS.assign(gpu="other"), TINY)


def test_the_registry_has_a_dense_bf16_peak_for_every_gpu():
    specs = hardware.specs_table()
    assert (specs["bf16_tflops_dense"] > 0).all() and specs["bf16_tflops_note"].str.contains("datasheet|specif").all()
    h = specs.set_index("gpu")
    assert h.loc["h100-sxm", "bf16_tflops_dense"] == h.loc["h200", "bf16_tflops_dense"]  # one GH100 die


# ------------------------------------------------------------------------------------------------ the fit
def test_a_known_two_term_step_is_recovered_exactly():
    tf = np.array([1.0, 2.0, 4.0, 8.0, 3.0, 6.0])
    L = np.array([24, 24, 24, 36, 36, 36])
    t = tf / 0.5 + 1.0 + 0.1 * L  # a = 0.5, c0 = 1 ms, c1 = 0.1 ms per layer
    got = w.fit_one(tf, L, t)
    assert got["fitted"] and got["a"] == pytest.approx(0.5, abs=1e-9)
    assert got["c0_ms"] == pytest.approx(1.0, abs=1e-9) and got["c1_ms"] == pytest.approx(0.1, abs=1e-9)
    assert got["rms_rel_residual"] < 1e-12
    one = w.fit_one(tf[:3], L[:3], tf[:3] / 0.8 + 5.0)  # one layer count: c1 is 0, c0 the fixed cost
    assert one["a"] == pytest.approx(0.8) and one["c0_ms"] == pytest.approx(5.0) and one["c1_ms"] == 0.0
    assert not w.fit_one([2.0, 2.0, 2.0], [24, 28, 32], [5.0, 6.0, 7.0])["fitted"]  # one floor: nothing to fit


def _cells(t_floor, n_layers, t, noise=0.0, arm="eager", gpu="h200"):
    n = len(t)
    return pd.DataFrame(dict(gpu=gpu, model=[f"m{i}" for i in range(n)], ctx=2048, batch=1, arm=arm, attn="sdpa",
                             quant="bf16", t_floor_ms=t_floor, t_floor_bw_ms=t_floor, n_layers=n_layers, t_obs_ms=t,
                             noise=noise, params=np.arange(n) + 1))


TF = np.array([1.0, 2.0, 4.0, 8.0, 3.0, 6.0, 12.0, 16.0, 5.0, 10.0])
LAYERS = np.array([24, 24, 24, 36, 36, 36, 48, 48, 64, 64])
EXACT = TF / 0.5 + 1.0 + 0.1 * LAYERS


def _w2a(cells):
    fits = w.fit(cells, w.MIN_POINTS)
    res = w.residuals(cells, fits, w.REL_TOL)
    return fits, w.fit_verdicts(res, fits, w.EXPLAINED, w.MIN_POINTS)


def test_w2a_holds_when_the_model_explains_the_cells():
    fits, v = _w2a(_cells(TF, LAYERS, EXACT))
    assert v.iloc[0].outcome == "holds" and v.iloc[0].explained == 10
    judged, ours, _ = claims_scope.step_model(fits, v, w.REL_TOL, {"h100-sxm"})
    assert [j.outcome for j in judged if j.source == rules.OTHER_GPU] == [verdicts.HOLDS]
    assert "a 0.50, c0 1.00 ms, c1 100 us per layer" in ours



def test_a_fit_past_the_datasheets_rate_is_said_to_trade_its_terms():
    """The same ten cells with a = 0.5 and with a = 1.25 (a step faster than its floor at the datasheet's rate, as a
    fit can give when its fixed terms go negative): both hold on their residuals; the second's sentence says its a is
    outside (0, 1], the first's does not."""
    for a, past in ((0.5, False), (1.25, True)):
        fits, v = _w2a(_cells(TF, LAYERS, TF / a + 1.0 + 0.1 * LAYERS))
        line = w.fit_sentence(v.iloc[0], fits.set_index(w.FIT_KEY).iloc[0])
        assert line.startswith(f"h200 eager (sdpa): t = t_floor / {a:.2f} + 1.00 ms + n_layers x 100 us; 10 of 10")
        assert ("its a is outside (0, 1]" in line) == past and line.split("; ")[1].endswith("holds" + ("" if past else "."))

def test_w2a_fails_when_cells_fall_outside_beyond_noise_and_is_inconclusive_within_it():
    bent = EXACT.copy()
    bent[[0, 3, 6, 9]] *= [1.6, 0.5, 1.7, 0.6]  # four cells of ten far off the two terms
    fits, v = _w2a(_cells(TF, LAYERS, bent))
    assert v.iloc[0].outcome == "fails" and v.iloc[0].unexplained_share > 1 - w.EXPLAINED
    judged, _, _ = claims_scope.step_model(fits, v, w.REL_TOL, {"h100-sxm"})
    assert verdicts.FAILS in [j.outcome for j in judged]
    _, noisy = _w2a(_cells(TF, LAYERS, bent, noise=2.0))  # sessions spread wider than any residual
    assert noisy.iloc[0].outcome == "inconclusive"
    _, few = _w2a(_cells(TF[:5], LAYERS[:5], EXACT[:5]))  # fewer than MIN_POINTS cells: not testable
    assert not few.iloc[0].testable


# ------------------------------------------------------------------------------- where the thesis ends
CELLS = """
gpu, model, ctx, batch, arm, attn, t_obs_ms, t_floor_bw_ms, r_floor
h200, m, 2048, 1, eager, sdpa, 10.0, 2.0, 0.2
h200, m, 2048, 4, eager, sdpa, 6.0, 3.5, 0.58
h200, m, 2048, 8, eager, sdpa, 5.0, 4.8, 0.96
h200, m, 2048, 16, eager, sdpa, 7.0, 6.5, 0.93
h200, m, 2048, 1, graph, sdpa, 9.0, 2.0, 0.22
h200, m, 2048, 8, graph, sdpa, 8.0, 4.8, 0.6
h200, k, 2048, 1, eager, sdpa, 9.0, 2.0, 0.22
"""


def test_the_batch_within_ten_percent_of_the_floor_per_arm():
    got = w.batch_within_floor(frame(CELLS)).set_index("arm")
    assert got.loc["eager", "batch_within"] == "8"  # 5.0 <= 1.1 x 4.8; batch 4's 6.0 > 1.1 x 3.5
    assert got.loc["graph", "batch_within"] == "not reached up to 8"  # 8.0 > 5.28
    assert len(got) == 2  # model k has one batch: no row
    assert (w.batch_within_floor(frame(CELLS).iloc[0:0]).iloc[0] == w.NOT_MEASURED).all()


def test_the_batch_where_the_compute_floor_passes_the_bandwidth_floor():
    cfg = TINY["llama-tiny"]
    b_star = w.compute_crossover_batch(cfg, 100, 10, 0.001)
    # W / BW over (2 P / F - K / BW): 213,632 / 1e10 s over (2 x 90,112 / 1e9 - 25,600 / 1e10) s per sequence
    assert b_star == pytest.approx((213_632 / 1e10) / (2 * 90_112 / 1e9 - 25_600 / 1e10))
    at = w.floors(cfg, 100, 1, 10, 0.001)  # at batch 1 (> B* = 0.12) the compute floor is already above
    assert at["t_floor_compute_ms"] > at["t_floor_bw_ms"]
    # a GPU whose FLOPs outrun a sequence's KV bytes: the compute floor never passes
    assert w.compute_crossover_batch(cfg, 100, 10, 1e6) == np.inf
    assert w.first_batch_past(np.inf, [1, 8]) == "never" and w.first_batch_past(3.2, [1, 2, 4, 8]) == "4"
    assert w.first_batch_past(100.0, [1, 8]) == "none measured"
    # at the longest crossing context a sequence's FLOPs take exactly as long as its KV bytes
    ctx_star = w.longest_crossing_context(cfg, 10, 0.001)
    assert ctx_star == pytest.approx((2 * 90_112 / 1e9) / (256 / 1e10))


def test_the_size_below_which_the_fixed_cost_is_more_than_half_the_step():
    res = frame("""
gpu, arm, attn, ctx, batch, model, params, fixed_ms, t_obs_ms
h200, eager, sdpa, 2048, 1, small, 1, 6.0, 8.0
h200, eager, sdpa, 2048, 1, mid, 2, 6.0, 10.0
h200, eager, sdpa, 2048, 1, large, 3, 6.0, 20.0
h200, graph, sdpa, 2048, 1, small, 1, 1.0, 4.0
h200, graph, sdpa, 2048, 1, large, 3, 1.0, 15.0
""")
    got = w.fixed_share_by_size(res).set_index("arm")
    assert got.loc["eager", "below_size"] == "between mid and large"  # 0.75, 0.60 above half; 0.30 not
    assert got.loc["eager", "fixed_shares"] == "0.75,0.60,0.30"
    assert got.loc["graph", "below_size"] == "none above (from small)"


def test_the_fixed_share_by_batch_carries_its_fits_outcome():
    res = frame("""
gpu, arm, attn, ctx, batch, model, params, fixed_ms, t_obs_ms
h200, graph, sdpa, 2048, 1, m, 8, 2.0, 4.0
h200, graph, sdpa, 2048, 8, m, 8, 2.0, 5.0
h200, graph, sdpa, 2048, 64, m, 8, 2.0, 16.0
h200, eager, sdpa, 2048, 1, m, 8, 9.0, 10.0
h200, eager, sdpa, 2048, 1, other, 1, 9.0, 12.0
""")
    verdicts = frame("""
gpu, arm, attn, outcome
h200, graph, sdpa, holds
""")
    got = w.fixed_share_by_batch(res, verdicts)
    assert len(got) == 1  # eager has one batch per model: no row
    r = got.iloc[0]
    assert (r.batches, r.fixed_shares, r.fit_outcome, r.fixed_ms) == ("1,8,64", "0.50,0.40,0.12", "holds", 2.0)
    none = w.fixed_share_by_batch(res[res.arm == "eager"], verdicts)
    assert (none == w.NOT_MEASURED).all().all()


# ------------------------------------------------------------------------------------------- W1 both ways
def _shares(f1, fmax, spread):
    """eager / graph cells of one model at B = 1 and 64 with launch share f and a relative session spread."""
    out = []
    for b, f in ((1, f1), (64, fmax)):
        eager = 10.0 * b ** 0.5
        graph = eager * (1 - f)
        for arm, t in (("eager", eager), ("graph", graph)):
            out.append(dict(gpu="h200", model="m", ctx=2048, batch=b, arm=arm, attn="sdpa", t_obs_ms=t,
                            t_min_ms=t / (1 + spread), t_max_ms=t * (1 + spread)))
    return w.launch_shrinks(w.launch_shares(pd.DataFrame(out)), w.B_LARGE)


def test_w1_holds_fails_and_is_inconclusive():
    assert _shares(0.4, 0.1, 0.01).iloc[0].outcome == "holds"
    assert _shares(0.1, 0.4, 0.01).iloc[0].outcome == "fails"
    assert _shares(0.3, 0.25, 0.2).iloc[0].outcome == "inconclusive"  # the spread covers the fall
    judged, ours, _ = claims_scope.launch_tax(_shares(0.4, 0.1, 0.01), w.B_LARGE, {"h100-sxm"})
    assert [(j.source, j.outcome) for j in judged] == [(rules.CLAIM_GPU, verdicts.NOT_TESTABLE),
                                                       (rules.OTHER_GPU, verdicts.HOLDS)]
    assert "at B = 64" in ours
    judged, _, _ = claims_scope.launch_tax(_shares(0.1, 0.4, 0.01), w.B_LARGE, {"h200"})  # as if a paper GPU
    assert judged[0].source == rules.CLAIM_GPU and judged[0].outcome == verdicts.FAILS


def test_w1_needs_a_large_batch():
    cells = _shares(0.4, 0.1, 0.01)
    assert not cells.empty
    small = pd.DataFrame([dict(gpu="h200", model="m", ctx=2048, batch=b, arm=a, attn="sdpa", t_obs_ms=5.0,
                               t_min_ms=5.0, t_max_ms=5.0) for b in (1, 4) for a in ("eager", "graph")])
    assert w.launch_shrinks(w.launch_shares(small), w.B_LARGE).empty  # B_max 4 < B_LARGE
    judged, _, text = claims_scope.launch_tax(w.launch_shrinks(w.launch_shares(small), w.B_LARGE), w.B_LARGE, set())
    assert judged[0].outcome == verdicts.NOT_TESTABLE and "not measured yet" in text


# ------------------------------------------------------------------------------------------ W2b both ways
def test_the_published_points_come_from_the_paper_table():
    pub = published.load()
    pts = w.published_points(pub, models.configs({"qwen2.5-7b"})).set_index("gpu")
    h100_eager = published.select(pub, "quantisation", "step_ms", gpu="h100-sxm", arm="eager").value.iloc[0]
    l4_speed = published.select(pub, "cuda_graphs", "speedup", gpu="l4").value.iloc[0]
    assert pts.loc["h100-sxm", "eager_ms"] == h100_eager
    assert pts.loc["l4", "graph_ms"] == pytest.approx(pts.loc["l4", "eager_ms"] / l4_speed)
    ci = published.select(pub, "cuda_graphs", "speedup", gpu="h100-sxm").iloc[0]
    assert pts.loc["h100-sxm", "graph_lo_ms"] == pytest.approx(h100_eager / ci.ci_high)
    bytes_ = accounting.step_bytes(models.load_spec("qwen2.5-7b").config, 2048)
    assert pts.loc["l4", "t_floor_bw_ms"] == pytest.approx(bytes_ / 300e9 * 1e3)


def test_solving_two_numbers_per_gpu_by_hand():
    a, F = w.solve_two_numbers(10.0, 8.0, 4.0, 0.5)  # F = 2 / 0.5 = 4; a = 4 / (10 - 4)
    assert F == 4.0 and a == pytest.approx(4 / 6)
    a, F = w.solve_two_numbers(10.0, 8.0, 4.0, 0.1)  # F = 20 > the step: no efficiency explains it
    assert F == 20.0 and a < 0


def _w2b(lam):
    pts = w.published_points(published.load(), models.configs({"qwen2.5-7b"}))
    lams = pd.DataFrame([dict(gpu="h200", n_layers=28, fixed_eager_ms=1.0, fixed_graph_ms=1 - lam, lam=lam)])
    solved = w.published_fit(pts, lams, w.A_MAX)
    return pts, solved, w.published_outcome(solved)


def test_w2b_holds_when_both_paper_gpus_get_a_physical_a_and_f():
    pts, solved, outcome = _w2b(0.5)
    assert set(outcome["outcome"]) == {"holds"}
    judged, pub, ours, _ = claims_scope.published_model(pts, solved, outcome)
    assert judged.source == rules.PAPER and judged.outcome == verdicts.HOLDS
    assert "h100-sxm eager 14.83 ms" in pub and "h100-sxm: a " in ours  # the published value, read from paper.csv


def test_w2b_fails_when_the_graph_removes_too_little_of_the_fixed_cost():
    pts, solved, outcome = _w2b(0.1)  # the H100's F = (14.83 - 11.78) / 0.1 > its step
    assert outcome.set_index("gpu").loc["h100-sxm", "outcome"] == "fails"
    judged, _, _, _ = claims_scope.published_model(pts, solved, outcome)
    assert judged.outcome == verdicts.FAILS
    judged, _, _, text = claims_scope.published_model(pts, solved.iloc[0:0], w.published_outcome(solved.iloc[0:0]))
    assert judged.outcome == verdicts.NOT_TESTABLE and "not measured yet" in text


# ---------------------------------------------------------------------------------------- the claims rows
def _evidence(scope) -> Evidence:
    empty = pd.DataFrame()
    return Evidence(published=empty, specs=empty, configs={}, cells=empty, speed=empty, decomp=empty,
                    attention=empty, quant_cells=empty, quant_bytes=empty, costs=empty, prices=empty, scope=scope)


def test_the_rows_are_not_testable_without_rows_and_labelled_with_them():
    rows = {r["id"]: r for r in claims_scope.where_the_thesis_ends(_evidence({}))}
    assert set(rows) == {"W1", "W2a", "W2b"}
    assert all(r["category"] == verdicts.NOT_TESTABLE for r in rows.values())
    fits, v = _w2a(_cells(TF, LAYERS, EXACT))
    pts, solved, outcome = _w2b(0.5)
    scope = dict(launch_shrinks=_shares(0.4, 0.1, 0.01), fits=fits, fit_verdicts=v, published=pts,
                 published_fit=solved, published_outcome=outcome)
    rows = {r["id"]: r for r in claims_scope.where_the_thesis_ends(_evidence(scope))}
    assert rows["W1"]["verdict"].startswith("tested on another GPU (h200") and rows["W1"]["verdict"].endswith("holds")
    assert rows["W2a"]["category"] == verdicts.OTHER_HOLDS and rows["W1"]["hardware"] == "h200"
    assert rows["W2b"]["category"] == verdicts.SUPPORTED


def test_the_rules_read_this_modules_thresholds_and_sessions():
    assert rules.get("W1").t("b_large") == w.B_LARGE
    assert rules.get("W2a").t("rel_tol") == w.REL_TOL and rules.get("W2a").t("min_points") == w.MIN_POINTS
    assert rules.get("W2b").t("a_max") == w.A_MAX
    band = f"session >= {sessions.SCOPE.start} and session < {sessions.SCOPE.stop}"
    assert band in rules.SCOPE_CELLS.query and band in rules.SCOPE_VERIFY.query


def test_remeasuring_notebook_07_names_each_axis_its_runs_measured():
    from decodegap.claims import remeasure

    assert remeasure.notebook_of(rules.get("W1")) == "07_where_the_thesis_ends"
    plans = [dict(models=["llama-3.1-8b"], contexts=[2048], batches=[1, 2, 64]),
             dict(models=["qwen2.5-0.5b", "qwen2.5-32b"], contexts=[2048, 8192], batches=[1])]
    assert remeasure.command("07_where_the_thesis_ends", plans) == (
        "python -m decodegap where-the-thesis-ends --axis batch --gpu <gpu> --models llama-3.1-8b --contexts 2048 "
        "--batches 1,2,64; python -m decodegap where-the-thesis-ends --axis size --gpu <gpu> "
        "--models qwen2.5-0.5b,qwen2.5-32b --contexts 2048,8192")


def test_the_figures_draw_batches_fits_and_the_papers_points_without_hiding_any():
    from decodegap.figures import checks, where_the_thesis_ends as plots

    cells = _cells(TF, LAYERS, EXACT).assign(batch=[1, 2, 4, 8, 16, 32, 64, 1, 1, 1], r_floor=TF / EXACT)
    cells.loc[7:, "arm"] = "lean_graph"
    pts, _, _ = _w2b(0.5)
    fig = plots.r_floor_vs_t_floor(cells, pts)
    assert checks.problems(fig) == []
    labels = [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]
    assert "batch 64" in labels and any(plots.OTHER in label for label in labels)
    # two GPUs: a panel each, titled, every cell drawn in its own GPU's panel and the paper's stars in both
    two = pd.concat([cells, cells.iloc[:3].assign(gpu="h100-sxm")], ignore_index=True)
    fig = plots.r_floor_vs_t_floor(two, pts)
    assert checks.problems(fig) == []
    assert [ax.get_title() for ax in fig.axes] == ["measured on the h100-sxm", "measured on the h200"]
    drawn = [sum(len(c.get_offsets()) for c in ax.collections) for ax in fig.axes]
    assert drawn == [3 + len(pts), len(cells) + len(pts)]  # the legend's entries draw no point
    fits = w.fit(cells, w.MIN_POINTS)
    resid = w.residuals(cells, fits, w.REL_TOL)
    moved = w.transferred(pts, fits.assign(arm="eager"))
    assert len(moved) == 2 and np.isfinite(moved["residual"]).all()  # both paper GPUs' eager step, predicted
    fig = plots.residuals(resid, moved, w.REL_TOL)
    assert checks.problems(fig) == [] and fig.axes  # a drawn axes, not the not-measured note


def test_the_crossover_findings_say_never_once_and_give_one_line_a_context():
    cross = frame("""
gpu, model, ctx, crossover_batch, longest_crossing_ctx
l4, a, 32, 486.4, 283.9
l4, b, 32, 437.2, 250.0
h200, a, 32, 226.0, 180.0
l4, a, 2048, inf, 283.9
h200, a, 2048, inf, 180.0
""")
    got = w.crossover_findings(cross)
    assert got[0].startswith("At every context measured from 2048 tokens the compute floor never passes")
    assert "for 1 models on 2 GPUs" in got[0] and "only below 180-284 tokens" in got[0]
    assert got[1:] == ["At ctx 32 the compute floor passes the bandwidth floor above a batch of 226-486 over 2 "
                       "models: l4 437-486; h200 226."]
    assert w.crossover_findings(cross.iloc[0:0]) == []
