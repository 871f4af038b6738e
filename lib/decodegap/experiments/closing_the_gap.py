"""Notebook 06, closing the gap: how close to the memory floor can batch-1 decode get? Its measurements
(every lever of the ladder in fresh sessions, then the profiled steps, profile.record_kernels), its rows (decode.csv
with the superseded rows it still reads, plus the A/B sweep's cells decode.csv lacks; breakdown.csv; the
check-sensitivity diagnostic), its tables (the ladder, the kernels by category and by product, the products' cost
lines, the check's sensitivity) and its findings (against the targets, where the time goes, the products and the budget, the reading)."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from decodegap.analysis import check_sensitivity, closing_the_gap as ladder
from decodegap.analysis import closing_the_gap_confirmation as confirmation, closing_the_gap_peers as peers
from decodegap.analysis import closing_the_gap_bands as bands, closing_the_gap_megakernel as megakernel
from decodegap.analysis import closing_the_gap_int4_instructions as int4_instructions
from decodegap.analysis import closing_the_gap_attention as attention_splits
from decodegap.analysis import closing_the_gap_int4_products as int4_products, closing_the_gap_targets as ladder_targets
from decodegap.analysis import closing_the_gap_tuner_sessions as tuner_sessions, profiles
from decodegap import checked, compare, hardware, levers, paths, records, roofline, selection
from decodegap import sessions as session_bands
from decodegap.arms import ARM_KERNELS
from decodegap.harness import continuation, keys, models, profile
from decodegap.experiments import cuda_graphs_ab
from decodegap.harness.sweep import SweepPlan, run_sweep

NOTEBOOK = "06_closing_the_gap"
TARGETS = levers.TARGETS
PRODUCT_ARMS = ("eager", "lean", "lean_kernels_graph", "lean_attn_compile")  # the profiled steps of the products figure
LADDER_PROFILED_ARMS = ("eager", "lean", "lean_kernels_graph", "lean_attn_graph") + tuple(
    arm for arm, kernels in ARM_KERNELS.items() if "pdl" in kernels)
"""The arms `measure` profiles per cell (profile.kernel_profile profiles the eager step a graphed arm captures; the
fused steps with PDL, every such arm of the registry, kernel by kernel). Before the split-KV attention's products
became tl.dot, the H200 target cell was profiled as `lean_kernels` (the same kernels, eager); those rows stay,
labelled by their run's commit."""
LADDER_TARGET_PROFILED_ARMS = ("lean_attn_compile",)
"""Arms `measure` profiles at the target cell only (levers.TARGETS): the fastest lever there, compiled without its
CUDA graph for the profile (a compile per cell, each cold, would cost a GPU run's time over the grid), in each
quantisation of LADDER_TARGET_PROFILED_QUANTS."""
LADDER_TARGET_PROFILED_QUANTS = ("bf16", "int4-tinygemm")
"""The quantisations of the target-cell profiles: bf16 and int4 weight-only on the fastest path, one per target."""


def plan(gpu: str, model_keys, contexts, data=None, only=None) -> list:
    """What the ladder sweeps, (quant, models, contexts, arms) per sweep (levers.ladder_plan, with the levers that
    promoted_levers names over the grid); measure adds the profiled steps."""
    return levers.ladder_plan(model_keys, contexts, only, promoted=promoted_levers(data))


def promoted_levers(data) -> frozenset:
    """(arm, quant) of the levers.TARGET_CELL_ONLY levers that a confirmation sweep holds as the fastest of their
    kind at the target cell (confirmed_at_target): the ladder then sweeps them over the grid (levers.ladder_plan)."""
    data = paths.DATA if data is None else data
    return _promoted(confirmation.confirmed_levers(*confirmation.confirming_rows(data)))


def _promoted(held: pd.DataFrame) -> frozenset:
    """promoted_levers of `held`, the confirmed levers (confirmation.confirmed_levers of confirming_rows)."""
    return frozenset(_at_target(held).values()) & levers.TARGET_CELL_ONLY


