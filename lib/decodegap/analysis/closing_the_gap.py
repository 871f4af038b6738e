"""Notebook 06: how close to the memory floor batch-1 decode gets, lever by lever, and where the time goes.

The ladder: each lever is an arm (and quantisation path) of the one decode harness, measured into the same
decode rows as notebooks 01-04; a lever with no rows yet is shown as not measured, never filled in.
Where the time goes: the kernels of one profiled decode step by category and product (analysis.profiles, which
notebook 04 reads too), against the targets and the floors, in findings.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

import pandas as pd

from decodegap import accounting, roofline
from decodegap.analysis.profiles import (PDL_OVERLAP, SMALL_CATEGORIES, fitted_products, product_cost_fit, step_label,
                                         with_pdl)
from decodegap.finding import Finding
from decodegap.quant import bytes as quant_bytes
from decodegap.levers import CODE_CHANGES, LEVERS, TARGET_CELL_ONLY, TARGETS, changes_after
from decodegap.selection import WEIGHTS_SUPERSEDED

class StepTerms(NamedTuple):
    """One profiled step's category rows (category_table) as dicts by category: GPU microseconds, the floor's
    microseconds and kernels; and the small categories' (SMALL_CATEGORIES) GPU microseconds and kernels together."""

    us: dict
    floor_us: dict
    kernels: dict
    small_us: float
    small_kernels: int


def step_terms(prof: pd.DataFrame) -> StepTerms:
    """The StepTerms of one profiled step's rows of category_table."""
    c = prof.set_index("category")
    us, kernels = c["gpu_us"].to_dict(), c["kernels"].to_dict()
    floor_us = c["floor_us"].to_dict() if "floor_us" in c.columns else {}  # budget_findings reads none
    return StepTerms(us, floor_us, kernels, sum(us.get(k, 0.0) for k in SMALL_CATEGORIES),
                     int(sum(kernels.get(k, 0) for k in SMALL_CATEGORIES)))


def _at(frame: pd.DataFrame, target: Mapping) -> pd.DataFrame:
    """The rows of `frame` at a target's cell (its gpu, model and ctx)."""
    return frame[(frame["gpu"] == target["gpu"]) & (frame["model"] == target["model"]) & (frame["ctx"] == target["ctx"])]


def ladder_rows(decode_rows: pd.DataFrame, ab_rows: pd.DataFrame, plans=None) -> pd.DataFrame:
    """The decode rows the ladder reads: decode.csv's, plus notebook 02's A/B sweep (ab.csv) for every
    (cell, arm) that decode.csv lacks (the compile arm beyond ctx 2048). The two files' sessions are never
    pooled: a lever's rows come from one file; given the runs' `plans` (selection.run_plans), nor are two sweeps'
    within decode.csv (roofline.one_sweep, as notebooks 01 and 04 read them)."""
    if plans is not None:
        decode_rows = roofline.one_sweep(decode_rows, plans)
    if ab_rows.empty:
        return decode_rows
    have = set(decode_rows[roofline.CELL].astype(str).itertuples(index=False, name=None))
    extra = ab_rows[[k not in have for k in ab_rows[roofline.CELL].astype(str).itertuples(index=False, name=None)]]
    return pd.concat([decode_rows, extra], ignore_index=True)


SUPERSEDED_REASON = "weights the run drew itself (superseded; decode_synthesised_weights.csv)"
"""The reason a ladder row gives when its quantised cell's only timed rows are those of the superseded weight
synthesis (selection.with_superseded): the kernels' times stand, the weights were not the model's."""


def superseded_cells(decode_rows: pd.DataFrame) -> set:
    """(gpu, model, ctx, arm, quant) of the timed cells whose rows come from the superseded weight synthesis
    (selection.with_superseded's `weights` column; rows without one, such as the A/B sweep's, are not)."""
    if "weights" not in decode_rows:
        return set()
    old = decode_rows[(decode_rows["weights"] == WEIGHTS_SUPERSEDED) & (decode_rows["status"] == "ok")]
    return {(g, m, int(c), a, q) for g, m, c, a, q in old[["gpu", "model", "ctx", "arm", "quant"]].itertuples(
        index=False, name=None)}


