"""Sweeps of fresh sessions. A session is a new Python process (`python -m decodegap _session`), as in
the paper's N fresh sessions: it builds each model once, measures its cells and appends each cell's rows
as one atomic block. The parent process only plans, shows progress and records the environment.

Resume: a sweep measures what the readers would not read without it. The readers keep one sweep's sessions per cell
(roofline.widest_sweep, within a band of session numbers: decodegap.sessions), so a cell (session, gpu, model, ctx,
arm, attn, quant, batch) is done when a run of the same sweep (selection.sweep_of: a plan of the same contexts and
arms) has any row of it, and a cell a wider sweep timed is done in every session (unless the plan adds sessions of
its own, numbered after another's: SweepPlan.first_session); a killed sweep started again measures only what is
missing, and a narrower sweep's session of the same number never stands in for this one's (SweepPlan._done). A
session process that dies inside a cell (device assert, segfault) leaves an `error` row for that cell with the exit
code, and the sweep goes on.

This module plans and spawns; the session body is harness.session, the checks it runs harness.verification.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import pandas as pd

from decodegap.harness import continuation, keys, runs
from decodegap import hardware, inputs, paths, records, selection, sessions

SPAWNED_AT = "DECODEGAP_SESSION_SPAWNED_AT"  # set by the parent: when it started the session process (epoch s)


@dataclass(frozen=True)
class Cell:
    model: str
    ctx: int
    arm: str
    attn: str = "sdpa"
    quant: str = "bf16"
    batch: int = 1  # sequences decoded together, each of context ctx (decode.run_arm)


def check_batches(values) -> tuple[int, ...]:
    """Batch sizes of a plan: whole numbers of sequences, at least 1, each once. Raises inputs.InputError naming the
    bad value, before anything is measured or written."""
    out = tuple(values)
    if not out:
        raise inputs.InputError("no batch size given; pass one or more whole numbers of sequences, e.g. 1,8,64")
    for b in out:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise inputs.InputError(f"batch {b!r} is not a whole number of sequences >= 1 (--batches takes e.g. "
                                    "1,2,4,8)")
    if len(set(out)) != len(out):
        raise inputs.InputError(f"batch sizes {list(out)} repeat a value; give each once")
    return out


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep measures. `sessions` fresh processes each measure every cell once; the arms of a
    cell run in an order that alternates between sessions (reversed on odd sessions). Sessions are numbered from
    `first_session`: a second plan over cells an earlier plan also measured (notebook 02's headline cells after
    its grid) starts after that plan's sessions, so that it adds `sessions` of its own instead of topping the
    cells up to `sessions` in all. A plan's first session checks each non-eager arm before timing it."""

    gpu: str
    models: tuple[str, ...]
    contexts: tuple[int, ...]
    arms: tuple[str, ...] = ("eager", "hf_default")
    sessions: int = 3
    steps: int = 30
    warmup: int = 5
    attn: str = "sdpa"
    quant: str = "bf16"
    experiment: str = "decode"
    device: str = "cuda"
    seed: int = 0
    verify: bool = True
    checkpoints: dict = field(default_factory=dict)  # model key -> local checkpoint folder
    retry_unavailable: bool = False  # measure again cells recorded only as `unavailable`
    retry_errors: bool = False  # measure again cells recorded only as `error` or `oom` (after the cause is fixed)
    first_session: int = 0  # the number of this plan's first session (see above)
    again: bool = False  # measure every cell again in this run; the older rows stay (roofline.one_sweep reads the latest)
    check_every_session: bool = False  # check every non-eager arm in every session, not only once per run (below)
    batches: tuple[int, ...] = (1,)  # sequences decoded together per cell (check_batches); bf16, SDPA only above 1
    reference: bool = False  # reference cells another notebook's sweep may have timed (notebook 04's bf16): _done
    continues: tuple[str, ...] = ()  # with `again`: runs of this plan cut short (harness.continuation): their whole
    # sessions count as done

    def __post_init__(self):
        """A misspelled arm, backend or path, or a context that is not a whole number, is refused here, before any
        row is written (inputs.InputError), never measured as an `unavailable` cell."""
        keys.arms(self.arms)
        keys.attn(self.attn)
        keys.quant(self.quant)
        inputs.contexts(self.contexts)
        if not self.models:
            raise inputs.InputError("no model given; pass one or more model keys (--models / MODELS)")
        for name in ("sessions", "steps"):
            inputs.positive(name, getattr(self, name))
        inputs.positive("warmup", self.warmup, 0)
        inputs.positive("first_session", self.first_session, 0)
        band, last = sessions.band_of(self.first_session), self.first_session + self.sessions - 1
        if band is None or sessions.band_of(last) != band:
            where = f"its band {band!r} ends at session {sessions.BANDS[band].stop - 1}" if band else "in no band"
            raise inputs.InputError(f"sessions {self.first_session} to {last} leave "
                                    f"the band of session numbers their sweep reads them by ({where}; "
                                    "decodegap.sessions): measure fewer sessions in one run")
        check_batches(self.batches)
        if max(self.batches) > 1 and (self.quant != "bf16" or self.attn != "sdpa"):
            raise inputs.InputError(f"batch > 1 is measured in bf16 with SDPA's default attention only (the "
                                    f"quantisation paths' kernels and the other attention backends are measured at "
                                    f"batch 1); got quant {self.quant!r}, attn {self.attn!r}, batches "
                                    f"{list(self.batches)}")

    @property
    def session_ids(self) -> range:
        """The numbers of this plan's sessions."""
        return range(self.first_session, self.first_session + self.sessions)

    def cells(self, session: int) -> list[Cell]:
        """Every cell of `session`: per model, context and batch the arms, in this session's order."""
        arms = self.arms if session % 2 == 0 else tuple(reversed(self.arms))
        return [Cell(m, c, a, self.attn, self.quant, b) for m in self.models for c in self.contexts
                for b in self.batches for a in arms]

    def key(self, session: int, cell: Cell) -> tuple:
        """The cell's key in its CSV (selection.done_keys: the schema's key columns, as text)."""
        values = dict(asdict(cell), session=session, gpu=self.gpu)
        return tuple(str(values[c]) for c in records.schema_for(self.experiment).key)

    def csv_path(self, data) -> Path:
        return paths.raw_dir(self.gpu, data) / f"{self.experiment}.csv"

    def pending(self, session: int, data, run_id: str | None = None) -> list[Cell]:
        """Cells of `session` not yet in the CSV (rows of `run_id`, the run going on, always count)."""
        done = self._done(data, run_id)
        return [c for c in self.cells(session) if self.key(session, c) not in done]

    def pending_by_session(self, data, rows: pd.DataFrame | None = None) -> dict[int, list[Cell]]:
        """`pending` for every session of the plan, before any of them runs: the CSV read once, not per session.
        `rows`: the CSV's rows, read already by `rows_on_disk` (for several plans of one file), else read here."""
        done = self._done(data, rows=rows)
        return {s: [c for c in self.cells(s) if self.key(s, c) not in done] for s in self.session_ids}

    def rows_on_disk(self, data) -> pd.DataFrame:
        """The rows of the plan's CSV as done_keys reads them (selection.file_rows)."""
        return selection.file_rows(self.csv_path(data), records.schema_for(self.experiment))

    def _done(self, data, run_id: str | None = None, rows: pd.DataFrame | None = None) -> set[tuple]:
        """The keys of the cells done in `rows`, or in the plan's CSV read here: what the readers would read
        (roofline.widest_sweep, one sweep per cell in a band of session numbers) without measuring it again. A
        session this plan's sweep measured (selection.keys_done over the rows of its runs and of `run_id`, the run
        going on), and every session of a cell that a wider sweep of the same band timed (an `ok` row): the readers
        keep that sweep's sessions of the cell, so this plan's would never be read. A narrower sweep's session of
        the same number never stands in for this sweep's: the readers would not read it beside this sweep's. A plan
        whose sessions start after its band's first (notebook 02's headline sessions, after its grid's) adds
        sessions of its own to cells another sweep measured, which its reader reads apart: only its own count. A
        `reference` plan (notebook 04's bf16 cells, which notebooks 01 and 06 may have timed) reads a cell from any
        sweep that timed it, wider or not: such a cell is done in every session unless this plan's sweep timed it
        already (then the readers read this sweep there, and its missing sessions are measured). Decided per cell,
        never per session: a cell is never left with some sessions of one sweep and some of another."""
        retry = ("unavailable",) * self.retry_unavailable + ("error", "oom") * self.retry_errors
        schema = records.schema_for(self.experiment)
        rows = self.rows_on_disk(data) if rows is None else rows
        if rows.empty or "run_id" not in rows or self.again:
            done = selection.keys_done(rows, schema, retry, run_id, self.again)
            if self.again and self.continues and not rows.empty:  # the cut-short runs' whole sessions, as they are
                kept = rows[~rows["status"].isin(retry)] if retry else rows
                for s in continuation.continued_sessions(self, kept):
                    done |= {self.key(s, c) for c in self.cells(s)}
            return done
        band = sessions.BANDS[sessions.band_of(self.first_session)]
        rows = rows[sessions.in_band(pd.to_numeric(rows["session"]), band)]
        if rows.empty:
            return set()
        plans = selection.run_plans(paths.data_dir(data), self.gpu)
        mine = selection.sweep_of(asdict(self), run_id or "")
        ids = rows["run_id"].astype(str)
        sweep_of = {r: selection.sweep_of(plans.get((self.gpu, r)), r) for r in set(ids)}
        own = ids.map(lambda r: r == run_id or sweep_of[r] == mine).astype(bool)
        timed, other = rows["status"] == "ok", ~own & (ids != run_id)
        wider = other & ids.map(lambda r: sweep_of[r] > mine).astype(bool)
        done = selection.keys_done(rows[own], schema, retry, run_id)
        cell_key = [c for c in schema.key if c != "session"]

        def cells_of(at) -> set:
            return set(rows.loc[at & timed, cell_key].astype(str).itertuples(index=False, name=None))

        read_elsewhere = cells_of(wider)
        if self.reference:  # a narrower sweep's cell too, unless this sweep timed it already (then it is read here)
            read_elsewhere |= cells_of(other & ~wider) - cells_of(own)
        if read_elsewhere and self.first_session == band.start:
            for s in self.session_ids:
                done |= {k for k in (self.key(s, c) for c in self.cells(s))
                         if tuple(v for v, c in zip(k, schema.key) if c != "session") in read_elsewhere}
        return done

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "SweepPlan":
        raw = json.loads(text)
        for k in ("models", "contexts", "arms", "batches", "continues"):
            if k in raw:
                raw[k] = tuple(raw[k])
        return cls(**raw)


