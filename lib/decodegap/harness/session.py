"""The body of one fresh session process of a sweep (`python -m decodegap _session`, started by
harness.sweep): it builds each model once, quantises and checks it where the plan asks, and measures its cells,
appending each cell's rows as one atomic block; `@@start`, `@@done` and `@@timing` lines tell the parent process
which cell it is in and where its wall time went (with, where a tuned kernel chose launch configs in the process,
which ones: kernels.tuned_choices).
"""

from __future__ import annotations

import json
import os
import time
import traceback
from dataclasses import asdict

from decodegap.harness import decode, hf_attention, models
from decodegap import paths, records
from decodegap.accounting import HEAD_QUANTISED
from decodegap.arms import COMPILED_ARMS
from decodegap.harness.sweep import SPAWNED_AT, Cell, SweepPlan, free_device_memory, status_rows
from decodegap.harness.verification import check_cell, passed_in_run, verify_row, wants_check
from decodegap.kernels import tuned_choices
from decodegap.outcome import classify, failure


def _timing_rows(plan: SweepPlan, run_id: str, session: int, cell: Cell, t: decode.ArmTiming) -> list[dict]:
    base = dict(run_id=run_id, session=session, gpu=plan.gpu, model=cell.model, ctx=cell.ctx, batch=cell.batch,
                max_cache_len=t.max_cache_len, arm=cell.arm, attn=cell.attn, quant=cell.quant, reason="")
    rows = [dict(base, step=i, step_ms=ms, status="warmup") for i, ms in enumerate(t.warmup_ms)]
    rows += [dict(base, step=i, step_ms=ms, status="ok") for i, ms in enumerate(t.step_ms)]
    return rows


def _say(tag: str, session: int, cell: Cell) -> None:
    print(f"@@{tag} " + json.dumps([session, asdict(cell)]), flush=True)


def measure_cell(plan: SweepPlan, model, cell: Cell, run_id: str, session: int, data,
                 cache_len: int | None = None) -> list[dict]:
    """Time one cell and return its rows; a non-eager arm is checked against eager first where `wants_check`.
    A compiled arm is checked right after its timing instead, on the compiled step the timing used (same
    cache length, nothing compiles again), so that its first warm-up row holds the compile time; if that
    check fails the cell gets an `error` row and its timings are dropped. `cache_len`: the cache the cell runs
    with when longer than its own (decode.shared_cache_lens: one compile serving a model's contexts)."""
    check = wants_check(plan, cell, run_id, session, data)
    check_after = check and cell.arm in COMPILED_ARMS
    try:
        if check and not check_after:  # an arm that cannot run here raises ArmUnavailable (below); the check
            # uses the timing run's cache length
            check_cell(plan, model, cell, run_id, session, data,
                   cache_len or decode.max_cache_len(cell.arm, cell.ctx, plan.warmup, plan.steps))
        timing = decode.run_arm(model, cell.arm, cell.ctx, plan.warmup, plan.steps, seed=plan.seed, attn=cell.attn,
                                cache_len=cache_len, batch=cell.batch)
        if check_after:
            check_cell(plan, model, cell, run_id, session, data, timing.max_cache_len)
        return _timing_rows(plan, run_id, session, cell, timing)
    except Exception as exc:  # a failing cell must not end the sweep (outcome.failure); tracebacks go to stderr
        from decodegap.harness.attention import NO_KERNEL, NO_KERNEL_REASON

        if isinstance(exc, RuntimeError) and NO_KERNEL in str(exc):  # a forced SDPA backend refused the call
            return status_rows(plan, run_id, session, cell, "unavailable", f"{NO_KERNEL_REASON}: {exc}")
        return status_rows(plan, run_id, session, cell, *failure(exc, (decode.ArmUnavailable,)))
    finally:
        free_device_memory(plan.device)


QUANT_CHECK_FAILED = "the quantised model failed its check against the bf16 model it was quantised from (verify.csv, check vs_bf16)"
HEAD_CHECK_FAILED = ("the quantised LM head failed its check against the bf16 head it was quantised from (verify.csv, "
                     "check vs_bf16_head)")
LAYER_CHECK_FAILED = ("a quantised layer failed its check in this run (verify.csv, check layer or format: the model's "
                      "own layers against their dequantised weight, at one row or the prefill's rows)")


