"""Notebook 02, the CUDA-graphs A/B: how much of a decode step is launch overhead? Its sweeps (ab_bench: the grid of
eager, graph and compile, then the headline cells in sessions of their own), its rows (ab.csv, each with its sweep),
its tables (speed-ups with bootstrap CIs, the headline statistic, the decomposition of a step, the arm table, the two
compile settings) and its findings."""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from decodegap.analysis import cuda_graphs_ab as ab
from decodegap import hardware, published, records, roofline
from decodegap.harness import models as model_specs

NOTEBOOK = "02_cuda_graphs_ab"
SPEEDUP_ARMS = ("graph", "compile")  # the arms whose speed-up over eager is tabled
PLOTTED_ARMS = ("eager", "graph", "compile")  # the arms of the R_floor-per-arm figure


def plan(gpu: str, models, contexts, headline_ctx: int = 2048, sessions: int = 3, headline_sessions: int = 10,
         steps: int = 30, warmup: int = 5, device: str = "cuda") -> list:
    """The grid sweep and the headline sweep (ab_bench.plans)."""
    from decodegap.experiments import cuda_graphs_ab_measure as ab_bench

    return list(ab_bench.plans(gpu, models, contexts, headline_ctx, sessions, headline_sessions, steps, warmup, device))


def measure(gpu: str, models, contexts, headline_ctx: int = 2048, sessions: int = 3, headline_sessions: int = 10,
            steps: int = 30, warmup: int = 5, device: str = "cuda", data=None, count_kernels: bool = False,
            progress: bool = True, headline_only: bool = False, again: bool = False) -> dict:
    """The two sweeps of `plan` in one go (ab_bench.measure_ab; `headline_only`: the headline sweep alone; `again`:
    measured again in runs of their own); returns the wall seconds of each phase."""
    from decodegap.experiments import cuda_graphs_ab_measure as ab_bench

    return ab_bench.measure_ab(gpu, models, contexts, headline_ctx, sessions, headline_sessions, steps, warmup, device,
                               data, count_kernels=count_kernels, progress=progress, headline_only=headline_only,
                               again=again)


def record_kernels(gpu: str, models, contexts, arms=("eager", "hf_default"), data=None, device: str = "cuda",
                   quant: str = "bf16") -> None:
    """Kernels per decode step of each cell (ab_bench.record_kernels: kernels.csv, breakdown.csv)."""
    from decodegap.experiments import cuda_graphs_ab_measure as ab_bench

    ab_bench.record_kernels(gpu, models, contexts, arms, data, device, quant=quant)


def rows(data) -> pd.DataFrame:
    """The A/B rows (ab.ab_rows: data/raw/<gpu>/ab.csv, default attention, bf16, each row with its sweep)."""
    return ab.ab_rows(data)


def cells(data, configs: Mapping[str, Mapping] | None = None) -> tuple:
    """(`rows`, the grid sweep's rows, roofline.cell_table of the grid, the configs used: `configs`, or those of the
    rows' models). The claims table reads them from here too."""
    rows_ = rows(data)
    grid = ab.of_sweep(rows_, ab.GRID)
    if configs is None:
        configs = model_specs.configs(rows_["model"], data)
    return rows_, grid, roofline.cell_table(grid, hardware.specs_table(data), configs,
                                            records.load_experiment("bandwidth", data)), configs


def tables(data, headline_ctx: int = 2048, seed: int = 0) -> dict:
    """Notebook 02's tables: `rows`, `grid` (its grid sweep's rows), `cells` (R_floor cells of the grid), the configs,
    `kernels`, `verify` (the arm checks of these runs), `sessions` (ab.sweep_sessions), `sweep_walls` and
    `session_walls`; `speedups` of the graph and compile arms per cell and sweep (seeded bootstrap CIs), `headline`
    (ab.headline: the headline sweep's sessions alone), `history` (the speed-ups of the older runs of a cell and
sweep, ab.ab_rows(history=True): reported, not counted), `published_speedups`, `decomposition` of the grid, `arm_table`
    and `compile_settings` (ab.compile_settings_compared, empty without the whole-model sweep)."""
    rows_, grid, cells_, configs = cells(data)
    kernels = records.load_experiment("kernels", data)
    verify = records.load_experiment("verify", data)
    speed = pd.concat([ab.speedups(rows_, arm=arm, seed=seed) for arm in SPEEDUP_ARMS], ignore_index=True)
    older = ab.ab_rows(data, history=True)
    history = pd.concat([ab.speedups(older, arm=arm, seed=seed).assign(
        runs=", ".join(sorted(set(older["run_id"])))) for arm in SPEEDUP_ARMS], ignore_index=True)
    if not history.empty:  # whether every row behind each older speed-up had a passing check of its own run
        ok = older.groupby(ab.CELL + ["sweep"])["checked"].all().rename("checked")
        history = history.join(ok, on=ab.CELL + ["sweep"])
    return dict(
        rows=rows_, grid=grid, cells=cells_, configs=configs, kernels=kernels,
        verify=verify[verify["run_id"].isin(set(rows_["run_id"]))],
        sessions=ab.sweep_sessions(rows_), sweep_walls=ab.sweep_walls(data, rows_),
        session_walls=ab.session_walls(data, rows_),
        speedups=speed, headline=ab.headline(speed, headline_ctx), history=history,
        published_speedups=published.select(published.load(data), "cuda_graphs", "speedup"),
        decomposition=ab.decomposition(cells_, kernels),
        arm_table=ab.arm_table(grid, hardware.specs_table(data), configs, kernels=kernels, seed=seed),
        compile_settings=ab.compile_settings_compared(grid, records.load_experiment("ab_whole_model", data)),
        headline_ctx=headline_ctx)


def findings(t: dict) -> dict:
    """{"02_findings": ab.findings of the speed-ups, the decomposition and the published speed-ups}."""
    return {"02_findings": ab.findings(t["speedups"], t["decomposition"], t["published_speedups"], t["headline_ctx"],
                                       t["rows"]) + ab.history_findings(t.get("history"))}
