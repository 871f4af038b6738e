"""Raw CSV records: one tidy schema per experiment, a validating loader and an atomic, resumable append.

Every measured row lives in `data/raw/<gpu>/<experiment>.csv`, one row per timed step (or repetition),
with units in the column names. Summaries are computed when reading, never stored instead of the rows.

Appends are whole blocks (one measured cell) written by a single `os.write` on an O_APPEND descriptor
under an exclusive lock, then fsync'd; a killed writer leaves at most one cut block at the file's end,
which `repair_tail` moves aside into `<file>.partial` (kept, never deleted) before the next append.
"""

from __future__ import annotations

import csv
import fcntl
import io
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd

STATUSES = ("ok", "warmup", "oom", "unavailable", "error", "skipped")
"""`ok`: a timed row. `warmup`: an untimed-for-summary warm-up row, kept for inspection.
The others are status rows of a cell that produced no timing, with the reason."""


def run_started(run_id) -> pd.Timestamp | None:
    """When a run began (UTC, tz-naive), from its id: a run id begins with its start time (harness.runs.new_run_id,
    `YYYYMMDDTHHMMSS-xxxxxx`); None for an id that names none."""
    try:
        started = pd.Timestamp(str(run_id)[:15])
    except ValueError:
        return None
    return None if pd.isna(started) else started


class SchemaError(ValueError):
    """A raw CSV that does not follow its schema; the message names file, line and column."""


@dataclass(frozen=True)
class Schema:
    """Columns of one experiment's CSV, in order, with their types (`str`, `int`, `float`).
    Columns in `optional_when_not_ok` may be empty on rows whose status is not `ok`/`warmup`; columns in
    `nan_when_empty` may be empty on any row and read as NaN. On `ok`/`warmup` rows every float is finite
    (NaN and inf are refused, whatever their spelling) and every column in `times` is above zero."""

    experiment: str
    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...]
    optional_when_not_ok: tuple[str, ...] = ()
    nan_when_empty: tuple[str, ...] = ()
    times: tuple[str, ...] = ()
    row_id: tuple[str, ...] = ()
    """Columns that, with run_id, the key and status, name one row: a second row of the same name is the same
    measurement written twice (the reader refuses it, whatever its values)."""
    filled: tuple[tuple[str, object], ...] = ()
    """(column, value) of the columns added after files were written without them: such a file (its header the
    schema's columns less these, `legacy_names`) reads every row with the value, and a row that leaves the column
    out is written with it (FILLED_BATCH)."""

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.columns]

    @property
    def legacy_names(self) -> list[str]:
        """The columns of a file written before the `filled` columns existed."""
        added = {name for name, _ in self.filled}
        return [name for name in self.names if name not in added]


FILLED_BATCH = (("batch", 1),)
"""`batch` (the number of sequences one timed step decodes together) came after the first rows: every row written
before it decoded one sequence, so such a file reads as batch 1 and code that writes no batch writes 1."""


DECODE = Schema(
    experiment="decode",
    columns=(
        ("run_id", "str"), ("session", "int"), ("gpu", "str"), ("model", "str"), ("ctx", "int"),
        ("max_cache_len", "int"), ("arm", "str"), ("attn", "str"), ("quant", "str"), ("step", "int"),
        ("step_ms", "float"), ("status", "str"), ("reason", "str"), ("batch", "int"),
    ),
    key=("session", "gpu", "model", "ctx", "arm", "attn", "quant", "batch"),
    optional_when_not_ok=("max_cache_len", "step", "step_ms"),
    times=("step_ms",),
    row_id=("step",),
    filled=FILLED_BATCH,
)
"""One row per decode step of a cell: `step_ms` is one step of all `batch` sequences together (each of context
`ctx`, `max_cache_len` the static cache each holds). `batch` is the last column: a batch-1 row is the row as it was
before the column, then `,1`."""

BANDWIDTH = Schema(
    experiment="bandwidth",
    columns=(
        ("run_id", "str"), ("gpu", "str"), ("method", "str"), ("bytes_moved", "int"), ("rep", "int"),
        ("time_ms", "float"), ("bandwidth_gbps", "float"), ("status", "str"), ("reason", "str"),
    ),
    key=("gpu", "method", "run_id"),
    optional_when_not_ok=("bytes_moved", "rep", "time_ms", "bandwidth_gbps"),
    times=("time_ms", "bandwidth_gbps"),
    row_id=("rep",),
)

