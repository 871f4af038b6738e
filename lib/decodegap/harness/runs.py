"""Run records. A run is one measuring command: every row it writes carries its id, and data/raw/<gpu>/env.json
keeps under that id this machine's environment, what the command measured and the GPU's state around it. A run
that fails before any of its rows reached a CSV leaves no entry behind.
"""

from __future__ import annotations

import json
import os
import signal
import threading
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
    it (gpu_state_after) and how many rows the run left in each of `experiments`' CSVs (rows_written), which `check`
    holds the files to: fewer rows of the run than that is a file cut or edited since. A block stopped with rows
    kept (SIGTERM from a step's time limit, Ctrl-C, an error) records `stopped` (stop_record) and its rows_written
    as it stops (since 2026-12-06; until then such a run kept neither), and no gpu_state_after."""
    folder = paths.raw_dir(gpu, data)

    def rows_written() -> dict:
        return {e: rows_of_run(folder / f"{e}.csv", run_id) for e in experiments}

    with stopping_on_sigterm():  # around the records too: the stop is written before a repeated SIGTERM could kill
        run_id = None
        try:
            run_id = start_run(gpu, data, experiment, device=device, **fields)
            yield run_id
        except BaseException as exc:
            if run_id is not None and not discard_run(gpu, data, run_id, experiments):
                update_env(gpu, data, run_id, stopped=stop_record(exc), rows_written=rows_written())
            raise
        update_env(gpu, data, run_id, gpu_state_after=hardware.gpu_state(), rows_written=rows_written())


class Stopped(SystemExit):
    """A run's process asked to stop by a signal (bench/measure.sh's STEP_TIMEOUT sends SIGTERM through `timeout`):
    raised in the main thread by `stopping_on_sigterm`, so the run records where it stopped; exits 128 + the signal's
    number, as a process killed by it would."""

    def __init__(self, signum: int):
        self.signal_name = signal.Signals(signum).name
        super().__init__(128 + signum)


REPEAT_GRACE_S = 30.0
"""After a first SIGTERM, how long a repeated one is ignored: `timeout` signals its command, then the command's whole
process group, so the process that measures gets SIGTERM twice at once, and a second one handled after the first
killed it before it recorded its stop (run 20261206T234930-3041a6 on the H100, stopped by the step limit as it
began, kept its entry and no stop record; the handler was also set only after the entry was written). One after this
long kills, as SIGTERM did before."""


@contextmanager
def stopping_on_sigterm(grace_s: float | None = None):
    """Inside the block SIGTERM raises Stopped in the main thread, once: a repeated SIGTERM within `grace_s` (default
    REPEAT_GRACE_S) of the first is ignored while the stop unwinds and is recorded, and one after that puts the
    default back and kills, as before. Elsewhere, or outside the main thread, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    grace_s = REPEAT_GRACE_S if grace_s is None else grace_s
    first_at = None  # when the first SIGTERM came

    def stop(signum, frame):
        nonlocal first_at
        if first_at is None:
            first_at = time.monotonic()
            raise Stopped(signum)
        if time.monotonic() - first_at > grace_s:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is stop:
            signal.signal(signal.SIGTERM, previous)


def stop_record(exc: BaseException) -> dict:
    """What env.json keeps of a run (or session) that stopped before its end with its rows kept: `by` (the signal,
    SIGTERM from a step's time limit or SIGINT from Ctrl-C, else the exception's type and message), `at` (local time)
    and the GPU's state then (`gpu_state`). Unlike `gpu_state_after`, which only a run that reached its end has."""
    if isinstance(exc, Stopped):
        by = exc.signal_name
    elif isinstance(exc, KeyboardInterrupt):
        by = "SIGINT"
    else:
        by = f"{type(exc).__name__}: {str(exc)[:300]}"
    return {"by": by, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "gpu_state": hardware.gpu_state()}


def rows_of_run(path, run_id: str, session: int | None = None) -> int:
    """The rows of `run_id` in one raw CSV (every schema's first column is run_id), of its `session` only where given
    (the sweeps' schemas, decode and ab, have `session` second); 0 where the file is absent."""
    if not path.exists():
        return 0
    prefix = run_id + "," + ("" if session is None else f"{session},")
    with open(path) as fh:
        return sum(1 for line in fh if line.startswith(prefix))


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


