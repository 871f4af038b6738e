"""Notebook 07, where the thesis ends: the batch axis and the model-size axis against the step's floors and the
two-term model of the step. Its replay side: the rows, tables and findings of analysis.where_the_thesis_ends."""

from __future__ import annotations

from decodegap.analysis import where_the_thesis_ends as scope

NOTEBOOK = "07_where_the_thesis_ends"


def rows(data):
    """The decode rows notebook 07 reads (scope.rows): bf16, every arm, model and batch, checked."""
    return scope.rows(data)


def tables(data, gpu: str | None = None) -> dict:
    """Notebook 07's tables (scope.replay): every GPU's rows, or `gpu`'s alone."""
    return scope.replay(gpu, data)


def findings(t: dict) -> dict:
    """{"07_findings": scope.findings(t)}."""
    return {"07_findings": scope.findings(t)}
