"""GPU registry (data/specs/gpus.csv), detection of the current GPU, the copy-bandwidth probe and
environment capture (env.json)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from decodegap import paths

OPTIONAL_PACKAGES = (
    "bitsandbytes", "exllamav2", "autoawq", "flash-attn", "flashinfer-python", "fa3-fwd", "torchao",
    "triton", "accelerate",
)


class UnknownGPUError(KeyError):
    def __str__(self) -> str:
        return self.args[0]


@dataclass(frozen=True)
class GPUSpec:
    """A registry row. `bandwidth_gbps` is the datasheet peak in GB/s (1e9 bytes/s)."""

    gpu: str
    name: str
    architecture: str
    memory_gb: float
    bandwidth_gbps: float
    device_names: tuple[str, ...]
    source: str


def specs_table(data: str | Path | None = None) -> pd.DataFrame:
    """data/specs/gpus.csv as a DataFrame, one row per GPU key."""
    return pd.read_csv(paths.data_dir(data) / "specs" / "gpus.csv")


def _text(value) -> str:
    """A CSV cell as text; an empty cell (NaN) is ''."""
    return "" if value is None or pd.isna(value) else str(value)


def _how_to_add(data) -> str:
    return (f"Add a row to {paths.data_dir(data) / 'specs' / 'gpus.csv'} with the GPU's datasheet bandwidth "
            "and its source, or pass a known key with --gpu / GPU=.")


def gpu_spec(gpu: str, data: str | Path | None = None) -> GPUSpec:
    """The registry row of key `gpu`; an unknown key is an error listing the known keys."""
    table = specs_table(data)
    hit = table[table["gpu"] == gpu]
    if hit.empty:
        raise UnknownGPUError(f"unknown GPU key {gpu!r}. Known: {', '.join(table['gpu'])}. {_how_to_add(data)}")
    row = hit.iloc[0]
    names = _text(row.get("device_names"))
    return GPUSpec(
        gpu=row["gpu"], name=row["name"], architecture=row["architecture"], memory_gb=float(row["memory_gb"]),
        bandwidth_gbps=float(row["bandwidth_gbps"]),
        device_names=tuple(n.strip() for n in names.split(";") if n.strip()), source=row["source"],
    )


def gpu_key_for_device_name(device_name: str, data: str | Path | None = None) -> str:
    """Registry key whose `device_names` lists `device_name` exactly (as torch reports it)."""
    table = specs_table(data)
    for _, row in table.iterrows():
        names = [n.strip() for n in _text(row.get("device_names")).split(";") if n.strip()]
        if device_name in names:
            return row["gpu"]
    raise UnknownGPUError(
        f"this GPU ({device_name!r}) is not in the registry; known keys: {', '.join(table['gpu'])}. "
        f"{_how_to_add(data)} Put {device_name!r} in its device_names column so it is detected."
    )


def detect_gpu(data: str | Path | None = None) -> str:
    """Registry key of the current CUDA device; a clear error when there is none or it is unknown."""
    import torch

    if not torch.cuda.is_available():
        raise UnknownGPUError("no CUDA device is visible; on a CPU only replay (MEASURE=False) works")
    return gpu_key_for_device_name(torch.cuda.get_device_name(), data)


def copy_bandwidth(device: str = "cuda", size_bytes: int = 2 << 30, reps: int = 20, warmup: int = 5) -> list[dict]:
    """Attainable bandwidth: device-to-device copies of `size_bytes`, each timed (timing.event_times_ms: CUDA
    events on a GPU, perf_counter on a CPU). Bytes moved = 2 * size (read + write). One dict per repetition."""
    import torch

    from decodegap.timing import event_times_ms

    src = torch.empty(size_bytes // 2, dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    moved = 2 * src.numel() * src.element_size()
    times = event_times_ms(lambda: dst.copy_(src), warmup + reps, device.startswith("cuda"))[warmup:]
    rows = [{"method": "d2d_copy", "bytes_moved": moved, "rep": i, "time_ms": ms,
             "bandwidth_gbps": moved / (ms * 1e-3) / 1e9, "status": "ok", "reason": ""} for i, ms in enumerate(times)]
    if not torch.equal(dst, src):
        raise RuntimeError("copy probe: destination differs from source; the timing is not trustworthy")
    return rows


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def gpu_state() -> dict:
    """GPU clocks, temperature and power now (nvidia-smi); empty values when it is not there."""
    fields = "clocks.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu,pstate"
    out = _run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"])
    values = [v.strip() for v in out.splitlines()[0].split(",")] if out else []
    state = dict(zip(["sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "utilization_pct", "pstate"], values))
    state["time"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    state["load_average"] = list(os.getloadavg())
    return state


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


MODULE_OF = {"flash-attn": "flash_attn", "flashinfer-python": "flashinfer", "fa3-fwd": "fa3_fwd_interface",
             "autoawq": "awq"}
"""Distribution name -> the module it installs, where the two differ."""


def _version(pkg: str) -> str | None:
    """The installed version of distribution `pkg`; for a package copied onto the path without its metadata (the
    flash-attn package beside its trimmed build in .ext/, bench/build_flash_attn.sh) the `__version__` its
    `__init__.py` assigns, read without importing it, marked as such; None when neither is there."""
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        spec = importlib.util.find_spec(MODULE_OF.get(pkg, pkg.replace("-", "_")))
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith("__init__.py"):
        return None
    found = re.search(r"^__version__\s*=\s*[\"']([^\"']+)[\"']", Path(spec.origin).read_text(errors="replace"), re.M)
    return f"{found.group(1)} (no package metadata: copied, not installed)" if found else None


ENV_FIELDS = frozenset({
    # hardware.environment()
    "device_name", "driver", "cuda_runtime", "compute_capability", "gpu_memory_gb", "python", "torch", "transformers",
    "optional_packages", "host_cpu", "host_cores", "platform", "source_sha256", "command_line", "kernel_builds",
    # hardware.git_provenance()
    "git_commit", "git_commit_source", "git_diff_sha256", "source_sha256_given",
    # start_run, recorded (rows_written: {experiment: the run's rows in its CSV}, since 2026-12-05; stopped: a run
    # stopped before its end with rows kept, since 2026-12-06)
    "experiment", "compile_settings", "gpu_state_after", "rows_written", "stopped",
    # harness.sweep.run_sweep / _sweep_sessions
    "plan", "gpu_state_before", "quant_weights", "quant_kernel", "sessions",
    # experiments: the A/B sweep's phases, the attention microbenchmark's order
    "ab_sweep", "attention_order",
    # harness.peers.measure: the peer's repository, commit and the sha256 of its files imported
    "peer_source",
})
"""Every field code writes into an env.json entry (update_env refuses any other): an entry holding a field not
listed here was not written by this package (tests/test_provenance.py reads the shipped env.json against it). A
correction of a recorded value is no field of the entry: it is a reviewed statement in data/raw/<gpu>/
corrections.json (hardware.load_env applies it)."""


class EnvError(ValueError):
    """An env.json or corrections.json that does not hold what code writes; the message names the file and run."""


CORRECTION_KEYS = ("field", "recorded", "corrected", "reason", "evidence", "reviewed")
"""The keys of one correction in data/raw/<gpu>/corrections.json: {run id: [correction, ...]}. `recorded` must be the
entry's value as code wrote it (a correction of a value the entry does not hold is refused), `corrected` the value
readers use, `reason` why the recorded value is wrong, `evidence` how the corrected one was established (what a
reviewer can re-run), `reviewed` who and when."""


def read_env(path: Path) -> dict:
    """One env.json, its structure checked: an object of run ids (records' form, YYYYMMDDTHHMMSS-hex6), each an
    object holding only ENV_FIELDS and a `git_commit`. Any defect raises EnvError naming the file and the run."""
    path = Path(path)
    try:
        env = json.loads(path.read_text())
    except ValueError as exc:
        raise EnvError(f"{path}: not JSON ({exc})") from None
    return env_entries(path, env)


def env_entries(path: Path, env) -> dict:
    """read_env's structure checks on `env`, the parsed JSON of `path` (for a caller that has read it already)."""
    if not isinstance(env, dict):
        raise EnvError(f"{path}: an object of run ids is expected, got {type(env).__name__}")
    for run_id, entry in env.items():
        if not re.fullmatch(r"\d{8}T\d{6}-[0-9a-f]{6}", run_id):
            raise EnvError(f"{path}: {run_id!r} is no run id (YYYYMMDDTHHMMSS-xxxxxx)")
        if not isinstance(entry, dict):
            raise EnvError(f"{path}: run {run_id}: an object is expected, got {type(entry).__name__}")
        unknown = sorted(set(entry) - ENV_FIELDS)
        if unknown:
            raise EnvError(f"{path}: run {run_id} holds field(s) {unknown} that no code writes (hardware.ENV_FIELDS): "
                           "a correction goes to corrections.json beside it, never into the entry")
        if not isinstance(entry.get("git_commit"), str):
            raise EnvError(f"{path}: run {run_id} has no git_commit")
    return env


def read_corrections(path: Path, env: dict) -> dict:
    """A corrections.json ({run id: [correction, ...]}, CORRECTION_KEYS each), checked against its env.json: every
    run is there and holds the `recorded` value of its `field`. Any defect raises EnvError naming the file."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        fixes = json.loads(path.read_text())
    except ValueError as exc:
        raise EnvError(f"{path}: not JSON ({exc})") from None
    for run_id, items in fixes.items():
        if run_id not in env:
            raise EnvError(f"{path}: run {run_id} has no env.json entry")
        for fix in items if isinstance(items, list) else [items]:
            if not isinstance(fix, dict) or set(fix) != set(CORRECTION_KEYS):
                raise EnvError(f"{path}: run {run_id}: a correction holds exactly {CORRECTION_KEYS}")
            if fix["field"] not in ENV_FIELDS or env[run_id].get(fix["field"]) != fix["recorded"]:
                raise EnvError(f"{path}: run {run_id}: its env.json {fix['field']!r} is not the recorded "
                               f"{fix['recorded']!r} this correction is of")
    return fixes


def load_env(data=None, corrected: bool = True) -> dict:
    """{(gpu, run id): env.json entry} of every data/raw/<gpu>/env.json (read_env), with, where `corrected`, the
    reviewed corrections of corrections.json beside it applied (read_corrections: the corrected value in place of
    the recorded one, and the entry's `corrections` listing them). EnvError names a defective file."""
    out = {}
    for env_path in sorted(Path(paths.data_dir(data), "raw").glob("*/env.json")):
        gpu = env_path.parent.name
        env = read_env(env_path)
        fixes = read_corrections(env_path.with_name("corrections.json"), env) if corrected else {}
        for run_id, entry in env.items():
            entry = dict(entry)
            items = fixes.get(run_id, [])
            for fix in items if isinstance(items, list) else [items]:
                entry[fix["field"]] = fix["corrected"]
            if items:
                entry["corrections"] = items if isinstance(items, list) else [items]
            out[(gpu, run_id)] = entry
    return out


def provenance_of(entry: dict) -> dict:
    """What a reader needs to judge a run's code, from its (corrected) env.json entry: `commit` (short), `dirty`
    (its git_commit ends '+dirty'), `diff_digest` (a real git_diff_sha256, not an 'unknown' note), `source_digest`
    (source_sha256 recorded), `corrected` (the fields corrections.json changed)."""
    commit = str(entry.get("git_commit", ""))
    diff = str(entry.get("git_diff_sha256", ""))
    return dict(commit=commit.split("+")[0][:7], dirty=commit.endswith("+dirty"),
                diff_digest=bool(re.fullmatch(r"[0-9a-f]{64}", diff)), source_digest=bool(entry.get("source_sha256")),
                corrected=[f["field"] for f in entry.get("corrections", [])])


def run_sources(env: dict) -> dict:
    """{(gpu, run id): the source digest its env.json entry records (source_sha256), "" where none} of `env`
    (load_env's): the version of the package's code a run timed."""
    return {key: str(entry.get("source_sha256") or "") for key, entry in env.items()}


ALLOW_DIRTY_ENV = "DECODEGAP_ALLOW_DIRTY"  # "1": measure from a tree with uncommitted changes (their hash recorded)
GIVEN_COMMIT_ENV = "DECODEGAP_GIT_COMMIT"  # set by whoever copies the tree to a machine without its .git
GIVEN_SOURCE_ENV = "DECODEGAP_SOURCE_SHA256"  # with GIVEN_COMMIT_ENV: `python -m decodegap digest` of that commit
GIVEN_DIFF_ENV = "DECODEGAP_GIT_DIFF_SHA256"  # optional, with the allowance: the host's `git diff HEAD --binary` hash


class DirtyTreeError(RuntimeError):
    """A run was asked for from a tree that is not the commit it would record (uncommitted changes to tracked files
    of a git checkout, or a copied tree whose source digest is not the one given for DECODEGAP_GIT_COMMIT), without
    the allowance."""


def git_commit(repo: Path | None = None) -> str:
    """DECODEGAP_GIT_COMMIT when set (a copied working tree, whose .git, if any, need not be the source's: a
    device copy carried an older one and recorded it, '+dirty'), else the repository commit (and '+dirty')."""
    given = os.environ.get(GIVEN_COMMIT_ENV)
    if given:
        return given
    repo = Path(repo or paths.REPO)
    commit = _run(["git", "-C", str(repo), "rev-parse", "HEAD"])
    if re.fullmatch(r"[0-9a-f]{40}", commit):
        dirty = _run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"])
        return commit + ("+dirty" if dirty else "")
    return "unknown (no git checkout here, DECODEGAP_GIT_COMMIT not set)"


def git_provenance(repo: Path | None = None, source: Path | None = None) -> dict:
    """The code a run measures with, checked before anything is measured: `git_commit` (and `git_commit_source`:
    `git` where the checkout's own git named it, `given` where DECODEGAP_GIT_COMMIT did).

    A git checkout with uncommitted changes to tracked files is refused (DirtyTreeError) unless
    DECODEGAP_ALLOW_DIRTY=1; then its commit is recorded with '+dirty' and `git_diff_sha256` (sha256 of `git diff
    HEAD --binary`, so the exact tree can be told apart from others of the same commit).

    A copied tree (DECODEGAP_GIT_COMMIT set: a tree copied to the GPU machine, not cloned there, whose .git, if any,
    is not the source's) must come with DECODEGAP_SOURCE_SHA256, the digest of that commit's package source
    (`python -m decodegap digest` on the clean checkout), and the copy's own digest (source_digest of `source`,
    default this package) must equal it: a copy that is not the named commit is refused, as is a given commit
    without a digest to hold it to. With DECODEGAP_ALLOW_DIRTY=1 such a run goes on and records `git_commit`
    '<commit>+dirty', `source_sha256_given` (the digest it was held to, or 'not given') and `git_diff_sha256`
    (DECODEGAP_GIT_DIFF_SHA256, the host's diff hash, where given; else a note that the diff is not known, the run's
    own `source_sha256` naming its tree). Without either a git checkout or a given commit, the commit is 'unknown
    (...)' and `source_sha256` alone (environment) names the code."""
    given = os.environ.get(GIVEN_COMMIT_ENV)
    allowed = os.environ.get(ALLOW_DIRTY_ENV) == "1"
    if given:
        expected = os.environ.get(GIVEN_SOURCE_ENV, "").strip()
        actual = source_digest(source)
        if expected == actual:
            return {"git_commit": given, "git_commit_source": "given"}
        why = (f"{GIVEN_COMMIT_ENV} is set but {GIVEN_SOURCE_ENV} is not" if not expected else
               f"this tree's source digest {actual[:12]} is not the {expected[:12]} given for commit {given[:12]}")
        if not allowed:
            raise DirtyTreeError(
                f"{why}: pass the digest of the clean commit (`python -m decodegap digest` on its checkout) as "
                f"{GIVEN_SOURCE_ENV}, so that env.json names the code measured, or set {ALLOW_DIRTY_ENV}=1 to "
                "measure anyway (recorded as '<commit>+dirty')")
        return {"git_commit": given if given.endswith("+dirty") else given + "+dirty", "git_commit_source": "given",
                "source_sha256_given": expected or "not given",
                "git_diff_sha256": os.environ.get(GIVEN_DIFF_ENV) or f"unknown ({GIVEN_DIFF_ENV} not given; "
                                                                     "source_sha256 names the tree that ran)"}
    commit = git_commit(repo)
    out = {"git_commit": commit}
    if commit.startswith("unknown"):
        return out
    out["git_commit_source"] = "git"
    if not commit.endswith("+dirty"):
        return out
    repo = Path(repo or paths.REPO)
    if not allowed:
        changed = _run(["git", "-C", str(repo), "diff", "HEAD", "--name-only"]).splitlines()
        raise DirtyTreeError(
            f"the checkout {repo} has uncommitted changes ({', '.join(changed[:5])}"
            f"{', ...' if len(changed) > 5 else ''}): commit them so that env.json names the code measured, or set "
            f"{ALLOW_DIRTY_ENV}=1 to measure anyway (the diff's sha256 is then recorded as git_diff_sha256)")
    try:
        diff = subprocess.run(["git", "-C", str(repo), "diff", "HEAD", "--binary"], capture_output=True,
                              timeout=60, check=True).stdout
        out["git_diff_sha256"] = hashlib.sha256(diff).hexdigest()
    except (OSError, subprocess.SubprocessError) as exc:
        out["git_diff_sha256"] = f"unknown (git diff failed: {exc})"
    return out


def source_digest(root: Path | None = None) -> str:
    """sha256 over the package's source (every .py file under `root`, default this package's folder, in sorted
    relative-path order, each as its path, a NUL, its bytes, a NUL): the code that ran, whatever the machine's git
    says. `python -m decodegap digest` prints it for a checkout, so a run's entry can be matched to a commit."""
    root = Path(root or Path(__file__).parent)
    return _digest((f.relative_to(root).as_posix(), f.read_bytes) for f in root.rglob("*.py")
                   if "__pycache__" not in f.parts)


def _digest(files) -> str:
    """sha256 over (relative path, a callable returning the file's bytes) pairs in sorted path order, each as its
    path, a NUL, its bytes, a NUL: source_digest's hash, for a tree on disk or one read from git."""
    h = hashlib.sha256()
    for rel, read in sorted(files, key=lambda item: item[0]):
        h.update(rel.encode() + b"\0" + read() + b"\0")
    return h.hexdigest()


PACKAGE_IN_REPO = "lib/decodegap"
"""Where the package's source lies in the repository: source_digest_at reads it at a commit from there."""


def source_digest_at(commit: str, repo: Path | None = None) -> str | None:
    """source_digest of the package as `commit` holds it, read from git (no checkout): what a run's env.json entry
    naming `commit` must record as its source_sha256. None where this clone lacks the commit (a shallow clone) or
    has no git."""
    repo = Path(repo or paths.REPO)
    try:
        listing = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--full-tree", commit, "--",
                                  PACKAGE_IN_REPO], capture_output=True, text=True, timeout=60)
        if listing.returncode != 0 or not listing.stdout.strip():
            return None
        blobs = {}
        for line in listing.stdout.splitlines():
            meta, path = line.split("\t", 1)
            rel = path[len(PACKAGE_IN_REPO) + 1:]
            if rel.endswith(".py") and "__pycache__" not in rel.split("/"):
                blobs[rel] = meta.split()[2]
        order = sorted(blobs)
        batch = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], capture_output=True, timeout=120,
                               input="".join(blobs[rel] + "\n" for rel in order).encode(), check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    contents, at = {}, 0
    for rel in order:  # each object: "<sha> blob <size>\n", its bytes, "\n"
        header_end = batch.index(b"\n", at)
        size = int(batch[at:header_end].split()[2])
        contents[rel] = batch[header_end + 1:header_end + 1 + size]
        at = header_end + 1 + size + 1
    return _digest((rel, (lambda rel=rel: contents[rel])) for rel in order)


