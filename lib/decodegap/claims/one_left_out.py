"""Is a verdict carried by one thing? Every finding's rule applied again with the measured rows of one model, of one
context, of one session of a headline cell, of one session behind an A/B headline speed-up, of one session of the
A/B grid sweep, of one session of notebook 07's sweeps or of one session of a quantised path left out, and the labels
that change named in the row (claims.md's `one_left_out`).

A model or a context leaves every measured frame (MEASURED, and notebook 07's tables that have the column). A session
leaves the headline cells alone (Evidence.headline_model at Evidence.headline_ctx, one per GPU and arm: the one cell
R1a and R1b read, and every other rule that reads a GPU's headline step): its decode rows of notebook 01 (every arm
that run's session timed at that cell) leave Evidence.cell_rows and the cells are made again from the rest as notebook
01 makes them (Evidence.with_cell_rows), so the cell's median over sessions, its session range (the rules' noise) and
its R_floor move as if that session had not been timed.

An A/B session leaves the A/B cell behind a GPU's headline speed-up alone (the headline model at the headline context,
in the sweep whose sessions ab.headline reads: the headline sweep, the grid's only where a GPU has none; what R2a and
R2c read, Evidence.speedup): its rows of notebook 02 (eager and graph, both arms that session timed at that cell) leave
Evidence.ab_rows and that cell's speed-up and session table are made again from the rest as the claims table makes
them (Evidence.with_ab_rows, the cell spliced in among the others), so the mean of the sessions' ratios and its
interval move as if that session had not been timed (from 10 sessions to 9 the interval turns from the bootstrap CI
into the range of the 9, as notebook 02 would give it: stats.MIN_SESSIONS_FOR_CI). The headline cell's model only:
that session process timed the other models too, but each model's speed-up is made from its own cell's sessions and
the rules read the headline model's, so the other models' cells stay whole, as the other cells do without a session
of notebook 01; a flip is then that cell's session's doing alone.

An A/B grid session leaves the grid sweep alone (what T1 reads per session, T3a's graph speed-ups of the grid, the
decomposition R2b reads, Evidence.decomp, and T4's long context): its rows of notebook 02 (every model, arm and
context that session of a GPU's grid run timed) leave Evidence.ab_rows, and those cells' speed-ups and session tables
(spliced) and the decomposition are made again from the rest (Evidence.with_ab_rows,
cuda_graphs_ab.grid_decomposition, as the claims table makes them). Every model and context of it, not one: a grid
session is one process that timed every model at each context it swept, and these rules read a GPU's grid across its
models (T1 the range over models x sessions, T3a every model's speed-up, R2b the median over models of the
decomposition's launch share), so a session that made one cell slow or fast is in every cell it timed, and leaving
one cell's share out would leave that session's doing in the others. Each GPU's decomposition is made of its own
cells, so one GPU's session moves that GPU's numbers alone. (Until 2026-12-06 only the grid sessions at the headline
context were left out, and only their rows there.)

A session of notebook 07's sweeps (one process of its batch or size sweep, among the rows its rules read: each cell's
newest measurement) leaves those rows, every cell it timed, and notebook 07's tables are made again from the rest as
notebook 07 makes them (Evidence.with_scope_rows): W1's launch shares, W2a's step model, fitted again, and W2b's
lambda from those fits. A cell that session alone timed (a sweep of one session, a cut sweep's last) leaves with it.

A session of a quantised cell (one process of notebook 04's sweep of one quantisation path, among the rows its cells
are made of, ev.quant_rows: one sweep a cell) leaves those rows, every cell of that path it timed, and notebook 04's
cells are made again from the rest as notebook 04 makes them (Evidence.with_quant_rows, with the checks of each
remaining run): what T3a's best int4 path, R4l's and R4n's paths, QT's coverage and M8 read. A cell that session alone
timed leaves with it. bf16's sessions of notebook 04 (its reference cells) are not left out here. (Until 2026-12-06
no quantised session was left out.)

No other session is left out: not those of the other cells of notebook 01.

Only the measured frames lose rows (MEASURED): the paper's published numbers, the GPU registry, the byte model and the
cost table stay whole. Statistics a notebook computes across models before the rules read them (notebook 07's step
model fits, W2a's) are not fitted again without a model or a context: their rows drop, their fits stay. A rule that reads one cell (the headline
cell of R1b, R2a) has nothing left without that cell's model or context: a label that turns `not testable here` is not
a flip and is not named, nor is a label that another source gives once the row's own source has nothing left (the
paper's numbers, where our rows at the rule's one context are left out)."""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from typing import Callable, Mapping

