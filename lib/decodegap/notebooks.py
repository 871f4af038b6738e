"""Running the numbered notebooks through papermill: executed copies go to notebooks/executed/ (git-ignored),
figures and tables to figures/."""

from __future__ import annotations

from pathlib import Path

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
    machine anyway, and ipykernel warns on every start over unencrypted TCP."""
    from jupyter_client.manager import KernelManager
    from traitlets import CaselessStrEnum

    class LocalKernelManager(KernelManager):
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

    return LocalKernelManager


def run(notebook: Path, parameters: dict | None = None, out_dir: Path | None = None) -> Path:
    """Execute one notebook with papermill, injecting `parameters`; returns the executed copy's path."""
    import papermill

    out_dir = Path(out_dir or paths.EXECUTED)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / notebook.name
    papermill.execute_notebook(str(notebook), str(out), parameters=parameters or {}, cwd=str(notebook.parent),
                               kernel_name="python3", progress_bar=False, kernel_manager_class=_local_kernel_manager())
    return out


def parameter_names(notebook: Path) -> set[str]:
    """The names a notebook's `parameters` cell defines (UPPER_CASE assignments)."""
    import json
    import re

    cells = json.loads(Path(notebook).read_text())["cells"]
    source = "".join("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    return set(re.findall(r"^([A-Z_][A-Z0-9_]*)\s*=", source, re.M))


def run_all(parameters: dict | None = None, only=None, out_dir: Path | None = None) -> list[Path]:
    """Execute every numbered notebook (replay mode unless parameters say MEASURE=True), each with the
    parameters its `parameters` cell defines."""
    done = []
    for nb in notebook_paths(only):
        print(f"running {nb.name} ...", flush=True)
        names = parameter_names(nb)
        done.append(run(nb, {k: v for k, v in (parameters or {}).items() if k in names}, out_dir))
    return done
