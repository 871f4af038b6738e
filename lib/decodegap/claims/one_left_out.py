"""Is a verdict carried by one thing? Every finding's rule applied again with the measured rows of one model, of one
context, or of one session of a headline cell left out, and the labels that change named in the row (claims.md's
`one_left_out`).

A model or a context leaves every measured frame (MEASURED, and notebook 07's tables that have the column). A session
leaves the headline cells alone (Evidence.headline_model at Evidence.headline_ctx, one per GPU and arm: the one cell
R1a and R1b read, and every other rule that reads a GPU's headline step): its decode rows of notebook 01 (every arm
that run's session timed at that cell) leave Evidence.cell_rows and the cells are made again from the rest as notebook
01 makes them (Evidence.with_cell_rows), so the cell's median over sessions, its session range (the rules' noise) and
its R_floor move as if that session had not been timed. No other session is left out: not those of the other cells,
nor the A/B sweeps' (ab_sessions, and the speed-ups and decomposition made from them), nor the quantisation cells',
nor those behind notebook 07's tables.

Only the measured frames lose rows (MEASURED): the paper's published numbers, the GPU registry, the byte model and the
cost table stay whole. Statistics a notebook computes across models before the rules read them (notebook 07's step
model fits, W2a's) are not fitted again: their rows drop, their fits stay. A rule that reads one cell (the headline
cell of R1b, R2a) has nothing left without that cell's model or context: a label that turns `not testable here` is not
a flip and is not named, nor is a label that another source gives once the row's own source has nothing left (the
paper's numbers, where our rows at the rule's one context are left out)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Callable, Mapping

import pandas as pd

from decodegap.claims.evidence import CELL_FRAMES, Evidence
from decodegap.claims.rules import PAPER
from decodegap.claims.verdicts import NOT_TESTABLE, SECTION_FINDING

MEASURED = CELL_FRAMES + ("verify", "cell_rows")
"""The Evidence frames of measured rows (with notebook 07's tables, ev.scope) that a model or a context is left out
of: the cells', their checks' and the decode rows notebook 01's cells are made of."""
SESSION_KEY = ["gpu", "run_id", "session"]
"""What names one session of a headline cell: its GPU, its run and its number in that run."""


def without(ev: Evidence, column: str, value) -> Evidence:
    """`ev` with the measured rows whose `column` ("model" or "ctx") is `value` left out (MEASURED and ev.scope's
    frames that have the column)."""
    def drop(frame):
        if isinstance(frame, pd.DataFrame) and column in frame and not frame.empty:
            return frame[frame[column] != value]
        return frame

    scope = {k: drop(v) for k, v in ev.scope.items()} if isinstance(ev.scope, Mapping) else ev.scope
    return dataclasses.replace(ev, scope=scope, **{name: drop(getattr(ev, name)) for name in MEASURED})


def left_out(ev: Evidence) -> list[tuple[str, object]]:
    """(column, value) of every model and every context of the measured cells (Evidence.measured_values), in order."""
    return [(column, v) for column in ("model", "ctx") for v in ev.measured_values(column)]


def _at_headline_cell(ev: Evidence) -> pd.Series:
    """Which of notebook 01's decode rows (ev.cell_rows) are of a headline cell (the headline model and context)."""
    r = ev.cell_rows
    return (r["model"] == ev.headline_model) & (r["ctx"] == ev.headline_ctx)


def headline_sessions(ev: Evidence) -> list[tuple[str, str, int]]:
    """(gpu, run id, session) of every session among notebook 01's decode rows at the headline cells, in order: the
    sessions whose medians make the headline cell's step (its median) and its session range."""
    if ev.cell_rows.empty:
        return []
    keys = ev.cell_rows.loc[_at_headline_cell(ev), SESSION_KEY].dropna().drop_duplicates().sort_values(SESSION_KEY)
    return [(gpu, run_id, int(session)) for gpu, run_id, session in keys.itertuples(index=False)]


def without_session(ev: Evidence, gpu: str, run_id: str, session: int) -> Evidence:
    """`ev` with one session's decode rows at the headline cell (every arm that session of run `run_id` timed on
    `gpu`) left out and the cells made again from the rest (Evidence.with_cell_rows)."""
    r = ev.cell_rows
    out = _at_headline_cell(ev) & (r["gpu"] == gpu) & (r["run_id"] == run_id) & (r["session"] == session)
    return ev.with_cell_rows(r[~out])


MODELS_AND_CONTEXTS, SESSIONS = "models and contexts", "sessions of the headline cells"
"""The two kinds of thing left out, as the column counts them."""


def _variants(ev: Evidence, make_rows: Callable[[Evidence], list[dict]]) -> list[tuple[str, str, dict]]:
    """(kind, what is left out, the rows made without it keyed by `_keyed`): every model and context (`left_out`),
    then every session of the headline cells (`headline_sessions`)."""
    out = [(MODELS_AND_CONTEXTS, f"{col} {value}", _keyed(make_rows(without(ev, col, value))))
           for col, value in left_out(ev)]
    return out + [(SESSIONS, f"{gpu} session {session} of run {run_id}",
                   _keyed(make_rows(without_session(ev, gpu, run_id, session))))
                  for gpu, run_id, session in headline_sessions(ev)]


def _unchanged(variants: list[tuple[str, str, dict]], nothing: list[str]) -> str:
    """The text of a label no variant changes: per kind, of how many of them left out the source still judges (e.g.
    "unchanged with any one of N of the M models and contexts, or any one of K of the L sessions of the headline
    cells, left out"), naming those that leave it nothing to judge."""
    total = Counter(kind for kind, _, _ in variants)
    judged = Counter(kind for kind, what, _ in variants if what not in nothing)
    kinds = dict.fromkeys([MODELS_AND_CONTEXTS, *total])  # the models and contexts first, counted even when none
    parts = [f"any one of {judged[kind]} of the {total[kind]} {kind}" for kind in kinds]
    return (f"unchanged with {', or '.join(parts)}{',' if len(parts) > 1 else ''} left out"
            + (f" (without {', '.join(nothing)} its source has nothing left to judge)" if nothing else ""))


def _keyed(rows: list[dict]) -> dict[tuple[str, int], dict]:
    """Rows by (id, its occurrence): a rule may make one row per GPU (R5m)."""
    seen: dict[str, int] = {}
    out = {}
    for r in rows:
        n = seen[r["id"]] = seen.get(r["id"], -1) + 1
        out[(r["id"], n)] = r
    return out


def column(ev: Evidence, make_rows: Callable[[Evidence], list[dict]], base: list[dict] | None = None) -> list[str]:
    """Per row of `base` (`make_rows(ev)`, the claims table's rows in order, made here unless given), what leaving
    one model, one context or one session of a headline cell out does to its label (`category`): the labels the same
    source (the row's `source`) turns it into, each with what was left out (a label turned `not testable here`, or
    given by another source, is not named: the rows left nothing to judge); where none changes, `unchanged with any
    one of N of the M models and contexts, or any one of K of the L sessions of the headline cells, left out`, naming
    those that leave its source nothing to judge; '-' for a method check, a finding not testable with every row, or
    one labelled by the paper's own numbers (which read no measured row)."""
    base = make_rows(ev) if base is None else base
    variants = _variants(ev, make_rows)
    text = []
    for key, row in _keyed(base).items():
        if row["section"] != SECTION_FINDING or row["category"] == NOT_TESTABLE or row.get("source") == PAPER:
            text.append("-")  # a method check, nothing to judge, or the paper's own numbers (no measured row read)
            continue
        flips, nothing = [], []
        for _, what, rows in variants:
            other = rows.get(key)
            if (other is None or other["category"] == NOT_TESTABLE
                    or other.get("source") != row.get("source")):  # the row's source left with nothing to judge
                nothing.append(what)
            elif other["category"] != row["category"]:
                flips.append(f"without {what}: {other['category']}")
        text.append("; ".join(flips) if flips else _unchanged(variants, nothing))
    return text
