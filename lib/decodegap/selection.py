"""Which rows count: the rules that select among the raw rows records.py reads. A cell already measured (done_keys,
for resuming a sweep), each profiled step's latest profile (latest_profiles), the rows of an experiment with the
superseded rows of the cells not measured again (with_superseded), each cell's newest measurement across resumed
runs (newest_measurement), each run's sweep plan (run_plans) and the sweep a run belongs to (sweep_of)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from decodegap import records

WEIGHTS_RTN, WEIGHTS_SUPERSEDED = "rtn from bf16", "synthesised (superseded)"
"""with_superseded's `weights` labels: the model's own bf16 weights quantised, or the superseded synthesis."""


def with_superseded(experiment: str, data: Path, cell=("gpu", "model", "ctx", "arm", "attn", "quant")) -> pd.DataFrame:
    """The rows of `experiment` and, for the cells (`cell` columns) it does not hold, the rows of its superseded
    file (records.SYNTHESISED), with a column `weights`: WEIGHTS_RTN or WEIGHTS_SUPERSEDED."""
    rows = records.load_experiment(experiment, data).assign(weights=WEIGHTS_RTN)
    old = records.load_experiment(experiment + records.SYNTHESISED, data)
    if old.empty:
        return rows
    have = set(rows[list(cell)].astype(str).itertuples(index=False, name=None))
    keep = [tuple(k) not in have for k in old[list(cell)].astype(str).itertuples(index=False, name=None)]
    return pd.concat([rows, old[keep].assign(weights=WEIGHTS_SUPERSEDED)], ignore_index=True)


def newest_measurement(rows: pd.DataFrame, cell) -> pd.DataFrame:
    """Per cell (`cell` columns), the rows of its newest measurement: the newest run that measured the cell's first
    session, and the runs after it that measured its later sessions (the same sweep started again after a cut,
    which measures only what is missing: done_keys), each session from its newest run. A run older than the newest
    measurement of the first session is never pooled with it, so a sweep measured again (`again`) replaces the
    old rows whole, and a sweep cut and resumed keeps every session it measured."""
    if rows.empty:
        return rows
    cell = list(cell)
    first = rows.groupby(cell, dropna=False)["session"].transform("min")
    start = rows["run_id"].where(rows["session"] == first)
    start = rows.assign(_start=start).groupby(cell, dropna=False)["_start"].transform("max")
    kept = rows[rows["run_id"] >= start]
    newest = kept.groupby(cell + ["session"], dropna=False)["run_id"].transform("max")
    return kept[kept["run_id"] == newest]


def done_keys(path: Path, schema: records.Schema, retry: tuple[str, ...] = (), run_id: str | None = None,
              again: bool = False) -> set[tuple]:
    """Key tuples (schema.key) of the cells already in a file: a cell counts once any row of it is there
    (blocks are written whole; a cut block is moved aside by repair_tail first). A cell whose every row has
    a status in `retry` (e.g. `unavailable`, after installing the missing package) is not done; measuring
    it again appends new rows beside the old ones, which stay as history. Rows of `run_id` (the run now
    going on) always count, whatever their status, so a retried cell is measured once per run. `again`: only
    the rows of `run_id` count (every cell is measured again by this run; the older rows stay as history)."""
    return keys_done(file_rows(path, schema), schema, retry, run_id, again)


def file_rows(path: Path, schema: records.Schema) -> pd.DataFrame:
    """A raw CSV's rows as done_keys reads them, a cut tail moved aside first (records.repair_tail); none where the
    file is absent."""
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=list(schema.key))
    records.repair_tail(path, schema)
    return records.read_csv(path, schema)


def keys_done(frame: pd.DataFrame, schema: records.Schema, retry: tuple[str, ...] = (), run_id: str | None = None,
              again: bool = False) -> set[tuple]:
    """done_keys of a file's rows read already (`frame`), for several plans that read one file."""
    if frame.empty:
        return set()
    if again:
        frame = frame[frame["run_id"] == run_id]
    elif retry:
        frame = frame[~frame["status"].isin(retry) | (frame["run_id"] == run_id)]
    return set(frame[list(schema.key)].astype(str).itertuples(index=False, name=None))


def latest_profiles(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of the latest run (run ids begin with their start time) that profiled each step (gpu, model,
    ctx, arm, quant, and batch where the rows have it) with `ok` rows, else that step's latest rows: a step profiled
    again (ladder --again) is read from its new profile, never summed with the old one, which stays in the file as
    history."""
    if rows.empty:
        return rows
    step = [rows[c] for c in ("gpu", "model", "ctx", "arm", "quant", "batch") if c in rows]
    ok_run = rows["run_id"].where(rows["status"] == "ok")
    latest = ok_run.groupby(step).transform("max").fillna(rows["run_id"].groupby(step).transform("max"))
    return rows[rows["run_id"] == latest]


def sweep_of(plan: dict | None, run_id: str) -> tuple:
    """The sweep a run belongs to, as a sortable signature: the runs of one plan's contexts and arms are one sweep
    (a sweep cut and resumed, or started again on another machine, pools), a run whose plan measured its cells
    `again` is a sweep of its own (its run id first: the latest ranks above), and a run without a plan is a sweep of
    its own of one context. The readers keep one sweep per cell (roofline.widest_sweep, which ranks these
    signatures), and a sweep resuming counts a session done only where its own sweep measured it
    (harness.sweep.SweepPlan.pending), so that the two agree on what a session of a cell is."""
    if not plan:
        return ("", 1, 0, (), (run_id,))
    contexts = tuple(int(c) for c in plan.get("contexts") or ())
    arms = tuple(plan.get("arms") or ())
    return (run_id if plan.get("again") else "", len(contexts) or 1, len(arms), contexts, arms)


def run_plans(data: Path, gpu: str | None = None) -> dict:
    """{(gpu, run id): the run's sweep plan (a dict) or None} from every data/raw/<gpu>/env.json of `data`, or from
    `gpu`'s alone where given (a sweep reads only the GPU it measures)."""
    out = {}
    for env_path in sorted(Path(data, "raw").glob(f"{gpu or '*'}/env.json")):
        for run_id, entry in json.loads(env_path.read_text()).items():
            plan = entry.get("plan") if isinstance(entry, dict) else None
            out[(env_path.parent.name, run_id)] = plan if isinstance(plan, dict) else None
    return out
