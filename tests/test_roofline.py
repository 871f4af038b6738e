"""t_floor, R_floor and the cell table by hand on a small hand-made frame of decode rows."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from decodegap import hardware, records, roofline, stats
from decodegap.harness import models
from decodegap import accounting

LLAMA = models.load_spec("llama-3.1-8b").config
QWEN = models.load_spec("qwen2.5-7b").config
MISTRAL = models.load_spec("mistral-7b-v0.3").config
CONFIGS = {"llama-3.1-8b": LLAMA, "qwen2.5-7b": QWEN, "mistral-7b-v0.3": MISTRAL}

# Llama-3.1-8B at ctx 2048, bf16: W_all 16,060,522,496 + K 268,435,456 bytes; W_streamed 15,009,857,536 + K
LLAMA_2048_ALL = 16_060_522_496 + 268_435_456          # 16,328,957,952
LLAMA_2048_STREAMED = 15_009_857_536 + 268_435_456     # 15,278,292,992


def test_t_floor_ms_by_hand():
    assert accounting.t_floor_ms(16e9, 4800) == pytest.approx(16e9 / 4.8e12 * 1e3) == pytest.approx(3.3333333333)
    assert accounting.t_floor_ms(300e9, 300) == pytest.approx(1000.0)  # 300 GB at 300 GB/s: one second
    assert accounting.t_floor_ms(LLAMA_2048_ALL, 4800) == pytest.approx(3.40186624)


def test_r_floor_by_hand():
    assert accounting.r_floor(3.0, 12.0) == 0.25
    assert accounting.r_floor(5.0, 4.0) == 1.25  # faster than the floor: a bug to flag
    assert accounting.r_floor(accounting.t_floor_ms(16e9, 4800), 10.0) == pytest.approx(1 / 3)


def _row(session, model, ctx, arm, step, ms, status="ok", reason="", max_cache_len=None, gpu="h200"):
    return dict(run_id=f"run{session}", session=session, gpu=gpu, model=model, ctx=ctx,
                max_cache_len=max_cache_len if status in ("ok", "warmup") else None, arm=arm, attn="sdpa",
                quant="bf16", step=step if status in ("ok", "warmup") else None,
                step_ms=ms if status in ("ok", "warmup") else None, status=status, reason=reason)


def decode_dicts() -> list[dict]:
    rows = []
    # cell A: llama ctx 2048 eager. Session 0: median(10, 12, 14) = 12; session 1: median(16, 18, 20, 22) = 19.
    # warm-up rows (1000 ms) must not count. t_obs = median(12, 19) = 15.5, min 12, max 19.
    for s, times in ((0, [14.0, 10.0, 12.0]), (1, [20.0, 18.0, 22.0, 16.0])):
        rows.append(_row(s, "llama-3.1-8b", 2048, "eager", 0, 1000.0, "warmup", max_cache_len=2048 + 5))
        rows += [_row(s, "llama-3.1-8b", 2048, "eager", i, t, max_cache_len=2048 + 5) for i, t in enumerate(times)]
    # cell B: llama ctx 2048 graph at 2 ms, below the 3.40 ms floor: R_floor > 1 must be flagged.
    for s in (0, 1):
        rows += [_row(s, "llama-3.1-8b", 2048, "graph", i, 2.0, max_cache_len=2048 + 8) for i in range(3)]
    # cell C: llama ctx 16384 eager ran out of memory in both sessions: status rows only.
    for s in (0, 1):
        rows.append(_row(s, "llama-3.1-8b", 16384, "eager", None, None, "oom", "out of memory: test"))
    # cell D: qwen ctx 2048 eager, one session only: median(30, 40, 50) = 40.
    rows += [_row(0, "qwen2.5-7b", 2048, "eager", i, t, max_cache_len=2048 + 5) for i, t in enumerate([50.0, 30.0, 40.0])]
    return rows


def decode_rows() -> pd.DataFrame:
    return pd.DataFrame(decode_dicts(), columns=records.DECODE.names)


SPECS = pd.DataFrame({"gpu": ["h200", "l4"], "bandwidth_gbps": [4800.0, 300.0]})
BANDWIDTH = pd.DataFrame({"run_id": "b", "gpu": "h200", "method": "d2d_copy", "bytes_moved": 2 << 30,
                          "rep": [0, 1, 2, 3], "time_ms": 1.0, "bandwidth_gbps": [4000.0, 4200.0, 4100.0, 1.0],
                          "status": ["ok", "ok", "ok", "error"], "reason": ""})


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return roofline.cell_table(decode_rows(), SPECS, CONFIGS, BANDWIDTH)


def cell(table, model, ctx, arm):
    hit = table[(table["model"] == model) & (table["ctx"] == ctx) & (table["arm"] == arm)]
    assert len(hit) == 1, hit
    return hit.iloc[0]


def test_one_row_per_cell(table):
    assert len(table) == 4
    assert set(zip(table["model"], table["ctx"], table["arm"])) == {
        ("llama-3.1-8b", 2048, "eager"), ("llama-3.1-8b", 2048, "graph"),
        ("llama-3.1-8b", 16384, "eager"), ("qwen2.5-7b", 2048, "eager")}


def test_t_obs_is_the_median_of_session_medians(table):
    a = cell(table, "llama-3.1-8b", 2048, "eager")
    assert a["t_obs_ms"] == 15.5
    assert a["t_obs_min_ms"] == 12.0 and a["t_obs_max_ms"] == 19.0
    assert a["sessions"] == 2
    assert a["steps_per_session"] == 3  # the smaller session had 3 timed steps
    assert a["max_cache_len"] == 2053
    assert a["status"] == "ok" and a["flag"] == ""
    d = cell(table, "qwen2.5-7b", 2048, "eager")
    assert d["t_obs_ms"] == 40.0 and d["sessions"] == 1


def test_floors_and_r_floor_by_hand(table):
    a = cell(table, "llama-3.1-8b", 2048, "eager")
    assert a["bandwidth_gbps"] == 4800.0
    assert a["bytes_W_all"] == LLAMA_2048_ALL
    assert a["bytes_W_streamed"] == LLAMA_2048_STREAMED
    assert a["t_floor_ms_W_all"] == pytest.approx(16_328_957_952 / 4.8e12 * 1e3) == pytest.approx(3.40186624)
    assert a["r_floor_W_all"] == pytest.approx(3.40186624 / 15.5)
    assert a["t_floor_ms_W_streamed"] == pytest.approx(15_278_292_992 / 4.8e9)
    assert a["r_floor_W_streamed"] == pytest.approx(15_278_292_992 / 4.8e9 / 15.5)
    # measured copy bandwidth: median of the ok rows 4000, 4200, 4100 = 4100 GB/s (the error row is ignored)
    assert a["measured_gbps"] == 4100.0
    assert a["t_floor_measured_ms_W_all"] == pytest.approx(16_328_957_952 / 4.1e9)
    assert a["r_floor_measured_W_all"] == pytest.approx(16_328_957_952 / 4.1e9 / 15.5)
    d = cell(table, "qwen2.5-7b", 2048, "eager")
    # Qwen2.5-7B: 2 * 7,615,616,512 + 2*28*4*128*2048*2 = 15,231,233,024 + 117,440,512
    assert d["bytes_W_all"] == 15_348_673_536
    assert d["r_floor_W_all"] == pytest.approx(15_348_673_536 / 4.8e9 / 40.0)


def test_r_floor_above_one_is_flagged(table):
    b = cell(table, "llama-3.1-8b", 2048, "graph")
    assert b["t_obs_ms"] == 2.0
    assert b["r_floor_W_all"] == pytest.approx(3.40186624 / 2.0)
    assert b["r_floor_W_all"] > 1
    assert b["flag"] != ""
    assert "r_floor_W_all>1" in b["flag"].split(";")
    assert "r_floor_W_streamed>1" in b["flag"].split(";")  # 15.28e9 / 4.8e12 s = 3.18 ms > 2 ms
    assert "r_floor_measured_W_all>1" in b["flag"].split(";")


def test_oom_cell_keeps_its_status_with_nan_t_obs(table):
    c = cell(table, "llama-3.1-8b", 16384, "eager")
    assert c["status"] == "oom"
    assert c["reason"] == "out of memory: test"
    assert math.isnan(c["t_obs_ms"])
    assert math.isnan(c["r_floor_W_all"])
    assert c["flag"] == ""
    # the floor itself is still known: 16,060,522,496 + 8 * 268,435,456 bytes
    assert c["bytes_W_all"] == 16_060_522_496 + 2_147_483_648


def test_without_bandwidth_rows_the_measured_floor_is_nan():
    t = roofline.cell_table(decode_rows(), SPECS, CONFIGS)
    assert t["measured_gbps"].isna().all()
    assert t["r_floor_measured_W_all"].isna().all()
    assert cell(t, "llama-3.1-8b", 2048, "eager")["r_floor_W_all"] == pytest.approx(3.40186624 / 15.5)


def test_cell_table_from_a_csv_round_trip(tmp_path, table):
    """The same rows written with records.append_rows and read back validated give the same table."""
    path = tmp_path / "decode.csv"
    records.append_rows(path, records.DECODE, decode_dicts())
    again = roofline.cell_table(records.read_csv(path), SPECS, CONFIGS, BANDWIDTH)
    cols = ["model", "ctx", "arm", "t_obs_ms", "sessions", "status", "flag", "r_floor_W_all", "r_floor_measured_W_all"]
    pd.testing.assert_frame_equal(again[cols], table[cols], check_dtype=False)


def test_measured_bandwidth_median_per_gpu():
    got = roofline.measured_bandwidth(BANDWIDTH)
    assert got.to_dict() == {"h200": 4100.0}


def test_floors_by_gpu_shape_and_values():
    specs = hardware.specs_table()
    floors = roofline.floors_by_gpu(CONFIGS, specs, ctx=2048)
    assert floors.shape == (3, 6)
    assert list(floors.columns) == ["l4", "l40s", "a100-80gb", "h100-sxm", "h200", "b200"]
    assert set(floors.index) == set(CONFIGS)
    assert floors.loc["llama-3.1-8b", "h200"] == pytest.approx(3.40186624)
    assert floors.loc["llama-3.1-8b", "l4"] == pytest.approx(16_328_957_952 / 300e9 * 1e3)  # 54.43 ms
    assert floors.loc["qwen2.5-7b", "b200"] == pytest.approx(15_348_673_536 / 8000e9 * 1e3)
    # mistral: 2 * 7,248,023,552 + 268,435,456 bytes at 3350 GB/s
    assert floors.loc["mistral-7b-v0.3", "h100-sxm"] == pytest.approx((14_496_047_104 + 268_435_456) / 3350e6)
    streamed = roofline.floors_by_gpu(CONFIGS, specs, ctx=2048, convention="W_streamed")
    assert streamed.loc["llama-3.1-8b", "h200"] == pytest.approx(15_278_292_992 / 4.8e9)
    assert (streamed < floors).all().all()
    assert np.all(floors.to_numpy() > 0)


def test_default_rows_are_sdpa_bf16_and_the_hf_arms_only():
    base = decode_dicts()[:4]  # cell A, session 0: a warm-up row and three timed rows, eager, sdpa, bf16
    others = [dict(r, attn="fa2") for r in base] + [dict(r, quant="int4-triton") for r in base]
    others += [dict(r, arm="lean_attn_graph") for r in base]
    rows = pd.DataFrame(base + [dict(r, arm="hf_default") for r in base] + others, columns=records.DECODE.names)
    kept = roofline.default_rows(rows)
    assert len(kept) == 8 and set(kept["arm"]) == {"eager", "hf_default"}
    assert set(kept["attn"]) == {"sdpa"} and set(kept["quant"]) == {"bf16"}


def test_one_sweep_keeps_each_cells_sessions_of_one_plan_and_says_what_it_left_out():
    """A grid run (two contexts) and a headline top-up (one context) both measured ctx 2048: the cell keeps the
    grid's sessions only; a resumed run of the grid's plan pools with it; a run without a plan is its own sweep."""
    grid = dict(contexts=[2048, 4096], arms=["eager"])
    plans = {("h200", "g1"): grid, ("h200", "g2"): dict(grid), ("h200", "h"): dict(contexts=[2048], arms=["eager"])}

    def row(run, session, ctx, ms, gpu="h200"):
        return dict(run_id=run, session=session, gpu=gpu, model="m", ctx=ctx, max_cache_len=ctx + 40, arm="eager",
                    attn="sdpa", quant="bf16", step=0, step_ms=ms, status="ok", reason=None)

    rows = pd.DataFrame([row("g1", 0, 2048, 20.0), row("g2", 1, 2048, 21.0), row("g1", 0, 4096, 22.0),
                         row("h", 2, 2048, 27.0), row("h", 3, 2048, 27.0), row("x", 0, 2048, 5.0, gpu="l4")])
    kept = roofline.one_sweep(rows, plans)
    assert sorted(kept[kept.gpu == "h200"].run_id) == ["g1", "g1", "g2"]  # the headline top-up left out
    assert list(kept[kept.gpu == "l4"].run_id) == ["x"]  # no plan: a sweep of its own, kept where it is alone
    lines = roofline.left_out_sweeps(rows, kept, plans)
    assert lines == ["h200 eager, ctx 2048: 2 sessions of another sweep (run h) are left out, not pooled: their "
                     "median step over 1 model 27.00 ms against 20.50 ms in the 2 sessions kept (roofline.one_sweep)."]
    assert len(roofline.default_rows(rows, plans)) == 4 and len(roofline.default_rows(rows)) == 6


def test_one_sweep_takes_a_session_measured_by_two_runs_of_its_plan_from_the_newest():
    """Two runs of one plan that both measured session 0 of a cell (the second started without the first's rows, as a
    call started before the last call's rows were merged): the session is the newest run's steps alone, never the
    two processes pooled into one session; the sessions only one run measured stay, and cell_table counts 2."""
    plans = {("h200", r): dict(contexts=[2048], arms=["eager"]) for r in ("20261206T01-a", "20261206T02-b")}

    def row(run, session, step, ms):
        return dict(run_id=run, session=session, gpu="h200", model="llama-tiny", ctx=2048, max_cache_len=2088,
                    arm="eager", attn="sdpa", quant="bf16", step=step, step_ms=ms, status="ok", reason=None)

    rows = pd.DataFrame([row("20261206T01-a", 0, 0, 10.0), row("20261206T01-a", 0, 1, 10.0),
                         row("20261206T01-a", 1, 0, 12.0), row("20261206T02-b", 0, 0, 30.0),
                         row("20261206T02-b", 0, 1, 30.0)])
    kept = roofline.one_sweep(rows, plans)
    assert sorted(zip(kept.run_id, kept.session)) == [("20261206T01-a", 1), ("20261206T02-b", 0), ("20261206T02-b", 0)]
    medians = stats.session_medians(kept, roofline.CELL)
    assert sorted(medians.step_ms) == [12.0, 30.0]  # pooled, session 0 would be the median of 10, 10, 30, 30
    assert roofline.left_out_sweeps(rows, kept, plans) == [
        "h200 eager, ctx 2048: 1 session measured again by a later run of the same sweep (run 20261206T01-a) is left "
        "out, not pooled: their median step over 1 model 10.00 ms against 30.00 ms in the 2 sessions kept "
        "(roofline.one_sweep)."]


def test_left_out_by_path_names_each_paths_left_out_sessions_in_one_sentence():
    """Notebook 04's quantised cells: a session two runs of one sweep measured (the older left out) and a session of
    another, narrower sweep, each said once per GPU and path; bf16 (notebook 01's sentences) is not repeated."""
    plans = {("h200", "20261206T01-a"): dict(contexts=[2048, 4096], arms=["eager"]),
             ("h200", "20261206T02-b"): dict(contexts=[2048, 4096], arms=["eager"]),
             ("h200", "20261206T03-c"): dict(contexts=[2048], arms=["eager"])}

    def row(run, ctx, quant="bnb-nf4", session=0):
        return dict(run_id=run, session=session, gpu="h200", model="m", ctx=ctx, max_cache_len=ctx + 40, arm="eager",
                    attn="sdpa", quant=quant, step=0, step_ms=5.0, status="ok", reason=None)

    rows = pd.DataFrame([row("20261206T01-a", 2048), row("20261206T01-a", 4096), row("20261206T02-b", 2048),
                         row("20261206T02-b", 4096), row("20261206T01-a", 2048, "awq-marlin"),
                         row("20261206T03-c", 2048, "awq-marlin", session=5),
                         row("20261206T01-a", 2048, "bf16"), row("20261206T02-b", 2048, "bf16")])
    kept = roofline.one_sweep(rows, plans)
    assert roofline.left_out_by_path(rows, kept, plans) == [
        "h200 awq-marlin: 1 session of 1 cell (ctx 2048; eager) of another sweep (run 20261206T03-c) is left out, "
        "not pooled with the sessions kept (roofline.one_sweep).",
        "h200 bnb-nf4: 2 sessions of 2 cells (ctx 2048, 4096; eager) measured again by a later run of the same sweep "
        "(run 20261206T01-a) are left out, not pooled with the sessions kept (roofline.one_sweep)."]
    assert roofline.left_out_by_path(kept, kept, plans) == []


def test_one_sweep_prefers_a_sweep_that_timed_the_cell_over_a_wider_one_that_only_failed_there():
    plans = {("h200", "wide"): dict(contexts=[2048, 16384], arms=["eager"]),
             ("h200", "narrow"): dict(contexts=[2048], arms=["eager"])}

    def row(run, ctx, status, ms=None):
        return dict(run_id=run, session=0, gpu="h200", model="m", ctx=ctx, max_cache_len=ctx + 40, arm="eager",
                    attn="sdpa", quant="int4-triton", step=0, step_ms=ms, status=status, reason=None)

    rows = pd.DataFrame([row("wide", 2048, "error"), row("narrow", 2048, "ok", 4.0), row("wide", 16384, "error")])
    kept = roofline.one_sweep(rows, plans)
    assert sorted(zip(kept.run_id, kept.ctx)) == [("narrow", 2048), ("wide", 16384)]  # 16384 never ran: its status


def test_one_sweep_reads_a_cell_measured_again_from_its_latest_again_sweep():
    """A grid sweep, then two `again` sweeps of one lever at one context (ladder --again): the cell they measured
    keeps only the latest again sweep's rows, never pooled with the grid's; the cell they did not keeps the grid's."""
    plans = {("h200", "20261201T01-a"): dict(contexts=[2048, 4096], arms=["lean_fused_graph"]),
             ("h200", "20261201T02-b"): dict(contexts=[2048], arms=["lean_fused_graph"], again=True),
             ("h200", "20261201T03-c"): dict(contexts=[2048], arms=["lean_fused_graph"], again=True)}

    def row(run, ctx, ms):
        return dict(run_id=run, session=0, gpu="h200", model="m", ctx=ctx, max_cache_len=ctx + 40,
                    arm="lean_fused_graph", attn="sdpa", quant="bf16", step=0, step_ms=ms, status="ok", reason=None)

    rows = pd.DataFrame([row("20261201T01-a", 2048, 4.7), row("20261201T01-a", 4096, 4.8),
                         row("20261201T02-b", 2048, 4.5), row("20261201T03-c", 2048, 4.4)])
    kept = roofline.one_sweep(rows, plans)
    assert sorted(zip(kept.ctx, kept.run_id)) == [(2048, "20261201T03-c"), (4096, "20261201T01-a")]


def test_the_roofline_experiment_is_what_notebook_01_writes_and_the_claims_read(shipped_evidence):
    from decodegap import paths
    from decodegap.experiments import roofline as roofline_grid

    rows, cells, configs = roofline_grid.cells(paths.DATA, models=["llama-3.1-8b"])
    shipped = pd.read_csv(paths.FIGURES / "01_roofline_cells.csv")
    assert len(cells) == len(shipped) and set(configs) >= set(rows["model"]) | {"llama-3.1-8b"}
    assert cells["t_obs_ms"].round(3).tolist() == shipped["t_obs_ms"].round(3).tolist()
    assert shipped_evidence.cells["t_obs_ms"].round(6).tolist() == cells["t_obs_ms"].round(6).tolist()


def test_cells_from_several_commits_are_named_with_the_contexts_and_arms_each_timed():
    """Two runs on one GPU, ctx 2048 at commit aaaaaaa and ctx 4096 at bbbbbbb (eager both, graph at 4096 too): one
    line naming both commits in context order; a GPU whose cells are one commit's, and an `error` row of a third
    commit, add nothing."""
    def row(gpu, run, ctx, arm, status="ok"):
        return dict(gpu=gpu, run_id=run, ctx=ctx, arm=arm, status=status)

    rows = pd.DataFrame([row("g1", "r2", 4096, "eager"), row("g1", "r2", 4096, "graph"), row("g1", "r1", 2048, "eager"),
                         row("g1", "r3", 8192, "eager", "error"), row("g2", "r4", 2048, "eager"),
                         row("g2", "r5", 4096, "eager")])
    commits = {("g1", "r1"): "aaaaaaa111", ("g1", "r2"): "bbbbbbb222", ("g1", "r3"): "ccccccc333",
               ("g2", "r4"): "ddddddd444", ("g2", "r5"): "ddddddd444"}
    assert roofline.commits_across_contexts(rows, commits) == [
        "g1: its cells come from runs of 2 commits: aaaaaaa (ctx 2048; eager) and bbbbbbb (ctx 4096; eager, graph); "
        "comparing cells of different commits compares code versions too."]
    assert roofline.commits_across_contexts(rows, {}) == []  # every run's commit unknown: one "commit"


def test_cells_whose_sessions_ran_two_versions_of_the_code_are_named_with_each_versions_runs():
    """One cell (g1 ctx 2048 eager) pools session 0 of run r1 (source aaaa...) and sessions 1-2 of run r2 (bbbb...):
    one line naming both digests and runs; a cell whose two runs share a digest (ctx 4096: r2, r3), a GPU of one
    run, and an `error` row of a third version add nothing; runs without a digest are one version, "unknown"."""
    def row(gpu, run, ctx, session, status="ok"):
        return dict(gpu=gpu, model="m", ctx=ctx, arm="eager", attn="sdpa", quant="bf16", run_id=run, session=session,
                    status=status)

    rows = pd.DataFrame([row("g1", "r1", 2048, 0), row("g1", "r2", 2048, 1), row("g1", "r2", 2048, 2),
                         row("g1", "r2", 4096, 0), row("g1", "r3", 4096, 1), row("g1", "r4", 4096, 2, "error"),
                         row("g2", "r5", 2048, 0)])
    sources = {("g1", "r1"): "a" * 64, ("g1", "r2"): "b" * 64, ("g1", "r3"): "b" * 64, ("g1", "r4"): "c" * 64,
               ("g2", "r5"): "d" * 64}
    assert roofline.code_versions_within_cells(rows, sources) == [
        "g1 bf16: 1 cell (ctx 2048; eager) pools sessions of runs of 2 source digests, aaaaaaaa (run r1); "
        "bbbbbbbb (run r2): such a cell's median mixes code versions (roofline.code_versions_within_cells)."]
    assert roofline.code_versions_within_cells(rows, {}) == []  # every run "unknown": one version
    assert roofline.code_versions_within_cells(rows.iloc[:0], sources) == []
