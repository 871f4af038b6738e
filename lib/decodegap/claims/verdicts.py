"""The claims table's vocabulary: the outcome of a rule on one source of rows, the label it gives, the count
categories, the symmetric rules' helpers and one row of the table. The rules themselves are data
(decodegap.claims.rules); decodegap.claims.table builds the rows, one module per section of the paper.

A rule is applied to each source of rows its registry entry names, in the registry's order: our rows on the GPU
class the claim names, the paper's own published numbers, our rows on another GPU. Each gives an outcome (holds,
fails, inconclusive: within noise, not testable here); the first testable one labels the row, the others are
shown beside it. The same words in both directions: "reproduced" / "contradicted" on the paper's GPU class,
"supported" / "contradicted" by the paper's own numbers, "tested on another GPU (... for a ... claim): holds" /
"... fails". A method check (the package's own method or statement) is its own section, never counted among the
findings.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from decodegap.claims import rules as registry
from decodegap.claims.rules import CLAIM_GPU, METHOD, OTHER_GPU, PAPER

HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE = "holds", "fails", registry.INCONCLUSIVE, "not testable here"
OUTCOMES = (HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE)

REPRODUCED, CONTRADICTED_OURS = "reproduced on the paper's GPU class", "contradicted on the paper's GPU class"
OTHER_HOLDS, OTHER_FAILS = "tested on another GPU: holds", "tested on another GPU: fails"
SUPPORTED, CONTRADICTED_PAPER = "supported by the paper's own numbers", "contradicted by the paper's own numbers"
CATEGORIES = (REPRODUCED, CONTRADICTED_OURS, OTHER_HOLDS, OTHER_FAILS, SUPPORTED, CONTRADICTED_PAPER, INCONCLUSIVE,
              NOT_TESTABLE)
"""The findings' labels, counted in the README and at the top of figures/claims.md."""
MET, NOT_MET = "method check: met", "method check: not met"
METHOD_CATEGORIES = (MET, NOT_MET, "method check: " + INCONCLUSIVE, "method check: " + NOT_TESTABLE)
VERDICTS = CATEGORIES + METHOD_CATEGORIES

COLUMNS = ["id", "section", "claim", "statement", "published", "ours", "hardware", "verdict", "category", "also",
           "evidence", "rule", "fixed", "fixed_after_rows"]


@dataclass(frozen=True)
class Judged:
    """A rule's outcome on one source of rows: `source` (rules.CLAIM_GPU, PAPER, OTHER_GPU or METHOD), `outcome`
    (OUTCOMES), `gpus` (ours that it read, for the label: "h200") and `note` (its numbers, in words)."""

    source: str
    outcome: str
    gpus: str = ""
    note: str = ""


def category(j: Judged) -> str:
    """The count category of a judgement."""
    if j.source == METHOD:
        return {HOLDS: MET, FAILS: NOT_MET}.get(j.outcome, "method check: " + j.outcome)
    if j.outcome in (INCONCLUSIVE, NOT_TESTABLE):
        return j.outcome
    return {(CLAIM_GPU, HOLDS): REPRODUCED, (CLAIM_GPU, FAILS): CONTRADICTED_OURS, (OTHER_GPU, HOLDS): OTHER_HOLDS,
            (OTHER_GPU, FAILS): OTHER_FAILS, (PAPER, HOLDS): SUPPORTED, (PAPER, FAILS): CONTRADICTED_PAPER}[
        (j.source, j.outcome)]


def label(j: Judged, claim_gpu: str = "") -> str:
    """The words of a judgement: its category, saying which GPU where it is ours ("tested on another GPU (h200
    for an h100-sxm claim): holds")."""
    if j.source == METHOD:
        return category(j)
    where = {CLAIM_GPU: f"on {j.gpus}" if j.gpus else "on the paper's GPU class",
             PAPER: "on the paper's own numbers",
             OTHER_GPU: f"tested on another GPU ({j.gpus or 'ours'}{_for(claim_gpu)})"}
    if j.outcome == NOT_TESTABLE:
        return NOT_TESTABLE
    if j.outcome == INCONCLUSIVE:
        return f"{INCONCLUSIVE} ({where[j.source]})"
    if j.source == OTHER_GPU:
        return f"{where[OTHER_GPU]}: {j.outcome}"
    if j.source == CLAIM_GPU:
        return f"{'reproduced' if j.outcome == HOLDS else 'contradicted'} {where[CLAIM_GPU]}"
    return category(j)


def _for(claim_gpu: str) -> str:
    if not claim_gpu:
        return ""
    letter_an = len(claim_gpu) > 1 and claim_gpu[1].isdigit() and claim_gpu[0] in "fhlmnrsx"
    article = "an" if claim_gpu[0] in "aeiou" or letter_an else "a"
    return f" for {article} {claim_gpu} claim"


# ------------------------------------------------------------------------------------------ verdict rules
def two_sided(holds: bool, fails: bool) -> str:
    """HOLDS when the holds-side condition is met beyond noise, FAILS when the fails-side one is, else
    INCONCLUSIVE (within noise). Both at once is a bug in the rule."""
    assert not (holds and fails), "a rule held and failed at once"
    return HOLDS if holds else FAILS if fails else INCONCLUSIVE


