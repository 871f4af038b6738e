"""The data folder checked whole before `reproduce` writes anything: every file the notebooks will read, each raw
CSV against its schema (records.read_csv), none of them empty or header-only, every env.json's structure
(hardware.read_env) with each run id the rows name, the registry files (specs/, published/, models/), and, in
replay, that every notebook to run has the rows it reads. Any defect is one inputs.InputError naming the file, the
line and what to do; `check` runs the same file checks (`file_problems`)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, NamedTuple

if TYPE_CHECKING:
    import pandas as pd

from decodegap import inputs
from decodegap.inputs import InputError

REGISTRY_COLUMNS = {
    "specs/gpus.csv": ("gpu", "name", "architecture", "bandwidth_gbps", "device_names"),
    "specs/prices.csv": ("gpu", "provider", "usd_per_hour"),
    "published/paper.csv": ("claim", "quantity", "gpu", "model", "ctx", "value", "unit"),
}
"""Registry files every notebook reads (below the data folder) and the columns the code reads of each."""

class Number(NamedTuple):
    """What a registry column's fields must be: a number, `positive` (> 0) or any, and `may_be_empty` or not."""

    positive: bool
    may_be_empty: bool

    @property
    def what(self) -> str:
        return "positive number" if self.positive else "number"


NUMBER_COLUMNS = {
    "specs/gpus.csv": {"bandwidth_gbps": Number(positive=True, may_be_empty=False)},
    "specs/prices.csv": {"usd_per_hour": Number(positive=True, may_be_empty=True)},
    "published/paper.csv": {"value": Number(positive=False, may_be_empty=True)},
}
"""Registry columns whose fields the code reads as numbers (_csv_lines): a datasheet bandwidth must be a positive
number in every row, an hourly price a positive number where given (empty: no source found, named unpriced), a
published value a number where given. A word there (`abc`, `0.80/hr`) failed
only inside notebook 05 as a float conversion (2026-12-07)."""

MODEL_FIELDS = ("key", "name", "source", "config")

READS = {
    "01_roofline": ("decode", "bandwidth"),
    "02_cuda_graphs_ab": ("ab",),
    "03_attention_backends": ("attention",),
    "04_quantisation_l4": ("decode", "verify"),
    "05_cost": ("decode",),
    "06_closing_the_gap": ("decode", "breakdown"),
    "07_where_the_thesis_ends": ("decode",),
}
"""Raw experiments whose rows each notebook needs in replay (on at least one GPU): without them its tables and
figures would be empty, silently. Every other raw CSV is optional, but checked whole when present."""


def _csv_lines(path: Path, columns: Iterable[str], numbers: dict | None = None) -> None:
    """A registry CSV: the columns the code reads in its header, every line as many fields, at least one row, and
    each of `numbers` ({column: Number}: NUMBER_COLUMNS) a number as its Number says."""
    text = path.read_text()
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise InputError(f"{path}:1: empty file; it needs a header ({','.join(columns)}) and rows. Restore it "
                         "from the repository's data/ (git checkout data/)")
    header = rows[0]
    missing = [c for c in columns if c not in header]
    if missing:
        raise InputError(f"{path}:1: header lacks column(s) {missing}; expected at least {','.join(columns)}")
    if len(rows) < 2:
        raise InputError(f"{path}:2: header only, no rows; restore the file from the repository's data/")
    for lineno, fields in enumerate(rows[1:], start=2):
        if fields and len(fields) != len(header):
            raise InputError(f"{path}:{lineno}: {len(fields)} fields where the header has {len(header)}; fix or "
                             "remove that line")
        for column, number in (numbers or {}).items():
            field = fields[header.index(column)].strip() if fields else ""
            if not fields or (not field and number.may_be_empty):
                continue
            try:
                value = float(field)
            except ValueError:
                value = None
            if value is None or value != value or (number.positive and not value > 0):
                raise InputError(f"{path}:{lineno}: column {column} holds {field!r}, not a {number.what}; fix that "
                                 "field (a plain number, no unit) or restore the file from git")