import pandas as pd

from decodegap import sessions
from decodegap.analysis import cuda_graphs_ab as ab
from decodegap.analysis import where_the_thesis_ends as scope_analysis
from decodegap.claims.evidence import CELL_FRAMES, Evidence, of_ab_cells
from decodegap.claims.rules import PAPER
from decodegap.claims.verdicts import NOT_TESTABLE, SECTION_FINDING

MEASURED = CELL_FRAMES + ("verify", "cell_rows", "ab_rows", "quant_rows")
"""The Evidence frames of measured rows (with notebook 07's tables, ev.scope) that a model or a context is left out
of: the cells', their checks', the decode rows notebook 01's cells are made of and the A/B rows of notebook 02's."""
SESSION_KEY = ["gpu", "run_id", "session"]
"""What names one session of a headline cell (or of an A/B cell): its GPU, its run and its number in that run."""
AB_CELL = ab.CELL + ["sweep"]
"""What names one A/B cell: a speed-up's cell and the sweep whose sessions it is made of (never two pooled)."""


def without(ev: Evidence, column: str, value) -> Evidence:
    """`ev` with the measured rows whose `column` ("model" or "ctx") is `value` left out (MEASURED and ev.scope's
    frames that have the column)."""
    def drop(frame):
        if isinstance(frame, pd.DataFrame) and column in frame and not frame.empty:
            return frame[frame[column] != value]
        return frame

    scope = {k: drop(v) for k, v in ev.scope.items()} if isinstance(ev.scope, Mapping) else ev.scope
    return dataclasses.replace(ev, scope=scope, **{name: drop(getattr(ev, name)) for name in MEASURED})


def left_out(ev: Evidence) -> list[tuple[str, object]]:
    """(column, value) of every model and every context of the measured cells (Evidence.measured_values), in order."""
    return [(column, v) for column in ("model", "ctx") for v in ev.measured_values(column)]


def _sessions(rows: pd.DataFrame, at) -> list[tuple[str, str, int]]:
    """(gpu, run id, session) of every session among `rows` where `at` (a mask of them) holds, in order."""
    keys = rows.loc[at, SESSION_KEY].dropna().drop_duplicates().sort_values(SESSION_KEY)
    return [(gpu, run_id, int(session)) for gpu, run_id, session in keys.itertuples(index=False)]


def _of_session(rows: pd.DataFrame, gpu: str, run_id: str, session: int) -> pd.Series:
    """Which of `rows` are of session `session` of run `run_id` on `gpu`."""
    return (rows["gpu"] == gpu) & (rows["run_id"] == run_id) & (rows["session"] == session)


def _at_headline_cell(ev: Evidence) -> pd.Series:
    """Which of notebook 01's decode rows (ev.cell_rows) are of a headline cell (the headline model and context)."""
    r = ev.cell_rows
    return (r["model"] == ev.headline_model) & (r["ctx"] == ev.headline_ctx)


def headline_sessions(ev: Evidence) -> list[tuple[str, str, int]]:
    """(gpu, run id, session) of every session among notebook 01's decode rows at the headline cells, in order: the
    sessions whose medians make the headline cell's step (its median) and its session range."""
    return [] if ev.cell_rows.empty else _sessions(ev.cell_rows, _at_headline_cell(ev))


