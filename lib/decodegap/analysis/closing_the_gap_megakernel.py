"""Notebook 06's megakernel cell (levers.MEGAKERNEL_CELL): Llama-3.2-1B in bf16 at batch 1 on the H200, the cell of
a public study that timed a whole-model megakernel and a CUDA-graph + PDL pipeline there. The package's levers are
measured on the cell twice (bench/measure.sh's megakernel step): a selection sweep picks the fastest checked lever,
a confirmation sweep (sessions from levers.CONFIRM_FIRST_SESSION) times it again beside its runner-up in fresh
sessions, and only the confirmation counts toward the target. The study's times
are published by it, never measured here; both sides are set against the same floor (W_all at the datasheet
bandwidth, accounting.step_bytes at the cell's context)."""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from decodegap import accounting, roofline
from decodegap.analysis.closing_the_gap_int4_products import gpu_keys
from decodegap.analysis.closing_the_gap_targets import profiled_budget
from decodegap.arms import REGISTRY
from decodegap.kernels.fused import configs as fused_configs
from decodegap.kernels.fused.launch import FusedOps
from decodegap.finding import Finding
from decodegap.levers import (CONFIRM_FIRST_SESSION, CONFIRM_SESSIONS, LEVERS, MEGAKERNEL_CELL, changed_since,
                              changes_named)

COLUMNS = ["gpu", "model", "ctx", "lever", "arm", "source", "run_id", "role", "sessions", "steps_per_session",
           "t_obs_ms", "t_obs_min_ms", "t_obs_max_ms", "t_floor_ms_W_all", "r_floor_W_all", "status", "changed_since"]
"""The columns of figures/06_megakernel: one row per lever and run (`role` selection or confirmation), then the
study's published times (`source` published). `changed_since`: the commits of levers.CODE_CHANGES to a lever's code
made after its run began (its time is the code's as it ran then)."""

_NAMES = {arm: lever for lever, arm, quant in LEVERS if quant == "bf16"}


def floor_ms(configs: Mapping[str, Mapping], specs: pd.DataFrame, cell: Mapping = MEGAKERNEL_CELL) -> float:
    """The cell's floor: its W_all bytes (weights once, the KV cache at its context) at the GPU's datasheet
    bandwidth."""
    gbps = float(specs.set_index("gpu").loc[cell["gpu"], "bandwidth_gbps"])
    return float(accounting.t_floor_ms(accounting.step_bytes(configs[cell["model"]], cell["ctx"], "W_all"), gbps))


def table(decode_rows: pd.DataFrame, specs: pd.DataFrame, configs: Mapping[str, Mapping],
          cell: Mapping = MEGAKERNEL_CELL) -> pd.DataFrame:
    """Every lever of `cell["arms"]` timed on the cell, its latest selection run and its latest confirmation run
    (sessions from CONFIRM_FIRST_SESSION), each against the floor; then the study's published times against the same floor. `decode_rows`: the
    decode rows with their checks (checked.labelled: a cell without a passing check of its own run is `unchecked`)."""
    floor = floor_ms(configs, specs, cell)
    published = pd.DataFrame([dict(gpu=cell["gpu"], model=cell["model"], ctx=cell["ctx"], lever=name, arm="-",
                                   source="published", role="-", t_obs_ms=us / 1e3, t_floor_ms_W_all=floor,
                                   r_floor_W_all=floor / (us / 1e3), status="published")
                              for name, us in cell["published_us"].items()])
    rows = decode_rows[(decode_rows["gpu"] == cell["gpu"]) & (decode_rows["model"] == cell["model"])
                       & (decode_rows["ctx"] == cell["ctx"]) & decode_rows["arm"].isin(cell["arms"])
                       & (decode_rows["quant"] == "bf16")] if not decode_rows.empty else decode_rows
    if "batch" in rows:
        rows = rows[pd.to_numeric(rows["batch"], errors="coerce").fillna(1) == 1]
    if rows.empty:
        return published.reindex(columns=COLUMNS)
    session = pd.to_numeric(rows["session"], errors="coerce").fillna(0)
    timed = []
    for role, part in (("selection", rows[session < CONFIRM_FIRST_SESSION]),
                       ("confirmation", rows[session >= CONFIRM_FIRST_SESSION])):
        for arm, g in part.groupby("arm"):
            run = sorted(g["run_id"].unique())[-1]  # each lever's latest run of this role
            timed.append(roofline.cell_table(g[g["run_id"] == run], specs, configs).assign(run_id=run, role=role))
    out = pd.concat(timed, ignore_index=True)
    out["lever"] = out["arm"].map(_NAMES).fillna(out["arm"])
    out["source"] = "measured"
    out["changed_since"] = [changed_since(run, arm, "bf16", cell["model"])
                            for run, arm in zip(out["run_id"], out["arm"])]
    return pd.concat([out, published], ignore_index=True).reindex(columns=COLUMNS)