def changed_cells(decode_rows: pd.DataFrame, changes=CODE_CHANGES) -> dict:
    """{(gpu, model, ctx, arm, quant): [CodeChange, ...]} of the timed cells whose newest run began before a change
    to their lever's code (levers.changes_after): their rows time code the lever no longer runs."""
    if decode_rows.empty or not changes:
        return {}
    ok = decode_rows[decode_rows["status"] == "ok"]
    newest = ok.groupby(["gpu", "model", "ctx", "arm", "quant"])["run_id"].max()
    out = {}
    for (g, model, ctx, arm, quant), run in newest.items():
        hit = changes_after(run, arm, quant, model, changes)
        if hit:
            out[(g, model, int(ctx), arm, quant)] = hit
    return out


def changed_reason(changes) -> str:
    """What a ladder row says of the changes its lever's code went through after it (changed_cells)."""
    return "; ".join(f"measured before {c.what} ({c.commit})" for c in changes)


def ladder_table(cells: pd.DataFrame, gpu: str | None = None, superseded=frozenset(), changed=None,
                 promoted=frozenset()) -> pd.DataFrame:
    """One row per (gpu, model, ctx, lever) with ms/step and R_floor (W_all, datasheet) from
    roofline.cell_table rows (default attention). A lever with no timed rows keeps the status and reason of its
    failed cell (`error`: its check against HF eager failed, say), else says `not measured`, or `target cell
    only` for a TARGET_CELL_ONLY lever away from the target cell (`not measured` for one of `promoted`, (arm, quant)
    of the levers the ladder's plan sweeps over the grid: experiments.closing_the_gap.promoted_levers). A timed cell among `superseded`
    (superseded_cells) says so in its reason (SUPERSEDED_REASON), and one among `changed` (changed_cells) names the
    changes to its lever's code made after its rows (changed_reason; their commits in `changed_since`): its time
    stands for the code that ran.
    The floor is bf16's for every lever: a quantised lever is measured against what a bf16 step must move."""
    columns = ["gpu", "model", "ctx", "order", "lever", "arm", "quant", "t_obs_ms", "sessions", "t_floor_bf16_ms",
               "r_floor_bf16", "status", "reason", "changed_since"]
    if cells.empty:
        return pd.DataFrame(columns=columns)
    cells = cells[cells["attn"] == "sdpa"]
    if gpu is not None:
        cells = cells[cells["gpu"] == gpu]
    ok = cells[cells["status"] == "ok"]
    failed = cells[cells["status"] != "ok"].set_index(["gpu", "model", "ctx", "arm", "quant"])
    rows = []
    for (g, model, ctx), group in ok.groupby(["gpu", "model", "ctx"]):
        floor = group["t_floor_ms_W_all"].iloc[0] if "t_floor_ms_W_all" in group else float("nan")
        for order, (lever, arm, quant) in enumerate(LEVERS):
            hit = group[(group["arm"] == arm) & (group["quant"] == quant)]
            t = float(hit["t_obs_ms"].iloc[0]) if not hit.empty else float("nan")
            status, reason = "ok", ""
            if not hit.empty and (g, model, int(ctx), arm, quant) in superseded:
                reason = SUPERSEDED_REASON
            since = (changed or {}).get((g, model, int(ctx), arm, quant), []) if not hit.empty else []
            if since:
                reason = "; ".join(filter(None, [reason, changed_reason(since)]))
            if hit.empty:
                key = (g, model, ctx, arm, quant)
                if key in failed.index:
                    lost = failed.loc[[key]].iloc[0]
                    status, reason = str(lost["status"]), str(lost.get("reason", ""))
                else:
                    status = _gap(model, ctx, arm, quant, promoted)
            rows.append(dict(gpu=g, model=model, ctx=ctx, order=order, lever=lever, arm=arm, quant=quant,
                             t_obs_ms=t, sessions=int(hit["sessions"].iloc[0]) if not hit.empty else 0,
                             t_floor_bf16_ms=floor, r_floor_bf16=floor / t, status=status, reason=reason,
                             changed_since=" ".join(c.commit for c in since)))
    return pd.DataFrame(rows, columns=columns)