def _json(path: Path, text: str | None = None):
    """A JSON file's value (`text`: its contents where read already); invalid JSON is an InputError naming the line
    and column."""
    try:
        return json.loads(path.read_text() if text is None else text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno}); fix that line, or "
                         "restore the file from git") from None


def _line_of(text: str, needle: str) -> int:
    at = text.find(needle)
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


def check_env(path: Path) -> dict:
    """One env.json (and the corrections.json beside it) as hardware.read_env checks them, each error with its line."""
    from decodegap import hardware

    text = path.read_text()  # read once: parsed here, its structure checked by hardware.env_entries
    value = _json(path, text)
    if not isinstance(value, dict):
        raise InputError(f"{path}:1: an object {{run id: entry}} is expected, got a JSON {type(value).__name__}; "
                         "restore the file from git (a sweep writes it, never by hand)")
    try:
        env = hardware.env_entries(path, value)
    except hardware.EnvError as exc:
        run = next((r for r in value if f"{r!r}" in str(exc) or f"run {r}" in str(exc)), None)
        line = _line_of(text, f'"{run}"') if run else 1
        raise InputError(f"{path}:{line}: {str(exc).removeprefix(f'{path}: ')}") from None
    return env


def check_corrections(env_path: Path, env: dict) -> dict:
    """The corrections.json beside `env_path` (hardware.read_corrections), each error with its line."""
    from decodegap import hardware

    fixes = env_path.with_name("corrections.json")
    if not fixes.exists():
        return {}
    value = _json(fixes)
    try:
        return hardware.read_corrections(fixes, env)
    except hardware.EnvError as exc:
        run = next((r for r in (value if isinstance(value, dict) else ()) if f"run {r}" in str(exc)), None)
        line = _line_of(fixes.read_text(), f'"{run}"') if run else 1
        raise InputError(f"{fixes}:{line}: {str(exc).removeprefix(f'{fixes}: ')}") from None


def runs_recorded(env_path: Path, env: dict, frames: dict) -> None:
    """Every run id of the rows (`frames`: {csv path: its rows}) has an entry in env.json; the first that has none is
    an InputError naming the CSV's line."""
    for path, frame in sorted(frames.items()):
        unknown = frame.index[~frame["run_id"].isin(set(env))]
        if len(unknown):
            i = int(unknown[0])
            raise InputError(f"{path}:{i + 2}: run {frame['run_id'].iloc[i]} has no entry in {env_path}; restore "
                             "env.json from git, or remove that run's rows")


def env_checks(env_path: Path, env: dict, frames: dict) -> dict:
    """A GPU folder's env.json (`env`, check_env's) against the rows beside it (`frames`: {csv path: its rows}) and
    the GPU its folder names: runs_recorded, devices_of_the_folder, files_of_recorded_runs, sessions_have_rows,
    runs_keep_their_rows, then check_corrections, whose reviewed corrections it returns. Replay, `check` and
    `merge-runs` all run it."""
    runs_recorded(env_path, env, frames)
    devices_of_the_folder(env_path, env)
    files_of_recorded_runs(env_path, env, frames)
    sessions_have_rows(env_path, env, frames)
    runs_keep_their_rows(env_path, env, frames)
    return check_corrections(env_path, env)


def runs_keep_their_rows(env_path: Path, env: dict, frames: dict) -> None:
    """Every run whose entry records the rows it left in each CSV (`rows_written`, written as the run ended; runs since
    2026-12-05, of every experiment: sweeps, profiles, attention, bandwidth, peers, quantisation checks) has at least
    that many rows in the CSV beside it (`frames`: {csv path: its rows}), where that CSV is there
    (files_of_recorded_runs refuses a missing one): a cut or edit anywhere in the file, even inside one session or in a
    run with no sessions, leaves fewer. The first such run is an InputError."""
    by_name = {p.stem: (p, f) for p, f in frames.items()}
    counts = {}
    for run, entry in sorted(env.items()):
        written = entry.get("rows_written") if isinstance(entry, dict) else None
        for experiment, n in sorted((written or {}).items()):
            if experiment not in by_name or not isinstance(n, int) or n <= 0:
                continue
            path, frame = by_name[experiment]
            if experiment not in counts:
                counts[experiment] = frame["run_id"].value_counts().to_dict()
            have = int(counts[experiment].get(run, 0))
            if have < n:
                raise InputError(f"{path}: {have} row(s) of run {run}, though {env_path} records {n} written: "
                                 + _lost_rows(path))


