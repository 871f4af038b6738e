"""Notebook 06's targets against the ladder (ladder.ladder_table): the target cell's bf16 R_floor and int4 step
time (levers.TARGETS), every bf16 cell of the grid at its own R_floor (levers.GRID_TARGET), every int4 cell at the
int4 grid's step time (levers.INT4_GRID_TARGET), the earlier targets (levers.EARLIER_TARGETS) judged the same way,
and the levers that have no timed cell yet. A target not met names the term of its profiled step that stands in the
way. Each line is a Finding, its numbers from the rows."""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from decodegap.finding import Finding
from decodegap.stats import span
from decodegap.analysis.closing_the_gap import _at, step_terms
from decodegap.analysis.profiles import step_label
from decodegap.analysis import closing_the_gap_confirmation as confirm
from decodegap.levers import (CODE_CHANGES, CONFIRM_SESSIONS, EARLIER_TARGETS, GRID_TARGET, INT4_GRID_TARGET, LEVERS,
                              TARGETS, changes_named)


def _confirmed_at(confirmation: pd.DataFrame, target: Mapping, kind: str) -> pd.Series | None:
    """The confirmation_table row of the target's cell and kind, or None where no lever is timed there."""
    sel = _at(confirmation, target)
    sel = sel[sel["kind"] == kind]
    return None if sel.empty else sel.iloc[0]


def _or_unconfirmed(ladder: pd.DataFrame, confirmation: pd.DataFrame | None) -> pd.DataFrame:
    """`confirmation`, or where none is given the ladder's choices with no confirmation sweep (each `not confirmed`)."""
    if confirmation is None:
        return confirm.confirmation_table(confirm.choices(ladder), pd.DataFrame())
    return confirmation


def target_findings(ladder: pd.DataFrame, confirmation: pd.DataFrame | None = None,
                    by_category: pd.DataFrame | None = None, targets: Mapping = TARGETS,
                    confirmed: pd.DataFrame | None = None) -> list[str]:
    """Where the chosen lever stands against each target (`targets`, {kind: target}), read from its confirmation sweep
    (`confirmation`: closing_the_gap_confirmation.confirmation_table of the ladder's choices): a lever chosen as the
    fastest of the selection sweeps counts only once confirmed; before that the finding says `not confirmed` with its
    selection median, which no target reads, and, where `confirmed` (confirmation.confirmed_levers) holds a lever
    confirmed at the cell earlier, judges the target on that lever's confirmed time (`counted_*` values). A target not
    met, given the profiled steps (`by_category`: profiles.category_table), names the term that stands in the way
    (`_in_the_way`).

    The held lever's rule, and its history: until 2026-12-05 a target whose current pick awaited its confirmation
    counted nothing (met False), whatever had been confirmed at the cell before; since then it counts the fastest
    lever confirmed there (the grids likewise, _with_held). Written after the selection sweeps picked new levers at
    the target cell, not yet confirmed: under the earlier rule the earlier bf16 target (R_floor 0.80), met by
    confirmed rows, read as not counted; under this one every verdict reads as it did before those picks. It reads
    only confirmation rows, and a held lever can leave a target met or not met alike."""
    confirmation = _or_unconfirmed(ladder, confirmation)
    out = []
    for kind, target in targets.items():
        row = _confirmed_at(confirmation, target, kind)
        where = f"{target['model']} ctx {target['ctx']} on the {target['gpu']}"
        if row is None:
            out.append(Finding(f"{kind} target ({where}): no lever measured yet.", kind=kind, measured=False))
            continue
        goal_ms = row["t_floor_bf16_ms"] / target["r_floor"] if kind == "bf16" else target["step_ms"]
        head = (f"bf16 target R_floor >= {target['r_floor']:.2f} (<= {goal_ms:.2f} ms) at {where}" if kind == "bf16"
                else f"int4 target <= {target['step_ms']:.1f} ms/step at {where}")
        if row["status"] != confirm.CONFIRMED:
            fresh = int(row["sessions"]) > 0  # partly confirmed: its fresh sessions so far, not the best of many
            t_ms, basis = ((row["confirmed_ms"], "the median of the chosen lever's fresh sessions") if fresh else
                           (row["selected_ms"], "the chosen lever's selection median"))
            held_text, held = _held_before(confirmed, target, kind, row, goal_ms)
            counted_ms = held["counted_ms"] if held and not held["counted_met"] else None
            way, more = _in_the_way(by_category, target, row, t_ms, goal_ms, basis, counted_ms)
            so_far = (f": its {int(row['sessions'])} fresh sessions so far take {row['confirmed_ms']:.2f} ms "
                      f"({span([row['confirmed_min_ms'], row['confirmed_max_ms']])} ms)" if fresh else "")
            changed = _changed_text(row, ladder)
            out.append(Finding(
                f"{head}: the selection sweeps' fastest lever is {row['lever']} at {row['selected_ms']:.2f} ms "
                f"({_runner_up_text(row)}); {row['status']} by a fresh "
                f"sweep ({int(row['sessions'])} of {CONFIRM_SESSIONS} sessions{so_far}), so not counted." + changed
                + held_text + way,
                kind=kind, measured=True, confirmed=False, lever=row["lever"], selected_ms=row["selected_ms"],
                goal_ms=goal_ms, met=bool(held.get("counted_met", False)), status=row["status"],
                **({"fresh_ms": row["confirmed_ms"]} if fresh else {}), **held, **more))
            continue
        t = row["confirmed_ms"]
        met = bool(row["r_floor_bf16"] >= target["r_floor"]) if kind == "bf16" else bool(t <= target["step_ms"])
        over = t / goal_ms
        measured = (f"{row['lever']} {t:.2f} ms" + (f", R_floor {row['r_floor_bf16']:.3f}" if kind == "bf16" else "")
                    + f", confirmed by a fresh sweep ({confirm.margin_text(row)}; selection median "
                      f"{row['selected_ms']:.2f} ms)")
        way, more = ("", {}) if met else _in_the_way(by_category, target, row, t, goal_ms, "its confirmed time")
        out.append(Finding(
            f"{head}: chosen lever {measured}: " + ("met." if met else f"not met ({over:.2f}x the target time).")
            + _changed_text(row, ladder) + way,
            kind=kind, measured=True, confirmed=True, lever=row["lever"], t_obs_ms=t, r_floor=row["r_floor_bf16"],
            goal_ms=goal_ms, met=met, over_goal=over, status="met" if met else "not met",
            margin_median=row["margin_median"], margin_min=row["margin_min"], margin_max=row["margin_max"], **more))
    return out


