"""Notebook 07, where the thesis ends: the paper claims a per-step fixed cost for batch-1 decode of 7-8B models; this
experiment moves the two things that set the ratio of that cost to the bytes a step reads, the work per weight byte
(the batch axis: several sequences decoded together) and the bytes per step (the model-size axis: the Qwen2.5 family
from 0.5B to 32B, random bf16 weights built on the device). Its replay side: `rows`, `tables` and `findings` (analysis.where_the_thesis_ends). Its measuring side: the sweeps of both axes (`plan`),
their kernel counts per step (`kernel_plan`) and `measure`, all through the one sweep harness into
data/raw/<gpu>/decode.csv, verify.csv, kernels.csv and breakdown.csv, every row with its `batch`.

Each axis resumes like every sweep (a killed run carries on where it stopped: `python -m decodegap scope --axis
AXIS` again), and each of its two sweeps (SWEEPS) can be measured alone (`--sweep timed` with the profiled steps,
`--sweep compiled`):

  batch  llama-3.1-8b at ctx 2048, B in BATCHES, SESSIONS sessions: eager, graph and the lean levers (LEAN_LEVERS)
         at every B; compile and lean_compile at COMPILE_BATCHES only, in a sweep of their own after the first, in
         COMPILE_SESSIONS session (a compile each, the costliest cells). Then one profiled step per B of each
         PROFILED_ARMS step.
  size   every SIZE_MODELS config at SIZE_CONTEXTS, batch 1, SESSIONS sessions: eager, graph and the lean levers;
         compile at SIZE_COMPILE_CONTEXTS only, in a sweep after the first, in COMPILE_SESSIONS session. Then one
         profiled step of each PROFILED_ARMS step per model and context.

`again` measures every cell of both sweeps again in a new run (the profiled steps are not: a step's kernels do not
change between runs of the same code); the readers take each cell's newest measurement (selection.newest_measurement),
so the new run replaces the old rows whole, and a run cut by its call's time limit is resumed by the same command
without `again`.

The lean levers: LEAN_BEST, the fastest lever of notebook 06's ladder at its target cell (a test reads
figures/06_ladder.csv), runs the fused Triton step, whose products take one row; at batch > 1 its cells are
`unavailable`, the reason naming LEAN_FALLBACK (arms.batch_fallback: the same graphed lean step with cuBLAS products
and the split-KV attention kernel, which reads the B sequences as B x kv_heads heads), which every cell of both axes
measures beside it, with lean_graph (the graphed lean step on SDPA under a mask, which, as HF's step, expands K and V
to every query head: the copy that grows with B x ctx).

Sessions are numbered from FIRST_SESSION, apart from the grid sweeps' sessions of the same cells (the batch-1 cells
of llama-3.1-8b and qwen2.5-7b are notebook 01, 02 and 06's too): each axis's cells are its own, measured in the same
sessions under the same conditions, never topped up from another sweep's rows.

The plans were sized from the H200's env.json session timings (each session's `timing`: start-up, imports, model
builds, cells) of the first runs of both axes, one session each, and of the grid's compiled cells: the compiled cells
cost the most, a compile per cell and process, so they take COMPILE_SESSIONS session (their fits carry no session
range) while the timed arms take SESSIONS, which gives W1 and W2a a session range; past batch 1 the prefill of B
sequences, paid by every timed and checked pass of a cell, grows with B; the profiled steps rebuild each model once.
At three sessions an axis's two sweeps together outgrow one 10-minute call, so each sweep is a call of its own (the
timed sweep with the profiled steps, then the compiled sweep). Each session's timing in env.json shows what a run
took."""


from __future__ import annotations

from pathlib import Path

import pandas as pd

from decodegap import arms as arm_registry, checked, hardware, paths, published, records, roofline, sessions
from decodegap.analysis import where_the_thesis_ends as scope
from decodegap.analysis import where_the_thesis_ends_anatomy as anatomy
from decodegap.harness import keys, models as model_specs, profile
from decodegap.harness.sweep import SweepPlan, check_batches, run_sweep
from decodegap.inputs import InputError

NOTEBOOK = "07_where_the_thesis_ends"
AXES = ("batch", "size")

BATCHES = (1, 2, 4, 8, 16, 32, 64)
"""The batch axis: sequences decoded together per step."""
BATCH_MODEL = "llama-3.1-8b"
BATCH_CONTEXTS = (2048,)
COMPILE_BATCHES = (1, 8, 64)
"""The batches of the compiled arms (a compile per batch; dynamic shapes make the batch symbolic only past 1)."""

SIZE_MODELS = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b")
"""The model-size axis: the Qwen2.5 family (data/models/), the paper's headline model among them."""
SIZE_CONTEXTS = (2048, 8192)
SIZE_COMPILE_CONTEXTS = (2048,)