def findings(t: pd.DataFrame, cell: Mapping = MEGAKERNEL_CELL, by_category: pd.DataFrame | None = None
             ) -> list[Finding]:
    """The cell against its target: the floor, the study's published times against it, the selection run's fastest
    checked lever and, once a later run has timed it in CONFIRM_SESSIONS fresh sessions, its confirmed time against
    `step_ms`; a target not met, the time to remove and, given the cell's profiled steps (`by_category`:
    profiles.category_table of the cell's breakdown rows), the confirmed lever's step split into its terms above their
    floors (closing_the_gap_targets.profiled_budget)."""
    where = (f"{cell['model']} at batch 1 on the {cell['gpu']} ({cell['ctx']} prompt tokens, {cell['steps']} timed "
             f"steps)")
    pub = t[t["source"] == "published"]
    floor = float(pub["t_floor_ms_W_all"].iloc[0])
    study = "; ".join(f"{r.lever} {r.t_obs_ms * 1e3:.2f} us (R_floor {r.r_floor_W_all:.3f})" for r in pub.itertuples())
    head = (f"Megakernel cell, {where}: floor {floor * 1e3:.0f} us (W_all at the datasheet), so the "
            f"{cell['step_ms']:.2f} ms target is R_floor {floor / cell['step_ms']:.3f}; the study's published times "
            f"(not measured here): {study}.")
    chosen, best, again = _choice(t)
    if best is None:
        return [Finding(head + " No checked lever timed on the cell yet (bench/measure.sh's megakernel step).",
                        measured=False, floor_ms=floor, target_ms=cell["step_ms"])]
    runner = chosen.drop(best.name)
    runner_text = (f", runner-up {runner.loc[runner['t_obs_ms'].idxmin(), 'lever']} "
                   f"{runner['t_obs_ms'].min() * 1e3:.1f} us" if not runner.empty else "")
    sel = (f" The selection run's fastest of {len(chosen)} checked levers is {best['lever']} at "
           f"{best['t_obs_ms'] * 1e3:.1f} us ({int(best['sessions'])} sessions{runner_text})")
    if again.empty:
        return [Finding(head + sel + "; not confirmed by a fresh run yet, so not counted against the target.",
                        measured=True, confirmed=False, lever=best["lever"], selected_ms=float(best["t_obs_ms"]),
                        floor_ms=floor, target_ms=cell["step_ms"], met=False)]
    conf = again.iloc[-1]
    ms = float(conf["t_obs_ms"])
    met = ms <= cell["step_ms"]
    fastest_pub = float(pub["t_obs_ms"].min())
    way, more = ("", {}) if met else _in_the_way(by_category, cell, conf["arm"], ms)
    changed = _changed_words(conf)
    if changed:
        more = dict(more, changed_since=str(conf["changed_since"]))
    return [Finding(head + sel + f"; confirmed in {int(conf['sessions'])} fresh sessions at {ms * 1e3:.1f} us "
                    f"({conf['t_obs_min_ms'] * 1e3:.1f}-{conf['t_obs_max_ms'] * 1e3:.1f} us over the sessions), "
                    f"R_floor {floor / ms:.3f}: target " + ("met" if met else f"not met ({ms / cell['step_ms']:.2f}x)")
                    + f"; {ms / fastest_pub:.2f}x the study's fastest published time ({fastest_pub * 1e3:.1f} us, "
                    + ("this step faster" if ms < fastest_pub else "this step slower") + ")." + changed + way,
                    measured=True, confirmed=True, lever=best["lever"], t_obs_ms=ms, r_floor=floor / ms,
                    floor_ms=floor, target_ms=cell["step_ms"], met=bool(met), vs_published_fastest=ms / fastest_pub,
                    **more)]