KERNELS = Schema(
    experiment="kernels",
    columns=(
        ("run_id", "str"), ("gpu", "str"), ("model", "str"), ("ctx", "int"), ("arm", "str"), ("attn", "str"),
        ("quant", "str"), ("kernels", "int"), ("status", "str"), ("reason", "str"), ("batch", "int"),
    ),
    key=("gpu", "model", "ctx", "arm", "attn", "quant", "batch"),
    optional_when_not_ok=("kernels",),
    filled=FILLED_BATCH,
)

BREAKDOWN = Schema(
    experiment="breakdown",
    columns=(
        ("run_id", "str"), ("gpu", "str"), ("model", "str"), ("ctx", "int"), ("arm", "str"), ("attn", "str"),
        ("quant", "str"), ("kernel_index", "int"), ("kernel", "str"), ("gpu_us", "float"), ("status", "str"),
        ("reason", "str"), ("batch", "int"),
    ),
    key=("gpu", "model", "ctx", "arm", "attn", "quant", "batch"),
    optional_when_not_ok=("kernel_index", "kernel", "gpu_us"),
    times=("gpu_us",),
    row_id=("kernel_index",),
    filled=FILLED_BATCH,
)
"""One row per GPU kernel of one profiled decode step (harness.profile.kernel_profile), in launch order."""

VERIFY = Schema(
    experiment="verify",
    columns=(("run_id", "str"), ("session", "int"), ("gpu", "str"), ("model", "str"), ("ctx", "int"),
             ("arm", "str"), ("attn", "str"), ("quant", "str"), ("max_rel_err", "float"), ("tol", "float"),
             ("status", "str"), ("reason", "str"), ("check", "str"), ("layer", "str"), ("rows", "int"),
             ("batch", "int")),
    key=("session", "gpu", "model", "ctx", "arm", "attn", "quant", "check", "layer", "rows", "batch"),
    optional_when_not_ok=("max_rel_err", "rows"),
    nan_when_empty=("max_rel_err", "rows"),
    filled=FILLED_BATCH,
)
"""One correctness check per row; `status` ok (passed) or error (failed: the error is in max_rel_err, NaN or
infinite included), unavailable where the path cannot run. `check` says what was compared (CHECKS). A layer
check has `layer` (q_proj ... down_proj), `rows` (M, the input's row count: 1 for a decode step, the context
for a prefill) and ctx = rows, arm and attn `-`; a model check has layer `model` and rows empty. `batch`: the
sequences the checked step decoded together (a model check compares each sequence with its own eager logits and
keeps the worst; its reason names which where batch > 1).
An empty `max_rel_err` on an `ok` row is a NaN error: rows written before checks.verify_arm failed NaN
logits (analysis.quant_checks.checks labels them failed)."""

