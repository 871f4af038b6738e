"""Notebook 02, the CUDA-graphs A/B: how much of a decode step is launch overhead? Its sweeps (the grid of eager,
graph and compile, then the headline cells in sessions of their own, through sweep.run_sweep), its rows (ab.csv,
each with its sweep), its tables (speed-ups with bootstrap CIs, the headline statistic, the decomposition of a step,
the arm table, the two
compile settings) and its findings."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Mapping

import pandas as pd

from decodegap.analysis import cuda_graphs_ab as ab
from decodegap import checked, hardware, paths, published, records, roofline
from decodegap.harness import keys, models as model_specs, profile, runs
from decodegap.harness.sweep import SweepPlan, run_sweep

NOTEBOOK = "02_cuda_graphs_ab"
SPEEDUP_ARMS = ("graph", "compile")  # the arms whose speed-up over eager is tabled
PLOTTED_ARMS = ("eager", "graph", "compile")  # the arms of the R_floor-per-arm figure


def plan(gpu: str, models, contexts, headline_ctx: int = 2048, sessions: int = 3, headline_sessions: int = 10,
         steps: int = 30, warmup: int = 5, device: str = "cuda", experiment: str = "ab",
         again: bool = False) -> list[SweepPlan]:
    """The two sweeps of `measure`: the grid (every context, eager, graph and compile, `sessions` sessions) and the
    headline sweep (`headline_ctx` only, eager and graph, `headline_sessions` sessions numbered after the grid's, the
    graph arm checked against eager in every one of them: SweepPlan.check_every_session). `again`: both measured
    again in runs of their own (SweepPlan.again; the older rows stay as history)."""
    common = dict(gpu=gpu, models=tuple(models), steps=steps, warmup=warmup, device=device, experiment=experiment,
                  again=again)
    grid = SweepPlan(contexts=tuple(contexts), arms=("eager", "graph", "compile"), sessions=sessions, **common)
    headline = SweepPlan(contexts=(headline_ctx,), arms=("eager", "graph"), sessions=headline_sessions,
                         first_session=sessions, check_every_session=True, **common)  # sessions of its own
    return [grid, headline]


def partly_measured(headline: SweepPlan, data) -> int:
    """Sessions of the headline sweep `headline` with rows on disk where some of its cells are missing (0 where none
    has rows, where none is missing, or with `again`). The headline statistic reads one run (analysis.cuda_graphs_ab.newest_runs), so a
    sweep resumed in a new run would leave a run of the missing sessions alone, read in place of the earlier run's
    (on the H100 on 2026-12-05 a top-up of 2 sessions replaced a run of 8): `measure` does not top it up."""
    if headline.again:
        return 0
    pending = headline.pending_by_session(data)
    started = sum(len(cells) < len(headline.cells(s)) for s, cells in pending.items())
    return started if any(pending.values()) else 0


def measure(gpu: str, models, contexts, headline_ctx: int = 2048, sessions: int = 3, headline_sessions: int = 10,
            steps: int = 30, warmup: int = 5, device: str = "cuda", data=None, count_kernels: bool = False,
            progress: bool = True, experiment: str = "ab", headline_only: bool = False, again: bool = False) -> dict:
    """Notebook 02's A/B sweep in one go, into data/raw/<gpu>/<experiment>.csv (resumable):
    1. every cell of the grid, arms eager, graph and compile, `sessions` fresh sessions; a session builds
       each model once for all three arms and contexts (arm order alternating between sessions), and the
       compile arm compiles once per model (dynamic shapes), finding the inductor cache warm after session 0;
       left out with `headline_only`;
    2. the headline cells (ctx = headline_ctx), eager and graph, in `headline_sessions` sessions of their own (a
       headline-only sweep, numbered after the grid's sessions: notebook 02's headline statistic reads these alone),
       each session's graph arm checked against eager; a headline sweep an earlier run left part-measured is not
       topped up (partly_measured), and `again` measures it whole;
    3. with `count_kernels`, kernels per decode step (profile.record_kernels: kernels.csv, breakdown.csv).
    `again`: the sweeps measure every cell again in runs of their own (the A/B reader keeps each cell's newest run
    of a sweep; older runs stay as history). Returns the wall seconds of each phase and in all, also kept in
    env.json under the first run that measured anything (`ab_sweep`)."""
    grid, headline = plan(gpu, models, contexts, headline_ctx, sessions, headline_sessions, steps, warmup, device,
                          experiment, again)
    keys.gpu_to_measure(gpu, device, data)  # both plans and the GPU checked before the first row
    keys.models(models, data)
    began = time.time()
    measured = []
    walls = {}
    if not headline_only:
        measured.append(run_sweep(grid, data, progress))
        walls["grid_s"] = time.time() - began
    t0 = time.time()
    partial = partly_measured(headline, data)
    if partial:  # a top-up would be a run of the missing sessions alone, and the statistic reads one run
        print(f"the headline sweep is not topped up: {partial} of its {len(headline.session_ids)} sessions have rows "
              f"of an earlier run, which the headline statistic keeps reading; measure it whole in a run of its own with "
              f"again (cuda-graphs-ab --headline-only --again)")
    else:
        measured.append(run_sweep(headline, data, progress))
        walls["headline_s"] = time.time() - t0
    if count_kernels:
        t0 = time.time()
        profile.record_kernels(gpu, models, contexts, data=data, device=device)
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


def env_runs(data) -> list[tuple[str, str, dict]]:
    """(gpu, run id, env.json entry) of every run of data/raw/<gpu>/env.json, as the files hold them."""
    out = []
    for env_path in sorted(Path(data, "raw").glob("*/env.json")):
        out += [(env_path.parent.name, run_id, entry) for run_id, entry in json.loads(env_path.read_text()).items()]
    return out


def rows(data, history: bool = False) -> pd.DataFrame:
    """The A/B rows (ab.ab_rows of data/raw/<gpu>/ab.csv, the runs' plans in env.json and the arm checks of
    verify.csv: default attention, bf16, each row with its sweep). `history`: the older runs' rows instead."""
    return ab.ab_rows(records.load_experiment("ab", data), env_runs(data), checked.verify_rows(data, False), history)


