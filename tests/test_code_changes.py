"""The changes to a lever's code made after its rows (levers.CODE_CHANGES): which rows predate them, what the ladder
and the targets say of them, and that the record agrees with the repository's history where a clone has it."""

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from decodegap import levers
from decodegap.analysis import closing_the_gap as ladder
from decodegap.analysis import closing_the_gap_targets as targets
from decodegap.analysis.closing_the_gap_int4_products import layer_products
from decodegap.levers import CODE_CHANGES, CodeChange, changed_since, changes_after

ROOT = Path(__file__).resolve().parents[1]
CHANGE = CodeChange("abc1234", "2026-12-05T06:00:00+00:00", "a faster merge", (("arm_a", "bf16"),), ("model-x",))


def test_a_run_that_began_before_a_change_predates_it_and_one_after_does_not():
    assert changes_after("20261205T055959-aaaaaa", "arm_a", "bf16", "model-x", (CHANGE,)) == [CHANGE]
    assert changes_after("20261205T060000-aaaaaa", "arm_a", "bf16", "model-x", (CHANGE,)) == []
    # another lever, another quantisation path of the arm or another model: the change is not theirs
    assert changes_after("20261204T000000-aaaaaa", "arm_b", "bf16", "model-x", (CHANGE,)) == []
    assert changes_after("20261204T000000-aaaaaa", "arm_a", "int4-triton", "model-x", (CHANGE,)) == []
    assert changes_after("20261204T000000-aaaaaa", "arm_a", "bf16", "model-y", (CHANGE,)) == []
    every_model = CHANGE._replace(models=())
    assert changes_after("20261204T000000-aaaaaa", "arm_a", "bf16", "model-y", (every_model,)) == [every_model]


def test_changed_since_lists_the_commits_a_run_predates_oldest_first():
    later = CHANGE._replace(commit="def5678", committed_utc="2026-12-05T07:00:00+00:00")
    assert changed_since("20261205T055959-aaaaaa", "arm_a", "bf16", "model-x", (CHANGE, later)) == "abc1234 def5678"
    assert changed_since("20261205T063000-aaaaaa", "arm_a", "bf16", "model-x", (CHANGE, later)) == "def5678"
    assert changed_since("20261205T073000-aaaaaa", "arm_a", "bf16", "model-x", (CHANGE, later)) == ""


def _rows(*runs):
    return pd.DataFrame([dict(gpu="h200", model="model-x", ctx=2048, arm="arm_a", quant="bf16", run_id=r, status=s)
                         for r, s in runs])


def test_a_cell_counts_as_changed_by_its_newest_timed_run_only():
    old = ("20261205T050000-aaaaaa", "ok")
    assert ladder.changed_cells(_rows(old), (CHANGE,)) == {("h200", "model-x", 2048, "arm_a", "bf16"): [CHANGE]}
    assert ladder.changed_cells(_rows(old, ("20261205T070000-bbbbbb", "ok")), (CHANGE,)) == {}
    # a failed run after the change times nothing: the cell's time is still the old code's
    assert ladder.changed_cells(_rows(old, ("20261205T070000-bbbbbb", "error")), (CHANGE,)) != {}


def _cells(t_obs_ms):
    return pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, arm=arm, quant=quant, attn="sdpa",
                              status="ok", t_obs_ms=t, sessions=3, t_floor_ms_W_all=3.4)
                         for (_, arm, quant), t in zip(levers.LEVERS, t_obs_ms)])


def test_the_ladder_names_the_change_beside_the_time_it_keeps():
    cells = _cells([10.0, 9.0])
    arm, quant = levers.LEVERS[1][1:]
    key = ("h200", "llama-3.1-8b", 2048, arm, quant)
    table = ladder.ladder_table(cells, changed={key: [CHANGE]})
    row = table[(table["arm"] == arm) & (table["quant"] == quant)].iloc[0]
    assert row["t_obs_ms"] == 9.0 and row["status"] == "ok"
    assert row["reason"] == "measured before a faster merge (abc1234)" and row["changed_since"] == "abc1234"
    other = table[(table["arm"] == levers.LEVERS[0][1]) & (table["quant"] == levers.LEVERS[0][2])].iloc[0]
    assert other["reason"] == "" and other["changed_since"] == ""


