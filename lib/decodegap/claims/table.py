"""The claims table: every claim of the paper (data/published/paper.csv), and the few its summaries add, as a row with
its published value, our value, the hardware behind ours, a label and the evidence, generated from the data (never
typed by hand).

claims.evidence.collect reads the tables of notebooks 01-05 and 07 through their experiments, `build` makes the rows, one
module per section of the paper: thesis (T), method (M, S), roofline (R1, N1), cuda_graphs_ab (R2),
attention_backends (R3), quantisation (R4, QT), quant_across_gpus (R4o), cost (R5). Each row's rule is data
(claims.rules: statistic, rows, thresholds, noise on both sides, aggregate, sources, history); the label comes from
the rule applied to each source the rule names (claims.verdicts). `write` writes figures/claims.csv and figures/claims.md: the vocabulary, the
counts, the findings, the method checks apart, and every rule with its history, flagged where it was fixed after the
rows it reads (claims.provenance); `claim_counts` reads the counts back from claims.csv in the README's words.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from decodegap import paths
from decodegap.claims import (attention_backends as claims_attention, cost as claims_cost,
                              cuda_graphs_ab as claims_graphs, method as claims_method, provenance,
                              one_left_out, quant_across_gpus as claims_quant_gpus, quantisation as claims_quant,
                              remeasure, roofline as claims_roofline, rules,
                              thesis as claims_thesis,
                              where_the_thesis_ends as claims_scope)
from decodegap.claims.evidence import Evidence
from decodegap.claims.verdicts import CATEGORIES, COLUMNS, METHOD_CATEGORIES, SECTION_FINDING, SECTION_METHOD, counts


SECTIONS = (claims_thesis.thesis, claims_method.method, claims_roofline.inverted_ladder, claims_graphs.cuda_graphs,
            claims_attention.attention_backends, claims_quant.quantisation,
            claims_quant_gpus.quant_across_gpus_claim, claims_cost.cost_claim,
            claims_cost.cost_claim_measured, claims_scope.where_the_thesis_ends, claims_method.scope)
"""The rows' makers, in the table's order: each makes the rows (COLUMNS) of its rules from the evidence."""


def _rows(ev: Evidence) -> list[dict]:
    """Every section's rows of `ev`, in SECTIONS' order."""
    return [row for section in SECTIONS for row in section(ev)]


def build(ev: Evidence) -> pd.DataFrame:
    """One row per rule of the registry (COLUMNS), in the registry's order: id, section (finding or method check),
    claim (paper.csv's claim id, or thesis / scope), statement, published, ours, hardware, verdict (the label),
    category (what the counts count), also (the other sources' labels), evidence, rule (its text), fixed (date and
    commit of its newest fixing), fixed_after_rows (claims.provenance), one_left_out (what leaving one model's, one
    context's, or one session's measured rows out does to the label: claims.one_left_out), and how to re-measure it
    (claims.remeasure): notebook, remeasure (the command), gpu_time (what its runs took here)."""
    reads = one_left_out.SectionReads(ev, SECTIONS)  # the rows, and what each section read: its variants' remakes
    rows = reads.base()
    table = pd.DataFrame(rows, columns=COLUMNS)
    table["one_left_out"] = one_left_out.column(ev, _rows, rows, reads)
    missing = [r.id for r in rules.RULES if r.id not in set(table["id"])]
    extra = sorted(set(table["id"]) - set(rules.BY_ID))
    assert not missing and not extra, f"rows without a rule {extra}, rules without a row {missing}"
    runs = provenance.Runs(ev.data)
    after = {r.id: provenance.fixed_after_rows(r, runs) for r in rules.RULES}
    table["fixed_after_rows"] = table["id"].map(after).fillna("")
    table = table.merge(remeasure.columns(runs), on="id", how="left")  # notebook, remeasure, gpu_time
    order = {r.id: i for i, r in enumerate(rules.RULES)}
    return table.sort_values("id", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


VOCABULARY = """\
**How to read a label.** Every row's rule is data (`decodegap.claims.rules`): the statistic, the rows it reads, the
thresholds, how noise counts on both sides, the aggregate over cells and the sources it may read. The rule is applied
to each source in turn; the first that can decide labels the row, the others are shown beside it (`also`).

- **reproduced on the paper's GPU class** / **contradicted on the paper's GPU class**: our rows, on the GPU the claim
  names (the H100, the L4, ...), hold or fail the rule beyond noise.
- **tested on another GPU (h200 for an h100-sxm claim): holds** / **... fails**: our rows on a GPU the claim does not
  name; they test the claim's mechanism, not the paper's number.
- **supported by the paper's own numbers** / **contradicted by the paper's own numbers**: arithmetic on the published
  values (and on the shapes of the paper's models) holds or fails the rule; the same strength either way.
- **inconclusive: within noise**: the source's data lie within the rule's noise band: neither side is met.
- **not testable here**: no source can decide (no rows of the GPU the claim names, no published number that bears on
  it, or not a measurable statement); each row says what is missing.
- **method check: met / not met / ...**: a check of the method or of this package's own statements; listed apart,
  never counted among the findings.

A rule fixed after rows it reads is flagged ("fixed after its rows"): its threshold could have been chosen knowing
them. Every rule's earlier versions, with the verdict each gave, are at the end.

**Is a verdict carried by one thing?** `one_left_out` applies each finding's rule again with the measured rows of one
model, of one context, of one session of a headline cell (the headline model at the headline context, per GPU: the
cell R1a and R1b read), or of one A/B session behind a GPU's headline speed-up (the headline model at the headline
context, the sessions of the A/B's headline sweep: what R2a reads), or of one session of the A/B grid sweep (every model
and context it timed: T1's sessions, T3a's speed-ups, the decomposition R2b reads, T4's long context), or of one
session of notebook 07's batch and size sweeps (every cell it timed: W1's launch shares, W2a's fits, W2b's lambda),
or of one session of a quantised path of notebook 04 (every cell of that path it timed: T3a's best int4 path, R4l,
R4n, QT, M8) left out, and names every label that changes ("without model X: ...", "without GPU session N of run R:
...", "without GPU A/B session N of run R: ...", "without GPU A/B grid session N of run R: ...", "without GPU notebook
07 session N of run R: ...", "without GPU quantised session N of run R: ..."); a label that only turns "not testable
here" (nothing left to judge) is not named. Without a session, the headline cell's median step and session range,
the headline speed-up and its interval (with 9 sessions of 10 left, the range of the 9, not a bootstrap CI), the
grid's cells that session timed and their decomposition, notebook 07's cells and its step model (fitted again), or
notebook 04's cells of that path, are made again from the other sessions. Sessions of notebook 01's other cells and
notebook 04's bf16 sessions are not left out; the published numbers stay whole, and fits computed across models
before the rules read them (notebook 07's) are not fitted again without a model or a context.
"""


def _count_line(n: dict, cats, of: str) -> str:
    return ", ".join(f"{v}: {n[v]}" for v in cats) + f" (of {of})"


def preamble(table: pd.DataFrame) -> str:
    """The Markdown heading of figures/claims.md: what the table is, the vocabulary, the counts and the rules fixed
    after their rows."""
    n = counts(table)
    findings = int((table["section"] == SECTION_FINDING).sum())
    methods = int((table["section"] == SECTION_METHOD).sum())
    flagged = list(dict.fromkeys(table.loc[table["fixed_after_rows"] != "", "id"]))  # a rule, not its rows per GPU
    return ("# Every claim of the paper, checked against the data\n\n"
            "Generated by `notebooks/05_cost.ipynb` from `data/` (`decodegap.claims.table`); never edited by hand.\n\n"
            "**Re-measuring one row.** Its `notebook` measured the rows it reads; `remeasure` is the one command that "
            "measures them again on your GPU (`--gpu <gpu>`: your key, `python -m decodegap gpus`), with the models, "
            "contexts and arms of the runs it read; `gpu_time` is what those runs took here, on the GPUs that measured "
            "them (from each run's start to the last time its `env.json` entry records). Then `make reproduce` labels "
            "the row from your rows.\n\n"
            + VOCABULARY + "\n"
            + "**Findings:** " + _count_line(n, CATEGORIES, f"{findings} findings") + ".\n\n"
            + "**Method checks (not counted among the findings):** "
            + _count_line(n, METHOD_CATEGORIES, f"{methods} method checks") + ".\n\n"
            + f"**Rules fixed after the rows they read:** {len(flagged)} of {table['id'].nunique()} rules: "
            + ", ".join(flagged) + ".\n\n")


FINDING_COLUMNS = ["id", "claim", "statement", "published", "ours", "hardware", "verdict", "also", "evidence",
                   "one_left_out", "notebook", "remeasure", "gpu_time"]
"""claims.md's columns; the last three say how to re-measure the row (claims.remeasure): the notebook, the one command
(on your GPU: `--gpu <gpu>`) and the GPU time its runs took here."""


def _md(frame: pd.DataFrame) -> str:
    """`frame` as a markdown table, every cell as the text it holds (a commit such as 00978e9 is no number)."""
    return frame.to_markdown(index=False, disable_numparse=True) + "\n"


def history_markdown(table: pd.DataFrame) -> str:
    """Every rule: its text, its newest fixing, the flag, and its earlier versions with the verdict each gave."""
    out = ["## The rules and their history\n"]
    flags = dict(zip(table["id"], table["fixed_after_rows"]))
    verdicts = {i: v + ("" if a in ("", "-") else f"; also: {a}")
                for i, v, a in zip(table["id"], table["verdict"], table["also"].fillna(""))}
    for r in rules.RULES:
        out.append(f"### {r.id}: {r.claim}\n")
        out.append(r.text() + "\n")
        out.append("Rows: " + "; ".join(f"`{x.file}` ({x.selector})" for x in r.rows) + "." if r.rows else "Rows: none.")
        out.append("")
        out.append(f"Fixed {r.fixed.date} ({r.fixed.commit}). Verdict now: {verdicts.get(r.id, '-')}."
                   + (f" **Fixed after its rows:** {flags[r.id]}." if flags.get(r.id) else ""))
        out.append("")
        hist = pd.DataFrame([dict(date=c.date, commit=c.commit, reason=c.reason, rule=c.rule,
                                  verdict=c.verdict or "(now: above)") for c in r.history])
        out.append(_md(hist))
    return "\n".join(out)


def write(table: pd.DataFrame, figures) -> tuple[Path, Path]:
    """figures/claims.csv (every column, every row) and figures/claims.md (preamble, findings, method checks, the
    rules and their history)."""
    figures = Path(figures)
    figures.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = figures / "claims.csv", figures / "claims.md"
    table.to_csv(csv_path, index=False)
    find = table[table["section"] == SECTION_FINDING]
    meth = table[table["section"] == SECTION_METHOD]
    md_path.write_text(preamble(table) + "## Findings\n\n" + _md(find[FINDING_COLUMNS])
                       + "\n## Method checks (not counted among the findings)\n\n" + _md(meth[FINDING_COLUMNS])
                       + "\n" + history_markdown(table))
    return csv_path, md_path


def claim_counts(figures: Path | None = None) -> str:
    """The label counts of figures/claims.csv in the README's words (figures.gallery.readme_text puts them there): the
    findings per category (CATEGORIES), then the method checks apart, e.g. "0 reproduced on the paper's GPU class,
    ..., 14 not testable here, of 35 findings, and 12 method checks apart: 8 met, ...". No semicolon (the README's
    counts line ends at one)."""
    table = pd.read_csv(Path(figures or paths.FIGURES) / "claims.csv")
    n = table["category"].value_counts()
    find = (table["section"] == SECTION_FINDING).sum()
    methods = ", ".join(f"{int(n.get(v, 0))} {v.removeprefix('method check: ')}" for v in METHOD_CATEGORIES)
    return (", ".join(f"{int(n.get(v, 0))} {v}" for v in CATEGORIES) + f", of {int(find)} findings, and "
            f"{len(table) - int(find)} method checks apart: {methods}")
