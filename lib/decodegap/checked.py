"""No number counts without a passing check of its own run: the join of timed rows to the correctness checks of
the run and cell that timed them (verify.csv), for every reader that selects timed rows.

A timed row (status `ok` or `warmup`) of a cell (gpu, model, ctx, arm, attn, quant) is *checked* when its run
holds, for that cell:
- a passing `vs_eager` check (the arm's logits against eager HF's: harness.sweep._check), unless the cell is the
  reference itself, arm `eager` with SDPA's default attention (REFERENCE_ARM, REFERENCE_ATTN);
- and, for a quantised cell (quant other than bf16), a passing `vs_bf16` model check of its run at the same
  (gpu, model, ctx, quant) (the quantised model against the bf16 model it came from: harness.sweep._quantise_checked,
  recorded with arm eager).
A check passes when its status is `ok` and its error is a number within its tolerance (a NaN error, recorded `ok`
before decode.verify_arm failed NaN logits, is no pass). A check of another run never counts: the key holds the
run id. Rows that timed nothing (status `error`, `unavailable`, ...) are no number and are left as they are
(`checked` True, note `not timed`).

`join_checks` marks every row (`checked`, `check_note`), drops the unchecked timed rows, or raises naming them;
`labelled` turns each unchecked (run, session, cell) into one status row UNCHECKED whose reason says what was
timed and why it is not counted, so that the tables draw the cell as unchecked and no statistic reads its
timings (roofline.one_sweep then prefers a checked sweep of the cell, which times it, over an unchecked one,
which only left status rows); `unchecked` lists the unchecked (run, cell) with their sessions and median step.
`load` reads an experiment's rows with the checks of both verify files (verify.csv, and
verify_synthesised_weights.csv for the superseded rows) joined.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

CELL = ["gpu", "model", "ctx", "arm", "attn", "quant"]
MODEL_CELL = ["gpu", "model", "ctx", "quant"]
REFERENCE_ARM, REFERENCE_ATTN, REFERENCE_QUANT = "eager", "sdpa", "bf16"
MODES = ("mark", "drop", "raise")
UNCHECKED = "unchecked"
"""The status `labelled` gives an unchecked cell's rows: not a timing (records.STATUSES' failures are read the
same way by every table), with the reason."""
TIMED = ("ok", "warmup")


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
        return timed.assign(checked=pd.Series(dtype=bool), check_note=pd.Series(dtype=object))
    out = timed.copy()
    index = out.index
    keys = out[["run_id"] + CELL].copy()
    keys["ctx"] = keys["ctx"].astype(int)
    arm = keys.merge(_verdicts(verify, "vs_eager", CELL), on=["run_id"] + CELL, how="left")
    model = keys.merge(_verdicts(verify, "vs_bf16", MODEL_CELL), on=["run_id"] + MODEL_CELL, how="left")
    needs_arm = np.array([needs_arm_check(a, t) for a, t in zip(keys["arm"], keys["attn"])], dtype=bool)
    needs_model = (keys["quant"] != REFERENCE_QUANT).to_numpy()
    arm_ok = arm["vs_eager_passed"].fillna(False).astype(bool).to_numpy()
    model_ok = model["vs_bf16_passed"].fillna(False).astype(bool).to_numpy()
    timed_row = out["status"].isin(TIMED).to_numpy()
    checked = ~timed_row | ((~needs_arm | arm_ok) & (~needs_model | model_ok))
    notes = []
    for t, na, nm, an, mn in zip(timed_row, needs_arm, needs_model, arm["vs_eager_note"], model["vs_bf16_note"]):
        if not t:
            notes.append("not timed")
            continue
        parts = []
        if na:
            parts.append(an if isinstance(an, str) else "no vs_eager check in its run")
        if nm:
            parts.append(mn if isinstance(mn, str) else "no vs_bf16 model check in its run")
        notes.append("; ".join(parts) or "reference")
    out["checked"] = pd.Series(checked, index=index)
    out["check_note"] = pd.Series(notes, index=index, dtype=object)
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
    """The reason of an UNCHECKED status row."""
    return (f"timed without a passing check of its own run, not counted: run {run_id}, {sessions} session(s), "
            f"median step {ms:.3f} ms ({note})")


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
    from decodegap import records

    frames = [records.load_experiment("verify", Path(data))]
    if superseded:
        frames.append(records.load_experiment("verify" + records.SYNTHESISED, Path(data)))
    kept = [f for f in frames if not f.empty]
    return pd.concat(kept, ignore_index=True) if kept else frames[0]


def load(experiment: str, data, mode: str = "mark", superseded: bool = False) -> pd.DataFrame:
    """An experiment's rows (records.load_experiment, or records.with_superseded with `superseded`) joined with the
    checks of their own runs (join_checks in `mode`, both verify files)."""
    from decodegap import records

    rows = (records.with_superseded(experiment, Path(data)) if superseded
            else records.load_experiment(experiment, Path(data)))
    return join_checks(rows, verify_rows(data), mode)


def own_checks(rows: pd.DataFrame, verify: pd.DataFrame) -> pd.DataFrame:
    """The model checks of `verify` that belong to the (run, cell) of `rows`: `vs_eager` (and any arm check) rows
    whose run and cell are among them, `vs_bf16` / `vs_bf16_logits` rows whose run and (gpu, model, ctx, quant)
    are; layer checks (arm `-`) are left out. A label read from them is the check of the run that timed the cell."""
    if verify is None or verify.empty or rows.empty:
        return verify
    v = verify[verify["layer"].astype(str) == "model"] if "layer" in verify else verify
    mine = rows[["run_id"] + CELL].drop_duplicates().astype({"ctx": int})
    vv = v.astype({"ctx": int})
    model = vv["check"].astype(str).str.startswith("vs_bf16") if "check" in vv else pd.Series(False, index=vv.index)
    by_cell = vv[~model].merge(mine, on=["run_id"] + CELL, how="inner")
    by_model = vv[model].merge(mine[["run_id"] + MODEL_CELL].drop_duplicates(), on=["run_id"] + MODEL_CELL,
                               how="inner")
    return pd.concat([by_cell, by_model], ignore_index=True)


READERS = (("01_roofline", "roofline", "rows"), ("02_cuda_graphs_ab", "cuda_graphs_ab", "rows"),
           ("03_attention_backends (whole step)", "attention_backends", "step_rows"),
           ("04_quantisation_l4", "quantisation", "rows"), ("05_cost", "cost", "rows"),
           ("06_closing_the_gap", "closing_the_gap", "rows"))
"""(notebook, decodegap.experiments module, function): the readers whose counted rows provenance_report follows (the
claims and the gallery read their numbers through these)."""


def provenance_report(data) -> list[dict]:
    """Per reader (READERS): the runs behind its counted rows (timed `ok` rows, after the checks and the choice of
    one sweep per cell) with each run's provenance (hardware.provenance_of its env.json entry, corrections.json
    applied): `runs`, `cells`, `dirty` (runs of a '+dirty' tree, and how many record no diff digest), `no_digest`
    (runs without source_sha256), `corrected` (runs whose entry a reviewed correction changed), `no_entry` (runs
    without an env.json entry), and `unchecked` (cells left out as unchecked: status UNCHECKED). Each list holds
    (run id, commit, cells of the run)."""
    import importlib

    from decodegap import hardware

    env = hardware.load_env(data)
    out = []
    for name, module, function in READERS:
        rows = getattr(importlib.import_module(f"decodegap.experiments.{module}"), function)(Path(data))
        counted = rows[rows["status"] == "ok"]
        per_run = counted[["run_id"] + CELL].drop_duplicates().groupby(["gpu", "run_id"]).size()
        report = dict(reader=name, runs=len(per_run), cells=int(counted[CELL].drop_duplicates().shape[0]), dirty=[],
                      dirty_no_diff=0, no_digest=[], corrected=[], no_entry=[],
                      unchecked=int(rows.loc[rows["status"] == UNCHECKED, CELL].drop_duplicates().shape[0]))
        for (gpu, run_id), n in per_run.items():
            entry = env.get((gpu, run_id))
            if entry is None:
                report["no_entry"].append((run_id, "", int(n)))
                continue
            p = hardware.provenance_of(entry)
            item = (run_id, p["commit"] + ("+dirty" if p["dirty"] else ""), int(n))
            if p["dirty"]:
                report["dirty"].append(item)
                report["dirty_no_diff"] += not p["diff_digest"]
            if not p["source_digest"]:
                report["no_digest"].append(item)
            if p["corrected"]:
                report["corrected"].append(item)
        out.append(report)
    return out


def provenance_lines(reports: list[dict]) -> list[str]:
    """provenance_report as the lines `python -m decodegap check` prints."""
    lines = []
    for r in reports:
        def runs(items):
            return ", ".join(f"{run} ({commit}, {n} cells)" for run, commit, n in items) or "none"

        lines.append(f"{r['reader']}: {r['cells']} counted cells from {r['runs']} runs; "
                     f"{r['unchecked']} cells drawn as unchecked (no checked run times them)")
        lines.append(f"  dirty tree: {len(r['dirty'])} runs ({r['dirty_no_diff']} without a diff digest): "
                     f"{runs(r['dirty'])}")
        lines.append(f"  no source digest: {len(r['no_digest'])} of {r['runs']} runs")
        if r["corrected"]:
            lines.append(f"  corrected by corrections.json: {runs(r['corrected'])}")
        if r["no_entry"]:
            lines.append(f"  no env.json entry: {runs(r['no_entry'])}")
    return lines


README_BEGIN, README_END = "<!-- runs by file: generated by checked.provenance_table -->", "<!-- end of runs by file -->"
"""The markers of data/README.md's generated table of runs (tests/test_provenance.py holds it to env.json)."""


