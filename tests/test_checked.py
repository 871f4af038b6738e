"""checked.join_checks on small hand-made frames: a timed cell counts only with a passing check of its own run and
cell (vs_eager; for a quantised cell also the vs_bf16 model check of its run); a check of another run does not
count; the readers leave such cells out of every counted number (checked.labelled, roofline.one_sweep)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from decodegap import checked, roofline


def timed(run, arm, ms, session=0, quant="bf16", ctx=2048, model="m", attn="sdpa", steps=3):
    return [dict(run_id=run, session=session, gpu="h200", model=model, ctx=ctx, max_cache_len=ctx + 40, arm=arm,
                 attn=attn, quant=quant, step=i, step_ms=ms, status="ok", reason="") for i in range(steps)]


def check(run, arm, err, quant="bf16", ctx=2048, model="m", kind="vs_eager", tol=0.1, status=None, attn="sdpa"):
    return dict(run_id=run, session=0, gpu="h200", model=model, ctx=ctx, arm=arm, attn=attn, quant=quant,
                max_rel_err=err, tol=tol, status=status or ("ok" if err <= tol else "error"), reason="", check=kind,
                layer="model", rows=np.nan)


def frame(*blocks):
    return pd.DataFrame([r for b in blocks for r in b])


def verdicts(marked):
    return {(r.run_id, r.arm, r.quant): r.checked for r in marked.drop_duplicates(["run_id", "arm", "quant"]).itertuples()}


def test_a_cell_counts_only_with_a_passing_check_of_its_own_run():
    rows = frame(timed("A", "eager", 20.0), timed("A", "graph", 8.0), timed("B", "graph", 7.0),
                 timed("C", "graph", 6.0), timed("D", "graph", 5.0))
    verify = pd.DataFrame([check("A", "graph", 0.02),   # A's own check: A counts
                           check("A", "graph", 0.02, model="other"),  # another cell of A: not B's, C's, D's
                           check("C", "graph", 0.5),    # C failed its check
                           check("D", "graph", np.nan, status="ok")])  # a NaN error recorded ok is no pass
    marked = checked.join_checks(rows, verify)
    assert verdicts(marked) == {("A", "eager", "bf16"): True, ("A", "graph", "bf16"): True,
                                ("B", "graph", "bf16"): False, ("C", "graph", "bf16"): False,
                                ("D", "graph", "bf16"): False}
    notes = marked.drop_duplicates("run_id").set_index("run_id")["check_note"]
    assert notes["B"] == "no vs_eager check in its run" and notes["C"].startswith("vs_eager failed: 0.5")
    dropped = checked.join_checks(rows, verify, mode="drop")
    assert set(dropped["run_id"]) == {"A"}
    with pytest.raises(checked.UncheckedError, match="B m ctx 2048 graph"):
        checked.join_checks(rows, verify, mode="raise")


def test_a_check_of_another_run_does_not_count():
    """Run B re-timed A's checked cell: A's pass says nothing about B's code or machine."""
    rows = frame(timed("A", "graph", 8.0), timed("B", "graph", 8.2, session=1))
    verify = pd.DataFrame([check("A", "graph", 0.02)])
    marked = checked.join_checks(rows, verify)
    assert verdicts(marked) == {("A", "graph", "bf16"): True, ("B", "graph", "bf16"): False}
    bad = checked.unchecked(marked)
    assert list(bad["run_id"]) == ["B"] and bad["median_step_ms"].iloc[0] == 8.2 and bad["sessions"].iloc[0] == 1


def test_a_quantised_cell_needs_the_model_check_of_its_own_run():
    rows = frame(timed("Q", "eager", 30.0, quant="int4"), timed("Q", "graph", 6.0, quant="int4"),
                 timed("R", "graph", 6.1, quant="int4"))
    verify = pd.DataFrame([check("Q", "graph", 0.0, quant="int4"), check("R", "graph", 0.0, quant="int4"),
                           check("Q", "eager", 0.4, quant="int4", kind="vs_bf16", tol=0.6)])
    marked = checked.join_checks(rows, verify)
    assert verdicts(marked) == {("Q", "eager", "int4"): True, ("Q", "graph", "int4"): True,
                                ("R", "graph", "int4"): False}  # R's arm passed, but R has no model check
    assert "no vs_bf16 model check in its run" in marked[marked["run_id"] == "R"]["check_note"].iloc[0]
    verify.loc[2, "max_rel_err"] = 0.7  # past its tolerance: the model check fails, every arm of Q with it
    verify.loc[2, "status"] = "error"
    assert not checked.join_checks(rows, verify)["checked"].any()


