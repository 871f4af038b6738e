"""Notebook 01, the roofline grid: is batch-1 decode at the memory floor? Its sweep (every model x context x HF arm,
bf16 with SDPA's default, through sweep.run_sweep, then the copy-bandwidth probe), its rows (decode.csv, each cell from one
sweep), its tables (bytes per model, floors per GPU, the R_floor cell table) and its findings."""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from decodegap import checked, hardware, paths, published, records, roofline, selection
from decodegap.harness import models as model_specs, runs
from decodegap.harness.sweep import SweepPlan, run_sweep

NOTEBOOK = "01_roofline"
FLOORS_CTX = 2048  # context of the floors-per-GPU table, tokens
CELL_COLUMNS = ["gpu", "model", "ctx", "arm", "sessions", "max_cache_len", "t_obs_ms", "t_floor_ms_W_all",
                "r_floor_W_all", "t_floor_ms_W_streamed", "r_floor_W_streamed", "measured_gbps",
                "r_floor_measured_W_all", "r_floor_measured_W_streamed", "status", "checked", "reason", "flag"]
"""The columns of figures/01_roofline_cells."""


def plan(gpu: str, models, contexts, arms=("eager", "hf_default"), sessions: int = 3, steps: int = 30,
         warmup: int = 5, device: str = "cuda") -> list[SweepPlan]:
    """The one sweep of the roofline grid: bf16 with SDPA's default, every model x context x arm, `sessions` fresh
    sessions."""
    return [SweepPlan(gpu=gpu, models=tuple(models), contexts=tuple(contexts), arms=tuple(arms), sessions=sessions,
                      steps=steps, warmup=warmup, device=device)]


def measure(gpu: str, models, contexts, arms=("eager", "hf_default"), sessions: int = 3, steps: int = 30,
            warmup: int = 5, device: str = "cuda", data=None, bandwidth_bytes: int = 2 << 30) -> str:
    """Notebook 01's measurements: the sweep of `plan` (sweep.run_sweep, into data/raw/<gpu>/decode.csv), then the
    copy-bandwidth probe (`record_bandwidth`). Returns the sweep's run id."""
    (grid,) = plan(gpu, models, contexts, arms, sessions, steps, warmup, device)
    run_id = run_sweep(grid, data)
    record_bandwidth(gpu, data, device, size_bytes=bandwidth_bytes)
    return run_id


def record_bandwidth(gpu: str, data=None, device: str = "cuda", size_bytes: int = 2 << 30, reps: int = 20) -> str:
    """The copy-bandwidth probe (hardware.copy_bandwidth), its rows appended to data/raw/<gpu>/bandwidth.csv;
    returns its run id."""
    with runs.recorded(gpu, data, "bandwidth", ["bandwidth"], device=device,
                       gpu_state_before=hardware.gpu_state()) as run_id:
        bandwidth_rows = hardware.copy_bandwidth(device, size_bytes=size_bytes, reps=reps)
        for r in bandwidth_rows:
            r.update(run_id=run_id, gpu=gpu)
        records.append_rows(paths.raw_dir(gpu, data) / "bandwidth.csv", records.BANDWIDTH, bandwidth_rows)
    return run_id


def measured_models(data) -> set:
    """The model keys the decode and A/B rows name, of every GPU and notebook (the claims table's configs)."""
    return set(records.load_experiment("decode", data)["model"]) | set(records.load_experiment("ab", data)["model"])


def rows(data) -> pd.DataFrame:
    """The decode rows of the grid (roofline.default_rows: SDPA, bf16, the HF arms), each cell from one sweep; a
    cell timed without a passing check of its own run is a status row `unchecked` (checked.labelled), never a
    timing, so that a checked sweep of the cell wins and an unchecked one is drawn as such."""
    return roofline.default_rows(checked.labelled(checked.load("decode", data)), selection.run_plans(data))


