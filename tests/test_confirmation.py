"""Notebook 06's winners confirmed by a fresh sweep: the choice, the confirmation rows and the paired margin, on
hand-made rows whose answers are checked by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from decodegap.analysis import closing_the_gap_confirmation as confirm
from decodegap.levers import CONFIRM_FIRST_SESSION, CONFIRM_SESSIONS

CELL = dict(gpu="h200", model="m", ctx=2048)


@pytest.fixture(scope="module")
def shipped_ladder() -> pd.DataFrame:
    """The shipped rows' ladder (closing_the_gap.tables(data)["ladder"]), computed once for this module's plans."""
    from decodegap import paths
    from decodegap.experiments import closing_the_gap as experiment

    return experiment.tables(paths.DATA)["ladder"]


def _ladder(times: dict, floor: float = 3.4) -> pd.DataFrame:
    """Ladder rows (ladder_table's columns) of one cell: {(lever, arm, quant): ms or None (not measured)}."""
    rows = []
    for order, ((lever, arm, quant), ms) in enumerate(times.items()):
        rows.append(dict(CELL, order=order, lever=lever, arm=arm, quant=quant, t_obs_ms=ms, sessions=3,
                         t_floor_bf16_ms=floor, r_floor_bf16=floor / ms if ms else np.nan,
                         status="ok" if ms else "not measured", reason=""))
    return pd.DataFrame(rows)


LADDER = _ladder({("HF graph", "graph", "bf16"): 8.9, ("fused", "lean_fused_graph", "bf16"): 4.30,
                  ("early", "lean_fused_early_graph", "bf16"): 4.25, ("norm", "lean_fused_norm_graph", "bf16"): None,
                  ("int4 lean", "lean_attn_graph", "int4-tinygemm"): 2.6})


def _decode(run: str, session: int, arm: str, ms: list, quant: str = "bf16") -> list:
    return [dict(CELL, run_id=run, session=session, arm=arm, quant=quant, attn="sdpa", step=i, step_ms=t, status="ok",
                 batch=1) for i, t in enumerate(ms)]


def test_the_choice_is_the_smallest_selection_median_per_kind_and_the_runner_up_the_next():
    c = confirm.choices(LADDER).set_index("kind")
    assert (c.loc["bf16", "arm"], c.loc["bf16", "selected_ms"]) == ("lean_fused_early_graph", 4.25)
    assert (c.loc["bf16", "runner_up_arm"], c.loc["bf16", "runner_up_selected_ms"]) == ("lean_fused_graph", 4.30)
    assert c.loc["int4", "arm"] == "lean_attn_graph" and pd.isna(c.loc["int4", "runner_up"])  # one int4 lever only
    assert confirm.choices(_ladder({("x", "graph", "bf16"): None})).empty


def test_only_the_confirmation_sweeps_rows_are_read():
    rows = pd.DataFrame(_decode("sel", 0, "lean_fused_early_graph", [4.0, 4.0])
                        + _decode("conf", CONFIRM_FIRST_SESSION, "lean_fused_early_graph", [4.3, 4.3])
                        + _decode("scope", 100, "lean_fused_early_graph", [9.0]))
    plans = {("h200", "sel"): {"first_session": 0}, ("h200", "conf"): {"first_session": CONFIRM_FIRST_SESSION},
             ("h200", "scope"): {"first_session": 100}}
    assert set(confirm.confirmation_rows(rows, plans)["run_id"]) == {"conf"}
    unchecked = rows.assign(status=np.where(rows["run_id"] == "conf", "unchecked", "ok"))
    assert confirm.confirmation_rows(unchecked, plans).empty  # a row without a passing check of its run never counts


def test_the_confirmed_time_and_the_paired_margin_by_hand():
    s0 = CONFIRM_FIRST_SESSION
    winner = {s0: [4.2, 4.2, 9.9], s0 + 1: [4.1, 4.1, 4.1], s0 + 2: [4.3, 4.3, 0.1]}  # session medians 4.2, 4.1, 4.3
    runner = {s0: [4.3], s0 + 1: [4.2], s0 + 2: [4.2]}
    rows = pd.DataFrame([r for s, ms in winner.items() for r in _decode("conf", s, "lean_fused_early_graph", ms)]
                        + [r for s, ms in runner.items() for r in _decode("conf", s, "lean_fused_graph", ms)])
    t = confirm.confirmation_table(confirm.choices(LADDER), rows).set_index("kind")
    bf16 = t.loc["bf16"]
    assert bf16["status"] == confirm.CONFIRMED and bf16["sessions"] == CONFIRM_SESSIONS == 3
    assert bf16["confirmed_ms"] == pytest.approx(4.2) and bf16["r_floor_bf16"] == pytest.approx(3.4 / 4.2)
    margins = [4.3 / 4.2 - 1, 4.2 / 4.1 - 1, 4.2 / 4.3 - 1]  # paired by session: the runner-up over the winner
    assert bf16["margin_median"] == pytest.approx(sorted(margins)[1])
    assert (bf16["margin_min"], bf16["margin_max"]) == (pytest.approx(min(margins)), pytest.approx(max(margins)))
    assert bf16["runner_up_ms"] == pytest.approx(4.2)
    assert bf16["runner_up_own_sessions"] == 0 and np.isnan(bf16["runner_up_own_ms"])  # paired: no unpaired margin
    assert "margin +2.4 % (-2.3 to +2.4 % over 3 paired sessions)" in confirm.margin_text(bf16)
    assert t.loc["int4", "status"] == confirm.NOT_CONFIRMED and np.isnan(t.loc["int4", "confirmed_ms"])


def test_a_runner_up_confirmed_in_a_run_of_its_own_gives_an_unpaired_margin_by_hand():
    """A runner-up of another quantisation is confirmed in a sweep of its own: no session pairs it with the chosen
    lever, so its own sessions' median stands beside the chosen lever's, named unpaired; where it has no rows the text
    says no runner-up was timed, and a paired cell has no own-run columns."""
    s0 = CONFIRM_FIRST_SESSION
    ladder = _ladder({("int4 a", "lean_fused_graph", "int4-triton-head"): 1.9,
                      ("int4 b", "lean_attn_graph", "int4-triton"): 2.4})
    mine = [r for s, ms in {s0: [2.0], s0 + 1: [1.9], s0 + 2: [1.8]}.items()
            for r in _decode("a", s, "lean_fused_graph", ms, "int4-triton-head")]
    theirs = [r for s, ms in {s0: [2.5, 2.5], s0 + 1: [2.3], s0 + 2: [2.4]}.items()
              for r in _decode("b", s, "lean_attn_graph", ms, "int4-triton")]
    (row,) = confirm.confirmation_table(confirm.choices(ladder), pd.DataFrame(mine + theirs)).to_dict("records")
    assert (row["paired_sessions"], row["confirmed_ms"]) == (0, pytest.approx(1.9))
    assert (row["runner_up_own_ms"], row["runner_up_own_sessions"], row["runner_up_own_runs"]) == (
        pytest.approx(2.4), 3, "b")  # the median of 2.5, 2.3, 2.4
    text = confirm.margin_text(row)
    assert "confirmed in a run of its own: 2.40 ms over 3 sessions, +26.3 % on the medians, unpaired" in text
    (alone,) = confirm.confirmation_table(confirm.choices(ladder), pd.DataFrame(mine)).to_dict("records")
    assert alone["runner_up_own_sessions"] == 0 and confirm.margin_text(alone).endswith("no runner-up timed in them")
    (found,) = confirm.order_findings(confirm.confirmation_table(confirm.choices(ladder), pd.DataFrame(mine + theirs)))
    assert str(found) == ("Selection order on the h200, int4: no cell has paired sessions; in 1 more confirmed cell the "
                          "runner-up is another quantisation path, confirmed in a sweep of its own (unpaired): slower "
                          "on the medians in 1 (by +26.3 %).")
    assert (found.values["unpaired"], found.values["unpaired_faster"]) == (1, 0)
    quicker = [dict(r, step_ms=r["step_ms"] - 0.6) for r in theirs]  # 1.9, 1.7, 1.8: median 1.8 against 1.9
    (found,) = confirm.order_findings(confirm.confirmation_table(confirm.choices(ladder), pd.DataFrame(mine + quicker)))
    assert "slower on the medians in 0, faster in 1 (m ctx 2048: int4 b by 5.3 %)" in str(found)
    assert "(or, unpaired, on the medians)" in str(found) and found.values["unpaired_faster"] == 1
    assert confirm.order_findings(confirm.confirmation_table(confirm.choices(ladder), pd.DataFrame(mine))) == []


def test_two_runs_count_every_session_each_paired_in_its_own_run_and_the_order_is_named():
    """A cell confirmed in two runs (one cut by its call, one whole) that share session numbers: 4 sessions, not 2
    pooled ones, each winner paired with the runner-up of its own run; every runner-up faster: `reversed`."""
    s0 = CONFIRM_FIRST_SESSION
    rows = pd.DataFrame(_decode("cut", s0, "lean_fused_early_graph", [4.3]) + _decode("cut", s0, "lean_fused_graph", [4.2])
                        + _decode("cut", s0 + 1, "lean_fused_early_graph", [4.4])
                        + _decode("cut", s0 + 1, "lean_fused_graph", [4.0])
                        + _decode("whole", s0, "lean_fused_early_graph", [4.1])
                        + _decode("whole", s0, "lean_fused_graph", [4.0])
                        + _decode("whole", s0 + 1, "lean_fused_early_graph", [4.2]))  # no runner-up: unpaired
    bf16 = confirm.confirmation_table(confirm.choices(LADDER), rows).set_index("kind").loc["bf16"]
    assert bf16["sessions"] == 4 and bf16["paired_sessions"] == 3 and bf16["status"] == confirm.CONFIRMED
    assert bf16["confirmed_ms"] == pytest.approx(4.25)  # the median of 4.3, 4.4, 4.1, 4.2
    assert (bf16["confirmed_min_ms"], bf16["confirmed_max_ms"]) == (pytest.approx(4.1), pytest.approx(4.4))
    margins = sorted([4.2 / 4.3 - 1, 4.0 / 4.4 - 1, 4.0 / 4.1 - 1])
    assert bf16["margin_median"] == pytest.approx(margins[1]) and bf16["margin_min"] == pytest.approx(margins[0])
    assert bf16["order"] == confirm.ORDER_REVERSED
    assert "4.10-4.40 ms over them" in confirm.margin_text(bf16)
    assert "the selection's order did not hold" in confirm.margin_text(bf16)
    found = confirm.order_findings(confirm.confirmation_table(confirm.choices(LADDER), rows))
    assert len(found) == 1 and "in 0 of 1 confirmed cells" in found[0] and "in 1 the runner-up was faster" in found[0]
    assert found[0].endswith("the selection's best-of-many pick is not confirmed as the faster of the two; the "
                             "targets still read the chosen lever's confirmed time there.")
    held = pd.DataFrame(_decode("whole", s0, "lean_fused_early_graph", [4.0]) + _decode("whole", s0, "lean_fused_graph", [4.1]))
    assert confirm.order_findings(confirm.confirmation_table(confirm.choices(LADDER), held))[0].endswith(
        "faster than its runner-up in every paired session.")  # the order held: nothing more to say


def test_fewer_sessions_than_asked_are_partly_confirmed():
    rows = pd.DataFrame(_decode("conf", CONFIRM_FIRST_SESSION, "lean_fused_early_graph", [4.2]))
    t = confirm.confirmation_table(confirm.choices(LADDER), rows).set_index("kind")
    assert t.loc["bf16", "status"] == confirm.PARTLY and t.loc["bf16", "paired_sessions"] == 0
    assert "no runner-up timed" in confirm.margin_text(t.loc["bf16"])
    # one paired session: the order line counts the cell and calls it partly confirmed, not confirmed
    paired = pd.DataFrame(_decode("conf", CONFIRM_FIRST_SESSION, "lean_fused_early_graph", [4.2])
                          + _decode("conf", CONFIRM_FIRST_SESSION, "lean_fused_graph", [4.3]))
    found = confirm.order_findings(confirm.confirmation_table(confirm.choices(LADDER), paired))
    assert len(found) == 1 and found[0].values["partly"] == 1
    assert "in 1 of 1 cells with paired sessions (0 confirmed, 1 partly confirmed with fewer than 3 sessions)" in found[0]


@pytest.mark.slow
def test_the_confirmation_plans_time_each_shipped_choice_beside_its_runner_up(shipped_ladder):
    """On the shipped H200 ladder: one sweep per model, path and (chosen lever, runner-up) pair, its sessions numbered
    from CONFIRM_FIRST_SESSION (apart from every selection reader), every arm checked in every session."""
    from decodegap import paths
    from decodegap.experiments import closing_the_gap as experiment

    plans = experiment.confirmation_plans("h200", paths.DATA, ladder_table=shipped_ladder)
    choice = confirm.choices(shipped_ladder)
    choice = choice[choice.gpu == "h200"]
    planned = {(m, c, p.quant, a) for p in plans for m in p.models for c in p.contexts for a in p.arms}
    for c in choice.to_dict("records"):
        assert (c["model"], c["ctx"], c["quant"], c["arm"]) in planned
        if pd.notna(c["runner_up_arm"]):
            assert (c["model"], c["ctx"], c["runner_up_quant"], c["runner_up_arm"]) in planned
    assert all(p.first_session == CONFIRM_FIRST_SESSION and p.sessions == CONFIRM_SESSIONS and p.check_every_session
               and len(p.models) == 1 for p in plans)
    assert len(planned) == sum(len(p.contexts) * len(p.arms) for p in plans)  # no cell planned twice
    # per model, a sweep of chosen levers before any sweep of runners-up alone, on both GPUs' ladders; the rule is
    # exercised where a runner-up's sweep follows a chosen one whose path sorts after it (on the H100 SXM's, qwen2.5-7b's
    # int4-tinygemm runner-up after its chosen int4-triton sweeps; until 2026-12-07 the H200's had such a case too)
    exercised = 0
    for gpu in ("h200", "h100-sxm"):
        gpu_plans = plans if gpu == "h200" else experiment.confirmation_plans(gpu, paths.DATA,
                                                                              ladder_table=shipped_ladder)
        every = confirm.choices(shipped_ladder)
        chosen = {(c["model"], c["quant"], c["arm"]) for c in every[every.gpu == gpu].to_dict("records")}
        for model in {p.models[0] for p in gpu_plans}:
            mine = [(any((model, p.quant, a) in chosen for a in p.arms), p.quant) for p in gpu_plans
                    if p.models[0] == model]
            assert [m for m, _ in mine] == sorted([m for m, _ in mine], reverse=True), (gpu, model)
            exercised += sum(1 for i, (m, q) in enumerate(mine) if not m and any(c and q < cq for c, cq in mine[:i]))
    assert exercised


def test_the_confirmation_plans_of_the_targets_cell_alone(shipped_ladder):
    """--models llama-3.1-8b --contexts 2048: the target cell's two pairs (bf16 and int4), nothing else."""
    from decodegap import paths
    from decodegap.experiments import closing_the_gap as experiment

    plans = experiment.confirmation_plans("h200", paths.DATA, model_keys=("llama-3.1-8b",), contexts=(2048,),
                                          ladder_table=shipped_ladder)
    assert {(p.models, p.contexts) for p in plans} == {(("llama-3.1-8b",), (2048,))}
    assert {confirm.kind(p.quant) for p in plans} == {"bf16", "int4"}  # the int4 pair on its chosen int4 path
    assert sum(len(p.arms) for p in plans) == 4  # each chosen lever beside its runner-up
    assert experiment.confirmation_plans("h200", paths.DATA, model_keys=("llama-3.1-8b",), contexts=(32,),
                                         ladder_table=shipped_ladder) == []


def test_the_confirmation_plans_of_one_kind_and_the_cli_refuses_an_unknown_kind(tmp_path, capsys, shipped_ladder):
    """kinds=("bf16",): the bf16 cells' pairs only, every shipped bf16 choice among them and no int4 path; the CLI
    refuses a kind that is not bf16 or int4 (and --kinds without --confirm) before anything runs."""
    from decodegap import paths
    from decodegap.cli import main
    from decodegap.experiments import closing_the_gap as experiment

    plans = experiment.confirmation_plans("h200", paths.DATA, kinds=("bf16",), ladder_table=shipped_ladder)
    choice = confirm.choices(shipped_ladder)
    bf16 = choice[(choice.gpu == "h200") & (choice.kind == "bf16")]
    assert {p.quant for p in plans} == {"bf16"}
    assert sum(len(p.contexts) for p in plans) == len(bf16) == 12  # 3 models x 4 contexts, one pair each
    both = experiment.confirmation_plans("h200", paths.DATA, ladder_table=shipped_ladder)
    assert len(both) > len(plans) and {p.quant for p in both} - {"bf16"}
    for bad, said in ((["--kinds", "int8", "--confirm"], "--kinds takes bf16 and/or int4"),
                      (["--kinds", "bf16"], "give it with --confirm")):
        assert main(["--data-dir", str(tmp_path), "closing-the-gap", "--gpu", "h200"] + bad) != 0
        assert said in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_each_confirmation_names_its_runs_and_the_commits_they_ran():
    """run_ids: the chosen lever's runs; with_commits: their short commits from env.json's entries (+dirty where the
    tree was), which the margin text names; a run env.json lacks adds none."""
    s0 = CONFIRM_FIRST_SESSION
    rows = pd.DataFrame(_decode("r1", s0, "lean_fused_early_graph", [4.2]) + _decode("r2", s0, "lean_fused_early_graph",
                                                                                     [4.1])
                        + _decode("r2", s0 + 1, "lean_fused_early_graph", [4.3])
                        + _decode("r3", s0, "lean_fused_graph", [4.4]))  # the runner-up's run: not the lever's
    t = confirm.confirmation_table(confirm.choices(LADDER), rows)
    bf16 = t.set_index("kind").loc["bf16"]
    assert bf16["run_ids"] == "r1 r2"
    env = {("h200", "r1"): {"git_commit": "74efca6" + "0" * 33}, ("h200", "r2"): {"git_commit": "a11dbb5" + "1" * 33
                                                                                    + "+dirty"},
           ("h200", "r3"): {"git_commit": "ffffffff"}}
    named = confirm.with_commits(t, confirm.commits_of_runs(env)).set_index("kind")
    assert named.loc["bf16", "commits"] == "74efca6 a11dbb5+dirty"
    assert "measured at commits 74efca6, a11dbb5+dirty" in confirm.margin_text(named.loc["bf16"])
    assert confirm.with_commits(t, {}).set_index("kind").loc["bf16", "commits"] == ""
    assert "measured at" not in confirm.margin_text(confirm.with_commits(t, {}).set_index("kind").loc["bf16"])


def test_a_cell_confirmed_at_two_commits_reads_the_newest_commits_runs():
    """The rule since 2026-12-04: with commits known, only the runs at the commit of the newest run that timed the
    lever count (both arms' sessions paired within them); the older runs are named as superseded. Without commits,
    or with a run whose commit is unknown, every run counts, as before."""
    s0 = CONFIRM_FIRST_SESSION
    rows = pd.DataFrame(
        _decode("20261204T1700-a", s0, "lean_fused_early_graph", [4.5]) + _decode("20261204T1700-a", s0,
                                                                                  "lean_fused_graph", [4.6])
        + _decode("20261204T1800-b", s0, "lean_fused_early_graph", [4.2])
        + _decode("20261204T1800-b", s0, "lean_fused_graph", [4.4])
        + _decode("20261204T1900-c", s0, "lean_fused_early_graph", [4.0])
        + _decode("20261204T1900-c", s0, "lean_fused_graph", [4.4]))
    commit_of = {"20261204T1700-a": "old", "20261204T1800-b": "new", "20261204T1900-c": "new"}
    bf16 = confirm.confirmation_table(confirm.choices(LADDER), rows, commit_of).set_index("kind").loc["bf16"]
    assert bf16["run_ids"] == "20261204T1800-b 20261204T1900-c" and bf16["superseded_runs"] == "20261204T1700-a"
    assert bf16["sessions"] == 2 and bf16["confirmed_ms"] == pytest.approx(4.1)  # 4.2 and 4.0; not 4.5
    assert bf16["margin_median"] == pytest.approx(((4.4 / 4.2 - 1) + (4.4 / 4.0 - 1)) / 2)
    pooled = confirm.confirmation_table(confirm.choices(LADDER), rows).set_index("kind").loc["bf16"]
    assert pooled["sessions"] == 3 and pooled["superseded_runs"] == ""  # no commits given: every run, as before
    unknown = confirm.confirmation_table(confirm.choices(LADDER), rows, {"20261204T1700-a": "old"}).set_index("kind")
    assert unknown.loc["bf16", "sessions"] == 3 and unknown.loc["bf16", "superseded_runs"] == ""  # a run's commit
    # unknown: it cannot be placed before or after a change, so every run counts, as without commits
    assert confirm.commits_of_runs({("h200", "x"): {"git_commit": ""}, ("h200", "y"): {"git_commit": "abcdef12"}}) == {
        "y": "abcdef1"}


def test_confirming_again_plans_fresh_runs_and_the_cli_takes_again_with_confirm(tmp_path, capsys, shipped_ladder):
    from decodegap import paths
    from decodegap.cli import main
    from decodegap.experiments import closing_the_gap as experiment

    plans = experiment.confirmation_plans("h200", paths.DATA, model_keys=["llama-3.1-8b"], contexts=[2048],
                                          kinds=("int4",), again=True, ladder_table=shipped_ladder)
    assert plans and all(p.again for p in plans)
    # without --again a pair is measured in a run of its own only where earlier confirmation rows of one of its arms,
    # from another pairing, would make the resumed sweep time the other arm alone (unpaired_runs), unless a run of the
    # pair itself has timed it whole: on the shipped rows run 20261205T142347-17d6dd timed the int4 target cell's pair
    # in its 3 sessions, so its runner-up's rows from run 20261205T034524-09ce5e (another pairing) asked for no new run;
    # since, run 20261205T160920-09b2e3 timed the kv-together lever beside it whole in 3 sessions of its own, so the
    # norm-scale lever's rows from run 142347 (now the other pairing) ask for none either
    (p,) = experiment.confirmation_plans("h200", paths.DATA, model_keys=["llama-3.1-8b"], contexts=[2048],
                                         kinds=("int4",), ladder_table=shipped_ladder)
    assert p.arms == ("lean_fused_all_kv_together_graph", "lean_fused_all_norm_scale_graph") and not p.again
    assert experiment.unpaired_runs(p, paths.DATA) == ["20261205T142347-17d6dd"]
    assert main(["--data-dir", str(tmp_path), "closing-the-gap", "--gpu", "h200", "--confirm", "--levers",
                 "lean_fused_graph"]) != 0
    assert "neither --levers nor --retry-errors" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_the_cli_passes_again_to_the_confirmation(monkeypatch, tmp_path):
    from decodegap import cli
    from decodegap.experiments import closing_the_gap as experiment

    seen = {}
    monkeypatch.setattr(experiment, "confirm", lambda gpu, **kw: seen.update(kw, gpu=gpu) or [])
    monkeypatch.setattr(cli, "_resolve_gpu", lambda gpu, data, device: gpu)
    assert cli.main(["closing-the-gap", "--gpu", "h200", "--confirm", "--again", "--kinds", "int4", "--models",
                     "llama-3.1-8b", "--contexts", "2048"]) == 0
    assert seen["again"] is True and list(seen["kinds"]) == ["int4"] and seen["gpu"] == "h200"
    assert cli.main(["closing-the-gap", "--gpu", "h200", "--confirm", "--kinds", "int4"]) == 0
    assert seen["again"] is False


def test_the_confirmed_fastest_lever_needs_its_sessions_and_its_kind():
    """Of the levers timed by confirmation sweeps at a cell, the fastest with at least CONFIRM_SESSIONS sessions, of
    the kind asked for: a faster lever with fewer sessions, another cell's or another kind's does not count."""
    cell = dict(gpu="h200", model="m", ctx=2048)

    def rows(arm, quant, ms, sessions, **where):
        at = dict(cell, **where)
        return [dict(at, run_id="r", session=CONFIRM_FIRST_SESSION + s, arm=arm, quant=quant, step_ms=ms + 0.01 * s,
                     status="ok", batch=1) for s in range(sessions) for _ in range(3)]

    frame = pd.DataFrame(rows("a", "bf16", 4.2, CONFIRM_SESSIONS) + rows("b", "bf16", 4.1, CONFIRM_SESSIONS - 1)
                         + rows("c", "bf16", 4.0, CONFIRM_SESSIONS, ctx=4096) + rows("d", "int4-triton", 2.1, 3)
                         + rows("e", "bf16", 4.3, CONFIRM_SESSIONS))
    assert confirm.confirmed_fastest(frame, cell, "bf16") == ("a", "bf16")
    assert confirm.confirmed_fastest(frame, cell, "int4") == ("d", "int4-triton")
    assert confirm.confirmed_fastest(frame[frame.arm != "a"], cell, "bf16") == ("e", "bf16")
    assert confirm.confirmed_fastest(frame.iloc[:0], cell, "bf16") is None


def test_every_lever_confirmation_is_listed_however_few_its_sessions():
    """lever_confirmations lists each lever timed by confirmation sweeps, with its session medians' median, range
    and count by hand (session medians 4.1, 4.3 and 4.2: median 4.2, range 4.1-4.3), a lever of two sessions
    among them; confirmed_levers keeps only those with CONFIRM_SESSIONS."""
    cell = dict(gpu="h200", model="m", ctx=2048)

    def rows(arm, medians):
        return [dict(cell, run_id="r", session=CONFIRM_FIRST_SESSION + s, arm=arm, quant="bf16", step_ms=m + d,
                     status="ok", batch=1) for s, m in enumerate(medians) for d in (-0.05, 0.0, 0.05)]

    frame = pd.DataFrame(rows("a", [4.1, 4.3, 4.2]) + rows("b", [3.9, 3.95]))
    every = confirm.lever_confirmations(frame).set_index("arm")
    assert every.loc["a", ["confirmed_ms", "confirmed_min_ms", "confirmed_max_ms", "sessions"]].tolist() == \
        pytest.approx([4.2, 4.1, 4.3, 3])
    assert every.loc["b", "sessions"] == 2 and every.loc["b", "confirmed_ms"] == pytest.approx(3.925)
    held = confirm.confirmed_levers(frame)
    assert held["arm"].tolist() == ["a"] and held["sessions"].tolist() == [3]
    assert confirm.lever_confirmations(frame.iloc[:0]).empty


def test_a_pair_resumes_only_runs_that_timed_that_pair(tmp_path):
    """unpaired_runs: confirmation rows of the pair's arms at its cells from a run whose plan timed other arms (the
    runner-up confirmed before as the chosen lever of another pair) are named, and confirmation_plans then measures the
    pair in a run of its own; a run of the same pair in the other order, a selection row and another cell's row are
    not. Run 20261205T053526-b283dc resumed from such rows and timed the chosen lever alone."""
    import json

    from decodegap.experiments import closing_the_gap as experiment
    from decodegap.harness.sweep import SweepPlan

    s0 = CONFIRM_FIRST_SESSION
    chosen, runner_up = "lean_fused_next_token_graph", "lean_fused_early_products_graph"
    other = "lean_fused_pdl_norm_graph"
    raw = tmp_path / "raw" / "h200"
    raw.mkdir(parents=True)
    cell = dict(gpu="h200", model="llama-3.1-8b", quant="bf16")
    rows = pd.DataFrame([dict(run_id="old", session=s0, ctx=2048, arm=runner_up, **cell),  # paired with `other`
                         dict(run_id="same", session=s0 + 1, ctx=2048, arm=chosen, **cell),  # this pair, reversed
                         dict(run_id="sel", session=0, ctx=2048, arm=runner_up, **cell),  # a selection row
                         dict(run_id="far", session=s0, ctx=4096, arm=runner_up, **cell)])  # another cell
    rows.to_csv(raw / "decode.csv", index=False)
    plans = {"old": (runner_up, other), "same": (runner_up, chosen), "sel": ("lean_graph",), "far": ("lean_graph",)}
    (raw / "env.json").write_text(json.dumps({r: {"plan": {"arms": list(a)}} for r, a in plans.items()}))
    plan = SweepPlan(gpu="h200", models=("llama-3.1-8b",), contexts=(2048,), arms=(chosen, runner_up),
                     quant="bf16", sessions=3, steps=30, warmup=5, device="cuda", first_session=s0,
                     check_every_session=True)
    assert plan.csv_path(tmp_path) == raw / "decode.csv"
    assert experiment.unpaired_runs(plan, tmp_path) == ["old"]
    (raw / "env.json").write_text(json.dumps({r: {"plan": {"arms": [chosen, runner_up]}} for r in plans}))
    assert experiment.unpaired_runs(plan, tmp_path) == []
    (raw / "decode.csv").unlink()
    assert experiment.unpaired_runs(plan, tmp_path) == []


def test_a_pair_its_own_run_confirmed_whole_is_not_measured_again():
    """paired_run_covers: run "pair" timed exactly this pair (either order) at both contexts in the 3 sessions, so the
    pair is confirmed and another pairing's rows of its runner-up (run "old") ask for no run of its own; one missing
    session of one arm, or the pair's rows split over two runs, leave it uncovered."""
    from decodegap.experiments import closing_the_gap as experiment
    from decodegap.harness.sweep import SweepPlan

    s0 = CONFIRM_FIRST_SESSION
    chosen, runner_up = "lean_fused_norm_scale_graph", "lean_fused_next_token_graph"
    cell = dict(gpu="h200", model="llama-3.1-8b", quant="bf16")
    plan = SweepPlan(gpu="h200", models=("llama-3.1-8b",), contexts=(2048, 4096), arms=(chosen, runner_up),
                     quant="bf16", sessions=3, first_session=s0)
    whole = [dict(run_id="pair", session=s, ctx=c, arm=a, **cell) for s in plan.session_ids for c in (2048, 4096)
             for a in (chosen, runner_up)]
    old = [dict(run_id="old", session=s0, ctx=2048, arm=runner_up, **cell)]
    run_plans = {("h200", "pair"): {"arms": [runner_up, chosen]}, ("h200", "old"): {"arms": [runner_up, "x"]}}
    assert experiment.paired_run_covers(plan, pd.DataFrame(whole + old), run_plans)
    assert not experiment.paired_run_covers(plan, pd.DataFrame(whole[:-1] + old), run_plans)
    split = [dict(r, run_id="pair2") if r["ctx"] == 4096 else r for r in whole]
    assert not experiment.paired_run_covers(plan, pd.DataFrame(split), {
        **run_plans, ("h200", "pair2"): {"arms": [chosen, runner_up]}})
    assert not experiment.paired_run_covers(plan, pd.DataFrame(whole), {("h200", "pair"): {"arms": [chosen]}})


def test_a_pair_timed_over_runs_of_one_commit_session_by_session_is_covered():
    """paired_run_covers with commits: a run of the pair cut short after sessions 200-201 and its continuation timing
    202 (harness.continuation) cover the pair at one commit; at two commits, without commits, or with a session split
    between two runs, they do not (the readers pool one commit's runs, and never two processes into one session)."""
    from decodegap.experiments import closing_the_gap as experiment
    from decodegap.harness.sweep import SweepPlan

    s0 = CONFIRM_FIRST_SESSION
    chosen, runner_up = "lean_fused_kv_together_graph", "lean_fused_pdl_graph"
    cell = dict(gpu="h200", model="mistral-7b-v0.3", quant="bf16")
    plan = SweepPlan(gpu="h200", models=("mistral-7b-v0.3",), contexts=(2048, 4096), arms=(chosen, runner_up),
                     quant="bf16", sessions=3, first_session=s0, again=True)
    rows = pd.DataFrame([dict(run_id="a" if s < s0 + 2 else "b", session=s, ctx=c, arm=a, **cell)
                         for s in plan.session_ids for c in (2048, 4096) for a in (chosen, runner_up)])
    run_plans = {("h200", r): {"arms": [chosen, runner_up]} for r in ("a", "b")}
    assert experiment.paired_run_covers(plan, rows, run_plans, {"a": "5d9ef99", "b": "5d9ef99"})
    assert not experiment.paired_run_covers(plan, rows, run_plans, {"a": "5d9ef99", "b": "8f422fa"})
    assert not experiment.paired_run_covers(plan, rows, run_plans)
    split = rows.assign(run_id=["b" if (s == s0 + 1 and c == 4096) else r
                                for r, s, c in zip(rows["run_id"], rows["session"], rows["ctx"])])
    assert not experiment.paired_run_covers(plan, split, run_plans, {"a": "5d9ef99", "b": "5d9ef99"})


def test_confirmation_plans_continue_a_pair_cut_short_at_this_commit(monkeypatch):
    """experiment.continuing: a confirmation plan measured in a run of its own continues the runs of exactly that plan
    cut short at the commit and source measuring now (their whole sessions are not timed again); a plan that resumes,
    and a run of another commit, are left alone."""
    import json

    from decodegap import hardware
    from decodegap.experiments import closing_the_gap as experiment
    from decodegap.harness.sweep import SweepPlan

    s0 = CONFIRM_FIRST_SESSION
    arms = ("lean_fused_kv_together_graph", "lean_fused_pdl_norm_graph")
    plan = SweepPlan(gpu="h200", models=("mistral-7b-v0.3",), contexts=(2048,), arms=arms, quant="bf16",
                     sessions=3, first_session=s0, check_every_session=True, again=True)
    cell = dict(gpu="h200", model="mistral-7b-v0.3", quant="bf16", ctx=2048)
    rows = pd.DataFrame([dict(run_id=r, session=s, arm=a, **cell) for r, sessions in (("cut", (s0,)), ("old", (s0,)))
                         for s in sessions for a in arms])
    stored = json.loads(plan.to_json())
    run_plans = {("h200", r): stored for r in ("cut", "old")}
    env = {("h200", "cut"): {"git_commit": "1" * 40, "source_sha256": "d" * 64},
           ("h200", "old"): {"git_commit": "2" * 40, "source_sha256": "d" * 64}}
    monkeypatch.setattr(hardware, "git_commit", lambda repo=None: "1" * 40)
    monkeypatch.setattr(hardware, "source_digest", lambda root=None: "d" * 64)
    resumed = SweepPlan(**{**stored, "models": plan.models, "contexts": plan.contexts, "arms": arms, "again": False})
    out = experiment.continuing([plan, resumed], rows, run_plans, env)
    assert out[0].continues == ("cut",) and out[1] == resumed
    assert {s: len(c) for s, c in out[0].pending_by_session(None, rows.assign(status="ok", attn="sdpa", batch=1)
                                                            ).items()} == {s0: 0, s0 + 1: 2, s0 + 2: 2}


def test_the_plan_of_a_confirmation_lists_its_sweeps_in_order_and_writes_nothing(capsys, shipped_ladder):
    """--confirm --plan on the shipped rows: one line per sweep of confirmation_plans, in its order, each session's
    pending cells as SweepPlan.pending counts them, and their total; no GPU needed and no file touched. Without --gpu,
    or without --confirm, it is refused."""
    import hashlib

    from decodegap import paths
    from decodegap.cli import main
    from decodegap.experiments import closing_the_gap as experiment

    def digest():
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (paths.DATA / "raw" / "h200").iterdir()}

    before = digest()
    assert main(["closing-the-gap", "--confirm", "--plan", "--gpu", "h200", "--kinds", "int4",
                 "--models", "qwen2.5-7b"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    plans = experiment.confirmation_plans("h200", paths.DATA, model_keys=["qwen2.5-7b"], kinds=["int4"],
                                          ladder_table=shipped_ladder)
    assert len(lines) == len(plans) + 1
    for line, p in zip(lines, plans):
        assert line.startswith(f"qwen2.5-7b {p.quant} [{', '.join(p.arms)}] ctx ")
        for s in p.session_ids:
            assert f"{len(p.pending(s, paths.DATA))} in session {s}" in line
    total = sum(len(p.pending(s, paths.DATA)) for p in plans for s in p.session_ids)
    assert lines[-1].startswith(f"{len(plans)} sweep(s), {total} cell(s) to time")
    assert digest() == before
    for bad, said in ((["--confirm", "--plan"], "give its key with --gpu"),
                      (["--plan"], "give its key with --gpu")):  # without --confirm: the selection's plan
        assert main(["closing-the-gap"] + bad) != 0
        assert said in capsys.readouterr().err


def test_the_shift_from_selection_to_confirmation_by_hand():
    """Per GPU and kind over confirmed cells only: 4.00 -> 4.04 ms is +1.0 %, 4.00 -> 4.001 the same to 0.1 % (not
    slower), 2.12 -> 1.97 is -7.1 %; a partly confirmed cell is not read; never '-0.0 %'."""
    def cell(gpu, model, k, selected, confirmed, status=confirm.CONFIRMED):
        return dict(gpu=gpu, model=model, ctx=2048, kind=k, selected_ms=selected, confirmed_ms=confirmed, status=status)

    table = pd.DataFrame([cell("h200", "a", "bf16", 4.00, 4.04), cell("h200", "b", "bf16", 4.00, 3.9999),
                          cell("h200", "c", "bf16", 4.00, 3.00, confirm.PARTLY),
                          cell("h100-sxm", "q", "int4", 2.12, 1.97)])
    found = confirm.shift_findings(table)
    assert len(found) == 2
    h100, h200 = found
    assert "-7.1 %; slower when measured again in 0, faster in 1, the same to 0.1 % in 0 (q ctx 2048, 2.120 to " \
           "1.970 ms)" in h100
    assert ("over 2 confirmed cells the chosen lever's confirmed time is its selection median +0.0 % to +1.0 % "
            "(median +0.5 %); slower when measured again in 1, faster in 0, the same to 0.1 % in 1; the largest move "
            "a ctx 2048, 4.000 to 4.040 ms.") in h200
    assert h200.values["slower"] == 1 and h200.values["shift_max"] == pytest.approx(0.01)
