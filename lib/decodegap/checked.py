"""No number counts without a passing check of its own run: the join of timed rows to the correctness checks of
the run and cell that timed them (verify.csv), for every reader that selects timed rows.

A timed row (status `ok` or `warmup`) of a cell (gpu, model, ctx, arm, attn, quant) is *checked* when its run
holds, for that cell:
- a passing `vs_eager` check (the arm's logits against eager HF's: harness.verification.check_cell), unless the cell is the
  reference itself, arm `eager` with SDPA's default attention (REFERENCE_ARM, REFERENCE_ATTN);
- and, for a quantised cell (quant other than bf16), the checks of the current rule in its own run
  (`quantised_checks`, the one definition every reader uses): its format check of every layer and its layer checks
  at one row and at the cell's prefill rows (rows = ctx) all passing, and its whole-model check (`vs_bf16`, the
  quantised model against the bf16 model it came from) passing with k = error / null within MODEL_K_PASS, the null
  a `vs_bf16_null` row of the same run (quant.power). A cell checked only under an earlier rule (no in-run layer
  checks, no null: a fixed multiple of a rounding bound) is unchecked under the current rule, labelled so with the
  date it was measured, never counted.
A check passes when its status is `ok` and its error is a number within its tolerance (a NaN error, recorded `ok`
before checks.verify_arm failed NaN logits, is no pass). A check of another run never counts: the key holds the
run id. Rows that timed nothing (status `error`, `unavailable`, ...) are no number and are left as they are
(`checked` True, note `not timed`).

`join_checks` marks every row (`checked`, `check_note`; for a quantised row `quant_check`, its outcome, and `model_k`, its
k), drops the unchecked timed rows, or raises naming them;
`labelled` turns each unchecked (run, session, cell) into one status row UNCHECKED whose reason says what was
timed and why it is not counted, so that the tables draw the cell as unchecked and no statistic reads its
timings (roofline.one_sweep then prefers a checked sweep of the cell, which times it, over an unchecked one,
which only left status rows); `unchecked` lists the unchecked (run, cell) with their sessions and median step.
`load` reads an experiment's rows with the checks of both verify files (verify.csv, and
verify_synthesised_weights.csv for the superseded rows) joined.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pandas as pd

from decodegap import records, sessions
from decodegap.compare import MODEL_K_FAIL, MODEL_K_PASS
from decodegap.accounting import HEAD_QUANTISED

CELL = ["gpu", "model", "ctx", "arm", "attn", "quant"]
MODEL_CELL = ["gpu", "model", "ctx", "quant"]


def cell_of(*frames) -> list[str]:
    """CELL, with `batch` where every frame has it (decode and verify rows read since the batch axis: a check of
    batch 1 never stands for the batch-64 rows of its run)."""
    return CELL + ["batch"] if all(f is not None and "batch" in f.columns for f in frames) else CELL
REFERENCE_ARM, REFERENCE_ATTN, REFERENCE_QUANT = "eager", "sdpa", "bf16"
MODES = ("mark", "drop", "raise")
UNCHECKED = "unchecked"
"""The status `labelled` gives an unchecked cell's rows: not a timing (records.STATUSES' failures are read the
same way by every table), with the reason."""
TIMED = ("ok", "warmup")


QUANT_KEY = ["run_id", "gpu", "model", "ctx", "quant"]
CHECKED_QUANT, FAILED_QUANT, INCONCLUSIVE_QUANT, INCOMPLETE_QUANT, EARLIER_RULE = (
    "checked", "failed", "inconclusive", "incomplete", "earlier rule")
QUANT_OUTCOMES = (CHECKED_QUANT, FAILED_QUANT, INCONCLUSIVE_QUANT, INCOMPLETE_QUANT, EARLIER_RULE)
"""The outcomes of `quantised_checks`: every check of the current rule present in the run and passing; one of them
failing (a NaN included); the model check between MODEL_K_PASS and MODEL_K_FAIL x the null; the run has in-run
checks but lacks one of them; the run has none (measured before in-run layer checks: an earlier rule)."""
UNDER_EARLIER_RULE = "unchecked under the current rule"
"""How a quantised cell measured before in-run layer checks is labelled (its note begins with it)."""
HEAD_CHECKS = ("vs_bf16_head", "vs_bf16_head_null")
"""The head check and its null, which a path that quantises the LM head (accounting.HEAD_QUANTISED) needs as well."""
IN_RUN_CHECKS = ("format", "layer", "vs_bf16_null")
"""Checks a quantised sweep's session writes only since in-run layer checks (harness.session._quantise_checked): a run
with none of them was checked under an earlier rule."""


def measured_at(run_id: str) -> str:
    """A run's UTC start from its id (YYYYMMDDTHHMMSS-xxxxxx) as 'YYYY-MM-DD HH:MM UTC'; an id of another form as
    'in run <id>'."""
    started = records.run_started(run_id)
    return started.strftime("%Y-%m-%d %H:%M UTC") if started is not None else f"in run {run_id}"


def _worst_failure(rows: pd.DataFrame, what: str) -> str:
    bad = rows[~passing(rows)]
    err = pd.to_numeric(bad["max_rel_err"], errors="coerce")
    if err.isna().any():
        r = bad[err.isna()].iloc[0]
        return f"{what} failed: NaN ({r['layer']})"
    r = bad.loc[err.idxmax()]
    return f"{what} failed: {float(r['max_rel_err']):.3g} > {float(r['tol']):g} ({r['layer']})"


def _quantised_one(run_id, ctx: int, g: pd.DataFrame, k_pass: float, k_fail: float, quant: str = "") -> dict:
    """quantised_checks for one (run, gpu, model, ctx, quant) from `g`, the verify rows of its run, model and path
    `quant` (a path that quantises the LM head needs its head check too, judged as the model check is)."""
    rows = pd.to_numeric(g["rows"], errors="coerce")
    at_ctx = pd.to_numeric(g["ctx"], errors="coerce") == ctx
    fmt = g[g["check"] == "format"]
    one, prefill = g[(g["check"] == "layer") & (rows == 1)], g[(g["check"] == "layer") & (rows == ctx)]
    model = g[(g["check"] == "vs_bf16") & at_ctx & (g["layer"].fillna("model").astype(str) == "model")]
    null, err, k, failed, missing = _judged(g[(g["check"] == "vs_bf16_null") & at_ctx], model, k_fail, MODEL_NAMES)
    out = dict(format_ok=bool(len(fmt)) and bool(passing(fmt).all()),
               layer_one_row_ok=bool(len(one)) and bool(passing(one).all()),
               layer_prefill_ok=bool(len(prefill)) and bool(passing(prefill).all()), null=null, model_err=err, k=k)
    if not g["check"].isin(IN_RUN_CHECKS).any():
        earlier = (f" (its vs_bf16 {err:.4f} was judged by the tolerance of its day, "
                   f"{float(pd.to_numeric(model['tol'], errors='coerce').max()):.3g})" if len(model) and err == err
                   else "" if len(model) else " (no vs_bf16 model check in its run)")
        return dict(out, outcome=EARLIER_RULE, note=f"{UNDER_EARLIER_RULE}: measured {measured_at(run_id)}, before "
                                                     f"in-run layer checks{earlier}")
    layers_failed, layers_missing = [], []
    for frame, what in ((fmt, "format check"), (one, "layer check at 1 row"), (prefill, f"layer check at {ctx} rows")):
        if frame.empty:
            layers_missing.append(what)
        elif not passing(frame).all():
            layers_failed.append(_worst_failure(frame, what))
    failed, missing, ks, head_note = layers_failed + failed, layers_missing + missing, {"model": k}, ""
    if quant in HEAD_QUANTISED:
        head_null, head_err, ks["head"], head_failed, head_missing = _judged(
            g[(g["check"] == "vs_bf16_head_null") & at_ctx], g[(g["check"] == "vs_bf16_head") & at_ctx], k_fail,
            HEAD_NAMES)
        failed, missing = failed + head_failed, missing + head_missing
        head_note = f", head check {head_err:.4f} = k {ks['head']:.2f} x its null {head_null:.4f}"
    if failed:
        return dict(out, outcome=FAILED_QUANT, note="failed a check of its own run: " + "; ".join(failed))
    past = [(name, value) for name, value in ks.items() if value == value and value > k_pass]
    if past:
        return dict(out, outcome=INCONCLUSIVE_QUANT,
                    note=f"{past[0][0]} check inconclusive in its own run: k {past[0][1]:.2f} between {k_pass:g} "
                         f"and {k_fail:g}")
    if missing:
        return dict(out, outcome=INCOMPLETE_QUANT, note="incomplete checks in its own run: no " + ", no ".join(missing))
    return dict(out, outcome=CHECKED_QUANT,
                note=f"checked in its own run: format and layer checks at 1 and {ctx} rows ok, model check {err:.4f} "
                     f"= k {k:.2f} x the null {null:.4f}{head_note}")


MODEL_NAMES = ("vs_bf16_null row (the null)", "the null", "vs_bf16 model check", "model check")
HEAD_NAMES = ("vs_bf16_head_null row (the head's null)", "the head's null", "vs_bf16_head check", "head check")
"""How `_judged` names the rows of the model check and of the head check: (missing null, null, missing check, check)."""


def _judged(null_rows: pd.DataFrame, check_rows: pd.DataFrame, k_fail: float, names: tuple) -> tuple:
    """(null, error, k, failed, missing) of a check judged against its null (the largest draw): k = error / null, a
    NaN or a k at or past `k_fail` failing (judged by k alone: the row's status applied the same tolerance, k_pass x
    the null), a row that is not there missing; `names` (MODEL_NAMES, HEAD_NAMES) say which."""
    null_values = pd.to_numeric(null_rows["max_rel_err"], errors="coerce")
    errs = pd.to_numeric(check_rows["max_rel_err"], errors="coerce")
    null = float(null_values.max()) if len(null_values) and null_values.notna().all() else np.nan
    err = float(errs.max()) if len(errs) and errs.notna().all() else np.nan
    k = err / null if null > 0 else np.nan
    failed, missing = [], []
    if null_values.empty:
        missing.append(names[0])
    elif not null > 0:
        failed.append(f"{names[1]} is not a positive number")
    if errs.empty:
        missing.append(names[2])
    elif not err == err:
        failed.append(f"{names[3]} failed: NaN")
    elif null > 0 and k >= k_fail:
        failed.append(f"{names[3]} failed: {err:.4g} = k {k:.2f} x the null (k_fail {k_fail:g})")
    return null, err, k, failed, missing


def quantised_checks(keys: pd.DataFrame, verify: pd.DataFrame | None) -> pd.DataFrame:
    """What counts as a checked quantised cell, the one definition every reader uses (join_checks applies it): per
    (run_id, gpu, model, ctx, quant) of `keys`, its own run's checks of the current rule from `verify` (verify.csv
    rows): the format check of every layer (`format`), the layer checks at one row and at the cell's prefill rows
    (`layer`, rows 1 and ctx), the null (`vs_bf16_null` at ctx) and the model check (`vs_bf16` at ctx), k = its
    error / the null (quant.power), and for a path that quantises the LM head the head check and its null
    (HEAD_CHECKS at ctx, its k likewise), judged by k alone against MODEL_K_PASS and MODEL_K_FAIL (the row's
    own status applied tol = MODEL_K_PASS x the null of its day). Columns QUANT_KEY,
    format_ok, layer_one_row_ok, layer_prefill_ok, null, model_err, k, `outcome` (QUANT_OUTCOMES: only
    CHECKED_QUANT counts) and `note` (what decided it; an earlier rule's cell: UNDER_EARLIER_RULE with the date
    its run began). A check of another run never counts."""
    cols = QUANT_KEY + ["format_ok", "layer_one_row_ok", "layer_prefill_ok", "null", "model_err", "k", "outcome",
                        "note"]
    if keys.empty:
        return pd.DataFrame(columns=cols)
    want = keys[QUANT_KEY].astype({"ctx": int}).drop_duplicates()
    empty = pd.DataFrame(columns=["run_id", "gpu", "model", "ctx", "quant", "check", "layer", "rows", "max_rel_err",
                                  "tol", "status"])
    v = verify if verify is not None and not verify.empty and "check" in verify else empty
    v = v[v["run_id"].isin(set(want["run_id"])) & v["check"].isin(IN_RUN_CHECKS + ("vs_bf16",) + HEAD_CHECKS)]
    groups = {k: g for k, g in v.groupby(["run_id", "gpu", "model", "quant"])} if not v.empty else {}
    out = []
    for r in want.itertuples(index=False):
        g = groups.get((r.run_id, r.gpu, r.model, r.quant), empty)
        out.append(dict(r._asdict(), **_quantised_one(r.run_id, int(r.ctx), g, float(MODEL_K_PASS),
                                                      float(MODEL_K_FAIL), r.quant)))
    return pd.DataFrame(out, columns=cols)


class UncheckedError(ValueError):
    """join_checks(mode="raise") met timed rows without a passing check of their own run."""


def needs_arm_check(arm, attn) -> bool:
    """Whether a cell is checked against eager: every arm but eager with SDPA's default (the reference)."""
    return not (arm == REFERENCE_ARM and attn == REFERENCE_ATTN)


