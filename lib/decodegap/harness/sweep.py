"""Sweeps of fresh sessions. A session is a new Python process (`python -m decodegap _session`), as in
the paper's N fresh sessions: it builds each model once, measures its cells and appends each cell's rows
as one atomic block. The parent process only plans, shows progress and records the environment.

Resume: a cell (session, gpu, model, ctx, arm, attn, quant, batch) with any row in the CSV is done; a killed
sweep started again measures only what is missing. A session process that dies inside a cell (device
assert, segfault) leaves an `error` row for that cell with the exit code, and the sweep goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from decodegap.harness import decode, hf_attention, keys, models, runs
from decodegap import hardware, inputs, paths, records, selection
from decodegap.arms import COMPILED_ARMS
from decodegap.compare import VERIFY_TOL
from decodegap.outcome import classify, failure

SPAWNED_AT = "DECODEGAP_SESSION_SPAWNED_AT"  # set by the parent: when it started the session process (epoch s)


@dataclass(frozen=True)
class Cell:
    model: str
    ctx: int
    arm: str
    attn: str = "sdpa"
    quant: str = "bf16"
    batch: int = 1  # sequences decoded together, each of context ctx (decode.run_arm)


def check_batches(values) -> tuple[int, ...]:
    """Batch sizes of a plan: whole numbers of sequences, at least 1, each once. Raises inputs.InputError naming the
    bad value, before anything is measured or written."""
    out = tuple(values)
    if not out:
        raise inputs.InputError("no batch size given; pass one or more whole numbers of sequences, e.g. 1,8,64")
    for b in out:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise inputs.InputError(f"batch {b!r} is not a whole number of sequences >= 1 (--batches takes e.g. "
                                    "1,2,4,8)")
    if len(set(out)) != len(out):
        raise inputs.InputError(f"batch sizes {list(out)} repeat a value; give each once")
    return out


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep measures. `sessions` fresh processes each measure every cell once; the arms of a
    cell run in an order that alternates between sessions (reversed on odd sessions). Sessions are numbered from
    `first_session`: a second plan over cells an earlier plan also measured (notebook 02's headline cells after
    its grid) starts after that plan's sessions, so that it adds `sessions` of its own instead of topping the
    cells up to `sessions` in all. A plan's first session checks each non-eager arm before timing it."""

    gpu: str
    models: tuple[str, ...]
    contexts: tuple[int, ...]
    arms: tuple[str, ...] = ("eager", "hf_default")
    sessions: int = 3
    steps: int = 30
    warmup: int = 5
    attn: str = "sdpa"
    quant: str = "bf16"
    experiment: str = "decode"
    device: str = "cuda"
    seed: int = 0
    verify: bool = True
    checkpoints: dict = field(default_factory=dict)  # model key -> local checkpoint folder
    retry_unavailable: bool = False  # measure again cells recorded only as `unavailable`
    retry_errors: bool = False  # measure again cells recorded only as `error` (after the cause is fixed)
    first_session: int = 0  # the number of this plan's first session (see above)
    again: bool = False  # measure every cell again in this run; the older rows stay (roofline.one_sweep reads the latest)
    check_every_session: bool = False  # check every non-eager arm in every session, not only once per run (below)
    batches: tuple[int, ...] = (1,)  # sequences decoded together per cell (check_batches); bf16, SDPA only above 1

    def __post_init__(self):
        """A misspelled arm, backend or path, or a context that is not a whole number, is refused here, before any
        row is written (inputs.InputError), never measured as an `unavailable` cell."""
        keys.arms(self.arms)
        keys.attn(self.attn)
        keys.quant(self.quant)
        inputs.contexts(self.contexts)
        if not self.models:
            raise inputs.InputError("no model given; pass one or more model keys (--models / MODELS)")
        for name in ("sessions", "steps"):
            inputs.positive(name, getattr(self, name))
        inputs.positive("warmup", self.warmup, 0)
        inputs.positive("first_session", self.first_session, 0)
        check_batches(self.batches)
        if max(self.batches) > 1 and (self.quant != "bf16" or self.attn != "sdpa"):
            raise inputs.InputError(f"batch > 1 is measured in bf16 with SDPA's default attention only (the "
                                    f"quantisation paths' kernels and the other attention backends are measured at "
                                    f"batch 1); got quant {self.quant!r}, attn {self.attn!r}, batches "
                                    f"{list(self.batches)}")

    @property
    def session_ids(self) -> range:
        """The numbers of this plan's sessions."""
        return range(self.first_session, self.first_session + self.sessions)

    def cells(self, session: int) -> list[Cell]:
        """Every cell of `session`: per model, context and batch the arms, in this session's order."""
        arms = self.arms if session % 2 == 0 else tuple(reversed(self.arms))
        return [Cell(m, c, a, self.attn, self.quant, b) for m in self.models for c in self.contexts
                for b in self.batches for a in arms]

    def key(self, session: int, cell: Cell) -> tuple:
        """The cell's key in its CSV (selection.done_keys: the schema's key columns, as text)."""
        values = dict(asdict(cell), session=session, gpu=self.gpu)
        return tuple(str(values[c]) for c in records.schema_for(self.experiment).key)

    def csv_path(self, data) -> Path:
        return paths.raw_dir(self.gpu, data) / f"{self.experiment}.csv"

    def pending(self, session: int, data, run_id: str | None = None) -> list[Cell]:
        """Cells of `session` not yet in the CSV (rows of `run_id`, the run going on, always count)."""
        retry = ("unavailable",) * self.retry_unavailable + ("error",) * self.retry_errors
        done = selection.done_keys(self.csv_path(data), records.schema_for(self.experiment), retry, run_id, self.again)
        return [c for c in self.cells(session) if self.key(session, c) not in done]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "SweepPlan":
        raw = json.loads(text)
        for k in ("models", "contexts", "arms", "batches"):
            if k in raw:
                raw[k] = tuple(raw[k])
        return cls(**raw)


