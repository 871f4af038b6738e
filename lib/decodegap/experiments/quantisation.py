"""Notebook 04, quantisation on the L4: does int4 realise its weight-traffic saving? Its measurements (quant_bench:
every path's layer checks, then its decode steps checked against the bf16 model), its rows (decode.csv with SDPA and
the notebook's arms, each cell from one sweep; verify.csv; breakdown.csv), its tables (the byte model, the layer and
model checks, the cells against each path's own floor, the paper's table, the grid and its coverage, the profile's
product fits and casts) and its findings."""

from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from decodegap import checked, hardware, published, records
from decodegap.analysis import closing_the_gap as ladder, quant_profile, quantisation as quant_report
from decodegap.harness import models as model_specs

NOTEBOOK = "04_quantisation_l4"
ARMS = quant_report.ARMS
GRID_ARM = "lean_attn_graph"  # the arm of the grid table: every path over every measured model and context
CELL_COLUMNS = ["gpu", "model", "ctx", "arm", "quant", "sessions", "t_obs_ms", "bytes_quant", "t_floor_quant_ms",
                "r_floor_quant", "speedup_over_bf16", "realised_fraction", "saved_over_floor_drop", "check", "status",
                "checked", "reason"]
"""The columns of figures/04_quant_cells."""


def plan(gpu: str, models, contexts, quant_paths=None, arms: Sequence[str] = ARMS, sessions: int = 1, steps: int = 30,
         warmup: int = 5, device: str = "cuda") -> list:
    """The decode sweeps of `measure`, one per path (quant_bench.plans; the layer checks come first and are not a
    sweep)."""
    from decodegap.experiments import quantisation_measure as quant_bench

    return quant_bench.plans(gpu, models, contexts, quant_paths, arms, sessions, steps, warmup, device)


def measure(gpu: str, models, contexts, quant_paths=None, arms: Sequence[str] = ARMS, sessions: int = 1,
            steps: int = 30, warmup: int = 5, device: str = "cuda", data=None, layers: bool = True,
            group_size: int | None = None, progress: bool = True, retry_errors: bool = False) -> dict:
    """Every path's layer checks, then its decode steps in fresh sessions (quant_bench.measure_quant, which builds a
    sweep per path); returns {requested path: the path that ran}."""
    from decodegap.experiments import quantisation_measure as quant_bench

    return quant_bench.measure_quant(gpu, models, contexts, quant_paths, arms, sessions, steps, warmup, device, data,
                                     layers=layers, group_size=group_size, progress=progress,
                                     retry_errors=retry_errors)


def rows(data, arms: Sequence[str] = ARMS) -> pd.DataFrame:
    """The decode rows of `arms` with SDPA, every path, each cell from one sweep (quant_report.rows), a cell without
    a passing check of its own run (vs_eager, and for a quantised cell the vs_bf16 model check) as status rows
    `unchecked` (checked.labelled)."""
    return quant_report.rows(checked.labelled(checked.load("decode", data)), arms, records.run_plans(data))


def cells(data, configs: Mapping[str, Mapping] | None = None, models=(), arms: Sequence[str] = ARMS,
          group_size: int | None = None) -> tuple:
    """(`rows`, quant_report.cells of them with their checks, the configs used: `configs`, or those of the rows'
    models and `models`). The claims table reads the cells from here too."""
    rows_ = rows(data, arms)
    if configs is None:
        configs = model_specs.configs(set(rows_["model"]) | set(models), data)
    cells_ = quant_report.cells(rows_, hardware.specs_table(data), configs, records.load_experiment("bandwidth", data),
                                group_size, checked.own_checks(rows_, records.load_experiment("verify", data)))
    return rows_, cells_.assign(checked=checked.column(cells_["status"])), configs


def tables(data, models=(), contexts: Sequence[int] = (2048, 16384), arms: Sequence[str] = ARMS,
           table_model: str = "qwen2.5-7b", grid_arm: str = GRID_ARM, group_size: int | None = None) -> dict:
    """Notebook 04's tables: `bytes` (the byte model of `models` and `table_model` at the first context), `verify`,
    `layers` and `model_checks` (the correctness rows), `rows`, `cells` (every path against its own floor, of
    `table_model`), the configs, `paper_table` (the paper's table with our columns), `published`, `published_steps`
    (the paper's bf16 comparison points), `grid` (every path on `grid_arm`) and its `coverage`, the profile
    (`products`, `product_fits`, `casts`) and `int4_target` (the fastest int4 step against ladder.TARGETS["int4"])."""
    specs = hardware.specs_table(data)
    byte_configs = {key: model_specs.load_spec(key, data).config for key in dict.fromkeys(list(models) + [table_model])}
    verify = records.load_experiment("verify", data)
    rows_, cells_, configs = cells(data, models=[table_model], arms=arms, group_size=group_size)
    pub = published.load(data)
    breakdown = records.latest_profiles(records.load_experiment("breakdown", data))
    profile_configs = model_specs.configs(set(breakdown["model"]) | set(configs), data)
    by_product = quant_profile.products(breakdown, profile_configs, specs)
    measured = sorted(set(cells_["ctx"])) if not cells_.empty else list(contexts)
    target = ladder.TARGETS["int4"]
    return dict(
        bytes=quant_report.byte_table(byte_configs, ctx=contexts[0], group_size=group_size),
        verify=verify, layers=quant_report.layer_summary(verify), model_checks=quant_report.model_checks(verify),
        rows=rows_, cells=cells_, configs=configs, published=pub,
        paper_table=quant_report.paper_table(cells_, pub, specs, configs, table_model, contexts, arms, group_size),
        published_steps=published.select(pub, "quantisation", "step_ms")[["gpu", "arm", "quant", "value", "unit",
                                                                          "notes"]],
        grid=quant_profile.grid(cells_, grid_arm).reset_index(),
        coverage=quant_profile.coverage(cells_, arms, list(models), measured),
        products=by_product, product_fits=quant_profile.product_fits(by_product, specs),
        casts=quant_profile.casts(breakdown, profile_configs),
        int4_target=quant_report.int4_target(cells_, configs, specs, records.load_experiment("bandwidth", data),
                                             target),
        target=target, table_model=table_model, contexts=list(contexts), arms=list(arms), grid_arm=grid_arm)


def findings(t: dict) -> dict:
    """{"04_findings": per GPU, context and arm whether each path realises its saving, the checks, the grid, the
    profile, and the fastest int4 step against the int4 target with what stands in its way}."""
    obstacles = quant_profile.target_obstacles(t["int4_target"], t["product_fits"], t["products"], t["target"])
    return {"04_findings": (
        quant_report.findings(t["paper_table"], t["published"], t["cells"], t["table_model"], t["contexts"], t["arms"])
        + quant_report.check_findings(t["verify"]) + quant_profile.grid_findings(t["cells"], t["grid_arm"])
        + quant_profile.profile_findings(t["product_fits"], t["products"], t["casts"])
        + [quant_report.int4_target_sentence(t["int4_target"], t["target"])]
        + [line for line in [obstacles] if line])}
