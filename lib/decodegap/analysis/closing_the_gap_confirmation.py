"""Notebook 06's winners confirmed, not selected. The ladder picks each cell's fastest lever as the smallest of many
levers' medians (the selection sweeps): a best-of-many is biased low (the winner's curse). A confirmation sweep,
measured after the choice (experiments.closing_the_gap.confirm: sessions numbered from levers.CONFIRM_FIRST_SESSION,
apart from every selection sweep; levers.CONFIRM_SESSIONS fresh sessions, the arm order alternated between them,
every arm checked in every session), times the chosen lever beside the runner-up again. The targets and the grid
count read these rows alone: a cell whose chosen lever has no confirmation rows is `not confirmed`, whatever its
selection median says.

The margin over the runner-up is paired by session: per confirmation session, the runner-up's session median over the
winner's, minus one (positive: the chosen lever is faster); its median and its range over the sessions. A session is
one (run, session number): a cell confirmed in two runs (a confirmation cut by its call and measured again whole)
counts the sessions of both, each paired within its own run (until 2026-12-04 the sessions of two runs that share a
number were pooled into one; no cell had two runs then). `order` says whether the selection's order held: `held`
where the chosen lever was faster in every paired session, `reversed` where the runner-up was, `mixed` otherwise; it
is descriptive, and the targets read the chosen lever's confirmed time whatever it says."""

from __future__ import annotations

import numpy as np
import pandas as pd

from decodegap import checked, hardware, selection, stats
from decodegap.finding import Finding
from decodegap.levers import CONFIRM_FIRST_SESSION, CONFIRM_SESSIONS, changed_since

KIND_BF16, KIND_INT4 = "bf16", "int4"
CHOICE_COLUMNS = ["gpu", "model", "ctx", "kind", "lever", "arm", "quant", "selected_ms", "runner_up", "runner_up_arm",
                  "runner_up_quant", "runner_up_selected_ms", "t_floor_bf16_ms"]
ORDER_HELD, ORDER_REVERSED, ORDER_MIXED = "held", "reversed", "mixed"
CONFIRMED = "confirmed"
PARTLY = "partly confirmed"
NOT_CONFIRMED = "not confirmed"


def kind(quant: str) -> str:
    """The target a lever of `quant` counts towards: bf16, or int4 (every quantised path)."""
    return KIND_BF16 if quant == "bf16" else KIND_INT4


def choices(ladder: pd.DataFrame) -> pd.DataFrame:
    """Per (gpu, model, ctx, kind) of the ladder (analysis.closing_the_gap.ladder_table, its timed and checked `ok`
    rows), the chosen lever (the smallest selection median) and the runner-up (the next), with both medians and the
    cell's bf16 floor. A cell with one timed lever has no runner-up (NaN)."""
    ok = ladder[ladder["status"] == "ok"].dropna(subset=["t_obs_ms"])
    if ok.empty:
        return pd.DataFrame(columns=CHOICE_COLUMNS)
    ok = ok.assign(kind=[kind(q) for q in ok["quant"]])
    out = []
    for (gpu, model, ctx, k), g in ok.groupby(["gpu", "model", "ctx", "kind"]):
        g = g.sort_values(["t_obs_ms", "order"])
        first = g.iloc[0]
        second = g.iloc[1] if len(g) > 1 else None
        out.append(dict(gpu=gpu, model=model, ctx=int(ctx), kind=k, lever=first["lever"], arm=first["arm"],
                        quant=first["quant"], selected_ms=float(first["t_obs_ms"]),
                        runner_up=None if second is None else second["lever"],
                        runner_up_arm=None if second is None else second["arm"],
                        runner_up_quant=None if second is None else second["quant"],
                        runner_up_selected_ms=np.nan if second is None else float(second["t_obs_ms"]),
                        t_floor_bf16_ms=float(first["t_floor_bf16_ms"])))
    return pd.DataFrame(out, columns=CHOICE_COLUMNS)