def test_the_target_says_which_of_its_rows_predate_a_change(monkeypatch):
    monkeypatch.setattr(targets, "CODE_CHANGES", (CHANGE,))
    arm, quant = levers.LEVERS[1][1:]
    lad = ladder.ladder_table(_cells([10.0, 9.0]), changed={("h200", "llama-3.1-8b", 2048, arm, quant): [CHANGE]})
    row = pd.Series(dict(gpu="h200", model="llama-3.1-8b", ctx=2048, arm=arm, quant=quant, sessions=2,
                         changed_since="abc1234"))
    assert targets._changed_text(row, lad) == (" Its fresh sessions and selection rows were measured before a faster "
                                               "merge (abc1234): they time code the lever no longer runs.")
    assert targets._changed_text(row.copy().replace({"abc1234": ""}), lad).startswith(" Its selection rows were")
    fresh_ladder = ladder.ladder_table(_cells([10.0, 9.0]))
    assert targets._changed_text(row.copy().replace({"abc1234": ""}), fresh_ladder) == ""


def test_the_record_names_levers_of_the_ladder_oldest_first():
    known = {(arm, quant) for _, arm, quant in levers.LEVERS}
    for change in CODE_CHANGES:
        assert change.levers and set(change.levers) <= known, change.commit
    times = [pd.Timestamp(c.committed_utc) for c in CODE_CHANGES]
    assert times == sorted(times)


def test_the_int4_table_changes_name_every_int4_lever_that_launches_a_product_they_gave_an_entry():
    products = {"952da62": {"down", "gate_up_silu", "down_norm", "qkv_rotary_plain"}, "224377f": {"qkv_rotary"}}
    for change in CODE_CHANGES:
        if change.commit not in products:
            continue
        launched = {(arm, quant) for _, arm, quant in levers.LEVERS if quant in ("int4-triton", "int4-triton-head")
                    and {p for p, _ in layer_products(arm)} & products[change.commit]}
        assert set(change.levers) == launched, change.commit


def test_the_1b_table_change_names_every_lever_whose_bf16_lm_head_runs_the_fused_gemv():
    """4a1e32b gave Llama-3.2-1B's LM head an entry: every fused lever launches an LM head, on the fused bf16 GEMV where
    the head is bf16 (bf16 and int4-triton; int4-triton-head's is int4, on its own table)."""
    from decodegap.arms import REGISTRY

    (change,) = [c for c in CODE_CHANGES if c.commit == "4a1e32b"]
    fused = {(arm, quant) for _, arm, quant in levers.LEVERS if quant in ("bf16", "int4-triton")
             and "fused" in REGISTRY[arm].kernels}
    assert set(change.levers) == fused and len(fused) > 12 and change.models == ("llama-3.2-1b",)


def _git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def test_the_record_agrees_with_the_history_where_the_clone_has_it():
    """Each change's time is its commit's, and every run that began after a change measured a commit that holds
    it (the rule changes_after states, which needs no git): a run of an older commit made later would fail here."""
    if shutil.which("git") is None or _git("rev-parse", "--git-dir").returncode:
        pytest.skip("no git history here")
    runs = {run: entry.get("git_commit") for path in (ROOT / "data" / "raw").glob("*/env.json")
            for run, entry in json.loads(path.read_text()).items()}
    for change in CODE_CHANGES:
        shown = _git("show", "-s", "--format=%cI", change.commit)
        if shown.returncode:
            pytest.skip(f"the clone lacks commit {change.commit} (a shallow clone)")
        assert pd.Timestamp(shown.stdout.strip()) == pd.Timestamp(change.committed_utc), change.commit
        for run, commit in runs.items():
            if not commit or changes_after(run, *change.levers[0], (change.models or ("any",))[0], (change,)):
                continue
            held = _git("merge-base", "--is-ancestor", change.commit, commit)
            if held.returncode not in (0, 1):
                pytest.skip(f"the clone lacks commit {commit} of run {run}")
            assert held.returncode == 0, f"run {run} began after {change.commit} but measured {commit}, before it"


def test_a_run_id_that_names_no_start_time_predates_no_change():
    assert changes_after("c1", "arm_a", "bf16", "model-x", (CHANGE,)) == []
