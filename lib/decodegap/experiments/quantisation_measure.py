"""Measurements of notebook 04: per-layer correctness of every quantisation path on the models' real shapes
(data/raw/<gpu>/quant_layers.csv) and whole decode steps with each path swapped into the HF model
(data/raw/<gpu>/decode.csv, rows whose `quant` is the path key), both resumable.

Whole steps run through sweep.run_sweep with SweepPlan(quant=<concrete key>); the session process
applies quant.quantise_model_(model, plan.quant) after building the model.
"""

from __future__ import annotations

from decodegap import inputs, records
from decodegap.harness import models, runs, sweep
from decodegap.quant import paths as quant
from decodegap import paths as repo_paths
from decodegap.outcome import attempt

LAYERS = quant.LAYERS
DEFAULT_PATHS = ("bf16", "bnb-nf4", "awq-marlin", "awq-triton", "gptq-exllamav2", "int4-tinygemm", "int4-triton")
QUANT_ARMS = ("eager", "graph", "lean_graph", "lean_attn_graph")
"""The arms of notebook 04's sweep: HF eager and graphed, and the lean decoder graphed with SDPA (lean_graph) or
with its Triton split-KV attention (lean_attn_graph), so that each kernel's own speed shows beside HF's step."""


def record_quant_layers(gpu: str, model_keys, paths=None, data=None, device: str = "cuda", layers=None,
                        group_size: int | None = None, tol: float = quant.QUANT_TOL, rows=(1, 2048)) -> str:
    """Check every path on every decoder-linear shape of each model (quant.check_linear: the layer quantised
    from a stand-in bf16 weight, its output against x @ W_deq^T, W_deq read back from its own tensors) at each
    row count M of `rows` (1: a decode step; the contexts: a prefill), one verify.csv row each (check `layer`):
    `ok` within `tol`, `error` past it (NaN and inf included) or when the layer fails, `unavailable` with the
    reason (package, device or shape). The LM head is bf16 in every path and is not checked here.
    `group_size` None: quant.default_group_size of each model (128 for the 7-8B models). Resumes. A run that fails
    before its first row leaves no env.json entry (runs.recorded); one that ends records the GPU's state after it."""
    inputs.gpu_to_measure(gpu, device, data)  # the key against the device measured, before any row
    with runs.recorded(gpu, data, "quant_layers", ["verify"], quant_weights=quant.WEIGHTS) as run_id:
        path = repo_paths.raw_dir(gpu, data) / "verify.csv"
        done = records.done_keys(path, records.VERIFY)
        for key in model_keys:
            config = models.load_spec(key, data).config
            shapes = quant.layer_shapes(config)
            G = group_size or quant.default_group_size(config)
            for requested in paths or DEFAULT_PATHS:
                concrete = quant.resolve(requested, device)
                for layer in [n for n in (layers or LAYERS) if n != "lm_head"]:
                    k, n = shapes[layer]
                    base = dict(run_id=run_id, session=0, gpu=gpu, model=key, arm="-", attn="-", quant=concrete,
                                tol=tol, check="layer", layer=layer)
                    todo = [m for m in rows if tuple(str(dict(base, ctx=m, rows=m)[c]) for c in records.VERIFY.key)
                            not in done]
                    if not todo:
                        continue
                    errors, status, reason = attempt(lambda: quant.check_linear(
                        concrete, k, n, device, tol, seed=LAYERS.index(layer), group_size=G, rows=todo),
                        (quant.QuantUnavailable,))
                    out = []
                    for m in todo:
                        err = errors.get(m) if errors else None
                        st = status if status != "ok" else ("ok" if quant.passes(err, tol) else "error")
                        out.append(dict(base, ctx=m, rows=m, max_rel_err=err, status=st, reason=reason))
                    records.append_rows(path, records.VERIFY, out)
                    sweep.free_device_memory(device)
    return run_id