def _gap(model: str, ctx: int, arm: str, quant: str, promoted=frozenset()) -> str:
    """Why a lever of a cell has no rows: `target cell only` (TARGET_CELL_ONLY away from the target's model and
    context, on any GPU: levers.target_in_grid; unless `promoted`) or `not measured`."""
    target = TARGETS["bf16"]
    at_target = (model, int(ctx)) == (target["model"], target["ctx"])
    only_target = (arm, quant) in TARGET_CELL_ONLY and (arm, quant) not in promoted
    return "target cell only" if only_target and not at_target else "not measured"


def projection_findings(by_projection: pd.DataFrame) -> list[str]:
    """At the target cell (TARGETS), per profiled step: the share of the datasheet bandwidth each matrix
    product reaches, and the line through their times (product_cost_fit). A step launched with PDL (ARM_KERNELS's
    `pdl`) says that its kernels' times include their waits: a kernel starts before the one it depends on ends, so
    its time, and the fixed cost of the line, include part of the kernel before it."""
    target = TARGETS["bf16"]
    at = _at(by_projection, target)
    fits = product_cost_fit(at).set_index(["arm", "quant"])
    out = []
    for (arm, quant), g in at.groupby(["arm", "quant"], sort=False):
        parts = ", ".join(f"{r.projection} {r.of_datasheet:.0%}" for r in g.itertuples())
        line = (f"{target['model']} ctx {target['ctx']} on the {target['gpu']}, {step_label(arm, quant)} step, matrix "
                f"products at their share of the datasheet bandwidth: {parts}; together {g['gpu_us'].sum() / 1e3:.2f} ms "
                f"against {g['floor_us'].sum() / 1e3:.2f} ms.")
        values = dict(arm=arm, quant=quant, products_ms=g["gpu_us"].sum() / 1e3, floor_ms=g["floor_us"].sum() / 1e3)
        if (arm, quant) in fits.index:
            fit = fits.loc[(arm, quant)]
            values.update(fixed_us=fit["fixed_us"], stream_gbps=fit["stream_gbps"], products=int(fit["products"]),
                          fixed_ms=fit["fixed_us"] * fit["products"] / 1e3)
            line += (f" A line through their per-call times: {fit['fixed_us']:.1f} us per product plus the weights at "
                     f"{fit['stream_gbps']:.0f} GB/s ({fit['products']} products: {values['fixed_ms']:.2f} ms fixed).")
        if with_pdl(arm):
            values["pdl"] = True
            line += " " + PDL_OVERLAP
        out.append(Finding(line, **values))
    return out