CHECKS = {
    "vs_eager": "the arm's teacher-forced logits against the same model's eager HF step (compare.VERIFY_TOL)",
    "vs_eager_sharp": "vs_eager on the same weights with every attention score sharpened (harness.checks: q and "
                      "k scaled so that each head attends to a few positions), for models whose own scores are too "
                      "flat for vs_eager (checks.factor_for; recorded, not gating). Rows of the paper's models "
                      "at factor 16 (H200, 2026-12-01) predate that rule: every correct arm fails them; so do the "
                      "rows of Qwen2.5-0.5B, 1.5B and 3B up to 2026-12-04 (factor 16, their spread 0.36-0.82 taken "
                      "past the real models'), measured before checks.factor_for stopped at SHARP_SPREAD (the reason "
                      "names the factor since)",
    "vs_bf16": "every decoder layer of the quantised model, fed the bf16 model's input, against the bf16 layer "
               "(harness.quant_checks; tolerance compare.MODEL_K_PASS x the run's vs_bf16_null, "
               "quant_checks.model_tolerance; a run without a vs_bf16_null row: 6 x the asymmetric rounding bound)",
    "vs_bf16_null": "the null of a vs_bf16 check, in its run: the largest forced-layer error of the bf16 model whose "
                    "decoder weights carry U(-D/2, D/2) of the path's own rounding step D (quant.power); tol = the "
                    "tolerance it sets",
    "vs_bf16_head": "the quantised LM head of a path that quantises it (int4-triton-head), fed the bf16 model's "
                    "final hidden states, its logits against the bf16 head's relative to their largest value "
                    "(harness.quant_checks.forced_head_error; tolerance compare.MODEL_K_PASS x the run's "
                    "vs_bf16_head_null); layer lm_head",
    "vs_bf16_head_null": "the null of a vs_bf16_head check, in its run: the largest head error of the bf16 model whose "
                         "LM head carries U(-D/2, D/2) of the path's own rounding step D; layer lm_head",
    "format": "every quantised layer's weights W_deq (read back from its tensors) against the bf16 weights they "
              "came from: the largest |W_deq - W| / (D/2) over the model's layers of one name (quant.power."
              "FORMAT_TOL); ctx 0, rows empty",
    "vs_bf16_logits": "the quantised model's teacher-forced logits against the bf16 model's, end to end (the first "
                      "H200 run of the model check, 2026-12-01; replaced by vs_bf16: on random 7-8B weights the "
                      "logits of every path were unrelated to the bf16 model's, so the check could not fail a wrong "
                      "path alone; kept as the evidence)",
    "layer": "one quantised linear's output against x @ W_deq^T in fp32, W_deq read back from its own tensors "
             "(quant.QUANT_TOL): a stand-in weight of each shape (quant_layers runs), or, in a sweep's run, the "
             "model's own layers of one name, the worst of them (its reason says which)",
}
"""The `check` column of verify.csv."""

ATTENTION = Schema(
    experiment="attention",
    columns=(("run_id", "str"), ("gpu", "str"), ("model", "str"), ("ctx", "int"), ("attn", "str"),
             ("timing", "str"), ("rep", "int"), ("us_per_call", "float"), ("max_rel_err", "float"),
             ("status", "str"), ("reason", "str")),
    key=("gpu", "model", "ctx", "attn"),
    optional_when_not_ok=("rep", "us_per_call", "max_rel_err"),
    times=("us_per_call",),
    row_id=("timing", "rep"),
)
"""Per-layer decode attention: `timing` is `host` (eager loop, host dispatch included) or `gpu` (graph
replay of many calls); status rows have timing `-`."""

QUANT_LAYERS = Schema(
    experiment="quant_layers",
    columns=(("run_id", "str"), ("gpu", "str"), ("model", "str"), ("layer", "str"), ("in_features", "int"),
             ("out_features", "int"), ("quant", "str"), ("max_rel_err", "float"), ("status", "str"),
             ("reason", "str")),
    key=("gpu", "model", "layer", "quant"),
    optional_when_not_ok=("max_rel_err",),
)
"""Per-layer correctness of each quantisation path on a model's real shapes: the quantised layer's output
against x @ W_dequantised^T (quant.check_linear). `quant` is the concrete path key (awq-marlin / awq-triton)."""

PEERS = Schema(
    experiment="peers",
    columns=(("run_id", "str"), ("session", "int"), ("gpu", "str"), ("model", "str"), ("ctx", "int"),
             ("system", "str"), ("arm", "str"), ("quant", "str"), ("check", "str"), ("step", "int"),
             ("step_ms", "float"), ("max_rel_err", "float"), ("tol", "float"), ("status", "str"), ("reason", "str")),
    key=("session", "gpu", "model", "ctx", "system", "arm", "quant"),
    nan_when_empty=("step", "step_ms", "max_rel_err", "tol"),
    times=("step_ms",),
    row_id=("check", "step"),
)
"""A peer's compiled decode timed beside the package's best levers in one process (harness.peers,
bench/peer_gpt_fast.py): `system` gpt-fast or decodegap, `arm` what ran (gpt-fast's `compiled_decode`, or the
package's lever), `quant` bf16 or the int4 path. A cell's rows: its `check` rows first (`check` names what was
compared, PEER_CHECKS; step and step_ms empty, status ok or error by max_rel_err against tol, NaN failing), then its
warm-up rows (`warmup`) and timed steps (`ok`), each with `check` `-`, its step and step_ms, max_rel_err and tol
empty; a cell that cannot run is one `unavailable` or `error` row (check `-`) with the reason. Empty step and
step_ms are allowed by the schema for the check rows only: harness.peers.check_frame refuses a step row without
them."""