def status_rows(plan: SweepPlan, run_id: str, session: int, cell: Cell, status: str, reason: str) -> list[dict]:
    return [dict(run_id=run_id, session=session, gpu=plan.gpu, model=cell.model, ctx=cell.ctx, batch=cell.batch,
                 max_cache_len=None, arm=cell.arm, attn=cell.attn, quant=cell.quant, step=None, step_ms=None,
                 status=status, reason=reason.replace("\n", " ")[:300])]


def _timing_rows(plan: SweepPlan, run_id: str, session: int, cell: Cell, t: decode.ArmTiming) -> list[dict]:
    base = dict(run_id=run_id, session=session, gpu=plan.gpu, model=cell.model, ctx=cell.ctx, batch=cell.batch,
                max_cache_len=t.max_cache_len, arm=cell.arm, attn=cell.attn, quant=cell.quant, reason="")
    rows = [dict(base, step=i, step_ms=ms, status="warmup") for i, ms in enumerate(t.warmup_ms)]
    rows += [dict(base, step=i, step_ms=ms, status="ok") for i, ms in enumerate(t.step_ms)]
    return rows


def _say(tag: str, session: int, cell: Cell) -> None:
    print(f"@@{tag} " + json.dumps([session, asdict(cell)]), flush=True)


def free_device_memory(device: str) -> None:
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def verify_row(plan: SweepPlan, run_id: str, session: int, cell: Cell, err: float, tol: float, check: str,
               reason: str = "") -> dict:
    """A verify.csv row of a model check (records.CHECKS): `ok` when the error passes `tol`, else `error`."""
    from decodegap.quant.paths import passes

    return dict(run_id=run_id, session=session, gpu=plan.gpu, model=cell.model, ctx=cell.ctx, batch=cell.batch,
                arm=cell.arm, attn=cell.attn, quant=cell.quant, max_rel_err=err, tol=tol,
                status="ok" if passes(err, tol) else "error", reason=reason, check=check, layer="model", rows=None)