def measure(gpu: str, model_keys, contexts, sessions: int = 3, steps: int = 30, warmup: int = 5, device: str = "cuda",
            data=None, retry_errors: bool = False, only=None, again: bool = False) -> None:
    """Notebook 06's measurements, resumable: the sweeps of levers.ladder_plan in fresh sessions (per
    quantisation path, bf16 then int4 tinygemm, the lean levers over the grid, int4 also on the HF graph; the
    levers of levers.TARGET_CELL_ONLY at the target cell only, but those promoted_levers names, over the grid too; the
    other HF levers come from notebooks 01 and
    02), then one profiled step per cell (kernel counts and the per-kernel breakdown) of the HF eager
    and lean eager steps and of the step each Triton lever's graph replays (lean_kernels_graph: GEMV and
    split-KV attention; lean_attn_graph: the attention only), and at the target cell the compiled lean step with the
    Triton attention (LADDER_TARGET_PROFILED_ARMS), bf16 and int4 (LADDER_TARGET_PROFILED_QUANTS). `retry_errors`
    measures again the lean cells recorded only as `error` (their rows stay; a cell's ok rows win in the tables).
    `only`: these levers (arms of levers.LEVERS) and no others, swept and profiled (ladder --levers); `again`:
    every cell measured and profiled again, the old rows kept as history (ladder --again: after a change to a
    lever's kernels; roofline.one_sweep and selection.latest_profiles read the new rows)."""
    keys.gpu_to_measure(gpu, device, data)
    keys.models(model_keys, data)
    sweeps = plan(gpu, model_keys, contexts, data, only)
    plans = selection_plans(gpu, model_keys, contexts, sessions, steps, warmup, device, data, retry_errors, only, again,
                            sweeps=sweeps)
    for sweep_plan in plans:
        run_sweep(sweep_plan, data)
    for quant, arms, at_target in profiled_levers(sweeps, only, model_keys, contexts):
        profile.record_kernels(gpu, [levers.TARGETS["bf16"]["model"]] if at_target else model_keys,
                               [levers.TARGETS["bf16"]["ctx"]] if at_target else contexts, arms=arms, data=data,
                               device=device, quant=quant, again=again)
    target_arms = tuple(a for a in LADDER_TARGET_PROFILED_ARMS if not only or a in only)
    if target_arms and levers.target_in_grid(model_keys, contexts):
        target = levers.TARGETS["bf16"]
        for quant in LADDER_TARGET_PROFILED_QUANTS:
            profile.record_kernels(gpu, [target["model"]], [target["ctx"]], arms=target_arms, data=data,
                                   device=device, quant=quant, again=again)


def selection_plans(gpu: str, model_keys, contexts, sessions: int = 3, steps: int = 30, warmup: int = 5,
                    device: str = "cuda", data=None, retry_errors: bool = False, only=None, again: bool = False,
                    sweeps=None) -> list[SweepPlan]:
    """The selection sweeps `measure` runs, in its order (`sweeps`: plan(gpu, model_keys, contexts, data, only),
    made here where not given), before its profiles; `closing-the-gap --plan` lists them without measuring."""
    sweeps = plan(gpu, model_keys, contexts, data, only) if sweeps is None else sweeps
    return [SweepPlan(gpu=gpu, models=plan_models, contexts=plan_contexts, arms=arms, quant=quant, sessions=sessions,
                      steps=steps, warmup=warmup, device=device, retry_errors=retry_errors, again=again)
            for quant, plan_models, plan_contexts, arms in sweeps]


def profiled_levers(sweeps, only, model_keys, contexts) -> list[tuple[str, tuple, bool]]:
    """(quant, arms, at the target cell only) of the profiles measure records after its sweeps: in bf16 the
    LADDER_PROFILED_ARMS that have a bf16 lever (levers.LEVERS), at every cell; in each other quantisation the
    LADDER_PROFILED_ARMS its sweeps ran, at the target cell only (where the grid holds it), as the int4 steps of
    bench/measure.sh profile theirs. History: until 2026-12-05 evening every LADDER_PROFILED_ARMS arm was profiled in
    bf16, so the ladder's run of lean_fused_all_kv_together_graph (an int4-triton-head lever only) profiled it on the
    bf16 model (run 20261205T155729-8a1d95, labelled bf16: kept as what it is) and not on its own path."""
    bf16_arms = {arm for _, arm, quant in levers.LEVERS if quant == "bf16"}
    out = []
    bf16 = tuple(a for a in LADDER_PROFILED_ARMS if a in bf16_arms and (not only or a in only))
    if bf16:
        out.append(("bf16", bf16, False))
    if levers.target_in_grid(model_keys, contexts):
        for quant in dict.fromkeys(q for q, *_ in sweeps if q != "bf16"):
            arms = tuple(dict.fromkeys(a for q, _, _, swept in sweeps if q == quant for a in swept
                                       if a in LADDER_PROFILED_ARMS))
            if arms:
                out.append((quant, arms, True))
    return out