def _changed_words(conf: pd.Series) -> str:
    """' Its confirmation was measured before <change> (<commit>): ...' where a change to the confirmed lever's code on
    the cell's model (levers.CODE_CHANGES) came after its confirmation run (the table's changed_since); "" where none."""
    changes = changes_named(str(conf.get("changed_since", "") or ""))
    if not changes:
        return ""
    return (f" Its confirmation was measured before {changes}: it times code the lever no longer runs, until the "
            "cell is measured again (bench/measure.sh's megakernel step with MEGAKERNEL_AGAIN=1).")


def _table_words(timed: pd.DataFrame) -> str:
    held = int(timed["table_entry"].sum())
    if not held:
        return "the fused GEMV's rule: its table has no entry for these widths"
    return f"{held} of {len(timed)} from the fused GEMV's table, the others its rule's"


def _choice(t: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series | None, pd.DataFrame]:
    """(the selection's checked levers, the fastest of them or None, its confirmation rows of CONFIRM_SESSIONS
    sessions or more) of the cell's table."""
    ok = t[(t["source"] == "measured") & (t["status"] == "ok")]
    chosen = ok[ok["role"] == "selection"]
    if chosen.empty:
        return chosen, None, ok.iloc[0:0]
    best = chosen.loc[chosen["t_obs_ms"].idxmin()]
    again = ok[(ok["role"] == "confirmation") & (ok["arm"] == best["arm"]) & (ok["sessions"] >= CONFIRM_SESSIONS)]
    return chosen, best, again


def chosen_lever(t: pd.DataFrame) -> tuple[str | None, float | None]:
    """(arm, confirmed ms) of the cell's chosen lever, as `findings` reads it from the table: the selection run's
    fastest checked lever and its time in a confirmation run of CONFIRM_SESSIONS sessions or more (None where it has
    none); (None, None) without a checked selection."""
    _, best, again = _choice(t)
    if best is None:
        return None, None
    return best["arm"], (float(again["t_obs_ms"].iloc[-1]) if not again.empty else None)


def _in_the_way(by_category: pd.DataFrame | None, cell: Mapping, arm: str, ms: float) -> tuple[str, dict]:
    """(' What stands in the way: ...', its values) of the cell's target not met by `arm` at `ms`: the time to
    remove, and the arm's profiled step at the cell in its terms (profiled_budget, with its PDL overlap against
    `ms`), or that it was not profiled."""
    short = ms - cell["step_ms"]
    text = f" What stands in the way: {short * 1e3:.0f} us to remove from its confirmed time."
    if by_category is None or by_category.empty:
        return text + " Its step was not profiled at the cell.", dict(short_ms=short)
    budget, values = profiled_budget(by_category, cell["gpu"], cell["model"], int(cell["ctx"]), arm, step_ms=ms)
    return text + budget, dict(values, short_ms=short)


PRODUCT_COLUMNS = ["gpu", "model", "arm", "product", "K", "N", "per_step", "step_config", "table_entry", "step_us",
                   "fastest_config", "fastest_us", "configs", "floor_us"]
"""The columns of figures/06_megakernel_products: per product of `arm`'s step on the cell's model (one decoder
layer's, `per_step` times a step, then the LM head, once), its median us per call on the config the step runs
(`step_config`: kernels.fused.configs.gemv_config; `table_entry`: whether its tables hold the shape, else its
rule's) and on the fastest of the `configs` candidates the bench timed, and
its weights at the datasheet bandwidth (`floor_us`)."""