ENV_FIELDS = hardware.ENV_FIELDS  # every field code writes into an env.json entry (update_env refuses others)


def update_env(gpu: str, data, run_id: str, **fields) -> None:
    """Merge `fields` into env.json[run_id] of this GPU's folder (atomic replace); a field not in ENV_FIELDS is
    refused (ValueError) before anything is written."""
    unknown = sorted(set(fields) - ENV_FIELDS)
    if unknown:
        raise ValueError(f"env.json takes no field {unknown}: add it to runs.ENV_FIELDS with the code that writes it")
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


def merge_runs(src, dst) -> dict:
    """Bring the rows and env.json entries of runs measured on another of your machines (`src`: that machine's
    data/raw/<gpu> folder, e.g. bench/measure.sh's OUTDIR/raw-GPU.tgz unpacked) into `dst` (this checkout's
    data/raw/<gpu>), as the runs wrote them: per CSV the rows of the runs `dst` lacks, appended in their order
    (records.append_rows: validated against the schema), and their env.json entries, unchanged. An entry or row of
    a run `dst` holds already is left as it is; an entry that differs from `dst`'s is refused (ValueError) before
    anything is written. Returns {file: rows or entries added}."""
    from pathlib import Path

    from decodegap import records

    src, dst = Path(src), Path(dst)
    if not (src / "env.json").is_file():
        raise ValueError(f"{src} has no env.json: the runs behind its rows are unrecorded (a GPU folder of "
                         "measure.sh's tarball holds one beside its CSVs); copy the whole folder again; nothing merged")
    try:
        theirs = json.loads((src / "env.json").read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{src / 'env.json'}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno}); copy it "
                         "again from the machine that measured it; nothing merged") from None
    if not isinstance(theirs, dict):
        raise ValueError(f"{src / 'env.json'}: an object {{run id: entry}} is expected; nothing merged")
    ours = json.loads((dst / "env.json").read_text()) if (dst / "env.json").exists() else {}
    differ = sorted(r for r in theirs if r in ours and theirs[r] != ours[r])
    if differ:
        raise ValueError(f"env.json entries differ between {src} and {dst}: {differ[:5]}; nothing merged")
    new_runs = [r for r in theirs if r not in ours]
    bad = sorted(set(k for r in new_runs for k in theirs[r]) - ENV_FIELDS)
    if bad:
        raise ValueError(f"the entries of {src} hold fields no code writes ({bad}); nothing merged")
    added, blocks = {}, []
    for path in sorted(src.glob("*.csv")):
        schema = records.schema_for(path.stem)
        rows = records.read_csv(path, schema)
        known = set(records.read_csv(dst / path.name, schema)["run_id"]) if (dst / path.name).exists() else set()
        fresh = rows[rows["run_id"].isin(new_runs) & ~rows["run_id"].isin(known)]
        if not fresh.empty:
            blocks.append((dst / path.name, schema, fresh))
    for target, schema, fresh in blocks:
        records.append_rows(target, schema, [{c: (None if pd_isna(v) else v) for c, v in r.items()}
                                             for r in fresh.to_dict("records")])
        added[target.name] = len(fresh)
    if new_runs:
        ours.update({r: theirs[r] for r in new_runs})
        tmp = (dst / "env.json").with_suffix(".json.tmp")
        tmp.write_text(json.dumps(ours, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, dst / "env.json")
        added["env.json"] = len(new_runs)
    return added


def merge_tarball(tarball, raw_dir, known_gpus) -> dict:
    """merge_runs of each GPU folder in `tarball` (bench/measure.sh's OUTDIR/raw-GPU.tgz: <gpu>/<files>) into
    `raw_dir`/<gpu>, unpacked in a temporary folder first. Refused (ValueError), before anything is written, for a
    tarball that cannot be read to its end (cut while copying), a member outside a GPU folder or a path that leaves
    it, or a GPU key not in `known_gpus` (the registry). Returns {gpu: merge_runs' result}. Its result is not checked
    as a whole (merge_sources is, and `merge-runs` calls that)."""
    import tempfile
    from pathlib import Path

    raw_dir = Path(raw_dir)
    with tempfile.TemporaryDirectory() as tmp:
        folders = unpack(tarball, Path(tmp), known_gpus)
        return {gpu: merge_runs(folder, _made(raw_dir / gpu)) for gpu, folder in folders.items()}


def unpack(tarball, into, known_gpus) -> dict:
    """{gpu: its folder} of bench/measure.sh's tarball (<gpu>/<files>) unpacked under `into`; ValueError for a tarball
    that cannot be read to its end (cut while copying), a member outside a GPU folder or a path that leaves it, or a
    GPU key not in `known_gpus`."""
    import tarfile
    from pathlib import Path, PurePosixPath

    tarball, into = Path(tarball), Path(into)
    try:
        with tarfile.open(tarball, "r:*") as tar:
            members = tar.getmembers()  # reads to the end: a cut tarball fails here
            gpus = set()
            for m in members:
                parts = PurePosixPath(m.name).parts
                if m.name.startswith("/") or ".." in parts or not (m.isdir() or m.isfile()) or \
                        (m.isfile() and len(parts) != 2):
                    raise ValueError(f"{tarball}: member {m.name!r} is not a file of a GPU folder "
                                     "(<gpu>/<file>); nothing merged")
                gpus.add(parts[0])
            unknown = sorted(gpus - set(known_gpus))
            if unknown:
                raise ValueError(f"{tarball} holds rows of GPU keys {unknown} that are not in data/specs/gpus.csv "
                                 "(add the GPU there first); nothing merged")
            tar.extractall(into, members=members, filter="data")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ValueError(f"{tarball} cannot be read to its end ({exc}): copy it again; nothing merged") from None
    return {gpu: into / gpu for gpu in sorted(gpus)}


def merge_sources(sources, data) -> list:
    """Every source (measure.sh's tarballs, or unpacked data/raw/<gpu> folders) merged into the data folder `data`'s
    raw/ whole or not at all: each merged, in order, into a copy of the GPU folders it touches; each copy then checked
    as replay checks a GPU's folder (validate: the folder's key, every row of its GPU, every run on its device, every
    recorded session with its rows, ...); only then are the changed files moved into place. Any refusal (ValueError or
    InputError, the staging copy's paths written as the data folder's) leaves data/raw as it was. Returns
    [(source, gpu, merge_runs' result)]."""
    import shutil
    import tempfile
    from pathlib import Path

    from decodegap import validate
    from decodegap.inputs import InputError

    data, sources = Path(data), [Path(s) for s in sources]  # read twice: once to merge, once to name them
    raw = data / "raw"
    known = set(hardware.specs_table(data)["gpu"])  # the tarballs' keys
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / "data"
        (stage / "raw").mkdir(parents=True)
        shutil.copytree(data / "specs", stage / "specs")
        plans = []
        for i, source in enumerate(sources):
            if source.is_dir():
                validate.gpu_key(source.name, data, where=f"the folder {source}")  # an unknown key, with its hint
                plans.append((source, source.name, source))
            elif source.is_file():
                plans += [(source, gpu, folder) for gpu, folder in unpack(source, Path(tmp) / f"source{i}", known).items()]
            else:
                raise ValueError(f"{source} does not exist; nothing merged")
        gpus = sorted({gpu for _, gpu, _ in plans})
        for gpu in gpus:
            if (raw / gpu).is_dir():
                shutil.copytree(raw / gpu, stage / "raw" / gpu)
            else:
                (stage / "raw" / gpu).mkdir()
        try:
            done = [(source, gpu, merge_runs(folder, stage / "raw" / gpu)) for source, gpu, folder in plans]
            for gpu in gpus:
                for step in validate.gpu_folder_checks(stage / "raw" / gpu):
                    step()
        except (ValueError, InputError) as exc:
            text = str(exc).replace(str(stage), str(data))
            for i, source in enumerate(sources):
                text = text.replace(str(Path(tmp) / f"source{i}"), f"{source} (unpacked)")
            raise InputError(f"merging {', '.join(map(str, sources))} would leave this: {text}; nothing merged") \
                from None
        for gpu, name in sorted({(gpu, name) for _, gpu, added in done for name in added}):  # the files merged into
            target = raw / gpu / name
            target.parent.mkdir(parents=True, exist_ok=True)
            part = target.with_name(name + ".merging")
            shutil.copy2(stage / "raw" / gpu / name, part)
            os.replace(part, target)
    return done


def _made(path):
    path.mkdir(parents=True, exist_ok=True)
    return path


def pd_isna(value) -> bool:
    """A missing CSV cell as pandas reads it (None or NaN)."""
    return value is None or (isinstance(value, float) and value != value)