def without_session(ev: Evidence, gpu: str, run_id: str, session: int) -> Evidence:
    """`ev` with one session's decode rows at the headline cell (every arm that session of run `run_id` timed on
    `gpu`) left out and the cells made again from the rest (Evidence.with_cell_rows)."""
    out = _at_headline_cell(ev) & _of_session(ev.cell_rows, gpu, run_id, session)
    return ev.with_cell_rows(ev.cell_rows[~out])


def headline_ab_cells(ev: Evidence) -> pd.DataFrame:
    """The A/B cell (AB_CELL) behind each GPU's headline speed-up of the headline model (Evidence.speedup: ab.headline,
    the graph arm at the headline context), one row per GPU: its headline sweep's, or the grid's where the GPU has no
    headline sweep."""
    head = ab.headline(ev.speed, ev.headline_ctx) if not ev.speed.empty else ev.speed
    if head.empty:
        return pd.DataFrame(columns=AB_CELL)
    head = head[(head["arm"] == "graph") & (head["model"] == ev.headline_model)]
    return head[AB_CELL].reset_index(drop=True)


def headline_ab_sessions(ev: Evidence) -> list[tuple[str, str, int]]:
    """(gpu, run id, session) of every session among notebook 02's A/B rows (ev.ab_rows) of the cells behind the
    headline speed-ups (headline_ab_cells), in order: the sessions whose ratios make a GPU's headline speed-up and its
    interval. A GPU whose headline speed-up is its grid sweep's (no headline sweep) has none here: each of those is a
    grid session, left out whole at every cell it timed (grid_sessions), and named once, as that."""
    cells = headline_ab_cells(ev)
    cells = cells[cells["sweep"] != ab.GRID] if "sweep" in cells else cells
    return [] if ev.ab_rows.empty or cells.empty else _sessions(ev.ab_rows, of_ab_cells(ev.ab_rows, cells))


def without_ab_session(ev: Evidence, gpu: str, run_id: str, session: int) -> Evidence:
    """`ev` with one A/B session's rows at the cell behind `gpu`'s headline speed-up (headline_ab_cells: both arms
    that session of run `run_id` timed there, the headline model's only) left out, and that cell's speed-up and
    session table made again from the rest (Evidence.with_ab_rows, spliced: the other cells as they were)."""
    cells = headline_ab_cells(ev)
    cell = cells[cells["gpu"] == gpu]
    r = ev.ab_rows
    out = of_ab_cells(r, cell) & _of_session(r, gpu, run_id, session).to_numpy()
    return ev.with_ab_rows(r[~out], cell)


def _of_grid(ev: Evidence) -> pd.Series:
    """Which of notebook 02's A/B rows (ev.ab_rows) are of its grid sweep, at any context."""
    return ev.ab_rows["sweep"] == ab.GRID


def grid_sessions(ev: Evidence) -> list[tuple[str, str, int]]:
    """(gpu, run id, session) of every session of the A/B grid sweep (ev.ab_rows), at whichever contexts it timed, in
    order: the sessions whose steps make the grid cells, T1's and T3a's sessions, the decomposition R2b reads and
    T4's long context."""
    if ev.ab_rows.empty or "sweep" not in ev.ab_rows:
        return []
    return _sessions(ev.ab_rows, _of_grid(ev))


def without_grid_session(ev: Evidence, gpu: str, run_id: str, session: int) -> Evidence:
    """`ev` with one session's rows of the A/B grid sweep (every model, arm and context that session of run `run_id`
    timed on `gpu`) left out, and those cells' speed-ups and session tables (spliced: the other cells as they were)
    and the decomposition made again from the rest (Evidence.with_ab_rows)."""
    r = ev.ab_rows
    out = _of_grid(ev) & _of_session(r, gpu, run_id, session)
    cells = r.loc[out, [k for k in AB_CELL if k in r]].drop_duplicates()
    return ev.with_ab_rows(r[~out], cells)