def _check(plan: SweepPlan, model, cell: Cell, run_id: str, session: int, data, cache_len: int) -> None:
    """Check the cell's arm against eager (checks.verify_arm: each of its batch's sequences against the same sequence
    of the eager step) and append the verdict to verify.csv, passed or failed, the worst sequence's error
    (its reason names the sequence where the batch holds more than one); a failed check then raises
    AssertionError (the cell is not timed)."""
    from decodegap.harness import checks

    errors: list[float] = []
    err = checks.verify_arm(model, cell.arm, cell.ctx, seed=plan.seed, tol=VERIFY_TOL, attn=cell.attn,
                            cache_len=cache_len, raise_past_tol=False, batch=cell.batch, sequences=errors)
    row = verify_row(plan, run_id, session, cell, err, VERIFY_TOL, "vs_eager", sequences_reason(errors))
    records.append_rows(paths.raw_dir(plan.gpu, data) / "verify.csv", records.VERIFY, [row])
    if row["status"] != "ok":
        raise AssertionError(f"arm {cell.arm!r} at ctx {cell.ctx}: logits differ from eager by {err:.3g} "
                             f"(> {VERIFY_TOL}; verify.csv)")
    config = model.config.to_dict()
    if wants_sharp_check(cell, config):
        sharp = checks.verify_arm_sharpened(model, cell.arm, cell.ctx, seed=plan.seed, tol=checks.SHARP_TOL,
                                            attn=cell.attn, cache_len=cache_len, factor=checks.factor_for(config),
                                            batch=cell.batch)
        records.append_rows(paths.raw_dir(plan.gpu, data) / "verify.csv", records.VERIFY,
                            [verify_row(plan, run_id, session, cell, sharp, checks.SHARP_TOL, "vs_eager_sharp")])


def sequences_reason(errors: list[float]) -> str:
    """The reason of a check of several sequences: how many, and which was the worst (as verify.csv's max_rel_err
    holds its error); empty for one sequence (a batch-1 check's row is as it always was)."""
    if len(errors) <= 1:
        return ""
    bad = [i for i, e in enumerate(errors) if e != e]
    at = bad[0] if bad else max(range(len(errors)), key=errors.__getitem__)
    return f"each of {len(errors)} sequences against eager's; the worst is sequence {at}"


def wants_sharp_check(cell: Cell, config=None) -> bool:
    """Whether a cell also gets the sharpened-attention check (sharp_check; recorded, not gating), bf16 only: a lean
    arm that is not compiled (a compiled one would compile its sharpened decoder again) with SDPA's default, or an
    HF arm running one of hf_attention's kernels (FA2, FA3, FlashInfer: attention code of decodegap's own inside the
    HF step); and, given the model's `config`, only where its attention scores are too flat for the plain check
    (sharp_check.factor_for above 1: the tiny and narrow models, not the paper's)."""
    from decodegap.arms import REGISTRY
    from decodegap.harness.hf_attention import IN_MODEL
    from decodegap.harness.checks import factor_for

    arm = REGISTRY.get(cell.arm)
    if arm is None or arm.runner == "compile" or cell.quant != "bf16":
        return False
    if config is not None and factor_for(config) <= 1.0:
        return False
    return (arm.decoder == "lean" and cell.attn == "sdpa") or (arm.decoder == "hf" and cell.attn in IN_MODEL)


def passed_in_run(plan: SweepPlan, run_id: str, cell: Cell, data, check: str = "vs_eager") -> bool:
    """Whether verify.csv holds a passing `check` (status ok) of `cell` from run `run_id` (for vs_bf16, the model
    check, at the cell's model, context and quantisation, arm eager as it is recorded)."""
    path = paths.raw_dir(plan.gpu, data) / "verify.csv"
    if not path.exists():
        return False
    v = records.read_csv(path, records.VERIFY)
    v = v[(v["run_id"] == run_id) & (v["check"] == check) & (v["status"] == "ok") & (v["gpu"] == plan.gpu)
          & (v["model"] == cell.model) & (v["ctx"].astype(int) == int(cell.ctx)) & (v["quant"] == cell.quant)
          & (v["batch"].astype(int) == int(cell.batch))]
    if check == "vs_eager":
        v = v[(v["arm"] == cell.arm) & (v["attn"] == cell.attn)]
    return not v.empty


def wants_check(plan: SweepPlan, cell: Cell, run_id: str, session: int, data) -> bool:
    """Whether `cell` is checked against eager before (a compiled arm: right after) its timing in `session`: a
    non-eager arm with plan.verify, in every session with plan.check_every_session, else where this run has no
    passing check of the cell yet (passed_in_run)."""
    if not plan.verify or (cell.arm == "eager" and cell.attn == "sdpa"):
        return False
    return plan.check_every_session or not passed_in_run(plan, run_id, cell, data)


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
            _check(plan, model, cell, run_id, session, data,
                   cache_len or decode.max_cache_len(cell.arm, cell.ctx, plan.warmup, plan.steps))
        timing = decode.run_arm(model, cell.arm, cell.ctx, plan.warmup, plan.steps, seed=plan.seed, attn=cell.attn,
                                cache_len=cache_len, batch=cell.batch)
        if check_after:
            _check(plan, model, cell, run_id, session, data, timing.max_cache_len)
        return _timing_rows(plan, run_id, session, cell, timing)
    except Exception as exc:  # a failing cell must not end the sweep (outcome.failure); tracebacks go to stderr
        from decodegap.harness.attention import NO_KERNEL, NO_KERNEL_REASON

        if isinstance(exc, RuntimeError) and NO_KERNEL in str(exc):  # a forced SDPA backend refused the call
            return status_rows(plan, run_id, session, cell, "unavailable", f"{NO_KERNEL_REASON}: {exc}")
        return status_rows(plan, run_id, session, cell, *failure(exc, (decode.ArmUnavailable,)))
    finally:
        free_device_memory(plan.device)