PEER_CHECKS = {
    "vs_hf_eager": "the system's teacher-forced logits (its timed, compiled step) against the package's HF eager "
                   "step on the same weights and prompt (compare.logits_error, tol compare.VERIFY_TOL)",
    "vs_own_eager": "gpt-fast int4's compiled step (the one timed) against its own eager step on the same model and "
                    "prompt, teacher-forced (tol compare.VERIFY_TOL): the compiled int4 path is the model vs_bf16_layers "
                    "judged",
    "vs_bf16_layers": "an int4 model against the bf16 model it was quantised from, every decoder layer fed the bf16 "
                      "layer's input (harness.quant_checks' metric), tol compare.MODEL_K_PASS x the null of the "
                      "format's rounding on the same weights and ctx (quant_checks.model_tolerance)",
    "vs_bf16_head": "an int4 output layer (gpt-fast's int4 quantises its own; the package's where its path quantises "
                    "the LM head) against the bf16 one, fed the bf16 model's final hidden states, its logits relative "
                    "to their largest value (quant_checks.forced_head_error's metric), tol compare.MODEL_K_PASS x the "
                    "null of the format's rounding on the HF model's head, same weights and ctx "
                    "(quant_checks.head_tolerance)",
}
"""The `check` column of peers.csv (`-` on the rows of a step)."""

AB = replace(DECODE, experiment="ab")
"""Notebook 02's A/B sweep (eager, graph, compile), measured in one run by experiments.cuda_graphs_ab.measure: the
rows of a decode step, kept apart from decode.csv so that its sessions are those of one run."""

AB_WHOLE_MODEL = replace(DECODE, experiment="ab_whole_model")
"""An earlier A/B sweep whose compile arm compiled the whole model as one region (before
decode.COMPILE_LAYER_REGIONS): on the H200 several runs, each resuming the sweep where the one before it stopped
(data/README.md). Kept for the comparison of the two compile settings (ab.compile_settings_compared)."""

LEAN_COMPILED_SLICED_CACHE = replace(DECODE, experiment="lean_compiled_sliced_cache")
"""The compiled lean levers (lean_compile, lean_attn_compile) as first measured, before the lean decoder kept one
K and one V buffer per layer and before its layers were nested compile regions: the cache was one tensor for all
layers, and the compiled step copied each layer's whole slice out and back every step, a cost that grew with the
context (at long contexts the compiled step was slower than the eager one). Moved out of decode.csv so that the
ladder never pools them with the rows of the decoder as it is; kept for the comparison."""

SYNTHESISED = "_synthesised_weights"
"""Suffix of the files holding the quantised cells measured before every path quantised the model's own bf16
weights (decode, verify, kernels, breakdown, quant_layers): those runs drew codes, scales and zeros of their own
(codes uniform on 0..15 and zeros drawn apart: every weight had a mean of -0.5 x its scale, which added up over
K; ExLlamaV2's fp16 products overflowed to NaN), and their checks compared a path only with itself. Their step
times are kernel timings of the same shapes (a kernel's time does not depend on the values), kept for the cells
not measured again (`selection.with_superseded`); their correctness says nothing about the paths."""

_SUPERSEDED = {name + SYNTHESISED: replace(schema, experiment=name + SYNTHESISED)
               for name, schema in (("decode", DECODE), ("kernels", KERNELS), ("breakdown", BREAKDOWN),
                                    ("quant_layers", QUANT_LAYERS))}
_SUPERSEDED["verify" + SYNTHESISED] = replace(VERIFY, experiment="verify" + SYNTHESISED)

SCHEMAS = {s.experiment: s for s in (DECODE, AB, AB_WHOLE_MODEL, LEAN_COMPILED_SLICED_CACHE, BANDWIDTH, KERNELS,
                                     BREAKDOWN, VERIFY, ATTENTION, QUANT_LAYERS, PEERS, *_SUPERSEDED.values())}


