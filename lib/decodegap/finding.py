"""A finding: one generated sentence with the numbers it states, by name. The sentence is for readers; its values are
what the tests, the claims and the README read (never the text parsed back), and they are written beside it."""

from __future__ import annotations

import pandas as pd


class Finding(str):
    """A sentence (the str itself) and `values`, the numbers and names it states ({name: value}). Anything that takes
    a sentence takes a Finding."""

    values: dict

    def __new__(cls, text: str, **values):
        self = super().__new__(cls, text)
        self.values = values
        return self


def values(lines) -> list[dict]:
    """The values of each line ({} for a plain sentence)."""
    return [getattr(line, "values", {}) for line in lines]


def frame(lines) -> pd.DataFrame:
    """The findings as a table: `finding` (the sentence), then a column per value any of them states, in the order
    they first appear (empty where a finding does not state it)."""
    rows = [dict(finding=str(line), **v) for line, v in zip(lines, values(lines))]
    return pd.DataFrame(rows, columns=list(dict.fromkeys(k for r in rows for k in r)) or ["finding"])


def span(name: str, values) -> dict:
    """The range that stats.span writes, as values: {`name`_min, `name`_max} over `values`, NaN left out (both NaN
    with no values)."""
    v = pd.Series(values, dtype=float).dropna()
    lo, hi = (float(v.min()), float(v.max())) if not v.empty else (float("nan"), float("nan"))
    return {f"{name}_min": lo, f"{name}_max": hi}