def digests_against_commits(env: dict, repo: Path | None = None) -> dict:
    """Each run of `env` (run id -> entry, corrections applied) that names a clean commit and records source_sha256,
    held to source_digest_at(commit): {"matched": [...], "mismatched": [(run, commit, recorded, at_commit)],
    "commit_missing": [(run, commit)], "not_held": runs that name no clean commit or record no digest}."""
    out = {"matched": [], "mismatched": [], "commit_missing": [], "not_held": []}
    at: dict[str, str | None] = {}
    for run, entry in sorted(env.items()):
        commit, recorded = str(entry.get("git_commit", "")), entry.get("source_sha256")
        if not recorded or not re.fullmatch(r"[0-9a-f]{7,40}", commit):
            out["not_held"].append(run)
            continue
        if commit not in at:
            at[commit] = source_digest_at(commit, repo)
        if at[commit] is None:
            out["commit_missing"].append((run, commit))
        elif at[commit] == recorded:
            out["matched"].append(run)
        else:
            out["mismatched"].append((run, commit, recorded, at[commit]))
    return out


def environment() -> dict:
    """Everything a reader needs to judge a run: GPU, driver, CUDA, library versions, host, git commit (and the
    hash of uncommitted changes, which are refused unless allowed: git_provenance), the package source's digest
    (source_digest: the code that ran, even where a copied tree's git is not the source's), command line."""
    import torch

    cuda = torch.cuda.is_available()
    env = {
        "device_name": torch.cuda.get_device_name() if cuda else "cpu",
        "driver": _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]) or None,
        "cuda_runtime": torch.version.cuda,
        "compute_capability": ".".join(map(str, torch.cuda.get_device_capability())) if cuda else None,
        "gpu_memory_gb": round(torch.cuda.get_device_properties(0).total_memory / 1e9, 1) if cuda else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": _version("transformers"),
        "optional_packages": {p: _version(p) for p in OPTIONAL_PACKAGES},
        "host_cpu": _cpu_model(),
        "host_cores": os.cpu_count(),
        "platform": platform.platform(),
        **git_provenance(),
        "source_sha256": source_digest(),
        "command_line": " ".join(sys.argv),
        "kernel_builds": kernel_builds(),
    }
    return env


EXT_DIR_ENV = "DECODEGAP_EXT_DIR"  # where bench/build_marlin.sh put its build (default: <repo>/.ext)


def kernel_builds() -> dict:
    """The records of kernels built from source on this machine (`<name>_build.json` in the extension folder,
    e.g. bench/build_marlin.sh's marlin_build.json): source commit, patch, compiler, build time."""
    folder = Path(os.environ.get(EXT_DIR_ENV) or paths.REPO / ".ext")
    out = {}
    for f in sorted(folder.glob("*_build.json")) if folder.is_dir() else []:
        try:
            out[f.stem.removesuffix("_build")] = json.loads(f.read_text())
        except (OSError, ValueError) as exc:
            out[f.stem.removesuffix("_build")] = f"unreadable: {exc}"
    return out