def _scope_read(ev: Evidence) -> pd.DataFrame:
    """The rows of notebook 07's sweeps its rules read (analysis.where_the_thesis_ends.scope_rows of ev.scope's
    rows: its band of sessions, each cell's newest measurement); empty without any."""
    rows = ev.scope.get("rows") if isinstance(ev.scope, Mapping) else None
    return rows.iloc[:0] if rows is None or rows.empty else scope_analysis.scope_rows(rows)


def scope_sessions(ev: Evidence) -> list[tuple[str, str, int]]:
    """(gpu, run id, session) of every session of notebook 07's sweeps whose timed rows its rules read (_scope_read),
    in order: one process of a batch or size sweep, which timed every cell of its plan (W1's launch shares, W2a's
    fits and, through them, W2b's lambda)."""
    read = _scope_read(ev)
    return [] if read.empty else _sessions(read, read["status"] == "ok")


def without_scope_session(ev: Evidence, gpu: str, run_id: str, session: int) -> Evidence:
    """`ev` with one session of notebook 07's sweeps (every cell that session of run `run_id` timed on `gpu`) left
    out of the rows its rules read, and notebook 07's tables made again from the rest (Evidence.with_scope_rows). The
    rows of notebook 07's band that its rules do not read (a cell's older measurement, replaced whole by a newer one)
    stay out, so no older run takes the place of the session left out; the other notebooks' rows stay whole."""
    def remake() -> dict:
        rows = ev.scope["rows"]
        read = _scope_read(ev)
        band = sessions.in_band(rows["session"], sessions.SCOPE)
        kept = pd.concat([rows[~band], read[~_of_session(read, gpu, run_id, session)]], ignore_index=True)
        return dict(scope=ev.with_scope_rows(kept).scope)

    return dataclasses.replace(ev, **_remade((ev.scope, ev.published), (gpu, run_id, session), remake))


def quant_sessions(ev: Evidence) -> list[tuple[str, str, int]]:
    """(gpu, run id, session) of every session of notebook 04's quantised cells (ev.quant_rows, status ok, every path
    but bf16), in order: one process of one path's sweep, which timed every cell of its plan."""
    r = ev.quant_rows
    return [] if r.empty else _sessions(r, (r["status"] == "ok") & (r["quant"] != "bf16"))


def without_quant_session(ev: Evidence, gpu: str, run_id: str, session: int) -> Evidence:
    """`ev` with one session of a quantised path (every cell that session of run `run_id` timed on `gpu`) left out of
    notebook 04's rows, and its cells made again from the rest (Evidence.with_quant_rows)."""
    def remake() -> dict:
        r = ev.quant_rows
        out = ev.with_quant_rows(r[~_of_session(r, gpu, run_id, session)])
        return dict(quant_rows=out.quant_rows, quant_cells=out.quant_cells)

    inputs = (ev.quant_rows, ev.quant_verify, ev.configs, ev.specs, ev.bandwidth_rows)  # what with_quant_rows reads
    return dataclasses.replace(ev, **_remade(inputs, (gpu, run_id, session), remake))


def _remade(inputs: tuple, session: tuple, remake: Callable[[], dict]) -> dict:
    """The fields `remake` gives (evidence made again without `session`), from _REMADE where the same `inputs` (the
    objects they are made from) made them already."""
    key = tuple(id(x) for x in inputs) + session
    hit = _REMADE.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], inputs)):  # the same objects, not a reused id
        return hit[1]
    fields = remake()
    if len(_REMADE) >= 256:
        _REMADE.clear()
    _REMADE[key] = (inputs, fields)
    return fields


_REMADE: dict = {}
"""Evidence fields made again without one session, per (the objects they are made from, session): notebook 07's
tables (without_scope_session: about 0.4 s a session) and notebook 04's cells (without_quant_session: about 0.2 s).
What they are made from is read only, so evidence that differs in other fields (each rule's variants, the tests'
hand-made frames) reuses them instead of making them again. Keyed by the objects' ids and kept with them, so a later
object at a reused id is not taken for them."""