def passing(verify: pd.DataFrame) -> pd.Series:
    """Per check row: it passed (status ok, and a finite error within its own tol; a NaN error is no pass)."""
    err = pd.to_numeric(verify["max_rel_err"], errors="coerce")
    tol = pd.to_numeric(verify["tol"], errors="coerce")
    return (verify["status"] == "ok") & err.notna() & (err <= tol)


def _verdicts(verify: pd.DataFrame, check: str, keys: list[str]) -> pd.DataFrame:
    """Per run and key: whether any `check` row passed, and a note (the passing error, else the last failure)."""
    cols = ["run_id"] + keys
    if verify is None or verify.empty or "check" not in verify:
        return pd.DataFrame(columns=cols + [f"{check}_passed", f"{check}_note"])
    v = verify[verify["check"] == check].copy()
    if v.empty:
        return pd.DataFrame(columns=cols + [f"{check}_passed", f"{check}_note"])
    v["ctx"] = v["ctx"].astype(int)
    v["_pass"] = passing(v)
    err = pd.to_numeric(v["max_rel_err"], errors="coerce")
    v["_note"] = [f"{check} ok {e:.4f}" if p else
                  (f"{check} failed: NaN" if pd.isna(e) else f"{check} failed: {e:.3g} > {t:g}")
                  for p, e, t in zip(v["_pass"], err, v["tol"])]
    v = v.sort_values("_pass", kind="stable")  # a pass, where there is one, is the note kept
    out = v.groupby(cols, sort=False).agg(**{f"{check}_passed": ("_pass", "any"), f"{check}_note": ("_note", "last")})
    return out.reset_index()