def _runner_up_text(row: pd.Series) -> str:
    """'runner-up <lever> <ms> ms' of a confirmation_table row, or 'no runner-up timed at the cell'."""
    if pd.isna(row.get("runner_up_selected_ms")):
        return "no runner-up timed at the cell"
    return f"runner-up {row['runner_up']} {row['runner_up_selected_ms']:.2f} ms"


def _changed_text(row: pd.Series, ladder: pd.DataFrame) -> str:
    """' Its fresh sessions ... were measured before <change> (<commit>) ...' where changes to the chosen lever's code
    (levers.CODE_CHANGES) were made after its confirmation sessions (`row`'s changed_since) or its selection rows (the
    ladder's changed_since of the lever at the cell); "" where neither."""
    fresh = str(row.get("changed_since", "") or "").split() if int(row["sessions"]) else []
    at = _at(ladder, row)
    at = at[(at["arm"] == row["arm"]) & (at["quant"] == row["quant"])] if "changed_since" in ladder else at.iloc[:0]
    selected = str(at.iloc[0]["changed_since"] or "").split() if not at.empty else []
    commits = list(dict.fromkeys(fresh + selected))
    if not commits:
        return ""
    which = " and ".join(w for w, hit in (("fresh sessions", fresh), ("selection rows", selected)) if hit)
    changes = changes_named(" ".join(commits), CODE_CHANGES)
    return f" Its {which} were measured before {changes}: they time code the lever no longer runs."


def _held_before(confirmed: pd.DataFrame | None, target: Mapping, kind: str, row: pd.Series,
                 goal_ms: float) -> tuple[str, dict]:
    """(' The fastest lever confirmed there ...', its values) of the target's cell and kind where `confirmed`
    holds a lever confirmed there other than the current pick (_held_lever): its confirmed time (and R_floor against
    the cell's bf16 floor) judged against the target, which counts it; ("", {}) otherwise."""
    c = _held_lever(confirmed, row)
    if c is None:
        return "", {}
    met = (bool(c["r_floor_bf16"] >= target["r_floor"]) if kind == "bf16"
           else bool(c["confirmed_ms"] <= target["step_ms"]))
    measured = f"{c['confirmed_ms']:.2f} ms" + (f", R_floor {c['r_floor_bf16']:.3f}" if kind == "bf16" else "")
    text = (f" The fastest lever confirmed there ({c['sessions']} fresh sessions, "
            f"{span([c['confirmed_min_ms'], c['confirmed_max_ms']])} ms) is {c['lever']} at {measured}, which the "
            f"target counts: " + ("met." if met else f"not met ({c['confirmed_ms'] / goal_ms:.2f}x the target time)."))
    return text, dict(counted_lever=c["lever"], counted_ms=c["confirmed_ms"], counted_r_floor=c["r_floor_bf16"],
                      counted_met=met)