def schema_for(experiment: str) -> Schema:
    """The schema of an experiment name (the CSV's file stem)."""
    try:
        return SCHEMAS[experiment]
    except KeyError:
        raise SchemaError(
            f"no schema for experiment {experiment!r}; known: {sorted(SCHEMAS)}. "
            "Raw files are data/raw/<gpu>/<experiment>.csv"
        ) from None


def _format(value, kind: str, column: str) -> str:
    """One field as text, checked against its column's type (an integral float in an int column, as
    pandas gives back for int columns with empty cells, is written as an int)."""
    if value is None or (isinstance(value, float) and value != value):  # None or NaN: empty
        return ""
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, (int,)) and not hasattr(value, "__index__"):
            raise SchemaError(f"column {column!r} takes an int, got {value!r}")
        return str(int(value))
    if kind == "float":
        try:
            return repr(float(value))
        except (TypeError, ValueError):
            raise SchemaError(f"column {column!r} takes a float, got {value!r}") from None
    return str(value)


def to_csv_text(schema: Schema, rows: Iterable[Mapping], header: bool, legacy: bool = False) -> str:
    """Rows (mappings with every schema column; a `filled` column left out takes its value) as CSV text, checked
    against the schema first. `legacy`: in the layout of a file written before the `filled` columns (without them;
    only rows holding their fill values fit it)."""
    fills = dict(schema.filled)
    names = schema.legacy_names if legacy else schema.names
    kinds = dict(schema.columns)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if header:
        writer.writerow(names)
    for i, row in enumerate(rows):
        missing = [c for c in schema.names if c not in row and c not in fills]
        if missing:
            raise SchemaError(f"{schema.experiment} row {i} lacks columns {missing}")
        row = {**fills, **row}
        if legacy and any(row[c] != v for c, v in fills.items()):
            raise SchemaError(f"{schema.experiment} row {i} has {({c: row[c] for c in fills})}: it does not fit a "
                              f"file without the columns {sorted(fills)}")
        writer.writerow([_format(row[c], kinds[c], c) for c in names])
    return buf.getvalue()