def about(ours: float, published: float, rel_tol: float, noise: float = 0.0) -> str:
    """An approximate number: HOLDS when |ours / published - 1| + noise <= rel_tol, FAILS when it minus noise
    exceeds rel_tol, else INCONCLUSIVE; NOT_TESTABLE without ours. `noise` is our relative spread."""
    if ours is None or pd.isna(ours):
        return NOT_TESTABLE
    dev = abs(ours / published - 1)
    return two_sided(dev + noise <= rel_tol, dev - noise > rel_tol)


def intervals_overlap(low: float, high: float, pub_low: float, pub_high: float) -> str:
    """A published interval against ours: HOLDS when they overlap, FAILS when they do not."""
    if any(pd.isna(x) for x in (low, high)):
        return NOT_TESTABLE
    return HOLDS if low <= pub_high and pub_low <= high else FAILS


def speedup_matches(ours: float, low: float, high: float, published: float, abs_tol: float) -> str:
    """A published speed-up without an interval: HOLDS when our interval contains it or ours is within
    `abs_tol`, FAILS otherwise."""
    if pd.isna(ours):
        return NOT_TESTABLE
    inside = pd.notna(low) and pd.notna(high) and low <= published <= high
    return HOLDS if inside or abs(ours - published) <= abs_tol else FAILS


def falls_as_bandwidth_rises(points: list[tuple[float, float]], min_points: int = 2) -> str:
    """(bandwidth, value) points: HOLDS when the value falls strictly as bandwidth rises, FAILS on a rise."""
    if len(points) < min_points:
        return NOT_TESTABLE
    values = [v for _, v in sorted(points)]
    return HOLDS if all(b < a for a, b in zip(values, values[1:])) else FAILS


def all_of(outcomes) -> str:
    """The aggregate "every cell": FAILS when one fails, HOLDS when all hold, NOT_TESTABLE without any testable,
    else INCONCLUSIVE."""
    outcomes = [o for o in outcomes if o != NOT_TESTABLE]
    if not outcomes:
        return NOT_TESTABLE
    if FAILS in outcomes:
        return FAILS
    return HOLDS if all(o == HOLDS for o in outcomes) else INCONCLUSIVE


def some_and_none(outcomes) -> str:
    """The aggregate "some holds and none fails": HOLDS then, FAILS when some fails and none holds, else
    INCONCLUSIVE (both, or only inconclusive ones); NOT_TESTABLE without any testable."""
    outcomes = [o for o in outcomes if o != NOT_TESTABLE]
    if not outcomes:
        return NOT_TESTABLE
    if HOLDS in outcomes and FAILS not in outcomes:
        return HOLDS
    if FAILS in outcomes and HOLDS not in outcomes:
        return FAILS
    return INCONCLUSIVE


def checks_hold(checks: list[bool]) -> str:
    """HOLDS when every check holds, FAILS when one fails, NOT_TESTABLE without any (exact checks, no noise)."""
    if not checks:
        return NOT_TESTABLE
    return HOLDS if all(checks) else FAILS


def largest_term(floor_ms: float, gpu_excess_ms: float, launch_overhead_ms: float) -> str:
    """Which term of the decomposition of an eager step is the largest: floor, gpu_excess or launch."""
    terms = {"floor": floor_ms, "gpu_excess": gpu_excess_ms, "launch": launch_overhead_ms}
    return max(terms, key=terms.get)


# ------------------------------------------------------------------------------------------------ the row
SECTION_FINDING, SECTION_METHOD = "finding", "method check"


def row(claim_id, claim, statement, published, ours, hardware, judged, evidence, claim_gpu: str = "") -> dict:
    """One row of the claims table (COLUMNS). `judged`: a Judged or a list of them, one per source of the rule
    (its registry entry, rules.get(claim_id), names the sources it may read; a judgement from another source is a
    bug). The first testable judgement in the registry's order labels the row (`verdict`, `category`); the
    others go to `also`. `claim_gpu` is the GPU class the claim names (for "tested on another GPU (h200 for an
    h100-sxm claim)")."""
    rule = registry.get(claim_id)
    judged = [judged] if isinstance(judged, Judged) else list(judged)
    for j in judged:
        assert j.source in rule.sources, f"{claim_id}: source {j.source} not in its rule's {rule.sources}"
        assert j.outcome in OUTCOMES, (claim_id, j.outcome)
    judged.sort(key=lambda j: rule.sources.index(j.source))
    testable = [j for j in judged if j.outcome != NOT_TESTABLE] or judged[:1] or [Judged(rule.sources[0], NOT_TESTABLE)]
    first = testable[0]
    also = "; ".join(f"{label(j, claim_gpu)}" + (f" ({j.note})" if j.note else "") for j in testable[1:])
    notes = [f"{label(j, claim_gpu)}: {j.note}" for j in judged if j.note and j.outcome == NOT_TESTABLE]
    return dict(id=claim_id, section=SECTION_METHOD if rule.sources == (METHOD,) else SECTION_FINDING, claim=claim,
                statement=statement, published=published, ours=ours, hardware=hardware,
                verdict=label(first, claim_gpu) + (f" ({first.note})" if first.note else ""), category=category(first),
                also=also or "-", evidence=evidence + ("" if not notes else " " + "; ".join(notes) + "."),
                rule=rule.text(), fixed=f"{rule.fixed.date} {rule.fixed.commit}", fixed_after_rows="",
                source=first.source)  # not a column: which source labelled the row (claims.one_left_out reads it)


def counts(table: pd.DataFrame) -> dict[str, int]:
    """Number of findings per category (CATEGORIES order), then of method checks (METHOD_CATEGORIES)."""
    return {v: int((table["category"] == v).sum()) for v in VERDICTS}