def folder_is_a_gpu(folder: Path) -> None:
    """A folder of raw/ is named by the registry key of the GPU whose runs it holds (its data folder's
    specs/gpus.csv), exactly as the registry spells it; anything else is an InputError (a wrong case gets its key
    suggested)."""
    data = folder.parent.parent
    try:
        gpu_key(folder.name, data, where=f"the folder {folder}")
    except InputError as exc:
        raise InputError(f"{folder}: a folder of {folder.parent} holds the runs of the GPU whose key names it; "
                         f"{exc}. Rename the folder to its GPU's key, add that GPU to specs/gpus.csv, or move the "
                         "folder out of raw/") from None


def rows_of_the_folder(folder: Path, frames: dict) -> None:
    """Every row of a GPU's folder (`frames`: {csv path: its rows}) names that GPU in its `gpu` column, exactly: a row
    of another key (another GPU's rows copied in, a key edited to another case) is an InputError naming its line."""
    for path, frame in sorted(frames.items()):
        if "gpu" not in frame:
            continue
        other = frame.index[frame["gpu"].astype(str) != folder.name]
        if len(other):
            i = int(other[0])
            raise InputError(f"{path}:{i + 2}: a row of GPU {frame['gpu'].iloc[i]!r} in {folder}, the folder of "
                             f"{folder.name!r} ({len(other)} such rows): every row there is that GPU's, by its exact "
                             "key. Restore the file from git; rows of another GPU belong in its own folder "
                             "(`python -m decodegap merge-runs`)")


def devices_of_the_folder(env_path: Path, env: dict) -> None:
    """Every run of a GPU's folder ran on that GPU: its env.json `device_name` is one of the key's `device_names` in
    specs/gpus.csv (a key whose architecture is cpu, the tests', is not held to it)."""
    from decodegap import hardware

    gpu, data = env_path.parent.name, env_path.parent.parent.parent
    try:
        spec = hardware.gpu_spec(gpu, data)
    except (hardware.UnknownGPUError, KeyError, ValueError):
        return  # folder_is_a_gpu names it
    if spec.architecture == "cpu":
        return
    for run, entry in sorted(env.items()):
        name = entry.get("device_name") if isinstance(entry, dict) else None
        if name and name not in spec.device_names:
            line = _line_of(env_path.read_text(), '"' + run + '"')
            raise InputError(f"{env_path}:{line}: run {run} ran on "
                             f"{name!r}, which is not {gpu!r} (its device_names in specs/gpus.csv: "
                             f"{', '.join(spec.device_names) or 'none'}): its rows are another GPU's. Restore "
                             "env.json and the rows from git; another GPU's runs belong in that GPU's folder")