def cells(data, configs: Mapping[str, Mapping] | None = None) -> tuple:
    """(`rows`, the grid sweep's rows, roofline.cell_table of the grid, the configs used: `configs`, or those of the
    rows' models)."""
    sweep_rows = rows(data)
    grid = ab.of_sweep(sweep_rows, ab.GRID)
    if configs is None:
        configs = model_specs.configs(sweep_rows["model"], data)
    return sweep_rows, grid, roofline.cell_table(grid, hardware.specs_table(data), configs,
                                            records.load_experiment("bandwidth", data)), configs


def claims_speedups(sweep_rows: pd.DataFrame, seed: int = 0) -> dict:
    """What the claims read of A/B rows (`rows`, or some of them): the graph arm's `speedups` per cell and sweep
    (ab.speedups, seeded bootstrap: each cell's drawn on its own) and `sessions` (ab.session_table). claims_tables
    makes them from every row, claims.evidence.Evidence.with_ab_rows again from some of them."""
    return dict(speedups=ab.speedups(sweep_rows, arm="graph", seed=seed), sessions=ab.session_table(sweep_rows))


def grid_decomposition(sweep_rows: pd.DataFrame, specs: pd.DataFrame, configs: Mapping[str, Mapping],
                       bandwidth_rows: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    """ab.decomposition of the grid sweep's steps among `sweep_rows` (`rows`, or some of them: their cells made as
    `cells` makes them, roofline.cell_table) by the grid's kernel counts `kernels`. claims_tables makes it from every
    row, claims.evidence.Evidence.with_ab_rows again from some of them."""
    grid = ab.of_sweep(sweep_rows, ab.GRID)
    return ab.decomposition(roofline.cell_table(grid, specs, configs, bandwidth_rows), kernels)


def claims_tables(data, configs: Mapping[str, Mapping], seed: int = 0) -> dict:
    """What the claims table reads of notebook 02 (claims.evidence): `rows`, the graph arm's `speedups` per cell and
    sweep (seeded bootstrap) and `sessions` (claims_speedups), the `decomposition` of the grid's steps by the grid's
    kernel counts (grid_decomposition, with the `kernels` rows it reads), and the grid's check rows (`verify`)."""
    sweep_rows = rows(data)
    kernels = checked.grid_rows(records.load_experiment("kernels", data))
    return dict(rows=sweep_rows, **claims_speedups(sweep_rows, seed), kernels=kernels,
                decomposition=grid_decomposition(sweep_rows, hardware.specs_table(data), configs,
                                                 records.load_experiment("bandwidth", data), kernels),
                verify=checked.grid_rows(records.load_experiment("verify", data)))


def tables(data, headline_ctx: int = 2048, seed: int = 0) -> dict:
    """Notebook 02's tables: `rows`, `grid` (its grid sweep's rows), `cells` (R_floor cells of the grid), the configs,
    `kernels`, `verify` (the arm checks of these runs), `sessions` (ab.sweep_sessions), `sweep_walls` and
    `session_walls`; `speedups` of the graph and compile arms per cell and sweep (seeded bootstrap CIs), `headline`
    (ab.headline: the headline sweep's sessions alone), `history` (ab.history_speedups: each older run's
    speed-ups, rows(history=True), run by run: reported, not counted), `published_speedups`, `decomposition` of the grid, `arm_table`
    and `compile_settings` (ab.compile_settings_compared, empty without the whole-model sweep)."""
    sweep_rows, grid, grid_cells, configs = cells(data)
    entries = env_runs(data)
    kernels = checked.grid_rows(records.load_experiment("kernels", data))
    verify = records.load_experiment("verify", data)
    speed = pd.concat([ab.speedups(sweep_rows, arm=arm, seed=seed) for arm in SPEEDUP_ARMS], ignore_index=True)
    older = rows(data, history=True)
    history = ab.history_speedups(older, SPEEDUP_ARMS, seed)
    return dict(
        rows=sweep_rows, grid=grid, cells=grid_cells, configs=configs, kernels=kernels,
        verify=verify[verify["run_id"].isin(set(sweep_rows["run_id"]))],
        sessions=ab.sweep_sessions(sweep_rows), sweep_walls=ab.sweep_walls(entries, sweep_rows),
        session_walls=ab.session_walls(entries, sweep_rows),
        speedups=speed, headline=ab.headline(speed, headline_ctx), history=history,
        published_speedups=published.select(published.load(data), "cuda_graphs", "speedup"),
        decomposition=ab.decomposition(grid_cells, kernels),
        arm_table=ab.arm_table(grid, hardware.specs_table(data), configs, kernels=kernels, seed=seed),
        compile_settings=ab.compile_settings_compared(grid, records.load_experiment("ab_whole_model", data)),
        headline_ctx=headline_ctx)


def findings(t: dict) -> dict:
    """{"02_findings": ab.findings of the speed-ups, the decomposition and the published speed-ups}."""
    return {"02_findings": ab.findings(t["speedups"], t["decomposition"], t["published_speedups"], t["headline_ctx"],
                                       t["rows"]) + ab.history_findings(t.get("history"))}
