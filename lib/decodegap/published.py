"""The paper's own numbers (data/published/paper.csv): always labelled published, never mixed with ours."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from decodegap import paths

PUBLISHED_LABEL = "published (paper)"


def load(data: str | Path | None = None) -> pd.DataFrame:
    """Every number of the paper, one row each, with its source."""
    return pd.read_csv(paths.data_dir(data) / "published" / "paper.csv")


def select(table: pd.DataFrame, claim: str, quantity: str, **where) -> pd.DataFrame:
    """Rows of one claim and quantity, filtered on column=value pairs."""
    hit = table[(table["claim"] == claim) & (table["quantity"] == quantity)]
    for col, value in where.items():
        hit = hit[hit[col] == value]
    return hit