def budget_findings(by_category: pd.DataFrame, by_projection: pd.DataFrame, ladder: pd.DataFrame,
                    configs: Mapping | None = None) -> list[str]:
    """At the target cell (TARGETS), per profiled step with a timed lever of the same arm and quantisation: its
    measured step split into matrix products (and of them, by product_cost_fit, the weights streamed at the
    products' rate and the fixed cost per product), attention, small kernels and the time between kernels (the step
    less its kernels' sum); and what the goal (bf16: R_floor; int4: ms per step) leaves beside the streamed
    weights. For a quantised step, given the model's config in `configs`, what its bf16 LM head would take in the
    path's own format at the head's measured rate (`_head_projection`: a projection, not a measurement)."""
    target = TARGETS["bf16"]
    timed = _at(ladder, target)
    timed = timed[timed["status"] == "ok"].set_index(["arm", "quant"])
    at = _at(by_projection, target)
    fits = product_cost_fit(at).set_index(["arm", "quant"])
    out = []
    for (arm, quant), g in _at(by_category, target).groupby(["arm", "quant"], sort=False):
        if (arm, quant) not in timed.index or (arm, quant) not in fits.index:
            continue
        lever, t_obs = timed.loc[(arm, quant), "lever"], float(timed.loc[(arm, quant), "t_obs_ms"])
        goal_ms = (float(timed.loc[(arm, quant), "t_floor_bf16_ms"]) / target["r_floor"] if quant == "bf16"
                   else TARGETS["int4"]["step_ms"])
        terms = step_terms(g)
        us = terms.us
        products = us.get("matmul", 0.0) / 1e3
        step = at[(at["arm"] == arm) & (at["quant"] == quant)]
        fitted = fitted_products(step)
        head_ms = float(step.drop(fitted.index)["gpu_us"].sum()) / 1e3  # a quantised step's bf16 LM head, if any
        fit = fits.loc[(arm, quant)]
        stream_ms = fitted["bytes"].sum() / fit["stream_gbps"] / 1e6
        fixed_ms = fit["fixed_us"] * fit["products"] / 1e3
        small = terms.small_us / 1e3
        between = t_obs - sum(us.values()) / 1e3  # negative where kernels overlap (PDL)
        head = f", the bf16 LM head {head_ms:.2f}" if head_ms else ""
        beside = "the weights at that rate" + (" and the head" if head_ms else "")
        left = goal_ms - stream_ms - head_ms
        verdict = (f"leaves {left:.2f} ms beside {beside} for the rest" if left >= 0 else
                   f"is {-left:.2f} ms short of {beside} alone")
        attention = us.get("attention", 0.0) / 1e3
        projection = _head_projection(step, fitted, quant, (configs or {}).get(target["model"]))
        out.append(Finding(
            f"{lever} at {target['model']} ctx {target['ctx']}: {t_obs:.2f} ms = matrix products {products:.2f} "
            f"(their line: weights at {fit['stream_gbps']:.0f} GB/s {stream_ms:.2f}, fixed cost {fixed_ms:.2f}{head}) "
            f"+ attention {attention:.2f} + small kernels {small:.2f} "
            + (f"+ between kernels {between:.2f}" if between >= 0 else
               f"- {-between:.2f} of kernels overlapping (their GPU times add up to more than the step)")
            + ". The goal "
            f"({goal_ms:.2f} ms) {verdict}; the rest takes {t_obs - stream_ms - head_ms:.2f} ms now."
            + (projection[0] if projection else ""),
            lever=lever, arm=arm, quant=quant, t_obs_ms=t_obs, products_ms=products, stream_gbps=fit["stream_gbps"],
            stream_ms=stream_ms, fixed_ms=fixed_ms, head_ms=head_ms, attention_ms=attention, small_ms=small,
            between_ms=between, goal_ms=goal_ms, left_ms=left, rest_ms=t_obs - stream_ms - head_ms,
            **(projection[1] if projection else {})))
    return out


def _head_projection(step: pd.DataFrame, fitted: pd.DataFrame, quant: str, config: Mapping | None):
    """(' Its LM head ...', values) of a quantised step whose bf16 LM head was profiled: the head's bytes in the
    path's own format (quant.bytes.linear_bytes; the path keeps the head bf16, so this is a projection: the path
    int4-triton-head measures it) streamed at the rate the bf16 head was measured at, and the time that would save;
    None for bf16, a path that quantises the head, without the head's row or the model's config."""
    head = step.drop(fitted.index)
    if quant == "bf16" or quant in accounting.HEAD_QUANTISED or config is None or head.empty:
        return None
    head_us, head_bytes = float(head["gpu_us"].sum()), int(head["bytes"].sum())
    k, n = config["hidden_size"], config["vocab_size"]
    int4_bytes = quant_bytes.linear_bytes(quant, k, n)
    rate_gbps = head_bytes / head_us / 1e3
    projected_ms = int4_bytes / rate_gbps / 1e6
    values = dict(head_bytes=head_bytes, head_quant_bytes=int4_bytes, head_gbps=rate_gbps,
                  head_projected_ms=projected_ms, head_saving_ms=head_us / 1e3 - projected_ms)
    return (f" Its LM head stays bf16 in this path: in {quant}'s own format it would stream "
            f"{int4_bytes / 1e9:.2f} GB in place of {head_bytes / 1e9:.2f} GB, {projected_ms:.2f} ms at the head's "
            f"measured {rate_gbps:.0f} GB/s, {values['head_saving_ms']:.2f} ms less (a projection from these rows, "
            f"not a measurement)."), values