def _unavailable_cells(plan: sweep.SweepPlan, data, reason: str) -> int:
    """Write an `unavailable` row for every pending cell of every session of `plan`, its reason naming the
    plan's path (prefixed unless it already starts with it); returns how many."""
    if not reason.startswith(plan.quant):
        reason = f"{plan.quant}: {reason}"
    pending = {s: plan.pending(s, data) for s in plan.session_ids}
    if not any(pending.values()):
        return 0
    run_id = runs.start_run(plan.gpu, data, "decode")
    n = 0
    for session, cells in pending.items():
        rows = []
        for cell in cells:
            rows += sweep.status_rows(plan, run_id, session, cell, "unavailable", reason)
        records.append_rows(plan.csv_path(data), records.DECODE, rows)
        n += len(rows)
    return n


def path_plan(gpu: str, model_keys, contexts, path_key: str, arms=QUANT_ARMS, sessions: int = 1, steps: int = 30,
              warmup: int = 5, device: str = "cuda", retry_errors: bool = False) -> sweep.SweepPlan:
    """The sweep of one quantisation path's decode steps (`path_key` a concrete path: awq resolved first, see
    measure_quant)."""
    return sweep.SweepPlan(gpu=gpu, models=tuple(model_keys), contexts=tuple(contexts), arms=tuple(arms),
                           sessions=sessions, steps=steps, warmup=warmup, quant=path_key, device=device,
                           retry_errors=retry_errors)


def plans(gpu: str, model_keys, contexts=(2048, 4096, 8192, 16384), quant_paths=None, arms=QUANT_ARMS,
          sessions: int = 1, steps: int = 30, warmup: int = 5, device: str = "cuda",
          retry_errors: bool = False) -> list[sweep.SweepPlan]:
    """The decode sweeps measure_quant runs, one per path (each requested path resolved to the kernel that would
    run on `device`, quant.resolve), in order."""
    return [path_plan(gpu, model_keys, contexts, quant.resolve(p, device), arms, sessions, steps, warmup, device,
                      retry_errors) for p in (quant_paths or DEFAULT_PATHS)]


def measure_quant(gpu: str, model_keys, contexts=(2048, 4096, 8192, 16384), quant_paths=None, arms=QUANT_ARMS,
                  sessions: int = 1, steps: int = 30, warmup: int = 5, device: str = "cuda", data=None,
                  layers: bool = True, group_size: int | None = None, progress: bool = True,
                  retry_errors: bool = False) -> dict:
    """Notebook 04's measurements: per-layer correctness (record_quant_layers), then, per path, whole decode
    steps in fresh sessions (sweep.run_sweep, SweepPlan(quant=<concrete key>)), appending to
    data/raw/<gpu>/decode.csv. `awq` is resolved here to the kernel that will run (awq-marlin or
    awq-triton), so the rows name it, and a member passed over gets `unavailable` rows with its reason. A path
    that cannot run here (package, device) gets `unavailable` rows with the reason instead of a sweep. bf16 cells already measured (notebooks 01/02) are not measured
    again. Returns {requested: concrete key}."""
    inputs.gpu_to_measure(gpu, device, data)  # the key against the device measured, before any row
    for key in model_keys:
        models.load_spec(key, data)
    chosen = tuple(quant_paths or DEFAULT_PATHS)
    if layers:
        record_quant_layers(gpu, model_keys, [p for p in chosen if p != "bf16"], data, device, group_size=group_size,
                            rows=(1, *sorted(set(contexts))))
    def plan_for(path_key: str) -> sweep.SweepPlan:
        return path_plan(gpu, model_keys, contexts, path_key, arms, sessions, steps, warmup, device, retry_errors)

    resolved = {}
    for requested in chosen:
        key = quant.resolve(requested, device)
        resolved[requested] = key
        for member in quant.ALIASES.get(requested, ())[:quant.ALIASES[requested].index(key) if key != requested else 0]:
            # a member passed over for the one that runs: its own `unavailable` rows, so the data say why
            _unavailable_cells(plan_for(member), data, quant.unavailable_reason(member, device) or "unavailable")
        plan = plan_for(key)
        reason = quant.unavailable_reason(key, device)
        if reason is not None:
            _unavailable_cells(plan, data, reason)
            continue
        sweep.run_sweep(plan, data, progress=progress)
    return resolved