def status_rows(plan: SweepPlan, run_id: str, session: int, cell: Cell, status: str, reason: str) -> list[dict]:
    return [dict(run_id=run_id, session=session, gpu=plan.gpu, model=cell.model, ctx=cell.ctx, batch=cell.batch,
                 max_cache_len=None, arm=cell.arm, attn=cell.attn, quant=cell.quant, step=None, step_ms=None,
                 status=status, reason=reason.replace("\n", " ")[:300])]


def free_device_memory(device: str) -> None:
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def run_sweep(plan: SweepPlan, data=None, progress: bool = True) -> str:
    """Measure `plan` in fresh session processes, resuming what is already on disk. Returns the run id."""
    from tqdm.auto import tqdm

    keys.gpu_to_measure(plan.gpu, plan.device, data)  # a wrong GPU key fails here, before anything is written
    for key in plan.models:
        keys.models([key], data)
    path = plan.csv_path(data)
    todo = plan.pending_by_session(data)
    total = sum(len(v) for v in todo.values())
    if total == 0:
        print(f"nothing to measure: every cell of this plan is already in {path}")
        return runs.new_run_id()
    quant_fields = {}
    if plan.quant != "bf16":
        from decodegap.quant import paths as quant

        quant_fields = dict(quant_weights=quant.WEIGHTS, quant_kernel=quant.path(quant.resolve(plan.quant, plan.device)).kernel)
    with runs.recorded(plan.gpu, data, plan.experiment, [plan.experiment, "verify"], plan=asdict(plan),
                       gpu_state_before=hardware.gpu_state(), **quant_fields) as run_id:
        _sweep_sessions(plan, data, run_id, total, progress, tqdm)
    return run_id


