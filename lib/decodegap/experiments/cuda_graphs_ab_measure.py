"""Measurements of notebook 02: the CUDA-graphs A/B sweep (data/raw/<gpu>/ab.csv), and the kernel profiles of a
decode step (kernels.csv: how many kernels a step launches; breakdown.csv: each kernel's GPU time), which
notebook 06's ladder and the quantised paths' profiles take too."""

from __future__ import annotations

import json
import time

from decodegap.harness import decode, models, runs
from decodegap import inputs, paths, records
from decodegap.outcome import attempt
from decodegap.harness.sweep import SweepPlan, free_device_memory, run_sweep


def record_kernels(gpu: str, model_keys, contexts, arms=("eager", "hf_default"), data=None, device: str = "cuda",
                   quant: str = "bf16", again: bool = False) -> str:
    """Profile one decode step per model, context and arm (decode.kernel_profile): the kernel count goes to
    data/raw/<gpu>/kernels.csv, every kernel's name and GPU time to breakdown.csv (notebook 06's where the
    time goes). A graph replays exactly the eager step's kernels. `quant` other than bf16 profiles the model with
    its decoder layers swapped for that path's (quant.quantise_model_, as run_sweep does); a path that cannot
    run here leaves `unavailable` rows with the reason. Resumes per file, and builds no model whose steps are all
    profiled already; `again`: profiles every step again (the tables read each step's latest profile,
    records.latest_profiles)."""
    arms = inputs.arms(arms)
    inputs.quant(quant)
    inputs.contexts(tuple(contexts))
    inputs.models(model_keys, data)
    with runs.recorded(gpu, data, "kernels", ["kernels", "breakdown"], device=device) as run_id:
        folder = paths.raw_dir(gpu, data)
        done = records.done_keys(folder / "kernels.csv", records.KERNELS, run_id=run_id, again=again)
        done_breakdown = records.done_keys(folder / "breakdown.csv", records.BREAKDOWN, run_id=run_id, again=again)
        for key in model_keys:
            cells = [(ctx, arm) for ctx in contexts for arm in arms
                     if not {_kernels_key(gpu, key, ctx, arm, quant)} <= done & done_breakdown]
            if not cells:
                continue
            model = models.build_model(models.load_spec(key, data), device=device)
            unavailable = None
            if quant != "bf16":
                from decodegap.quant import paths as quant_paths

                try:
                    quant_paths.quantise_model_(model, quant)
                except quant_paths.QuantUnavailable as exc:
                    unavailable = str(exc)
            for ctx, arm in cells:
                base = dict(run_id=run_id, gpu=gpu, model=key, ctx=ctx, arm=arm, attn="sdpa", quant=quant)
                cell = _kernels_key(gpu, key, ctx, arm, quant)
                if unavailable is None:
                    profile, status, reason = attempt(lambda: decode.kernel_profile(model, arm, ctx),
                                                      (decode.ArmUnavailable,))
                else:
                    profile, status, reason = None, "unavailable", unavailable
                base.update(status=status, reason=reason)
                if cell not in done:
                    records.append_rows(folder / "kernels.csv", records.KERNELS,
                                        [dict(base, kernels=len(profile) if profile is not None else None)])
                if cell not in done_breakdown:
                    rows = ([dict(base, kernel_index=i, kernel=name[:200], gpu_us=us) for i, (name, us) in enumerate(profile)]
                            if profile is not None else [dict(base, kernel_index=None, kernel=None, gpu_us=None)])
                    records.append_rows(folder / "breakdown.csv", records.BREAKDOWN, rows)
                free_device_memory(device)
            del model
            free_device_memory(device)
    return run_id


def _kernels_key(gpu: str, model: str, ctx: int, arm: str, quant: str) -> tuple:
    """A profiled step's key in kernels.csv and breakdown.csv (records.KERNELS.key), default attention."""
    base = dict(gpu=gpu, model=model, ctx=ctx, arm=arm, attn="sdpa", quant=quant)
    return tuple(str(base[c]) for c in records.KERNELS.key)


