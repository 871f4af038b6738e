"""Notebook 04, quantisation on the L4: does int4 realise its weight-traffic saving? Its measurements (every
path's layer checks into data/raw/<gpu>/verify.csv, then its decode steps checked against the bf16 model, one sweep
per path with SweepPlan(quant=<concrete key>), whose session applies quant.quantise_model_ after building the
model), its rows (decode.csv with SDPA and
the notebook's arms, each cell from one sweep; verify.csv; breakdown.csv), its tables (the byte model, the layer and
model checks, the cells against each path's own floor, the paper's table, the grid and its coverage, the profile's
product fits and casts) and its findings."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import pandas as pd

from decodegap import checked, hardware, levers, paths, published, records, roofline, selection
from decodegap.accounting import HEAD_QUANTISED
from decodegap.analysis import quant_across_gpus, quant_checks, quant_profile, quantisation as quant_report
from decodegap.harness import keys, models as model_specs, runs, sweep
from decodegap.outcome import attempt
from decodegap.quant import loaders as quant_loaders, paths as quant

NOTEBOOK = "04_quantisation_l4"
ARMS = quant_report.ARMS
"""The arms timed for each path: HF eager and graphed, the lean step with its Triton split-KV attention graphed and
compiled, so that each kernel's own speed shows beside HF's step."""
LAYERS = quant.LAYERS
DEFAULT_PATHS = ("bf16", "bnb-nf4", "awq-marlin", "awq-triton", "gptq-exllamav2", "int4-tinygemm", "int4-triton")
GRID_ARM = "lean_attn_graph"  # the arm of the grid table: every path over every measured model and context
CELL_COLUMNS = ["gpu", "model", "ctx", "arm", "quant", "sessions", "t_obs_ms", "bytes_quant", "t_floor_quant_ms",
                "r_floor_quant", "speedup_over_bf16", "realised_fraction", "saved_over_floor_drop", "check", "status",
                "checked", "quant_check", "model_k", "measured", "reason"]
"""The columns of figures/04_quant_cells."""


def plan(gpu: str, models, contexts, quant_paths=None, arms: Sequence[str] = ARMS, sessions: int = 1, steps: int = 30,
         warmup: int = 5, device: str = "cuda", retry_errors: bool = False) -> list[sweep.SweepPlan]:
    """The decode sweeps of `measure`, one per path (each requested path resolved to the kernel that would run on
    `device`, quant.resolve), in order; the layer checks come first and are not a sweep."""
    return [path_plan(gpu, models, contexts, quant.resolve(p, device), arms, sessions, steps, warmup, device,
                      retry_errors) for p in (quant_paths or DEFAULT_PATHS)]


def measure(gpu: str, models, contexts, quant_paths=None, arms: Sequence[str] = ARMS, sessions: int = 1,
            steps: int = 30, warmup: int = 5, device: str = "cuda", data=None, layers: bool = True,
            group_size: int | None = None, progress: bool = True, retry_errors: bool = False) -> dict:
    """Notebook 04's measurements: per-layer correctness (record_quant_layers), then, per path, whole decode
    steps in fresh sessions (sweep.run_sweep, SweepPlan(quant=<concrete key>)), appending to
    data/raw/<gpu>/decode.csv. `awq` is resolved here to the kernel that will run (awq-marlin or
    awq-triton), so the rows name it, and a member passed over gets `unavailable` rows with its reason. A path
    that cannot run here (package, device) gets `unavailable` rows with the reason instead of a sweep. bf16 cells
    another sweep timed already (notebooks 01 and 06) are not measured again, unless this sweep timed some of their
    sessions (a `reference` plan: sweep.SweepPlan.pending). Returns {requested: concrete key}."""
    keys.gpu_to_measure(gpu, device, data)  # the key against the device measured, before any row
    for key in models:
        model_specs.load_spec(key, data)
    chosen = tuple(quant_paths or DEFAULT_PATHS)
    if layers:
        record_quant_layers(gpu, models, [p for p in chosen if p != "bf16"], data, device, group_size=group_size,
                            rows=(1, *sorted(set(contexts))))
    def plan_for(path_key: str) -> sweep.SweepPlan:
        return path_plan(gpu, models, contexts, path_key, arms, sessions, steps, warmup, device, retry_errors)

    resolved = {}
    for requested in chosen:
        key = quant.resolve(requested, device)
        resolved[requested] = key
        for member in quant.ALIASES.get(requested, ())[:quant.ALIASES[requested].index(key) if key != requested else 0]:
            # a member passed over for the one that runs: its own `unavailable` rows, so the data say why
            _unavailable_cells(plan_for(member), data, quant.unavailable_reason(member, device) or "unavailable")
        path_sweep = plan_for(key)
        reason = quant.unavailable_reason(key, device)
        if reason is not None:
            _unavailable_cells(path_sweep, data, reason)
            continue
        sweep.run_sweep(path_sweep, data, progress=progress)
    return resolved


def record_quant_layers(gpu: str, models, quant_paths=None, data=None, device: str = "cuda", layers=None,
                        group_size: int | None = None, tol: float = quant.QUANT_TOL, rows=(1, 2048)) -> str:
    """Check every path on every decoder-linear shape of each model (quant.check_linear: the layer quantised
    from a stand-in bf16 weight, its output against x @ W_deq^T, W_deq read back from its own tensors) at each
    row count M of `rows` (1: a decode step; the contexts: a prefill), one verify.csv row each (check `layer`):
    `ok` within `tol`, `error` past it (NaN and inf included) or when the layer fails, `unavailable` with the
    reason (package, device or shape). The LM head is bf16 in every path notebook 04 reads (quant_report.NOTEBOOK_PATHS) and is not checked here.
    `group_size` None: quant.default_group_size of each model (128 for the 7-8B models). Resumes. A run that fails
    before its first row leaves no env.json entry (runs.recorded); one that ends records the GPU's state after it."""
    keys.gpu_to_measure(gpu, device, data)  # the key against the device measured, before any row
    with runs.recorded(gpu, data, "quant_layers", ["verify"], quant_weights=quant.WEIGHTS) as run_id:
        path = paths.raw_dir(gpu, data) / "verify.csv"
        done = selection.done_keys(path, records.VERIFY)
        for key in models:
            config = model_specs.load_spec(key, data).config
            shapes = quant.layer_shapes(config)
            G = group_size or quant.default_group_size(config)
            for requested in quant_paths or DEFAULT_PATHS:
                concrete = quant.resolve(requested, device)
                for layer in [n for n in (layers or LAYERS) if n != "lm_head"]:
                    k, n = shapes[layer]
                    base = dict(run_id=run_id, session=0, gpu=gpu, model=key, batch=1, arm="-", attn="-",
                                quant=concrete, tol=tol, check="layer", layer=layer)
                    todo = [m for m in rows if tuple(str(dict(base, ctx=m, rows=m)[c]) for c in records.VERIFY.key)
                            not in done]
                    if not todo:
                        continue
                    errors, status, reason = attempt(lambda: quant.check_linear(
                        concrete, k, n, device, tol, seed=LAYERS.index(layer), group_size=G, rows=todo),
                        (quant_loaders.QuantUnavailable,))
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
    pending = plan.pending_by_session(data)
    if not any(pending.values()):
        return 0
    run_id = runs.start_run(plan.gpu, data, "decode", plan=dataclasses.asdict(plan))  # its sweep: a later run resumes
    n = 0
    for session, cells in pending.items():
        rows = []
        for cell in cells:
            rows += sweep.status_rows(plan, run_id, session, cell, "unavailable", reason)
        records.append_rows(plan.csv_path(data), records.DECODE, rows)
        n += len(rows)
    return n


