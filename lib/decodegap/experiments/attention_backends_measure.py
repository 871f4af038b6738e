"""Measurements of notebook 03: the per-layer decode attention of every backend (data/raw/<gpu>/attention.csv),
then whole decode steps with a backend forced inside the HF model (SweepPlan(attn=...))."""

from __future__ import annotations

from decodegap import hardware, inputs, paths, records
from decodegap.harness import models, runs
from decodegap.outcome import attempt
from decodegap.harness.sweep import SweepPlan, free_device_memory, run_sweep


def record_attention(gpu: str, model_keys, contexts, backends=None, data=None, device: str = "cuda",
                     reps: int = 5, host_calls: int = 200, graph_calls: int = 100, seed: int = 0,
                     retry_unavailable: bool = False, again: bool = False) -> str:
    """Per-layer decode attention of every backend, model shape and context: correctness against the
    math backend first (every cell), then `reps` rounds of timing, each round timing every cell once host-inclusive
    and once GPU-only in a new seeded order (interleaved: no cell's time depends on which model's or backend's
    turn came before it; `rep` is the round). Appends to data/raw/<gpu>/attention.csv at the end, one block per
    cell (a run killed before then writes nothing and is measured again); resumes (a done (model, ctx, backend) is
    skipped; with `retry_unavailable` a cell recorded only as `unavailable` is measured again, its old rows kept; with
    `again` every cell is measured again, so that all of them share this run's interleaved rounds; the old rows
    stay as history, and notebook 03 reads each cell's newest run, `attention_report.newest_runs`)."""
    import random

    from decodegap.harness import attention

    for key in backends or ():
        inputs.attn(key)
    inputs.contexts(tuple(contexts))
    inputs.models(model_keys, data)
    with runs.recorded(gpu, data, "attention", ["attention"], device=device, gpu_state_before=hardware.gpu_state(),
                       attention_order=f"interleaved, {reps} seeded rounds (seed {seed})") as run_id:
        path = paths.raw_dir(gpu, data) / "attention.csv"
        retry = records.STATUSES if again else ("unavailable",) if retry_unavailable else ()
        done = records.done_keys(path, records.ATTENTION, retry, run_id)
        cuda = device.startswith("cuda")
        cells, blocks = [], {}
        for key in model_keys:  # every cell checked first; the ones that run are timed in rounds below
            shape = attention.Shape.from_config(key, models.load_spec(key, data).config)
            for ctx in contexts:
                for attn in backends or list(attention.BACKENDS):
                    if (gpu, key, str(ctx), attn) in done:
                        continue
                    base = dict(run_id=run_id, gpu=gpu, model=key, ctx=ctx, attn=attn, timing="-", rep=None,
                                us_per_call=None, max_rel_err=None, reason="")
                    checked, status, reason = attempt(lambda: attention.check(attn, shape, ctx, device),
                                                      (attention.BackendUnavailable,))
                    if checked is None:
                        blocks[(key, ctx, attn)] = [dict(base, status=status, reason=reason)]
                        continue
                    cells.append(((key, ctx, attn), base, checked))
                    blocks[(key, ctx, attn)] = []
        order = random.Random(seed)
        for rep in range(reps):
            for cell, base, (call, err) in order.sample(cells, len(cells)):
                def timed():
                    with attention.backend(cell[2]).scope():  # entered once, outside the timed calls
                        rows = [dict(base, timing="host", rep=rep, max_rel_err=err, status="ok",
                                     us_per_call=attention.time_host_us(call, host_calls, cuda=cuda))]
                        if cuda:
                            rows.append(dict(base, timing="gpu", rep=rep, max_rel_err=err, status="ok",
                                             us_per_call=attention.time_gpu_us(call, graph_calls, 1)[0]))
                    return rows
                rows, status, reason = attempt(timed, (attention.BackendUnavailable,))
                if rows is None:  # a cell that fails while timed: its status row, and no more rounds of it
                    blocks[cell] = [dict(base, status=status, reason=reason)]
                    cells = [c for c in cells if c[0] != cell]
                    continue
                blocks[cell] += rows
        for cell, rows in blocks.items():
            records.append_rows(path, records.ATTENTION, rows)
        free_device_memory(device)
    return run_id


def step_plans(gpu: str, model_keys, step_backends=("sdpa",), step_contexts=(2048,), n_sessions: int = 1,
               steps: int = 30, warmup: int = 5, device: str = "cuda") -> list[SweepPlan]:
    """The whole-step sweeps of measure_attention: eager and graph with each backend of `step_backends` inside the HF
    model, at `step_contexts`."""
    return [SweepPlan(gpu=gpu, models=tuple(model_keys), contexts=tuple(step_contexts), arms=("eager", "graph"),
                      sessions=n_sessions, steps=steps, warmup=warmup, attn=attn, device=device) for attn in step_backends]


def measure_attention(gpu: str, model_keys, contexts, backends=None, step_backends=("sdpa",),
                      step_contexts=(2048,), n_sessions: int = 1, steps: int = 30, warmup: int = 5,
                      device: str = "cuda", data=None) -> None:
    """Notebook 03's measurements: the per-layer microbenchmark of every backend, then the whole decode
    step (eager and graph arms) with each backend of `step_backends` inside the HF model."""
    plans = step_plans(gpu, model_keys, step_backends, step_contexts, n_sessions, steps, warmup, device)
    record_attention(gpu, model_keys, contexts, backends, data, device)
    for plan in plans:
        run_sweep(plan, data)