def product_configs(gemv_rows: pd.DataFrame, configs: Mapping[str, Mapping], specs: pd.DataFrame, arm: str,
                    cell: Mapping = MEGAKERNEL_CELL) -> pd.DataFrame:
    """The products `arm`'s step launches on the cell's model, from bench/fused_gemv.py's rows (`gemv_rows`:
    closing_the_gap_int4_products.load_bf16, graph mode) on the cell's GPU: each product alone, graphed back to back
    over copies of its weights, launched with PDL (the bench times the early trigger at the step's config only, so
    configs are compared at PDL's launch). A product the bench did not time (the norm-scale products: no flavour of
    theirs yet) has no times. Empty without rows of the model's widths."""
    config = configs[cell["model"]]
    if arm not in REGISTRY or "fused" not in REGISTRY[arm].kernels or gemv_rows.empty:
        return pd.DataFrame(columns=PRODUCT_COLUMNS)
    names = gpu_keys(specs)
    rows = gemv_rows[(gemv_rows["device"].map(names) == cell["gpu"]) & (gemv_rows["launch"] == "pdl")]
    ops = FusedOps.of_kernels(REGISTRY[arm].kernels)
    layers = int(config["num_hidden_layers"])
    launched = [(p, layers) for p, _ in ops.layer_products()]
    launched.append(("lm_head_plain" if ops.head_norm_in_epilogue else "lm_head", 1))
    shapes = {name: (K, N, flavour) for name, K, N, flavour in fused_configs.products(config)}
    gbps = float(specs.set_index("gpu").loc[cell["gpu"], "bandwidth_gbps"])
    out = []
    for product, per_step in launched:
        K, N, flavour = shapes.get(product, (None, None, None))
        at = rows[(rows["product"] == product) & (rows["K"] == K) & (rows["N"] == N)] if K else rows.iloc[0:0]
        how = fused_configs.flavour_lookup(flavour) if K else {}
        step = fused_configs.gemv_config(N, K, **how).key if K else None
        med = at.groupby("config")["us"].median()
        out.append(dict(gpu=cell["gpu"], model=cell["model"], arm=arm, product=product, K=K, N=N, per_step=per_step,
                        step_config=step, table_entry=bool(K) and fused_configs.table_entry(N, K, **how) is not None,
                        step_us=float(med.get(step, float("nan"))),
                        fastest_config=med.idxmin() if not med.empty else None,
                        fastest_us=float(med.min()) if not med.empty else float("nan"), configs=len(med),
                        floor_us=2 * N * K / gbps / 1e3 if K else float("nan")))
    return pd.DataFrame(out, columns=PRODUCT_COLUMNS)


def product_findings(products: pd.DataFrame, confirmed_ms: float | None, cell: Mapping = MEGAKERNEL_CELL
                     ) -> list[Finding]:
    """What the products' configs can give the cell's target: the step's products one by one on the configs it runs
    and on the fastest timed, summed over a step (per_step times each), against their weight floor, the target and
    the confirmed lever's time (`confirmed_ms`)."""
    if products.empty or products["step_us"].isna().all():
        return [Finding("Megakernel cell's products: not timed alone on the cell's widths yet "
                        "(FUSED_GEMV_MODELS=llama-3.2-1b python3 bench/fused_gemv.py).", measured=False)]
    arm = products["arm"].iloc[0]
    timed = products.dropna(subset=["step_us"])
    missing = sorted(set(products["product"]) - set(timed["product"]))
    step_us = float((timed["step_us"] * timed["per_step"]).sum())
    fastest_us = float((timed["fastest_us"] * timed["per_step"]).sum())
    floor_us = float((timed["floor_us"] * timed["per_step"]).sum())
    listed = ", ".join(f"{r.product} {r.step_us:.1f} us ({r.fastest_us:.1f} on {r.fastest_config})"
                       for r in timed.itertuples())
    text = (f"Megakernel cell's products ({arm}, {cell['model']} on the {cell['gpu']}), each alone, graphed back to back "
            f"with PDL, on the configs the step runs ({_table_words(timed)}) "
            f"and on the fastest of the candidates timed: {listed}. A step's products"
            + ("" if not missing else f" that were timed (not {', '.join(missing)})")
            + f" take {step_us:.0f} us on the step's configs and {fastest_us:.0f} us on the fastest, against their "
            f"weight floor {floor_us:.0f} us and the {cell['step_ms'] * 1e3:.0f} us target: the configs could give at "
            f"most {step_us - fastest_us:.0f} us")
    values = dict(measured=True, arm=arm, step_us=step_us, fastest_us=fastest_us, floor_us=floor_us,
                  gain_us=step_us - fastest_us, missing=missing)
    if confirmed_ms is not None:
        gap_us = confirmed_ms * 1e3 - cell["step_ms"] * 1e3
        text += f" of the {gap_us:.0f} us between the confirmed lever ({confirmed_ms * 1e3:.1f} us) and the target"
        values["gap_us"] = gap_us
    text += (". Even on the fastest configs the products alone, one kernel each as the bench launches them, take "
             "longer than the target: on this reading it needs fewer kernels, not better configs."
             if not missing and fastest_us > cell["step_ms"] * 1e3 else ".")
    return [Finding(text, **values)]