def path_plan(gpu: str, models, contexts, path_key: str, arms: Sequence[str] = ARMS, sessions: int = 1, steps: int = 30,
              warmup: int = 5, device: str = "cuda", retry_errors: bool = False) -> sweep.SweepPlan:
    """The sweep of one quantisation path's decode steps (`path_key` a concrete path: awq resolved first, see
    `measure`)."""
    return sweep.SweepPlan(gpu=gpu, models=tuple(models), contexts=tuple(contexts), arms=tuple(arms),
                           sessions=sessions, steps=steps, warmup=warmup, quant=path_key, device=device,
                           retry_errors=retry_errors, reference=path_key == "bf16")


def left_out(data, kept: pd.DataFrame, arms: Sequence[str] = ARMS) -> list[str]:
    """The quantised sessions `rows` (`kept`) leaves out of its cells (roofline.left_out_by_path), of the same rows
    before one sweep is chosen per cell."""
    every = quant_report.rows(checked.labelled(checked.load("decode", data)), arms)
    return roofline.left_out_by_path(_notebook_paths(every), kept, selection.run_plans(data))


def rows(data, arms: Sequence[str] = ARMS) -> pd.DataFrame:
    """The decode rows of `arms` with SDPA, every path, each cell from one sweep (quant_report.rows), a cell without
    a passing check of its own run (vs_eager, and for a quantised cell the current rule's checks of its run:
    checked.quantised_checks) as status rows `unchecked` (checked.labelled); the rows of the paths notebook 04 does
    not read (quant_report.NOTEBOOK_PATHS: a path that quantises the LM head too) left out."""
    return _notebook_paths(quant_report.rows(checked.labelled(checked.load("decode", data)), arms,
                                             selection.run_plans(data)))


