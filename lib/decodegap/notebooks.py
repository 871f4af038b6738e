"""Running the numbered notebooks through papermill: executed copies go to notebooks/executed/ (git-ignored),
figures and tables to figures/."""

from __future__ import annotations

import contextlib

from pathlib import Path
from typing import Callable

from decodegap import paths


def notebook_paths(only=None) -> list[Path]:
    """The numbered notebooks, in order; `only` filters by stem (e.g. ['01_roofline'])."""
    found = sorted(paths.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if only:
        unknown = set(only) - {p.stem for p in found}
        if unknown:
            raise FileNotFoundError(f"no notebook {sorted(unknown)}; known: {[p.stem for p in found]}")
        found = [p for p in found if p.stem in set(only)]
    return found


def _local_kernel_manager():
    """A kernel manager whose kernel talks to this process over IPC sockets, not TCP: the kernel runs on this
    machine anyway, and ipykernel warns on every start over unencrypted TCP. Each kernel's sockets get a name of
    their own in the temporary folder: jupyter_client's default names them kernel-ipc-1, -2, ... in the working
    directory, so two notebooks run at once from notebooks/ (the tests' workers) raced for the same sockets and read
    each other's messages ("Invalid Signature", "Kernel didn't respond")."""
    import os
    import tempfile
    import uuid

    from jupyter_client.manager import KernelManager
    from traitlets import CaselessStrEnum, default

    class LocalKernelManager(KernelManager):
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

        @default("ip")
        def _unique_ipc_path(self) -> str:
            return os.path.join(tempfile.gettempdir(), f"decodegap-kernel-{uuid.uuid4().hex}-ipc")

    return LocalKernelManager


KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=CRITICAL"]
"""The kernel's own log quiet below CRITICAL: its "KeyboardInterrupt caught in kernel" (when papermill stops it, or
on Ctrl-C) is no error of the notebook's; a cell's error still reaches the output and papermill's exception."""


def run(notebook: Path, parameters: dict | None = None, out_dir: Path | None = None) -> Path:
    """Execute one notebook with papermill, injecting `parameters`; returns the executed copy's path."""
    import papermill

    out_dir = Path(out_dir or paths.EXECUTED)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / notebook.name
    papermill.execute_notebook(str(notebook), str(out), parameters=parameters or {}, cwd=str(notebook.parent),
                               kernel_name="python3", progress_bar=False, kernel_manager_class=_local_kernel_manager(),
                               extra_arguments=KERNEL_ARGUMENTS)
    return out


def parameter_names(notebook: Path) -> set[str]:
    """The names a notebook's `parameters` cell defines (UPPER_CASE assignments)."""
    import json
    import re

    cells = json.loads(Path(notebook).read_text())["cells"]
    source = "".join("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    return set(re.findall(r"^([A-Z_][A-Z0-9_]*)\s*=", source, re.M))


@contextlib.contextmanager
def _no_interrupt():
    """SIGINT ignored inside (on the main thread; elsewhere signals cannot be set, and nothing changes)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_all(parameters: dict | None = None, only=None, out_dir: Path | None = None) -> list[Path]:
    """Execute every numbered notebook (replay mode unless parameters say MEASURE=True), each with the
    parameters its `parameters` cell defines; each one's wall time is printed when it ends."""
    import time

    done = []
    for nb in notebook_paths(only):
        print(f"running {nb.name} ...", flush=True)
        names = parameter_names(nb)
        started = time.monotonic()
        done.append(run(nb, {k: v for k, v in (parameters or {}).items() if k in names}, out_dir))
        print(f"  {nb.name} took {time.monotonic() - started:.0f} s", flush=True)
    return done


FAILED_SUFFIX = ".failed.ipynb"
"""A notebook that stopped keeps its executed copy as notebooks/executed/<stem>.failed.ipynb (never beside the
successful copies under their own name)."""


def reproduce(parameters: dict, figures: Path, only=None, then: Callable[[Path], object] | None = None,
              executed: Path | None = None) -> list[Path]:
    """Run the notebooks (run_all) into a temporary folder beside `figures` and, only when every one succeeded (and
    `then`, where given, succeeded on that folder of their figures and tables: the README gallery's write), move their
    figures and tables into `figures` and their executed copies into `executed` (notebooks/executed/). A notebook
    that fails, or Ctrl-C, leaves `figures` and the executed copies as they were: the failing notebook's copy goes to
    <stem>.failed.ipynb, nothing else stays. Returns the paths written into `figures`."""
    import os
    import shutil
    import tempfile

    figures, executed = Path(figures), Path(executed or paths.EXECUTED)
    figures.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".decodegap-reproduce-", dir=figures.parent))
    staged_figures, staged_executed = stage / "figures", stage / "executed"
    try:
        try:
            run_all({**parameters, "FIGURES_DIR": str(staged_figures)}, only=only, out_dir=staged_executed)
        except Exception as exc:
            if type(exc).__name__ == "PapermillExecutionError":
                copies = sorted(staged_executed.glob("*.ipynb"), key=lambda p: p.stat().st_mtime)
                if copies:
                    executed.mkdir(parents=True, exist_ok=True)
                    failed = executed / (copies[-1].stem + FAILED_SUFFIX)
                    shutil.move(str(copies[-1]), failed)
                    exc.failed_copy = failed
            raise
        if then is not None:
            then(staged_figures)
        figures.mkdir(parents=True, exist_ok=True)
        written = []
        for path in sorted(staged_figures.rglob("*")):
            if path.is_file():
                target = figures / path.relative_to(staged_figures)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, target)
                written.append(target)
        executed.mkdir(parents=True, exist_ok=True)
        for path in sorted(staged_executed.glob("*.ipynb")):
            (executed / (path.stem + FAILED_SUFFIX)).unlink(missing_ok=True)
            shutil.move(str(path), executed / path.name)
        return written
    finally:
        with _no_interrupt():  # a second Ctrl-C must not cut the clean-up of the staging folder short
            shutil.rmtree(stage, ignore_errors=True)