LEAN_BEST = "lean_fused_kv_together_graph"
"""The fastest bf16 lever confirmed at notebook 06's target cell (levers.TARGETS: llama-3.1-8b, ctx 2048, H200;
experiments.closing_the_gap.confirmed_at_target, which tests/test_where_the_thesis_ends.py checks it against): a
lever the selection sweeps pick there moves it once its confirmation holds (until 2026-12-05 the test read the
ladder's fastest checked lever, figures/06_ladder.csv). History: lean_fused_early_products_graph until 2026-12-05,
when run 20261205T053526-b283dc confirmed lean_fused_next_token_graph in 3 fresh sessions (its runner-up was not
timed in them: notebook 06 says so); that lever until run 20261205T143337-c9c069 (2026-12-05) confirmed
lean_fused_norm_scale_graph beside it; that lever until run 20261205T155814-2be9f5 (2026-12-05) confirmed
lean_fused_kv_together_graph beside it. The rows of both axes were measured with lean_fused_early_products_graph and
name it; a sweep of an axis adds the new lever's cells beside them (at batch > 1 both are measured as
LEAN_FALLBACK)."""
LEAN_FALLBACK = arm_registry.batch_fallback(LEAN_BEST)
"""What LEAN_BEST's step is measured as at batch > 1 (its reason says so): the graphed lean step on cuBLAS products
and the split-KV attention kernel (lean_attn_graph)."""
LEAN_LEVERS = (LEAN_BEST, LEAN_FALLBACK, "lean_graph")
TIMED_ARMS = ("eager", "graph") + LEAN_LEVERS
"""The arms of every cell of both axes."""
COMPILED_ARMS = {"batch": ("compile", "lean_compile"), "size": ("compile",)}
"""The compiled arms of each axis, in their own sweep after the others."""
PROFILED_ARMS = ("eager", "lean", LEAN_FALLBACK)
"""The steps profiled per cell (profile.record_kernels: a graph replays the eager step's kernels, lean_graph the lean
step's; LEAN_FALLBACK is profiled as itself, the step of the lean levers at every batch), their kernel counts in
kernels.csv for the step model's n_kernels."""
SESSIONS, COMPILE_SESSIONS = 3, 1
"""Sessions of the timed arms and of the compiled arms (module docstring: what fits one 10-minute call)."""
SWEEPS = ("timed", "compiled")
"""The two sweeps of an axis (`plan`), each measured alone by `measure(which=...)`: bench/measure.sh runs each as a
step of its own (batch, batch_compile, size, size_compile), one 10-minute call each."""
FIRST_SESSION = sessions.SCOPE.start
"""The number of each axis's first session (see the module docstring): the start of notebook 07's band of session
numbers (decodegap.sessions), above every session of the grid sweeps and below the confirmations'."""


def plan(gpu: str, axis: str, models=None, contexts=None, batches=None, sessions: int = SESSIONS, steps: int = 30,
         warmup: int = 5, device: str = "cuda", retry_errors: bool = False, compile_sessions: int = COMPILE_SESSIONS,
         again: bool = False) -> list[SweepPlan]:
    """The sweeps of one axis (module docstring), in the order `measure` runs them: the timed arms at every batch
    and context in `sessions` sessions, then the compiled arms at their batches or contexts in `compile_sessions`.
    `models`, `contexts`, `batches` replace the axis's own (a smaller run; the tests' tiny models on a CPU); `again`
    measures every cell again in a new run."""
    axis = check_axis(axis)
    if axis == "batch":
        models = tuple(models or (BATCH_MODEL,))
        contexts = tuple(contexts or BATCH_CONTEXTS)
        batches = check_batches(batches or BATCHES)
        compiled = dict(batches=tuple(b for b in batches if b in COMPILE_BATCHES) or batches[:1], contexts=contexts)
    else:
        if batches is not None and tuple(batches) != (1,):
            raise InputError(f"the size axis is measured at batch 1; --batches {list(batches)} belongs to --axis batch")
        models = tuple(models or SIZE_MODELS)
        contexts = tuple(contexts or SIZE_CONTEXTS)
        batches = (1,)
        compiled = dict(batches=batches, contexts=tuple(c for c in contexts if c in SIZE_COMPILE_CONTEXTS)
                        or contexts[:1])
    common = dict(gpu=gpu, models=models, steps=steps, warmup=warmup, device=device, first_session=FIRST_SESSION,
                  retry_errors=retry_errors, again=again)
    return [SweepPlan(contexts=contexts, arms=TIMED_ARMS, batches=batches, sessions=sessions, **common),
            SweepPlan(contexts=compiled["contexts"], arms=COMPILED_ARMS[axis], batches=compiled["batches"],
                      sessions=compile_sessions, **common)]


def kernel_plan(axis: str, models=None, contexts=None, batches=None) -> dict:
    """The arguments of the axis's profile.record_kernels call (models, contexts, arms, batches): PROFILED_ARMS at
    every model, context and batch of the axis's first sweep."""
    first = plan("-", axis, models, contexts, batches)[0]
    return dict(model_keys=first.models, contexts=first.contexts, arms=PROFILED_ARMS, batches=first.batches)