def provenance_table(data) -> str:
    """Per raw CSV of every GPU, the runs with rows in it by their env.json entries (corrections applied): how many,
    their commits (short; '+dirty' where the tree was), how many ran from a dirty tree and how many of those record a
    diff digest, how many record source_sha256, and the runs a correction changed. A markdown table."""
    from decodegap import hardware, records

    env = hardware.load_env(data)
    lines = ["| file | runs | commits (runs) | dirty (with diff digest) | with source_sha256 | corrected |",
             "| --- | --- | --- | --- | --- | --- |"]
    for path in sorted(Path(data, "raw").glob("*/*.csv")):
        gpu = path.parent.name
        run_ids = sorted(set(records.read_csv(path)["run_id"]))
        if not run_ids:
            continue
        entries = [env.get((gpu, r), {}) for r in run_ids]
        prov = [hardware.provenance_of(e) for e in entries]
        commits = {}
        for p in prov:
            name = (p["commit"] or "no entry") + ("+dirty" if p["dirty"] else "")
            commits[name] = commits.get(name, 0) + 1
        dirty = [p for p in prov if p["dirty"]]
        corrected = [r for r, p in zip(run_ids, prov) if p["corrected"]]
        lines.append(f"| `{gpu}/{path.name}` | {len(run_ids)} | "
                     + ", ".join(f"{c} ({n})" for c, n in sorted(commits.items())) + " | "
                     f"{len(dirty)} ({sum(p['diff_digest'] for p in dirty)}) | "
                     f"{sum(p['source_digest'] for p in prov)} | {', '.join(corrected) or '-'} |")
    return "\n".join(lines)


def column(status: pd.Series) -> pd.Series:
    """A table's `checked` column from its cells' status: True where the cell is timed (`ok`: every counted row has
    a passing check of its own run), False where it is UNCHECKED (timed only without one: not counted), empty
    where nothing was timed (error, unavailable, not measured)."""
    out = pd.Series(pd.NA, index=status.index, dtype="boolean")
    out[status == "ok"] = True
    out[status == UNCHECKED] = False
    return out