def join_checks(timed: pd.DataFrame, verify: pd.DataFrame | None, mode: str = "mark") -> pd.DataFrame:
    """`timed` (decode-schema rows, any files) with the checks of each row's own run and cell (module docstring):
    columns `checked` (bool) and `check_note` (what decided it) added. mode "mark" keeps every row; "drop" removes
    the timed rows that are not checked (status rows stay); "raise" raises UncheckedError naming the unchecked
    (run, cell), else returns the marked rows."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}; one of {MODES}")
    if timed.empty:
        return timed.assign(checked=pd.Series(dtype=bool), check_note=pd.Series(dtype=object),
                            quant_check=pd.Series(dtype=object), model_k=pd.Series(dtype=float))
    out = timed.copy()
    index = out.index
    cell = cell_of(out, verify) if verify is not None and not verify.empty else CELL
    keys = out[["run_id"] + cell].copy()
    keys["ctx"] = keys["ctx"].astype(int)
    arm = keys.merge(_verdicts(verify, "vs_eager", cell), on=["run_id"] + cell, how="left")
    needs_arm = np.array([needs_arm_check(a, t) for a, t in zip(keys["arm"], keys["attn"])], dtype=bool)
    needs_model = (keys["quant"] != REFERENCE_QUANT).to_numpy()
    model = keys[QUANT_KEY].merge(quantised_checks(keys[needs_model], verify), on=QUANT_KEY, how="left")
    arm_ok = arm["vs_eager_passed"].fillna(False).astype(bool).to_numpy()
    model_ok = (model["outcome"] == CHECKED_QUANT).to_numpy()
    timed_row = out["status"].isin(TIMED).to_numpy()
    checked = ~timed_row | ((~needs_arm | arm_ok) & (~needs_model | model_ok))
    notes = []
    for t, na, nm, an, mn in zip(timed_row, needs_arm, needs_model, arm["vs_eager_note"], model["note"]):
        if not t:
            notes.append("not timed")
            continue
        parts = [mn] if nm else []  # a quantised cell's own checks first: an earlier rule's label leads its note
        if na:
            parts.append(an if isinstance(an, str) else "no vs_eager check in its run")
        notes.append("; ".join(parts) or "reference")
    out["checked"] = pd.Series(checked, index=index)
    out["check_note"] = pd.Series(notes, index=index, dtype=object)
    out["quant_check"] = pd.Series(np.where(needs_model, model["outcome"].fillna("").to_numpy(), ""), index=index,
                                   dtype=object)
    out["model_k"] = pd.Series(np.where(needs_model, pd.to_numeric(model["k"], errors="coerce"), np.nan), index=index)
    if mode == "drop":
        return out[out["checked"]]
    if mode == "raise" and not out["checked"].all():
        bad = unchecked(out)
        raise UncheckedError(f"{len(bad)} timed (run, cell) without a passing check of their own run: " + "; ".join(
            f"{r.run_id} {r.model} ctx {r.ctx} {r.arm} {r.attn} {r.quant} ({r.check_note})"
            for r in bad.head(10).itertuples()) + ("; ..." if len(bad) > 10 else ""))
    return out


def unchecked(marked: pd.DataFrame) -> pd.DataFrame:
    """The unchecked (run, cell) of join_checks' rows: their sessions, timed steps, median step (ms) and the note."""
    cols = ["run_id"] + CELL + ["sessions", "steps", "median_step_ms", "check_note"]
    if marked.empty or "checked" not in marked:
        return pd.DataFrame(columns=cols)
    bad = marked[~marked["checked"].astype(bool) & (marked["status"] == "ok")]
    if bad.empty:
        return pd.DataFrame(columns=cols)
    out = bad.groupby(["run_id"] + CELL, dropna=False).agg(
        sessions=("session", "nunique"), steps=("step_ms", "size"), median_step_ms=("step_ms", "median"),
        check_note=("check_note", "first")).reset_index()
    return out[cols]