def check_axis(axis: str) -> str:
    """One of AXES, else an InputError saying which."""
    if axis not in AXES:
        raise InputError(f"unknown axis {axis!r}; `scope --axis` takes one of {', '.join(AXES)}")
    return axis


def check_sweeps(which) -> tuple[str, ...]:
    """`which` (one of SWEEPS, "both", or several of SWEEPS) as a tuple of SWEEPS, in their order, else an InputError
    naming the unknown one."""
    which = SWEEPS if which == "both" else (which,) if isinstance(which, str) else tuple(which)
    unknown = [w for w in which if w not in SWEEPS]
    if unknown or not which:
        raise InputError(f"unknown sweep {unknown[0] if unknown else which!r}; `scope --sweep` takes "
                         f"{', '.join(SWEEPS)} or both")
    return tuple(w for w in SWEEPS if w in which)


def measure(gpu: str, axis: str, models=None, contexts=None, batches=None, sessions: int = SESSIONS, steps: int = 30,
            warmup: int = 5, device: str = "cuda", data=None, count_kernels: bool = True,
            retry_errors: bool = False, progress: bool = True, compile_sessions: int = COMPILE_SESSIONS,
            again: bool = False, which=SWEEPS) -> list[str]:
    """Notebook 07's measurements of one axis, resumable: the sweeps of `plan` named in `which` (sweep.run_sweep,
    each cell checked against eager in the run, every sequence of a batch), then, with the timed sweep and
    `count_kernels`, the profiled steps of `kernel_plan` (profile.record_kernels). Every key and value is checked
    before anything is written. Returns the sweeps' run ids."""
    which = check_sweeps(which)
    sweeps = dict(zip(SWEEPS, plan(gpu, axis, models, contexts, batches, sessions, steps, warmup, device,
                                   retry_errors, compile_sessions, again)))
    keys.gpu_to_measure(gpu, device, data)
    keys.models(sweeps["timed"].models, data)
    run_ids = [run_sweep(sweeps[w], data, progress=progress) for w in which]
    if count_kernels and "timed" in which:
        profile.record_kernels(gpu, data=data, device=device, **kernel_plan(axis, models, contexts, batches))
    return run_ids


def rows(data) -> pd.DataFrame:
    """The decode rows notebook 07 reads (scope.bf16_rows): bf16, every arm, model and batch, each timed row joined
    to the checks of its own run (an unchecked cell is a status row, never a timing: checked.labelled)."""
    return scope.bf16_rows(checked.labelled(checked.load("decode", Path(data), grid=False)))


def own_rows(data) -> pd.DataFrame:
    """The rows of this notebook's own sweeps that its rules read (scope.scope_rows of `rows`: its band of sessions,
    each cell's newest measurement), for `python -m decodegap check`'s provenance of the counted rows."""
    return scope.scope_rows(rows(data))


def tables(data=None, gpu: str | None = None) -> dict:
    """Notebook 07's tables (scope.replay) from a data folder: every GPU's rows, or `gpu`'s alone, with the GPU
    specs, the published numbers and the configs of the rows' and the published models."""
    data = paths.data_dir(data)
    decode_rows = rows(data)
    if gpu is not None:
        decode_rows = decode_rows[decode_rows["gpu"] == gpu]
    specs = hardware.specs_table(data)
    pub = published.load(data)
    configs = model_specs.configs(set(decode_rows["model"]) | set(pub["model"].dropna()), data)
    t = scope.replay(decode_rows, specs, pub, configs)
    ours = set(SIZE_MODELS) | {BATCH_MODEL}
    breakdown, kernels = (records.load_experiment(name, data) for name in ("breakdown", "kernels"))
    breakdown, kernels = (scope.with_batch(f[f["model"].isin(ours) & ((f["gpu"] == gpu) if gpu else True)])
                          if not f.empty else f for f in (breakdown, kernels))
    t["copies"] = anatomy.copy_shares(breakdown)
    t["axis_fits"] = anatomy.axis_fits(t["scope"], anatomy.kernel_counts(kernels), SIZE_MODELS, BATCH_MODEL)
    t["sources"] = hardware.run_sources(hardware.load_env(data))  # each run's source digest
    return t


def findings(t: dict) -> dict:
    """{"07_findings": scope.findings(t), then the anatomy's descriptive lines (copy shares, per-axis fits) and the
    cells of notebook 07's own sweeps whose sessions ran more than one version of the code
    (roofline.code_versions_within_cells)}."""
    return {"07_findings": scope.findings(t) + anatomy.findings(t["copies"], t["axis_fits"])
            + roofline.code_versions_within_cells(t["scope_rows"], t.get("sources", {}), scope.CELL)}
