"""Run records. A run is one measuring command: every row it writes carries its id, and data/raw/<gpu>/env.json
keeps under that id this machine's environment, what the command measured and the GPU's state around it. A run
that fails before any of its rows reached a CSV leaves no entry behind.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from contextlib import contextmanager

from decodegap.harness import decode, keys
from decodegap import hardware, paths


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


def start_run(gpu: str, data, experiment: str, device: str | None = None, **fields) -> str:
    """A new run id, with this machine's environment (and `fields`) recorded under it in env.json. With `device`,
    the GPU key is first checked against the device measured (keys.gpu_to_measure): a CPU's timings, or another
    GPU's, never get a run under this key."""
    if device is not None:
        keys.gpu_to_measure(gpu, device, data)
    run_id = new_run_id()
    update_env(gpu, data, run_id, **hardware.environment(), experiment=experiment,
               compile_settings=decode.compile_settings(), **fields)
    return run_id


@contextmanager
def recorded(gpu: str, data, experiment: str, experiments, device: str | None = None, **fields):
    """A new run of `experiment` (start_run, with `device` and `fields`) for the rows written inside the block: its
    id is what `with` gives. A block that raises leaves no env.json entry unless a row of the run reached one of
    `experiments`' CSVs (discard_run), and the exception goes on; a block that ends records the GPU's state after
    it (gpu_state_after)."""
    run_id = start_run(gpu, data, experiment, device=device, **fields)
    try:
        yield run_id
    except BaseException:
        discard_run(gpu, data, run_id, experiments)
        raise
    update_env(gpu, data, run_id, gpu_state_after=hardware.gpu_state())


def discard_run(gpu: str, data, run_id: str, experiments) -> bool:
    """Remove env.json[run_id] when no row of `run_id` reached any of `experiments`' CSVs (a run that failed
    before it measured anything leaves no entry behind); returns whether it was removed."""
    folder = paths.raw_dir(gpu, data)
    for experiment in experiments:
        path = folder / f"{experiment}.csv"
        if path.exists() and run_id in path.read_text():
            return False
    path = folder / "env.json"
    if not path.exists():
        return False
    env = json.loads(path.read_text())
    if env.pop(run_id, None) is None:
        return False
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(env, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return True


def update_env(gpu: str, data, run_id: str, **fields) -> None:
    """Merge `fields` into env.json[run_id] of this GPU's folder (atomic replace)."""
    path = paths.raw_dir(gpu, data) / "env.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    env = json.loads(path.read_text()) if path.exists() else {}
    entry = env.setdefault(run_id, {})
    for k, v in fields.items():
        if isinstance(v, dict) and isinstance(entry.get(k), dict):
            entry[k].update(v)
        else:
            entry[k] = v
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(env, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)