def reason(run_id: str, ms: float, sessions: int, note: str) -> str:
    """The reason of an UNCHECKED status row: a quantised cell of an earlier rule leads with its label
    (UNDER_EARLIER_RULE: measured <date>, before in-run layer checks)."""
    timed = f"run {run_id}, {sessions} session(s), median step {ms:.3f} ms"
    if str(note).startswith(UNDER_EARLIER_RULE):
        return f"{note}; timed, not counted: {timed}"
    return f"timed without a passing check of its own run, not counted: {timed} ({note})"


def labelled(marked: pd.DataFrame) -> pd.DataFrame:
    """join_checks' rows with every unchecked (run, session, cell) replaced by one status row UNCHECKED (no step,
    no time; the reason says what was timed: `reason`): the cell is drawn as unchecked, never counted."""
    if marked.empty or "checked" not in marked or marked["checked"].all():
        return marked
    bad = ~marked["checked"].astype(bool)
    rows = marked[bad]
    keys = ["run_id", "session"] + CELL
    summary = unchecked(marked).set_index(["run_id"] + CELL)
    status = rows.drop_duplicates(keys).copy()
    for col in ("step", "step_ms", "max_cache_len"):
        if col in status:
            status[col] = np.nan
    texts = []
    for r in status.itertuples():
        key = (r.run_id, r.gpu, r.model, r.ctx, r.arm, r.attn, r.quant)
        s = summary.loc[key] if key in summary.index else None
        texts.append(reason(r.run_id, float(s["median_step_ms"]) if s is not None else float("nan"),
                            int(s["sessions"]) if s is not None else 0, r.check_note))
    status["status"], status["reason"] = UNCHECKED, texts
    return pd.concat([marked[~bad], status], ignore_index=True)


