"""R4o (claims.quant_across_gpus): the share of the bandwidth gain bf16 and the fastest quantised path realise
between two fast GPUs, judged only where one side was measured after the rule; hand-made pair tables."""

import math

import pandas as pd
import pytest

from decodegap.analysis import quant_across_gpus
from decodegap.claims import quant_across_gpus as claim, rules
from decodegap.claims.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE

FIXED = "2026-12-06T23:59"
BEFORE, AFTER = "2026-12-03 10:00 UTC", "2026-12-07 00:30 UTC"
RATIO = 4800 / 3350


def grid(ms_slow: dict, ms_fast: dict) -> pd.DataFrame:
    """A grid (gpu, model, ctx, one column per path) of one model at two contexts from {path: (ms ctx 2048, ms ctx
    4096)} on the slow GPU (h100-sxm) and the fast one (h200)."""
    rows = []
    for gpu, ms in (("h100-sxm", ms_slow), ("h200", ms_fast)):
        for i, ctx in enumerate((2048, 4096)):
            rows.append(dict(gpu=gpu, model="m", ctx=ctx, **{p: v[i] for p, v in ms.items()}))
    return pd.DataFrame(rows)


SPECS = pd.DataFrame(dict(gpu=["h100-sxm", "h200"], bandwidth_gbps=[3350.0, 4800.0]))


def pair_table(ms_slow, ms_fast, measured_slow=BEFORE, measured_fast=BEFORE) -> pd.DataFrame:
    t = quant_across_gpus.pairs(grid(ms_slow, ms_fast), SPECS, "lean_attn_graph")
    return t.assign(measured_slow=measured_slow, measured_fast=measured_fast)


def test_gain_realised_by_hand():
    # bf16 1.2x faster on the H200, int4 1.05x: ln 1.2 / ln(4800/3350) = 0.5069, ln 1.05 / ln(...) = 0.1357
    t = pair_table({"bf16": (12.0, 12.0), "int4-triton": (6.3, 6.3)}, {"bf16": (10.0, 10.0), "int4-triton": (6.0, 6.0)},
                   measured_slow=AFTER)
    (r,) = claim.judged_pairs(t, FIXED, 2).itertuples()
    assert r.bf16_min == pytest.approx(math.log(1.2) / math.log(RATIO)) == pytest.approx(0.5069, abs=1e-4)
    assert r.quant_max == pytest.approx(math.log(1.05) / math.log(RATIO)) == pytest.approx(0.1357, abs=1e-4)
    assert (r.fastest_quant, r.contexts, r.judged, r.outcome) == ("int4-triton", 2, True, HOLDS)


def test_fails_when_the_quantised_step_realises_more_beyond_the_spans():
    t = pair_table({"bf16": (11.0, 11.5), "int4-triton": (7.2, 7.4)}, {"bf16": (10.0, 10.0), "int4-triton": (6.0, 6.0)},
                   measured_fast=AFTER)
    (r,) = claim.judged_pairs(t, FIXED, 2).itertuples()
    assert r.quant_min > r.bf16_max and r.outcome == FAILS


def test_overlapping_spans_are_inconclusive():
    # bf16 1.1x to 1.3x, int4 1.2x at both contexts: inside bf16's span
    t = pair_table({"bf16": (11.0, 13.0), "int4-triton": (7.2, 7.2)}, {"bf16": (10.0, 10.0), "int4-triton": (6.0, 6.0)},
                   measured_slow=AFTER)
    (r,) = claim.judged_pairs(t, FIXED, 2).itertuples()
    assert r.outcome == INCONCLUSIVE