def sessions_have_rows(env_path: Path, env: dict, frames: dict) -> None:
    """Every session env.json records (an entry's `sessions`, each written after the rows it counts: as its process
    reports, `finished` false, and when the process has ended, `finished` true) has rows in
    its experiment's CSV beside it (`frames`: {csv path: its rows}), where that CSV is there: a file cut at a line's end
    (a copy stopped, an edit, `check --repair` of a file cut far from its end) loses whole runs and sessions, which
    this finds; so does a session with fewer rows than its entry's `rows` (the rows its processes wrote, recorded by
    sweeps since 2026-12-05; older entries have none), which a cut or edit of part of a session leaves. A session whose
    entry records `rows` 0 (the run stopped in it before its first row) is expected to have none. Two kinds of
    runs left no rows there and are not refused: runs whose rows live in a file named after the experiment with a
    suffix (decode_synthesised_weights.csv: rows moved aside as their file was renamed), and runs whose every check
    (verify.csv) failed before a cell was timed. The first such session is an InputError."""
    by_name = {p.stem: (p, f) for p, f in frames.items()}
    verify = by_name.get("verify", (None, None))[1]
    seen = {}  # experiment: ({run: {its session: its rows}, None without a session column}, runs moved aside)
    for run, entry in sorted(env.items()):
        sessions = _sessions_with_rows(entry.get("sessions")) if isinstance(entry, dict) else None
        experiment = entry.get("experiment") if isinstance(entry, dict) else None
        if not sessions or experiment not in by_name:
            continue
        path, frame = by_name[experiment]
        if experiment not in seen:
            seen[experiment] = (_session_rows_by_run(frame), _moved_runs(experiment, frames))
        have, moved = seen[experiment]
        if run not in have:
            if run in moved:
                continue
            checks = verify[verify["run_id"] == run] if verify is not None else None
            if checks is not None and not checks.empty and (checks["status"] != "ok").all():
                continue
            raise InputError(f"{path}: no row of run {run}, though {env_path} records its session(s) "
                             f"{', '.join(sorted(map(str, sessions)))} as finished: " + _lost_rows(path))
        if have[run] is None:
            continue
        counted = have[run]
        lost = sorted(set(map(str, sessions)) - set(counted), key=int)
        if lost:
            raise InputError(f"{path}: no row of session {lost[0]} of run {run}, though {env_path} records it as "
                             "finished: " + _lost_rows(path))
        for number, entry_of_session in sorted(sessions.items() if isinstance(sessions, dict) else (),
                                               key=lambda kv: int(kv[0])):
            recorded = entry_of_session.get("rows") if isinstance(entry_of_session, dict) else None
            if isinstance(recorded, int) and counted.get(str(number), 0) < recorded:
                raise InputError(f"{path}: {counted.get(str(number), 0)} row(s) of session {number} of run {run}, "
                                 f"though {env_path} records {recorded} written: " + _lost_rows(path))


def _sessions_with_rows(sessions):
    """The sessions of an env.json entry that wrote rows: all but those whose entry records `rows` 0 (a session the
    run was stopped in before its first row: SIGTERM or a time limit, `stopped` in its entry)."""
    if not isinstance(sessions, dict):
        return sessions
    return {number: entry for number, entry in sessions.items()
            if not (isinstance(entry, dict) and entry.get("rows") == 0)}


def _lost_rows(path: Path) -> str:
    """The end of every refusal of a raw CSV that holds fewer rows than env.json records: what happened, and the fix."""
    return f"the file lost rows (cut, or edited). Restore it from git (git checkout -- {path.name})"


def _session_rows_by_run(frame: pd.DataFrame) -> dict:
    """{run id: {session number as text: its rows}} of one raw CSV's rows; None per run where the file has no session
    column."""
    if "session" not in frame:
        return dict.fromkeys(frame["run_id"])
    out: dict = {run: {} for run in frame["run_id"].unique()}
    for (run, number), n in frame.groupby(["run_id", "session"]).size().items():
        out[run][str(int(number))] = int(n)
    return out


def _moved_runs(experiment: str, frames: dict) -> set:
    """The runs with rows in a file named after `experiment` with a suffix (decode_synthesised_weights.csv: rows moved
    aside as their file was renamed), of `frames` ({csv path: its rows})."""
    return {run for path, frame in frames.items() if path.stem.startswith(experiment + "_")
            for run in set(frame["run_id"])}


def _wrote_its_own_file(entry: dict, experiment: str) -> bool:
    """Whether a run that ran to its end left rows in its experiment's own CSV: by its `rows_written` ({file stem:
    rows}, written as it ends) where it has one, else assumed (entries from before rows_written). A quant_layers run
    writes its checks to verify.csv alone (rows_written {'verify': n}), so no quant_layers.csv is owed for it."""
    written = entry.get("rows_written")
    if not isinstance(written, dict):
        return True
    return int(written.get(experiment, 0) or 0) > 0


