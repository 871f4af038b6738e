"""From a claim to its re-measurement: for each rule of the registry, the notebook whose rows it reads, the one
command that measures those rows again on a reviewer's GPU (its parameters the plans of the runs the rule reads,
from data/raw/<gpu>/env.json), and the GPU time those runs took here (each run from its start, its id's timestamp,
to the last time its env.json entry records: the sessions' and the GPU state's `time` after the run).

A rule that reads no raw rows (arithmetic on the paper's numbers, the model configs or the specs) needs no GPU: its
command is `make reproduce`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from decodegap.claims import rules
from decodegap.records import run_started

NOTEBOOK_OF_FILE = {"ab.csv": "02_cuda_graphs_ab", "attention.csv": "03_attention_backends",
                    "verify.csv": "04_quantisation_l4", "breakdown.csv": "06_closing_the_gap"}
"""The notebook that measures each raw file's rows (decode.csv: the notebook its selector names)."""
COMMAND = {
    "01_roofline": "measure --bandwidth",
    "02_cuda_graphs_ab": "cuda-graphs-ab",
    "03_attention_backends": "attention-backends",
    "04_quantisation_l4": "quantisation",
    "06_closing_the_gap": "closing-the-gap",
    "07_where_the_thesis_ends": "where-the-thesis-ends",
}
"""The CLI subcommand that measures a notebook's rows (`python -m decodegap <command> --help`)."""
NO_GPU = "make reproduce"


def notebook_of(rule: rules.Rule) -> str:
    """The notebook whose measured rows `rule` reads ('05_cost' for a rule that reads none: the claims notebook)."""
    for rows in rule.rows:
        if rows.file in NOTEBOOK_OF_FILE:
            return NOTEBOOK_OF_FILE[rows.file]
        if rows.file == "decode.csv":
            return ("04_quantisation_l4" if "notebook 04" in rows.selector else
                    "07_where_the_thesis_ends" if "notebook 07" in rows.selector else "01_roofline")
    return "05_cost"


def _env(data) -> dict:
    out = {}
    for path in sorted(Path(data, "raw").glob("*/env.json")):
        out.update(json.loads(path.read_text()))
    return out


def run_seconds(run_id: str, entry: dict) -> float | None:
    """Seconds from a run's start (its id) to the last `time` its env.json entry records; None when it records none."""
    times = []
    for state in [entry.get("gpu_state_after"), *[s.get("after") for s in (entry.get("sessions") or {}).values()
                                                  if isinstance(s, dict)]]:
        if isinstance(state, dict) and state.get("time"):
            times.append(pd.Timestamp(state["time"]).tz_convert("UTC").tz_localize(None))
    started = run_started(run_id)
    if not times or started is None:
        return None
    return max(0.0, (max(times) - started).total_seconds())


def _listed(values) -> str:
    return ",".join(str(v) for v in dict.fromkeys(values))


def command(notebook: str, plans: list[dict]) -> str:
    """The one command that measures `notebook`'s rows again, with the models, contexts (and arms, paths) of the plans
    of the runs read; `<gpu>` is the reviewer's GPU key (`python -m decodegap gpus`)."""
    if notebook not in COMMAND:
        return NO_GPU
    if notebook == "07_where_the_thesis_ends":
        return _axis_commands(plans)
    parts = [f"python -m decodegap {COMMAND[notebook].split()[0]} --gpu <gpu>"]
    models = [m for p in plans for m in (p.get("models") or [])]
    contexts = sorted({int(c) for p in plans for c in (p.get("contexts") or [])})
    if models:
        parts.append(f"--models {_listed(sorted(set(models)))}")
    if contexts:
        parts.append(f"--contexts {_listed(contexts)}")
    if notebook == "01_roofline":
        arms = sorted({a for p in plans for a in (p.get("arms") or [])})
        if arms:
            parts.append(f"--arms {_listed(arms)}")
        sessions = max((int(p.get("sessions") or 0) for p in plans), default=0)
        if sessions:
            parts.append(f"--sessions {sessions}")
    if notebook == "04_quantisation_l4":
        quant_paths = sorted({q for p in plans for q in ([p["quant"]] if isinstance(p.get("quant"), str) else [])} - {"bf16"})
        if quant_paths:
            parts.append(f"--paths {_listed(quant_paths)}")
    parts += COMMAND[notebook].split()[1:]
    return " ".join(parts)


def _axis_commands(plans: list[dict]) -> str:
    """Notebook 07's commands, one per axis its plans measured (`--axis batch` where a plan decodes more
    than one sequence, else `--axis size`), each with the plans' models, contexts and batches."""
    head = f"python -m decodegap {COMMAND['07_where_the_thesis_ends']}"
    by_axis: dict[str, list[dict]] = {}
    for p in plans:
        by_axis.setdefault("batch" if max(p.get("batches") or [1]) > 1 else "size", []).append(p)
    out = []
    for axis, group in sorted(by_axis.items()):
        models = sorted({m for p in group for m in (p.get("models") or [])})
        contexts = sorted({int(c) for p in group for c in (p.get("contexts") or [])})
        batches = sorted({int(b) for p in group for b in (p.get("batches") or [])})
        out.append(f"{head} --axis {axis} --gpu <gpu>" + (f" --models {_listed(models)}" if models else "")
                   + (f" --contexts {_listed(contexts)}" if contexts else "")
                   + (f" --batches {_listed(batches)}" if axis == "batch" and batches else ""))
    return "; ".join(out) or f"{head} --axis batch --gpu <gpu>; {head} --axis size --gpu <gpu>"


def gpu_time(seconds: list[float | None]) -> str:
    """The runs' GPU time in words: '1 h 12 min over 9 runs' ('none' without runs)."""
    if not seconds:
        return "none"
    known = [s for s in seconds if s is not None]
    minutes = max(round(sum(known) / 60), 1)  # rounded once, so 179.7 min reads 3 h 0 min, never 3 h 60 min
    hours, rest = divmod(minutes, 60)
    text = f"{hours} h {rest} min" if hours else f"{minutes} min"
    text += f" over {len(seconds)} run{'s' if len(seconds) != 1 else ''}"
    return text + (f" ({len(seconds) - len(known)} without an end time)" if len(known) < len(seconds) else "")


def columns(runs) -> pd.DataFrame:
    """One row per rule: id, notebook, remeasure (the command), gpu_time (here, from env.json). `runs`:
    claims.provenance.Runs of the data folder."""
    env = _env(runs.data)
    out = []
    for rule in rules.RULES:
        notebook = notebook_of(rule)
        ids = sorted(runs.of_rule(rule))
        plans = [env[i]["plan"] for i in ids if isinstance((env.get(i) or {}).get("plan"), dict)]
        out.append(dict(id=rule.id, notebook=notebook, remeasure=command(notebook, plans) if ids else NO_GPU,
                        gpu_time=gpu_time([run_seconds(i, env[i]) if i in env else None for i in ids])))
    return pd.DataFrame(out)