MODELS_AND_CONTEXTS, SESSIONS = "models and contexts", "sessions of the headline cells"
AB_SESSIONS, GRID_SESSIONS = "A/B headline sessions", "A/B grid sessions"
SCOPE_SESSIONS = "sessions of notebook 07's sweeps"
QUANT_SESSIONS = "sessions of notebook 04's quantised cells"
"""The six kinds of thing left out, as the column counts them."""


def _variants(ev: Evidence, remade: Callable[[Evidence], dict]) -> list[tuple[str, str, dict]]:
    """(kind, what is left out, `remade` of the evidence without it: its rows keyed by `_keyed`): every model and
    context (`left_out`), then every session of the headline cells (`headline_sessions`), then every A/B session
    behind a headline speed-up (`headline_ab_sessions`), then every session of the A/B grid sweep (`grid_sessions`),
    then every session of notebook 07's sweeps (`scope_sessions`), then every session of notebook 04's quantised cells
    (`quant_sessions`)."""
    out = [(MODELS_AND_CONTEXTS, f"{col} {value}", remade(without(ev, col, value))) for col, value in left_out(ev)]
    for kind, name, listed, leave in ((SESSIONS, "session", headline_sessions, without_session),
                                      (AB_SESSIONS, "A/B session", headline_ab_sessions, without_ab_session),
                                      (GRID_SESSIONS, "A/B grid session", grid_sessions, without_grid_session),
                                      (SCOPE_SESSIONS, "notebook 07 session", scope_sessions, without_scope_session),
                                      (QUANT_SESSIONS, "quantised session", quant_sessions, without_quant_session)):
        out += [(kind, f"{gpu} {name} {session} of run {run_id}", remade(leave(ev, gpu, run_id, session)))
                for gpu, run_id, session in listed(ev)]
    return out


def _recording(ev: Evidence, names: set) -> Evidence:
    """A copy of `ev` (the same field objects) that adds the name of every attribute read of it to `names`; its
    methods and properties read their fields through it, so those are named too."""
    class Reading(type(ev)):
        def __getattribute__(self, name):
            names.add(name)
            return object.__getattribute__(self, name)

    out = copy.copy(ev)
    out.__class__ = Reading
    return out


_PLAIN = (str, int, float, bool, type(None))


def _same(a, b) -> bool:
    """Whether an evidence field is as it was: the same object, or an equal plain value (a text, a number, a list
    of them: Evidence.measured is made again, equal, with every copy)."""
    if a is b:
        return True
    if isinstance(a, _PLAIN) or (isinstance(a, (list, tuple)) and all(isinstance(x, _PLAIN) for x in a)):
        return type(a) is type(b) and a == b
    return False


class SectionReads:
    """Each section's rows of `ev` (the makers of claims.table.SECTIONS, in order) with the Evidence fields it read
    (`_recording`). `rows(e)`, for `e` made from `ev` with some fields replaced (a variant of `_variants`: every
    field it leaves as it was is the same object), makes again only the sections that read a replaced field and keeps
    the others' rows: the rows every section would make of `e`, since a section's rows follow from what it reads
    (the rows, the registries, the data folder's files, which no variant changes). An A/B session left out then
    makes again the A/B rules' rows, not notebook 07's step model fits."""

    def __init__(self, ev: Evidence, sections):
        self.ev = ev
        fields = {f.name for f in dataclasses.fields(ev)}
        self.made = []
        for section in sections:
            names: set = set()
            rows = section(_recording(ev, names))
            self.made.append((section, sorted(names & fields), rows))

    def base(self) -> list[dict]:
        """Every section's rows of `ev`, in order."""
        return [row for _, _, rows in self.made for row in rows]

    def rows(self, e: Evidence) -> list[dict]:
        """Every section's rows of `e`, in order: each section's of `ev` where no field it read was replaced."""
        out = []
        for section, names, rows in self.made:
            out += rows if all(_same(getattr(e, n), getattr(self.ev, n)) for n in names) else section(e)
        return out