def confirmation_rows(decode_rows: pd.DataFrame, plans) -> pd.DataFrame:
    """The timed rows of the confirmation sweeps among `decode_rows` (checked.load(..., grid=False) rows, each
    labelled by the checks of its own run): runs whose plan (selection.run_plans) numbers its sessions from
    CONFIRM_FIRST_SESSION, batch 1, `ok` (timed with a passing check of their own run)."""
    if decode_rows.empty:
        return decode_rows
    runs = {run for (_, run), plan in plans.items() if (plan or {}).get("first_session") == CONFIRM_FIRST_SESSION}
    keep = decode_rows["run_id"].isin(runs) & (decode_rows["status"] == "ok")
    if "batch" in decode_rows:
        keep &= pd.to_numeric(decode_rows["batch"], errors="coerce").fillna(1).astype(int) == 1
    return decode_rows[keep]


CONFIRMED_COLUMNS = ["gpu", "model", "ctx", "kind", "arm", "quant", "confirmed_ms", "confirmed_min_ms",
                     "confirmed_max_ms", "sessions"]


def confirming_rows(data, every_row: pd.DataFrame | None = None, env: dict | None = None) -> tuple[pd.DataFrame, dict]:
    """(the confirmation sweeps' checked rows, {run id: commit}) in `data`: what the confirmation table, the
    confirmed levers and notebook 05's cost ladder read (`every_row`: decode.csv's checked rows, grid and beyond;
    `env`: hardware.load_env of `data`; each read here when not given)."""
    if every_row is None:
        every_row = checked.labelled(checked.load("decode", data, grid=False))
    env = hardware.load_env(data) if env is None else env
    return confirmation_rows(every_row, selection.run_plans(data)), commits_of_runs(env)


def lever_confirmations(rows: pd.DataFrame, commit_of: dict | None = None) -> pd.DataFrame:
    """Per (gpu, model, ctx, arm, quant) of the confirmation sweeps' rows (`rows`: confirmation_rows), what its
    confirmation sweeps hold (CONFIRMED_COLUMNS): the median of its session medians, their range and how many
    sessions, however few (with `commit_of`, the runs of the lever's newest commit only, as confirmation_table counts
    them: newest_commit_runs). A lever is confirmed at a cell with CONFIRM_SESSIONS sessions (confirmed_levers)."""
    out = []
    if rows.empty:
        return pd.DataFrame(columns=CONFIRMED_COLUMNS)
    for (gpu, model, ctx), at in rows.groupby(["gpu", "model", "ctx"]):
        cell = dict(gpu=gpu, model=model, ctx=ctx)
        for arm, quant in sorted(set(zip(at["arm"], at["quant"]))):
            kept, _ = newest_commit_runs(at, cell, arm, quant, commit_of)
            per = _session_medians(at[at["run_id"].isin(kept)], cell, arm, quant)
            if len(per):
                out.append(dict(cell, ctx=int(ctx), kind=kind(quant), arm=arm, quant=quant,
                                confirmed_ms=float(per.median()), confirmed_min_ms=float(per.min()),
                                confirmed_max_ms=float(per.max()), sessions=len(per)))
    return pd.DataFrame(out, columns=CONFIRMED_COLUMNS)


def confirmed_levers(rows: pd.DataFrame, commit_of: dict | None = None) -> pd.DataFrame:
    """Per (gpu, model, ctx, kind) of the confirmation sweeps' rows (`rows`: confirmation_rows), the fastest lever
    confirmed there: among the levers with at least CONFIRM_SESSIONS sessions of confirmation sweeps at the cell
    (lever_confirmations), the smallest median of their session medians (the first in (arm, quant) order on a tie),
    with its range and sessions (CONFIRMED_COLUMNS). Whatever the selection sweeps now pick at the cell, this is the
    fastest time a fresh sweep has held there."""
    every = lever_confirmations(rows, commit_of)
    held = every[every["sessions"] >= CONFIRM_SESSIONS]
    fastest = held.sort_values("confirmed_ms", kind="stable").groupby(["gpu", "model", "ctx", "kind"]).head(1)
    return fastest.sort_values(["gpu", "model", "ctx", "kind"], kind="stable").reset_index(drop=True)


def confirmed_fastest(rows: pd.DataFrame, cell: dict, of_kind: str,
                      commit_of: dict | None = None) -> tuple[str, str] | None:
    """(arm, quant) of the fastest lever of `of_kind` (bf16 or int4, `kind`) confirmed at `cell` (gpu, model, ctx;
    confirmed_levers), or None. What the choices made downstream of notebook 06 follow (notebook 07's lean lever, the
    peer step's levers): a lever the selection sweeps pick moves them only once its confirmation holds as many
    sessions."""
    return fastest_held(confirmed_levers(rows, commit_of), cell, of_kind)


