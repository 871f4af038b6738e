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
    verify = pd.DataFrame([check("Q", "graph", 0.0, quant="int4"), check("R", "graph", 0.0, quant="int4")]
                          + in_run("Q", quant="int4") + in_run("R", quant="int4", skip=("model",)))
    marked = checked.join_checks(rows, verify)
    assert verdicts(marked) == {("Q", "eager", "int4"): True, ("Q", "graph", "int4"): True,
                                ("R", "graph", "int4"): False}  # R's arm passed, but R has no model check
    assert "no vs_bf16 model check" in marked[marked["run_id"] == "R"]["check_note"].iloc[0]
    failing = pd.DataFrame([check("Q", "graph", 0.0, quant="int4")] + in_run("Q", quant="int4", err=0.8))
    assert not checked.join_checks(rows, failing)["checked"].any()  # k 1.6: the model check fails, every arm of Q


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


@pytest.mark.slow  # every reader over every shipped row
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


# ------------------------------------------------------------------- what counts as a checked quantised cell
def in_run(run, quant="awq-marlin", ctx=2048, model="m", null=0.5, err=0.55, layer_err=0.004, prefill_err=0.006,
           format_ratio=1.01, skip=()):
    """The verify rows a quantised sweep's session writes in its own run since in-run layer checks: per linear one
    format row and layer rows at 1 and `ctx` rows, the null (tol 1.3 x null) and the model check; `skip` leaves
    kinds out ("format", "layer_1", "layer_ctx", "null", "model")."""
    from decodegap.compare import MODEL_K_PASS
    from decodegap.quant.paths import QUANT_TOL
    from decodegap.quant.power import FORMAT_TOL

    base = dict(run_id=run, session=0, gpu="h200", model=model, quant=quant, reason="")
    out = []
    for name in ("q_proj", "down_proj"):
        lay = dict(base, arm="-", attn="-", layer=name)
        if "format" not in skip:
            out.append(dict(lay, ctx=0, rows=np.nan, check="format", max_rel_err=format_ratio, tol=FORMAT_TOL,
                            status="ok" if format_ratio <= FORMAT_TOL else "error"))
        for m, e, kind in ((1, layer_err, "layer_1"), (ctx, prefill_err, "layer_ctx")):
            if kind not in skip:
                out.append(dict(lay, ctx=m, rows=m, check="layer", max_rel_err=e, tol=QUANT_TOL,
                                status="ok" if e <= QUANT_TOL else "error"))
    model_row = dict(base, ctx=ctx, arm="eager", attn="sdpa", layer="model", rows=np.nan, tol=MODEL_K_PASS * null)
    if "null" not in skip:
        out.append(dict(model_row, check="vs_bf16_null", max_rel_err=null, status="ok"))
    if "model" not in skip:
        out.append(dict(model_row, check="vs_bf16", max_rel_err=err, status="ok" if err <= MODEL_K_PASS * null
                        else "error"))
    return out


def test_a_quantised_cell_counts_only_with_the_current_rules_checks_of_its_own_run():
    """checked.quantised_checks, the one definition: run A has every check and they pass (k = 0.55 / 0.5 = 1.1);
    B's prefill layer check fails (0.05 > 0.02); C has no null row; D has no layer check at the cell's prefill rows;
    E's model check lies between k_pass and k_fail; F is of an earlier rule (a model check only, within 6 x a
    bound): measured before in-run layer checks. Only A counts, its k hand-computed."""
    from decodegap.quant.paths import QUANT_TOL

    runs = ("20261202T170333-aaaaaa", "B", "C", "D", "E", "20261201T104308-ffffff")
    A, B, C, D, E, F = runs
    verify = pd.DataFrame(in_run(A) + in_run(B, prefill_err=0.05) + in_run(C, skip=("null",))
                          + in_run(D, skip=("layer_ctx",)) + in_run(E, err=0.68)  # k 1.36: in the band
                          + [check(F, "eager", 0.4350, quant="awq-marlin", kind="vs_bf16", tol=0.604)])
    keys = pd.DataFrame([dict(run_id=r, gpu="h200", model="m", ctx=2048, quant="awq-marlin") for r in runs])
    out = checked.quantised_checks(keys, verify).set_index("run_id")
    assert out["outcome"].to_dict() == {A: checked.CHECKED_QUANT, B: checked.FAILED_QUANT, C: checked.INCOMPLETE_QUANT,
                                        D: checked.INCOMPLETE_QUANT, E: checked.INCONCLUSIVE_QUANT,
                                        F: checked.EARLIER_RULE}
    assert out.loc[A, "k"] == pytest.approx(0.55 / 0.5) and out.loc[E, "k"] == pytest.approx(0.68 / 0.5)
    assert f"layer check at 2048 rows failed: 0.05 > {QUANT_TOL:g}" in out.loc[B, "note"]
    assert "no vs_bf16_null row" in out.loc[C, "note"] and "no layer check at 2048 rows" in out.loc[D, "note"]
    assert out.loc[F, "note"].startswith("unchecked under the current rule: measured 2026-12-01 10:43 UTC, before "
                                         "in-run layer checks")
    # a check of another run never counts: A's rows do not check a cell of run G, nor A's cell at another context
    other = checked.quantised_checks(pd.DataFrame([dict(run_id="G", gpu="h200", model="m", ctx=2048, quant="awq-marlin"),
                                                   dict(run_id=A, gpu="h200", model="m", ctx=4096, quant="awq-marlin")]),
                                     verify)
    assert list(other["outcome"]) == [checked.EARLIER_RULE, checked.INCOMPLETE_QUANT]