QUANT_CHECK_FAILED = "the quantised model failed its check against the bf16 model it was quantised from (verify.csv, check vs_bf16)"
LAYER_CHECK_FAILED = ("a quantised layer failed its check in this run (verify.csv, check layer or format: the model's "
                      "own layers against their dequantised weight, at one row or the prefill's rows)")


def _quantise_checked(plan: SweepPlan, model, cells, run_id: str, session: int, data) -> dict[int, str]:
    """Quantise `model` in place to plan.quant from its own bf16 weights (quant.quantise_model_). Where this run
    has no passing model check yet of a context of `cells` (passed_in_run; with plan.check_every_session, always;
    with plan.verify), every decoder layer's input and output of the bf16 model is recorded first at those
    contexts (quant_check.record_layers) and the null of the model check is measured on it (quant_check.model_tolerance:
    the bf16 model with its format's rounding noise; a vs_bf16_null row); every layer is checked as it is quantised
    (its weights against half its format's step, its output at one row and at each context's prefill rows against
    its dequantised weight: format and layer rows of this run), and the quantised model's layers, fed the recorded
    inputs, are checked against the recorded outputs (verify.csv, check vs_bf16, tolerance MODEL_K_PASS x the
    null; layer by layer, teacher-forced: quant_check). A context this run checked already is not checked again;
    its cells are not timed where this run's check of it failed. Returns {ctx: reason} for the contexts whose
    checks failed or could not run: their cells are recorded as `error` and never timed. QuantUnavailable
    propagates (the model is left as it was)."""
    from decodegap.quant import paths as quant

    ctxs = sorted({c.ctx for c in cells})
    resolved = quant.resolve(plan.quant, plan.device)
    todo = [ctx for ctx in ctxs if plan.verify and (plan.check_every_session or not passed_in_run(
        plan, run_id, Cell(cells[0].model, ctx, "eager", plan.attn, resolved), data, "vs_bf16"))]
    if not todo:
        quant.quantise_model_(model, plan.quant)
        verify = paths.raw_dir(plan.gpu, data) / "verify.csv"
        rows = records.read_csv(verify, records.VERIFY) if verify.exists() else None
        if rows is None or rows.empty:
            return {}
        mine = rows[(rows.status != "ok") & (rows.gpu == plan.gpu) & (rows.run_id == run_id)
                    & (rows.model == cells[0].model) & (rows.quant == resolved)]
        out = {int(c): QUANT_CHECK_FAILED for c in mine[mine.check == "vs_bf16"].ctx if int(c) in ctxs}
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
    info = quant.quantise_model_(model, plan.quant, checks=(1, *ctxs), seed=plan.seed)
    checked_layers = layer_rows(info, base)
    rows += checked_layers
    bad_rows = {r["rows"] if r["check"] == "layer" else 0 for r in checked_layers if r["status"] != "ok"}
    failed = {ctx: LAYER_CHECK_FAILED for ctx in ctxs if bad_rows & {0, 1, ctx}}
    for ctx in ctxs:
        cell = Cell(cells[0].model, ctx, "eager", plan.attn, info["path"])
        try:
            err = forced_layer_error(model, ctx, refs.pop(ctx), seed=plan.seed)
            rows.append(verify_row(plan, run_id, session, cell, err, tols[ctx], "vs_bf16"))
            if rows[-1]["status"] != "ok":
                failed.setdefault(ctx, QUANT_CHECK_FAILED)
        except Exception as exc:  # noqa: BLE001 - a kernel that cannot run the check cannot be timed either
            traceback.print_exc()
            failed[ctx] = f"the check against bf16 could not run: {type(exc).__name__}: {str(exc).splitlines()[0]}"
    records.append_rows(paths.raw_dir(plan.gpu, data) / "verify.csv", records.VERIFY, rows)
    del refs
    free_device_memory(plan.device)
    return failed


