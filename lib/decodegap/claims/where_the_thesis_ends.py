"""Where the thesis ends (W1, W2a, W2b): the paper's scope statement "the launch tax shrinks with batch" and the
two-term model of the step, on our batch and model-size rows and on the paper's published points (notebook 07,
decodegap.analysis.where_the_thesis_ends). Every threshold is its rule's (decodegap.claims.rules); every outcome is
computed there from the rows, here only labelled by source."""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from decodegap.claims.evidence import Evidence
from decodegap.claims.rules import CLAIM_GPU, OTHER_GPU, PAPER
from decodegap.claims.verdicts import INCONCLUSIVE, NOT_TESTABLE, Judged, all_of, row

NOT_MEASURED = ("not measured yet: no GPU here has eager and graph rows at batch 1 and at a batch of at least {b} of "
                "one model and context")
OUTCOME = {"holds": "holds", "fails": "fails", "inconclusive": INCONCLUSIVE, "not testable": NOT_TESTABLE}


def _by_source(per_gpu: Mapping[str, str], paper_gpus) -> list[Judged]:
    """One judgement per source: the GPUs the paper measured (its class), then ours on other GPUs."""
    ours = {g: v for g, v in per_gpu.items() if g in paper_gpus}
    other = {g: v for g, v in per_gpu.items() if g not in paper_gpus}
    return [Judged(CLAIM_GPU, all_of(ours.values()), ", ".join(ours)),
            Judged(OTHER_GPU, all_of(other.values()), ", ".join(other))]


def launch_tax(shrinks: pd.DataFrame, b_large: int, paper_gpus) -> tuple[list[Judged], str, str]:
    """W1 from analysis.launch_shrinks' rows: per GPU, every (model, ctx) cell (all_of); (judgements, ours, evidence)."""
    if shrinks.empty:
        return [Judged(CLAIM_GPU, NOT_TESTABLE)], "-", NOT_MEASURED.format(b=b_large) + "."
    per_gpu = {g: all_of(OUTCOME[o] for o in s["outcome"]) for g, s in shrinks.groupby("gpu")}
    parts = [f"{r.gpu} {r.model} ctx {r.ctx}: launch share {r.f_1_lo:.2f}-{r.f_1_hi:.2f} at B = 1, "
             f"{r.f_max_lo:.2f}-{r.f_max_hi:.2f} at B = {r.b_max} (launch tax {r.launch_1_ms:.2f} -> "
             f"{r.launch_max_ms:.2f} ms): {r.outcome}" for r in shrinks.itertuples()]
    return (_by_source(per_gpu, paper_gpus), "; ".join(parts[:4]) + ("; ..." if len(parts) > 4 else ""),
            "Launch share (eager - graph) / eager of the step of all B sequences, session ranges of both arms; "
            + "; ".join(parts) + ".")


def step_model(fits: pd.DataFrame, verdicts: pd.DataFrame, rel_tol: float, paper_gpus) -> tuple[list[Judged], str, str]:
    """W2a from analysis.fit / fit_verdicts: per GPU every testable (arm, attn) fit (all_of)."""
    testable = verdicts[verdicts["testable"].astype(bool)] if not verdicts.empty else verdicts
    if testable.empty:
        return ([Judged(CLAIM_GPU, NOT_TESTABLE)], "-",
                "not measured yet: no arm has enough checked cells of the Qwen2.5 family (sizes, batches, "
                "contexts) to fit.")
    per_gpu = {g: all_of(OUTCOME[o] for o in v["outcome"]) for g, v in testable.groupby("gpu")}
    f = fits.set_index(["gpu", "arm", "attn"])
    parts = []
    for v in testable.itertuples():
        c = f.loc[(v.gpu, v.arm, v.attn)]
        parts.append(f"{v.gpu} {v.arm}" + ("" if v.attn == "sdpa" else f" ({v.attn})")
                     + f": a {c['a']:.2f}, c0 {c['c0_ms']:.2f} ms, c1 {c['c1_ms'] * 1e3:.0f} us per layer; "
                       f"{v.explained} of {v.cells} cells within {rel_tol:.0%} beyond noise, {v.unexplained} outside: "
                       f"{v.outcome}")
    return (_by_source(per_gpu, paper_gpus), "; ".join(parts[:3]) + ("; ..." if len(parts) > 3 else ""),
            "In-sample residuals of t = t_floor / a + c0 + n_layers x c1 per GPU and arm; " + "; ".join(parts) + ".")