def verify_rows(data, superseded: bool = True) -> pd.DataFrame:
    """verify.csv of every GPU, and with `superseded` verify_synthesised_weights.csv (the checks of the runs whose
    rows moved to the superseded files: their run ids are their own, so the two never mix)."""
    frames = [records.load_experiment("verify", Path(data))]
    if superseded:
        frames.append(records.load_experiment("verify" + records.SYNTHESISED, Path(data)))
    kept = [f for f in frames if not f.empty]
    return pd.concat(kept, ignore_index=True) if kept else frames[0]


SIZE_AXIS_ONLY = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-14b", "qwen2.5-32b")
"""The models of notebook 07's size axis that the grid of notebooks 01-06 does not measure (their profiled steps
carry no session to tell them apart)."""


CELL_ONLY_MODELS = ("llama-3.2-1b",)
"""Models measured in one cell of their own, outside the grid: notebook 06's megakernel cell (levers.MEGAKERNEL_CELL)."""


def grid_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of notebooks 01-06's grid: batch 1 (rows without the column are batch 1), sessions of the
    grid's band (sessions.GRID), so that notebook 07's sweeps of the same cells never stand in for the grid's, and none of
    the size axis's or a single cell's own models (SIZE_AXIS_ONLY, CELL_ONLY_MODELS)."""
    if rows.empty:
        return rows
    keep = (~rows["model"].isin(SIZE_AXIS_ONLY + CELL_ONLY_MODELS) if "model" in rows
            else pd.Series(True, index=rows.index))
    if "batch" in rows:
        keep &= pd.to_numeric(rows["batch"], errors="coerce").fillna(1).astype(int) == 1
    if "session" in rows:
        keep &= sessions.in_band(pd.to_numeric(rows["session"], errors="coerce").fillna(0), sessions.GRID)
    return rows[keep]


def load(experiment: str, data, mode: str = "mark", superseded: bool = False, grid: bool = True) -> pd.DataFrame:
    """An experiment's rows (records.load_experiment, or selection.with_superseded with `superseded`) joined with the
    checks of their own runs (join_checks in `mode`, both verify files); with `grid` (notebooks 01-06) only the
    grid's rows (grid_rows), else every row (notebook 07). Inside `loaded_once`, each set of arguments is read and
    joined once and every call gets a copy."""
    from decodegap import selection

    key = (experiment, str(Path(data).resolve()), mode, superseded, grid)
    if _ONCE is not None and key in _ONCE:
        return _ONCE[key].copy()
    rows = (selection.with_superseded(experiment, Path(data)) if superseded
            else records.load_experiment(experiment, Path(data)))
    out = join_checks(grid_rows(rows) if grid else rows, verify_rows(data), mode)
    if _ONCE is not None:
        _ONCE[key] = out.copy()
    return out


_ONCE: dict | None = None
"""load's rows per arguments while a `loaded_once` block runs; None outside one."""