def plans(gpu: str, model_keys, contexts, headline_ctx: int = 2048, n_sessions: int = 3, headline_sessions: int = 10,
          steps: int = 30, warmup: int = 5, device: str = "cuda", experiment: str = "ab",
          again: bool = False) -> tuple[SweepPlan, SweepPlan]:
    """The two sweeps of measure_ab: the grid (every context, eager, graph and compile, `n_sessions` sessions) and the
    headline sweep (`headline_ctx` only, eager and graph, `headline_sessions` sessions numbered after the grid's, the
    graph arm checked against eager in every one of them: SweepPlan.check_every_session). `again`: both measured
    again in runs of their own (SweepPlan.again; the older rows stay as history)."""
    common = dict(gpu=gpu, models=tuple(model_keys), steps=steps, warmup=warmup, device=device, experiment=experiment,
                  again=again)
    grid = SweepPlan(contexts=tuple(contexts), arms=("eager", "graph", "compile"), sessions=n_sessions, **common)
    headline = SweepPlan(contexts=(headline_ctx,), arms=("eager", "graph"), sessions=headline_sessions,
                         first_session=n_sessions, check_every_session=True, **common)  # sessions of its own
    return grid, headline


def measure_ab(gpu: str, model_keys, contexts, headline_ctx: int = 2048, n_sessions: int = 3,
               headline_sessions: int = 10, steps: int = 30, warmup: int = 5, device: str = "cuda", data=None,
               count_kernels: bool = False, experiment: str = "ab", progress: bool = True,
               headline_only: bool = False, again: bool = False) -> dict:
    """Notebook 02's A/B sweep in one go, into data/raw/<gpu>/<experiment>.csv (resumable):
    1. every cell of the grid, arms eager, graph and compile, `n_sessions` fresh sessions; a session builds
       each model once for all three arms and contexts (arm order alternating between sessions), and the
       compile arm compiles once per model (dynamic shapes), finding the inductor cache warm after session 0;
       left out with `headline_only`;
    2. the headline cells (ctx = headline_ctx), eager and graph, in `headline_sessions` sessions of their own (a
       headline-only sweep, numbered after the grid's sessions: notebook 02's headline statistic reads these alone),
       each session's graph arm checked against eager;
    3. with `count_kernels`, kernels per decode step (kernels.csv, breakdown.csv).
    `again`: the sweeps measure every cell again in runs of their own (the A/B reader keeps each cell's newest run
    of a sweep; older runs stay as history). Returns the wall seconds of each phase and in all, also kept in
    env.json under the first run that measured anything (`ab_sweep`)."""
    grid, headline = plans(gpu, model_keys, contexts, headline_ctx, n_sessions, headline_sessions, steps, warmup,
                           device, experiment, again)
    inputs.gpu_to_measure(gpu, device, data)  # both plans and the GPU checked before the first row
    inputs.models(model_keys, data)
    began = time.time()
    measured = []
    walls = {}
    if not headline_only:
        measured.append(run_sweep(grid, data, progress))
        walls["grid_s"] = time.time() - began
    t0 = time.time()
    measured.append(run_sweep(headline, data, progress))
    walls["headline_s"] = time.time() - t0
    if count_kernels:
        t0 = time.time()
        record_kernels(gpu, model_keys, contexts, data=data, device=device)
        walls["kernels_s"] = time.time() - t0
    walls["total_s"] = time.time() - began
    walls = {k: round(v, 1) for k, v in walls.items()}
    env = paths.raw_dir(gpu, data) / "env.json"
    known = set(json.loads(env.read_text())) if env.exists() else set()
    recorded = [r for r in measured if r in known]  # run_sweep gives a fresh id, never recorded, when nothing was left
    if recorded:
        runs.update_env(gpu, data, recorded[0], ab_sweep=walls)
    print(f"A/B sweep wall time: {walls}")
    return walls