def _unchanged(variants: list[tuple[str, str, dict]], nothing: list[str]) -> str:
    """The text of a label no variant changes: per kind, of how many of them left out the source still judges (e.g.
    "unchanged with any one of N of the M models and contexts, or any one of K of the L sessions of the headline
    cells, or any one of I of the J A/B headline sessions, or any one of G of the H A/B grid sessions, or any one of
    S of the T sessions of notebook 07's sweeps, left out"),
    naming those that leave it nothing to judge."""
    total = Counter(kind for kind, _, _ in variants)
    judged = Counter(kind for kind, what, _ in variants if what not in nothing)
    kinds = dict.fromkeys([MODELS_AND_CONTEXTS, *total])  # the models and contexts first, counted even when none
    parts = [f"any one of {judged[kind]} of the {total[kind]} {kind}" for kind in kinds]
    return (f"unchanged with {', or '.join(parts)}{',' if len(parts) > 1 else ''} left out"
            + (f" (without {', '.join(nothing)} its source has nothing left to judge)" if nothing else ""))


def _keyed(rows: list[dict]) -> dict[tuple[str, int], dict]:
    """Rows by (id, its occurrence): a rule may make one row per GPU (R5m)."""
    seen: dict[str, int] = {}
    out = {}
    for r in rows:
        n = seen[r["id"]] = seen.get(r["id"], -1) + 1
        out[(r["id"], n)] = r
    return out


def column(ev: Evidence, make_rows: Callable[[Evidence], list[dict]], base: list[dict] | None = None,
           reads: "SectionReads | None" = None) -> list[str]:
    """Per row of `base` (`make_rows(ev)`, the claims table's rows in order, made here unless given), what leaving
    one model, one context, one session of a headline cell, one A/B session behind a headline speed-up, one session
    of the A/B grid sweep or one session of notebook 07's sweeps out does to its label (`category`): the labels the
    same source (the row's `source`) turns it into, each with what was left out ("without h100-sxm A/B session 7 of
    run R: ...", "without h100-sxm A/B grid session 1 of run R: ...", "without h200 notebook 07 session 100 of run R:
    ..."; a label turned `not testable here`, or given by another source, is not named: the rows left nothing to
    judge); where none changes, `unchanged with any one of N of the M models and contexts, or any one of K of the L
    sessions of the headline cells, or any one of I of the J A/B headline sessions, or any one of G of the H A/B grid
    sessions, or any one of S of the T sessions of notebook 07's sweeps, left out`, naming those that leave its
    source nothing to judge; '-' for a method check, a finding not testable with every row, or one labelled by the
    paper's own numbers (which read no measured row). `reads`: SectionReads of `ev` over the makers whose rows, in
    order, are `make_rows`' (claims.table.SECTIONS); each variant then makes again only the sections that read what
    it left out instead of every row."""
    base = make_rows(ev) if base is None else base
    variants = _variants(ev, lambda e: _keyed(make_rows(e) if reads is None else reads.rows(e)))
    text = []
    for key, row in _keyed(base).items():
        if row["section"] != SECTION_FINDING or row["category"] == NOT_TESTABLE or row.get("source") == PAPER:
            text.append("-")  # a method check, nothing to judge, or the paper's own numbers (no measured row read)
            continue
        flips, nothing = [], []
        for _, what, rows in variants:
            other = rows.get(key)
            if (other is None or other["category"] == NOT_TESTABLE
                    or other.get("source") != row.get("source")):  # the row's source left with nothing to judge
                nothing.append(what)
            elif other["category"] != row["category"]:
                flips.append(f"without {what}: {other['category']}")
        text.append("; ".join(flips) if flips else _unchanged(variants, nothing))
    return text
