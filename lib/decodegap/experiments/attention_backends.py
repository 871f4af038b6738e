"""Notebook 03, the attention backends: does the kernel or the launch sequence bind? Its measurements (the
per-layer microbenchmark of every backend into data/raw/<gpu>/attention.csv, then whole decode steps with a
backend forced inside the HF model, SweepPlan(attn=...)), its rows (attention.csv, each cell's newest run;
decode.csv with a forced backend), its tables (the per-layer summary, the paper's table, identical calls, the whole
step, the ranking) and its findings."""

from __future__ import annotations

import pandas as pd

from decodegap.analysis import attention_backends as attention_report
from decodegap import checked, hardware, inputs, paths, published, records, roofline, selection
from decodegap.harness import keys, models, runs
from decodegap.harness.sweep import SweepPlan, free_device_memory, run_sweep
from decodegap.outcome import attempt

NOTEBOOK = "03_attention_backends"
STEP_BACKENDS = ("sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math", "flex", "fa2", "fa3",
                 "flashinfer_paged")
"""Backends timed inside the whole decode step (the notebook's STEP_BACKENDS default)."""
STEP_CONTEXTS = (2048, 16384)
STEP_ARMS = attention_report.STEP_ARMS  # the arms of the whole-step sweeps: HF eager and graphed


def plan(gpu: str, model_keys, step_backends=STEP_BACKENDS, step_contexts=STEP_CONTEXTS, sessions: int = 1,
         steps: int = 30, warmup: int = 5, device: str = "cuda") -> list[SweepPlan]:
    """The whole-step sweeps of `measure`: eager and graph with each backend of `step_backends` inside the HF model,
    at `step_contexts`, one sweep per backend; the per-layer microbenchmark is no sweep (`record_attention` times
    every cell of a run once a round)."""
    return [SweepPlan(gpu=gpu, models=tuple(model_keys), contexts=tuple(step_contexts), arms=STEP_ARMS,
                      sessions=sessions, steps=steps, warmup=warmup, attn=attn, device=device)
            for attn in step_backends]


def measure(gpu: str, model_keys, contexts, backends=None, step_backends=STEP_BACKENDS, step_contexts=STEP_CONTEXTS,
            sessions: int = 1, steps: int = 30, warmup: int = 5, device: str = "cuda", data=None) -> None:
    """Notebook 03's measurements: the per-layer microbenchmark of every backend (`record_attention`), then the
    whole decode step (eager and graph arms) with each backend of `step_backends` inside the HF model (the
    sweeps of `plan`)."""
    plans = plan(gpu, model_keys, step_backends, step_contexts, sessions, steps, warmup, device)
    record_attention(gpu, model_keys, contexts, backends, data, device)
    for sweep_plan in plans:
        run_sweep(sweep_plan, data)


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
    stay as history, and notebook 03 reads each cell's newest run, `attention_report.newest_runs`). Returns its run id.."""
    import random

    from decodegap.harness import attention

    for key in backends or ():
        keys.attn(key)
    inputs.contexts(tuple(contexts))
    keys.models(model_keys, data)
    with runs.recorded(gpu, data, "attention", ["attention"], device=device, gpu_state_before=hardware.gpu_state(),
                       attention_order=f"interleaved, {reps} seeded rounds (seed {seed})") as run_id:
        path = paths.raw_dir(gpu, data) / "attention.csv"
        retry = records.STATUSES if again else ("unavailable",) if retry_unavailable else ()
        done = selection.done_keys(path, records.ATTENTION, retry, run_id)
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


def rows(data) -> pd.DataFrame:
    """The per-layer rows (data/raw/<gpu>/attention.csv of every GPU)."""
    return records.load_experiment("attention", data)


def summary(data) -> pd.DataFrame:
    """attention_report.summary of `rows` (each cell's newest run). The claims table reads it from here too."""
    return attention_report.summary(rows(data))


def step_rows(data) -> pd.DataFrame:
    """The decode rows of the whole-step measurement: each cell from one sweep, as every notebook reads decode.csv,
    unchecked cells as status rows (checked.labelled)."""
    return roofline.one_sweep(checked.labelled(checked.load("decode", data)), selection.run_plans(data))


def tables(data, model_keys=(), step_backends=STEP_BACKENDS, step_contexts=STEP_CONTEXTS, table_ctx: int = 2048,
           table_model: str = "llama-3.1-8b") -> dict:
    """Notebook 03's tables: `summary` (per layer, each cell's newest run), `published`, `paper_table` (the paper's
    table at `table_ctx` and `table_model` with our columns), `shape_agreement` (identical calls of two models),
    `steps` (attention_report.step_table of `step_backends` at `step_contexts`), `ranking` (the per-layer ranking
    against the whole step's), the configs of `model_keys` and `measured_gbps` (copy bandwidth per GPU)."""
    summ = summary(data)
    pub = published.load(data)
    shapes = {k: models.load_spec(k, data).config for k in sorted(set(summ["model"]))}
    configs = {key: models.load_spec(key, data).config for key in model_keys}
    steps = attention_report.step_table(step_rows(data), hardware.specs_table(data), configs, list(step_backends),
                                        list(step_contexts))
    return dict(
        summary=summ, published=pub, configs=configs,
        paper_table=attention_report.paper_table(summ, pub, table_ctx, table_model),
        published_us=published.select(pub, "attention_backends", "us_per_layer"),
        shape_agreement=attention_report.shape_agreement(summ, shapes),
        steps=steps, ranking=attention_report.ranking_table(steps, summ),
        measured_gbps=roofline.measured_bandwidth(records.load_experiment("bandwidth", data)).to_dict())


def findings(t: dict) -> dict:
    """Per figures stem: identical calls, what binds one call of SDPA's default, per backend and shape, the graphed
    whole step against the per-layer kernel, and whether the faster per-layer kernel makes the faster step."""
    return {"03_findings_identical_calls": attention_report.shape_findings(t["shape_agreement"]),
            "03_findings_binding": attention_report.binding_findings(t["summary"]),
            "03_findings_backends": attention_report.findings(t["summary"]),
            "03_findings_steps": attention_report.step_findings(t["steps"], t["summary"], t["configs"],
                                                                t["measured_gbps"]),
            "03_findings_ranking": attention_report.ranking_findings(t["ranking"])}
