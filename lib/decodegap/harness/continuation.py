"""Continuing a sweep measured in a run of its own (`again`) that a call cut short.

A sweep planned `again` (a confirmation pair measured in a run of its own, `closing-the-gap --confirm --again`)
counts only its own run's rows as done, so a call stopped by its time limit and followed by another (a warm device
machine's next call, the rows merged back with RESUME_FROM) timed the stopped run's finished sessions once more: on
the H200 on 2026-12-07 two of three confirmation calls began by timing again sessions the call before had finished
(runs 20261207T134822-aa1623 and 20261207T135814-4eda90). A plan may now name such runs (SweepPlan.continues): their
whole sessions count as done, and the new run times the rest. Only a run of exactly the same plan, measured at the
commit and source digest that measure now, and left with a session it did not finish, is continued (cut_short_runs):
the confirmation readers pool the sessions of one commit's runs (analysis.closing_the_gap_confirmation
.newest_commit_runs), so the continued sessions and the new ones are read as one confirmation, and a session is
never made of two processes (whole_sessions)."""

from __future__ import annotations

import re

import pandas as pd

PLAN_FIELDS = ("models", "contexts", "arms", "quant", "attn", "sessions", "steps", "warmup", "first_session",
               "batches", "again", "check_every_session", "experiment")
"""The fields of a run's plan (env.json) that must equal a plan's for the run to be continued by it: the same cells,
in the same order of arms per session, timed the same way (`continues` itself and the device aside)."""


def _normal(value):
    return tuple(value) if isinstance(value, (list, tuple)) else value


def same_plan(stored: dict | None, plan) -> bool:
    """Whether `stored` (a run's plan as env.json records it) is `plan` (a SweepPlan) on every PLAN_FIELDS field."""
    return bool(stored) and all(_normal(stored.get(k)) == _normal(getattr(plan, k)) for k in PLAN_FIELDS)


def whole_sessions(plan, rows: pd.DataFrame) -> dict[str, set[int]]:
    """{run id: the sessions of `plan` that run holds whole}: every model, context and arm of the session with a row
    of the run (`rows`: the plan's CSV, with run_id, session, model, ctx, arm and quant; batch and attention are the
    plan's). A session some of whose cells the run lacks is not whole."""
    if rows.empty:
        return {}
    rows = rows[(rows["quant"] == plan.quant) & rows["model"].isin(plan.models)
                & pd.to_numeric(rows["ctx"]).isin([int(c) for c in plan.contexts]) & rows["arm"].isin(plan.arms)]
    wanted = {(m, int(c), a) for m in plan.models for c in plan.contexts for a in plan.arms}
    out: dict[str, set[int]] = {}
    for run, g in rows.groupby(rows["run_id"].astype(str)):
        have = set(zip(g["model"], pd.to_numeric(g["ctx"]).astype(int), g["arm"], pd.to_numeric(g["session"])
                       .astype(int)))
        out[run] = {s for s in plan.session_ids if all((m, c, a, s) in have for m, c, a in wanted)}
    return out


def cut_short_runs(plan, rows: pd.DataFrame, run_plans: dict, env: dict, commit: str, source: str) -> tuple[str, ...]:
    """The runs `plan` (a SweepPlan measured `again`) continues: runs of exactly that plan (same_plan over
    `run_plans`, {(gpu, run id): plan}), whose env.json entry (`env`, {(gpu, run id): entry}) records `commit` and
    `source` (the code measuring now: hardware.git_commit and hardware.source_digest; never a '+dirty' or unknown
    commit), that hold some of its sessions whole but not all of them. A run that finished every session is not
    continued: asked for again at the same commit, the cells are measured again whole. Oldest first."""
    if not plan.again or not re.fullmatch(r"[0-9a-f]{7,40}", commit or "") or not source or rows.empty:
        return ()  # a '+dirty' or unknown commit names no one version of the code
    whole = whole_sessions(plan, rows)
    found = []
    for run in sorted(whole):
        entry = env.get((plan.gpu, run)) or {}
        if (same_plan(run_plans.get((plan.gpu, run)), plan) and entry.get("git_commit") == commit
                and entry.get("source_sha256") == source and 0 < len(whole[run]) < len(plan.session_ids)):
            found.append(run)
    return tuple(found)


def continued_sessions(plan, rows: pd.DataFrame) -> set[int]:
    """The sessions of `plan` some run of plan.continues holds whole (whole_sessions of `rows`): the sessions a
    continuing run leaves alone."""
    if not plan.continues:
        return set()
    return set().union(*whole_sessions(plan, rows[rows["run_id"].astype(str).isin(plan.continues)]).values())
