"""A sweep checks each non-eager arm in its own run: a check of another run never stands for it, a resumed or
topped-up run checks again, and the headline A/B checks every session (harness.verification.wants_check)."""

from __future__ import annotations

import dataclasses

from decodegap import records
from decodegap.experiments import cuda_graphs_ab
from decodegap.harness import sweep, verification

PLAN = sweep.SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(16,), arms=("eager", "graph"), sessions=3,
                       device="cpu")
GRAPH = sweep.Cell("llama-tiny", 16, "graph")


def _verify(data, *rows):
    path = data / "raw" / "cpu-test" / "verify.csv"
    records.append_rows(path, records.VERIFY, [verification.verify_row(PLAN, run, 0, cell, err, 0.1, check)
                                               for run, cell, err, check in rows])


def test_a_cell_is_checked_once_per_run_and_never_by_another_runs_check(data_dir):
    assert verification.wants_check(PLAN, GRAPH, "run-a", 0, data_dir)  # nothing recorded yet
    assert not verification.wants_check(PLAN, sweep.Cell("llama-tiny", 16, "eager"), "run-a", 0, data_dir)  # the reference
    _verify(data_dir, ("run-a", GRAPH, 0.01, "vs_eager"))
    assert not verification.wants_check(PLAN, GRAPH, "run-a", 1, data_dir)  # this run passed it: not again
    assert not verification.wants_check(PLAN, GRAPH, "run-a", 5, data_dir)  # whatever the session number
    assert verification.wants_check(PLAN, GRAPH, "run-b", 3, data_dir)  # another run's pass does not count
    _verify(data_dir, ("run-b", GRAPH, 0.9, "vs_eager"))  # a failed check is no pass
    assert verification.wants_check(PLAN, GRAPH, "run-b", 4, data_dir)
    assert verification.wants_check(PLAN, sweep.Cell("llama-tiny", 32, "graph"), "run-a", 1, data_dir)  # another cell
    every = dataclasses.replace(PLAN, check_every_session=True)
    assert verification.wants_check(every, GRAPH, "run-a", 1, data_dir)  # the headline plan checks every session
    assert not verification.wants_check(dataclasses.replace(PLAN, verify=False), GRAPH, "run-c", 0, data_dir)


def test_the_model_check_of_a_quantised_run_is_its_own(data_dir):
    quantised = sweep.Cell("llama-tiny", 16, "eager", "sdpa", "int4-tinygemm")
    _verify(data_dir, ("run-a", quantised, 0.01, "vs_bf16"))
    assert verification.passed_in_run(PLAN, "run-a", quantised, data_dir, "vs_bf16")
    assert not verification.passed_in_run(PLAN, "run-b", quantised, data_dir, "vs_bf16")
    assert not verification.passed_in_run(PLAN, "run-a", quantised, data_dir, "vs_eager")


def test_ab_headline_only_again_checks_every_session(data_dir, monkeypatch):
    plans, written = [], []
    monkeypatch.setattr(cuda_graphs_ab, "run_sweep", lambda plan, data, progress=True: plans.append(plan) or "run-x")
    monkeypatch.setattr(cuda_graphs_ab.runs, "update_env", lambda *a, **k: written.append((a, k)))
    cuda_graphs_ab.measure("cpu-test", ["llama-tiny"], [16, 32], headline_ctx=16, sessions=3, headline_sessions=10,
                          device="cpu", data=data_dir, progress=False, headline_only=True, again=True)
    (headline,) = plans
    assert headline.arms == ("eager", "graph") and headline.contexts == (16,) and headline.again
    assert headline.check_every_session and list(headline.session_ids) == list(range(3, 13))
    assert written == []  # run-x has no env.json entry (nothing measured): no entry of walls alone is made


def test_cli_ab_and_measure_take_again(monkeypatch):
    from decodegap import cli

    args = cli.build_parser().parse_args(["ab", "--headline-only", "--again"])
    assert args.headline_only and args.again
    assert cli.build_parser().parse_args(["measure", "--again"]).again


def test_a_check_says_where_the_model_shares_the_lean_decoders_storage(data_dir, monkeypatch):
    """check_cell's verify row names the shared storage (lean.SHARED_STORAGE_NOTE) once a lean decoder of the model
    shared it (its copies did not fit), and says nothing of it before: the model's HF arms then read the same weights
    at other addresses, and the rows say so."""
    import torch

    from decodegap.harness import lean, models

    model = models.build_model(models.load_spec("llama-tiny"), device="cpu", dtype="fp32")
    models.randomise_(model, seed=1, std=0.2)
    plan = dataclasses.replace(PLAN, arms=("eager", "lean"))
    cell = sweep.Cell("llama-tiny", 16, "lean")
    path = data_dir / "raw" / "cpu-test" / "verify.csv"
    with torch.inference_mode():
        verification.check_cell(plan, model, cell, "run-a", 0, data_dir, cache_len=20)
        monkeypatch.setattr(lean, "usable_bytes", lambda device: 1)  # no room for the copies: share
        monkeypatch.setattr(lean, "check_room_for_copies", lambda *a, **k: None)
        lean.LeanDecoder(model, 20)
        verification.check_cell(plan, model, cell, "run-b", 0, data_dir, cache_len=20)
    rows = records.read_csv(path, records.VERIFY)
    rows = rows[rows["check"] == "vs_eager"].set_index("run_id")
    assert rows.loc["run-a", "status"] == "ok" and "lean" not in str(rows.loc["run-a", "reason"])
    assert rows.loc["run-b", "status"] == "ok" and rows.loc["run-b", "reason"] == lean.SHARED_STORAGE_NOTE
