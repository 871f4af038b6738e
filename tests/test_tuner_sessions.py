"""Notebook 06's tuner moves: the int4 levers whose sessions' processes tuned their products otherwise, from hand-made
env.json entries and rows, with the times by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from decodegap.analysis import closing_the_gap_tuner_sessions as tuner

DOWN = "N=3584 K=18944 G=128 EARLY_TRIGGER OUT_SCALE RESIDUAL USE_PDL"  # qwen2.5-7b's down: no table entry
QKV = "N=4608 K=3584 G=128 BIAS NORM USE_PDL"
A = {"fused_int4_gemv": {DOWN: "BLOCK_N=4 SUB_MAX=1 num_warps=2", QKV: "BLOCK_N=8 SUB_MAX=1 num_warps=4"},
     "int4_gemv": {"N=3584 K=18944": "BLOCK_N=4 SUB_MAX=1 CHUNKS=64 num_warps=2 num_stages=1"}}
B = {"fused_int4_gemv": {DOWN: "BLOCK_N=4 SUB_MAX=1 num_warps=4", QKV: "BLOCK_N=8 SUB_MAX=1 num_warps=4"},
     "int4_gemv": {"N=3584 K=18944": "BLOCK_N=8 SUB_MAX=1 CHUNKS=64 num_warps=2 num_stages=1"}}


def _env(sessions: dict) -> dict:
    """{(gpu, run): entry} with each session's recorded choices ({(run, session): tuned}); a killed session too."""
    env = {}
    for (run, session), tuned in sessions.items():
        entry = env.setdefault(("h100-sxm", run), {"sessions": {"999": "killed"}})
        entry["sessions"][str(session)] = {"timing": {"tuned": tuned}, "rows": 3}
    return env


def _rows(arm: str, quant: str, medians: dict) -> list:
    """Three timed steps a session around its median: {(run, session): median ms}."""
    return [dict(gpu="h100-sxm", model="qwen2.5-7b", ctx=2048, arm=arm, quant=quant, run_id=run, session=session,
                 step_ms=ms + d, status="ok", batch=1)
            for (run, session), ms in medians.items() for d in (-0.01, 0.0, 0.01)]


def test_a_sessions_choices_are_read_per_kernel_and_product():
    choices = tuner.session_choices(_env({("r1", 0): A}))
    assert set(choices) == {("h100-sxm", "r1", 0)}  # the killed session recorded nothing
    assert choices[("h100-sxm", "r1", 0)][("fused_int4_gemv", DOWN)] == "BLOCK_N=4 SUB_MAX=1 num_warps=2"
    assert len(choices[("h100-sxm", "r1", 0)]) == 3


def test_a_session_of_two_processes_keeps_the_choices_they_made_alike():
    """The first process (died inside a cell) chose A, the second B: QKV (alike in both) is kept, DOWN and the int4
    GEMV's product (chosen otherwise) are left out of the session; a first process that tuned nothing changes nothing."""
    env = _env({("r1", 0): B})
    env[("h100-sxm", "r1")]["sessions"]["0"]["earlier_processes"] = [{"timing": {"tuned": A}}, {"timing": {}}]
    (choices,) = tuner.session_choices(env).values()
    assert choices == {("fused_int4_gemv", QKV): "BLOCK_N=8 SUB_MAX=1 num_warps=4"}
    env[("h100-sxm", "r1")]["sessions"]["0"]["earlier_processes"] = [{"timing": {}}]
    (choices,) = tuner.session_choices(env).values()
    assert choices[("fused_int4_gemv", DOWN)] == "BLOCK_N=4 SUB_MAX=1 num_warps=4" and len(choices) == 3


def test_a_lever_whose_processes_tuned_otherwise_is_listed_with_each_sets_time():
    """Sessions 1.96 and 1.97 ms chose down at 2 warps, one at 2.12 ms at 4 warps: two sets, 1.965 against 2.12 ms,
    7.9 % apart; the int4 GEMV's differing choice (its checks' reference, untimed in a fused lever) is not read. A
    lever whose sessions chose alike and a bf16 lever are not listed."""
    sessions = {("sel", 0): B, ("conf", 200): A, ("conf", 201): A}
    rows = pd.DataFrame(_rows("lean_fused_all_kv_together_graph", "int4-triton-head",
                              {("sel", 0): 2.12, ("conf", 200): 1.96, ("conf", 201): 1.97})
                        + _rows("lean_fused_graph", "int4-triton", {("conf", 200): 2.5, ("conf", 201): 2.6})
                        + _rows("lean_fused_graph", "bf16", {("sel", 0): 4.0, ("conf", 200): 4.1}))
    moves = tuner.tuner_moves(rows, tuner.session_choices(_env(sessions)))
    assert len(moves) == 1
    m = moves.iloc[0]
    assert (m["arm"], m["sessions"], m["choice_sets"]) == ("lean_fused_all_kv_together_graph", 3, 2)
    assert m["fastest_ms"] == pytest.approx(1.965) and m["slowest_ms"] == pytest.approx(2.12)
    assert m["differing"] == "fused_int4_gemv N=3584 K=18944 EARLY_TRIGGER OUT_SCALE RESIDUAL USE_PDL"
    assert m["groups"] == "2 sessions at 1.965 ms: n4_s1_w2; 1 session at 2.120 ms: n4_s1_w4"
    assert m["in_table"] == ""
    text = tuner.findings(moves)[0]
    assert f"{100 * (2.12 / 1.965 - 1):.1f} % apart" in text and "7.9 % apart" in text
    assert "{" not in text and "moved" not in text and "not a cause" in text  # every field filled; it describes
    assert "None of them has a table entry now" in text
    # the plain int4 GEMV lever reads the int4 GEMV's choices: the same sessions make two sets there
    plain = pd.DataFrame(_rows("graph", "int4-triton", {("sel", 0): 3.0, ("conf", 200): 3.1}))
    assert tuner.tuner_moves(plain, tuner.session_choices(_env(sessions))).iloc[0]["differing"] == \
        "int4_gemv N=3584 K=18944"


def test_the_table_entry_is_read_as_the_launch_reads_it():
    """Llama's down at the early trigger has an entry (4, 1, 2); its norm-scale form takes the same entry; another
    group size, Qwen's down and the int4 GEMV have none."""
    from decodegap.kernels.fused_int4 import configs as int4_configs
    from decodegap.kernels.int4_gemv.format import DEFAULT_GROUP_SIZE

    assert int4_configs.TABLE_GROUP_SIZE == DEFAULT_GROUP_SIZE
    assert tuner.table_entry("fused_int4_gemv", "N=4096 K=14336 G=128 EARLY_TRIGGER RESIDUAL USE_PDL") == "n4_s1_w2"
    assert tuner.table_entry("fused_int4_gemv", "N=4096 K=14336 G=128 EARLY_TRIGGER OUT_SCALE RESIDUAL USE_PDL") \
        == "n4_s1_w2"
    assert tuner.table_entry("fused_int4_gemv", "N=4096 K=14336 G=64 EARLY_TRIGGER RESIDUAL USE_PDL") is None
    assert tuner.table_entry("fused_int4_gemv", DOWN) is None
    assert tuner.table_entry("int4_gemv", "N=4096 K=14336") is None


def test_no_rows_or_no_choices_list_nothing():
    empty = tuner.tuner_moves(pd.DataFrame(_rows("lean_fused_graph", "int4-triton", {("r", 0): 2.0})), {})
    assert empty.empty and list(empty.columns) == tuner.MOVES_COLUMNS
    assert tuner.findings(empty) == []