def confirmation_plans(gpu: str, data, sessions: int = levers.CONFIRM_SESSIONS, steps: int = 30, warmup: int = 5,
                       device: str = "cuda", model_keys=None, contexts=None, kinds=None,
                       again: bool = False, ladder_table: pd.DataFrame | None = None) -> list[SweepPlan]:
    """The confirmation sweeps of `gpu`'s cells (analysis.closing_the_gap_confirmation): per model, quantisation
    and (chosen lever, runner-up) pair of the current ladder, one sweep of `sessions` fresh sessions over the
    contexts where that pair was chosen, numbered from levers.CONFIRM_FIRST_SESSION, the two arms alternating in
    order between sessions and checked in every session. A pair of two quantisations goes into two sweeps (one
    path per sweep), not alternated. `model_keys` and `contexts` (default: every cell) keep the cells of those
    models and contexts only, e.g. the targets' cell first in a short run; `kinds` (default both) the cells of those
    kinds, "bf16" or "int4" (an int4 pair on the compiled lever compiles in every session: minutes a cell). Per model,
    the sweeps holding a chosen lever come before those of a runner-up alone (since 2026-12-05; before, by path name).
    `again`: measure cells already confirmed again, in a run of their own (after a change to a lever's code: the
    confirmation table then reads the newest commit's runs). A pair whose arms have confirmation rows at its cells from
    a run that did not time this pair (the runner-up confirmed earlier as another cell's chosen lever, say) is measured
    in a run of its own as well (unpaired_runs): resuming would skip the arm those rows cover and time the other one
    alone; not where a run of the pair itself has timed it whole (paired_run_covers: resuming times nothing). History:
    before 2026-12-05 a pair resumed from any confirmation rows of its arms, and run 20261205T053526-b283dc timed the
    bf16 target cell's chosen lever without its runner-up that way; until 2026-12-05 afternoon a pair confirmed whole in
    its own run was planned again whenever another pairing's run had rows of one of its arms. `ladder_table`: the
    ladder (tables(data)["ladder"]), computed here from `data` where not given."""
    choice = confirmation.choices(tables(data)["ladder"] if ladder_table is None else ladder_table)
    choice = choice[choice["gpu"] == gpu]
    if kinds is not None:
        choice = choice[choice["kind"].isin(list(kinds))]
    if model_keys is not None:
        choice = choice[choice["model"].isin(list(model_keys))]
    if contexts is not None:
        choice = choice[choice["ctx"].isin([int(c) for c in contexts])]
    groups: dict = {}
    chosen: set = set()  # the groups holding a cell's chosen lever (not only runners-up)
    for c in choice.to_dict("records"):
        pairs = [(c["quant"], c["arm"])] + ([(c["runner_up_quant"], c["runner_up_arm"])]
                                            if pd.notna(c["runner_up_arm"]) else [])
        for quant in dict.fromkeys(q for q, _ in pairs):
            arms = tuple(a for q, a in pairs if q == quant)
            groups.setdefault((c["model"], quant, arms), []).append(int(c["ctx"]))
            if quant == c["quant"]:
                chosen.add((c["model"], quant, arms))
    # per model, the sweeps of chosen levers before those of runners-up alone: a call cut short leaves the rows the
    # targets read (a pair of two quantisations is two sweeps, and the runner-up's may be a compiled lever's minutes)
    order = sorted(groups, key=lambda g: (g[0], g not in chosen, g[1], g[2]))
    plans = [SweepPlan(gpu=gpu, models=(model,), contexts=tuple(sorted(groups[(model, quant, arms)])), arms=arms,
                       quant=quant, sessions=sessions, steps=steps, warmup=warmup, device=device,
                       first_session=levers.CONFIRM_FIRST_SESSION, check_every_session=True, again=again)
             for model, quant, arms in order]
    if not plans:
        return plans
    rows, run_plans = _confirmation_band_rows(plans[0], data), selection.run_plans(data)  # read once for every pair
    env = hardware.load_env(data)
    commit_of = confirmation.commits_of_runs(env)
    plans = [p if p.again or not needs_own_run(p, data, rows, run_plans, commit_of) else replace(p, again=True)
             for p in plans]
    return continuing(plans, rows, run_plans, env)


