"""Notebook 06, closing the gap: how close to the memory floor can batch-1 decode get? Its measurements
(ladder_bench: every lever of the ladder in fresh sessions, then the profiled steps), its rows (decode.csv with the
superseded rows it still reads, plus the A/B sweep's cells decode.csv lacks; breakdown.csv; the check-power
diagnostic), its tables (the ladder, the kernels by category and by product, the products' cost lines, the check's
power) and its findings (against the targets, where the time goes, the products and the budget, the reading)."""

from __future__ import annotations

import pandas as pd

from decodegap.analysis import cuda_graphs_ab as ab, check_power, closing_the_gap as ladder, closing_the_gap_targets as ladder_targets
from decodegap import checked, compare, hardware, records, roofline
from decodegap.harness import models

NOTEBOOK = "06_closing_the_gap"
TARGETS = ladder.TARGETS
PRODUCT_ARMS = ("eager", "lean", "lean_kernels_graph", "lean_attn_compile")  # the profiled steps of the products figure


def plan(gpu: str, models_, contexts) -> list:
    """What the ladder sweeps, (quant, models, contexts, arms) per sweep (levers.ladder_plan); measure adds the
    profiled steps."""
    from decodegap import levers

    return levers.ladder_plan(models_, contexts, gpu)


def measure(gpu: str, models_, contexts, sessions: int = 3, steps: int = 30, warmup: int = 5, device: str = "cuda",
            data=None, retry_errors: bool = False, only=None, again: bool = False) -> None:
    """The sweeps of `plan`, then the profiled steps (ladder_bench.measure_ladder; resumes); `only`: these levers;
    `again`: measured and profiled again."""
    from decodegap.experiments import closing_the_gap_measure as ladder_bench

    ladder_bench.measure_ladder(gpu, models_, contexts, sessions, steps, warmup, device, data,
                                retry_errors=retry_errors, only=only, again=again)


def rows(data) -> pd.DataFrame:
    """The ladder's decode rows (ladder.ladder_rows): decode.csv with its superseded rows, each cell from one sweep,
    plus the A/B sweep's for the cells and arms decode.csv lacks; a cell timed without a passing check of its own
    run is a status row `unchecked` (checked.labelled: the ladder shows it as such, no target reads it)."""
    return ladder.ladder_rows(checked.labelled(checked.load("decode", data, superseded=True)), ab.ab_rows(data),
                              records.run_plans(data))


def tables(data, models_=()) -> dict:
    """Notebook 06's tables: `rows`, `cells` (roofline.cell_table of them), `ladder` (ms and R_floor of every
    lever per cell), `breakdown` (the profiled steps' kernels by category against their floors), `projections` (the
    matrix products one by one) and their `product_fits` (fixed cost per product and streaming rate), `check_power`
    (the decode check against injected faults), the configs, the registry's `specs` and `measured_gbps` (copy
    bandwidth per GPU)."""
    rows_ = rows(data)
    bandwidth_rows = records.load_experiment("bandwidth", data)
    specs = hardware.specs_table(data)
    configs = models.configs(set(rows_["model"]) | set(models_), data)
    cells_ = (roofline.cell_table(rows_, specs, configs, bandwidth_rows) if not rows_.empty else
              pd.DataFrame(columns=roofline.CELL + ["t_obs_ms", "sessions", "status", "t_floor_ms_W_all"]))
    breakdown_rows = records.latest_profiles(records.with_superseded("breakdown", data))
    by_projection = ladder.projection_table(breakdown_rows, configs, specs)
    return dict(
        rows=rows_, cells=cells_, configs=configs, specs=specs,
        ladder=(lambda t: t.assign(checked=checked.column(t["status"])))(
            ladder.ladder_table(cells_, superseded=ladder.superseded_cells(rows_))),
        breakdown=ladder.category_table(breakdown_rows, configs, specs),
        projections=by_projection, product_fits=ladder.product_cost_fit(by_projection),
        check_power=check_power.table(check_power.load(data)),
        measured_gbps=roofline.measured_bandwidth(bandwidth_rows).to_dict())


def datasheet_gbps(t: dict, target: str = "bf16") -> float:
    """The datasheet bandwidth of the target's GPU (GB/s)."""
    return float(t["specs"].set_index("gpu").loc[TARGETS[target]["gpu"], "bandwidth_gbps"])


def findings(t: dict) -> dict:
    """Per figures stem: the ladder against the targets, where the time goes, the products and the budget, the
    check's power, and the reading's numbers."""
    return {"06_findings_targets": (ladder_targets.target_findings(t["ladder"])
                                    + ladder_targets.grid_target_findings(t["ladder"], t["breakdown"])
                                    + ladder_targets.unmeasured_findings(t["ladder"])),
            "06_findings_where_the_time_goes": ladder.gap_findings(t["breakdown"], t["ladder"], t["specs"],
                                                                   t["measured_gbps"]),
            "06_findings_products": (ladder.projection_findings(t["projections"])
                                     + ladder.budget_findings(t["breakdown"], t["projections"], t["ladder"])),
            "06_findings_check_power": check_power.findings(t["check_power"], compare.VERIFY_TOL),
            "06_findings_reading": ladder.reading_findings(t["ladder"], t["breakdown"])}