def _notebook_paths(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame`'s rows but those of a registered path notebook 04 does not read (quant_report.NOTEBOOK_PATHS)."""
    return frame[~frame["quant"].isin(HEAD_QUANTISED)] if "quant" in frame else frame


def cells(data, configs: Mapping[str, Mapping] | None = None, models=(), arms: Sequence[str] = ARMS,
          group_size: int | None = None) -> tuple:
    """(`rows`, quant_report.cells of them with their checks, the configs used: `configs`, or those of the rows'
    models and `models`). The claims table reads the cells from here too."""
    decode_rows = rows(data, arms)
    if configs is None:
        configs = model_specs.configs(set(decode_rows["model"]) | set(models), data)
    return decode_rows, cells_of(decode_rows, hardware.specs_table(data), configs,
                                 records.load_experiment("bandwidth", data), records.load_experiment("verify", data),
                                 group_size), configs


def cells_of(decode_rows: pd.DataFrame, specs: pd.DataFrame, configs: Mapping[str, Mapping],
             bandwidth_rows: pd.DataFrame, verify_rows: pd.DataFrame, group_size: int | None = None) -> pd.DataFrame:
    """quant_report.cells of `decode_rows` (rows' selection: one sweep a cell) with the checks of their own runs among
    `verify_rows` and the `checked` column: `cells`' table, which the claims make again from fewer rows (a session
    left out: claims.one_left_out)."""
    cell_table = quant_report.cells(decode_rows, specs, configs, bandwidth_rows, group_size,
                                    checked.own_checks(decode_rows, verify_rows))
    return cell_table.assign(checked=checked.column(cell_table["status"]))


def tables(data, models=(), contexts: Sequence[int] = (2048, 16384), arms: Sequence[str] = ARMS,
           table_model: str = "qwen2.5-7b", grid_arm: str = GRID_ARM, group_size: int | None = None) -> dict:
    """Notebook 04's tables: `bytes` (the byte model of `models` and `table_model` at the first context), `verify`,
    `layers` and `model_checks` (the correctness rows), `rows`, `cells` (every path against its own floor, of
    `table_model`), `check_coverage` (per path, the timed cells checked in their own run and those drawn unchecked:
    quant_checks.coverage), the configs, `paper_table` (the paper's table with our columns), `published`, `published_steps`
    (the paper's bf16 comparison points), `grid` (every path on `grid_arm`) and its `coverage`, `gpu_pairs` (the
    grid's cells on two GPUs against their bandwidth ratio: quant_across_gpus.pairs), the profile
    (`products`, `product_fits`, `casts`), `int4_target` (the fastest int4 step against levers.TARGETS["int4"]) and
    `left_out` (the quantised sessions one sweep per cell leaves out: left_out), `sources` (each run's source digest:
    hardware.run_sources). decode.csv and its checks are read
    and joined once for the cells and the left-out sessions (checked.loaded_once)."""
    with checked.loaded_once():
        return _tables(data, models, contexts, arms, table_model, grid_arm, group_size)


def _tables(data, models, contexts, arms, table_model, grid_arm, group_size) -> dict:
    """tables' body, inside checked.loaded_once."""
    specs = hardware.specs_table(data)
    byte_configs = {key: model_specs.load_spec(key, data).config for key in dict.fromkeys(list(models) + [table_model])}
    verify = _notebook_paths(records.load_experiment("verify", data))
    decode_rows, cell_table, configs = cells(data, models=[table_model], arms=arms, group_size=group_size)
    pub = published.load(data)
    breakdown = _notebook_paths(selection.latest_profiles(checked.grid_rows(records.load_experiment("breakdown", data))))
    profile_configs = model_specs.configs(set(breakdown["model"]) | set(configs), data)
    by_product = quant_profile.products(breakdown, profile_configs, specs)
    measured = sorted(set(cell_table["ctx"])) if not cell_table.empty else list(contexts)
    target = levers.TARGETS["int4"]
    grid = quant_profile.grid(cell_table, grid_arm).reset_index()
    return dict(
        bytes=quant_report.byte_table(byte_configs, ctx=contexts[0], group_size=group_size),
        verify=verify, layers=quant_checks.layer_summary(verify), model_checks=quant_checks.model_checks(verify),
        rows=decode_rows, cells=cell_table, configs=configs, published=pub,
        paper_table=quant_report.paper_table(cell_table, pub, specs, configs, table_model, contexts, arms, group_size),
        published_steps=published.select(pub, "quantisation", "step_ms")[["gpu", "arm", "quant", "value", "unit",
                                                                          "notes"]],
        check_coverage=quant_checks.coverage(cell_table),
        grid=grid, gpu_pairs=quant_across_gpus.pairs(grid, specs, grid_arm, cell_table),
        coverage=quant_profile.coverage(cell_table, arms, list(models), measured),
        products=by_product, product_fits=quant_profile.product_fits(by_product, specs),
        casts=quant_profile.casts(breakdown, profile_configs),
        int4_target=quant_report.int4_target(cell_table, configs, specs, records.load_experiment("bandwidth", data),
                                             target),
        target=target, table_model=table_model, contexts=list(contexts), arms=list(arms), grid_arm=grid_arm,
        left_out=left_out(data, decode_rows, arms), sources=hardware.run_sources(hardware.load_env(data)))


def findings(t: dict) -> dict:
    """{"04_findings": per GPU, context and arm whether each path realises its saving, how many timed cells of each
    path are checked in their own run and how many are drawn unchecked, the checks, the grid, the
    profile, the fastest int4 step against the int4 target with what stands in its way, the quantised sessions
    left out of their cells, and the cells whose sessions ran more than one version of the code
    (roofline.code_versions_within_cells)}."""
    obstacles = quant_profile.target_obstacles(t["int4_target"], t["product_fits"], t["products"], t["target"])
    return {"04_findings": (
        quant_report.findings(t["paper_table"], t["published"], t["cells"], t["table_model"], t["contexts"], t["arms"])
        + quant_checks.coverage_findings(t["cells"]) + quant_checks.check_findings(t["verify"])
        + quant_profile.grid_findings(t["cells"], t["grid_arm"]) + quant_across_gpus.findings(t["gpu_pairs"])
        + quant_profile.profile_findings(t["product_fits"], t["products"], t["casts"])
        + [quant_report.int4_target_sentence(t["int4_target"], t["target"])]
        + [line for line in [obstacles] if line] + t.get("left_out", [])
        + roofline.code_versions_within_cells(t["rows"], t.get("sources", {})))}