def continuing(plans: list[SweepPlan], rows: pd.DataFrame, run_plans: dict, env: dict) -> list[SweepPlan]:
    """`plans` with each plan measured `again` continuing the runs of itself that a call cut short at the code
    measuring now (harness.continuation.cut_short_runs: SweepPlan.continues), so that a warm machine's next call
    times only the sessions the last one did not finish. `rows`: the plans' CSV rows in their band; `run_plans`:
    selection.run_plans; `env`: hardware.load_env (each of `data`)."""
    if not any(p.again for p in plans):
        return plans
    commit, source = hardware.git_commit(), hardware.source_digest()
    return [replace(p, continues=continuation.cut_short_runs(p, rows, run_plans, env, commit, source)) if p.again
            else p for p in plans]


def needs_own_run(plan: SweepPlan, data, rows: pd.DataFrame | None = None, run_plans: dict | None = None,
                  commit_of: dict | None = None) -> bool:
    """Whether a confirmation `plan` must be measured in a run of its own rather than resumed: another pairing's run
    has confirmation rows of one of its arms at its cells (unpaired_runs), and no run of the pair itself has timed it
    whole (paired_run_covers; `commit_of`, {run id: commit}: or runs of the pair at one commit, session by session).
    `rows` and `run_plans` are read from `data` where not given."""
    rows = _confirmation_band_rows(plan, data) if rows is None else rows
    run_plans = selection.run_plans(data) if run_plans is None else run_plans
    return bool(unpaired_runs(plan, data, rows, run_plans)) and not paired_run_covers(plan, rows, run_plans,
                                                                                      commit_of)


def paired_run_covers(plan: SweepPlan, rows: pd.DataFrame, run_plans: dict, commit_of: dict | None = None) -> bool:
    """Whether runs whose own plan timed exactly `plan`'s arms have confirmation rows of each of them at every cell
    and session of `plan`, each session whole in one run: the pair is confirmed already, resuming times nothing, and
    other pairings' runs of its arms (unpaired_runs) need no run of its own. The runs are one run, or with
    `commit_of` ({run id: commit}) runs at one commit (a run cut short by a call's limit and its continuation,
    harness.continuation: the confirmation readers pool one commit's runs). `rows`: _confirmation_band_rows;
    `run_plans`: selection.run_plans. History: until 2026-12-07 one run had to hold every session."""
    rows = rows[(rows["gpu"] == plan.gpu) & rows["model"].isin(plan.models) & rows["ctx"].isin(plan.contexts)
                & rows["arm"].isin(plan.arms) & (rows["quant"] == plan.quant)]
    pair = rows[rows["run_id"].map(lambda r: set((run_plans.get((plan.gpu, r)) or {}).get("arms", ()))
                                   == set(plan.arms)).astype(bool)] if not rows.empty else rows
    groups: dict = {}  # {commit (or run, without one): the sessions its runs hold whole}
    for run, sessions in continuation.whole_sessions(plan, pair).items():
        groups.setdefault((commit_of or {}).get(run) or run, set()).update(sessions)
    return any(set(plan.session_ids) <= sessions for sessions in groups.values())


