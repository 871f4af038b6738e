"""The claims table: the rules' helpers on hand-made inputs (each can fail), both directions of every symmetric rule
on hand-made rows, the labels and the flags, and the table built from the shipped data."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest

from decodegap.claims import provenance, rules, table as claims, verdicts
from decodegap.claims.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE
from decodegap.analysis import cost
from decodegap import hardware, paths, published

PAPER_HOLDS, PAPER_FAILS = verdicts.SUPPORTED, verdicts.CONTRADICTED_PAPER
OTHER_HOLDS, OTHER_FAILS = verdicts.OTHER_HOLDS, verdicts.OTHER_FAILS


def test_about_is_symmetric_in_noise():
    assert verdicts.about(0.85, 0.81, 0.15) == HOLDS  # 5 % off
    assert verdicts.about(0.95, 0.81, 0.15) == FAILS  # 17 % off
    assert verdicts.about(3.35, 6.0, 0.15) == FAILS
    assert verdicts.about(np.nan, 6.0, 0.15) == NOT_TESTABLE
    assert verdicts.about(0.85, 0.81, 0.15, noise=0.12) == INCONCLUSIVE  # 5 % +- 12 % straddles 15 %
    assert verdicts.about(0.95, 0.81, 0.15, noise=0.05) == INCONCLUSIVE  # 17 % +- 5 %


def test_two_sided_and_the_aggregates():
    assert verdicts.two_sided(True, False) == HOLDS and verdicts.two_sided(False, True) == FAILS
    assert verdicts.two_sided(False, False) == INCONCLUSIVE
    with pytest.raises(AssertionError):
        verdicts.two_sided(True, True)
    assert verdicts.all_of([HOLDS, HOLDS]) == HOLDS and verdicts.all_of([HOLDS, FAILS, INCONCLUSIVE]) == FAILS
    assert verdicts.all_of([HOLDS, INCONCLUSIVE]) == INCONCLUSIVE and verdicts.all_of([NOT_TESTABLE]) == NOT_TESTABLE
    assert verdicts.some_and_none([HOLDS, INCONCLUSIVE]) == HOLDS
    assert verdicts.some_and_none([FAILS, INCONCLUSIVE]) == FAILS
    assert verdicts.some_and_none([HOLDS, FAILS]) == INCONCLUSIVE
    assert verdicts.intervals_overlap(1.25, 1.26, 1.253, 1.267) == HOLDS
    assert verdicts.intervals_overlap(2.8, 3.7, 1.253, 1.267) == FAILS
    assert verdicts.speedup_matches(1.04, 1.01, 1.06, 1.028, 0.02) == HOLDS
    assert verdicts.speedup_matches(1.10, 1.08, 1.12, 1.028, 0.02) == FAILS
    assert verdicts.falls_as_bandwidth_rises([(3350, 0.27), (300, 0.81)]) == HOLDS
    assert verdicts.falls_as_bandwidth_rises([(300, 0.81), (3350, 0.9)]) == FAILS
    assert verdicts.falls_as_bandwidth_rises([(300, 0.81)]) == NOT_TESTABLE


def test_labels_say_the_source_and_the_gpu():
    J = verdicts.Judged
    assert verdicts.label(J(rules.OTHER_GPU, HOLDS, "h200"), "h100-sxm") == \
        "tested on another GPU (h200 for an h100-sxm claim): holds"
    assert verdicts.label(J(rules.PAPER, FAILS)) == PAPER_FAILS
    assert verdicts.label(J(rules.PAPER, HOLDS)) == PAPER_HOLDS
    assert verdicts.label(J(rules.CLAIM_GPU, FAILS, "l4")) == "contradicted on l4"
    assert verdicts.category(J(rules.CLAIM_GPU, HOLDS, "l4")) == verdicts.REPRODUCED
    assert verdicts.category(J(rules.METHOD, FAILS)) == verdicts.NOT_MET
    assert verdicts.category(J(rules.OTHER_GPU, INCONCLUSIVE)) == INCONCLUSIVE


def test_a_row_from_a_source_its_rule_does_not_name_is_refused():
    with pytest.raises(AssertionError):
        verdicts.row("R4e", "quantisation", "s", "p", "o", "h", verdicts.Judged(rules.OTHER_GPU, HOLDS), "e")


@pytest.fixture(scope="module")
def evidence(shipped_evidence):
    return shipped_evidence


@pytest.fixture(scope="module")
def table(evidence):
    return claims.build(evidence).set_index("id")


SECTION_OF = {}
"""rule id -> the section of claims.table.SECTIONS that makes its row (learnt from the shipped evidence once)."""


def _row(evidence, id_, **replace) -> pd.Series:
    """Rule `id_`'s row from `evidence` with `replace`d fields, made by its own section alone: the rule sees the
    changed evidence as it would in the table (the whole table, every section and what build adds to them, as
    fixed_after_rows, is the `table` fixture's)."""
    if not SECTION_OF:
        SECTION_OF.update({row["id"]: section for section in claims.SECTIONS for row in section(evidence)})
    rows = SECTION_OF[id_](dataclasses.replace(evidence, **replace))
    return pd.DataFrame(rows, columns=verdicts.COLUMNS).set_index("id").loc[id_]


def test_each_rule_is_made_by_one_section_and_its_row_gives_the_known_verdict(evidence):
    made = [row["id"] for section in claims.SECTIONS for row in section(evidence)]
    assert sorted(made) == sorted(rules.BY_ID)  # every rule's row made once, by one section
    t1 = _row(evidence, "T1")  # the paper's own H100 numbers: launch below the GPU-side excess
    assert "launch L 2.99-3.13 ms, GPU-side excess X 7.20-7.78" in t1["ours"]
    assert t1["category"] == PAPER_FAILS or t1["also"].startswith(PAPER_FAILS)
    # judged on the H100's own A/B grid at ctx 2048 once it exists (2026-12-05, run d876e1: launch the largest term)
    assert t1["category"] == (verdicts.REPRODUCED if _h100_grid_2048(evidence) else PAPER_FAILS)
    r3f = _row(evidence, "R3f")
    assert "fa2 (fa2): SDPA wins beyond noise in 0 of 12" in r3f["ours"]
    # judged on the paper's GPU class once its attention rows exist (the H100's of 2026-12-05), else on the paper's
    assert r3f["category"] == (INCONCLUSIVE if _h100_attention(evidence) else PAPER_HOLDS)


@pytest.mark.slow  # the whole claims table, built from every shipped row
def test_every_claim_and_every_rule_is_a_row(table):
    ids = set(published.load()["claim"])
    assert ids <= set(table["claim"]), ids - set(table["claim"])
    assert table.index.is_unique and set(table.index) == set(rules.BY_ID)
    assert set(table["category"]) <= set(verdicts.VERDICTS)
    assert (table["evidence"].str.len() > 20).all()
    assert (table["rule"] == [rules.get(i).text() for i in table.index]).all()
    methods = table[table["section"] == "method check"]
    assert methods["category"].str.startswith("method check").all()
    assert not table.loc[table["section"] == "finding", "category"].str.startswith("method check").any()


@pytest.mark.slow  # the whole claims table, built from every shipped row
def test_claims_about_the_h100_or_l4_tested_on_the_h200_say_so(table):
    quantised = (("T3a", "R4l") if _counted_quant_cells() else ()) + (("R4n",) if _counted_quant_cells(["bnb-nf4"])
                                                                      else ())  # else not tested on the H200
    for id_ in ("R3e", "T3a", "T4", "R4n"):
        if id_ in quantised or id_ not in ("T3a", "R4n"):  # their verdicts are the H100's where it has rows
            h100 = ("h100-sxm: ctx" in table.loc["R3e", "ours"] if id_ == "R3e" else
                    id_ == "T4" and table.loc["T4", "ours"].startswith("h100-sxm")
                    or id_ == "T3a" and _counted_quant_cells(gpu="h100-sxm"))
            column = "also" if h100 else "verdict"  # an L4 claim (R4n) is tested on the H100 SXM too where it has cells
            assert re.search(r"tested on another GPU \((h100-sxm, )?h200 for an", table.loc[id_, column]), id_
    for id_ in ("R1d", "R3f", "R4l", "T1"):
        if id_ in quantised or id_ != "R4l":  # R4l, an L4 claim, tested on the H100 SXM too where it has cells
            assert re.search(r"tested on another GPU \((h100-sxm, )?h200 for an", table.loc[id_, "also"]), id_
    assert "for an h100-sxm claim" in table.loc["R3f", "also"]
    if quantised:
        assert "for an l4 claim" in table.loc["R4l", "also"]


@pytest.mark.slow  # the whole claims table, built from every shipped row
def test_shipped_verdicts(table):
    # T1 on the paper's own H100 numbers: launch 2.99-3.13 ms < GPU-side excess 7.20-7.78 ms (beyond the
    # published CI and the floor's byte convention); on the H200 the launch overhead is the largest term
    # on the H100's own grid at ctx 2048 (run d876e1) launch is the largest term beyond noise: reproduced there
    assert table.loc["T1", "category"] == verdicts.REPRODUCED and table.loc["T1", "also"] == (
        "contradicted by the paper's own numbers; tested on another GPU (h200 for an h100-sxm claim): holds")
    assert "launch L 2.99-3.13 ms, GPU-side excess X 7.20-7.78" in table.loc["T1", "ours"]
    assert "h100-sxm, 3 models x 3 sessions of the grid sweep at ctx 2048: launch L 12.30-30.29 ms" in table.loc[
        "T1", "ours"]
    # R3f and R3e on the H100's own attention rows (ctx 4096-16384 of 2026-12-05, ctx 2048 of 2026-12-06): SDPA ahead
    # of the FA2 proxy beyond the noise in 5 of 12 cells, within it in 7, so inconclusive there; the launch share below
    # 2x in most H100 cells, so R3e contradicted
    assert table.loc["R3f", "category"] == INCONCLUSIVE and table.loc["R3f", "also"].startswith(PAPER_HOLDS)
    assert "h100-sxm host-inclusive: fa2 (sdpa_flash): SDPA wins beyond noise in 5 of 12" in table.loc["R3f", "ours"]
    assert "fa2 (fa2): SDPA wins beyond noise in 0 of 12" in table.loc["R3f", "ours"]
    assert table.loc["R3e", "category"] == verdicts.CONTRADICTED_OURS and table.loc["R3e", "also"] == (
        "tested on another GPU (h200 for an h100-sxm claim): fails")
    assert "ctx 16384 3 at or above / 2 within noise / 7 below" in table.loc["R3e", "ours"]
    measured = _counted_quant_cells()  # quantised H200 cells with their layer and model checks in their own run
    assert table.loc["R4l", "category"] == PAPER_HOLDS
    assert ("fails" in table.loc["R4l", "also"]) if measured else table.loc["R4l", "also"] == "-"
    for id_ in ("R4i", "R4m", "R4k", "R4j", "R5"):
        assert table.loc[id_, "category"] == PAPER_FAILS, id_
    h100 = "h100-sxm eager" in table.loc["T5", "ours"]  # the paper's GPU class measured: T5 judged on its rows
    assert table.loc["T5", "category"] == (verdicts.CONTRADICTED_OURS if h100 else PAPER_FAILS)
    assert (PAPER_FAILS in table.loc["T5", "also"]) == h100
    assert table.loc["R5", "ours"] == "3.35x" and "8.84" in table.loc["R5", "evidence"]
    # T3a on the H100 SXM's own notebook 04 cells (Llama-3.1-8B): graphs 2.30-3.12x, the best int4 path 0.74-1.16x
    t3a_h100 = _counted_quant_cells(gpu="h100-sxm")
    assert table.loc["T3a", "category"] == (verdicts.REPRODUCED if t3a_h100 else OTHER_HOLDS if measured
                                            else verdicts.NOT_TESTABLE)
    assert ("(h200 for an h100-sxm claim): holds" in table.loc["T3a", "also"]) == (t3a_h100 and measured)
    counted = _counted_quant_cells(["bnb-nf4"])
    assert table.loc["R4n", "category"] == (OTHER_HOLDS if counted else verdicts.NOT_TESTABLE)
    # T4 on the H100's grid (ctx 2048 and 16384): its launch share falls with context there too
    assert table.loc["T4", "category"] == verdicts.REPRODUCED and table.loc["T4", "also"] == (
        "tested on another GPU (h200 for an h100-sxm claim): holds")
    assert table.loc["T3b", "category"] == PAPER_HOLDS and table.loc["T2", "category"] == PAPER_HOLDS
    n_head = int(table.loc["M6", "ours"].split("N = ")[1].split()[0])
    assert table.loc["M6", "category"] == (verdicts.MET if n_head >= 10 else verdicts.NOT_MET)
    # 1 - 1/1.259 = 0.206 is within 15 % of the paper's 0.20; our H100's grid at ctx 2048 gives 0.59, far outside it
    assert table.loc["R2b", "category"] == verdicts.CONTRADICTED_OURS and table.loc["R2b", "also"] == PAPER_HOLDS
    assert table.loc["R2b", "ours"] == "59%"


def test_r3f_both_directions(evidence):
    """SDPA beyond the noise everywhere: holds on the H200; a rival beyond it in one cell: fails; the shipped rows,
    where FA2 is within the rounds' noise in every cell: inconclusive."""
    faster = evidence.attention.copy()
    faster.loc[faster["attn"] == "sdpa", "host_us"] = 1.0
    assert "(h200 for an h100-sxm claim): holds" in _row(evidence, "R3f", attention=faster)["also"]
    beaten = evidence.attention.copy()
    beaten.loc[beaten["attn"] == "fa2", "host_us"] = 1.0
    assert "(h200 for an h100-sxm claim): fails" in _row(evidence, "R3f", attention=beaten)["also"]
    shipped = _row(evidence, "R3f")
    assert "inconclusive: within noise (tested on another GPU (h200" in shipped["also"] or shipped["also"].startswith(
        INCONCLUSIVE)


def _h100_grid_2048(evidence) -> bool:
    """Whether the H100 has rows of the A/B grid sweep at ctx 2048 (T1's, T4's and R2b's input)."""
    s = evidence.ab_sessions
    return bool(((s["gpu"] == "h100-sxm") & (s["ctx"] == 2048)).any())


def _h100_attention(evidence) -> bool:
    return "gpu" in evidence.attention and (evidence.attention["gpu"] == "h100-sxm").any()


def test_r3e_both_directions(evidence):
    """On the H200's rows alone (a claim about the H100 tested on another GPU) and, where they exist, on the H100's own
    (the paper's GPU class): the launch share far above 2x holds, at 1x fails, straddling 2x is inconclusive."""
    h200 = evidence.attention[evidence.attention["gpu"] == "h200"] if "gpu" in evidence.attention else evidence.attention
    cases = [(h200, OTHER_HOLDS, OTHER_FAILS)]
    if _h100_attention(evidence):
        cases.append((evidence.attention, verdicts.REPRODUCED, verdicts.CONTRADICTED_OURS))
    for rows, holds, fails in cases:
        assert _row(evidence, "R3e", attention=rows.assign(host_over_gpu=10.0))["category"] == holds
        assert _row(evidence, "R3e", attention=rows.assign(host_over_gpu=1.0))["category"] == fails
        mid = rows.assign(host_over_gpu=2.0, host_spread=0.2)  # 2.0 / 1.2 < 2 <= 2.0 x 1.2
        assert _row(evidence, "R3e", attention=mid)["category"] == INCONCLUSIVE


def test_t1_both_directions_on_the_h200(evidence):
    s = evidence.ab_sessions
    small = s.assign(graph=s["eager"] - 0.5)  # launch 0.5 ms: below the floor and the GPU-side excess
    assert "(h200 for an h100-sxm claim): fails" in _row(evidence, "T1", ab_sessions=small)["also"]
    assert "(h200 for an h100-sxm claim): holds" in _row(evidence, "T1")["also"]


def test_t4_both_directions(evidence):
    """On the H200's rows alone a claim about the H100 tested on another GPU; with the H100's (its grid at ctx 2048 and
    16384) judged on the paper's GPU class: holds on the shipped rows, fails with the launch share at 16k flipped."""
    s = evidence.ab_sessions
    cases = [(s[s["gpu"] == "h200"], OTHER_HOLDS, OTHER_FAILS)]
    if _h100_grid_2048(evidence):
        cases.append((s, verdicts.REPRODUCED, verdicts.CONTRADICTED_OURS))
    for rows, holds, fails in cases:
        flipped = rows.copy()
        long_ = flipped["ctx"] == 16384
        flipped.loc[long_, "graph"] = flipped.loc[long_, "eager"] * 0.1  # launch share 0.9 at 16k: above 2k's
        assert _row(evidence, "T4", ab_sessions=flipped)["category"] == fails
        assert _row(evidence, "T4", ab_sessions=rows)["category"] == holds
    assert len(cases) == 2  # the shipped rows hold both GPUs' grids


def _counted_quant_cells(quant_keys=("awq-marlin", "gptq-exllamav2"), gpu="h200") -> bool:
    """Whether figures/04_quant_cells.csv has a counted time on `gpu` (default the H200) of these paths (default the
    paper's int4 kernels) at ctx 2048 (a quantised cell counts only with its model and layer checks in its own run)."""
    cells = pd.read_csv(paths.FIGURES / "04_quant_cells.csv")
    return bool((cells["quant"].isin(list(quant_keys)) & (cells["ctx"] == 2048) & (cells["gpu"] == gpu)
                 & cells["t_obs_ms"].notna() & (cells["checked"] == True)).any())  # noqa: E712


def test_r4l_both_directions(evidence):
    """The paper's int4 kernels realising very different shares: holds on the H200 (some arm beyond noise, none
    failing); the same share: fails; the shipped rows: fails (4-17 points apart). Without counted cells of both
    kernels on the H200 it is not tested there."""
    if not _counted_quant_cells():
        assert _row(evidence, "R4l")["also"] == "-"
        return
    qc = evidence.quant_cells
    apart = qc.copy()
    apart.loc[apart["quant"] == "gptq-exllamav2", "realised_fraction"] = 0.95
    apart.loc[apart["quant"] == "awq-marlin", "realised_fraction"] = 0.10
    assert "h200 for an l4 claim): holds" in _row(evidence, "R4l", quant_cells=apart)["also"]
    same = qc.copy()
    same.loc[same["quant"] != "bf16", "realised_fraction"] = 0.5
    assert "h200 for an l4 claim): fails" in _row(evidence, "R4l", quant_cells=same)["also"]
    assert "h200 for an l4 claim): fails" in _row(evidence, "R4l")["also"]
    h200 = qc[qc["gpu"] == "h200"]  # the H200's own cells alone: the same label as before the H100 had any
    assert "(h200 for an l4 claim): fails" in _row(evidence, "R4l", quant_cells=h200)["also"]


def _quant_cell(model, arm, quant, t, share=np.nan, status="ok", outcome=None, k=np.nan, sessions=1, spread=0.0):
    """A hand-made cell of notebook 04's table (quant_report.cells' columns that the claims read)."""
    from decodegap import checked

    nbytes = 16e9 if quant == "bf16" else 5e9
    timed = status == "ok"
    return dict(gpu="h200", model=model, ctx=2048, arm=arm, attn="sdpa", quant=quant, status=status,
                reason="" if timed else "unchecked under the current rule: measured 2026-12-01 10:43 UTC, before "
                "in-run layer checks; timed, not counted", sessions=sessions,
                t_obs_ms=t if timed else np.nan, t_obs_min_ms=t if timed else np.nan,
                t_obs_max_ms=t * (1 + spread) if timed else np.nan, bytes_quant=nbytes,
                t_floor_quant_ms=nbytes / 4.8e9, realised_fraction=share if timed else np.nan,
                check="reference" if quant == "bf16" else "ok 0.05",
                quant_check="" if quant == "bf16" else outcome or checked.CHECKED_QUANT,
                model_k=np.nan if quant == "bf16" else k, measured="2026-12-02 17:03 UTC" if timed else
                "2026-12-01 10:43 UTC")


def test_the_quantised_model_check_has_an_inconclusive_band(evidence):
    """QT judges each timed cell by the checks of its own run (checked.quantised_checks, carried by the cells): k
    <= 1.3 holds, k >= sqrt 2 fails, in between inconclusive; a cell whose own run failed a layer check fails; a
    cell of an earlier rule is drawn unchecked and not judged."""
    from decodegap import checked

    def cells(k, drawn=checked.EARLIER_RULE):
        return pd.DataFrame([_quant_cell("m", "graph", "bf16", 8.0, sessions=3),
                             _quant_cell("m", "graph", "awq-marlin", 7.0, 0.1, k=k),
                             _quant_cell("m", "eager", "awq-marlin", 30.0, status=checked.UNCHECKED, outcome=drawn)])

    met = _row(evidence, "QT", quant_cells=cells(1.1))
    assert met["category"] == verdicts.MET
    assert "awq-marlin: 1 of 2 timed cells checked in their own run (k 1.10, ctx 2048), 1 drawn unchecked (1 " \
           "measured 2026-12-01 10:43 UTC, before in-run layer checks)" in met["ours"]
    assert "Closest to failing among the counted cells: awq-marlin m ctx 2048 (1 counted arms), k 1.10" in \
        met["evidence"]
    assert _row(evidence, "QT", quant_cells=cells(1.35))["category"] == "method check: " + INCONCLUSIVE
    assert _row(evidence, "QT", quant_cells=cells(1.5))["category"] == verdicts.NOT_MET
    assert _row(evidence, "QT", quant_cells=cells(1.1, checked.FAILED_QUANT))["category"] == verdicts.NOT_MET
    earlier = cells(1.1).iloc[[0, 2]]
    assert _row(evidence, "QT", quant_cells=earlier)["category"] == "method check: not testable here"
    # one path on two GPUs: each part names its GPU (one GPU's parts name none, as above)
    both = pd.concat([cells(1.1), cells(1.2).assign(gpu="h100-sxm")], ignore_index=True)
    ours = _row(evidence, "QT", quant_cells=both)["ours"]
    assert ours.startswith("h100-sxm awq-marlin: 1 of 2 timed cells checked in their own run (k 1.20")
    assert "; h200 awq-marlin: 1 of 2 timed cells checked in their own run (k 1.10" in ours


def test_r4l_judges_the_compiled_lean_arm_once_both_kernels_have_checked_cells(evidence):
    """R4l over its four arms on hand-made cells: eager, graph and lean_attn_graph spread 30 points +- about 3.5
    (inconclusive); the compiled lean arm 80 points. While gptq-exllamav2's compiled cells are drawn unchecked
    (measured under an earlier rule) that arm is not judged and says so: the GPU is inconclusive. Once they are
    checked in their own run the arm is judged like the others: it holds, and so does the GPU."""
    from decodegap import checked
    from decodegap.claims import quantisation as claims_quant

    def cells(compiled_status):
        out = []
        for model in ("m1", "m2"):
            for arm in ("eager", "graph", "lean_attn_graph", "lean_attn_compile"):
                hi = 0.9 if arm == "lean_attn_compile" else 0.5
                out += [_quant_cell(model, arm, "bf16", 10.0, sessions=3, spread=0.01),
                        _quant_cell(model, arm, "awq-marlin", 6.0, 0.2 if hi == 0.5 else 0.1, k=1.0),
                        _quant_cell(model, arm, "gptq-exllamav2", 6.0, hi, k=1.0,
                                    status=compiled_status if arm == "lean_attn_compile" else "ok",
                                    outcome=checked.EARLIER_RULE if compiled_status != "ok" and
                                    arm == "lean_attn_compile" else None)]
        return pd.DataFrame(out)

    before = claims_quant._kernel_decides_measured(dataclasses.replace(evidence, quant_cells=cells(checked.UNCHECKED)))
    outcome, parts = before["h200"]
    assert outcome == INCONCLUSIVE
    compiled = [p for p in parts if p.startswith("lean_attn_compile")]
    assert compiled == ["lean_attn_compile: not judged (no counted cell of gptq-exllamav2 at ctx 2048) (left out, "
                        "unchecked: gptq-exllamav2 2 (m1, m2, measured 2026-12-01 10:43 UTC before in-run layer "
                        "checks))"]
    assert any(p.startswith("graph: gptq-exllamav2 50% - awq-marlin 20% = 30.0 +- 3.5 points") and
               p.endswith(INCONCLUSIVE) for p in parts)
    after = claims_quant._kernel_decides_measured(dataclasses.replace(evidence, quant_cells=cells("ok")))
    outcome, parts = after["h200"]
    assert outcome == HOLDS
    assert [p for p in parts if p.startswith("lean_attn_compile")] == [
        "lean_attn_compile: gptq-exllamav2 90% - awq-marlin 10% = 80.0 +- 3.5 points (m1, m2): holds"]


def test_h100_rows_make_the_h100_claims_testable(evidence):
    """R2b is reproduced or contradicted on the paper's GPU class as soon as H100 rows exist."""
    row = dict(gpu="h100-sxm", model="qwen2.5-7b", ctx=2048, attn="sdpa", quant="bf16", t_floor_ms=4.58,
               gpu_excess_ms=5.0, launch_overhead_ms=2.4, eager_ms=12.0, graph_ms=9.6, launch_overhead_fraction=0.2)
    others = evidence.decomp[evidence.decomp["gpu"] != "h100-sxm"]  # the shipped H100 rows out: this row alone judges
    assert _row(evidence, "R2b", decomp=others)["category"] == PAPER_HOLDS  # no H100 row: the paper's numbers
    ok = pd.concat([others, pd.DataFrame([row])], ignore_index=True)
    assert _row(evidence, "R2b", decomp=ok)["category"] == verdicts.REPRODUCED
    bad = pd.concat([others, pd.DataFrame([{**row, "launch_overhead_fraction": 0.6}])], ignore_index=True)
    assert _row(evidence, "R2b", decomp=bad)["category"] == verdicts.CONTRADICTED_OURS


def test_cost_claim_follows_the_prices(evidence):
    """At an H100/L4 price ratio of 8.84 the paper's own step times do give ~6x."""
    prices = cost.load_prices()
    prices.loc[prices["gpu"] == "h100-sxm", "usd_per_hour"] = 0.7992 * 6 * 17.36 / 11.78
    costs = cost.cost_table(cost.published_configurations(published.load()), prices, hardware.specs_table())
    row = _row(evidence, "R5", costs=costs, prices=prices)
    assert row["category"] == PAPER_HOLDS and row["ours"] == "6.00x"


def test_cost_claim_reads_the_papers_step_times_alone(evidence):
    """R5 is judged on the paper's own numbers: a measured graphed H100 row (here one slower than the paper's, at
    another context) paired with the published L4 must not become the claim's H100 side."""
    prices = cost.load_prices()
    costs = cost.cost_table(cost.published_configurations(published.load()), prices, hardware.specs_table())
    measured = costs[(costs["gpu"] == "h100-sxm") & (costs["configuration"] == "bf16 graph")].head(1).copy()
    measured["source"] = cost.MEASURED_LABEL
    measured["ctx"], measured["step_ms"], measured["usd_per_mtok"] = 16384, 40.0, 10 * measured["usd_per_mtok"]
    both = pd.concat([measured, costs], ignore_index=True)  # the measured row first: a sort would meet it first
    assert _row(evidence, "R5", costs=both, prices=prices)["ours"] == _row(evidence, "R5", costs=costs,
                                                                            prices=prices)["ours"]


@pytest.mark.slow  # the whole claims table, built from every shipped row
def test_the_ab_design_counts_one_sweep_of_sessions(evidence, table):
    """M6 on the headline sweep's own sessions (ab.headline, never pooled with the grid's): met at N >= 10 of
    one sweep, not met below, whatever the two sweeps give together."""
    head = evidence.speed[(evidence.speed["sweep"] == "headline") & (evidence.speed["arm"] == "graph")]
    n = head.groupby("gpu")["sessions"].min()
    assert table.loc["M6", "ours"] == "; ".join(f"{g}: N = {int(k)} per arm at ctx 2048 (headline sweep)"
                                                for g, k in n.items())
    assert table.loc["M6", "category"] == (verdicts.MET if n.min() >= 10 else verdicts.NOT_MET)
    for sessions, expected in ((10, verdicts.MET), (7, verdicts.NOT_MET)):
        speed = evidence.speed.copy()
        speed.loc[speed["sweep"] == "headline", "sessions"] = sessions
        assert _row(evidence, "M6", speed=speed)["category"] == expected


@pytest.mark.slow  # the whole claims table, built from every shipped row
def test_r2a_names_every_measured_gpu_whose_eager_step_is_slower_than_the_papers(evidence, table):
    """The caveat that a slower host's larger graph speed-up does not test the thesis names each measured GPU whose
    eager headline step is slower than the published H100 eager step, the H100 measured here among them, and no
    other; the ratio is the cell's own."""
    h100 = evidence.pub_value("quantisation", "step_ms", gpu="h100-sxm", arm="eager")
    for g in evidence.measured:
        cell = evidence.cell(g)
        if cell is None:
            continue
        named = f"{g}'s eager step ({evidence.headline_model}, ctx {evidence.headline_ctx}) is"
        assert (named in table.loc["R2a", "evidence"]) == (cell["t_obs_ms"] > h100), g
        if cell["t_obs_ms"] > h100:
            assert f"{named} {cell['t_obs_ms'] / h100:.2f}x the published H100 eager" in table.loc["R2a", "evidence"]


@pytest.mark.slow  # the whole claims table, built from every shipped row
def test_preamble_defines_the_vocabulary_and_counts(table):
    text = claims.preamble(table.reset_index())
    n = verdicts.counts(table)
    for word in ("reproduced on the paper's GPU class", "tested on another GPU", "supported by the paper's own numbers",
                 "contradicted by the paper's own numbers", "inconclusive: within noise", "not testable here",
                 "method check"):
        assert word in text, word
    findings = int((table["section"] == "finding").sum())
    assert ", ".join(f"{v}: {n[v]}" for v in verdicts.CATEGORIES) + f" (of {findings} findings)" in text


@pytest.mark.slow  # the whole claims table, built from every shipped row
def test_rules_fixed_after_their_rows_are_flagged(evidence, table):
    """R3f was re-fixed in the registry after the attention rows of 12-01 13:20: flagged. The same rule dated
    after every run is not."""
    # the H200's attention run of 12-01 13:20 came before the re-fix; the H100's of 2026-12-05 and 2026-12-06 after it
    assert "after 1 of the 3 runs it reads (2026-12-01T13:20" in table.loc["R3f", "fixed_after_rows"]
    assert table.loc["R4e", "fixed_after_rows"] == ""  # published numbers only
    r = rules.get("R3f")
    runs = provenance.Runs(evidence.data)
    before = dataclasses.replace(r, history=(rules.Change("2026-11-01T00:00", "x", "fixed before any run", "t"),))
    assert provenance.fixed_after_rows(before, runs) == ""
    later = dataclasses.replace(r, history=(rules.Change("2030-01-01T00:00", "x", "fixed after every run", "t"),))
    assert provenance.fixed_after_rows(later, runs).startswith("fixed 2030-01-01T00:00 (x), after 3 of the 3 runs")



def test_rules_fixed_after_their_rows_are_counted_once_per_rule():
    """A rule judged on two GPUs has two rows and one rule: 3 rows of 2 rules, one flagged on both its rows, read
    "1 of 2 rules: X", not "2 of 3: X, X"."""
    t = pd.DataFrame(dict(id=["X", "X", "Y"], section=[claims.SECTION_METHOD] * 3, category="cost",
                          verdict=verdicts.METHOD_CATEGORIES[0], fixed_after_rows=["fixed later", "fixed later", ""]))
    head = claims.preamble(t)
    assert "**Rules fixed after the rows they read:** 1 of 2 rules: X." in head

@pytest.mark.slow  # the whole claims table, built from every shipped row
def test_claims_md_shows_earlier_rules_and_their_verdicts(tmp_path, table):
    claims.write(table.reset_index(), tmp_path)
    md = (tmp_path / "claims.md").read_text()
    assert "## Method checks (not counted among the findings)" in md and "## The rules and their history" in md
    r3f = md.split("### R3f:", 1)[1].split("### ", 1)[0]
    assert "e98b883" in r3f and "a rival faster by <= max(host_spread) does not fail" in r3f and "| reproduced" in r3f
    qt = md.split("### QT:", 1)[1].split("### ", 1)[0]
    assert "b6a8077" in qt and "error <= 4.0 x rounding bound" in qt and "Fixed after its rows" in qt


def test_t3a_both_directions(evidence):
    """Graphs beyond the best int4 path on every model: holds; an int4 path 10x faster than bf16: fails. Without
    counted quantised cells: not testable."""
    if not _counted_quant_cells():
        assert _row(evidence, "T3a")["category"] == verdicts.NOT_TESTABLE
        return
    h100 = _counted_quant_cells(gpu="h100-sxm")  # the paper's GPU class: its own label where it has counted cells
    assert _row(evidence, "T3a")["category"] == (verdicts.REPRODUCED if h100 else OTHER_HOLDS)
    fast = evidence.quant_cells.copy()
    int4 = fast["quant"] == "gptq-exllamav2"
    for col in ("t_obs_ms", "t_obs_min_ms", "t_obs_max_ms"):
        fast.loc[int4, col] = fast.loc[int4, col] / 10
    assert _row(evidence, "T3a", quant_cells=fast)["category"] == (verdicts.CONTRADICTED_OURS if h100 else OTHER_FAILS)
    h200 = evidence.quant_cells[evidence.quant_cells["gpu"] == "h200"]  # the H200 alone: another GPU's label
    assert _row(evidence, "T3a", quant_cells=h200)["category"] == OTHER_HOLDS
    assert _row(evidence, "T3a", quant_cells=fast[fast["gpu"] == "h200"])["category"] == OTHER_FAILS


def test_r4n_both_directions(evidence):
    """nf4's GPU-side excess beyond bf16's with a small share: holds; nf4 at bf16's excess: fails. Without counted
    nf4 cells: not testable."""
    qc = evidence.quant_cells
    if not (qc["quant"].eq("bnb-nf4") & qc["t_obs_ms"].notna()).any():
        assert _row(evidence, "R4n")["category"] == verdicts.NOT_TESTABLE
        return
    assert _row(evidence, "R4n")["category"] == OTHER_HOLDS
    qc = evidence.quant_cells.copy()
    key = ["gpu", "model", "ctx", "arm"]
    bf = qc[qc["quant"] == "bf16"].set_index(key)
    nf4 = qc.index[qc["quant"] == "bnb-nf4"]
    excess_bf = (bf["t_obs_ms"] - bf["t_floor_quant_ms"]).reindex(pd.MultiIndex.from_frame(qc.loc[nf4, key])).to_numpy()
    qc.loc[nf4, "t_obs_ms"] = qc.loc[nf4, "t_floor_quant_ms"].to_numpy() + excess_bf - 1.0  # 1 ms less excess
    assert _row(evidence, "R4n", quant_cells=qc)["category"] == OTHER_FAILS


def test_t5_both_directions(evidence):
    """The paper's H100 0.27 contradicts 'memory-dominated'; an H200 cell above 0.5 beyond its range holds there.
    With H100 rows the paper's GPU class judges it, both ways."""
    h200_only = evidence.cells[evidence.cells["gpu"] != "h100-sxm"]
    assert _row(evidence, "T5", cells=h200_only)["category"] == PAPER_FAILS
    cells = h200_only.assign(r_floor_W_all=0.9)
    assert "(h200 for a paper-GPU claim): holds" in _row(evidence, "T5", cells=cells)["also"]
    if (evidence.cells["gpu"] == "h100-sxm").any():
        assert _row(evidence, "T5")["category"] == verdicts.CONTRADICTED_OURS
        high = evidence.cells.assign(r_floor_W_all=0.9)
        assert _row(evidence, "T5", cells=high)["category"] == verdicts.REPRODUCED




def test_a_runs_gpu_time_runs_from_its_id_to_its_last_recorded_time():
    """remeasure.run_seconds: a run's id names its start; its env.json entry's latest `time` (the run's or a
    session's after-state) its end. 12:00:00 to 12:01:30 is 90 s; an id naming no time gives None, not a guess."""
    from decodegap.claims import remeasure

    entry = {"gpu_state_after": {"time": "2026-12-05T12:01:00+00:00"},
             "sessions": {"0": {"after": {"time": "2026-12-05T12:01:30+00:00"}}, "1": "killed"}}
    assert remeasure.run_seconds("20261205T120000-abc123", entry) == 90.0
    assert remeasure.run_seconds("not-a-time-abc123", entry) is None
    assert remeasure.run_seconds("20261205T120000-abc123", {}) is None


def test_gpu_time_in_words_rounds_the_minutes_once():
    """remeasure.gpu_time: 166 min is 2 h 46 min (the hours were once rounded on their own: 2.77 h read '3 h'),
    179.7 min is 3 h 0 min (not '3 h 60 min'), 45 s is 1 min, and a run without an end time is counted apart."""
    from decodegap.claims import remeasure

    assert remeasure.gpu_time([166 * 60.0]) == "2 h 46 min over 1 run"
    assert remeasure.gpu_time([100 * 60.0, 79.7 * 60.0]) == "3 h 0 min over 2 runs"
    assert remeasure.gpu_time([45.0, None]) == "1 min over 2 runs (1 without an end time)"
    assert remeasure.gpu_time([]) == "none"


def test_per_layer_claims_say_why_the_h100_has_no_time(evidence):
    """R3a-R3d with no H100 time in their cell (the Llama-3.1-8B shape at ctx 2048) say why: the H100's attention rows
    at other contexts only (the shipped rows without their ctx 2048 run of 2026-12-06), a backend recorded as not run
    there (its reason), no attention rows at all; an H100 row in the cell judges the claim against the published value
    instead (as shipped)."""
    full = evidence.attention
    if (full["gpu"] == "h100-sxm").sum() == 0 or not (full.loc[full["gpu"] == "h100-sxm", "ctx"] != 2048).any():
        pytest.skip("the shipped rows changed: no H100 attention rows beyond ctx 2048")
    att = full[~((full["gpu"] == "h100-sxm") & (full["ctx"] == 2048))]
    h100 = att[att["gpu"] == "h100-sxm"]
    contexts = ", ".join(str(int(c)) for c in sorted(set(h100["ctx"])))
    assert (f"at ctx 2048 (h100-sxm's attention rows are at ctx {contexts} only)"
            in _row(evidence, "R3a", attention=att)["evidence"])
    at_2048 = pd.concat([att, h100[h100["ctx"] == 4096].assign(ctx=2048)], ignore_index=True)
    fa3 = _row(evidence, "R3b", attention=at_2048)  # FA3 recorded unavailable on the H100: its reason
    assert fa3["ours"] == "-" and "fa3 or fa3_torch did not run on the h100-sxm (llama-3.1-8b shape, ctx 2048)" in \
        fa3["evidence"] and "unavailable: " in fa3["evidence"]
    sdpa = _row(evidence, "R3a", attention=at_2048)  # SDPA ran there: the claim is judged on the H100's time
    assert sdpa["hardware"] == "h100-sxm" and sdpa["ours"].endswith(" us") and "did not run" not in sdpa["evidence"]
    none = _row(evidence, "R3a", attention=att[att["gpu"] != "h100-sxm"])
    assert "no h100-sxm attention rows of the llama-3.1-8b shape (notebook 03 not measured there)" in none["evidence"]
    if ((full["gpu"] == "h100-sxm") & (full["ctx"] == 2048)).any():  # as shipped: judged on the H100's own rows
        assert _row(evidence, "R3a")["hardware"] == "h100-sxm"


def test_the_scope_statement_names_what_is_measured_of_its_scope(evidence):
    """S1 (a statement of scope) says where its batch remark is tested (W1, notebook 07's batch rows, per GPU), the
    attention of every model measured (GQA: fewer key-value heads than query heads, more than one) and the GPUs'
    architectures from the registry; without batch > 1 rows it says W1 has none yet."""
    s1 = _row(evidence, "S1")
    cells = evidence.scope["cells"]
    big = cells[cells["batch"] > 1]
    if not big.empty:
        gpu = sorted(set(big["gpu"]))[0]
        b = big[big["gpu"] == gpu]["batch"]
        assert f"{gpu} B = {int(b.min())}-{int(b.max())}" in s1["evidence"]
    n = len(set().union(*(set(f["model"]) for f in (evidence.cells, evidence.speed, evidence.attention,
                                                     evidence.quant_cells, cells))))
    assert f"Of the {n} models measured here, {n} GQA (MHA and MQA models are not measured)" in s1["evidence"]
    assert "NVIDIA H200 SXM 141GB (Hopper)" in s1["evidence"] and "AMD and Blackwell GPUs are not measured" in s1["evidence"]
    none = _row(evidence, "S1", scope={**evidence.scope, "cells": cells[cells["batch"] == 1]})
    assert "as W1 once notebook 07 has batch > 1 rows (none yet)" in none["evidence"]
    assert s1["category"] == none["category"] == "method check: not testable here"


def test_the_headline_r_floor_says_what_its_verdict_weighed(evidence):
    """R1b on the H100's cell names the cell's session range and its noise (max / min - 1) beside the deviation from
    the published R_floor: with the shipped rows (sessions 19.99-29.12 ms) a deviation of 0.34 against rel_tol 0.15
    and 46 % noise, inconclusive; with the range closed to the median, the same deviation fails."""
    r1b = _row(evidence, "R1b")
    cell = evidence.cell("h100-sxm")
    if cell is None:
        pytest.skip("no H100 roofline cell")
    noise = cell["t_obs_max_ms"] / cell["t_obs_min_ms"] - 1
    assert (f"its sessions {cell['t_obs_min_ms']:.2f}-{cell['t_obs_max_ms']:.2f} ms (noise {noise:.0%})"
            in r1b["evidence"])
    dev = abs(cell["r_floor_W_all"] / 0.27 - 1)
    assert f"|ours / published - 1| = {dev:.2f} against rel_tol 0.15" in r1b["evidence"]
    if dev - noise <= 0.15 < dev + noise:
        assert r1b["category"].startswith(INCONCLUSIVE)
    cells = evidence.cells.copy()
    at = (cells["gpu"] == "h100-sxm") & (cells["t_obs_ms"] == cell["t_obs_ms"])
    cells.loc[at, ["t_obs_min_ms", "t_obs_max_ms"]] = cell["t_obs_ms"]
    tight = _row(evidence, "R1b", cells=cells)
    assert at.sum() == 1 and "(noise 0%)" in tight["evidence"]
    assert tight["category"] == (verdicts.CONTRADICTED_OURS if dev > 0.15 else verdicts.REPRODUCED)


def test_one_left_out_names_a_verdict_carried_by_one_model(evidence):
    """R3e on the H100 with every cell at 3x host over GPU (beyond the 2x threshold, no spread) but one model's at
    1.5x: contradicted on the paper's GPU class; without that model's rows the same rule reproduces it, and
    one_left_out says so. With every cell at 3x, it is unchanged whichever model or context is left out; a row not
    testable has nothing to leave out, and the published rows are never left out."""
    from decodegap.claims import attention_backends as claims_attention, one_left_out

    att = evidence.attention.copy()
    h100 = (att["gpu"] == "h100-sxm") & (att["status"] == "ok")
    att.loc[h100, ["host_over_gpu", "host_spread"]] = (3.0, 0.0)
    alone = sorted(set(att.loc[h100, "model"]))[0]
    low = att.copy()
    low.loc[h100 & (low["model"] == alone), "host_over_gpu"] = 1.5
    rows = lambda e: claims_attention.attention_backends(e)  # noqa: E731
    ids = [r["id"] for r in rows(evidence)]
    carried = dict(zip(ids, one_left_out.column(dataclasses.replace(evidence, attention=low), rows)))
    assert _row(evidence, "R3e", attention=low)["category"] == verdicts.CONTRADICTED_OURS
    assert f"without model {alone}: {verdicts.REPRODUCED}" in carried["R3e"]
    held = dict(zip(ids, one_left_out.column(dataclasses.replace(evidence, attention=att), rows)))
    assert _row(evidence, "R3e", attention=att)["category"] == verdicts.REPRODUCED
    assert held["R3e"].startswith("unchanged with any one of ") and "without model" not in held["R3e"]
    untestable = [r["id"] for r in rows(dataclasses.replace(evidence, attention=att))
                  if r["category"] == verdicts.NOT_TESTABLE]
    assert "R3b" in untestable  # the shipped rows: FA3 did not run on the H100
    assert all(held[i] == "-" for i in untestable)  # not testable: nothing to leave out
    gone = one_left_out.without(evidence, "model", alone)
    assert alone not in set(gone.attention["model"]) and len(gone.published) == len(evidence.published)


HEADLINE_RUN = "20261205T000000-hand"
"""The run of the hand-made sessions of the H100's headline cell below."""


def _headline_sessions(evidence, factors) -> pd.DataFrame:
    """Notebook 01's decode rows of one run on the H100, one session per factor: at the headline cell its eager step
    is `factor` times the step that gives the published R_floor exactly (the floor over 0.27) and its graph step half
    that, at twice the headline context the eager step is that step; each session's timed steps 0.9, 1 and 1.1 times
    its step (median: the step) after a warm-up step 100 times it (not timed, not counted)."""
    gpu, model, ctx = "h100-sxm", evidence.headline_model, evidence.headline_ctx
    step = evidence.floor_ms(gpu) / evidence.pub_value("inverted_ladder", "r_floor", gpu=gpu)
    rows = []
    for session, factor in enumerate(factors):
        for arm, at, ms in (("eager", ctx, factor * step), ("graph", ctx, factor * step / 2), ("eager", 2 * ctx, step)):
            for i, (x, status) in enumerate(((100, "warmup"), (0.9, "ok"), (1.0, "ok"), (1.1, "ok"))):
                rows.append(dict(run_id=HEADLINE_RUN, session=session, gpu=gpu, model=model, ctx=at,
                                 max_cache_len=at + 64, arm=arm, attn="sdpa", quant="bf16", step=i, step_ms=x * ms,
                                 status=status, reason=""))
    return pd.DataFrame(rows)


def test_without_session_makes_the_headline_cell_again_from_the_other_sessions(evidence):
    """Three sessions at 0.98, 1.02 and 1.30 times the published-R_floor step s: the headline cell's step is their
    median 1.02 s, its range 0.98-1.30 s. Without session 1: the median of the other two, 1.14 s, range 0.98-1.30 s,
    2 sessions, the graph arm's cell too; the same session's cell at another context keeps its 3 sessions."""
    from decodegap.claims import one_left_out

    s = evidence.floor_ms("h100-sxm") / evidence.pub_value("inverted_ladder", "r_floor", gpu="h100-sxm")
    pd.testing.assert_frame_equal(evidence.with_cell_rows(evidence.cell_rows).cells, evidence.cells)  # as collected
    ev = evidence.with_cell_rows(_headline_sessions(evidence, (0.98, 1.02, 1.30)))
    assert one_left_out.headline_sessions(ev) == [("h100-sxm", HEADLINE_RUN, n) for n in (0, 1, 2)]
    whole = ev.cell("h100-sxm")
    assert whole["sessions"] == 3 and whole["t_obs_ms"] == pytest.approx(1.02 * s)
    assert (whole["t_obs_min_ms"], whole["t_obs_max_ms"]) == pytest.approx((0.98 * s, 1.30 * s))
    gone = one_left_out.without_session(ev, "h100-sxm", HEADLINE_RUN, 1)
    cell = gone.cell("h100-sxm")
    assert cell["sessions"] == 2 and cell["t_obs_ms"] == pytest.approx(1.14 * s)
    assert (cell["t_obs_min_ms"], cell["t_obs_max_ms"]) == pytest.approx((0.98 * s, 1.30 * s))
    assert cell["r_floor_W_all"] == pytest.approx(0.27 / 1.14)
    assert gone.cell("h100-sxm", arm="graph")["sessions"] == 2
    assert gone.cell("h100-sxm", ctx=2 * evidence.headline_ctx)["sessions"] == 3
    assert len(gone.cell_rows) == len(ev.cell_rows) - 2 * 4  # session 1's eager and graph rows at the headline cell
    assert len(gone.published) == len(evidence.published) and gone.speed is ev.speed  # nothing else left out


def _left_out_text(ev, make_rows, id_) -> str:
    """Rule `id_`'s one_left_out text with `ev`, its rows made by `make_rows` alone (a section of the table)."""
    from decodegap.claims import one_left_out

    return dict(zip([r["id"] for r in make_rows(ev)], one_left_out.column(ev, make_rows)))[id_]


def _unchanged_text(ev, sessions: int, ab_sessions: int, grid_sessions: int | None = None) -> str:
    """one_left_out's text of a label of the headline cell that nothing left out changes, `sessions` of notebook 01's
    headline sessions, `ab_sessions` A/B headline sessions and `grid_sessions` A/B grid sessions at the headline
    context (None: those of `ev`; not named where there are none) counted: every model and context but the headline
    model and context (without which its source has nothing left to judge) judged."""
    from decodegap.claims import one_left_out

    n = len(one_left_out.left_out(ev))
    grid = len(one_left_out.grid_sessions(ev)) if grid_sessions is None else grid_sessions
    scope = len(one_left_out.scope_sessions(ev))  # notebook 07's, which these rules do not read
    quant = len(one_left_out.quant_sessions(ev))  # notebook 04's quantised cells', which these rules do not read
    quantised = f", or any one of {quant} of the {quant} sessions of notebook 04's quantised cells" if quant else ""
    return (f"unchanged with any one of {n - 2} of the {n} models and contexts, or any one of {sessions} of the "
            f"{sessions} sessions of the headline cells, or any one of {ab_sessions} of the {ab_sessions} A/B headline "
            f"sessions{f', or any one of {grid} of the {grid} A/B grid sessions' if grid else ''}"
            f"{f', or any one of {scope} of the {scope} sessions of notebook 07' + chr(39) + 's sweeps' if scope else ''}"
            f"{quantised}"
            f", left out (without model {ev.headline_model}, ctx {ev.headline_ctx} its source has nothing left to "
            "judge)")


def test_one_left_out_names_a_verdict_carried_by_one_session(evidence):
    """R1b (rel_tol 0.15) on three sessions at 0.98, 1.02 and 1.30 times the published-R_floor step: the median 1.02
    is 2 % off but the range (1.30 / 0.98 - 1 = 33 %) straddles the tolerance, inconclusive. Without session 2 the two
    left are 0 % off (median 1.00) with a 4 % range: reproduced, and one_left_out names that session. Without session
    0 (median 1.16: 14 % off, range 27 %) or 1 (median 1.14: 12 % off, range 33 %) still inconclusive, not named. At
    0.99, 1.00 and 1.01 every session left out keeps it reproduced: unchanged, the sessions counted beside the models
    and contexts and the shipped A/B headline sessions (leaving out the headline model or context leaves R1b nothing
    to judge)."""
    from decodegap.claims import one_left_out, roofline as claims_roofline

    assert rules.get("R1b").t("rel_tol") == 0.15  # the factors above are chosen by hand against it
    carried_ev = evidence.with_cell_rows(_headline_sessions(evidence, (0.98, 1.02, 1.30)))
    assert _row(carried_ev, "R1b")["category"] == INCONCLUSIVE
    assert (_left_out_text(carried_ev, claims_roofline.inverted_ladder, "R1b")
            == f"without h100-sxm session 2 of run {HEADLINE_RUN}: {verdicts.REPRODUCED}")
    held_ev = evidence.with_cell_rows(_headline_sessions(evidence, (0.99, 1.00, 1.01)))
    assert _row(held_ev, "R1b")["category"] == verdicts.REPRODUCED
    assert (_left_out_text(held_ev, claims_roofline.inverted_ladder, "R1b")
            == _unchanged_text(held_ev, 3, len(one_left_out.headline_ab_sessions(held_ev))))


AB_RUN = "20261205T000000-hand-ab"
"""The run of the hand-made A/B sessions of the H100's headline cell below."""


def _ab_sessions(evidence, ratios, eager_ms=None, run_id: str = AB_RUN, sweep: str = "headline") -> pd.DataFrame:
    """Notebook 02's A/B rows of one run `run_id` of `sweep` (the headline sweep) on the H100, one session per ratio,
    at the headline cell: the graph step 10 ms, the eager step `ratio` times it (the session's speed-up), or per
    session the eager step `eager_ms` (ms) where given; each arm's timed steps 0.9, 1 and 1.1 times its step (median:
    the step) after a warm-up step 100 times it (not timed, not counted)."""
    rows = []
    for session, eager in enumerate(eager_ms if eager_ms is not None else [10.0 * r for r in ratios]):
        for arm, ms in (("eager", eager), ("graph", 10.0)):
            for i, (x, status) in enumerate(((100, "warmup"), (0.9, "ok"), (1.0, "ok"), (1.1, "ok"))):
                rows.append(dict(run_id=run_id, session=session, gpu="h100-sxm", model=evidence.headline_model,
                                 ctx=evidence.headline_ctx, max_cache_len=evidence.headline_ctx + 64, arm=arm,
                                 attn="sdpa", quant="bf16", step=i, step_ms=x * ms, status=status, reason="",
                                 sweep=sweep))
    return pd.DataFrame(rows)


def test_with_ab_rows_makes_the_speedups_again_from_the_other_sessions(evidence):
    """Every A/B row kept: speed and ab_sessions as collected (the whole remake). Without one session of the H100's
    headline sweep at the headline cell: that cell's speed-up is the mean of the other sessions' ratios (eager over
    graph, each a session's median, from the collected session table) and, with fewer than 10 left, their range; the
    spliced frames (that cell alone made again) are those the whole remake of the rows left gives, the other cells
    unchanged."""
    from decodegap.claims import one_left_out

    whole = evidence.with_ab_rows(evidence.ab_rows)
    pd.testing.assert_frame_equal(whole.speed, evidence.speed)
    pd.testing.assert_frame_equal(whole.ab_sessions, evidence.ab_sessions)
    sessions = [s for s in one_left_out.headline_ab_sessions(evidence) if s[0] == "h100-sxm"]
    if not sessions:
        pytest.skip("no A/B headline sessions on the H100")
    gpu, run_id, session = sessions[0]
    gone = one_left_out.without_ab_session(evidence, gpu, run_id, session)
    s = evidence.ab_sessions
    cell = s[(s["gpu"] == gpu) & (s["model"] == evidence.headline_model) & (s["ctx"] == evidence.headline_ctx)
             & (s["sweep"] == "headline") & (s["session"] != session)]
    ratios = cell["eager"] / cell["graph"]
    assert len(ratios) == len(sessions) - 1 and len(ratios) < 10  # the shipped H100: 10 sessions, 9 left
    got = gone.speedup(gpu)
    assert got["sessions"] == len(ratios) and got["speedup"] == pytest.approx(ratios.mean())
    assert (got["low"], got["high"]) == pytest.approx((ratios.min(), ratios.max()))
    assert got["interval"] == f"range of {len(ratios)} sessions"
    again = evidence.with_ab_rows(gone.ab_rows)  # every cell made again from the rows left
    pd.testing.assert_frame_equal(gone.speed, again.speed)
    pd.testing.assert_frame_equal(gone.ab_sessions, again.ab_sessions)
    moved = ~(gone.speed.fillna(-1) == evidence.speed.fillna(-1)).all(axis=1)  # the same cells, in the same order
    assert list(gone.speed.loc[moved, ["gpu", "model", "ctx", "sweep"]].itertuples(index=False, name=None)) == [
        (gpu, evidence.headline_model, evidence.headline_ctx, "headline")]  # that cell alone
    r = evidence.ab_rows
    out = ((r["gpu"] == gpu) & (r["run_id"] == run_id) & (r["session"] == session)
           & (r["model"] == evidence.headline_model) & (r["ctx"] == evidence.headline_ctx))
    assert out.any() and len(gone.ab_rows) == len(r) - out.sum()  # both arms, the headline model's rows alone


def test_one_left_out_names_a_verdict_carried_by_one_ab_session(evidence):
    """R2a (our interval overlaps the published [1.253, 1.267]) on three A/B sessions of the headline sweep whose
    speed-ups are 1.20, 1.22 and 1.26: fewer than 10, so the interval is their range [1.20, 1.26], which overlaps:
    reproduced. Without session 2 the range is [1.20, 1.22], below 1.253: contradicted, and one_left_out names that
    session; without session 0 ([1.22, 1.26]) or 1 ([1.20, 1.26]) it still overlaps, not named. At 1.255, 1.260 and
    1.265 every session left out keeps an overlap: unchanged, the A/B sessions counted beside the models and contexts
    and notebook 01's sessions (leaving out the headline model or context leaves R2a nothing to judge)."""
    from decodegap.claims import cuda_graphs_ab as claims_graphs, one_left_out

    p = evidence.pub("cuda_graphs", "speedup", gpu="h100-sxm").iloc[0]
    assert (p.ci_low, p.ci_high) == (1.253, 1.267)  # the ratios above are chosen by hand against it
    carried_ev = evidence.with_ab_rows(_ab_sessions(evidence, (1.20, 1.22, 1.26)))
    assert _row(carried_ev, "R2a")["category"] == verdicts.REPRODUCED
    assert one_left_out.headline_ab_sessions(carried_ev) == [("h100-sxm", AB_RUN, n) for n in (0, 1, 2)]
    assert (_left_out_text(carried_ev, claims_graphs.cuda_graphs, "R2a")
            == f"without h100-sxm A/B session 2 of run {AB_RUN}: {verdicts.CONTRADICTED_OURS}")
    held_ev = evidence.with_ab_rows(_ab_sessions(evidence, (1.255, 1.260, 1.265)))
    assert _row(held_ev, "R2a")["category"] == verdicts.REPRODUCED
    assert (_left_out_text(held_ev, claims_graphs.cuda_graphs, "R2a")
            == _unchanged_text(held_ev, len(one_left_out.headline_sessions(held_ev)), 3))


GRID_RUN = "20261205T000000-hand-grid"
"""The run of the hand-made A/B grid sessions of the H100 below (_ab_sessions of the grid sweep)."""



def test_without_grid_session_makes_the_decomposition_again_from_the_other_sessions(evidence):
    """Every A/B row kept: the decomposition as collected (cuda_graphs_ab.grid_decomposition, the claims table's
    own). Without one session of the H100's grid sweep at the headline context: each of that GPU's cells there has
    the median over the other sessions of each session's step (eager and graph, from the collected session table) and
    their difference over eager as its launch share; every other GPU's and context's row is as it was, and the
    speed-ups and session tables spliced are those the whole remake of the rows left gives."""
    from decodegap.claims import one_left_out

    pd.testing.assert_frame_equal(evidence.with_ab_rows(evidence.ab_rows).decomp, evidence.decomp)
    r = evidence.ab_rows
    at_headline = set(map(tuple, r.loc[(r["sweep"] == "grid") & (r["ctx"] == evidence.headline_ctx),
                                       ["gpu", "run_id", "session"]].drop_duplicates().to_numpy()))
    every = [s for s in one_left_out.grid_sessions(evidence) if s[0] == "h100-sxm"]
    sessions = [s for s in every if s in at_headline]
    if not sessions:
        pytest.skip("no A/B grid sessions on the H100 at the headline context")
    assert len(sessions) == 3 and len(every) == 6  # the shipped H100: 3 at ctx 2048, 3 in a run of ctx 4096-16384
    gpu, run_id, session = sessions[0]
    gone = one_left_out.without_grid_session(evidence, gpu, run_id, session)
    s = evidence.ab_sessions
    left = s[(s["gpu"] == gpu) & (s["ctx"] == evidence.headline_ctx) & (s["sweep"] == "grid")
             & (s["session"] != session)]
    d = gone.headline_decomp(gpu).set_index("model")
    assert sorted(d.index) == sorted(set(left["model"]))  # every model of that session left out, none dropped
    for model, cell in left.groupby("model"):
        eager, graph = cell["eager"].median(), cell["graph"].median()
        assert len(cell) == 2
        assert (d.loc[model, "eager_ms"], d.loc[model, "graph_ms"]) == pytest.approx((eager, graph))
        assert d.loc[model, "launch_overhead_fraction"] == pytest.approx((eager - graph) / eager)
    key = ["gpu", "model", "ctx"]
    same = lambda f: f[(f["gpu"] != gpu) | (f["ctx"] != evidence.headline_ctx)].reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(same(gone.decomp), same(evidence.decomp))
    assert not gone.decomp.set_index(key).equals(evidence.decomp.set_index(key))
    again = evidence.with_ab_rows(gone.ab_rows)  # every cell made again from the rows left
    pd.testing.assert_frame_equal(gone.speed, again.speed)
    pd.testing.assert_frame_equal(gone.ab_sessions, again.ab_sessions)
    out = ((r["gpu"] == gpu) & (r["run_id"] == run_id) & (r["session"] == session) & (r["sweep"] == "grid")
           & (r["ctx"] == evidence.headline_ctx))
    assert len(gone.ab_rows) == len(r) - out.sum() and set(r.loc[out, "model"]) == set(left["model"])


def test_a_grid_session_that_timed_several_contexts_is_left_out_at_every_one(evidence):
    """A grid session is one process: where it timed every context of the grid (the shipped H200's sessions), leaving
    it out removes its rows at each of them, and the decomposition moves at the long context T4 reads as well as at
    the headline one; the other GPU's rows stay as they were."""
    from decodegap.claims import one_left_out

    r = evidence.ab_rows
    grid = r[r["sweep"] == "grid"]
    spans = grid.groupby(["gpu", "run_id", "session"])["ctx"].nunique()
    wide = [k for k, n in spans.items() if n > 1]
    if not wide:
        pytest.skip("no grid session that timed several contexts")
    gpu, run_id, session = wide[0]
    assert (gpu, run_id, session) in one_left_out.grid_sessions(evidence)
    mine = (r["gpu"] == gpu) & (r["run_id"] == run_id) & (r["session"] == session) & (r["sweep"] == "grid")
    contexts = sorted(set(r.loc[mine, "ctx"]))
    assert len(contexts) == spans[(gpu, run_id, session)] > 1
    gone = one_left_out.without_grid_session(evidence, gpu, run_id, session)
    assert len(gone.ab_rows) == len(r) - int(mine.sum())
    kept = gone.ab_rows
    assert not ((kept["gpu"] == gpu) & (kept["run_id"] == run_id) & (kept["session"] == session)
                & (kept["sweep"] == "grid")).any()
    d, d0 = gone.decomp.set_index(["gpu", "model", "ctx"]), evidence.decomp.set_index(["gpu", "model", "ctx"])
    for ctx in (contexts[0], contexts[-1]):  # the headline context and the longest
        at = lambda f: f.xs((gpu, ctx), level=["gpu", "ctx"])["eager_ms"]  # noqa: E731
        assert not at(d).equals(at(d0)), ctx
    other = lambda f: f[f["gpu"] != gpu].reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(other(gone.decomp), other(evidence.decomp))


def test_one_left_out_names_a_verdict_carried_by_one_grid_session(evidence):
    """R2b (rel_tol 0.15 about the published 20 %) on three grid sessions of the H100 at the headline cell, the graph
    step 10 ms and the eager steps 11.0, 11.5 and 13.0 ms: the cell's eager step is their median 11.5, its launch
    share 1.5 / 11.5 = 13 % (35 % off): contradicted. Without session 0 the eager step is the mean of the other two,
    12.25, the share 18.4 % (8 % off): reproduced, and one_left_out names that grid session; without session 1 (12.0:
    16.7 %, 17 % off) or 2 (11.25: 11.1 %) still contradicted, not named. At 12.4, 12.5 and 12.6 ms every session left
    out keeps it reproduced (19.4-20.6 %): unchanged, the grid sessions counted beside the rest. A headline sweep of
    the same cell is there too (its sessions make the headline speed-up, not the decomposition)."""
    from decodegap.claims import cuda_graphs_ab as claims_graphs, one_left_out

    assert rules.get("R2b").t("rel_tol") == 0.15  # the steps above are chosen by hand against it
    assert evidence.pub_value("cuda_graphs", "launch_overhead_fraction", gpu="h100-sxm") == 0.20
    headline = _ab_sessions(evidence, (1.255, 1.260, 1.265))

    def ev_of(eager):
        grid = _ab_sessions(evidence, (), eager, GRID_RUN, "grid")
        return evidence.with_ab_rows(pd.concat([grid, headline], ignore_index=True))

    carried_ev = ev_of((11.0, 11.5, 13.0))
    assert _row(carried_ev, "R2b")["category"] == verdicts.CONTRADICTED_OURS
    assert one_left_out.grid_sessions(carried_ev) == [("h100-sxm", GRID_RUN, n) for n in (0, 1, 2)]
    assert (_left_out_text(carried_ev, claims_graphs.cuda_graphs, "R2b")
            == f"without h100-sxm A/B grid session 0 of run {GRID_RUN}: {verdicts.REPRODUCED}")
    held_ev = ev_of((12.4, 12.5, 12.6))
    assert _row(held_ev, "R2b")["category"] == verdicts.REPRODUCED
    assert (_left_out_text(held_ev, claims_graphs.cuda_graphs, "R2b")
            == _unchanged_text(held_ev, len(one_left_out.headline_sessions(held_ev)), 3, 3))
    # without a headline sweep the headline speed-up is the grid's: its sessions are grid sessions, named once as that
    grid_only = evidence.with_ab_rows(_ab_sessions(evidence, (), (11.0, 11.5, 13.0), GRID_RUN, "grid"))
    assert one_left_out.headline_ab_sessions(grid_only) == []
    assert one_left_out.grid_sessions(grid_only) == [("h100-sxm", GRID_RUN, n) for n in (0, 1, 2)]
    assert (_left_out_text(grid_only, claims_graphs.cuda_graphs, "R2b")
            == f"without h100-sxm A/B grid session 0 of run {GRID_RUN}: {verdicts.REPRODUCED}")



SCOPE_RUN, SCOPE_OLDER_RUN = "20261207T000000-hand-scope", "20261201T000000-hand-scope"
"""The runs of the hand-made notebook 07 sessions of the H100 below (_scope_rows); the older one is replaced whole."""


def _scope_rows(graph_b8_ms, run_id: str = SCOPE_RUN) -> pd.DataFrame:
    """Notebook 07's decode rows of one batch sweep `run_id` on the H100 (llama-3.1-8b, ctx 2048, sessions 100-102):
    eager 20 ms at batch 1 and 8 in every session, graph 10 ms at batch 1 and, per session, `graph_b8_ms` at batch 8;
    each a warm-up step (not timed) and three timed steps 0.9, 1 and 1.1 times it (session median: the step)."""
    rows = []
    for i, g8 in enumerate(graph_b8_ms):
        for batch, arm, ms in ((1, "eager", 20.0), (1, "graph", 10.0), (8, "eager", 20.0), (8, "graph", g8)):
            for step, (x, status) in enumerate(((100, "warmup"), (0.9, "ok"), (1.0, "ok"), (1.1, "ok"))):
                rows.append(dict(run_id=run_id, session=100 + i, gpu="h100-sxm", model="llama-3.1-8b", ctx=2048,
                                 max_cache_len=2112, arm=arm, attn="sdpa", quant="bf16", step=step, step_ms=x * ms,
                                 status=status, reason="", batch=batch))
    return pd.DataFrame(rows)


def test_one_left_out_names_a_verdict_carried_by_one_notebook_07_session(evidence):
    """W1 on a hand-made H100 batch sweep: the launch share at batch 1 is 0.5 in every session (eager 20 ms, graph
    10); at batch 8 the graph step is 18, 18 and 9 ms, so the share's median is 0.1 and its session range 0.1-0.55,
    which reaches past 0.5: inconclusive. Without session 102 (the 9 ms) the range is 0.1-0.1, below 0.5: reproduced,
    and one_left_out names that session; without 100 or 101 the range is still 0.1-0.55, not named. An older run of the
    same cells (graph 1 ms at batch 8), which the newer replaced whole, does not come back with a session left out.
    At 18, 18 and 18 ms every session left out keeps it reproduced."""
    from decodegap.claims import one_left_out, where_the_thesis_ends as claims_scope

    older = _scope_rows((1.0, 1.0, 1.0), SCOPE_OLDER_RUN)
    carried = evidence.with_scope_rows(pd.concat([older, _scope_rows((18.0, 18.0, 9.0))], ignore_index=True))
    w1 = _row(carried, "W1")
    assert w1["category"] == verdicts.INCONCLUSIVE and w1["hardware"] == "h100-sxm"
    assert one_left_out.scope_sessions(carried) == [("h100-sxm", SCOPE_RUN, n) for n in (100, 101, 102)]
    gone = one_left_out.without_scope_session(carried, "h100-sxm", SCOPE_RUN, 102)
    b8 = gone.scope["launch"].set_index("batch").loc[8]
    assert (b8.graph_ms, b8.f_lo, b8.f_hi) == (18.0, pytest.approx(0.1), pytest.approx(0.1))
    assert (_left_out_text(carried, claims_scope.where_the_thesis_ends, "W1")
            == f"without h100-sxm notebook 07 session 102 of run {SCOPE_RUN}: {verdicts.REPRODUCED}")
    held = evidence.with_scope_rows(_scope_rows((18.0, 18.0, 18.0)))
    assert _row(held, "W1")["category"] == verdicts.REPRODUCED
    text = _left_out_text(held, claims_scope.where_the_thesis_ends, "W1")
    assert text.startswith("unchanged with any one of ") and "notebook 07 session" not in text
    quant = len(one_left_out.quant_sessions(held))
    assert text.endswith(f"or any one of 3 of the 3 sessions of notebook 07's sweeps, or any one of {quant} of the "
                         f"{quant} sessions of notebook 04's quantised cells, left out (without model llama-3.1-8b, "
                         "ctx 2048 its source has nothing left to judge)")

def test_r5m_states_the_cheapest_configurations_confirmation(evidence):
    """R5m's cheapest measured configuration is a best of many: with notebook 06's confirmation of it, the line gives
    the confirmed time and its $/Mtok (here a hand-made confirmation at 0.9 of the sweep's time: $/Mtok 0.9 of the
    sweep's at the same price), a partial one says so, and without one it says not confirmed. The verdict reads the
    graphed step and does not move."""
    from decodegap.analysis import cost
    from decodegap.claims import cost as cost_claims

    cell = dict(source="measured", gpu="h100-sxm", model=evidence.headline_model, ctx=evidence.headline_ctx,
                attn="sdpa", sessions=1)  # the shipped evidence prices the paper's rows only: two measured rows here
    measured = cost.cost_table(pd.DataFrame([dict(cell, arm="graph", quant="bf16", step_ms=9.0),
                                             dict(cell, arm="lean_x", quant="int4-triton", step_ms=2.5)]),
                               evidence.prices, evidence.specs)
    c = pd.concat([evidence.costs, measured], ignore_index=True)
    evidence = dataclasses.replace(evidence, costs=c)
    best = measured.iloc[1]
    l4 = c[(c["gpu"] == "l4") & (c["quant"] == "gptq-exllamav2")].iloc[0]
    made = pd.DataFrame([dict(gpu="h100-sxm", model=best["model"], ctx=best["ctx"], kind="int4", arm=best["arm"],
                              quant=best["quant"], confirmed_ms=0.9 * best["step_ms"], confirmed_min_ms=0.0,
                              confirmed_max_ms=0.0, sessions=3)])

    def h100(confirmations):
        rows = cost_claims.cost_claim_measured(dataclasses.replace(evidence, confirmations=confirmations))
        return next(r for r in rows if "vs h100-sxm" in r["hardware"])

    usd = 0.9 * best["usd_per_mtok"]
    said = h100(made)
    assert (f"confirmed at {0.9 * best['step_ms']:.2f} ms in 3 fresh sessions: ${usd:.2f}/Mtok "
            f"({usd / l4['usd_per_mtok']:.2f}x the L4's).") in said["evidence"]
    assert "partly confirmed (3 asked) at" in h100(made.assign(sessions=2))["evidence"]
    unconfirmed = h100(made.iloc[:0])
    assert unconfirmed["evidence"].endswith("the cheapest of many, from one sweep, not confirmed in fresh sessions.")
    assert said["category"] == unconfirmed["category"] and said["ours"] == unconfirmed["ours"]


def test_r5m_makes_one_row_per_gpu_in_gpu_order(evidence):
    """R5m makes a row per measured fast GPU; one_left_out pairs rows by (id, occurrence), so their order must not
    follow the cost table's: the same costs reversed give the same rows in the same order, by GPU name."""
    from decodegap.analysis import cost
    from decodegap.claims import cost as cost_claims

    cell = dict(source="measured", model=evidence.headline_model, ctx=evidence.headline_ctx, attn="sdpa", sessions=1,
                arm="graph", quant="bf16")  # the shipped evidence prices the paper's rows only: measured rows here
    measured = cost.cost_table(pd.DataFrame([dict(cell, gpu="h200", step_ms=8.0), dict(cell, gpu="h100-sxm", step_ms=9.0)]),
                               evidence.prices, evidence.specs)
    evidence = dataclasses.replace(evidence, costs=pd.concat([evidence.costs, measured], ignore_index=True))
    rows = cost_claims.cost_claim_measured(evidence)
    backwards = cost_claims.cost_claim_measured(
        dataclasses.replace(evidence, costs=evidence.costs.iloc[::-1].reset_index(drop=True)))
    gpus = [r["hardware"].split(" vs ")[1].split()[0] for r in rows]
    assert gpus == ["h100-sxm", "h200"]
    assert [r["hardware"] for r in backwards] == [r["hardware"] for r in rows]
    assert [r["ours"] for r in backwards] == [r["ours"] for r in rows]


def _h100_session(evidence, quant: str, session: int) -> str:
    """The run of the shipped H100 session `session` of path `quant`'s eager cell at the headline context."""
    r = evidence.quant_rows
    hit = r[(r["gpu"] == "h100-sxm") & (r["quant"] == quant) & (r["session"] == session) & (r["arm"] == "eager")
            & (r["ctx"] == evidence.headline_ctx) & (r["status"] == "ok")]
    return str(hit["run_id"].iloc[0])


def test_a_quantised_session_left_out_remakes_that_paths_cells_alone(evidence):
    """without_quant_session: the shipped H100 gptq-exllamav2 session 2 left out, that path's H100 cells it timed
    (Llama-3.1-8B's) keep 2 of their 3 sessions and every other cell is as it was; asked again, the same frames come back (cached). Only
    the rows of the sections that read notebook 04's cells change with it: every other rule's row is the same."""
    from decodegap.claims import one_left_out

    run = _h100_session(evidence, "gptq-exllamav2", 2)
    assert ("h100-sxm", run, 2) in one_left_out.quant_sessions(evidence)
    gone = one_left_out.without_quant_session(evidence, "h100-sxm", run, 2)
    key = ["gpu", "model", "ctx", "arm", "attn", "quant"]
    before, after = (e.quant_cells.set_index(key) for e in (evidence, gone))
    path = (before.index.get_level_values("gpu") == "h100-sxm") & \
        (before.index.get_level_values("quant") == "gptq-exllamav2") & \
        (before.index.get_level_values("model") == "llama-3.1-8b")  # the model of that run (the others: 1 session)
    assert set(before.loc[path, "sessions"]) == {3} and set(after.loc[path, "sessions"]) == {2}
    pd.testing.assert_frame_equal(before.loc[~path], after.loc[~path])
    again = one_left_out.without_quant_session(evidence, "h100-sxm", run, 2)
    assert again.quant_cells is gone.quant_cells
    reads = one_left_out.SectionReads(evidence, claims.SECTIONS)
    quant_ids = {r["id"] for section, names, rows in reads.made if {"quant_cells", "quant_rows"} & set(names)
                 for r in rows}
    moved = {a["id"] for a, b in zip(claims._rows(gone), claims._rows(evidence)) if a != b}
    assert moved and moved <= quant_ids and "R1b" not in quant_ids  # notebook 01's headline rule reads no quant cell


def test_section_reads_remake_only_what_a_variant_changed_and_give_every_rows_rows(evidence):
    """one_left_out.SectionReads records the Evidence fields each section of the claims table reads (through its
    methods too: Evidence.cell reads `cells`) and, for evidence with some fields replaced, makes again only the
    sections that read one: the rows equal the whole table's made again, for one variant of each kind left out."""
    from decodegap.claims import one_left_out

    reads = one_left_out.SectionReads(evidence, claims.SECTIONS)
    assert reads.base() == claims._rows(evidence)
    read = {section.__name__: set(names) for section, names, _ in reads.made}
    assert "cells" in read["inverted_ladder"] and "scope" not in read["inverted_ladder"]
    assert read["cost_claim"] == {"costs", "prices", "published"}
    variants = [one_left_out.without(evidence, *one_left_out.left_out(evidence)[0])]
    for listed, leave in ((one_left_out.headline_ab_sessions, one_left_out.without_ab_session),
                          (one_left_out.scope_sessions, one_left_out.without_scope_session),
                          (one_left_out.quant_sessions, one_left_out.without_quant_session)):
        variants.append(leave(evidence, *listed(evidence)[0]))
    for e in variants:
        assert reads.rows(e) == claims._rows(e)
    calls = []
    counted = one_left_out.SectionReads(evidence, [lambda ev: calls.append(ev.costs) or [{"id": "x"}]])
    assert len(calls) == 1 and counted.rows(dataclasses.replace(evidence, attention=evidence.attention.copy())) == [{"id": "x"}]
    assert len(calls) == 1  # `attention` replaced: not read, not made again
    counted.rows(dataclasses.replace(evidence, costs=evidence.costs.copy()))
    assert len(calls) == 2  # `costs` replaced: made again


def test_one_left_out_names_a_verdict_carried_by_one_quantised_session(evidence):
    """T3a on the shipped H100 cells holds (the graphs' speed-up interval above the best int4 path's, both eager at
    the headline context). With the best int4 path's eager session 2 there (the path T3a names for the H100) at a tenth
    of its time, that cell's session range reaches past the graphs' interval (b_max / best_min), neither side is met
    beyond noise: inconclusive; leaving that one session out restores it, and one_left_out names the session."""
    import re

    from decodegap.claims import thesis as claims_thesis

    t3a = _row(evidence, "T3a")
    assert t3a["category"] == verdicts.REPRODUCED
    best = re.search(r"h100-sxm [^:]*: graphs [^,]*, best int4 \(([^,]+), eager\)", t3a["ours"]).group(1)
    run = _h100_session(evidence, best, 2)
    r = evidence.quant_rows
    at = ((r["gpu"] == "h100-sxm") & (r["run_id"] == run) & (r["session"] == 2) & (r["arm"] == "eager")
          & (r["ctx"] == evidence.headline_ctx) & (r["status"] == "ok"))
    carried = evidence.with_quant_rows(r.assign(step_ms=r["step_ms"].where(~at, r["step_ms"] * 0.1)))
    assert _row(carried, "T3a")["category"] == INCONCLUSIVE
    text = _left_out_text(carried, claims_thesis.thesis, "T3a")
    assert f"without h100-sxm quantised session 2 of run {run}: {verdicts.REPRODUCED}" in text


def test_claims_markdown_keeps_a_commit_that_reads_as_a_number():
    """A short commit of digits and one 'e' (00978e9) is text, not 9.78e+11."""
    import pandas as pd

    from decodegap.claims import table

    md = table._md(pd.DataFrame(dict(date=["2026-12-06T19:49"], commit=["00978e9"])))
    assert "| 00978e9  |" in md and "e+" not in md
