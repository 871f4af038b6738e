"""R4o, our claim on notebook 04's grid across GPUs: between two fast GPUs, the fastest quantised step realises less
of the faster GPU's bandwidth gain than bf16 does (analysis.quant_across_gpus: gain_realised = ln speed-up / ln
bandwidth ratio). The rule was written after one pair of cells was seen (Llama-3.1-8B on the H100 SXM and the
H200), so it judges only a (GPU pair, model) whose cells on one side were all measured after the rule was fixed;
the others are shown beside the verdict, never counted. A method check (the package's own statement)."""

from __future__ import annotations

import pandas as pd

from decodegap.analysis import quant_across_gpus, quant_profile
from decodegap.claims import rules
from decodegap.claims.evidence import Evidence
from decodegap.claims.rules import METHOD
from decodegap.claims.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, Judged, all_of, row
from decodegap.stats import span

RULE = "R4o"


def _minute(measured: str) -> str:
    """A cell's `measured` ('YYYY-MM-DD HH:MM UTC', checked.measured_at) as a rule date (YYYY-MM-DDTHH:MM); '' for
    anything else (a run id without a start time)."""
    m = str(measured)
    return f"{m[:10]}T{m[11:16]}" if len(m) >= 16 and m[4] == "-" and m[13] == ":" else ""


def judged_pairs(pair_table: pd.DataFrame, fixed: str, min_contexts: int, grid: pd.DataFrame | None = None
                 ) -> pd.DataFrame:
    """Per (GPU pair, model, arm) of `pair_table` (quant_across_gpus.pairs) with bf16 and a quantised path
    (quant_across_gpus.bf16_and_fastest_quant, the faster GPU's fastest path read from `grid`): the fastest quantised
    path, the fastest of those both GPUs have (`paired_quant`, whose span is given), the two gain_realised spans,
    whether it is judged (the faster GPU's fastest path measured on both; every cell of the two paths on one side
    measured after `fixed`, a rule date YYYY-MM-DDTHH:MM; both paths at `min_contexts` contexts or more; `why_not`
    says why not) and its outcome: holds where bf16 is nearer bandwidth-bound beyond the spans
    (quant_across_gpus.nearer), fails where the quantised path is."""
    rows = []
    for r in quant_across_gpus.bf16_and_fastest_quant(pair_table, grid).itertuples():
        new = any(_minute(first) > fixed for first in (r.first_measured_slow, r.first_measured_fast))
        why_not = (f"its fastest path on the {r.gpu_fast}, {r.fastest_quant}, is not measured on the {r.gpu_slow}"
                   if not r.fastest_paired
                   else "both sides measured before the rule" if not new
                   else f"fewer than {min_contexts} contexts" if r.contexts < min_contexts else "")
        outcome = ({"bf16": HOLDS, "quant": FAILS, "": INCONCLUSIVE}[quant_across_gpus.nearer(r)] if not why_not
                   else NOT_TESTABLE)
        rows.append(dict(gpu_slow=r.gpu_slow, gpu_fast=r.gpu_fast, model=r.model, arm=r.arm,
                         fastest_quant=r.fastest_quant, paired_quant=r.paired_quant, bf16_min=r.bf16_gain_realised_min,
                         bf16_max=r.bf16_gain_realised_max, quant_min=r.quant_gain_realised_min,
                         quant_max=r.quant_gain_realised_max, contexts=r.contexts, judged=not why_not,
                         why_not=why_not, outcome=outcome))
    return pd.DataFrame(rows, columns=["gpu_slow", "gpu_fast", "model", "arm", "fastest_quant", "paired_quant",
                                       "bf16_min", "bf16_max", "quant_min", "quant_max", "contexts", "judged",
                                       "why_not", "outcome"])


def _pair_table(ev: Evidence, fast_gbps: float, arm: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """notebook 04's pair table (quant_across_gpus.pairs of the grid on `arm`) over the GPUs at or above `fast_gbps`,
    and that grid (columns gpu, model, ctx and one per path)."""
    cells = ev.quant_cells
    if cells.empty:
        return pd.DataFrame(columns=quant_across_gpus.PAIR_COLUMNS), pd.DataFrame()
    fast = set(ev.specs.loc[ev.specs["bandwidth_gbps"].astype(float) >= fast_gbps, "gpu"])
    grid = quant_profile.grid(cells, arm).reset_index()
    pair_table = quant_across_gpus.pairs(grid, ev.specs, arm, cells)
    return pair_table[pair_table["gpu_slow"].isin(fast) & pair_table["gpu_fast"].isin(fast)], grid


def _words(r) -> str:
    paired = "" if r.paired_quant == r.fastest_quant else " (the fastest path both GPUs have)"
    return (f"{r.gpu_fast} over {r.gpu_slow}, {r.model} ({r.contexts} contexts): bf16 "
            f"{span(pd.Series([r.bf16_min, r.bf16_max]) * 100, '.0f')} %, {r.paired_quant}{paired} "
            f"{span(pd.Series([r.quant_min, r.quant_max]) * 100, '.0f')} %"
            + (f" ({r.outcome})" if r.judged else f" (shown, not judged: {r.why_not})"))


def quant_across_gpus_claim(ev: Evidence) -> list[dict]:
    rule = rules.get(RULE)
    fast_gbps, arm, n_min = float(rule.t("fast_gbps")), str(rule.t("arm")), int(rule.t("min_contexts"))
    pair_table, grid = _pair_table(ev, fast_gbps, arm)
    table = judged_pairs(pair_table, rule.fixed.date, n_min, grid)
    judged = table[table["judged"]]
    outcome = all_of(judged["outcome"]) if not judged.empty else NOT_TESTABLE
    gpus = sorted(set(table["gpu_slow"]) | set(table["gpu_fast"]))
    return [row(RULE, "ours", "Between two fast GPUs, the fastest quantised step realises less of the faster GPU's "
                "bandwidth gain than the bf16 step: it is further from bandwidth-bound.", "-",
                "; ".join(_words(r) for r in judged.itertuples()) or "-", ", ".join(gpus) or "-",
                Judged(METHOD, outcome),
                f"Share of the bandwidth gain realised (ln speed-up / ln datasheet bandwidth ratio) on {arm}, per GPU "
                f"pair at or above {fast_gbps:g} GB/s and model, bf16 against the faster GPU's fastest checked "
                f"quantised path, over the contexts both GPUs have (notebook 04's figure 04_quant_grid). Judged only "
                f"where the slower GPU has that path too and one side's cells were all measured after the rule was "
                f"fixed ({rule.fixed.date}): "
                + ("; ".join(_words(r) for r in table.itertuples()) if not table.empty
                   else "no cell of the grid is on two such GPUs") + ".")]