def _confirmation_band_rows(plan: SweepPlan, data) -> pd.DataFrame:
    """The rows of `plan`'s CSV (decode.csv of its GPU) in the confirmation sweeps' band of sessions (sessions.CONFIRM),
    only the columns unpaired_runs reads; empty where the file is absent."""
    columns = ["run_id", "session", "gpu", "model", "ctx", "arm", "quant"]
    path = plan.csv_path(data)
    if not path.exists():
        return pd.DataFrame(columns=columns)
    rows = pd.read_csv(path, usecols=columns)
    return rows[rows["session"].isin(list(session_bands.CONFIRM))]


def unpaired_runs(plan: SweepPlan, data, rows: pd.DataFrame | None = None,
                  run_plans: dict | None = None) -> list[str]:
    """Run ids with confirmation rows (levers.CONFIRM_FIRST_SESSION's band) of `plan`'s arms at its cells whose own
    plan (env.json) timed other arms than `plan`'s pair: the runs a resumed confirmation must not build on. `rows`
    (_confirmation_band_rows) and `run_plans` (selection.run_plans) are read from `data` where not given."""
    rows = _confirmation_band_rows(plan, data) if rows is None else rows
    run_plans = selection.run_plans(data) if run_plans is None else run_plans
    rows = rows[(rows["gpu"] == plan.gpu) & rows["model"].isin(plan.models) & rows["ctx"].isin(plan.contexts)
                & rows["arm"].isin(plan.arms) & (rows["quant"] == plan.quant)]
    return sorted(r for r in rows["run_id"].unique()
                  if set((run_plans.get((plan.gpu, r)) or {}).get("arms", ())) != set(plan.arms))


def confirm(gpu: str, sessions: int = levers.CONFIRM_SESSIONS, steps: int = 30, warmup: int = 5,
            device: str = "cuda", data=None, model_keys=None, contexts=None, kinds=None,
            again: bool = False) -> list[str]:
    """Measure the confirmation sweeps of confirmation_plans (of `model_keys`, `contexts` and `kinds` only, where given),
    resumable (`again`: the cells already confirmed too, in a run of their own); returns their run ids. Run it after
    the selection sweeps (measure): what it confirms is the ladder as it stands."""
    keys.gpu_to_measure(gpu, device, data)
    return [run_sweep(p, data) for p in confirmation_plans(gpu, data, sessions, steps, warmup, device, model_keys,
                                                           contexts, kinds, again)]


def confirmed_at_target(data) -> dict:
    """{kind: (arm, quant)} of the fastest lever of each kind (bf16, int4) confirmed at the target cell
    (levers.TARGETS; analysis.closing_the_gap_confirmation.confirmed_fastest over the confirmation sweeps' checked
    rows in `data`): the levers notebook 07 and the peer step take from notebook 06. A kind with no lever confirmed
    there is left out."""
    return _at_target(confirmation.confirmed_levers(*confirmation.confirming_rows(data)))


def _at_target(held: pd.DataFrame) -> dict:
    """confirmed_at_target of `held`, the confirmed levers (confirmation.confirmed_levers of confirming_rows)."""
    target = levers.TARGETS["bf16"]
    cell = dict(gpu=target["gpu"], model=target["model"], ctx=target["ctx"])
    found = {kind: confirmation.fastest_held(held, cell, kind) for kind in ("bf16", "int4")}
    return {kind: lever for kind, lever in found.items() if lever is not None}