def file_layout(path: Path, schema: Schema) -> str | None:
    """How an existing file is laid out: "current" (the schema's columns), "legacy" (written before its `filled`
    columns, `Schema.legacy_names`), None for a missing or empty file or one whose header is neither (the reader
    names what is wrong)."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, newline="") as fh:
        header = next(csv.reader([fh.readline()]), [])
    if header == schema.names:
        return "current"
    if schema.filled and header == schema.legacy_names:
        return "legacy"
    return None


def add_filled_columns(path: Path, schema: Schema) -> None:
    """Rewrite a legacy file (file_layout) with the schema's `filled` columns, every row taking their fill values;
    the rows are otherwise kept as they are (each field's text unchanged), and the file is replaced at once
    (written aside, then renamed)."""
    path = Path(path)
    fills = dict(schema.filled)
    with open(path, newline="") as fh:
        lines = list(csv.reader(fh))
    header, rows = lines[0], lines[1:]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(schema.names)
    for fields in rows:
        by_name = dict(zip(header, fields))
        writer.writerow([by_name[c] if c in by_name else _format(fills[c], dict(schema.columns)[c], c)
                         for c in schema.names])
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(out.getvalue())
    os.replace(tmp, path)


def repair_tail(path: Path, schema: Schema) -> int:
    """Move a cut final block (a writer killed mid-append) into `<path>.partial`.

    A file that ends without a newline lost its last write part-way. Its last line and every line
    before it that belongs to the same cell (same run_id and key columns) leave the file, appended to
    `<path>.partial` so nothing is destroyed, and the cell is measured again on resume.
    Returns the number of lines moved.
    """
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return 0
    text = path.read_text()
    if text.endswith("\n"):
        return 0
    lines = text.split("\n")
    cut = lines.pop()  # the incomplete line
    names = schema.names
    if schema.filled and lines and next(csv.reader([lines[0]]), []) == schema.legacy_names:
        names = schema.legacy_names  # a file written before the filled columns: its own columns
    filled = {name for name, _ in schema.filled}
    key_idx = [names.index(c) for c in ("run_id", *schema.key) if c in names]
    core_idx = [names.index(c) for c in ("run_id", *schema.key) if c in names and c not in filled]
    cut_fields = next(csv.reader([cut]), [])

    def key_of(line: str, idx):
        fields = next(csv.reader([line]), [])
        return tuple(fields[i] if i < len(fields) else None for i in idx)

    moved = [cut]
    # Lines of the cut block: same key as the cut line where its key is whole (a comma follows the last key
    # column; a filled column, last in the row, left aside: its block's other lines share it), else the same key
    # as the last full line.
    key_whole = len(cut_fields) > max(core_idx) + 1
    idx = core_idx if key_whole else key_idx
    ref = key_of(cut, idx) if key_whole else (key_of(lines[-1], idx) if len(lines) > 1 else None)
    while len(lines) > 1 and ref is not None and key_of(lines[-1], idx) == ref:
        moved.insert(0, lines.pop())
    with open(str(path) + ".partial", "a") as fh:
        fh.write("\n".join(moved) + "\n")
    kept = [line for line in lines if line]  # the header (if whole) and every complete row
    tmp = Path(str(path) + ".tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    os.replace(tmp, path)
    return len(moved)


def append_rows(path: Path, schema: Schema, rows: Sequence[Mapping]) -> None:
    """Append one block of rows atomically: a single write under an exclusive lock, then fsync.
    A cut block left by an earlier killed writer is moved aside first (`repair_tail`). A file written before the
    schema's `filled` columns keeps its layout while the rows hold their fill values (a batch-1 row is appended as
    such a file's rows are); the first row that does not is preceded by `add_filled_columns`."""
    if not rows:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    repair_tail(path, schema)
    legacy = file_layout(path, schema) == "legacy"
    if legacy and not all(all(row.get(c, v) == v for c, v in schema.filled) for row in rows):
        add_filled_columns(path, schema)  # the first row that needs a filled column gives the file its columns
        legacy = False
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = to_csv_text(schema, rows, header=os.fstat(fd).st_size == 0, legacy=legacy).encode()
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
        os.fsync(fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _convert(value: str, kind: str):
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    return value


def read_csv(path: Path, schema: Schema | None = None) -> pd.DataFrame:
    """Read and validate one raw CSV. Any defect raises SchemaError naming file, line and column,
    with how to fix it; nothing is silently dropped. A file written before the schema's `filled` columns reads
    with their values (FILLED_BATCH: batch 1)."""
    path = Path(path)
    schema = schema or schema_for(path.stem)
    names = schema.names
    reader = csv.reader(io.StringIO(_whole_text(path)))
    try:
        header = next(reader)
    except StopIteration:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in names})
    _check_header(path, header, schema)
    legacy = header != names
    if legacy:
        names = schema.legacy_names
    records = []
    seen: dict[tuple, int] = {}  # every field of a line -> its first line
    named: dict[tuple, int] = {}  # its run, cell, row and status -> its first line
    identity = [names.index(c) for c in dict.fromkeys(("run_id", *schema.key, *schema.row_id, "status")) if c in names]
    for lineno, fields in enumerate(reader, start=2):
        _check_line(path, lineno, fields, names, identity, seen, named)
        records.append(_parsed_row(path, lineno, dict(zip(names, fields)), schema))
    frame = pd.DataFrame.from_records(records, columns=names)
    if legacy:  # a file written before the filled columns: each row takes their values, in the schema's order
        frame = frame.assign(**dict(schema.filled))[schema.names]
    for name, kind in schema.columns:
        if kind == "float":
            frame[name] = pd.to_numeric(frame[name], errors="raise").astype(float)
    return frame


def _whole_text(path: Path) -> str:
    """The file's text, refused when its last line is cut (no final newline)."""
    with open(path, newline="") as fh:
        text = fh.read()
    if text and not text.endswith("\n"):
        raise SchemaError(
            f"{path}:{text.count(chr(10)) + 1}: the last line is incomplete (a sweep killed while writing?). "
            f"Run `python -m decodegap check --repair` to move the cut block into {path.name}.partial; "
            "the next sweep measures that cell again. A file cut in copying or editing, not by a killed sweep, is "
            f"restored from git instead (git checkout -- {path.name}): the repair keeps only the lines before the cut."
        )
    return text