def test_pairs_seen_before_the_rule_are_shown_not_judged():
    t = pair_table({"bf16": (12.0, 12.0), "int4-triton": (6.3, 6.3)}, {"bf16": (10.0, 10.0), "int4-triton": (6.0, 6.0)})
    (r,) = claim.judged_pairs(t, FIXED, 2).itertuples()
    assert (r.judged, r.outcome, r.why_not) == (False, NOT_TESTABLE, "both sides measured before the rule")
    # one cell of the new side measured before the rule: that side is not all new
    t.loc[0, "measured_slow"] = AFTER
    assert not claim.judged_pairs(t, FIXED, 2)["judged"].any()
    every_slow_cell_after = t.assign(measured_slow=AFTER)
    read = quant_across_gpus.bf16_and_fastest_quant(every_slow_cell_after).iloc[0]
    assert (read["first_measured_slow"], read["first_measured_fast"]) == (AFTER, BEFORE)
    assert claim.judged_pairs(every_slow_cell_after, FIXED, 2)["judged"].all()
    at_the_fixing_minute = t.assign(measured_slow=f"{FIXED[:10]} {FIXED[11:]} UTC")  # not after
    assert not claim.judged_pairs(at_the_fixing_minute, FIXED, 2)["judged"].any()
    # a cell without a date: that side is not all new
    assert quant_across_gpus.bf16_and_fastest_quant(every_slow_cell_after.assign(
        measured_slow=[""] + [AFTER] * (len(t) - 1))).iloc[0]["first_measured_slow"] == ""


def test_the_fastest_quantised_path_is_the_fastest_on_the_faster_gpu():
    t = pair_table({"bf16": (12.0, 12.0), "int4-triton": (6.3, 6.3), "int4-tinygemm": (5.0, 5.0)},
                   {"bf16": (10.0, 10.0), "int4-triton": (6.0, 6.0), "int4-tinygemm": (6.1, 6.1)}, measured_slow=AFTER)
    (r,) = claim.judged_pairs(t, FIXED, 2).itertuples()
    assert r.fastest_quant == "int4-triton"  # fastest on the h200, though tinygemm is faster on the h100


def test_a_pair_without_the_faster_gpus_fastest_path_on_the_slower_one_is_shown_not_judged():
    """The H200's fastest path (int4-triton, 6.0 ms) is not measured on the H100: the pair's fastest path both have
    (awq-marlin) is shown with its span, and the pair is not judged, though it would hold on awq-marlin; with the grid
    left out, the fastest path both have stands in (the reading until 2026-12-06T23:59)."""
    t = pair_table({"bf16": (12.0, 12.0), "int4-triton": (6.3, 6.3), "awq-marlin": (8.4, 8.4)},
                   {"bf16": (10.0, 10.0), "int4-triton": (6.0, 6.0), "awq-marlin": (8.0, 8.0)}, measured_slow=AFTER)
    t = t[~((t["quant"] == "int4-triton"))]  # the slower GPU lacks int4-triton
    g = grid({"bf16": (12.0, 12.0), "int4-triton": (math.nan, math.nan), "awq-marlin": (8.4, 8.4)},
             {"bf16": (10.0, 10.0), "int4-triton": (6.0, 6.0), "awq-marlin": (8.0, 8.0)})
    assert quant_across_gpus.fastest_on(g, "h200", "m") == "int4-triton"
    assert quant_across_gpus.fastest_on(g, "h100-sxm", "m") == "awq-marlin"
    (r,) = claim.judged_pairs(t, FIXED, 2, g).itertuples()
    assert (r.fastest_quant, r.paired_quant, r.judged, r.outcome) == ("int4-triton", "awq-marlin", False, NOT_TESTABLE)
    assert r.why_not == "its fastest path on the h200, int4-triton, is not measured on the h100-sxm"
    assert r.quant_max == pytest.approx(math.log(1.05) / math.log(RATIO))
    (old,) = claim.judged_pairs(t, FIXED, 2).itertuples()
    assert (old.fastest_quant, old.judged, old.outcome) == ("awq-marlin", True, HOLDS)


def test_fastest_on_and_fastest_quant_choose_by_one_rule_ties_to_the_name_sorting_first():
    """The grid's reading (fastest_on) and the pair table's (fastest_quant) of the same steps choose the same path:
    the lowest median over the contexts (awq-marlin's 6.0 and 7.0 ms median 6.5, below int4-triton's 6.6), and on a
    tie the path whose name sorts first, whatever order the grid's columns or the table's rows come in."""
    steps = {"bf16": (12.0, 12.0), "int4-triton": (6.6, 6.6), "awq-marlin": (6.0, 7.0)}
    t, g = pair_table(steps, steps, measured_slow=AFTER), grid(steps, steps)
    assert quant_across_gpus.fastest_on(g, "h200", "m") == "awq-marlin"
    assert quant_across_gpus.fastest_quant(t) == "awq-marlin"
    tied = {"bf16": (12.0, 12.0), "int4-triton": (6.5, 6.5), "awq-marlin": (6.0, 7.0)}
    t, g = pair_table(tied, tied, measured_slow=AFTER), grid(tied, tied)
    assert quant_across_gpus.fastest_on(g[["gpu", "model", "ctx", "int4-triton", "awq-marlin"]], "h200", "m") \
        == quant_across_gpus.fastest_quant(t.iloc[::-1]) == "awq-marlin"
    assert quant_across_gpus.lowest_median({}) is None