def _held_lever(confirmed: pd.DataFrame | None, row: pd.Series) -> dict | None:
    """The lever `confirmed` (confirmation.confirmed_levers) holds at the cell and kind of `row` (a confirmation_table
    row), where it is not the row's current pick: its ladder name, arm, quant, confirmed time and range, sessions and
    R_floor against the cell's bf16 floor; else None."""
    if confirmed is None or confirmed.empty:
        return None
    at = confirmed[(confirmed["gpu"] == row["gpu"]) & (confirmed["model"] == row["model"])
                   & (confirmed["ctx"] == int(row["ctx"])) & (confirmed["kind"] == row["kind"])]
    if at.empty or (at.iloc[0]["arm"], at.iloc[0]["quant"]) == (row["arm"], row["quant"]):
        return None
    c = at.iloc[0]
    return dict(lever=_lever_name(c["arm"], c["quant"]), arm=c["arm"], quant=c["quant"],
                confirmed_ms=float(c["confirmed_ms"]), confirmed_min_ms=float(c["confirmed_min_ms"]),
                confirmed_max_ms=float(c["confirmed_max_ms"]), sessions=int(c["sessions"]),
                r_floor_bf16=float(row["t_floor_bf16_ms"]) / float(c["confirmed_ms"]))


def _lever_name(arm: str, quant: str) -> str:
    """The ladder's name of (arm, quant) (levers.LEVERS), else `arm (quant)`."""
    return next((name for name, a, q in LEVERS if (a, q) == (arm, quant)), f"{arm} ({quant})")


def _in_the_way(by_category: pd.DataFrame | None, target: Mapping, row: pd.Series, t_ms: float,
                goal_ms: float, basis: str, counted_ms: float | None = None) -> tuple[str, dict]:
    """(' What stands in the way: ...', its values) of a target not met at `t_ms` (`basis`: which time it is) against
    `goal_ms`: the time to remove, then that of `counted_ms`, the time the target counts where it is another lever's
    and misses; where `t_ms`, a time the target does not count, is within the goal already, the confirmation that
    must hold it and the time it has to spare. Then the profiled step of the chosen lever at the target's cell split
    into its terms above their floors (`profiled_budget`); where that lever's step was not profiled, the profiled step
    of its design (the same arm in another quantisation path: the same attention, small kernels and gaps), else of its
    quantisation path, else of its kind (bf16 or quantised), whose kernels sum to the least time there, named as such.
    Empty without profiles. The profiled step is the chosen lever's, whose time `basis` names first."""
    if by_category is None or by_category.empty:
        return "", {}
    gap = dict(short_ms=float(t_ms - goal_ms))
    if gap["short_ms"] > 0:
        counted = (f"; {counted_ms - goal_ms:.2f} ms from the {counted_ms:.2f} ms of the lever the target counts"
                   if counted_ms is not None else "")
        text = f" What stands in the way: {gap['short_ms']:.2f} ms to remove from {basis}{counted}."
    else:  # only an unconfirmed time can be within the goal here: a confirmed one within it met the target
        counted = (f"; the {counted_ms:.2f} ms of the lever the target counts are {counted_ms - goal_ms:.2f} ms over it"
                   if counted_ms is not None else "")
        text = (f" What stands in the way: its confirmation. {basis[0].upper()}{basis[1:]} is "
                f"{-gap['short_ms']:.2f} ms within the goal{counted}.")
    at = _at(by_category, target)
    mine = at[(at["arm"] == row["arm"]) & (at["quant"] == row["quant"])]
    arm, quant, note = row["arm"], row["quant"], ""
    if mine.empty:
        same = at[at["arm"] == row["arm"]]
        if same.empty:
            same = at[at["quant"] == row["quant"]]
        if same.empty:
            same = at[[confirm.kind(q) == confirm.kind(row["quant"]) for q in at["quant"]]]
        if same.empty:
            return text + " No step of this kind was profiled at the cell.", gap
        arm, quant = same.groupby(["arm", "quant"])["gpu_us"].sum().idxmin()
        note = (f" The chosen lever's step was not profiled; the profiled step nearest to it there (its design, the "
                f"same arm, in another path where profiled, else its quantisation path, else its kind; the least "
                f"kernel time) is {arm} in {quant}.")
    budget, values = profiled_budget(by_category, target["gpu"], target["model"], target["ctx"], arm, quant,
                                     step_ms=None if note else t_ms)  # a stand-in's kernels are not this step's
    return text + note + budget, dict(gap, profiled_arm=arm, profiled_quant=quant, **values)