def published_model(points: pd.DataFrame, solved: pd.DataFrame, outcome: pd.DataFrame) -> tuple[Judged, str, str, str]:
    """W2b from analysis.published_points / published_fit / published_outcome: (judgement, published, ours,
    evidence)."""
    pub = "; ".join(f"{p.gpu} eager {p.eager_ms:.2f} ms, graph {p.graph_ms:.2f} ms ({p.graph_source}), R_floor "
                    f"{p.r_floor_published:.2f}" for p in points.itertuples()) or "-"
    if outcome.empty:
        return (Judged(PAPER, NOT_TESTABLE), pub, "-",
                "not measured yet: lambda (the share of the fixed cost a CUDA graph removes) needs our eager and graph "
                "fits (W2a), which need the batch and size rows.")
    parts = [f"{o.gpu}: a {o.a_lo:.2f}-{o.a_hi:.2f}, F {o.fixed_lo_ms:.2f}-{o.fixed_hi_ms:.2f} ms: {o.outcome}"
             for o in outcome.itertuples()]
    lams = ", ".join(f"{g} {lam:.2f}" for g, lam in solved.drop_duplicates("lambda_from")[["lambda_from", "lam"]]
                     .itertuples(index=False))
    return (Judged(PAPER, all_of(OUTCOME[o] for o in outcome["outcome"]), "; ".join(parts)), pub, "; ".join(parts),
            f"Two numbers per GPU (a, F) solved from its eager and graph steps with lambda from our fits ({lams}); "
            "explained when 0 < a <= a_max and F >= 0 over the speed-up CI (the L4: none stated).")


def _hardware(judged: list[Judged]) -> str:
    """The GPUs of ours a row's judgements read ('-' without any)."""
    return ", ".join(j.gpus for j in judged if j.gpus and j.outcome != NOT_TESTABLE) or "-"


def where_the_thesis_ends(ev: Evidence) -> list[dict]:
    """The rows of W1, W2a and W2b from notebook 07's tables (ev.scope: analysis.where_the_thesis_ends.replay)."""
    from decodegap.claims import rules

    t, paper_gpus = ev.scope, set(ev.paper_gpus)
    b_large, rel_tol = int(rules.get("W1").t("b_large")), rules.get("W2a").t("rel_tol")
    empty = pd.DataFrame()
    j1, ours1, ev1 = launch_tax(t.get("launch_shrinks", empty), b_large, paper_gpus)
    j2, ours2, ev2 = step_model(t.get("fits", empty), t.get("fit_verdicts", empty), rel_tol, paper_gpus)
    j3, pub3, ours3, ev3 = published_model(t.get("published", empty), t.get("published_fit", empty),
                                           t.get("published_outcome", empty))
    return [row("W1", "scope", "Not claimed for large batches: the launch tax shrinks with batch (the paper's scope).",
                "qualitative (scope statement)", ours1, _hardware(j1), j1, ev1, claim_gpu="paper-GPU"),
            row("W2a", "scope", "The step is t_floor / a + c0 + n_layers x c1 (the thesis as a two-term model), on our "
                "grid of sizes, batches and contexts.", "-", ours2, _hardware(j2), j2, ev2, claim_gpu="paper-GPU"),
            row("W2b", "scope", "The same model explains the paper's H100 and L4 eager and graph steps from two "
                "numbers per GPU.", pub3, ours3, "-", j3, ev3)]