def _quantise_checked(plan: SweepPlan, model, cells, run_id: str, session: int, data) -> dict[int, str]:
    """Quantise `model` in place to plan.quant from its own bf16 weights (quant.quantise_model_). Where this run
    has no passing model check yet of a context of `cells` (passed_in_run; with plan.check_every_session, always;
    with plan.verify), every decoder layer's input and output of the bf16 model is recorded first at those
    contexts (harness.quant_checks.record_layers) and the null of the model check is measured on it (harness.quant_checks.model_tolerance:
    the bf16 model with its format's rounding noise; a vs_bf16_null row); every layer is checked as it is quantised
    (its weights against half its format's step, its output at one row and at each context's prefill rows against
    its dequantised weight: format and layer rows of this run), and the quantised model's layers, fed the recorded
    inputs, are checked against the recorded outputs (verify.csv, check vs_bf16, tolerance MODEL_K_PASS x the
    null; layer by layer, teacher-forced: harness.quant_checks); a path that quantises the LM head has its head
    checked the same way, with a null of its own (checks vs_bf16_head_null and vs_bf16_head). A context this run
    checked already (both checks, for such a path) is not checked again; its cells are not timed where this run's check of it failed. Returns {ctx: reason} for the contexts whose
    checks failed or could not run: their cells are recorded as `error` and never timed. QuantUnavailable
    propagates (the model is left as it was)."""
    from decodegap.quant import paths as quant

    ctxs = sorted({c.ctx for c in cells})
    resolved = quant.resolve(plan.quant, plan.device)
    head_path = resolved in HEAD_QUANTISED  # its head is checked too: a context counts as checked with both checks
    model_checks = ("vs_bf16", "vs_bf16_head") if head_path else ("vs_bf16",)
    todo = [ctx for ctx in ctxs if plan.verify and (plan.check_every_session or not all(passed_in_run(
        plan, run_id, Cell(cells[0].model, ctx, "eager", plan.attn, resolved), data, check) for check in model_checks))]
    if not todo:
        quant.quantise_model_(model, plan.quant)
        verify = paths.raw_dir(plan.gpu, data) / "verify.csv"
        rows = records.read_csv(verify, records.VERIFY) if verify.exists() else None
        if rows is None or rows.empty:
            return {}
        mine = rows[(rows.status != "ok") & (rows.gpu == plan.gpu) & (rows.run_id == run_id)
                    & (rows.model == cells[0].model) & (rows.quant == resolved)]
        out = {int(r.ctx): QUANT_CHECK_FAILED if r.check == "vs_bf16" else HEAD_CHECK_FAILED
               for r in mine[mine.check.isin(["vs_bf16", "vs_bf16_head"])].itertuples() if int(r.ctx) in ctxs}
        layer_bad = {0 if r.check == "format" else int(r.rows) for r in mine[mine.check.isin(["layer", "format"])].itertuples()}
        return {**out, **{ctx: LAYER_CHECK_FAILED for ctx in ctxs if layer_bad & {0, 1, ctx}}}
    ctxs = todo
    from decodegap.harness.quant_checks import forced_layer_error, layer_rows, model_tolerance, null_row, record_layers

    refs = {ctx: record_layers(model, ctx, seed=plan.seed) for ctx in ctxs}
    base = dict(run_id=run_id, session=session, gpu=plan.gpu, model=cells[0].model, quant=resolved)
    tols, rows = {}, []
    for ctx in ctxs:
        tol, null, draws = model_tolerance(model, plan.quant, ctx, refs[ctx], seed=plan.seed)
        tols[ctx] = tol
        rows.append(null_row(base, ctx, tol, null, draws, resolved))
    head = _head_nulls(plan, model, ctxs, base, resolved, rows) if head_path else {}
    info = quant.quantise_model_(model, plan.quant, checks=(1, *ctxs), seed=plan.seed)
    checked_layers = layer_rows(info, base)
    rows += checked_layers
    bad_rows = {r["rows"] if r["check"] == "layer" else 0 for r in checked_layers if r["status"] != "ok"}
    failed = {ctx: LAYER_CHECK_FAILED for ctx in ctxs if bad_rows & {0, 1, ctx}}
    for ctx in ctxs:
        cell = Cell(cells[0].model, ctx, "eager", plan.attn, info["path"])
        _forced_check(lambda: verify_row(plan, run_id, session, cell, forced_layer_error(
            model, ctx, refs.pop(ctx), seed=plan.seed), tols[ctx], "vs_bf16"), ctx, QUANT_CHECK_FAILED,
            "the check against bf16", rows, failed)
        if ctx in head:
            _check_head(plan, model, run_id, session, cell, head.pop(ctx), rows, failed)
    records.append_rows(paths.raw_dir(plan.gpu, data) / "verify.csv", records.VERIFY, rows)
    refs.clear()  # what a failed check left: freed before the cells are timed
    free_device_memory(plan.device)
    return failed


def _head_nulls(plan: SweepPlan, model, ctxs, base: dict, resolved: str, rows: list) -> dict[int, tuple]:
    """For a path that quantises the LM head, before it is quantised: per context the bf16 head's recorded inputs
    and logits (quant_checks.record_head) and the head check's null (quant_checks.head_tolerance; a
    vs_bf16_head_null row appended to `rows`). Returns {ctx: (reference, tolerance)}."""
    from decodegap.harness.quant_checks import head_tolerance, null_row, record_head

    out = {}
    for ctx in ctxs:
        ref = record_head(model, ctx, seed=plan.seed)
        tol, null, draws = head_tolerance(model, plan.quant, ctx, ref, seed=plan.seed)
        rows.append(null_row(base, ctx, tol, null, draws, resolved, check="vs_bf16_head_null", layer="lm_head"))
        out[ctx] = (ref, tol)
    return out