def gap_findings(by_category: pd.DataFrame, ladder: pd.DataFrame, specs: pd.DataFrame,
                 measured_gbps: Mapping[str, float]) -> list[str]:
    """What stands between the target cell (TARGETS) and its goals, from its profiled steps: per profiled
    step (arm, quantisation) the matrix products against their weight floor, attention (with the copies around it) and the
    small kernels; and how much time the goal leaves above the bytes a step reads (W_streamed + K(ctx)) at the
    measured copy bandwidth."""
    target = TARGETS["bf16"]
    where = f"{target['model']} ctx {target['ctx']} on the {target['gpu']}"
    out = []
    for (arm, quant), g in _at(by_category, target).groupby(["arm", "quant"], sort=False):
        terms = step_terms(g)
        us = terms.us
        mm, floor = us.get("matmul", 0.0), float(terms.floor_us.get("matmul", float("nan")))
        small, n_small = terms.small_us, terms.small_kernels
        values = dict(arm=arm, quant=quant, kernels=int(sum(terms.kernels.values())), gpu_ms=sum(us.values()) / 1e3,
                      products_ms=mm / 1e3, floor_ms=floor / 1e3, of_datasheet=floor / mm,
                      attention_ms=us.get("attention", 0.0) / 1e3, small_kernels=n_small, small_ms=small / 1e3)
        out.append(Finding(
            f"{where}, {step_label(arm, quant)} step: {values['kernels']} kernels, {values['gpu_ms']:.2f} ms of GPU "
            f"time; matrix products {mm / 1e3:.2f} ms against their weight floor {floor / 1e3:.2f} ms "
            f"({floor / mm:.0%} of the datasheet bandwidth), attention {values['attention_ms']:.2f} ms, "
            f"{n_small} small kernels (elementwise, copies, norms, other) {small / 1e3:.2f} ms.", **values))
    sel = _at(ladder, target)
    floors = _at(by_category, target)
    floors = floors[(floors["quant"] == "bf16") & floors["category"].isin(["matmul", "attention"])]
    floors = floors.drop_duplicates("category")
    if not sel.empty and len(floors) == 2 and target["gpu"] in measured_gbps:
        goal_ms = float(sel["t_floor_bf16_ms"].iloc[0]) / target["r_floor"]
        datasheet_gbps = float(specs.set_index("gpu").loc[target["gpu"], "bandwidth_gbps"])
        read_ms = float(floors["floor_us"].sum()) / 1e3  # W_streamed + K(ctx) at the datasheet bandwidth
        copy_ms = read_ms * datasheet_gbps / measured_gbps[target["gpu"]]
        out.append(Finding(
            f"The bytes a step reads (W_streamed + K(ctx): {read_ms:.2f} ms at the datasheet bandwidth) take "
            f"{copy_ms:.2f} ms at the measured copy bandwidth ({measured_gbps[target['gpu']]:.0f} GB/s); the bf16 "
            f"goal ({goal_ms:.2f} ms, set against W_all + K(ctx), the unread embedding table included) leaves "
            f"{goal_ms - copy_ms:.2f} ms above that for everything else in the step.",
            read_ms=read_ms, copy_ms=copy_ms, copy_gbps=measured_gbps[target["gpu"]], goal_ms=goal_ms,
            above_ms=goal_ms - copy_ms))
    return out