def unmeasured_findings(ladder: pd.DataFrame) -> list[str]:
    """Per GPU, the levers of the ladder with no timed cell there (built, but not measured on it yet), named; where
    they are more than those measured, counted instead, and the measured ones named ("all but ...")."""
    out = []
    for gpu, g in ladder.groupby("gpu"):
        timed = g.groupby("lever", sort=False)["status"].agg(lambda hit: bool((hit == "ok").any()))
        never, measured = list(timed.index[~timed]), list(timed.index[timed])
        if never:
            which = ("; ".join(never) if len(never) <= len(measured) else
                     f"{len(never)} of the {len(timed)} levers, all but {'; '.join(measured)}")
            out.append(Finding(f"Not measured on the {gpu} in any cell: {which}.", gpu=gpu,
                               unmeasured_levers=len(never)))
    return out




def profiled_budget(by_category: pd.DataFrame, gpu: str, model: str, ctx: int, arm: str, quant: str = "bf16",
                    step_ms: float | None = None) -> tuple[str, dict]:
    """The profiled step of one cell, arm and quantisation path, as ' Its profiled step: ...' and its values; empty
    where the cell was not profiled with that arm. `step_ms`: the time of the step profiled (the lever's own), against
    which kernel times summing to more are said to overlap (`overlap_ms`: under PDL each term is an upper bound)."""
    prof = _at(by_category, dict(gpu=gpu, model=model, ctx=ctx))
    prof = prof[(prof["arm"] == arm) & (prof["quant"] == quant)]
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
    text = (f" Its profiled step ({step_label(arm, quant)}): matrix products {values['products_ms']:.2f} ms against "
            f"their weight floor {values['products_floor_ms']:.2f} ms, attention {values['attention_ms']:.2f} ms "
            f"against {values['attention_floor_ms']:.2f} ms, small kernels {values['small_ms']:.2f} ms; the largest "
            f"term above the floor is {largest} ({terms[largest]:.2f} ms).")
    kernels_ms = values["products_ms"] + values["attention_ms"] + values["small_ms"]
    if step_ms is not None and kernels_ms > step_ms:  # the step's own profile overlaps: under PDL a kernel starts early
        values["overlap_ms"] = kernels_ms - step_ms
        text += (f" Those kernel times sum to {kernels_ms:.2f} ms, {values['overlap_ms']:.2f} ms more than the "
                 f"step's {step_ms:.2f} ms: under PDL a kernel starts before the one it waits for ends and its time "
                 f"includes that wait, so the terms overlap and each is an upper bound.")
    return text, values


def _selection_and_verdict(values: Mapping, selected_span: str) -> str:
    """The tail of a grid target's line: what the selection sweeps alone reach (never counted), then the verdict, from
    the line's values (cells, cells_confirmed, cells_selected_met, met)."""
    cells, done = values["cells"], values["cells_confirmed"]
    return (f"; on the selection sweeps alone {values['cells_selected_met']} of {cells} reach it ({selected_span}, best "
            f"of many: not counted): " + ("met." if values["met"] else f"not met ({cells - done} cells await their "
                                          f"confirmation)." if done < cells else "not met."))