def test_join_checks_counts_a_quantised_cell_by_that_definition_and_labels_the_rest():
    """The rows of every reader: a passing cell counts; one with a failing prefill layer row, one without a null
    row, and one of an earlier rule become `unchecked` status rows, the last labelled with the date it was
    measured; a bf16 cell needs none of these checks."""
    A, B, C, F = "20261202T170333-aaaaaa", "20261202T170432-bbbbbb", "20261202T170524-cccccc", "20261201T104308-ffffff"
    rows = frame(*(timed(r, "graph", 5.0, quant="awq-marlin") for r in (A, B, C, F)), timed("X", "graph", 8.0))
    verify = pd.DataFrame(in_run(A) + in_run(B, prefill_err=0.05) + in_run(C, skip=("null",))
                          + [check(F, "eager", 0.4350, quant="awq-marlin", kind="vs_bf16", tol=0.604)]
                          + [check(r, "graph", 0.03, quant=q) for r, q in ((A, "awq-marlin"), (B, "awq-marlin"),
                                                                           (C, "awq-marlin"), (F, "awq-marlin"),
                                                                           ("X", "bf16"))])
    marked = checked.join_checks(rows, verify)
    assert verdicts(marked) == {(A, "graph", "awq-marlin"): True, (B, "graph", "awq-marlin"): False,
                                (C, "graph", "awq-marlin"): False, (F, "graph", "awq-marlin"): False,
                                ("X", "graph", "bf16"): True}
    first = marked.drop_duplicates("run_id").set_index("run_id")
    assert first.loc[A, "model_k"] == pytest.approx(1.1) and first.loc[A, "quant_check"] == checked.CHECKED_QUANT
    assert first.loc["X", "quant_check"] == "" and np.isnan(first.loc["X", "model_k"])
    out = checked.labelled(marked)
    status = out[out["status"] == checked.UNCHECKED].set_index("run_id")["reason"]
    assert set(status.index) == {B, C, F} and set(out.loc[out["status"] == "ok", "run_id"]) == {A, "X"}
    assert status[F].startswith("unchecked under the current rule: measured 2026-12-01 10:43 UTC, before in-run "
                                "layer checks") and "median step 5.000 ms" in status[F]
    assert status[B].startswith("timed without a passing check of its own run") and "2048 rows failed" in status[B]


@pytest.mark.slow  # joins the shipped decode rows with their checks three times
def test_loaded_once_joins_each_experiment_once_and_hands_every_call_its_own_copy(monkeypatch):
    """Inside checked.loaded_once (what the claims' evidence reads through five notebooks' loaders) decode.csv is
    joined with its checks once per set of arguments (grid and every row: twice, not three times); a caller's change
    to its copy is not seen by the next call; outside the block it is read again, and gives the same rows."""
    from decodegap import paths

    joins = []
    real = checked.join_checks
    monkeypatch.setattr(checked, "join_checks", lambda *a, **k: joins.append(1) or real(*a, **k))
    with checked.loaded_once():
        first = checked.load("decode", paths.DATA)
        kept = first["step_ms"].iloc[0]
        first.loc[first.index[0], "step_ms"] = -1.0
        again = checked.load("decode", paths.DATA)
        checked.load("decode", paths.DATA, grid=False)
    assert len(joins) == 2 and again["step_ms"].iloc[0] == kept
    pd.testing.assert_frame_equal(checked.load("decode", paths.DATA), again)
    assert len(joins) == 3 and checked._ONCE is None
