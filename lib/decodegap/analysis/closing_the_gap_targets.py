"""Notebook 06's targets against the ladder (ladder.ladder_table): the target cell's bf16 R_floor and int4 step
time (levers.TARGETS), every bf16 cell of the grid at its own R_floor (levers.GRID_TARGET), and the levers that
have no timed cell yet. Each line is a Finding, its numbers from the rows."""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from decodegap.finding import Finding
from decodegap.analysis.closing_the_gap import _at, step_terms
from decodegap.analysis.profiles import step_label
from decodegap.levers import GRID_TARGET, TARGETS


def target_findings(ladder: pd.DataFrame) -> list[str]:
    """Where the best measured lever stands against each target (TARGETS), or that it is not measured."""
    out = []
    for kind, target in TARGETS.items():
        sel = _at(ladder, target)
        sel = sel[sel["status"] == "ok"]
        sel = sel[(sel["quant"] == "bf16") if kind == "bf16" else (sel["quant"] != "bf16")]
        where = f"{target['model']} ctx {target['ctx']} on the {target['gpu']}"
        if sel.empty:
            out.append(Finding(f"{kind} target ({where}): no lever measured yet.", kind=kind, measured=False))
            continue
        best = sel.loc[sel["t_obs_ms"].idxmin()]
        if kind == "bf16":
            goal_ms = best["t_floor_bf16_ms"] / target["r_floor"]
            met = best["r_floor_bf16"] >= target["r_floor"]
            out.append(Finding(
                f"bf16 target R_floor >= {target['r_floor']:.2f} (<= {goal_ms:.2f} ms) at {where}: best lever "
                f"{best['lever']} {best['t_obs_ms']:.2f} ms, R_floor {best['r_floor_bf16']:.3f}: "
                + ("met." if met else f"not met ({best['t_obs_ms'] / goal_ms:.2f}x the target time)."),
                kind=kind, measured=True, lever=best["lever"], t_obs_ms=best["t_obs_ms"], r_floor=best["r_floor_bf16"],
                goal_ms=goal_ms, met=bool(met), over_goal=best["t_obs_ms"] / goal_ms))
        else:
            met = best["t_obs_ms"] <= target["step_ms"]
            out.append(Finding(
                f"int4 target <= {target['step_ms']:.1f} ms/step at {where}: best lever {best['lever']} "
                f"{best['t_obs_ms']:.2f} ms: " + ("met." if met else
                                                 f"not met ({best['t_obs_ms'] / target['step_ms']:.2f}x the target)."),
                kind=kind, measured=True, lever=best["lever"], t_obs_ms=best["t_obs_ms"], goal_ms=target["step_ms"],
                met=bool(met), over_goal=best["t_obs_ms"] / target["step_ms"]))
    return out


def unmeasured_findings(ladder: pd.DataFrame) -> list[str]:
    """Per GPU, the levers of the ladder with no timed cell there (built, but not measured on it yet)."""
    out = []
    for gpu, g in ladder.groupby("gpu"):
        never = [lever for lever, hit in g.groupby("lever", sort=False)["status"] if not (hit == "ok").any()]
        if never:
            out.append(Finding(f"Not measured on the {gpu} in any cell: {'; '.join(never)}.", gpu=gpu,
                               unmeasured_levers=len(never)))
    return out




def _budget(by_category: pd.DataFrame, gpu: str, model: str, ctx: int, arm: str) -> tuple[str, dict]:
    """The profiled step of one cell and arm (bf16), as ' Its profiled step: ...' and its values; empty where
    the cell was not profiled with that arm."""
    prof = _at(by_category, dict(gpu=gpu, model=model, ctx=ctx))
    prof = prof[(prof["arm"] == arm) & (prof["quant"] == "bf16")]
    if prof.empty:
        return " That step was not profiled.", {}
    step = step_terms(prof)
    us, floor = step.us, step.floor_us
    values = dict(products_ms=us.get("matmul", 0.0) / 1e3, products_floor_ms=float(floor.get("matmul", 0.0)) / 1e3,
                  attention_ms=us.get("attention", 0.0) / 1e3, attention_floor_ms=float(floor.get("attention", 0.0)) / 1e3,
                  small_ms=step.small_us / 1e3)
    values["products_excess_ms"] = values["products_ms"] - values["products_floor_ms"]
    values["attention_excess_ms"] = values["attention_ms"] - values["attention_floor_ms"]
    terms = {"the matrix products above their weight floor": values["products_excess_ms"],
             "the attention above its KV floor": values["attention_excess_ms"],
             "the small kernels": values["small_ms"]}
    largest = max(terms, key=terms.get)
    values["largest_term"] = largest
    return (f" Its profiled step ({step_label(arm, 'bf16')}): matrix products {values['products_ms']:.2f} ms against "
            f"their weight floor {values['products_floor_ms']:.2f} ms, attention {values['attention_ms']:.2f} ms "
            f"against {values['attention_floor_ms']:.2f} ms, small kernels {values['small_ms']:.2f} ms; the largest "
            f"term above the floor is {largest} ({terms[largest]:.2f} ms)."), values


def grid_target_findings(ladder: pd.DataFrame, by_category: pd.DataFrame | None = None,
                         target: Mapping = GRID_TARGET) -> list[str]:
    """Every bf16 cell of the target's GPU against R_floor >= target['r_floor'] with its fastest lever: how many
    cells meet it, the range of their R_floor, and the weakest cell with its lever, its time against the goal
    (its floor / r_floor) and, where that step was profiled, the budget term that holds it back most."""
    gpu, r = target["gpu"], target["r_floor"]
    ok = ladder[(ladder["gpu"] == gpu) & (ladder["status"] == "ok") & (ladder["quant"] == "bf16")]
    if ok.empty:
        return [Finding(f"grid target R_floor >= {r:.2f} in every bf16 cell on the {gpu}: no lever measured yet.",
                        measured=False)]
    best = ok.loc[ok.groupby(["model", "ctx"])["t_obs_ms"].idxmin()]
    n_met = int((best["r_floor_bf16"] >= r).sum())
    weakest = best.loc[best["r_floor_bf16"].idxmin()]
    goal_ms = weakest["t_floor_bf16_ms"] / r
    met = n_met == len(best)
    values = dict(measured=True, cells=len(best), cells_met=n_met, met=bool(met),
                  r_floor_min=float(best["r_floor_bf16"].min()), r_floor_max=float(best["r_floor_bf16"].max()),
                  weakest_model=weakest["model"], weakest_ctx=int(weakest["ctx"]), weakest_lever=weakest["lever"],
                  weakest_ms=float(weakest["t_obs_ms"]), weakest_goal_ms=float(goal_ms))
    text = (f"grid target R_floor >= {r:.2f} in every bf16 cell on the {gpu}: {n_met} of {len(best)} cells meet it "
            f"with their fastest lever (R_floor {values['r_floor_min']:.3f}-{values['r_floor_max']:.3f}): "
            + ("met." if met else
               f"not met. The weakest, {weakest['model']} ctx {int(weakest['ctx'])}, takes {weakest['t_obs_ms']:.2f} ms "
               f"with {weakest['lever']} against its goal {goal_ms:.2f} ms ({weakest['t_obs_ms'] / goal_ms:.2f}x)."))
    if not met and by_category is not None:
        budget, more = _budget(by_category, gpu, weakest["model"], int(weakest["ctx"]), weakest["arm"])
        text += budget
        values.update(more)
    return [Finding(text, **values)]