def _with_held(cells: pd.DataFrame, confirmed: pd.DataFrame | None) -> tuple[pd.DataFrame, int]:
    """(`cells`, rows of the confirmation table, with each cell whose current pick is not confirmed but which holds
    another lever confirmed earlier (_held_lever of `confirmed`: confirmation.confirmed_levers) counted on that lever:
    its name, confirmed time, range and R_floor against the cell's bf16 floor, status confirmed; how many cells that
    is)."""
    out, held = cells.copy(), 0
    for i, row in cells.iterrows():
        c = None if row["status"] == confirm.CONFIRMED else _held_lever(confirmed, row)
        if c is None:
            continue
        names = ["lever", "arm", "quant", "confirmed_ms", "confirmed_min_ms", "confirmed_max_ms", "r_floor_bf16"]
        out.loc[i, names + ["status"]] = [c[n] for n in names] + [confirm.CONFIRMED]
        held += 1
    return out, held


def _held_text(held: int) -> str:
    return f" ({held} of them on the lever confirmed there before the selection's current pick)" if held else ""


def grid_target_findings(ladder: pd.DataFrame, by_category: pd.DataFrame | None = None,
                         target: Mapping = GRID_TARGET, confirmation: pd.DataFrame | None = None,
                         confirmed: pd.DataFrame | None = None) -> list[str]:
    """Every bf16 cell of the target's GPU against R_floor >= target['r_floor'] with its chosen lever, counted only
    where the confirmation sweep confirmed it (`confirmation`, as target_findings): how many cells are confirmed, how
    many of those meet it, the range of their R_floor, and the weakest confirmed cell with its lever, its time
    against the goal (its floor / r_floor) and, where that step was profiled, the budget term that holds it back
    most. What the selection sweeps alone reach is said beside it, never counted; with no cell confirmed, so is the
    selection's weakest cell below the goal, with its profiled step's terms."""
    gpu, r = target["gpu"], target["r_floor"]
    confirmation = _or_unconfirmed(ladder, confirmation)
    cells = confirmation[(confirmation["gpu"] == gpu) & (confirmation["kind"] == "bf16")]
    if cells.empty:
        return [Finding(f"grid target R_floor >= {r:.2f} in every bf16 cell on the {gpu}: no lever measured yet.",
                        measured=False)]
    selected_r = cells["t_floor_bf16_ms"] / cells["selected_ms"]
    cells, held = _with_held(cells, confirmed)
    done = cells[cells["status"] == confirm.CONFIRMED]
    n_met = int((done["r_floor_bf16"] >= r).sum())
    met = len(done) == len(cells) and n_met == len(cells)
    values = dict(measured=True, cells=len(cells), cells_confirmed=len(done), cells_met=n_met, met=bool(met),
                  cells_selected_met=int((selected_r >= r).sum()), cells_held=held)
    text = (f"grid target R_floor >= {r:.2f} in every bf16 cell on the {gpu}: {len(done)} of {len(cells)} cells' "
            f"chosen levers confirmed by a fresh sweep" + _held_text(held))
    if not done.empty:
        weakest = done.loc[done["r_floor_bf16"].idxmin()]
        goal_ms = weakest["t_floor_bf16_ms"] / r
        values.update(r_floor_min=float(done["r_floor_bf16"].min()), r_floor_max=float(done["r_floor_bf16"].max()),
                      weakest_model=weakest["model"], weakest_ctx=int(weakest["ctx"]), weakest_lever=weakest["lever"],
                      weakest_ms=float(weakest["confirmed_ms"]), weakest_goal_ms=float(goal_ms))
        text += (f", {n_met} of them meeting it (confirmed R_floor {values['r_floor_min']:.3f}-"
                 f"{values['r_floor_max']:.3f})")
    text += _selection_and_verdict(values, f"R_floor {selected_r.min():.3f}-{selected_r.max():.3f}")
    if not done.empty and n_met < len(done):
        more, budget = _weakest_cell(weakest, weakest["confirmed_ms"], goal_ms, "confirmed cell", by_category, gpu)
        text += more
        values.update(budget)
    elif done.empty and selected_r.min() < r:  # nothing confirmed: where the selection stands furthest from the goal
        low = cells.loc[selected_r.idxmin()]
        goal_ms = low["t_floor_bf16_ms"] / r
        values.update(selected_weakest_model=low["model"], selected_weakest_ctx=int(low["ctx"]),
                      selected_weakest_lever=low["lever"], selected_weakest_ms=float(low["selected_ms"]),
                      selected_weakest_goal_ms=float(goal_ms))
        more, budget = _weakest_cell(low, low["selected_ms"], goal_ms, "cell on the selection sweeps (not counted)",
                                     by_category, gpu)
        text += more
        values.update({f"selected_weakest_{k}": v for k, v in budget.items()})
    unswept, more_values = (_unswept_target_lever(ladder, confirmation, confirm.KIND_BF16, gpu)
                            if target == GRID_TARGET else ("", {}))  # an earlier target's line: its verdict alone
    values.update(more_values)
    return [Finding(text + unswept, **values)]


