"""The ladder of notebook 06 as a plan: its levers (an arm and a quantisation path each), the targets, and what
experiments.closing_the_gap.measure sweeps. Measuring reads this module only; the analysis of the rows
(decodegap.analysis.closing_the_gap) reads it too, so that measurement never imports analysis."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from decodegap import records, sessions
from decodegap.arms import is_lean

LEVERS = (
    ("HF eager", "eager", "bf16"),
    ("HF graph", "graph", "bf16"),
    ("HF compiled", "compile", "bf16"),
    ("lean eager", "lean", "bf16"),
    ("lean graph", "lean_graph", "bf16"),
    ("lean compiled", "lean_compile", "bf16"),
    ("lean graph + Triton kernels", "lean_kernels_graph", "bf16"),
    ("lean graph + Triton attention", "lean_attn_graph", "bf16"),
    ("lean compiled + Triton attention", "lean_attn_compile", "bf16"),
    ("lean graph, fused Triton step", "lean_fused_graph", "bf16"),
    ("lean graph, fused Triton step + PDL", "lean_fused_pdl_graph", "bf16"),
    ("lean graph, fused step + PDL, norm in o's epilogue", "lean_fused_pdl_norm_graph", "bf16"),
    ("lean graph, fused step + PDL, norm and rotary in epilogues", "lean_fused_pdl_epilogues_graph", "bf16"),
    ("lean graph, fused step + early PDL trigger, norm in o's epilogue", "lean_fused_early_graph", "bf16"),
    ("lean graph, fused step + PDL, norm in o's epilogue, products trigger early", "lean_fused_early_products_graph",
     "bf16"),
    ("lean graph, fused step + PDL, products trigger early, one-kernel attention", "lean_fused_merged_graph", "bf16"),
    ("lean graph, fused step + PDL, products trigger early, SiLU epilogue",
     "lean_fused_silu_epilogue_graph", "bf16"),
    ("lean graph, fused step + PDL, products trigger early, next token in one kernel", "lean_fused_next_token_graph",
     "bf16"),
    ("lean graph, fused step + PDL, early products, next token in one kernel, norms as scales",
     "lean_fused_norm_scale_graph", "bf16"),
    ("lean graph, norms as scales, next token in one kernel, attention in blocks of 64", "lean_fused_kv_together_graph",
     "bf16"),
    ("lean graph, norms as scales, next token in one kernel, attention in blocks of 64, in one kernel",
     "lean_fused_kv_together_merged_graph", "bf16"),
    ("lean graph, norms as scales, next token in one kernel, blocks of 64, rotary in attention",
     "lean_fused_rotary_attention_graph", "bf16"),
    ("lean graph, norms as scales, blocks of 64, rotary in attention, cache read under qkv",
     "lean_fused_rotary_prefetch_graph", "bf16"),
    ("lean graph, norms as scales, next token in one kernel, blocks of 64, L2 prefetch",
     "lean_fused_l2_prefetch_graph", "bf16"),
    ("int4 tinygemm, HF graph", "graph", "int4-tinygemm"),
    ("int4 tinygemm, lean graph", "lean_graph", "int4-tinygemm"),
    ("int4 tinygemm, lean compiled", "lean_compile", "int4-tinygemm"),
    ("int4 tinygemm, lean graph + Triton kernels", "lean_kernels_graph", "int4-tinygemm"),
    ("int4 tinygemm, lean graph + Triton attention", "lean_attn_graph", "int4-tinygemm"),
    ("int4 tinygemm, lean compiled + Triton attention", "lean_attn_compile", "int4-tinygemm"),
    ("int4 Triton GEMV, HF graph", "graph", "int4-triton"),
    ("int4 Triton GEMV, lean graph + Triton attention", "lean_attn_graph", "int4-triton"),
    ("int4 Triton GEMV, lean compiled + Triton attention", "lean_attn_compile", "int4-triton"),
    ("int4 fused Triton step", "lean_fused_graph", "int4-triton"),
    ("int4 fused step + PDL, norm in o's epilogue", "lean_fused_pdl_norm_graph", "int4-triton"),
    ("int4 fused step + PDL, norm in o's epilogue, products trigger early", "lean_fused_early_products_graph",
     "int4-triton"),
    ("int4 fused step + PDL, products trigger early, one-kernel attention", "lean_fused_merged_graph", "int4-triton"),
    ("int4 fused step + PDL, products trigger early, SiLU epilogue", "lean_fused_silu_epilogue_graph",
     "int4-triton"),
    ("int4 fused step + PDL, early products, all epilogues", "lean_fused_all_epilogues_graph", "int4-triton"),
    ("int4 fused step + PDL, early products, all epilogues, every norm in one", "lean_fused_epilogue_norms_graph",
     "int4-triton"),
    ("int4 fused step + PDL, every norm in an epilogue, next token in one kernel", "lean_fused_norms_next_token_graph",
     "int4-triton"),
    ("int4 fused step + PDL, all epilogues, next token in one kernel", "lean_fused_all_next_token_graph",
     "int4-triton"),
    ("int4 + int4 LM head, lean compiled + Triton attention", "lean_attn_compile", "int4-triton-head"),
    ("int4 + int4 LM head, fused step + PDL, norm in o's epilogue", "lean_fused_pdl_norm_graph", "int4-triton-head"),
    ("int4 + int4 LM head, fused step + PDL, norm in o's epilogue, products trigger early",
     "lean_fused_early_products_graph", "int4-triton-head"),
    ("int4 + int4 LM head, fused step + PDL, products trigger early, SiLU epilogue",
     "lean_fused_silu_epilogue_graph", "int4-triton-head"),
    ("int4 + int4 LM head, fused step + PDL, early products, all epilogues", "lean_fused_all_epilogues_graph",
     "int4-triton-head"),
    ("int4 + int4 LM head, fused step + PDL, early products, all epilogues, every norm in one",
     "lean_fused_epilogue_norms_graph", "int4-triton-head"),
    ("int4 + int4 LM head, fused step + PDL, every norm in an epilogue, next token in one kernel",
     "lean_fused_norms_next_token_graph", "int4-triton-head"),
    ("int4 + int4 LM head, fused step + PDL, all epilogues, next token in one kernel",
     "lean_fused_all_next_token_graph", "int4-triton-head"),
    ("int4 + int4 LM head, fused step + PDL, every norm as a scale, next token in one kernel",
     "lean_fused_all_norm_scale_graph", "int4-triton-head"),
    ("int4 + int4 LM head, norms as scales, next token in one kernel, attention in blocks of 64",
     "lean_fused_all_kv_together_graph", "int4-triton-head"),
    ("int4 + int4 LM head, norms as scales, next token in one kernel, blocks of 64, rotary in attention",
     "lean_fused_all_rotary_attention_graph", "int4-triton-head"),
    ("int4 + int4 LM head, norms as scales, blocks of 64, rotary in attention, cache read under qkv",
     "lean_fused_all_rotary_prefetch_graph", "int4-triton-head"),
    ("int4 + int4 LM head, norms as scales, next token in one kernel, blocks of 64, L2 prefetch",
     "lean_fused_all_l2_prefetch_graph", "int4-triton-head"),
)
"""(lever, arm, quant) in ladder order; the int4-triton levers are the package's own int4 GEMV
(decodegap.kernels.int4_gemv): three measured by notebook 04's sweep over the grid, then the fused int4 step
(decodegap.kernels.fused_int4: the int4 GEMV inside the fused step's design, its norms, residual adds and SiLU in the
products' prologues and epilogues, the rotary in its own kernel), without PDL, with the two PDL levers that won the
bf16 grid, with the one-kernel attention, and with the MLP's SiLU(gate) * up in the gate_up product's epilogue
instead of down's prologue (the SiLU-epilogue lever: down then streams its int4 weights with a plain x; the int4
products pay for the work their prologues do per column, notebook 06's int4 products findings), and that lever with
the rotary and the cache write in qkv's epilogue too and the final norm in the last down's epilogue (the
all-epilogues lever: no rotary_cache kernel, and an LM head with no prologue; the int4 kernel pairs each head's
rotary rows in its one row set, where the bf16 kernel's second row set made its rotary epilogue lose), and that lever
with each layer's input norm made in the previous down's epilogue too (the epilogue-norms lever: every norm in an
epilogue, so no qkv but the first layer's runs the norm prologue, whose instructions the offline counts of notebook
06 set against the plain product's), and that lever with the greedy next token in one kernel (the profiled steps
show torch's argmax, a one-block reduction over the vocabulary, as the largest kernel outside the products and the
attention; decodegap.kernels.next_token), and the all-epilogues lever with that kernel too (added after the first
rows of the epilogue-norms levers timed them slower than the all-epilogues lever). The last nine (path
int4-triton-head) are the three fastest int4 levers of the grid and the five epilogue levers with the LM head
quantised too (and the norm-scale lever, below), in the same format (as gpt-fast's int4 quantises its output
layer): the int4 steps' largest term outside the decoder products was their bf16 head (quant.paths; the head then runs the int4 GEMV, in the fused step
with the final norm as its prologue). The lean decoder reads the int4-tinygemm weights of the quantised
HF model too (q/k/v and gate/up fused into one int4 layer each, every projection through tinygemm's
kernel), so the int4 levers run on the HF graph arm and then on the lean arms; on the lean kernels arm an
int4 step keeps tinygemm for its decoder projections and takes the split-KV attention from the Triton
kernels (and the Triton GEMV for its LM head, which stays bf16; on the Triton-attention arms the head stays
on cuBLAS).
The Triton kernels (decodegap.kernels.step): a one-row GEMV autotuned per shape over a few configs, and a split-KV
decode attention. The fused Triton step (decodegap.kernels.fused.launch, arms lean_fused_graph, lean_fused_pdl_graph, with the post-attention
norm made in the o product's epilogue lean_fused_pdl_norm_graph, and with the rotary and the cache write in the qkv
product's epilogue too lean_fused_pdl_epilogues_graph, and the norm lever with every kernel triggering its
dependents as it starts lean_fused_early_graph, or only the products another product follows (o, gate_up, down)
lean_fused_early_products_graph; that lever with the split-KV attention in one kernel, its last program a kv head
merging the splits, lean_fused_merged_graph, or with the MLP's SiLU in gate_up's epilogue,
lean_fused_silu_epilogue_graph): every
decode kernel of the step is the package's own, the norms, rotary, cache write, SiLU-and-multiply and residual adds
fused into the products beside them, graphed, and with programmatic dependent launch (each product loads its first
weight tiles before it waits for the previous kernel). The profiled steps at the target cell (notebook 06's where-the-time-goes tables) found the
Triton GEMV's products slower than cuBLAS's and the step's small kernels worth a large share of it, hence the levers
with only the Triton attention, graphed and compiled (compile fuses the small kernels). The norm-scale lever
(lean_fused_norm_scale_graph): the next-token lever with every norm but the first made in an epilogue (o's, and each
down's for the next layer or the LM head), each left to the next product as a scale (kernels.fused.norm_scale): the
bench's rows (bench/fused_gemv.py) time o with the norm in its epilogue, and gate_up with the norm as its prologue,
each slower than the same product without the norm, by about as much as each other, since either way the norm waits
for the whole of its input; as a scale no program waits, and the product after it applies 1 / rms to its sums. Its
int4 twin (lean_fused_all_norm_scale_graph, int4-triton-head): the epilogue-norms lever with the next token in one
kernel, every norm but the first as a scale, the int4 products' rows showing the same cost of a norm (notebook 06's
int4 products findings). The kv-together levers (lean_fused_kv_together_graph and its one-kernel-attention form
lean_fused_kv_together_merged_graph, bf16; lean_fused_all_kv_together_graph, int4-triton-head): the norm-scale levers
with the split-KV attention loading each block's V beside its K, in blocks of 64 positions
(kernels.step.attention_blocks): the profiled step at the target cell spends several times the attention's KV floor
in its attention (notebook 06's where-the-time-goes findings give the numbers), each program of the default waiting
on K, then the scores, then V, once for each of its two blocks. Found after their rows: on sm_90 the split
kernel compiles to the same instructions with V's load written beside K's as after the scores (the compiler issues
them together either way; tests/test_kernels.py compiles both offline), so what these levers change on the GPU is
the block, 64 positions where the default's is 32: one iteration a program at ctx 2048. Their names say so since
2026-12-05 evening (they said "V beside K" until then); their arms keep the names their rows carry. The
rotary-in-attention levers (lean_fused_rotary_attention_graph, bf16; lean_fused_all_rotary_attention_graph,
int4-triton-head; added 2026-12-07): the kv-together levers with the rotary and the cache write made in the
attention's split kernel (kernels.step.decode_attention's `rotary`), so each layer launches one kernel fewer, and qkv
stays a plain product (the int4 lever's qkv without its rotary epilogue). The bf16 target cell's profiled step
(lean_fused_kv_together_graph) launches the rotary_cache kernel 32 times a step, each a link in the chain of kernels
that wait on each other under PDL (notebook 06's where-the-time-goes rows give its time); the bf16 step with the
rotary in qkv's epilogue instead (lean_fused_all_kv_together_graph on bf16) was slower, its qkv products slower
(the paired loads of the rotary epilogue). Their prefetch forms (lean_fused_rotary_prefetch_graph,
lean_fused_all_rotary_prefetch_graph; added 2026-12-07 with them, before any row of either): each attention program
reads the first block of its share of the cache before it waits for qkv, which lets the attention launch as qkv
starts (kernels.step.decode_attention's `prefetch`, FusedOps.attention_prefetch), so the cache's loads overlap the
qkv product where they followed it; at ctx 2048 a program's share is one block. The L2-prefetch levers
(lean_fused_l2_prefetch_graph, bf16; lean_fused_all_l2_prefetch_graph, int4-triton-head; added 2026-12-07 evening,
before any row of either): the kv-together levers (the H200's confirmed fastest levers of their kinds at the target
cell then) with each product's programs asking the L2 for the first bytes of their weight rows before they wait for
the previous kernel (kernels.l2_prefetch, 8 MiB a product), where they load one tile into registers: the profiled
steps' products pay a fixed cost each beyond their bytes (notebook 06's where-the-time-goes rows), which weights
already in the L2 as the wait ends may shorten."""

TARGET_CELL_ONLY = frozenset({("lean_graph", "int4-tinygemm"), ("lean_compile", "int4-tinygemm"),
                              ("lean_kernels_graph", "int4-tinygemm"), ("lean_fused_silu_epilogue_graph", "bf16"),
                              ("lean_fused_all_epilogues_graph", "int4-triton"),
                              ("lean_fused_epilogue_norms_graph", "int4-triton"),
                              ("lean_fused_norms_next_token_graph", "int4-triton"),
                              ("lean_fused_all_next_token_graph", "int4-triton"),
                              ("lean_fused_norm_scale_graph", "bf16"),
                              ("lean_fused_all_norm_scale_graph", "int4-triton-head"),
                              ("lean_fused_kv_together_graph", "bf16"), ("lean_fused_kv_together_merged_graph", "bf16"),
                              ("lean_fused_all_kv_together_graph", "int4-triton-head"),
                              ("lean_fused_rotary_attention_graph", "bf16"),
                              ("lean_fused_all_rotary_attention_graph", "int4-triton-head"),
                              ("lean_fused_rotary_prefetch_graph", "bf16"),
                              ("lean_fused_all_rotary_prefetch_graph", "int4-triton-head"),
                              ("lean_fused_l2_prefetch_graph", "bf16"),
                              ("lean_fused_all_l2_prefetch_graph", "int4-triton-head")})
"""(arm, quant) of the levers measured at the target cell only (TARGETS' model and context, on any GPU:
target_in_grid). int4 weight-only goes on the fastest
path: over the grid, int4 tinygemm runs on the HF graph (for reference) and on the two lean levers with the
Triton attention (the fastest bf16 path); the other int4 lean levers, which the target cell showed slower (notebook
06's ladder table), are not measured elsewhere, and ladder_table says so (`target cell only`). So is the bf16
SiLU-epilogue lever: the bf16 bench's rows (bench/fused_gemv.py) time its paired gate_up epilogue slower than the
SiLU prologue it saves down, so it is measured where the target stands, not over the grid; and the int4 lever with
every epilogue on the int4-triton path, whose grid the same lever with the int4 LM head covers, and so the
epilogue-norms lever on that path; and the norm-scale levers (bf16, and int4 with its LM head), the benches having
timed none of their products when they were added: each goes over the grid once a confirmation sweep holds it as the
fastest lever of its kind at the target cell (closing_the_gap_confirmation.confirmed_fastest), a rule written on
2026-12-05 before any row of either; the kv-together, the rotary-in-attention and the L2-prefetch levers under the
same rule, from
their addition. Since
2026-12-05 evening the ladder's plan applies the rule itself (experiments.closing_the_gap.promoted_levers); before,
the command of a run checked it. The compiled
levers with the Triton attention compile once per model and session (decode.COMPILE_ONCE_ARMS), so they go over the
grid."""

TARGETS = {"bf16": dict(model="llama-3.1-8b", ctx=2048, gpu="h200", r_floor=0.85),
           "int4": dict(model="llama-3.1-8b", ctx=2048, gpu="h200", step_ms=2.0)}
"""The targets of notebook 06: Llama-3.1-8B at ctx 2048 on the H200, bf16 at an R_floor of at least `r_floor`
against the datasheet bandwidth, int4 at no more than `step_ms` per step. Earlier values: EARLIER_TARGETS."""
MEGAKERNEL_CELL = dict(gpu="h200", model="llama-3.2-1b", ctx=32, steps=127, step_ms=0.70,
                       arms=("graph", "lean_attn_graph", "lean_fused_pdl_norm_graph", "lean_fused_early_graph",
                             "lean_fused_early_products_graph", "lean_fused_merged_graph",
                             "lean_fused_next_token_graph", "lean_fused_norm_scale_graph",
                             "lean_fused_kv_together_graph", "lean_fused_rotary_attention_graph",
                             "lean_fused_l2_prefetch_graph"),
                       published_us={"whole-model megakernel": 759.83, "CUDA graph + PDL pipeline": 794.74},
                       source="a public frozen-protocol study of batch-1 bf16 decode on an H200 (32 prompt tokens, "
                              "127 timed decode steps), as quoted in the package's issue 31; not retrieved here")
"""Notebook 06's cell of a public megakernel study: Llama-3.2-1B in bf16, batch 1, on an H200, prefilled with `ctx`
tokens and timed over `steps` decode steps; the fused step's target there is `step_ms` per step. `published_us` are
that study's per-step times (published by it, not measured here), `arms` the levers measured on the cell
(bench/measure.sh's megakernel step). History: the first six were measured on 2026-12-04; next_token and norm_scale
(the bf16 target cell's confirmed lever then, and the norm-scale lever) were added on 2026-12-05, kv_together (the
fastest bf16 lever confirmed at the H200's target cell) on 2026-12-07, rotary_attention and l2_prefetch (the
levers added after it) on 2026-12-07 evening, none of the five measured on the cell yet. A
plan of other arms is another sweep (selection.sweep_of), so the selection sweep times every arm again in fresh
sessions of its own; the table reads each lever's latest run. The model is not a grid model: checked.grid_rows
leaves its rows out of notebooks 01-06's grid, and analysis.closing_the_gap_megakernel reads them."""
GRID_TARGET = dict(gpu="h200", r_floor=0.80)
"""Notebook 06's target over the grid: every bf16 cell of `gpu` (model x context) at an R_floor of at least
`r_floor` with its fastest lever, against the datasheet bandwidth and W_all + K(ctx), as TARGETS' bf16 target."""
INT4_GRID_TARGET = dict(gpu="h200", step_ms=2.3)
"""Notebook 06's int4 target over the grid: every int4 cell of `gpu` (model x context) at no more than `step_ms` per
step with its fastest int4 lever."""
EARLIER_TARGETS = (
    dict(name="bf16", since="2026-11-29", until="2026-12-04", target=dict(TARGETS["bf16"], r_floor=0.80),
         why="reached by the selection sweeps; raised to the next goal"),
    dict(name="grid", since="2026-12-01", until="2026-12-04", target=dict(GRID_TARGET, r_floor=0.75),
         why="reached by the selection sweeps in every cell; raised to the next goal"),
)
"""Notebook 06's earlier targets, kept with the dates they held and why they changed: analysis.closing_the_gap_targets
judges them as it judges the current ones (`name`: the TARGETS key or "grid"), so a raised bar never hides where the
rows stood against the old one."""
class CodeChange(NamedTuple):
    """A change to the code a lever runs, made after some of its rows were measured: the `commit` that made it (short
    sha), when it was committed (`committed_utc`, ISO 8601), `what` changed, and the `levers` ((arm, quant) of
    LEVERS) and `models` (() for every model) whose steps it changed."""
    commit: str
    committed_utc: str
    what: str
    levers: tuple
    models: tuple = ()


_INT4_TABLE_LEVERS = tuple((arm, quant) for arm in ("lean_fused_silu_epilogue_graph", "lean_fused_all_epilogues_graph",
                                                    "lean_fused_epilogue_norms_graph",
                                                    "lean_fused_norms_next_token_graph",
                                                    "lean_fused_all_next_token_graph")
                           for quant in ("int4-triton", "int4-triton-head"))
CODE_CHANGES = (
    CodeChange("952da62", "2026-12-05T05:19:23+00:00",
               "the int4 config table's entries for down, gate_up_silu, down_norm, lm_head_plain and qkv_rotary_plain, "
               "which each process had tuned for itself", _INT4_TABLE_LEVERS, ("llama-3.1-8b", "mistral-7b-v0.3")),
    CodeChange("224377f", "2026-12-05T05:46:24+00:00",
               "the int4 config table's entries for qkv_rotary, which each process had tuned for itself",
               tuple((arm, quant) for arm, quant in _INT4_TABLE_LEVERS
                     if arm in ("lean_fused_all_epilogues_graph", "lean_fused_all_next_token_graph")),
               ("llama-3.1-8b", "mistral-7b-v0.3")),
    CodeChange("c640ad5", "2026-12-05T06:08:08+00:00",
               "the one-kernel attention's merge reading each query head's partials over all splits in one load, "
               "where it had merged the splits one after another",
               (("lean_fused_merged_graph", "bf16"), ("lean_fused_merged_graph", "int4-triton"))),
    CodeChange("4a1e32b", "2026-12-05T23:16:39+00:00",
               "the fused GEMV table's entries for Llama-3.2-1B's LM head (with and without its norm) and gate_up_plain, "
               "which had run on the table's rule",
               tuple((arm, quant) for _, arm, quant in LEVERS if quant in ("bf16", "int4-triton") and "fused" in arm),
               ("llama-3.2-1b",)),
)
"""The changes to a lever's code made after rows of it were measured, oldest first, each written when it was made:
the ladder (analysis.closing_the_gap.changed_cells) names, beside a lever's time, every change its rows were measured
before, so that a row of code that no longer runs is not read as the code's time now; the rows stay. A change
that leaves what the GPU runs the same (a refactor, a docstring) is not one. Kept from 2026-12-05: the changes
before it are in the repository's history only. The int4 table's levers are those whose products (at Llama-3.1-8B's
widths, which Mistral-7B-v0.3 shares but for its LM head) gained entries: tests/test_code_changes.py derives them from
the products each arm launches."""


def changes_after(run_id: str, arm: str, quant: str, model: str, changes=CODE_CHANGES) -> list:
    """The changes (CODE_CHANGES) to the code of lever (arm, quant) on `model` committed after run `run_id` began:
    a run that began before a change cannot have run it. A run that began after it ran it where the run measured
    the newest commit of the history (as every run of the package has: tests/test_code_changes.py checks it against
    the history where a clone has it), so the rule needs no git. A run id that names no start time places the run
    before no change."""
    began = records.run_started(run_id)
    if began is None:
        return []
    return [c for c in changes if (arm, quant) in c.levers and (not c.models or model in c.models)
            and began.tz_localize("UTC") < datetime.fromisoformat(c.committed_utc)]


def changed_since(run_id: str, arm: str, quant: str, model: str, changes=CODE_CHANGES) -> str:
    """The commits of changes_after, space-separated ("" where none): the `changed_since` column of the ladder, the
    confirmation table and the megakernel table."""
    return " ".join(c.commit for c in changes_after(run_id, arm, quant, model, changes))


def changes_named(changed: str, changes=CODE_CHANGES) -> str:
    """'<what> (<commit>); ...' of the changes a `changed_since` value names (its commits, space-separated), oldest
    first: how the findings name them."""
    commits = set(changed.split())
    return "; ".join(f"{c.what} ({c.commit})" for c in changes if c.commit in commits)


CONFIRM_FIRST_SESSION = sessions.CONFIRM.start
"""The number of a confirmation sweep's first session (analysis.closing_the_gap_confirmation): the start of the
confirmations' band (decodegap.sessions), apart from the grid's sessions and notebook 07's, so that no selection reader counts a confirmation row and the confirmation reader
counts nothing else."""
CONFIRM_SESSIONS = 3
"""Fresh sessions of a confirmation sweep: a chosen lever counts towards a target only when confirmed in this many."""


def ladder_plan(model_keys, contexts, only=None, promoted=()) -> list[tuple[str, tuple, tuple, tuple]]:
    """What experiments.closing_the_gap.measure sweeps: (quant, models, contexts, arms) per sweep. Per quantisation path the lean
    levers over the grid (and for int4 the HF graph arm, which notebook 04 measures at two contexts only; the
    HF bf16 levers come from notebooks 01 and 02), then the TARGET_CELL_ONLY levers at the target cell when the
    grid holds it. `only`: these arms of LEVERS and no others (ladder --levers). `promoted`: (arm, quant) of
    TARGET_CELL_ONLY levers that go over the grid like the others: those a confirmation sweep holds as the fastest of
    their kind at the target cell (experiments.closing_the_gap.promoted_levers, the rule of 2026-12-05 in
    TARGET_CELL_ONLY's docstring; before 2026-12-05 evening the command of a run checked it by hand)."""
    target = TARGETS["bf16"]
    sweeps = []
    only_target = TARGET_CELL_ONLY - set(promoted)
    for quant in dict.fromkeys(q for _, _, q in LEVERS):
        levers = [a for _, a, q in LEVERS if q == quant and (is_lean(a) or q != "bf16") and (not only or a in only)]
        grid = tuple(a for a in levers if (a, quant) not in only_target)
        if grid:
            sweeps.append((quant, tuple(model_keys), tuple(contexts), grid))
        extra = tuple(a for a in levers if (a, quant) in only_target)
        if extra and target_in_grid(model_keys, contexts):
            sweeps.append((quant, (target["model"],), (target["ctx"],), extra))
    return sweeps


def target_in_grid(model_keys, contexts) -> bool:
    """Whether a sweep of `model_keys` x `contexts` holds the target cell's model and context (TARGETS), on whichever
    GPU it runs: every lever of LEVERS is measured there, TARGET_CELL_ONLY's too, so that a GPU measured anew gets
    the whole ladder at that cell. The targets themselves are judged on their own GPU alone. History: until
    2026-12-06 the target cell was the targets' GPU's alone, so no other GPU timed a TARGET_CELL_ONLY lever that
    was not promoted (an H100 call for the two norm-scale levers that day swept nothing)."""
    target = TARGETS["bf16"]
    return target["model"] in model_keys and target["ctx"] in contexts