def megakernel_plans(gpu: str, data, confirm: bool = False, sessions: int = levers.CONFIRM_SESSIONS,
                     warmup: int = 5, device: str = "cuda", again: bool = False) -> list[SweepPlan]:
    """The sweeps of the megakernel cell (levers.MEGAKERNEL_CELL, bf16): the selection, every lever of the cell in
    `sessions` fresh sessions of the cell's steps, each session checked; with `confirm`, the selection's fastest
    checked lever and its runner-up again, numbered from levers.CONFIRM_FIRST_SESSION (analysis
    .closing_the_gap_megakernel reads them as the confirmation; in a run of its own where one of the two has confirmation
    rows from a run that timed another pair, unpaired_runs). `again`: in a run of its own whatever rows there are
    (after a change to the code the cell's levers run; the table reads each lever's latest run of each role).
    ValueError for a confirmation before a selection."""
    cell = levers.MEGAKERNEL_CELL
    arms = tuple(cell["arms"])
    first = 0
    if confirm:
        t = megakernel_table(data)
        chosen = t[(t["source"] == "measured") & (t["role"] == "selection") & (t["status"] == "ok")]
        if chosen.empty:
            raise ValueError("the megakernel cell has no checked selection run to confirm: measure its selection first")
        arms, first = tuple(chosen.sort_values("t_obs_ms")["arm"].head(2)), levers.CONFIRM_FIRST_SESSION
    plan = SweepPlan(gpu=gpu, models=(cell["model"],), contexts=(cell["ctx"],), arms=arms, quant="bf16",
                     sessions=sessions, steps=cell["steps"], warmup=warmup, device=device, first_session=first,
                     check_every_session=True)
    # as confirmation_plans: a pair one of whose arms has confirmation rows from a run that timed another pairing is
    # measured in a run of its own, so that the resumed sweep does not time the other arm alone
    # never continuing a run cut short (harness.continuation): the megakernel table reads each lever's latest run
    return [replace(plan, again=again or (confirm and needs_own_run(plan, data)))]


def measure_megakernel(gpu: str, warmup: int = 5, device: str = "cuda", data=None, again: bool = False) -> list[str]:
    """The megakernel cell's selection sweep, then its confirmation (megakernel_plans), each resumable (`again`: both
    in runs of their own), then the confirmed levers' steps profiled at the cell (profile.record_kernels: what stands
    in the way of its target); returns the sweeps' run ids."""
    keys.gpu_to_measure(gpu, device, data)
    runs = [run_sweep(p, data) for p in megakernel_plans(gpu, data, warmup=warmup, device=device, again=again)]
    confirmation = megakernel_plans(gpu, data, True, warmup=warmup, device=device, again=again)
    runs += [run_sweep(p, data) for p in confirmation]
    cell = levers.MEGAKERNEL_CELL
    profile.record_kernels(gpu, [cell["model"]], [cell["ctx"]], arms=confirmation[0].arms, data=data, device=device)
    return runs


def megakernel_table(data, every_row: pd.DataFrame | None = None, specs: pd.DataFrame | None = None) -> pd.DataFrame:
    """analysis.closing_the_gap_megakernel.table of the megakernel cell (levers.MEGAKERNEL_CELL): from `every_row`
    (decode.csv with its checks, grid and beyond: checked.labelled of checked.load(grid=False)) and the registry's
    `specs`, each read here when not given."""
    if every_row is None:
        every_row = checked.labelled(checked.load("decode", data, grid=False))
    specs = hardware.specs_table(data) if specs is None else specs
    return megakernel.table(every_row, specs, models.configs({levers.MEGAKERNEL_CELL["model"]}, data))


def megakernel_profiles(breakdown_rows: pd.DataFrame, data, specs: pd.DataFrame | None = None) -> pd.DataFrame:
    """profiles.category_table of the megakernel cell's profiled steps (levers.MEGAKERNEL_CELL; the cell's model is
    not a grid model, so checked.grid_rows leaves them out of the grid's breakdown), each step's latest profile,
    from `breakdown_rows` (breakdown.csv with the superseded rows)."""
    cell = levers.MEGAKERNEL_CELL
    at = (breakdown_rows[(breakdown_rows["model"] == cell["model"]) & (breakdown_rows["ctx"] == cell["ctx"])
                         & (breakdown_rows["gpu"] == cell["gpu"])] if not breakdown_rows.empty else breakdown_rows)
    specs = hardware.specs_table(data) if specs is None else specs
    return profiles.category_table(selection.latest_profiles(at), models.configs({cell["model"]}, data), specs)


def rows(data) -> pd.DataFrame:
    """The ladder's decode rows (ladder.ladder_rows): decode.csv with its superseded rows, each cell from one sweep,
    plus the A/B sweep's for the cells and arms decode.csv lacks; a cell timed without a passing check of its own
    run is a status row `unchecked` (checked.labelled: the ladder shows it as such, no target reads it)."""
    return ladder.ladder_rows(checked.labelled(checked.load("decode", data, superseded=True)),
                              cuda_graphs_ab.rows(data), selection.run_plans(data))


