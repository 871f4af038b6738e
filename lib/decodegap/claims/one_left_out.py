"""Is a verdict carried by one thing? Every finding's rule applied again with the measured rows of one model, or of one
context, left out, and the labels that change named in the row (claims.md's `one_left_out`).

Only the measured frames lose rows (MEASURED): the paper's published numbers, the GPU registry, the byte model and the
cost table stay whole. Statistics a notebook computes across models before the rules read them (notebook 07's step
model fits, W2a's) are not fitted again: their rows drop, their fits stay. A rule that reads one cell (the headline
cell of R1b, R2a) has nothing left without that cell's model or context: a label that turns `not testable here` is not
a flip and is not named, nor is a label that another source gives once the row's own source has nothing left (the
paper's numbers, where our rows at the rule's one context are left out)."""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

import pandas as pd

from decodegap.claims.evidence import CELL_FRAMES, Evidence
from decodegap.claims.rules import PAPER
from decodegap.claims.verdicts import NOT_TESTABLE, SECTION_FINDING

MEASURED = CELL_FRAMES + ("verify",)
"""The Evidence frames of measured rows (with notebook 07's tables, ev.scope) that a model or a context is left out
of: the cells' and their checks'."""


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
    one model or context out does to
    its label (`category`): the labels the same source (the row's `source`) turns it into, each with what was left
    out (a label turned `not testable here`, or given by another source, is not named: the rows left nothing to
    judge); `unchanged with any one of N of the M models and contexts left out` where none changes, naming those that
    leave its source nothing to judge; '-' for a method check, a finding not testable with every row, or one labelled
    by the paper's own numbers (which read no measured row)."""
    base = make_rows(ev) if base is None else base
    variants = [(f"{col} {value}", _keyed(make_rows(without(ev, col, value)))) for col, value in left_out(ev)]
    text = []
    for key, row in _keyed(base).items():
        if row["section"] != SECTION_FINDING or row["category"] == NOT_TESTABLE or row.get("source") == PAPER:
            text.append("-")  # a method check, nothing to judge, or the paper's own numbers (no measured row read)
            continue
        flips, nothing = [], []
        for what, rows in variants:
            other = rows.get(key)
            if (other is None or other["category"] == NOT_TESTABLE
                    or other.get("source") != row.get("source")):  # the row's source left with nothing to judge
                nothing.append(what)
            elif other["category"] != row["category"]:
                flips.append(f"without {what}: {other['category']}")
        judged = len(variants) - len(nothing)
        text.append("; ".join(flips) if flips else
                    f"unchanged with any one of {judged} of the {len(variants)} models and contexts left out"
                    + (f" (without {', '.join(nothing)} its source has nothing left to judge)" if nothing else ""))
    return text
