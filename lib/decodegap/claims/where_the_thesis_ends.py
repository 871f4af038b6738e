"""Where the thesis ends (W1, W2a, W2b): the paper's scope statement "the launch tax shrinks with batch" and the
two-term model of the step, on our batch and model-size rows and on the paper's published points (notebook 07).
Every threshold is its rule's (decodegap.claims.rules)."""

from __future__ import annotations

from decodegap.claims.evidence import Evidence
from decodegap.claims.rules import CLAIM_GPU, PAPER
from decodegap.claims.verdicts import NOT_TESTABLE, Judged, row

NOT_MEASURED = "not measured yet: no row of batch > 1 or of a Qwen2.5 size but 7B"


def where_the_thesis_ends(ev: Evidence) -> list[dict]:
    """The rows of W1, W2a and W2b."""
    return [row("W1", "scope", "Not claimed for large batches: the launch tax shrinks with batch.", "qualitative",
                "-", "-", Judged(CLAIM_GPU, NOT_TESTABLE), NOT_MEASURED + "."),
            row("W2a", "scope", "t = t_floor / a + c0 + n_layers x c1 explains the step on our grid.", "-", "-", "-",
                Judged(CLAIM_GPU, NOT_TESTABLE), NOT_MEASURED + "."),
            row("W2b", "scope", "The same model explains the paper's H100 and L4 points.", "-", "-", "-",
                Judged(PAPER, NOT_TESTABLE), NOT_MEASURED + ".")]
