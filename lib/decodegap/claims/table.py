"""The claims table: every claim of the paper (data/published/paper.csv) as a row with its published value, our value, the
hardware behind ours, a verdict and the evidence, generated from the data (never typed by hand).

`collect` reads the tables of notebooks 01-05 through their own modules (claims_evidence), `build` makes the rows,
one module per section of the paper: claims_thesis (T), claims_method (M, S), claims_roofline (R1, N1), claims_graphs
(R2), claims_attention (R3), claims_quant (R4), claims_cost (R5). Verdicts are explicit rules (verdicts), applied to
whatever rows exist: a claim about a GPU we have no rows for is "not testable here" and says so; the same rule tests
it as soon as that GPU's rows are added under data/raw/. The claim ids of data/published/paper.csv (`claim`) are the
table's `claim` column.
"""

from __future__ import annotations

import pandas as pd

from decodegap.claims import attention_backends as claims_attention, cost as claims_cost, cuda_graphs_ab as claims_graphs, method as claims_method, quantisation as claims_quant, roofline as claims_roofline, thesis as claims_thesis
from decodegap.claims.evidence import Evidence, collect
from decodegap.claims.verdicts import COLUMNS, VERDICTS, counts, preamble

__all__ = ["Evidence", "collect", "build", "counts", "preamble", "VERDICTS"]


def build(ev: Evidence) -> pd.DataFrame:
    """One row per claim of the paper: id, claim (paper.csv's claim id, or thesis / scope), statement,
    published, ours, hardware, verdict, evidence."""
    rows = (claims_thesis.thesis(ev) + claims_method.method(ev) + claims_roofline.inverted_ladder(ev)
            + claims_graphs.cuda_graphs(ev) + claims_attention.attention_backends(ev) + claims_quant.quantisation(ev)
            + claims_cost.cost_claim(ev) + claims_cost.cost_claim_measured(ev) + claims_method.scope(ev))
    return pd.DataFrame(rows, columns=COLUMNS)