def files_of_recorded_runs(env_path: Path, env: dict, frames: dict) -> None:
    """Every experiment a notebook reads (READS) whose runs env.json records, and whose rows those runs left in another
    CSV of the folder (`frames`: {csv path: its rows}; their checks in verify.csv, say), has its own CSV beside them:
    a GPU measured in part may lack a file, and a run killed before it wrote a row leaves only its entry, but a file its
    runs wrote rows beside is refused missing even where another GPU has one. So is a file of a run that ran to its end
    (its entry has `gpu_state_after`, written as the run ends, after its rows), rows elsewhere or not. The first such
    file is an InputError naming it, a run and the file that holds that run's other rows (or the run's end).
    Since 2026-12-05 every experiment with a schema is held to this, not only those a notebook reads (a deleted
    kernels.csv or peers.csv changed figures unrefused), by its runs that ran to their end alone, each where its
    rows_written names the file with rows (a quant_layers run leaves its checks in verify.csv and no file of its own:
    until 2026-12-06 such a run, the first since that change, refused its own merge); a run whose rows live in a
    file named after its experiment with a suffix (quant_layers_synthesised_weights.csv: rows moved aside as their
    file was renamed) is no evidence."""
    from decodegap import records

    read = {e for reads in READS.values() for e in reads}
    needed = sorted(read
                    | {e.get("experiment") for e in env.values() if isinstance(e, dict) and e.get("experiment")
                       and e["experiment"] in records.SCHEMAS})
    for experiment in needed:
        path = env_path.parent / f"{experiment}.csv"
        if path.is_file():
            continue
        moved = _moved_runs(experiment, frames)
        runs = {run for run, entry in env.items() if isinstance(entry, dict) and entry.get("experiment") == experiment
                and run not in moved}
        evidence = [(run, "run to its end (gpu_state_after)") for run in sorted(runs)
                    if "gpu_state_after" in env[run] and _wrote_its_own_file(env[run], experiment)]
        if experiment in read:
            evidence += [(run, f"with rows in {other.name}") for other, frame in sorted(frames.items())
                         for run in sorted(runs & set(frame["run_id"]))]
        if evidence:
            run, how = evidence[0]
            raise InputError(f"{path}: missing, though {env_path} records {len(runs)} run(s) of experiment "
                             f"{experiment!r} here, run {run} {how}; restore it from git "
                             f"(git checkout {path.parent.parent.parent.name}/raw), or measure again")


def check_raw_csv(path: Path):
    """One raw CSV: its schema (records.read_csv, whose errors name the line), and at least one row."""
    from decodegap import records

    try:
        schema = records.schema_for(path.stem)
    except records.SchemaError as exc:
        raise InputError(f"{path}:1: {exc}") from None
    try:
        frame = records.read_csv(path, schema)
    except records.SchemaError as exc:
        raise InputError(str(exc)) from None
    if frame.empty:
        text = path.read_text()
        if not text.strip():
            raise InputError(f"{path}:1: empty file (no header, no rows); a measurement writes its header with its "
                             "first rows. Restore it from git, or delete it if this GPU has no such rows")
        raise InputError(f"{path}:2: header only, no rows; restore the rows from git, or delete the file if this "
                         "GPU has no such rows")
    return frame


def file_problems(data: Path) -> list[str]:
    """Every defect of the data folder's files, one line each (empty: all whole). `check` prints them; `data_whole`
    raises on the first."""
    problems = []
    for step in _file_checks(Path(data)):
        try:
            step()
        except InputError as exc:
            problems.append(str(exc))
    return problems


def _file_checks(data: Path):
    yield from registry_checks(data)
    for folder in sorted(p for p in (data / "raw").glob("*") if p.is_dir()):
        yield from gpu_folder_checks(folder)