def fastest_held(held: pd.DataFrame, cell: dict, of_kind: str) -> tuple[str, str] | None:
    """confirmed_fastest read from `held`, a confirmed_levers table already made (one table for several cells or
    kinds)."""
    at = held[(held["gpu"] == cell["gpu"]) & (held["model"] == cell["model"]) & (held["ctx"] == cell["ctx"])
              & (held["kind"] == of_kind)]
    return None if at.empty else (at.iloc[0]["arm"], at.iloc[0]["quant"])


def _session_medians(rows: pd.DataFrame, cell: dict, arm: str, quant: str) -> pd.Series:
    """{(run_id, session): that session's median step (ms)} of one arm at one cell."""
    sel = rows[(rows["gpu"] == cell["gpu"]) & (rows["model"] == cell["model"]) & (rows["ctx"] == cell["ctx"])
               & (rows["arm"] == arm) & (rows["quant"] == quant)]
    if sel.empty:
        return pd.Series(dtype=float)
    per = stats.session_medians(sel, ["gpu", "model", "ctx", "arm", "quant", "run_id"])
    return per.set_index(["run_id", "session"])["step_ms"].astype(float)


def newest_commit_runs(rows: pd.DataFrame, cell: dict, arm: str, quant: str, commit_of: dict | None) -> tuple:
    """(runs kept, runs superseded) of one cell's confirmation of `arm`: with `commit_of` ({run id: commit}) naming
    a commit for every one of its runs, the runs at the commit of the newest run that timed the lever there (run ids
    sort by their start time); else every run (a run whose commit is not known cannot be placed before or after a
    change, so nothing is superseded on its account)."""
    sel = rows[(rows["gpu"] == cell["gpu"]) & (rows["model"] == cell["model"]) & (rows["ctx"] == cell["ctx"])
               & (rows["arm"] == arm) & (rows["quant"] == quant)] if not rows.empty else rows
    runs = sorted(set(sel["run_id"])) if not sel.empty else []
    if not runs or commit_of is None or not all(commit_of.get(r) for r in runs):
        return runs, []
    newest = commit_of[runs[-1]]
    kept = [r for r in runs if commit_of[r] == newest]
    return kept, [r for r in runs if r not in kept]