@contextlib.contextmanager
def loaded_once():
    """A block within which `load` reads and joins each experiment's rows once per set of arguments and hands every
    call its own copy: for a caller that reads the same rows through several notebooks' loaders (the claims'
    evidence, claims.evidence.collect, reads decode.csv through five). The files must not change inside the block;
    the rows are forgotten when it ends."""
    global _ONCE
    outer = _ONCE
    _ONCE = {} if outer is None else outer
    try:
        yield
    finally:
        _ONCE = outer


def own_checks(rows: pd.DataFrame, verify: pd.DataFrame) -> pd.DataFrame:
    """The model checks of `verify` that belong to the (run, cell) of `rows`: `vs_eager` (and any arm check) rows
    whose run and cell are among them, `vs_bf16` / `vs_bf16_logits` rows whose run and (gpu, model, ctx, quant)
    are; layer checks (arm `-`) are left out. A label read from them is the check of the run that timed the cell."""
    if verify is None or verify.empty or rows.empty:
        return verify
    v = verify[verify["layer"].astype(str) == "model"] if "layer" in verify else verify
    cell = cell_of(rows, v)
    mine = rows[["run_id"] + cell].drop_duplicates().astype({"ctx": int})
    vv = v.astype({"ctx": int})
    model = vv["check"].astype(str).str.startswith("vs_bf16") if "check" in vv else pd.Series(False, index=vv.index)
    by_cell = vv[~model].merge(mine, on=["run_id"] + cell, how="inner")
    by_model = vv[model].merge(mine[["run_id"] + MODEL_CELL].drop_duplicates(), on=["run_id"] + MODEL_CELL,
                               how="inner")
    return pd.concat([by_cell, by_model], ignore_index=True)


def column(status: pd.Series) -> pd.Series:
    """A table's `checked` column from its cells' status: True where the cell is timed (`ok`: every counted row has
    a passing check of its own run), False where it is UNCHECKED (timed only without one: not counted), empty
    where nothing was timed (error, unavailable, not measured)."""
    out = pd.Series(pd.NA, index=status.index, dtype="boolean")
    out[status == "ok"] = True
    out[status == UNCHECKED] = False
    return out