def _unswept_target_lever(ladder: pd.DataFrame, confirmation: pd.DataFrame, kind: str, gpu: str) -> tuple[str, dict]:
    """(' The target cell's confirmed X has no rows in N of the grid's other cells ...', its values) where the lever
    confirmed at the kind's target cell (levers.TARGETS) is `not measured` in other cells of `gpu`'s grid (the ladder's
    status: swept there by the ladder's plan once promoted, experiments.closing_the_gap.promoted_levers); ('', {})
    where it has rows in every cell or nothing is confirmed there. Descriptive: the grid counts read the cells' own
    chosen levers."""
    target = TARGETS[kind]
    at = _confirmed_at(confirmation, target, kind) if target["gpu"] == gpu else None
    if at is None or at.get("status") != confirm.CONFIRMED:
        return "", {}
    rows = ladder[(ladder["gpu"] == gpu) & (ladder["arm"] == at["arm"]) & (ladder["quant"] == at["quant"])]
    missing = rows[rows["status"] == "not measured"]
    if missing.empty:
        return "", {}
    others = len(rows) - len(_at(rows, target))
    return (f" The lever confirmed fastest at the target cell ({at['lever']}) has no rows in {len(missing)} of the "
            f"grid's {others} other cells: `python -m decodegap ladder --gpu {gpu} --levers {at['arm']}` times it "
            f"there, a selection its confirmation then tests.",
            dict(target_lever_unswept=len(missing), target_lever_arm=at["arm"]))


def _weakest_cell(cell: pd.Series, t_ms: float, goal_ms: float, who: str, by_category: pd.DataFrame | None,
                  gpu: str) -> tuple[str, dict]:
    """(' The weakest `who`, ... against its goal ...' with its profiled step's terms where given
    (`profiled_budget`), those terms' values) of one bf16 grid cell timed at `t_ms`."""
    text = (f" The weakest {who}, {cell['model']} ctx {int(cell['ctx'])}, takes {t_ms:.2f} ms with {cell['lever']} "
            f"against its goal {goal_ms:.2f} ms ({t_ms / goal_ms:.2f}x).")
    if by_category is None:
        return text, {}
    budget, values = profiled_budget(by_category, gpu, cell["model"], int(cell["ctx"]), cell["arm"])
    return text + budget, values


def int4_grid_target_findings(ladder: pd.DataFrame, confirmation: pd.DataFrame | None = None,
                              target: Mapping = INT4_GRID_TARGET, confirmed: pd.DataFrame | None = None) -> list[str]:
    """Every int4 cell of the target's GPU against target['step_ms'] per step with its chosen int4 lever, counted only
    where the confirmation sweep confirmed it (as grid_target_findings): how many cells are confirmed, how many of
    those meet it, and the slowest confirmed cell with its lever; what the selection sweeps alone reach is said beside
    it, never counted."""
    gpu, goal = target["gpu"], target["step_ms"]
    confirmation = _or_unconfirmed(ladder, confirmation)
    head = f"int4 grid target <= {goal:.1f} ms/step in every int4 cell on the {gpu}"
    cells = confirmation[(confirmation["gpu"] == gpu) & (confirmation["kind"] == confirm.KIND_INT4)]
    if cells.empty:
        return [Finding(f"{head}: no int4 lever measured yet.", measured=False)]
    selected_met = int((cells["selected_ms"] <= goal).sum())
    cells, held = _with_held(cells, confirmed)
    done = cells[cells["status"] == confirm.CONFIRMED]
    n_met = int((done["confirmed_ms"] <= goal).sum())
    met = len(done) == len(cells) and n_met == len(cells)
    values = dict(measured=True, cells=len(cells), cells_confirmed=len(done), cells_met=n_met, met=bool(met),
                  cells_selected_met=selected_met, goal_ms=goal, cells_held=held)
    text = (f"{head}: {len(done)} of {len(cells)} cells' chosen int4 levers confirmed by a fresh sweep"
            + _held_text(held))
    if not done.empty:
        slowest = done.loc[done["confirmed_ms"].idxmax()]
        values.update(confirmed_ms_min=float(done["confirmed_ms"].min()), confirmed_ms_max=float(slowest["confirmed_ms"]),
                      slowest_model=slowest["model"], slowest_ctx=int(slowest["ctx"]), slowest_lever=slowest["lever"])
        which = (f"{values['confirmed_ms_max']:.2f} ms; the one cell" if len(done) == 1 else
                 f"{span([values['confirmed_ms_min'], values['confirmed_ms_max']])} ms; the slowest")
        text += (f", {n_met} of them meeting it ({which} {slowest['model']} ctx {int(slowest['ctx'])} with "
                 f"{slowest['lever']})")
    text += _selection_and_verdict(values, f"{span(cells['selected_ms'])} ms")
    if not done.empty and n_met < len(done):
        more, growth = _slowest_int4_cell(slowest, done, goal)
        text += more
        values.update(growth)
    unswept, more_values = _unswept_target_lever(ladder, confirmation, confirm.KIND_INT4, gpu)
    values.update(more_values)
    return [Finding(text + unswept, **values)]