def run_session(plan: SweepPlan, session: int, run_id: str, data=None) -> None:
    """Body of one fresh session process: measure every pending cell of `session`, model by model. At the
    end it reports where its wall time went (`@@timing`: start-up, imports, model builds, cells), which
    the parent keeps in env.json."""
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
    timing["total_s"] = time.time() - spawned
    print("@@timing " + json.dumps({k: _rounded(v) for k, v in timing.items()}), flush=True)


def _rounded(value):
    return {k: round(v, 2) for k, v in value.items()} if isinstance(value, dict) else round(value, 2)


def run_sweep(plan: SweepPlan, data=None, progress: bool = True) -> str:
    """Measure `plan` in fresh session processes, resuming what is already on disk. Returns the run id."""
    from tqdm.auto import tqdm

    keys.gpu_to_measure(plan.gpu, plan.device, data)  # a wrong GPU key fails here, before anything is written
    for key in plan.models:
        keys.models([key], data)
    path = plan.csv_path(data)
    todo = {s: plan.pending(s, data) for s in plan.session_ids}
    total = sum(len(v) for v in todo.values())
    if total == 0:
        print(f"nothing to measure: every cell of this plan is already in {path}")
        return runs.new_run_id()
    quant_fields = {}
    if plan.quant != "bf16":
        from decodegap.quant import paths as quant

        quant_fields = dict(quant_weights=quant.WEIGHTS, quant_kernel=quant.path(quant.resolve(plan.quant, plan.device)).kernel)
    with runs.recorded(plan.gpu, data, plan.experiment, [plan.experiment, "verify"], plan=asdict(plan),
                       gpu_state_before=hardware.gpu_state(), **quant_fields) as run_id:
        _sweep_sessions(plan, data, run_id, total, progress, tqdm)
    return run_id


def _sweep_sessions(plan: SweepPlan, data, run_id: str, total: int, progress: bool, tqdm) -> None:
    schema = records.schema_for(plan.experiment)
    path = plan.csv_path(data)
    bar = tqdm(total=total, desc=f"{plan.experiment} on {plan.gpu}", unit="cell", disable=not progress)
    for session in plan.session_ids:
        attempts, stalls, last_left = 0, 0, None
        while left := len(plan.pending(session, data, run_id)):
            attempts += 1
            stalls = stalls + 1 if left == last_left else 0
            if stalls >= 2:  # two session processes in a row finished no cell: never loop for ever
                raise RuntimeError(f"session {session}: {left} cell(s) still pending after session processes "
                                   "that made no progress; see their output above")
            last_left = left
            before = hardware.gpu_state()
            current, finished, timing = _spawn_session(plan, session, run_id, data, bar)
            if current is not None:  # the process died inside a cell: record it and go on
                records.append_rows(path, schema, status_rows(
                    plan, run_id, session, current, "error",
                    f"session process exited with code {finished} while measuring this cell (stderr above)"))
                bar.update(1)
            elif finished != 0 and attempts >= 2:
                raise RuntimeError(f"session {session} exited with code {finished} outside any cell, twice; "
                                   "see its stderr above (model build or import failure?)")
            runs.update_env(plan.gpu, data, run_id, sessions={str(session): {
                "before": before, "after": hardware.gpu_state(), "timing": timing}})
    bar.close()


def _spawn_session(plan: SweepPlan, session: int, run_id: str, data, bar):
    """Run one session process; returns (cell it died in or None, exit code, its @@timing report or None)."""
    cmd = [sys.executable, "-m", "decodegap"] + (["--data-dir", str(data)] if data is not None else [])
    cmd += ["_session", "--plan", plan.to_json(), "--session", str(session), "--run-id", run_id]
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{SPAWNED_AT: repr(time.time())})
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=paths.REPO)
    current, timing = None, None
    for line in proc.stdout:
        if line.startswith("@@start "):
            s, cell = json.loads(line[8:])
            current = Cell(**cell)
        elif line.startswith("@@done "):
            current = None
            bar.update(1)
        elif line.startswith("@@timing "):
            timing = json.loads(line[9:])
        else:
            sys.stdout.write(line)
    code = proc.wait()
    return (current if code != 0 else None), code, timing