def _check_head(plan: SweepPlan, model, run_id: str, session: int, cell, head: tuple, rows: list, failed: dict) -> None:
    """The quantised LM head against the bf16 head (quant_checks.forced_head_error) at cell.ctx: a vs_bf16_head row
    (layer lm_head) appended to `rows`; a failure, or a check that cannot run, marks the context failed."""
    from decodegap.harness.quant_checks import forced_head_error

    reference, tol = head
    _forced_check(lambda: verify_row(plan, run_id, session, cell, forced_head_error(
        model, cell.ctx, reference, seed=plan.seed), tol, "vs_bf16_head", layer="lm_head"), cell.ctx,
        HEAD_CHECK_FAILED, "the head check against bf16", rows, failed)


def _forced_check(row_of, ctx: int, failed_reason: str, what: str, rows: list, failed: dict) -> None:
    """One check of a context against the bf16 model (the model's or the head's): `row_of()` computes it and gives
    its verify row, appended to `rows`; a row that does not pass marks `ctx` failed with `failed_reason`, a check
    that cannot run with why (`what` names the check)."""
    try:
        rows.append(row_of())
        if rows[-1]["status"] != "ok":
            failed.setdefault(ctx, failed_reason)
    except Exception as exc:  # noqa: BLE001 - a kernel that cannot run the check cannot be timed either
        traceback.print_exc()
        failed[ctx] = f"{what} could not run: {type(exc).__name__}: {str(exc).splitlines()[0]}"


def run_session(plan: SweepPlan, session: int, run_id: str, data=None) -> None:
    """Body of one fresh session process: measure every pending cell of `session`, model by model. After each
    model, and at the end, it reports where its wall time went so far (`@@timing`: start-up, imports, model builds,
    cells, the total and the tuner's choices), which the parent keeps in env.json as it comes: a sweep cut between
    models (a step's time limit kills parent and session alike) keeps the record of the models it finished."""
    spawned = float(os.environ.get(SPAWNED_AT, time.time()))
    began = time.time()
    import torch
    import transformers  # noqa: F401  (timed with torch: the imports every session pays)

    timing = dict(startup_s=began - spawned, import_s=time.time() - began, build_s={}, cells_s={})
    torch.manual_seed(plan.seed)
    schema = records.schema_for(plan.experiment)
    path = plan.csv_path(data)
    pending = plan.pending(session, data, run_id)
    for model_key in dict.fromkeys(c.model for c in pending):
        cells = [c for c in pending if c.model == model_key]
        t0 = time.time()
        try:
            spec = models.load_spec(model_key, data)
            model = models.build_model(spec, device=plan.device, attn=hf_attention.hf_implementation(plan.attn),
                                       checkpoint_dir=plan.checkpoints.get(model_key), seed=plan.seed)
            failed = {}
            if plan.quant != "bf16":  # swap the decoder layers' nn.Linear for the path's, from their own weights
                failed = _quantise_checked(plan, model, cells, run_id, session, data)
        except Exception as exc:
            from decodegap.quant.loaders import QuantUnavailable

            status, why = classify(exc, (QuantUnavailable,), oom="model did not fit")
            if status == "error":  # not a cell's outcome: the session ends with its traceback
                raise
            for cell in cells:
                records.append_rows(path, schema, status_rows(plan, run_id, session, cell, status, why))
                _say("done", session, cell)
            model = None
            free_device_memory(plan.device)
            _report(timing, spawned)
            continue
        timing["build_s"][model_key] = time.time() - t0
        t0 = time.time()
        shared = decode.shared_cache_lens([(c.arm, c.ctx) for c in cells if c.ctx not in failed and c.batch == 1],
                                          plan.warmup, plan.steps)
        for cell in cells:
            _say("start", session, cell)
            if cell.ctx in failed:
                rows = status_rows(plan, run_id, session, cell, "error", failed[cell.ctx])
            else:
                rows = measure_cell(plan, model, cell, run_id, session, data,
                                    shared.get(cell.arm) if cell.batch == 1 else None)
            records.append_rows(path, schema, rows)
            _say("done", session, cell)
        timing["cells_s"][model_key] = time.time() - t0
        decode.release_compiled()
        del model
        free_device_memory(plan.device)
        _report(timing, spawned)
    if not pending:  # nothing to measure: the report each model's end gives is still owed once
        _report(timing, spawned)


def _report(timing: dict, spawned: float) -> None:
    """One `@@timing` line: `timing` so far, its total the wall time since the process was spawned, and the launch
    configs the tuned kernels chose in this process so far (each session tunes again)."""
    timing["total_s"] = time.time() - spawned
    tuned = tuned_choices()
    if tuned:
        timing["tuned"] = tuned
    print("@@timing " + json.dumps({k: v if k == "tuned" else _rounded(v) for k, v in timing.items()}), flush=True)


def _rounded(value):
    return {k: round(v, 2) for k, v in value.items()} if isinstance(value, dict) else round(value, 2)