def test_one_context_is_too_few():
    t = pair_table({"bf16": (12.0, 12.0), "int4-triton": (6.3, 6.3)}, {"bf16": (10.0, 10.0), "int4-triton": (6.0, 6.0)},
                   measured_slow=AFTER)
    (r,) = claim.judged_pairs(t[t["ctx"] == 2048], FIXED, 2).itertuples()
    assert (r.judged, r.outcome, r.why_not) == (False, NOT_TESTABLE, "fewer than 2 contexts")


def test_the_rule_is_fixed_before_the_cells_it_could_judge():
    r = rules.get("R4o")
    assert r.fixed.date == FIXED and r.sources == (rules.METHOD,)
    assert (r.t("fast_gbps"), r.t("arm"), r.t("min_contexts")) == (3350.0, "lean_attn_graph", 2)


def test_the_claims_row_judges_only_fast_pairs_measured_after_the_rule():
    """The row from notebook 04's cells: the L4 (below fast_gbps) is no side of a pair; Llama's pair, both sides
    before the rule, is shown; Mistral's, its H100 side after the rule, is judged (bf16 1.2x, int4 1.05x: met)."""
    from types import SimpleNamespace

    fixed = rules.get("R4o").fixed.date
    later = "2026-12-31 12:00 UTC"
    assert later > f"{fixed[:10]} {fixed[11:]} UTC"
    ms = {("l4", "bf16"): 60.0, ("l4", "int4-triton"): 20.0, ("h100-sxm", "bf16"): 12.0,
          ("h100-sxm", "int4-triton"): 6.3, ("h200", "bf16"): 10.0, ("h200", "int4-triton"): 6.0}
    cells = pd.DataFrame([dict(gpu=g, model=m, ctx=c, arm="lean_attn_graph", attn="sdpa", quant=q, t_obs_ms=v,
                               status="ok", check_failed=False,
                               measured=later if (m, g) == ("mistral-7b-v0.3", "h100-sxm") else BEFORE)
                          for (g, q), v in ms.items() for m in ("llama-3.1-8b", "mistral-7b-v0.3")
                          for c in (2048, 4096)])
    specs = pd.DataFrame(dict(gpu=["l4", "h100-sxm", "h200"], bandwidth_gbps=[300.0, 3350.0, 4800.0]))
    (r,) = claim.quant_across_gpus_claim(SimpleNamespace(quant_cells=cells, specs=specs))
    assert r["verdict"] == "method check: met" and r["hardware"] == "h100-sxm, h200"
    assert r["ours"] == "h200 over h100-sxm, mistral-7b-v0.3 (2 contexts): bf16 51 %, int4-triton 14 % (holds)"
    assert "llama-3.1-8b (2 contexts): bf16 51 %, int4-triton 14 % (shown, not judged" in r["evidence"]
    assert "l4" not in r["evidence"]


def test_the_flag_of_a_rule_fixed_after_rows_says_it_judges_only_later_ones(tmp_path):
    """R4o reads older runs (the other side of a pair, the pairs it shows), so it is flagged; the flag says how it is
    judged. A rule not registered ahead gets the plain flag."""
    from dataclasses import replace

    from decodegap.claims import provenance

    class OneRun:
        env = {"20261201T100000-abcdef"}

        def of_rule(self, rule):
            return {"20261201T100000-abcdef"}

    flag = provenance.fixed_after_rows(rules.get("R4o"), OneRun())
    assert flag.startswith("fixed " + rules.get("R4o").fixed.date) and "after 1 of the 1 runs it reads" in flag
    assert flag.endswith("; " + rules.JUDGES_ONLY_LATER_ROWS["R4o"])
    plain = provenance.fixed_after_rows(replace(rules.get("R4o"), id="R4k"), OneRun())
    assert plain.endswith("(2026-12-01T10:00 to 2026-12-01T10:00)")
