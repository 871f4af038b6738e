"""Notebook 06's winners confirmed, not selected. The ladder picks each cell's fastest lever as the smallest of many
levers' medians (the selection sweeps): a best-of-many is biased low (the winner's curse). A confirmation sweep,
measured after the choice (experiments.closing_the_gap.confirm: sessions numbered from levers.CONFIRM_FIRST_SESSION,
apart from every selection sweep; levers.CONFIRM_SESSIONS fresh sessions, the arm order alternated between them,
every arm checked in every session), times the chosen lever beside the runner-up again. The targets and the grid
count read these rows alone: a cell whose chosen lever has no confirmation rows is `not confirmed`, whatever its
selection median says.

The margin over the runner-up is paired by session: per confirmation session, the runner-up's session median over the
winner's, minus one (positive: the chosen lever is faster); its median and its range over the sessions."""

from __future__ import annotations

import numpy as np
import pandas as pd

from decodegap import stats
from decodegap.levers import CONFIRM_FIRST_SESSION, CONFIRM_SESSIONS

KIND_BF16, KIND_INT4 = "bf16", "int4"
CHOICE_COLUMNS = ["gpu", "model", "ctx", "kind", "lever", "arm", "quant", "selected_ms", "runner_up", "runner_up_arm",
                  "runner_up_quant", "runner_up_selected_ms", "t_floor_bf16_ms"]
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


def _session_medians(rows: pd.DataFrame, cell: dict, arm: str, quant: str) -> pd.Series:
    """{session: that session's median step (ms)} of one arm at one cell."""
    sel = rows[(rows["gpu"] == cell["gpu"]) & (rows["model"] == cell["model"]) & (rows["ctx"] == cell["ctx"])
               & (rows["arm"] == arm) & (rows["quant"] == quant)]
    if sel.empty:
        return pd.Series(dtype=float)
    per = stats.session_medians(sel, ["gpu", "model", "ctx", "arm", "quant"])
    return per.set_index("session")["step_ms"].astype(float)


def confirmation_table(choice: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Per chosen lever of `choice` (choices), its confirmation: `confirmed_ms` (the median over the confirmation
    sessions of each session's median step), `sessions`, `r_floor_bf16` (the cell's bf16 floor over it), the runner-up's
    `runner_up_ms` on the same sessions, the paired margin (`margin_median`, `margin_min`, `margin_max`: the runner-up
    over the winner per session, minus one) and `status`: CONFIRMED with CONFIRM_SESSIONS sessions or more, PARTLY
    with fewer, NOT_CONFIRMED with none of the chosen lever."""
    out = []
    for cell in choice.to_dict("records"):
        mine = _session_medians(rows, cell, cell["arm"], cell["quant"]) if not rows.empty else pd.Series(dtype=float)
        theirs = (_session_medians(rows, cell, cell["runner_up_arm"], cell["runner_up_quant"])
                  if pd.notna(cell["runner_up_arm"]) and not rows.empty else pd.Series(dtype=float))
        paired = (theirs.reindex(mine.index) / mine - 1).dropna()
        n = len(mine)
        confirmed_ms = float(mine.median()) if n else np.nan
        out.append(dict(cell, confirmed_ms=confirmed_ms, sessions=n,
                        r_floor_bf16=cell["t_floor_bf16_ms"] / confirmed_ms if n else np.nan,
                        runner_up_ms=float(theirs.reindex(mine.index).median()) if len(paired) else np.nan,
                        paired_sessions=len(paired),
                        margin_median=float(paired.median()) if len(paired) else np.nan,
                        margin_min=float(paired.min()) if len(paired) else np.nan,
                        margin_max=float(paired.max()) if len(paired) else np.nan,
                        status=(CONFIRMED if n >= CONFIRM_SESSIONS else PARTLY if n else NOT_CONFIRMED)))
    return pd.DataFrame(out, columns=CHOICE_COLUMNS + ["confirmed_ms", "sessions", "r_floor_bf16", "runner_up_ms",
                                                       "paired_sessions", "margin_median", "margin_min",
                                                       "margin_max", "status"])


def margin_text(row) -> str:
    """'N sessions; runner-up R +a % (b to c %)' of one confirmation_table row, or that it has no runner-up rows."""
    if not row["paired_sessions"]:
        return f"{int(row['sessions'])} sessions; no runner-up timed in them"
    return (f"{int(row['sessions'])} sessions; the runner-up, {row['runner_up']}, {row['runner_up_ms']:.2f} ms: "
            f"margin {100 * row['margin_median']:+.1f} % ({100 * row['margin_min']:+.1f} to "
            f"{100 * row['margin_max']:+.1f} % over {int(row['paired_sessions'])} paired sessions)")