def registry_checks(data: Path):
    """The checks of the data folder's registries (REGISTRY_COLUMNS, NUMBER_COLUMNS) and models/*.json, each a
    callable raising InputError: what replay (data_whole) and `check` hold besides the raw rows."""
    for rel, columns in REGISTRY_COLUMNS.items():
        path = data / rel

        def registry(path=path, columns=columns, numbers=NUMBER_COLUMNS.get(rel)):
            if not path.is_file():
                raise InputError(f"{path}: missing; every notebook reads it. Restore it from the repository's data/")
            _csv_lines(path, columns, numbers)
        yield registry
    for path in sorted((data / "models").glob("*.json")):
        def model(path=path):
            value = _json(path)
            missing = [k for k in MODEL_FIELDS if not isinstance(value, dict) or k not in value]
            if missing:
                raise InputError(f"{path}:1: a model entry holds {', '.join(MODEL_FIELDS)}; missing {missing}")
            if not isinstance(value["config"], dict) or "max_position_embeddings" not in value["config"]:
                raise InputError(f"{path}:{_line_of(path.read_text(), 'config')}: its config (the model's HF "
                                 "config.json fields) has no max_position_embeddings")
        yield model


def folder_checks(folder: Path, frames: dict):
    """The checks of a GPU folder with rows as a whole, given them (`frames`: {csv path: its rows}, filled by the time
    each runs): its rows' GPU (rows_of_the_folder) and its env.json being there. Replay and `check` both run them,
    after folder_is_a_gpu."""
    yield lambda: rows_of_the_folder(folder, frames)

    def env_there():
        if not (folder / "env.json").is_file():
            raise InputError(f"{folder / 'env.json'}: missing; it records the run behind every row of "
                             f"{folder}/*.csv. Restore it from git (or measure again: a sweep writes it)")
    yield env_there


def gpu_folder_checks(folder: Path):
    """Every check of one GPU folder, in order: its key (folder_is_a_gpu), each raw CSV (check_raw_csv), the folder
    with its rows (folder_checks), then its env.json against the rows (env_checks). Replay (data_whole), `check`
    (file_problems) and `merge-runs` (harness.runs.merge_sources) run them."""
    csvs = sorted(folder.glob("*.csv"))
    frames = {}
    yield lambda: folder_is_a_gpu(folder)

    def each(path):
        def step():
            frames[path] = check_raw_csv(path)
        return step
    for path in csvs:
        yield each(path)
    if not csvs:
        return
    yield from folder_checks(folder, frames)

    def env_step():
        env_path = folder / "env.json"
        if env_path.is_file():  # its absence is folder_checks' refusal
            env_checks(env_path, check_env(env_path), frames)
    yield env_step


def data_whole(data=None, notebooks: Iterable[str] = (), measure: bool = False) -> Path:
    """The data folder, every file it holds checked whole (file_problems: the first defect raised), and in replay
    (not `measure`) each of `notebooks` (stems) finding the rows it reads (READS). Raises InputError; writes nothing."""
    folder = inputs.data_folder(data)
    for step in _file_checks(folder):
        step()
    if measure:
        return folder
    digests_held(folder)
    for stem in notebooks:
        for experiment in READS.get(stem, ()):
            if not any(p.is_file() for p in folder.glob(f"raw/*/{experiment}.csv")):
                raise InputError(
                    f"{folder}/raw/<gpu>/{experiment}.csv: missing on every GPU, and notebook {stem} reads its rows; "
                    f"restore it (git checkout {folder.name}/raw), measure them, or leave the notebook out "
                    f"(--only with the others)")
    return folder


def mismatch_text(gpu: str, run: str, commit: str, recorded: str, at_commit: str) -> str:
    """A run whose recorded source digest is not its commit's (hardware.digests_against_commits' `mismatched`)."""
    return (f"{gpu}/{run}: env.json names commit {commit[:12]}, whose package source has digest {at_commit[:12]}, but "
            f"records source_sha256 {recorded[:12]}: the commit is not the code that ran; correct it in "
            "corrections.json (the commit whose digest it is), restore env.json from git, or measure again")