def reading_findings(ladder: pd.DataFrame, by_category: pd.DataFrame) -> list[str]:
    """Notebook 06's reading as generated lines, at the target cell (TARGETS["bf16"]): the lean decoder graphed
    against HF's graphed step and their kernels per step; kernel category by category, the profiled bf16 steps from
    HF eager to the fastest lever (kernels, GPU ms, the floor of their bytes); what the Triton attention does to the
    step's growth with context over the grid; and in how many cells each bf16 lever is the fastest."""
    out = []
    target = TARGETS["bf16"]
    at = _at(ladder, target)
    ms = at[at["status"] == "ok"].set_index(["arm", "quant"])["t_obs_ms"]
    prof = _at(by_category, target)
    prof = prof[prof["quant"] == "bf16"]
    kernels = prof.groupby("arm")["kernels"].sum()
    where = f"{target['model']} ctx {target['ctx']} on the {target['gpu']}"
    if ("graph", "bf16") in ms and ("lean_graph", "bf16") in ms:
        lean_ms, hf_ms = ms[("lean_graph", "bf16")], ms[("graph", "bf16")]
        values = dict(lean_graph_ms=lean_ms, graph_ms=hf_ms, graph_over_lean=hf_ms / lean_ms)
        line = f"{where}: the lean decoder graphed takes {lean_ms:.2f} ms against HF's graphed {hf_ms:.2f} ms ({hf_ms / lean_ms:.2f}x)"
        if "lean" in kernels and "eager" in kernels:
            values.update(lean_kernels=int(kernels["lean"]), hf_kernels=int(kernels["eager"]))
            line += f"; the lean step launches {int(kernels['lean'])} kernels, HF's {int(kernels['eager'])}"
        out.append(Finding(line + ".", **values))
    for arm, g in prof.groupby("arm", sort=False):
        parts = []
        for cat, c in g.set_index("category").iterrows():
            parts.append(f"{cat} {int(c['kernels'])} kernels {c['gpu_us'] / 1e3:.2f} ms"
                         + (f" (floor {c['floor_us'] / 1e3:.2f} ms)" if c["floor_us"] > 0 else ""))
        small = g[g["category"].isin(SMALL_CATEGORIES)]
        out.append(Finding(f"{where}, {step_label(arm, 'bf16')} profiled, kernel by kernel: " + "; ".join(parts)
                           + f"; the small kernels together {int(small['kernels'].sum())} for "
                           f"{small['gpu_us'].sum() / 1e3:.2f} ms with no bytes to move.",
                           arm=arm, kernels=int(g["kernels"].sum()), gpu_ms=g["gpu_us"].sum() / 1e3,
                           small_kernels=int(small["kernels"].sum()), small_ms=small["gpu_us"].sum() / 1e3))
    ok = ladder[(ladder["status"] == "ok") & (ladder["quant"] == "bf16")]
    for gpu, model in ok[["gpu", "model"]].drop_duplicates().itertuples(index=False):
        g = ok[(ok["gpu"] == gpu) & (ok["model"] == model)]
        growth, values = [], {}
        for arm in ("graph", "lean_attn_graph"):
            a = g[g["arm"] == arm].set_index("ctx")["t_obs_ms"]
            if len(a) >= 2:
                first, last = a[a.index.min()], a[a.index.max()]
                values.update({f"{arm}_first_ms": first, f"{arm}_last_ms": last, f"{arm}_growth": last / first})
                growth.append(f"{step_label(arm, 'bf16')} {first:.2f} -> {last:.2f} ms (x{last / first:.2f})")
        if len(growth) == 2:
            lo, hi = g["ctx"].min(), g["ctx"].max()
            out.append(Finding(f"{gpu} {model}, ctx {lo} to {hi}: " + ", ".join(growth) + ".", gpu=gpu, model=model,
                               ctx_first=int(lo), ctx_last=int(hi), **values))
    if not ok.empty:
        best = ok.loc[ok.groupby(["gpu", "model", "ctx"])["t_obs_ms"].idxmin()]
        counts = best["lever"].value_counts()
        out.append(Finding(f"The fastest bf16 lever, cell by cell ({len(best)} cells): "
                           + ", ".join(f"{lever} in {n}" for lever, n in counts.items()) + ".",
                           cells=len(best), fastest=counts.index[0], fastest_cells=int(counts.iloc[0])))
    return out