def _sweep_sessions(plan: SweepPlan, data, run_id: str, total: int, progress: bool, tqdm) -> None:
    schema = records.schema_for(plan.experiment)
    path = plan.csv_path(data)
    bar = tqdm(total=total, desc=f"{plan.experiment} on {plan.gpu}", unit="cell", disable=not progress)
    for session in plan.session_ids:
        attempts, stalls, last_left = 0, 0, None
        earlier = []  # the records of this session's processes before the current one (one died inside a cell)
        while left := len(plan.pending(session, data, run_id)):
            attempts += 1
            stalls = stalls + 1 if left == last_left else 0
            if stalls >= 2:  # two session processes in a row finished no cell: never loop for ever
                raise RuntimeError(f"session {session}: {left} cell(s) still pending after session processes "
                                   "that made no progress; see their output above")
            last_left = left
            record = partial(_record_session, plan, data, run_id, session, hardware.gpu_state(), list(earlier))
            reported = None  # the process's last @@timing report, for a record written as the sweep is stopped

            def on_timing(report, record=record):  # called only while this iteration's process runs
                nonlocal reported
                reported = report
                record(report, False)

            try:
                current, finished, timing = _spawn_session(plan, session, run_id, data, bar, on_timing)
            except BaseException as exc:  # stopped (a step's time limit, Ctrl-C): the session's record says so
                record(reported, False, stopped=runs.stop_record(exc))
                raise
            if current is not None:  # the process died inside a cell: record it and go on
                records.append_rows(path, schema, status_rows(
                    plan, run_id, session, current, "error",
                    f"session process exited with code {finished} while measuring this cell (stderr above)"))
                bar.update(1)
            elif finished != 0 and attempts >= 2:
                raise RuntimeError(f"session {session} exited with code {finished} outside any cell, twice; "
                                   "see its stderr above (model build or import failure?)")
            ended = record(timing, True)
            earlier.append({k: ended[k] for k in ("before", "after", "timing")})
    bar.close()