def digests_held(folder: Path) -> None:
    """Replay refuses what `check` reports as an error: a run whose source digest is not the commit it names
    (hardware.digests_against_commits; a commit this clone lacks, or a copy without git, holds nothing)."""
    from decodegap import hardware

    held = hardware.digests_against_commits(hardware.load_env(folder))
    if held["mismatched"]:
        (gpu, run), commit, recorded, at_commit = held["mismatched"][0]
        raise InputError(f"{folder}/raw/{mismatch_text(gpu, run, commit, recorded, at_commit)}")


def gpu_key(value, data=None, where: str = "") -> str:
    """A GPU key of the data folder's registry (specs/gpus.csv), exactly as it spells it; anything else is an
    InputError that suggests the key meant ("did you mean 'h200'?") and lists the known ones."""
    import difflib

    from decodegap import hardware

    known = [str(k) for k in hardware.specs_table(data)["gpu"]]
    if isinstance(value, str) and value in known:
        return value
    text = str(value)
    typed = text.strip().lower()
    near = ([k for k in known if k == typed] or [k for k in known if typed and k.startswith(typed + "-")]
            or difflib.get_close_matches(typed, known, 1))  # h100 -> h100-sxm, the key that names its form
    hint = f"did you mean {near[0]!r}? " if near else ""
    raise InputError(f"unknown GPU key {value!r}{f' ({where})' if where else ''}: {hint}Known: {', '.join(known)} "
                     f"({paths_of(data)}/specs/gpus.csv; `python -m decodegap gpus` lists them)")


def paths_of(data) -> str:
    from decodegap import paths

    return str(paths.data_dir(data))


def figures_for(data: Path, named=None) -> Path:
    """Where reproduce writes the figures of data folder `data`: the folder the user named; the repository's figures/
    for the repository's data/; else `figures/` beside the data folder (`<name>-figures/` where that would be the
    repository's own figures/), never the repository's committed figures unless named."""
    from decodegap import paths

    data = Path(data).resolve()
    if named:
        return own_figures_folder(Path(named).resolve(), data)
    if data == paths.DATA:
        return paths.FIGURES
    beside = data.parent / "figures"
    return data.parent / f"{data.name}-figures" if beside == paths.FIGURES else beside


REPOSITORY_FOLDERS = ("lib", "notebooks", "tests", "bench", "data", ".git", ".ci")
"""The repository's own folders, which a named figures folder never lies in (figures_for): reproduce writes its
tables and figures there and would mix them into the code, the notebooks or the rows."""


def own_figures_folder(figures: Path, data: Path) -> Path:
    """`figures` (resolved) where it is a folder of its own: refused (InputError, before anything runs) where it is
    the data folder, lies inside it or holds it, is or lies inside another data folder (one holding
    specs/gpus.csv: another copy's), or is the repository's root or lies in one of REPOSITORY_FOLDERS;
    `reproduce --figures-dir data` wrote the tables among the raw rows (2026-12-07)."""
    from decodegap import paths

    why = ("is the data folder" if figures == data else f"lies inside the data folder {data}"
           if data in figures.parents else f"holds the data folder {data}" if figures in data.parents else "")
    repo = paths.REPO.resolve()
    if not why and (figures == repo or repo in figures.parents):
        top = figures.relative_to(repo).parts[:1]
        if not top:
            why = "is the repository's root"
        elif top[0] in REPOSITORY_FOLDERS:
            why = f"lies in the repository's {top[0]}/"
    other = None if why else next((f for f in (figures, *figures.parents) if inputs.is_data_folder(f)), None)
    if other is not None:
        why = "is another data folder" if other == figures else f"lies inside another data folder {other}"
    if why:
        raise InputError(f"figures folder {figures} {why}; name a folder of its own (--figures-dir / FIGURES_DIR), "
                         f"or leave it out for {figures_for(data)}")
    return figures
