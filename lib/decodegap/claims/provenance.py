"""Which runs each rule reads, and whether the rule was fixed after them.

A rule's `rows` (decodegap.claims.rules.Rows) name a raw file, a query over its columns and which runs of a cell
count (`pick`). Here they are resolved against data/raw/<gpu>/: the run ids of the rows the rule reads, each run's
start time from its id (run ids begin with their UTC start, YYYYMMDDTHHMMSS; data/raw/<gpu>/env.json holds an
entry per run), against the date of the rule's newest history item. A rule fixed after a run it reads is flagged
in figures/claims.md: its thresholds may have been chosen knowing the rows."""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import pandas as pd

from decodegap import records, selection
from decodegap.claims import rules

CELL_COLUMNS = ("gpu", "model", "ctx", "batch", "arm", "attn", "quant", "check", "layer")


def run_time(run_id: str) -> str:
    """The UTC start of a run (its id's timestamp) as YYYY-MM-DDTHH:MM."""
    started = records.run_started(run_id)
    if started is None:
        raise ValueError(f"run id {run_id!r} names no start time (YYYYMMDDTHHMMSS-xxxxxx)")
    return started.strftime("%Y-%m-%dT%H:%M")


def _env_runs(data) -> set[str]:
    out = set()
    for env in Path(data, "raw").glob("*/env.json"):
        out |= set(json.loads(env.read_text()))
    return out


def _pick(frame: pd.DataFrame, how: str, data) -> pd.DataFrame:
    if frame.empty or how == "all":
        return frame
    if how == "newest run per cell":
        keys = [c for c in CELL_COLUMNS if c in frame]
        newest = frame.groupby(keys)["run_id"].transform("max")
        return frame[frame["run_id"] == newest]
    if how == "newest measurement per cell":
        return selection.newest_measurement(frame, [c for c in CELL_COLUMNS if c in frame])
    if how == "one sweep per cell":
        from decodegap.roofline import one_sweep

        return one_sweep(frame, selection.run_plans(data))
    if how == "grid sweep":
        return frame[frame["sweep"] == "grid"] if "sweep" in frame else frame.iloc[0:0]
    if how == "headline sweep":
        return frame[frame["sweep"] == "headline"] if "sweep" in frame else frame.iloc[0:0]
    raise ValueError(f"unknown pick {how!r}")


def _raw_state(data) -> tuple:
    """What the runs a rule reads depend on: every raw file's path, size and modification time."""
    raw = Path(data, "raw")
    return (str(raw.resolve()),) + tuple(sorted((str(p.relative_to(raw)), p.stat().st_size, p.stat().st_mtime_ns)
                                               for p in raw.glob("*/*") if p.is_file()))


RESOLVED_STATES = 4
"""How many raw folder states `_RESOLVED` keeps (the newest used); an older one is dropped whole."""
_RESOLVED: OrderedDict[tuple, dict[rules.Rows, set[str]]] = OrderedDict()
"""Run ids per raw folder state, then per Rows: resolving a selector re-reads and re-picks whole tables, and the
claims table resolves each rule twice (its flag and its re-measurement) every time it is built; a changed file is a
new state, so a cached answer never outlives the rows it was computed from, and at most RESOLVED_STATES states are
kept, so the cache cannot grow without limit however often the rows change."""


def _resolved(state: tuple) -> dict:
    """The cache of one raw folder state, made the newest; the oldest states beyond RESOLVED_STATES dropped."""
    cache = _RESOLVED.setdefault(state, {})
    _RESOLVED.move_to_end(state)
    while len(_RESOLVED) > RESOLVED_STATES:
        _RESOLVED.popitem(last=False)
    return cache


class Runs:
    """The raw rows of a data folder, loaded once, and the runs each rule reads."""

    def __init__(self, data):
        self.data = data
        self._tables: dict[str, pd.DataFrame] = {}
        self.env = _env_runs(data)
        self._state = _raw_state(data)

    def table(self, file: str) -> pd.DataFrame:
        if file not in self._tables:
            name = file.removesuffix(".csv")
            try:
                if name == "ab":
                    from decodegap.experiments.cuda_graphs_ab import rows

                    t = rows(self.data)
                else:
                    t = records.load_experiment(name, self.data)
            except Exception:  # no such experiment here: reads no runs
                t = pd.DataFrame()
            self._tables[file] = t
        return self._tables[file]

    def of(self, rule_rows: rules.Rows) -> set[str]:
        """Run ids of the raw rows `rule_rows` selects (none for published, spec or model files)."""
        if "/" in rule_rows.file or not rule_rows.file.endswith(".csv"):
            return set()
        cache = _resolved(self._state)
        if rule_rows not in cache:
            t = self.table(rule_rows.file)
            sel = t.query(rule_rows.query) if rule_rows.query and not t.empty else t
            cache[rule_rows] = set() if t.empty else set(_pick(sel, rule_rows.pick, self.data)["run_id"])
        return set(cache[rule_rows])

    def of_rule(self, rule: rules.Rule) -> set[str]:
        return set().union(*(self.of(r) for r in rule.rows)) if rule.rows else set()


def fixed_after_rows(rule: rules.Rule, runs: Runs) -> str:
    """'' when the rule's newest fixing precedes every run it reads; else a sentence: how many of its runs began
    before it was fixed, their span, runs missing from env.json, and, for a rule that judges only rows measured after
    it (rules.JUDGES_ONLY_LATER_ROWS), how."""
    ids = runs.of_rule(rule)
    before = sorted(i for i in ids if run_time(i) < rule.fixed.date)
    if not before:
        return ""
    missing = sorted(i for i in before if i not in runs.env)
    ahead = rules.JUDGES_ONLY_LATER_ROWS.get(rule.id)
    return (f"fixed {rule.fixed.date} ({rule.fixed.commit}), after {len(before)} of the {len(ids)} runs it reads "
            f"({run_time(before[0])} to {run_time(before[-1])})"
            + (f"; {len(missing)} not in env.json" if missing else "") + (f"; {ahead}" if ahead else ""))