def cells(data, configs: Mapping[str, Mapping] | None = None, models=()) -> tuple:
    """(`rows`, roofline.cell_table of them against the datasheet and the measured copy bandwidth, the configs used:
    `configs`, or those of the rows' models and `models`). The claims table reads the cells from here too."""
    decode_rows = rows(data)
    if configs is None:
        configs = model_specs.configs(set(decode_rows["model"]) | set(models), data)
    table = cell_table(decode_rows, hardware.specs_table(data), configs, records.load_experiment("bandwidth", data))
    return decode_rows, table, configs


def cell_table(decode_rows: pd.DataFrame, specs: pd.DataFrame, configs: Mapping[str, Mapping],
               bandwidth_rows: pd.DataFrame) -> pd.DataFrame:
    """The R_floor cells of `decode_rows` (roofline.cell_table against the datasheet `specs` and the copy bandwidth of
    `bandwidth_rows`) with their `checked` column: `cells`' table, and the claims' when they leave rows out
    (claims.one_left_out)."""
    table = roofline.cell_table(decode_rows, specs, configs, bandwidth_rows)
    return table.assign(checked=checked.column(table["status"]))


def tables(data, models=(), configs: Mapping[str, Mapping] | None = None) -> dict:
    """Notebook 01's tables: `rows`, `cells` (roofline.cell_table), `model_bytes`, `floors` (t_floor in ms at
    FLOORS_CTX on every GPU of the registry, W_all at the datasheet bandwidth), `flagged` (cells with R_floor > 1),
    `published` (paper.csv), `published_r_floor` (the paper's R_floor points with their GPU's bandwidth), the
    configs, `all_rows` (every default-attention bf16 HF row, before one sweep is chosen per cell), `plans` (the
    runs' sweep plans, selection.run_plans), `commits` ({(gpu, run id): its commit, hardware.provenance_of's of
    env.json's corrected entry}) and `sources` ({(gpu, run id): its source digest, hardware.run_sources}).
    decode.csv and its checks are read and joined once for `rows` and `all_rows` (checked.loaded_once)."""
    with checked.loaded_once():
        return _tables(data, models, configs)


def _tables(data, models, configs) -> dict:
    """tables' body, inside checked.loaded_once."""
    decode_rows, cell_table, configs = cells(data, configs, models)
    specs = hardware.specs_table(data)
    pub = published.load(data)
    return dict(
        rows=decode_rows, cells=cell_table, configs=configs,
        model_bytes=roofline.model_bytes_table(configs),
        floors=roofline.floors_by_gpu(configs, specs, ctx=FLOORS_CTX, convention="W_all").reset_index(names="model"),
        flagged=cell_table[cell_table["flag"].astype(bool)],
        published=pub,
        published_r_floor=published.select(pub, "inverted_ladder", "r_floor").merge(specs[["gpu", "bandwidth_gbps"]],
                                                                                   on="gpu"),
        all_rows=roofline.default_rows(checked.labelled(checked.load("decode", data))),
        plans=selection.run_plans(data),
        **_provenance(hardware.load_env(data)))


def _provenance(env: dict) -> dict:
    """`commits` ({(gpu, run id): its short commit}) and `sources` ({(gpu, run id): its source digest}) of `env`."""
    return dict(commits={key: hardware.provenance_of(entry)["commit"] for key, entry in env.items()},
                sources=hardware.run_sources(env))


def findings(t: dict) -> dict:
    """{"01_findings": the cells' findings (roofline.findings), the sessions left out of them, per GPU whose cells
    come from runs of several commits, which contexts each commit timed (roofline.commits_across_contexts), and the
    cells whose sessions ran more than one version of the code (roofline.code_versions_within_cells)}."""
    return {"01_findings": roofline.findings(t["cells"], t["published"])
            + roofline.left_out_sweeps(t["all_rows"], t["rows"], t.get("plans"))
            + roofline.commits_across_contexts(t["rows"], t.get("commits", {}))
            + roofline.code_versions_within_cells(t["rows"], t.get("sources", {}))}