def confirmation_table(choice: pd.DataFrame, rows: pd.DataFrame, commit_of: dict | None = None) -> pd.DataFrame:
    """Per chosen lever of `choice` (choices), its confirmation: `confirmed_ms` (the median over the confirmation
    sessions of each session's median step), `sessions`, `r_floor_bf16` (the cell's bf16 floor over it), the runner-up's
    `runner_up_ms` on the same sessions, the paired margin (`margin_median`, `margin_min`, `margin_max`: the runner-up
    over the winner per session, minus one), `order` (ORDER_HELD, ORDER_REVERSED or ORDER_MIXED by the paired margins'
    signs; None without them), `run_ids` (the runs of the chosen lever's sessions), `changed_since` (the
    commits of levers.CODE_CHANGES to the chosen lever's code made after its newest confirmation run began: its
    sessions time the code as it was), `superseded_runs` and `status`: CONFIRMED with CONFIRM_SESSIONS sessions or
    more, PARTLY with fewer, NOT_CONFIRMED with none of the chosen lever. Where no session pairs them (a runner-up
    of another quantisation is confirmed in a sweep of its own: experiments.closing_the_gap.confirmation_plans), the
    runner-up's own confirmation sessions (its newest commit's runs) give `runner_up_own_ms` (their median),
    `runner_up_own_sessions` and `runner_up_own_runs`: set beside the chosen lever's median, an unpaired margin
    (margin_text says so; added 2026-12-05 evening, descriptive: no target reads it).

    Which runs count, and its history: until 2026-12-04 every confirmation run of a cell counted (each session paired
    in its own run). Since then, with `commit_of` ({run id: commit}), a cell whose lever was confirmed at two commits
    or more counts the runs of the newest one only (newest_commit_runs, where every run's commit is known: the code
    that last confirmed it; a lever's
    code can change after its confirmation, as the int4 target cell's did when its launch configs came from a
    table), the older runs named in `superseded_runs` and kept as data. Written before any cell had confirmation runs
    at two commits: no number it reads changed then."""
    out = []
    for cell in choice.to_dict("records"):
        kept, superseded = newest_commit_runs(rows, cell, cell["arm"], cell["quant"], commit_of)
        cell_rows = rows[rows["run_id"].isin(kept)] if not rows.empty else rows
        mine = (_session_medians(cell_rows, cell, cell["arm"], cell["quant"]) if not cell_rows.empty
                else pd.Series(dtype=float))
        theirs = (_session_medians(cell_rows, cell, cell["runner_up_arm"], cell["runner_up_quant"])
                  if pd.notna(cell["runner_up_arm"]) and not cell_rows.empty else pd.Series(dtype=float))
        paired = (theirs.reindex(mine.index) / mine - 1).dropna()
        n = len(mine)
        confirmed_ms = float(mine.median()) if n else np.nan
        own = (_own_confirmation(rows, cell, commit_of) if n and not len(paired) and pd.notna(cell["runner_up_arm"])
               else pd.Series(dtype=float))
        order = (None if not len(paired) else ORDER_HELD if paired.min() > 0 else ORDER_REVERSED if paired.max() < 0
                 else ORDER_MIXED)
        out.append(dict(cell, confirmed_ms=confirmed_ms, confirmed_min_ms=float(mine.min()) if n else np.nan,
                        confirmed_max_ms=float(mine.max()) if n else np.nan, sessions=n,
                        r_floor_bf16=cell["t_floor_bf16_ms"] / confirmed_ms if n else np.nan,
                        runner_up_ms=float(theirs.reindex(mine.index).median()) if len(paired) else np.nan,
                        paired_sessions=len(paired),
                        margin_median=float(paired.median()) if len(paired) else np.nan,
                        margin_min=float(paired.min()) if len(paired) else np.nan,
                        margin_max=float(paired.max()) if len(paired) else np.nan, order=order,
                        run_ids=" ".join(sorted({run for run, _ in mine.index})),
                        changed_since=changed_since(max(run for run, _ in mine.index), cell["arm"], cell["quant"],
                                                    cell["model"]) if n else "",
                        superseded_runs=" ".join(superseded),
                        runner_up_own_ms=float(own.median()) if len(own) else np.nan,
                        runner_up_own_sessions=len(own),
                        runner_up_own_runs=" ".join(sorted({run for run, _ in own.index})),
                        status=(CONFIRMED if n >= CONFIRM_SESSIONS else PARTLY if n else NOT_CONFIRMED)))
    return pd.DataFrame(out, columns=CHOICE_COLUMNS + ["confirmed_ms", "confirmed_min_ms", "confirmed_max_ms",
                                                       "sessions", "r_floor_bf16", "runner_up_ms", "paired_sessions",
                                                       "margin_median", "margin_min", "margin_max", "order",
                                                       "run_ids", "changed_since", "superseded_runs",
                                                       "runner_up_own_ms", "runner_up_own_sessions",
                                                       "runner_up_own_runs", "status"])


def _own_confirmation(rows: pd.DataFrame, cell: dict, commit_of: dict | None) -> pd.Series:
    """The runner-up's confirmation session medians at `cell` in its newest commit's runs (newest_commit_runs)."""
    arm, quant = cell["runner_up_arm"], cell["runner_up_quant"]
    kept, _ = newest_commit_runs(rows, cell, arm, quant, commit_of)
    return _session_medians(rows[rows["run_id"].isin(kept)], cell, arm, quant) if kept else pd.Series(dtype=float)


def commits_of_runs(env: dict) -> dict:
    """{run id: its commit (hardware.provenance_of's short commit, `+dirty` where the tree was)} of `env`
    ({(gpu, run id): env.json entry}, hardware.load_env)."""
    out = {}
    for (_, run), entry in env.items():
        prov = hardware.provenance_of(entry)
        if prov["commit"]:  # an entry without its commit names none
            out[run] = prov["commit"] + ("+dirty" if prov["dirty"] else "")
    return out