def tables(data, model_keys=()) -> dict:
    """Notebook 06's tables: `rows`, `cells` (roofline.cell_table of them), `ladder` (ms and R_floor of every
    lever per cell), `breakdown` (the profiled steps' kernels by category against their floors), `projections` (the
    matrix products one by one) and their `product_fits` (fixed cost per product and streaming rate), `confirmation`
    (each cell's chosen lever and runner-up timed again in the confirmation sweeps, which the targets read),
    `check_sensitivity` (the decode check against injected faults), `peers` (a peer's compiled decode beside the
    package's levers, analysis.closing_the_gap_peers), `megakernel` (the levers on a public megakernel study's cell
    beside its published times, analysis.closing_the_gap_megakernel) and `megakernel_breakdown` (its profiled steps
    by category, megakernel_profiles), `megakernel_products` (its chosen lever's products alone on the configs it runs
    and on the fastest timed, analysis.closing_the_gap_megakernel.product_configs), `band_rows` and `bands` (the same cells measured by
    sweeps of different session bands, each band's time, and whether they agree: analysis.closing_the_gap_bands),
    `int4_products` (the fused int4 products alone on every config and launch, analysis.closing_the_gap_int4_products)
    and `bf16_products` (the bf16 fused products at their table's configs, beside them), `int4_step` (one layer's int4
    products of the int4 target cell's fused lever, each beside its bf16 twin), `int4_sass` (the fused int4
    products' instructions a weight counted offline, analysis.closing_the_gap_int4_instructions),
    `attention_splits` (the split-KV attention alone over its splits and loads, analysis.closing_the_gap_attention),
    `tuner_moves` (the int4 levers whose sessions' processes tuned their products otherwise, and by how much their
    times moved: analysis.closing_the_gap_tuner_sessions),
    the configs, the registry's `specs`,
    `measured_gbps` (copy bandwidth per GPU) and `sources` (each run's source digest: hardware.run_sources)."""
    decode_rows = rows(data)
    bandwidth_rows = records.load_experiment("bandwidth", data)
    specs = hardware.specs_table(data)
    configs = models.configs(set(decode_rows["model"]) | set(model_keys), data)
    cell_table = (roofline.cell_table(decode_rows, specs, configs, bandwidth_rows) if not decode_rows.empty else
                  pd.DataFrame(columns=roofline.CELL + ["t_obs_ms", "sessions", "status", "t_floor_ms_W_all"]))
    every_profile = selection.with_superseded("breakdown", data)
    breakdown_rows = selection.latest_profiles(checked.grid_rows(every_profile))
    by_projection = profiles.projection_table(breakdown_rows, configs, specs)
    every_row = checked.labelled(checked.load("decode", data, grid=False))  # the confirmation's and the megakernel's
    band_rows = bands.band_table(every_row)  # the same cells measured by sweeps of different bands
    env = hardware.load_env(data)  # the runs' commits (the confirmation's) and their sessions' tuner choices
    confirming, commit_of = confirmation.confirming_rows(data, every_row, env)
    held = confirmation.confirmed_levers(confirming, commit_of)  # read by the targets and, for promotion, the ladder
    lever_table = ladder.ladder_table(cell_table, superseded=ladder.superseded_cells(decode_rows),
                                      changed=ladder.changed_cells(decode_rows), promoted=_promoted(held))
    gemv_rows = int4_products.load_bf16(data)  # bench/fused_gemv.py's graphed rows
    out = dict(
        rows=decode_rows, cells=cell_table, configs=configs, specs=specs,
        ladder=lever_table.assign(checked=checked.column(lever_table["status"])),
        confirmation=confirmation.with_commits(confirmation.confirmation_table(
            confirmation.choices(lever_table), confirming, commit_of), commit_of),
        confirmed_levers=held,
        breakdown=profiles.category_table(breakdown_rows, configs, specs),
        projections=by_projection, product_fits=profiles.product_cost_fit(by_projection),
        check_sensitivity=check_sensitivity.table(check_sensitivity.load(data)),
        peers=peers.peer_table(records.load_experiment("peers", data)),
        megakernel=megakernel_table(data, every_row, specs),
        megakernel_breakdown=megakernel_profiles(every_profile, data, specs),
        bands=bands.agreement(band_rows), band_rows=band_rows,
        int4_products=int4_products.config_table(int4_products.load(data), specs),
        bf16_products=int4_products.bf16_table(gemv_rows),
        int4_sass=int4_instructions.load(data),
        attention_splits=attention_splits.table(attention_splits.load(data), specs),
        tuner_moves=tuner_sessions.tuner_moves(every_row, tuner_sessions.session_choices(env)),
        measured_gbps=roofline.measured_bandwidth(bandwidth_rows).to_dict(), sources=hardware.run_sources(env))
    arm, _ = megakernel.chosen_lever(out["megakernel"])
    out["megakernel_products"] = (megakernel.product_configs(gemv_rows, models.configs({levers.MEGAKERNEL_CELL["model"]}, data),
                                                             specs, arm) if arm else
                                  pd.DataFrame(columns=megakernel.PRODUCT_COLUMNS))
    target = TARGETS["int4"]
    out["int4_step"] = int4_products.target_step(out["int4_products"], out["confirmation"], configs, target["gpu"],
                                                 target["model"], target["ctx"], out["bf16_products"])
    return out


