"""The rules registry: one entry per row of figures/claims.md, as data, fixed before the verdict is computed.

Each `Rule` states the statistic, the rows it reads (file + selector), the thresholds (`threshold`, read by the
verdict code: no threshold is a literal in the claims modules), how noise is treated on both sides (`holds_if`,
`fails_if`, else `otherwise`, "inconclusive: within noise"), the aggregate over cells, the sources that may label
it (in order: our rows on the claim's GPU class, the paper's own numbers, our rows on another GPU; or a method
check) and its history: every earlier rule, when and why it changed and the verdict it gave. The newest history
item carries the fingerprint of the rule's fields (`fingerprint`); tests/test_rules.py fails when a rule's content
changes without a new history item, so a rule can only change visibly.

A rule is "fixed after its rows" when its newest history item is dated after a run it reads (run ids are UTC
timestamps; `decodegap.claims.provenance`); figures/claims.md flags each such rule.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from decodegap import sessions

# ----------------------------------------------------------------------------------------------- vocabulary
CLAIM_GPU, PAPER, OTHER_GPU, METHOD = "claim_gpu", "paper", "other_gpu", "method"
SOURCES = {
    CLAIM_GPU: "our rows on the GPU class the claim names",
    PAPER: "arithmetic on the paper's own published numbers",
    OTHER_GPU: "our rows on another GPU than the one the claim names (the H200 for an H100 or L4 claim)",
    METHOD: "a check of the method or of this package's own statement; its own section, not counted among findings",
}
INCONCLUSIVE = "inconclusive: within noise"
THIS_COMMIT = "this commit"


@dataclass(frozen=True)
class Rows:
    """Rows a rule reads: a file under data/ (raw files are data/raw/<gpu>/<file>) and a selector in words plus,
    for raw files, a pandas query over its columns and which runs of a cell count (`pick`: "all", "newest run per
    cell", "one sweep per cell", "grid sweep", "headline sweep")."""

    file: str
    selector: str
    query: str = ""
    pick: str = "all"


@dataclass(frozen=True)
class Change:
    """One fixing of a rule: when (UTC, minute), at which commit, why, the rule text in force from then and the
    verdict it gave (empty for the current rule: computed in the table). The newest item's `fingerprint` is that of
    the rule's fields."""

    date: str
    commit: str
    reason: str
    rule: str
    verdict: str = ""
    fingerprint: str = ""
    changed: bool = True
    """False for an item that only records the rule (moved into the registry, its content unchanged): it does not
    count as a fixing of the rule."""


@dataclass(frozen=True)
class Rule:
    id: str
    claim: str
    statistic: str
    rows: tuple[Rows, ...]
    threshold: tuple[tuple[str, object], ...]
    noise: str
    holds_if: str
    fails_if: str
    aggregate: str
    sources: tuple[str, ...]
    history: tuple[Change, ...]
    otherwise: str = INCONCLUSIVE

    def t(self, name: str):
        """The threshold `name` of this rule."""
        for k, v in self.threshold:
            if k == name:
                return _resolve(v)
        raise KeyError(f"{self.id} has no threshold {name!r}")

    @property
    def fixed(self) -> Change:
        """The newest history item that changed the rule's content (a registration alone does not)."""
        return [c for c in self.history if c.changed][-1]

    def fields(self) -> dict:
        """The rule's content (everything but its history), thresholds resolved: what the fingerprint covers."""
        d = asdict(self)
        d.pop("history")
        d["threshold"] = [[k, _resolve(v)] for k, v in self.threshold]
        return d

    def text(self) -> str:
        """The rule in one paragraph, as figures/claims.md prints it."""
        th = ", ".join(f"{k} = {_fmt(_resolve(v))}" for k, v in self.threshold)
        return (f"Statistic: {self.statistic} Thresholds: {th or 'none'}. Noise: {self.noise} Holds if {self.holds_if} "
                f"Fails if {self.fails_if} Else: {self.otherwise}. Aggregate: {self.aggregate}")


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class Ref:
    """A threshold that lives in another module (its owner derives it): `module`:`name`, with `default` where the
    name is not defined there (yet)."""

    module: str
    name: str
    default: object = None
    fallback: str = ""


def _resolve(v):
    if isinstance(v, Ref):
        import importlib

        mod = importlib.import_module(v.module)
        if hasattr(mod, v.name):
            return getattr(mod, v.name)
        if v.fallback and hasattr(mod, v.fallback):
            return getattr(mod, v.fallback)
        return v.default
    return v


def fingerprint(rule: Rule) -> str:
    """sha256 (first 16 hex digits) of the rule's fields (Rule.fields), sorted JSON."""
    return hashlib.sha256(json.dumps(rule.fields(), sort_keys=True, default=str).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------- shared rows
PUB = "data/published/paper.csv"
SPECS = "data/specs/gpus.csv"
PRICES = "data/specs/prices.csv"
BYTE_MODEL = "data/models (configs) through decodegap.accounting / decodegap.quant.bytes"
CELLS = Rows("decode.csv", "notebook 01's cells: bf16, SDPA, the HF arms, each cell's sessions from one sweep "
             "(roofline.default_rows)", "quant == 'bf16' and attn == 'sdpa' and arm in ['eager', 'hf_default', "
             "'graph', 'compile'] and status == 'ok'", "one sweep per cell")
AB = Rows("ab.csv", "the CUDA-graphs A/B rows: bf16, SDPA, every arm, each sweep apart (ab.ab_rows)",
          "status == 'ok'", "all")
AB_HEAD = Rows("ab.csv", "the headline sweep of the A/B at ctx 2048 (ab.headline: one sweep, never pooled)",
               "status == 'ok' and ctx == 2048 and arm in ['eager', 'graph']", "headline sweep")
AB_GRID = Rows("ab.csv", "the grid sweep of the A/B, every model and context (ab.decomposition)",
               "status == 'ok' and arm in ['eager', 'graph']", "grid sweep")
ATT = Rows("attention.csv", "per-call attention timings, host-inclusive and GPU-only rounds, each cell's newest run "
           "(attention_backends.summary)", "status == 'ok'", "newest run per cell")
QUANT = Rows("decode.csv", "notebook 04's quantised decode cells (quant_report.rows), with their model check",
             "quant != 'bf16' and status == 'ok'", "one sweep per cell")
QUANT_BF16 = Rows("decode.csv", "the bf16 cells of notebook 04's arms, the base of each realised share",
                  "quant == 'bf16' and attn == 'sdpa' and status == 'ok'", "one sweep per cell")
VERIFY_QUANT = Rows("verify.csv", "the whole-model checks of quantised paths against their bf16 model",
                    "check == 'vs_bf16' and layer == 'model'", "all")
VERIFY = Rows("verify.csv", "each arm's logits check against eager in its own run (check vs_eager)",
              "check == 'vs_eager'", "all")
VERIFY_IN_RUN = Rows("verify.csv", "the checks of each quantised cell's own run (checked.quantised_checks): format "
                     "and layer checks, the null and the whole-model check",
                     "check in ['format', 'layer', 'vs_bf16_null', 'vs_bf16'] and quant != 'bf16'", "all")
CHECKED_CELL = ("a timed quantised cell counts only when its own run has passing format and layer checks at one row "
                "and at the cell's prefill rows (ctx) and a whole-model check (vs_bf16) with k = error / the null of "
                "the same run (vs_bf16_null) within k_pass (checked.quantised_checks, the one definition every reader "
                "uses); a cell checked only under an earlier rule, or not at all, is drawn unchecked, never counted")
NEW_TOL_REASON = ("the rule was about the old tolerance: it judged the latest model check of each (model, ctx, path), "
                  "whichever run wrote it, and read the runs without a null against tol / the factor of their day, "
                  "apart from the layer checks; now every timed cell by the checks of its own run, layer checks "
                  "joined, the one definition every reader uses (checked.quantised_checks)")


GRID_CELLS = Rows("decode.csv", "notebook 04's grid: every path's cells on its grid arm (lean_attn_graph), each with "
                  "the checks of its own run (quant_profile.grid)", "arm == 'lean_attn_graph' and attn == 'sdpa' and "
                  "status == 'ok'", "one sweep per cell")


# notebook 07's sweeps number their sessions in a band of their own (decodegap.sessions.SCOPE), apart from every other
# sweep's sessions of the same cells: the rows of its batch and size axes, and no others
SCOPE_CELLS = Rows("decode.csv", "notebook 07's cells: the rows of its batch and size sweeps (sessions numbered "
                   f"{sessions.SCOPE.start}-{sessions.SCOPE.stop - 1}), bf16, every model, batch and arm, each cell "
                   "(with its batch) from its newest measurement (the newest run of its first session and the runs "
                   "that resumed it: selection.newest_measurement), checked against eager in its own run "
                   "(checked.join_checks)",
                   f"quant == 'bf16' and status == 'ok' and session >= {sessions.SCOPE.start} and session < "
                   f"{sessions.SCOPE.stop}", "newest measurement per cell")
SCOPE_VERIFY = Rows("verify.csv", "each of those cells' logits checks against eager in its own run (check vs_eager)",
                    f"check == 'vs_eager' and session >= {sessions.SCOPE.start} and session < {sessions.SCOPE.stop}",
                    "newest measurement per cell")
SCOPE_VERIFY_ALL = "as now, the checks' selector naming every vs_eager check in the band"
SCOPE_VERIFY_PICK = ("the checks' selector names the runs the rule reads, each cell's newest measurement as the cells' "
                     "selector (was: every vs_eager check in the band, which named the runs a sweep measured again "
                     "as read); the checks a cell is joined to were always those of its own run, so what the rule "
                     "decides is unchanged")
SCOPE_ROWS = ("the rows: notebook 07's own sweeps (sessions from 100) of every model, where the first version read "
              "the Qwen2.5 family's newest runs (the batch axis is measured on llama-3.1-8b, and the grid sweeps' "
              "batch-1 rows of qwen2.5-7b are no rows of this experiment); changed before any batch or size row "
              "exists, the statistic and thresholds unchanged")
SCOPE_FIRST = "the Qwen2.5 family's cells, each from its newest run"
SCOPE_BAND = ("the rows: notebook 07's band of session numbers, 100-199 (decodegap.sessions), where the selector read "
              "every session from 100: notebook 06's confirmation sweeps, numbered from 200, fell inside it once the "
              "megakernel cell's confirmation was measured (run 20261204T135805, llama-3.2-1b at ctx 32), and W2a's "
              "lean_fused_early_products_graph fit took that cell (a 0.96 -> 0.92, 7 -> 8 cells); the rule's words, "
              "'the rows of its batch and size sweeps', are what the selector now reads; changed after those rows "
              "were seen, the statistic and thresholds unchanged, and the verdict the same under both")
SCOPE_RESUMED = ("the rows: each cell's newest measurement, the newest run of its first session with the runs that "
                 "resumed it after a cut (selection.newest_measurement), where the selector read each cell's newest "
                 "run alone: a sweep cut by its call's time limit and started again measures only the sessions it "
                 "lacks, in a new run, so the newest run held one or two of a cell's three sessions and the noise "
                 "band of W1 and W2a shrank to them; changed before the rows it reads (the batch and size axes at "
                 "three sessions) were measured, on the shipped rows the same cells and verdicts")
SCOPE_NEWEST_RUN = "as now, each cell from its newest run alone"
SCOPE_FROM_100 = "as now, the rows every session from 100 (notebook 06's confirmations, from 200, among them)"
SCOPE_FIXED = ("introduced, fixed before any batch > 1 or model-size row exists (the batch-1 rows of the paper's "
               "three 7-8B models existed and had been read by notebooks 01, 02 and 06; no row of batch > 1 and no "
               "Qwen2.5 size but 7B had been measured)")


def P(selector: str) -> Rows:
    return Rows(PUB, selector)


# the dates of fixings recorded from git (UTC): the common start of the table's rules
START = Change("2026-11-29T12:16", "4c9f4e6", "the claims table introduced", "as now (its verdict words: "
               "reproduced / consistent (arithmetic) / proxy / contradicted / not testable here)",
               "see git log -p figures/claims.md")
REGISTERED, REGISTERED_AT = "2026-12-02T14:49", "06f601e"  # the commit that made the rules data
REG_REASON = ("registered as data (rules registry); the rule's content as coded before, thresholds unchanged")


def _reg(reason: str = REG_REASON, fp: str = "", changed: bool | None = None, verdict: str = "") -> Change:
    """The registry's first item of a rule (06f601e): the rule as its fields state it, the fingerprint of those
    fields; a change of the rule's content unless the reason is REG_REASON (or `changed` says otherwise)."""
    return Change(REGISTERED, REGISTERED_AT, reason, "as stated in the fields", verdict, fingerprint=fp,
                  changed=reason != REG_REASON if changed is None else changed)


NOTEST = ("the claim names a GPU with no rows here, or is not a measurable statement; testable by the same rule "
          "once such rows exist")
ABOUT = (("rel_tol", 0.15),)



GRID_PICK = ("the rows' selector names the grid sweep, what the code reads (was: one sweep per cell, which also "
             "takes the headline sweep's cells); the rule is unchanged")


def _note(date: str, reason: str, fp: str) -> Change:
    """A later item that corrects how the registry describes a rule without changing what it decides (its
    fingerprint changes; it does not count as a fixing)."""
    return Change(date, THIS_COMMIT, reason, "as stated in the fields", fingerprint=fp, changed=False)


def _r3(rule_id: str, backend: str, fp: str) -> Rule:
    return Rule(rule_id, f"H100 per-layer us: {backend}.", "host-inclusive us per call (llama-3.1-8b shape, ctx 2048) "
                "on the H100.", (ATT, P(f"attention_backends us_per_layer {backend}")), ABOUT,
                "the rounds' host spread.", "within rel_tol.", "outside rel_tol.", "one cell.", (CLAIM_GPU,),
                (START, _reg(fp=fp)))


def _r4(rule_id: str, quant: str, fp: str) -> Rule:
    return Rule(rule_id, f"L4 ms per step: {quant}.", "our L4 eager step (qwen2.5-7b, ctx 2048) of the path.",
                (QUANT, QUANT_BF16, P(f"quantisation step_ms l4 {quant}")), ABOUT, "the cell's session range.",
                "within rel_tol.", "outside rel_tol.", "one cell.", (CLAIM_GPU,), (START, _reg(fp=fp)))


# ------------------------------------------------------------------------------------------------- rules
RULES: tuple[Rule, ...] = (
    Rule("T1", "On fast GPUs the binding term of batch-1 decode is per-kernel CPU launch overhead.",
         "per fast GPU (datasheet >= fast_gbps) at ctx 2048: L = eager - graph (launch), X = graph - floor (GPU-side "
         "excess), F = floor (W_all). Measured: per session of one sweep, every model. Published (H100): L = "
         "eager x (1 - 1/s) over the published speed-up CI s; X = graph - floor with the floor from W_all and from "
         "the published R_floor (the byte convention as noise).",
         (AB_GRID, P("quantisation step_ms h100-sxm eager/graph; cuda_graphs speedup h100-sxm (CI); "
                     "inverted_ladder r_floor h100-sxm"), Rows(SPECS, "datasheet bandwidth")),
         (("fast_gbps", 3350.0),),
         "measured: the spread over sessions and models; published: the speed-up CI and the floor under two byte "
         "conventions (W_all; published R_floor x eager).",
         "min L > max(max F, max X) (launch the largest term beyond noise).",
         "max L < max(min F, min X) (another term larger beyond noise).",
         "per GPU; the claim holds when it holds on every fast GPU of the source and fails when it fails on one.",
         (CLAIM_GPU, PAPER, OTHER_GPU),
         (Change("2026-11-29T12:16", "4c9f4e6", "introduced",
                 "on every measured GPU >= 3350 GB/s, launch (eager - graph) is the largest of floor / graph - floor "
                 "/ launch at ctx 2048 (median over models; decode.csv rows of 11-29 10:06)", "reproduced"),
          Change("2026-11-29T14:03", "fbcae93", "input switched to the A/B sweep (ab.csv)",
                 "the same, on the A/B grid sweep", "reproduced"),
          Change("2026-12-01T09:07", "1d537ef", "published fast GPUs added (the H100's 14.83 / 11.78 ms), 41 h "
                 "after the A/B rows it reads",
                 "launch the largest term (medians) on every GPU >= 3350 GB/s, measured or published", "contradicted"),
          _reg("made symmetric: noise on both sides, an inconclusive band; the H200 is "
                 "another GPU than the paper's fast GPU (its host is slower: eager 1.38x the H100's), so it labels "
                 "apart from the paper's H100 numbers", fp="38e2490ff80035eb",
               verdict="contradicted by the paper's own numbers; tested on another GPU (h200): holds"),
          _note("2026-12-02T15:16", GRID_PICK, fp="9ac0858bcb834a14"))),
    Rule("T2", "On slow GPUs (L4) the binding term is memory bandwidth.",
         "eager R_floor (W_all) of the headline cell per GPU below slow_gbps; published: the L4's R_floor.",
         (CELLS, P("inverted_ladder r_floor l4"), Rows(SPECS, "datasheet bandwidth")),
         (("slow_gbps", 1000.0), ("r_floor", 0.5)),
         "measured: the session range of the cell; published: none stated.",
         "R_floor > r_floor on every slow GPU.", "R_floor <= r_floor on one.",
         "every GPU below slow_gbps.", (CLAIM_GPU, PAPER),
         (START, Change("2026-11-29T12:16", "4c9f4e6", "introduced", "eager R_floor > 0.5 on every measured GPU "
                        "below 1000 GB/s; published numbers only named", "not testable here"),
          _reg("registered; the paper's L4 R_floor now labels it (supported or contradicted the same way)", fp="4d4fd6fcb820c345"))),
    Rule("T3a", "Fast GPUs' lever is CUDA graphs (not specialised kernels): the graph speed-up exceeds the best "
         "int4 path's speed-up over bf16.",
         "per fast GPU at ctx 2048: S_g = eager / graph (bf16) and S_q = max over int4 paths of bf16 eager / path "
         "eager, per model.", (AB_GRID, QUANT, QUANT_BF16, P("cuda_graphs speedup; quantisation speedup")),
         (("fast_gbps", 3350.0),),
         "each speed-up's session range (relative, max/min - 1) of the cells it divides.",
         "S_g / S_q - 1 > noise in every model.", "S_q / S_g - 1 > noise in one model.",
         "every model of every fast GPU.", (CLAIM_GPU, PAPER, OTHER_GPU),
         (_reg("new claim (the summaries' 'different levers'), rule fixed before "
                 "computing it; the H200 rows were seen in the audit", fp="762151221b20481f",
               verdict="tested on another GPU (h200): holds"),
          _note("2026-12-02T15:16", GRID_PICK, fp="f24ee769524b9447"),)),
    Rule("T3b", "Edge GPUs' lever is specialised kernels (not CUDA graphs): the best int4 path's speed-up exceeds "
         "the graph speed-up.",
         "per slow GPU (< slow_gbps): S_q = best int4 speed-up over bf16 (eager), S_g = graph speed-up.",
         (QUANT, P("cuda_graphs speedup l4; quantisation speedup l4")), (("slow_gbps", 1000.0),),
         "measured: session ranges; published: none stated (the L4 graph speed-up has no CI).",
         "S_q > S_g (beyond noise where stated).", "S_g > S_q (beyond noise where stated).",
         "every slow GPU.", (CLAIM_GPU, PAPER),
         (_reg("new claim (the summaries' 'different levers')", fp="75b214dce7bc1a71"),)),
    Rule("T4", "Launch overhead dominates with short contexts (its share falls as the context grows).",
         "per model of each GPU: launch share f = (eager - graph) / eager at the shortest (2048) and longest (16384) "
         "context, per session of one sweep.", (AB_GRID,), (("short_ctx", 2048), ("long_ctx", 16384)),
         "the range of f over sessions at each context.",
         "max f(long) < min f(short) in every model.", "min f(long) > max f(short) in one model.",
         "every model.", (CLAIM_GPU, OTHER_GPU),
         (_reg("new claim (the summaries' 'with short contexts')", fp="0a906e2527bead58",
               verdict="tested on another GPU (h200): holds"),
          _note("2026-12-02T15:16", GRID_PICK, fp="3d9aeb6722114a27"),)),
    Rule("T5", "Batch-1 decode is memory-dominated (the abstract).",
         "eager R_floor (W_all) of the headline cell per GPU, read as: the memory floor is more than r_floor of the "
         "step (T2's threshold).", (CELLS, P("inverted_ladder r_floor")), (("r_floor", 0.5),),
         "measured: the cell's session range; published: none stated.",
         "R_floor > r_floor on every GPU of the source.", "R_floor < r_floor on one.",
         "every GPU.", (CLAIM_GPU, PAPER, OTHER_GPU),
         (_reg("new claim (the abstract's 'memory-dominated')", fp="684c3edef8ed8ae9"),)),
    Rule("M1", "GPUs: H100 SXM5, A100-80GB SXM4, L40S, L4.", "the set of GPUs with ok decode cells.", (CELLS,), (),
         "none.", "every paper GPU measured.", "never (a missing GPU leaves it not met).", "the four GPUs.",
         (METHOD,), (START, _reg(fp="ad6454abf64fdf10"))),
    Rule("M2", "Models: three 7-8B GQA transformers, bf16, SDPA.",
         "the measured models' parameter counts, KV heads, dtypes and attention.", (CELLS, Rows(BYTE_MODEL, "configs")),
         (("params_lo_b", 7), ("params_hi_b", 8)), "none (presence check).",
         "three models, all GQA, round(params) in [params_lo_b, params_hi_b], bf16 and SDPA in the default rows.",
         "any of those false.", "the measured models.", (METHOD,), (START, _reg(fp="b18857700468a829"))),
    Rule("M3", "Contexts: 2048-16384.", "each measured GPU's contexts.", (CELLS, P("method context_length")), (),
         "none.", "every GPU has exactly the paper's contexts.", "one does not.", "every measured GPU.",
         (METHOD,), (START, _reg(fp="28e6b3fb405ccee0"))),
    Rule("M4", "48 cells, 44 valid.", "the grid per GPU.", (CELLS, P("method total_cells / valid_cells")), (),
         "none.", "never here (needs the four GPUs).", "never here.", "-", (METHOD,), (START, _reg(fp="35ed73178d7dc35b"))),
    Rule("M5", "R_floor definition.", "cells with R_floor > max_r_floor.", (CELLS,), (("max_r_floor", 1.0),),
         "none.", "no cell exceeds max_r_floor.", "one does (an accounting or timing bug).", "every cell.",
         (METHOD,), (START, _reg(fp="b81b9f9e945a40e0"))),
    Rule("M6", "CUDA graphs A/B: N = 10 fresh sessions, 95 % bootstrap CI.",
         "the fewest fresh sessions per arm of the headline sweep at the headline cells (ab.headline; never two "
         "sweeps pooled).", (AB_HEAD, P("method sessions")), (("sessions", 10),),
         "none.", "N >= sessions at every headline cell of every GPU.", "N < sessions at one.",
         "every GPU with A/B rows.", (METHOD,),
         (Change("2026-11-29T12:16", "4c9f4e6", "introduced", ">= 10 sessions per arm, the grid and headline "
                 "sweeps pooled", "reproduced"),
          Change("2026-12-01T11:36", "e6c5b84", "one sweep, never pooled (4845705 11:17, e6c5b84 11:36), 43 h after "
                 "the A/B rows", "the headline sweep alone has >= 10 sessions per arm", "not testable here"),
          _reg(fp="321693b8e9fcd15b"))),
    Rule("M7", "Attention backends: SDPA, FA2, FA3, FlashInfer.",
         "the published backends with an ok timing row (ours or a named stand-in).", (ATT,), (), "none.",
         "every paper backend has an ok row (a stand-in is named in the row).", "one has none.", "the four.",
         (METHOD,),
         (START, Change("2026-12-01T09:07", "1d537ef", "'proxy' when a backend ran only through a stand-in",
                        "every paper backend has an ok row; only a stand-in -> proxy", "proxy"),
          Change("2026-12-01T13:49", "74dd08d", "new rows with the flash-attn package", "the same", "reproduced"),
          _reg("registered; a stand-in is named in the row, no separate label", fp="099a759e79a38fa6"))),
    Rule("M8", "Quantisation paths: bf16, nf4, AWQ + Marlin, GPTQ + ExLlamaV2.",
         "per paper path, its timed cells of notebook 04 (one sweep per cell), counted or drawn by QT's definition: "
         + CHECKED_CELL + "; bf16 is the reference.",
         (QUANT, VERIFY_IN_RUN), (), "the model check's band (QT).",
         "every paper path has a timed cell checked in its own run.",
         "a paper path's every timed cell fails a check of its own run under the current rule.",
         "every paper path; a path without a checked cell leaves the claim not testable (its cells unchecked "
         "under the current rule) or inconclusive (in QT's band).", (METHOD,),
         (Change("2026-11-29T12:16", "4c9f4e6", "introduced", "every paper path has a timed row (timed = passed "
                 "its check at the tolerance of the day)", "reproduced"),
          _reg("registered; the check's outcome (QT) is read, not only whether the cell was timed",
               fp="9a5dc1eb6646a3b9", verdict="method check: not testable here (no timed bnb-nf4 row whose "
               "latest model check passed under the null; layer checks not joined to the timed cells)"),
          Change("2026-12-02T18:50", "537f3b9", NEW_TOL_REASON, "every paper path has a timed cell checked in "
                 "its own run (QT's definition)", fingerprint="7a2544dcf2f7c283"))),
    Rule("QT", "The quantised model check (every timed quantisation cell counted is checked in its own run, its "
         "layers and the whole model against its bf16 model).",
         "per timed quantised cell of notebook 04 (one sweep per cell): " + CHECKED_CELL + ". k = max_rel_err / "
         "null of the model check of the cell's own run, null = the vs_bf16_null row of the same run, model, "
         "context and path: the largest of quant.power.NULL_DRAWS forced-layer errors of the bf16 model whose "
         "decoder weights carry U(-D/2, D/2) of the format's own rounding step D (quant.power). A cell of a run "
         "without in-run checks (an earlier rule: a fixed multiple of a rounding bound) is not judged (not testable "
         "here).",
         (QUANT, VERIFY_IN_RUN),
         (("k_pass", Ref("decodegap.compare", "MODEL_K_PASS")),
          ("k_fail", Ref("decodegap.compare", "MODEL_K_FAIL"))),
         "the null's own spread: k_pass = 1 + 3 sigma, sigma = 0.10 the relative spread of one null draw (two draws "
         "on two Llama-3.1-8B layers at ctx 64, the only nulls measured before this rule); k_fail = sqrt 2, a fault "
         "adding an independent error as large as the format's own rounding noise; both derived in quant/power.py "
         "from the formats' rounding alone, before the rows they judge.",
         "k <= k_pass and every format and layer check of its run passes.",
         "a format or layer check of its run fails, or k >= k_fail, or a NaN error.",
         "per cell; counted per path; a cell drawn unchecked under an earlier rule, or lacking a check of the "
         "current rule, is not judged.", (METHOD,),
         (Change("2026-12-01T08:11", "d232c46", "introduced (a logits check)", "error <= 3.0 x rounding bound",
                 "no H200 rows judged"),
          Change("2026-12-01T08:34", "261b4da", "layer-by-layer model check", "error <= 4.0 x rounding bound",
                 "failed 16 of 18 cells of the 8c1cc04 run (every awq-marlin one; tol 0.403); on the current rows "
                 "63 of 72 fail"),
          Change("2026-12-01T08:46", "b6a8077", "raised two minutes after the 8c1cc04 rows (08:43-08:44) failed, "
                 "to just above them (0.4514 failed at 0.403, passes at 0.604)", "error <= 6.0 x rounding bound",
                 "every later cell passes; closest awq-marlin mistral ctx 4096 at 98.4 % of its tolerance"),
          Change(REGISTERED, "06f601e", "registered as a two-sided rule with an inconclusive band; k_pass and "
                 "k_fail read from quant/paths.py (their derivation is that module's)",
                 "k = error / (tol / the factor of the row's time); k_pass = k_fail = MODEL_TOL_FACTOR = 6",
                 "every latest model check passes (k 3.3-5.9); no power against faults shown at the 7-8B shapes",
                 fingerprint="6893343696d43459"),
          Change("2026-12-02T15:30", "747a680", "the tolerance derived from each format's own rounding before the "
                 "rows it judges: the null (the bf16 model with its format's rounding noise, measured in the run that "
                 "checks the cell) replaces the asymmetric bound and the factor raised after the data; k_pass = 1.3, "
                 "k_fail = sqrt 2 (quant/power.py)", "k = error / null of each latest model check; k <= 1.3 holds, "
                 "k >= sqrt 2 fails, inconclusive between; a row of a run without a null not judged",
                 "method check: met (the 6 latest model checks with a null hold, k 0.86-1.12; the other 66 not "
                 "judged; layer checks not joined)", fingerprint="0e81f60f7d289008"),
          Change("2026-12-02T18:50", "537f3b9", NEW_TOL_REASON, "k = error / null of the model check of each timed "
                 "cell's own run, its format and layer checks at 1 and ctx rows passing; k <= 1.3 holds, k >= sqrt 2 "
                 "fails", fingerprint="9c24cc12c3100f05"))),
    Rule("R1a", "L4 R_floor ~ 0.81.", "eager R_floor of the headline cell on the L4.", (CELLS, P("r_floor l4")),
         ABOUT, "none stated by the paper; ours: the session range.", "|ours / published - 1| <= rel_tol.",
         "|ours / published - 1| > rel_tol.", "one cell.", (CLAIM_GPU,), (START, _reg(fp="3d083884662c7c9d"))),
    Rule("R1b", "H100 R_floor ~ 0.27.", "eager R_floor of the headline cell on the H100.",
         (CELLS, P("r_floor h100-sxm")), ABOUT, "as R1a.", "|ours / published - 1| <= rel_tol.",
         "|ours / published - 1| > rel_tol.", "one cell.", (CLAIM_GPU,), (START, _reg(fp="e0602af2be505005"))),
    Rule("R1c", "300 / 3350 GB/s: 11x.", "datasheet bandwidths and their ratio.",
         (Rows(SPECS, "l4, h100-sxm"), P("inverted_ladder bandwidth_gbps, bandwidth_ratio")), (), "none.",
         "datasheets equal the quoted values and the ratio rounds to 11.", "otherwise.", "-", (PAPER,),
         (START, _reg(fp="06e3c54017c29d68"))),
    Rule("R1d", "11x bandwidth does not give an 11x speed-up.",
         "per GPU faster than the L4: the L4 bf16 step over its eager step, against the bandwidth ratio.",
         (CELLS, P("quantisation step_ms l4 bf16, h100-sxm eager")), (), "measured: the eager cell's session range.",
         "speed-up x (1 + noise) < bandwidth ratio on every GPU.", "speed-up / (1 + noise) > ratio on one.",
         "every GPU of the source.", (CLAIM_GPU, PAPER, OTHER_GPU), (START, _reg(fp="6d3de5fed67e690d"))),
    Rule("R1e", "R_floor falls as bandwidth rises.", "eager R_floor of the headline cell per GPU against datasheet "
         "bandwidth.", (CELLS, P("inverted_ladder r_floor")), (("min_points", 2),), "none.",
         "strictly falling over at least min_points GPUs of the source.", "a rise.",
         "the GPUs of one source (ours on one GPU alone cannot test it).", (CLAIM_GPU, PAPER),
         (START, Change("2026-12-01T09:07", "1d537ef", "label renamed", "the same", "consistent (arithmetic)",
                        changed=False),
          _reg(fp="73076b4e1dabfbdf"))),
    Rule("N1", "Our note: 0.82 / 0.31 under W = all parameters.", "W_all floor / published eager step.",
         (P("quantisation step_ms eager; r_floor_recomputed_w_all"), Rows(BYTE_MODEL, "W_all")),
         (("rel_tol", 0.02),), "none.", "within rel_tol of the note.", "otherwise.", "each GPU.", (METHOD,),
         (START, _reg("registered; a statement of this package, a method check", fp="3e6567098dcf36c3"))),
    Rule("R2a", "H100 graph speed-up 1.259x [1.253, 1.267].", "our H100 headline speed-up and its interval.",
         (AB_HEAD, P("cuda_graphs speedup h100-sxm")), (), "the interval of our sessions.",
         "the intervals overlap.", "they do not.", "the headline cell.", (CLAIM_GPU,),
         (START, Change("2026-12-01T11:36", "e6c5b84", "headline = one sweep (N 10 -> 7)", "the same",
                        "not testable here"), _reg(fp="919412f4fa8d9400"))),
    Rule("R2b", "H100 launch overhead ~20 % of the step.", "(eager - graph) / eager, median over models at ctx "
         "2048; published: 1 - 1/s.", (AB_GRID, P("cuda_graphs launch_overhead_fraction, speedup h100-sxm")),
         ABOUT, "none stated.", "within rel_tol.", "outside rel_tol.", "median over models.", (CLAIM_GPU, PAPER),
         (START, _reg("registered; the published speed-up now labels it", fp="23391a6f96104a5a",
               verdict="supported by the paper's own numbers"),
          _note("2026-12-02T15:16", GRID_PICK, fp="d5b7ffa648fe0bde"))),
    Rule("R2c", "L4 graph speed-up 1.028x.", "our L4 headline speed-up.", (AB_HEAD, P("cuda_graphs speedup l4")),
         (("abs_tol", 0.02),), "our interval.", "our interval contains it or |ours - 1.028| <= abs_tol.",
         "otherwise.", "the headline cell.", (CLAIM_GPU,), (START, _reg(fp="a6689285c13463ad"))),
    _r3("R3a", "sdpa", fp="eea7dad74d92b5f0"),
    _r3("R3b", "fa3", fp="3d997f5963178b94"),
    _r3("R3c", "flashinfer", fp="1a1a8ba11146dfd4"),
    _r3("R3d", "fa2", fp="b5529b6072997a21"),
    Rule("R3f", "At batch 1 SDPA's default beats explicit FA2, FA3 and FlashInfer per layer.",
         "r = t_rival / t_sdpa per (GPU, model, ctx, rival), the host-inclusive median per call of each cell's "
         "newest run (the statistic of the paper's per-layer table as R3a-d read it; GPU-only and in-step times "
         "are reported, not counted); FA2 the flash-attn package or SDPA's FLASH backend named as stand-in, "
         "FlashInfer the flashinfer package.", (ATT, P("attention_backends us_per_layer")), (),
         "n = max(host_spread of the two cells) (max/min - 1 over the interleaved rounds).",
         "per rival, SDPA wins beyond noise (r - 1 > n) in every cell.",
         "a rival wins beyond noise (1/r - 1 > n) in one cell.",
         "per rival, then all three rivals: holds when all hold, fails when one fails.",
         (CLAIM_GPU, PAPER, OTHER_GPU),
         (Change("2026-12-01T09:49", "1f483ed", "introduced", "SDPA faster in every cell", "contradicted (9 of 12 "
                 "cells, rows of 20261129T121405-7d37e8)"),
          Change("2026-12-01T13:49", "74dd08d", "per shape and context, new rows (13:20)", "the same, per shape",
                 "contradicted (11 of 12)"),
          Change("2026-12-01T14:08", "e98b883", "made noise-aware 48 min after the 13:20 rows, on one side only",
                 "a rival faster by <= max(host_spread) does not fail", "reproduced"),
          _reg("symmetric: SDPA must win beyond the same noise a rival must exceed to "
                 "fail it, else inconclusive", fp="36c22528ec8fec29"))),
    Rule("R3e", "The binding constraint of decode attention is the launch sequence, not kernel throughput.",
         "host-inclusive / GPU-only per call, every cell of the paper's four backends (stand-ins named) at every "
         "context.", (ATT,), (("ratio", 2.0),),
         "lo = ratio / (1 + host_spread), hi = ratio x (1 + host_spread).",
         "lo >= ratio threshold in every cell.", "hi < ratio threshold in one cell.", "every cell, every context.",
         (CLAIM_GPU, OTHER_GPU),
         (Change("2026-11-29T12:16", "4c9f4e6", "introduced (LAUNCH_BINDS_RATIO from 33fe517)",
                 "median per GPU over backends and models of host / GPU-only at ctx 2048 >= 2", "reproduced (2.47x; "
                 "8 of 29 cells below 2x)"),
          _reg("every cell, every context, noise on both sides (the rule's text said 'a "
                 "call'; the code took a median)", fp="42741a03ba045796"))),
    _r4("R4a", "bf16", fp="cacc378113cea56a"),
    _r4("R4b", "bnb-nf4", fp="60bdfcbc9a6d709d"),
    _r4("R4c", "awq-marlin", fp="c55fae4330dc9dff"),
    _r4("R4d", "gptq-exllamav2", fp="56adfad9dec9316d"),
    Rule("R4e", "1.38x / 3.59x.", "published ratios against the published steps' ratios.",
         (P("quantisation step_ms, speedup l4"),), (("decimals", 2),), "none.", "equal to `decimals` decimals.",
         "otherwise.", "both paths.", (PAPER,), (START, _reg(fp="d10d4c1b5916427e"))),
    Rule("R4f", "Marlin tuned for SM80, not SM89.", "the same Marlin path timed on an SM80 and an SM89 GPU.",
         (QUANT,), (), "-", "not testable here (no SM80 / SM89 rows).", "-", "-", (CLAIM_GPU,), (START, _reg(fp="3cf2b150c118a5f8"))),
    Rule("R4g", "GPTQ + ExLlamaV2 realises the saving on the L4.",
         "realised share (1 - t_path / t_bf16) / (1 - B_path / B_bf16), eager, headline cell.",
         (QUANT, QUANT_BF16, P("quantisation step_ms l4"), Rows(BYTE_MODEL, "quant bytes")),
         (("share", 0.8),), "measured: session ranges; published: none.", "share >= threshold.",
         "share < threshold.", "one cell.", (CLAIM_GPU, PAPER),
         (Change("2026-11-29T11:18", "99b1ba2", "REALISED_YES 0.8", "share >= 0.8 on the L4 rows",
                 "not testable here"), _reg("registered; the paper's own numbers now label it", fp="7774de9b8e805f69"))),
    Rule("R4h", "H100 14.83 / 11.78 ms.", "our H100 eager and graph steps.", (CELLS, P("quantisation step_ms h100")),
         ABOUT, "session ranges.", "each within rel_tol.", "one outside.", "both arms.", (CLAIM_GPU,),
         (START, _reg(fp="72b87bce434d3f92"))),
    Rule("R4l", "The int4 kernel, not the format, decides whether the saving is realised.",
         "S = max - min over the paper's int4 kernels (`paths`) of each path's median realised share over the "
         "models they share (ctx 2048, streamed bytes within bytes_tol of each other), per GPU and arm (`arms`).",
         (QUANT, QUANT_BF16, VERIFY_QUANT, P("quantisation step_ms l4"), Rows(BYTE_MODEL, "quant bytes")),
         (("spread", 0.3), ("bytes_tol", 0.05), ("paths", ("awq-marlin", "gptq-exllamav2")),
          ("arms", ("eager", "graph", "lean_attn_graph", "lean_attn_compile"))),
         "per path: max |share_model - median| + (t_path / t_bf16) / (1 - B_path / B_bf16) x 2 x the relative "
         "session range of the same-arm bf16 cell (an arm with one session borrows the graph arm's); N = the sum "
         "over the two paths at the ends; published: none stated.",
         "S - N > spread.", "S + N < spread.",
         "per arm; a GPU holds when some arm holds and none fails, fails when some fails and none holds.",
         (CLAIM_GPU, PAPER, OTHER_GPU),
         (Change("2026-12-01T09:16", "2ab4a83", "introduced, after the 08:47 rows",
                 "bytes within 5 %, median over models, max - min > 30 points over every passing int4 path, the "
                 "arms present", "reproduced"),
          Change("2026-12-01T11:09", "6e6cb13", "common models; lean_attn_compile rows arrive", "the same on the "
                 "models every path has", "contradicted"),
          Change("2026-12-01T11:17", "45acead", "ARMS = eager, graph, lean_attn_graph (no compile)", "the same over "
                 "three arms", "reproduced"),
          Change("2026-12-01T11:45", "3f058c4", "ARMS + lean_attn_compile", "the same over four arms",
                 "contradicted (the compiled lean arm spreads 20 points without awq-triton)"),
          Change("2026-12-01T18:06", "3206ee2", "rule unchanged; awq-triton lean_attn_compile rows (17:47, 17:54) "
                 "join the growing path set", "the same", "reproduced (on awq-triton alone)"),
          _reg("the path set fixed to the paper's int4 kernels (a growing set can only "
                 "make max - min pass); noise on both sides", fp="cafae5718e0c650c"))),
    Rule("R4i", "L4 + ExLlamaV2 is competitive with a graphed H100.",
         "t_L4,gptq-exllamav2 / t_H100,graph.", (P("quantisation step_ms l4 gptq-exllamav2, h100-sxm graph"),),
         ABOUT, "none stated.", "ratio <= 1 + rel_tol.", "ratio > 1 + rel_tol.", "one pair.", (CLAIM_GPU, PAPER),
         (Change("2026-11-29T12:16", "4c9f4e6", "introduced", "needs both GPUs measured", "not testable here"),
          _reg("'competitive' registered as within the table's rel_tol; the paper's own "
                 "numbers label it", fp="978e03ff2453b640"))),
    Rule("R4m", "L4 + ExLlamaV2 (17.36 ms) is clearly faster than H100 eager (14.83 ms) (the Portuguese and Chinese "
         "summaries).", "t_L4,gptq-exllamav2 / t_H100,eager.",
         (P("quantisation step_ms l4 gptq-exllamav2, h100-sxm eager; cuda_graphs speedup CI"),), (),
         "the published A/B CI's relative half-width (the only noise the paper states).",
         "ratio < 1 - noise.", "ratio > 1 + noise.", "one pair.", (CLAIM_GPU, PAPER),
         (_reg("new claim", fp="d32e502ca363e523"),)),
    Rule("R4n", "nf4's small gain is due to dequantisation overhead.",
         "gain: nf4's realised share; cause: nf4's GPU-side excess over its own floor (graph - floor, graphed "
         "arms) against bf16's, per model at ctx 2048.", (QUANT, QUANT_BF16, P("quantisation step_ms l4 bnb-nf4")),
         (("share", 0.3), ("arms", ("graph", "lean_attn_compile"))),
         "the excess's session range (ms) of each cell, summed.",
         "share < threshold and nf4's excess - bf16's > noise in every model and arm.",
         "share >= threshold, or nf4's excess <= bf16's - noise in one.",
         "every model and arm; the paper's numbers show the gain only, not the cause.", (CLAIM_GPU, OTHER_GPU),
         (_reg("new claim", fp="f1bc4224cd83debb"),)),
    Rule("R4j", "int4 cuts the weight traffic 4x.", "bf16 / path W_streamed bytes per int4 path and model.",
         (Rows(BYTE_MODEL, "W_streamed"), P("expected_weight_traffic_reduction")), ABOUT, "none (arithmetic).",
         "every ratio >= 4 x (1 - rel_tol).", "one below.", "every path and model.", (PAPER,),
         (Change("2026-12-01T09:07", "1d537ef", "introduced", "the same", "contradicted"),
          _reg("registered; arithmetic on the model shapes the paper names", changed=False, fp="0acadd91eebc2a76"))),
    Rule("R4k", "A better kernel cuts latency more than a higher-bandwidth GPU.",
         "L4 bf16 / L4 ExLlamaV2 against L4 bf16 / H100 eager and / H100 graph.",
         (P("quantisation step_ms"),), (), "none stated.", "kernel > both upgrades.", "kernel < one.", "-",
         (PAPER,), (Change("2026-12-01T09:07", "1d537ef", "introduced", "the same", "contradicted"), _reg(fp="299dab7593145692"))),
    Rule("R4o", "Our claim: between two fast GPUs, the fastest quantised step realises less of the faster GPU's "
         "bandwidth gain than the bf16 step (the quantised step is further from bandwidth-bound).",
         "per pair of GPUs of notebook 04's grid, both at or above fast_gbps datasheet bandwidth and of different "
         "bandwidths, per model, on the grid arm `arm`: gain_realised = ln(ms_slow / ms_fast) / ln(bandwidth_fast / "
         "bandwidth_slow) at each context both GPUs have (a cell: the median step of its sessions, counted only when "
         "checked in its own run), for bf16 and for the faster GPU's fastest checked quantised path (the lowest median "
         "step over its contexts on the faster GPU, among every checked path that GPU has on the arm, whether the "
         "slower GPU has it or not: quant_across_gpus.fastest_on). A (pair, model) is judged only when the slower GPU "
         "has that path too and its bf16 and fastest-path cells on one of the two GPUs were all measured after this "
         "rule was fixed; the others are shown, not judged (Llama-3.1-8B's pair, H100 SXM and H200, was seen before "
         "the rule was written).",
         (GRID_CELLS, VERIFY_IN_RUN, Rows(SPECS, "datasheet bandwidth")),
         (("fast_gbps", 3350.0), ("arm", Ref("decodegap.experiments.quantisation", "GRID_ARM")),
          ("min_contexts", 2)),
         "the span over the contexts of each path's gain_realised (one median a cell: the contexts' spread stands "
         "for the noise between cells), on both sides.",
         "the quantised path's max gain_realised < bf16's min gain_realised in every judged (pair, model).",
         "the quantised path's min gain_realised > bf16's max gain_realised in one judged (pair, model).",
         "every judged (pair, model) with both paths at min_contexts contexts or more and the faster GPU's fastest "
         "path on both GPUs; none: not testable.",
         (METHOD,),
         (Change("2026-12-06T19:49", "00978e9", "introduced before the rows it judges: no (pair, model) has a side "
                 "measured after it (the H100 SXM's notebook 04 cells of Mistral-7B-v0.3 and Qwen2.5-7B, whose H200 "
                 "side exists, are not measured yet); Llama-3.1-8B's pair, seen (bf16 64-66 % of the gain, "
                 "int4-triton 23-28 %), is shown, never judged",
                 "the fastest checked quantised path among those both GPUs of the pair have (the lowest median step "
                 "on the faster GPU over the paired contexts: quant_across_gpus.fastest_quant); the rest as now",
                 "method check: met (on the H100 SXM rows of 2026-12-06T23:43-23:48: Mistral-7B-v0.3 with "
                 "gptq-exllamav2, Qwen2.5-7B with awq-marlin)", fingerprint="24b44ade2ef82a5b"),
          Change("2026-12-06T23:59", "92b1237", "changed after the rows that gave the verdict above were seen: the "
                 "H100 SXM had five of the H200's paths for Mistral-7B-v0.3 and Qwen2.5-7B (the call's time limit cut "
                 "the int4 ones), so the path the rule judged was the fastest of those both GPUs have, not the H200's "
                 "fastest quantised step the claim names (int4-triton, whose step takes 21-25 % less time there than the path judged); a "
                 "pair without the faster GPU's fastest path is now shown, not judged. Stricter only: no verdict it "
                 "could give is easier to reach, and the rows seen before it are older than this fixing, so they "
                 "decide nothing", "as stated in the fields", fingerprint="a4214e8dbd32397c"))),
    Rule("R5", "L4 ~6x cheaper per token than graphed H100.", "cheapest L4 configuration's $/Mtok against the "
         "graphed H100's at the listed prices.", (P("cost cost_ratio"), Rows(PRICES, "Modal, 2026-05-07")), ABOUT,
         "none stated.", "within rel_tol of 6.", "outside.", "one pair.", (CLAIM_GPU, PAPER), (START, _reg(fp="c888b47c00407f9b"))),
    Rule("R5m", "Our claim: the L4 is cheaper per token than the graphed H200.", "H200 graph $/Mtok over the L4's.",
         (CELLS, Rows(PRICES, "spheron h200")), (("ratio", 1.0),), "none.", "ratio > threshold.",
         "ratio <= threshold.", "one pair.", (METHOD,),
         (Change("2026-12-01T08:18", "ef9edcc", "introduced", "the same", "reproduced"),
          _reg("registered; this package's own statement, a method check", changed=False, fp="44486f89736bf12b"))),
    Rule("W1", "Scope: the launch tax shrinks with batch (why the paper does not claim its thesis for large "
         "batches).",
         "per GPU, model and ctx: the launch share f(B) = (eager - graph) / eager of the step of all B sequences, at "
         "B = 1 and at the largest batch B_max measured for both arms (B_max >= b_large). f's range over sessions: "
         "f_lo = 1 - max(graph) / min(eager), f_hi = 1 - min(graph) / max(eager) (the per-session medians of each "
         "arm's step). 'Shrinks' means the share falls, beyond noise, from B = 1 to B_max; the absolute launch tax "
         "(eager - graph, ms) is reported beside it, not judged.",
         (SCOPE_CELLS, SCOPE_VERIFY, Rows(SPECS, "datasheet bandwidth")),
         (("b_large", Ref("decodegap.analysis.where_the_thesis_ends", "B_LARGE")), ("arms", ("eager", "graph"))),
         "each arm's session range at each batch (f_lo to f_hi), on both sides.",
         "f_hi(B_max) < f_lo(1) in every (model, ctx) cell (the share falls beyond noise).",
         "f_lo(B_max) > f_hi(1) in one (model, ctx) cell (the share rises beyond noise).",
         "every (model, ctx) cell with both arms checked at B = 1 and at B_max >= b_large, per GPU; fewer: not "
         "testable.", (CLAIM_GPU, OTHER_GPU),
         (Change("2026-12-02T18:34", "8f13261", SCOPE_FIXED, SCOPE_FIRST, "not testable here (no rows)", fingerprint="b8d504660832b5ae"),
          Change("2026-12-02T18:42", "b4b20fe", SCOPE_ROWS, SCOPE_FROM_100, "tested on another GPU (h200 for a paper-GPU "
                 "claim): holds", fingerprint="d261240c1aa2acf7"),
          Change("2026-12-04T14:25", "e4e2a9b", SCOPE_BAND, SCOPE_NEWEST_RUN, "tested on another GPU (h200 for a paper-GPU claim): holds",
                 fingerprint="60148a547ebdfd11"),
          Change("2026-12-04T15:20", "ada3553", SCOPE_RESUMED, SCOPE_VERIFY_ALL,
                 "tested on another GPU (h200 for a paper-GPU claim): holds", fingerprint="e74c2abb52635a29"),
          _note("2026-12-04T15:55", SCOPE_VERIFY_PICK, fp="cd996f6b8abfa62f"))),
    Rule("W2a", "The step is the bandwidth floor at a fixed efficiency plus a fixed per-step cost (the thesis as a "
         "two-term model), on our grid.",
         "per GPU and arm, least squares on relative residuals (each cell weighted by 1 / t) over every checked cell "
         "(model size, batch, ctx) of t = t_floor / a + c0 + n_layers x c1, t the median step of all B sequences, "
         "t_floor = max(bandwidth floor (W_all + B x K(ctx)) / datasheet bandwidth, compute floor 2 x matmul "
         "parameters x B / datasheet dense bf16 TFLOP/s) (decodegap.accounting); c1 = 0 when the cells have one "
         "layer count. A cell is explained when |r| = |t / t_model - 1| <= rel_tol beyond its noise, unexplained "
         "when |r| > rel_tol beyond its noise (in-sample residuals; the fit has three coefficients).",
         (SCOPE_CELLS, SCOPE_VERIFY, Rows(SPECS, "datasheet bandwidth, bf16_tflops_dense"),
          Rows("data/models (configs)", "params, n_layers, K(ctx) through decodegap.accounting")),
         (("rel_tol", Ref("decodegap.analysis.where_the_thesis_ends", "REL_TOL")), ("explained", Ref("decodegap.analysis.where_the_thesis_ends", "EXPLAINED")),
          ("min_points", Ref("decodegap.analysis.where_the_thesis_ends", "MIN_POINTS"))),
         "n = the cell's session range (max / min - 1 of the per-session medians): explained if |r| + n <= rel_tol, "
         "unexplained if |r| - n > rel_tol.",
         "in every (GPU, arm) fit at least `explained` of the cells are explained beyond noise.",
         "in one (GPU, arm) fit more than 1 - `explained` of the cells are unexplained beyond noise.",
         "every (GPU, arm) fit with at least min_points cells and at least two distinct t_floor; fewer: not "
         "testable.", (CLAIM_GPU, OTHER_GPU),
         (Change("2026-12-02T18:34", "8f13261", SCOPE_FIXED, SCOPE_FIRST, "not testable here (no rows)", fingerprint="a99c16def8f96fbe"),
          Change("2026-12-02T18:42", "b4b20fe", SCOPE_ROWS, SCOPE_FROM_100, "tested on another GPU (h200 for a paper-GPU "
                 "claim): fails", fingerprint="5cff5f276496b6d7"),
          Change("2026-12-04T14:25", "e4e2a9b", SCOPE_BAND, SCOPE_NEWEST_RUN, "tested on another GPU (h200 for a paper-GPU claim): fails",
                 fingerprint="b93db60c8503ddb2"),
          Change("2026-12-04T15:20", "ada3553", SCOPE_RESUMED, SCOPE_VERIFY_ALL,
                 "tested on another GPU (h200 for a paper-GPU claim): fails", fingerprint="fb9b90d75e8d1466"),
          _note("2026-12-04T15:55", SCOPE_VERIFY_PICK, fp="5f854808ac313e6a"))),
    Rule("W2b", "The two-term model explains the paper's published points (H100 and L4, eager and graph) from two "
         "numbers per GPU.",
         "per paper GPU with a published eager step E, graph step G (H100: published; L4: E / the published graph "
         "speed-up) and bandwidth: the two numbers a (efficiency on the floor) and F (eager fixed cost) solved from "
         "E = t_floor / a + F and G = t_floor / a + (1 - lambda) F, t_floor the bandwidth floor of the published "
         "cell (model, ctx of its R_floor row; W_all + K(ctx)) at the GPU's published bandwidth, lambda = 1 - "
         "F_graph / F_eager with F_arm = c0 + n_layers x c1 of our W2a fits (each with at least W2a's min_points "
         "cells) at the published model's n_layers. The GPU's points are explained when 0 < a <= a_max and F >= 0.",
         (P("quantisation step_ms h100-sxm eager/graph, l4 bf16; cuda_graphs speedup (CI); inverted_ladder "
            "bandwidth_gbps, r_floor"), SCOPE_CELLS, Rows("data/models (configs)", "W_all, K(ctx), n_layers")),
         (("a_max", Ref("decodegap.analysis.where_the_thesis_ends", "A_MAX")),),
         "the band spans the published speed-up CI where stated (G = E / s over [ci_low, ci_high]; none for the "
         "L4) and the lambda of each of our GPUs with both fits; lambda's own fit error is not propagated.",
         "on every paper GPU with both points, 0 < a <= a_max and F >= 0 over the whole noise band.",
         "on one paper GPU, a > a_max, a <= 0 or F < 0 over the whole noise band.",
         "every paper GPU with an eager and a graph point; no lambda (no eager and graph fits of ours): not "
         "testable.", (PAPER,),
         (Change("2026-12-02T18:34", "8f13261", SCOPE_FIXED, SCOPE_FIRST, "not testable here (no rows)", fingerprint="66a17abcde1b3967"),
          Change("2026-12-02T18:42", "b4b20fe", SCOPE_ROWS, SCOPE_FROM_100, "supported by the paper's own numbers",
                 fingerprint="04db7d4457a4c0bd"),
          Change("2026-12-04T14:25", "e4e2a9b", SCOPE_BAND, SCOPE_NEWEST_RUN, "supported by the paper's own numbers",
                 fingerprint="584d34c5e81e9810"),
          Change("2026-12-04T15:20", "ada3553", SCOPE_RESUMED, "as stated in the fields", fingerprint="107fe6c862d4ecea"))),
    Rule("S1", "Scope.", "-", (), (), "-", "-", "-", "-", (METHOD,), (START, _reg(fp="c782677c5582c638"))),
)

BY_ID = {r.id: r for r in RULES}

JUDGES_ONLY_LATER_ROWS = {
    "R4o": "it judges only a GPU pair and model whose cells on one side were all measured after it; the earlier runs "
           "it reads are the other side of such a pair, or pairs it shows without judging them",
}
"""Rules registered ahead of the rows that decide them: {id: how}. A rule here still reads runs older than its fixing
(claims.provenance flags it, and says this beside the flag); its verdict comes from rows measured after it."""


def get(rule_id: str) -> Rule:
    return BY_ID[rule_id]