def with_commits(table: pd.DataFrame, commit_of: dict) -> pd.DataFrame:
    """`table` (confirmation_table) with `commits`: the commits (commits_of_runs' `commit_of`) of each cell's
    confirmation runs, so a reader can tell the code that confirmed a lever from the code that runs it now; "" without
    runs (a run of no known commit adds none)."""
    def commits(run_ids) -> str:
        return " ".join(sorted({commit_of[run] for run in str(run_ids or "").split() if run in commit_of}))

    return table.assign(commits=[commits(r) for r in table["run_ids"]] if not table.empty else [])


def margin_text(row) -> str:
    """'N sessions, a-b ms; runner-up R +a % (b to c %)' of one confirmation_table row, or that it has no runner-up
    rows; where the runner-up was faster in every paired session, it says so."""
    commits = str(row.get("commits") or "").split()
    head = (f"{int(row['sessions'])} sessions, {stats.span([row['confirmed_min_ms'], row['confirmed_max_ms']])} ms over "
            f"them" + (f", measured at commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}" if commits else ""))
    if not row["paired_sessions"]:
        own = int(row.get("runner_up_own_sessions") or 0)
        if not own:
            return f"{head}; no runner-up timed in them"
        return (f"{head}; no runner-up timed in them; the runner-up, {row['runner_up']}, confirmed in a run of its "
                f"own: {row['runner_up_own_ms']:.2f} ms over {own} session{'s' if own > 1 else ''}, "
                f"{100 * (row['runner_up_own_ms'] / row['confirmed_ms'] - 1):+.1f} % on the medians, unpaired")
    return (f"{head}; the runner-up, {row['runner_up']}, {row['runner_up_ms']:.2f} ms: "
            f"margin {100 * row['margin_median']:+.1f} % ({100 * row['margin_min']:+.1f} to "
            f"{100 * row['margin_max']:+.1f} % over {int(row['paired_sessions'])} paired sessions"
            + ("; the runner-up was faster in every one: the selection's order did not hold"
               if row.get("order") == ORDER_REVERSED else "") + ")")


def order_findings(confirmation: pd.DataFrame) -> list[str]:
    """Per GPU and kind, how the selection's order stood in the confirmation: the cells whose chosen lever was faster
    than its runner-up in every paired session, and those where the runner-up was (named, with their margins): the
    best-of-many choice the confirmation exists to test. A cell with paired sessions but fewer than CONFIRM_SESSIONS
    (PARTLY) counts, and the line says how many such cells there are rather than calling them confirmed. A confirmed
    cell whose runner-up is another quantisation path, confirmed in a sweep of its own (no session pairs them), is
    counted apart (added 2026-12-07): on the medians, how many runners-up were slower and by how much, and those that
    were faster, named; unpaired, so not in the paired count. Descriptive: no target reads it."""
    out = []
    paired = confirmation[confirmation["paired_sessions"].fillna(0) > 0]
    unpaired = confirmation[(confirmation["paired_sessions"].fillna(0) == 0)
                            & (confirmation["runner_up_own_sessions"].fillna(0) > 0)
                            & (confirmation["status"] == CONFIRMED)]
    for gpu, k in sorted(set(zip(paired["gpu"], paired["kind"])) | set(zip(unpaired["gpu"], unpaired["kind"]))):
        g = paired[(paired["gpu"] == gpu) & (paired["kind"] == k)]
        u = unpaired[(unpaired["gpu"] == gpu) & (unpaired["kind"] == k)]
        held = g[g["order"] == ORDER_HELD]
        rev = g[g["order"] == ORDER_REVERSED]
        partly = int((g["status"] != CONFIRMED).sum())
        cells = f"{len(g)} confirmed cells" if not partly else (
            f"{len(g)} cells with paired sessions ({len(g) - partly} confirmed, {partly} {PARTLY} with fewer than "
            f"{CONFIRM_SESSIONS} sessions)")
        text = (f"Selection order on the {gpu}, {k}: in {len(held)} of {cells} the chosen lever was "
                f"faster than its runner-up in every paired session" if len(g) else
                f"Selection order on the {gpu}, {k}: no cell has paired sessions")
        if len(rev):
            text += ("; in " + str(len(rev)) + " the runner-up was faster in every one ("
                     + "; ".join(f"{r.model} ctx {r.ctx}: {r.runner_up} by {-100 * r.margin_median:.1f} %"
                                 for r in rev.itertuples()) + ")")
        mixed = len(g) - len(held) - len(rev)
        if mixed:
            text += f"; in {mixed} the sessions disagree"
        margin = u["runner_up_own_ms"] / u["confirmed_ms"] - 1  # the unpaired runner-up over the chosen lever
        slower, faster = margin[margin > 0], u[margin < 0]
        if len(u):
            text += (f"; in {len(u)} more confirmed cell{'s' if len(u) > 1 else ''} the runner-up is another "
                     "quantisation path, confirmed in a sweep of its own (unpaired): slower on the medians in "
                     f"{len(slower)}" + (f" (by {_pct(slower.min())} to {_pct(slower.max())})" if len(slower) > 1 else
                                         f" (by {_pct(slower.iloc[0])})" if len(slower) else ""))
            if len(faster):
                text += (", faster in " + str(len(faster)) + " ("
                         + "; ".join(f"{r.model} ctx {r.ctx}: {r.runner_up} by {-100 * margin[r.Index]:.1f} %"
                                     for r in faster.itertuples()) + ")")
        settled = len(held) == len(g) and not len(faster)
        out.append(Finding(text + ("." if settled else
                                   ". Where the runner-up was faster in every session (or, unpaired, on the "
                                   "medians) or the sessions disagree, the selection's best-of-many pick is not "
                                   "confirmed as the faster of the two; the targets still read the chosen lever's "
                                   "confirmed time there."),
                           gpu=gpu, kind=k, cells=len(g), partly=partly, held=len(held), reversed=len(rev),
                           mixed=mixed, unpaired=len(u), unpaired_faster=len(faster)))
    return out