def _check_header(path: Path, header: list[str], schema: Schema) -> None:
    """The header must be the schema's columns, in order (or, for a file written before its `filled` columns, the
    columns less those)."""
    names = schema.names
    if header != names and not (schema.filled and header == schema.legacy_names):
        extra = [c for c in header if c not in names]
        missing = [c for c in names if c not in header]
        raise SchemaError(
            f"{path}:1: header does not match the {schema.experiment} schema "
            f"(missing {missing}, unexpected {extra}); expected columns: {','.join(names)}"
        )


def _check_line(path: Path, lineno: int, fields: list[str], names, identity: list[int], seen: dict,
                named: dict) -> None:
    """A line repeats no earlier line, whole (`seen`) or by its identity columns (`named`: the same run, cell and
    row with other values), and has one field per column."""
    first = seen.setdefault(tuple(fields), lineno)
    if first != lineno:
        raise SchemaError(f"{path}:{lineno}: every column repeats line {first} (a duplicated row, which would "
                          "count twice in every median); remove one of the two lines")
    if len(fields) == len(names):
        first = named.setdefault(tuple(fields[i] for i in identity), lineno)
        if first != lineno:
            raise SchemaError(f"{path}:{lineno}: column {names[identity[-2]]!r} repeats the row of line {first}: "
                              "the same run, cell and row written twice with other values; keep the right one")
    if len(fields) != len(names):
        column = names[len(fields)] if len(fields) < len(names) else f"(extra field {len(fields)})"
        raise SchemaError(
            f"{path}:{lineno}: {len(fields)} fields where {len(names)} are expected; "
            f"first missing column: {column!r}. Fix or remove that line."
        )


def _parsed_row(path: Path, lineno: int, row: dict[str, str], schema: Schema) -> dict:
    """One line's values converted to their column's kind: a known status, an empty value only where the schema
    allows one, and on a measured (ok, warmup) row finite numbers, times above zero."""
    status = row.get("status", "ok")
    if status not in STATUSES:
        raise SchemaError(
            f"{path}:{lineno}: column 'status' is {status!r}; expected one of {STATUSES}"
        )
    kinds = dict(schema.columns)
    out = {}
    for name in row:  # the file's columns (a legacy file lacks the filled ones: read_csv adds them)
        value = row[name]
        if value == "":
            if name in schema.optional_when_not_ok and status not in ("ok", "warmup"):
                out[name] = None
                continue
            if name in schema.nan_when_empty:
                out[name] = None
                continue
            if kinds[name] == "str" and name in ("reason",):
                out[name] = ""
                continue
            raise SchemaError(f"{path}:{lineno}: column {name!r} is empty on a {status!r} row")
        try:
            out[name] = _convert(value, kinds[name])
        except ValueError:
            raise SchemaError(
                f"{path}:{lineno}: column {name!r} holds {value!r}, not a {kinds[name]}"
            ) from None
        if kinds[name] == "float" and status in ("ok", "warmup"):
            _check_measured(path, lineno, name, value, out[name], status, schema)
    return out


def _check_measured(path: Path, lineno: int, name: str, value: str, number: float, status: str,
                    schema: Schema) -> None:
    """A measured row's number is finite (unless its column may be NaN) and a time or rate is above zero."""
    if not math.isfinite(number) and name not in schema.nan_when_empty:
        raise SchemaError(f"{path}:{lineno}: column {name!r} holds {value!r} on a {status!r} row; a "
                          "measured value is a finite number (a failed measurement is a row whose "
                          "status says why, e.g. error, with the value left empty)")
    if name in schema.times and not number > 0:
        raise SchemaError(f"{path}:{lineno}: column {name!r} holds {value!r} on a {status!r} row; a "
                          "time or rate is above zero (fix or remove that line)")


def load_experiment(experiment: str, data: Path, gpus: Iterable[str] | None = None) -> pd.DataFrame:
    """Every GPU's rows of one experiment under `data/raw/*/<experiment>.csv`, validated, concatenated."""
    schema = schema_for(experiment)
    frames = []
    for csv_path in sorted(Path(data, "raw").glob(f"*/{experiment}.csv")):
        if gpus is not None and csv_path.parent.name not in set(gpus):
            continue
        frames.append(read_csv(csv_path, schema))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in schema.names})
    return pd.concat(frames, ignore_index=True)