def _slowest_int4_cell(slowest: pd.Series, done: pd.DataFrame, goal_ms: float) -> tuple[str, dict]:
    """(' What stands in the way: ...', its values) of the int4 grid's slowest confirmed cell above the goal: the time
    to remove, and, where the same model has a confirmed cell at a shorter context, how much of the step's growth
    since that cell the KV cache's floor explains (the two cells' t_floor_bf16 differ only by their KV bytes; the
    weights are the same): the rest is the context's cost above its floor. Only confirmed times are read; the int4
    profiles are of the target cell alone, so no kernel term of this cell is named."""
    t_ms = float(slowest["confirmed_ms"])
    values = dict(slowest_over_ms=t_ms - goal_ms)
    text = (f" What stands in the way: {t_ms - goal_ms:.2f} ms to remove from the slowest confirmed cell "
            f"({t_ms:.2f} ms, {t_ms / goal_ms:.2f}x the goal).")
    shorter = done[(done["gpu"] == slowest["gpu"]) & (done["model"] == slowest["model"])
                   & (done["ctx"] < slowest["ctx"])]
    if shorter.empty:
        return text, values
    base = shorter.loc[shorter["ctx"].idxmin()]
    growth = t_ms - float(base["confirmed_ms"])
    kv_growth = float(slowest["t_floor_bf16_ms"]) - float(base["t_floor_bf16_ms"])
    values.update(base_ctx=int(base["ctx"]), base_ms=float(base["confirmed_ms"]), growth_ms=growth,
                  kv_floor_growth_ms=kv_growth, context_excess_ms=growth - kv_growth)
    lever = "" if base["lever"] == slowest["lever"] else f" with {base['lever']}"
    enough = growth - kv_growth >= t_ms - goal_ms - 1e-9  # times to the microsecond: no float noise decides it
    text += (f" Its step takes {growth:.2f} ms more than the same model's confirmed cell at ctx {int(base['ctx'])} "
             f"({float(base['confirmed_ms']):.2f} ms{lever}), of which the KV cache's floor explains {kv_growth:.2f} ms "
             f"(the two cells' floors at the datasheet bandwidth): {growth - kv_growth:.2f} ms is the longer context's "
             f"cost above its floor, " + ("as much as or more than" if enough else "less than")
             + f" the {t_ms - goal_ms:.2f} ms to remove"
             + ("." if enough else f"; the step at ctx {int(base['ctx'])} must shrink too."))
    return text, values


def earlier_target_findings(ladder: pd.DataFrame, confirmation: pd.DataFrame | None = None,
                            earlier=EARLIER_TARGETS, confirmed: pd.DataFrame | None = None) -> list[str]:
    """Each earlier target (levers.EARLIER_TARGETS) judged as the current ones are, on the same rows, its line led by
    the dates it held and why it changed: a raised bar keeps where the rows stood against the old one."""
    out = []
    for e in earlier:
        lines = (grid_target_findings(ladder, target=e["target"], confirmation=confirmation, confirmed=confirmed)
                 if e["name"] == "grid"
                 else target_findings(ladder, confirmation, targets={e["name"]: e["target"]}, confirmed=confirmed))
        for line in lines:
            out.append(Finding(f"Earlier target (held {e['since']} to {e['until']}; {e['why']}): {line}",
                               **{**line.values, "earlier": e["name"], "since": e["since"], "until": e["until"]}))
    return out