def shift_findings(confirmation: pd.DataFrame) -> list[str]:
    """Per GPU and kind, how far each confirmed cell's chosen lever moved from its selection median to its confirmed
    time (confirmed_ms / selected_ms - 1, CONFIRMED cells only): the span, the median, how many ran slower or faster
    when measured again (the same to 0.1 % counted apart) and the largest move, named. A best of many is biased low
    (module docstring): a confirmed time above the selection median is that bias, and one far from it in either
    direction says the lever's time moves between processes more than between the sessions of one. Descriptive: no
    target reads it; the targets read the confirmed times."""
    out = []
    done = confirmation[(confirmation["status"] == CONFIRMED) & confirmation["selected_ms"].notna()
                        & confirmation["confirmed_ms"].notna()]
    for (gpu, k), g in done.groupby(["gpu", "kind"]):
        shift = g["confirmed_ms"] / g["selected_ms"] - 1
        tenths = shift.round(3)  # the same to 0.1 %: neither slower nor faster
        slower, faster = int((tenths > 0).sum()), int((tenths < 0).sum())
        far = g.loc[shift.abs().idxmax()]
        cells = f"{len(g)} confirmed cell{'s' if len(g) != 1 else ''}"
        moved = (f"{_pct(shift.min())} to {_pct(shift.max())} (median {_pct(shift.median())})" if len(g) > 1
                 else _pct(shift.iloc[0]))
        text = (f"Selection to confirmation on the {gpu}, {k}: over {cells} the chosen lever's confirmed time is its "
                f"selection median {moved}; slower when measured again in {slower}, faster in {faster}, the same to "
                f"0.1 % in {len(g) - slower - faster}")
        if len(g) > 1 and shift.abs().max() > 0:
            text += (f"; the largest move {far['model']} ctx {int(far['ctx'])}, {far['selected_ms']:.3f} to "
                     f"{far['confirmed_ms']:.3f} ms")
        elif len(g) == 1:
            text += f" ({far['model']} ctx {int(far['ctx'])}, {far['selected_ms']:.3f} to {far['confirmed_ms']:.3f} ms)"
        out.append(Finding(text + ".", gpu=gpu, kind=k, cells=len(g), slower=slower, faster=faster,
                           shift_min=float(shift.min()), shift_max=float(shift.max()),
                           shift_median=float(shift.median())))
    return out


def _pct(fraction: float) -> str:
    """A signed percentage to 0.1 %, never '-0.0 %'."""
    text = f"{100 * fraction:+.1f} %"
    return "+0.0 %" if text == "-0.0 %" else text