def datasheet_gbps(t: dict, target: str = "bf16") -> float:
    """The datasheet bandwidth of the target's GPU (GB/s)."""
    return float(t["specs"].set_index("gpu").loc[TARGETS[target]["gpu"], "bandwidth_gbps"])


def findings(t: dict) -> dict:
    """Per figures stem: the ladder against the targets, where the time goes, the products and the budget, the
    check's sensitivity, and the reading's numbers."""
    held = t.get("confirmed_levers")
    return {"06_findings_targets": (ladder_targets.target_findings(t["ladder"], t["confirmation"], t["breakdown"],
                                                                   confirmed=held)
                                    + ladder_targets.grid_target_findings(t["ladder"], t["breakdown"],
                                                                          confirmation=t["confirmation"],
                                                                          confirmed=held)
                                    + ladder_targets.int4_grid_target_findings(t["ladder"], t["confirmation"],
                                                                               confirmed=held)
                                    + confirmation.order_findings(t["confirmation"])
                                    + confirmation.shift_findings(t["confirmation"])
                                    + ladder_targets.earlier_target_findings(t["ladder"], t["confirmation"],
                                                                             confirmed=held)
                                    + ladder_targets.unmeasured_findings(t["ladder"])),
            "06_findings_where_the_time_goes": ladder.gap_findings(t["breakdown"], t["ladder"], t["specs"],
                                                                   t["measured_gbps"]),
            "06_findings_products": (ladder.projection_findings(t["projections"])
                                     + ladder.budget_findings(t["breakdown"], t["projections"], t["ladder"],
                                                           t["configs"])),
            "06_findings_peers": (peers.findings(t["peers"]) + megakernel.findings(
                t["megakernel"], by_category=t.get("megakernel_breakdown"))
                + megakernel.product_findings(t["megakernel_products"], megakernel.chosen_lever(t["megakernel"])[1])),
            "06_findings_bands": bands.findings(t["band_rows"]),
            "06_findings_int4_products": (
                int4_products.product_findings(t["int4_products"], t["confirmation"], t["configs"], t["specs"],
                                               TARGETS["int4"]["ctx"], bf16=t["bf16_products"])
                + int4_products.tuner_findings(t["int4_products"], t["confirmation"], t["configs"],
                                               TARGETS["int4"]["ctx"])
                + tuner_sessions.findings(t["tuner_moves"])
                + int4_instructions.findings(t["int4_sass"])),
            "06_findings_check_sensitivity": check_sensitivity.findings(t["check_sensitivity"], compare.VERIFY_TOL),
            "06_findings_attention": attention_splits.findings(
                t["attention_splits"], {m: c["num_hidden_layers"] for m, c in t["configs"].items()}),
            "06_findings_reading": (ladder.reading_findings(t["ladder"], t["breakdown"])
                                    + roofline.code_versions_within_cells(t["rows"], t.get("sources", {})))}