def test_status_rows_are_no_numbers_and_stay():
    rows = frame(timed("A", "graph", 8.0))
    rows = pd.concat([rows, pd.DataFrame([dict(rows.iloc[0], arm="compile", step=np.nan, step_ms=np.nan,
                                               status="error", reason="compile failed")])], ignore_index=True)
    dropped = checked.join_checks(rows, pd.DataFrame([check("X", "graph", 0.0)]), mode="drop")
    assert list(dropped["status"]) == ["error"]


def test_an_unchecked_cell_is_drawn_as_unchecked_never_counted():
    """labelled: the unchecked run's timings become one status row per session; the cell table then times the cell
    from the checked run alone, or, with none, shows it `unchecked` with what was timed in the reason."""
    rows = frame(timed("A", "graph", 8.0, session=0), timed("B", "graph", 9.0, session=1),
                 timed("B", "lean", 30.0, session=1))
    verify = pd.DataFrame([check("A", "graph", 0.02)])
    out = checked.labelled(checked.join_checks(rows, verify))
    assert set(out.loc[out["status"] == "ok", "run_id"]) == {"A"}
    status = out[out["status"] == checked.UNCHECKED]
    assert len(status) == 2 and status["step_ms"].isna().all()
    assert "median step 30.000 ms" in status[status["arm"] == "lean"]["reason"].iloc[0]
    configs = {"m": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, vocab_size=100, tie_word_embeddings=False,
                         model_type="llama")}
    specs = pd.DataFrame([dict(gpu="h200", bandwidth_gbps=4800.0)])
    cells = roofline.cell_table(out, specs, configs).set_index("arm")
    assert cells.loc["graph", "t_obs_ms"] == 8.0 and cells.loc["graph", "sessions"] == 1  # B's 9.0 never pooled
    assert np.isnan(cells.loc["lean", "t_obs_ms"]) and cells.loc["lean", "status"] == checked.UNCHECKED


def test_one_sweep_prefers_a_checked_sweep_over_an_unchecked_one():
    rows = frame(timed("A", "compile", 6.2), timed("B", "compile", 6.7, session=1))
    plans = {("h200", "A"): dict(contexts=[2048], arms=["compile"]),
             ("h200", "B"): dict(contexts=[2048, 4096], arms=["compile"])}  # B's plan is wider: it would win
    raw = roofline.one_sweep(rows, plans)
    assert set(raw["run_id"]) == {"B"}
    kept = roofline.one_sweep(checked.labelled(checked.join_checks(rows, pd.DataFrame([check("A", "compile", 0.05)]))),
                              plans)
    assert set(kept.loc[kept["status"] == "ok", "run_id"]) == {"A"}


def test_the_shipped_readers_count_no_unchecked_cell():
    """Every experiment's selected rows: no timed row lacks a passing check of its own run."""
    from decodegap import paths
    from decodegap.experiments import (attention_backends, closing_the_gap, cost, cuda_graphs_ab, quantisation,
                                       roofline as roofline_experiment)

    verify = checked.verify_rows(paths.DATA)
    for reader in (roofline_experiment.rows, cuda_graphs_ab.rows, attention_backends.step_rows, quantisation.rows,
                   cost.rows, closing_the_gap.rows):
        rows = reader(paths.DATA)
        timed_rows = rows[rows["status"].isin(["ok", "warmup"])].drop(columns=["checked", "check_note"],
                                                                       errors="ignore")
        again = checked.join_checks(timed_rows, verify)
        assert again["checked"].all(), (reader.__module__, checked.unchecked(again).head())