def _record_session(plan: SweepPlan, data, run_id: str, session: int, before: dict, earlier: list, timing,
                    finished: bool, stopped: dict | None = None) -> dict:
    """The session's env.json record (returned): written at each `@@timing` report of its process (finished: False,
    the rows written so far) and when the process has ended (finished: True, the GPU's state after it), so a sweep
    killed between models keeps what its session reported (rows: what check counts again); where earlier processes
    of the session died inside a cell, their records (before, after, timing) are kept in `earlier_processes`, in
    order. A sweep stopped by a signal while the process runs records `stopped` (runs.stop_record) with the rows the
    session left once its process has ended."""
    entry = {"before": before, **({"after": hardware.gpu_state()} if finished else {}), "timing": timing,
             "rows": runs.rows_of_run(plan.csv_path(data), run_id, session), "finished": finished,
             **({"earlier_processes": earlier} if earlier else {}), **({"stopped": stopped} if stopped else {})}
    runs.update_env(plan.gpu, data, run_id, sessions={str(session): entry})
    return entry


def _spawn_session(plan: SweepPlan, session: int, run_id: str, data, bar, on_timing=None):
    """Run one session process; returns (cell it died in or None, exit code, its last @@timing report or None).
    `on_timing(report)` is called with each report as it comes."""
    cmd = [sys.executable, "-m", "decodegap"] + (["--data-dir", str(data)] if data is not None else [])
    cmd += ["_session", "--plan", plan.to_json(), "--session", str(session), "--run-id", run_id]
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{SPAWNED_AT: repr(time.time())})
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=paths.REPO)
    current, timing = None, None
    try:
        for line in proc.stdout:
            if line.startswith("@@start "):
                s, cell = json.loads(line[8:])
                current = Cell(**cell)
            elif line.startswith("@@done "):
                current = None
                bar.update(1)
            elif line.startswith("@@timing "):
                timing = json.loads(line[9:])
                if on_timing is not None:
                    on_timing(timing)
            else:
                sys.stdout.write(line)
    except BaseException:  # the sweep is stopped: the session process ends first, so the rows counted after are all
        _end(proc)
        raise
    code = proc.wait()
    return (current if code != 0 else None), code, timing


def _end(proc: subprocess.Popen, wait_s: float = 20.0) -> None:
    """SIGTERM to a session process still running (a cell it was measuring is not written), SIGKILL after `wait_s`."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
