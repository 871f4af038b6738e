"""Shared fixtures. CPU tests run on the tiny configs; `-m gpu` tests need a CUDA device."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from decodegap import paths

CPU_SPEC_ROW = "cpu-test,CPU (tests only),cpu,,0,DRAM,10,,test fixture: not a datasheet value,,,\n"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A private data folder: the shipped models, specs and published values, plus a `cpu-test` GPU key
    (a test fixture, never shipped) so measure mode runs on a CPU without touching data/raw/."""
    out = tmp_path / "data"
    for sub in ("models", "specs", "published"):
        shutil.copytree(paths.DATA / sub, out / sub)
    with open(out / "specs" / "gpus.csv", "a") as fh:
        fh.write(CPU_SPEC_ROW)
    return out


@pytest.fixture(scope="session", autouse=True)
def _shipped_rows_read_once():
    """The shipped raw CSVs (data/raw/, which no test writes) parsed and validated once per test session, not once
    per reader: many tests read the same tables through the experiments and the claims. Each caller gets its own
    copy; a file that changes (its mtime or size) is read again, and every other file is read as always."""
    from decodegap import records

    real, memo, shipped = records.read_csv, {}, paths.DATA.resolve()

    def read_csv(path, schema=None):
        resolved = Path(path).resolve()
        if shipped not in resolved.parents:
            return real(path, schema)
        stat = resolved.stat()
        key = (resolved, stat.st_mtime_ns, stat.st_size, schema and (schema.experiment, tuple(schema.names)))
        if key not in memo:
            memo[key] = real(path, schema)
        return memo[key].copy()

    records.read_csv = read_csv
    yield
    records.read_csv = real


@pytest.fixture(autouse=True)
def _pyplot_figures_closed():
    """Every pyplot figure a test draws is closed after it, so that figures do not pile up over the session (more
    than 20 open brings matplotlib's RuntimeWarning and holds their memory)."""
    yield
    import sys
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


@pytest.fixture(scope="session")
def shipped_evidence():
    """What the claims read (claims.evidence.collect) from the shipped data/ at the published prices: collected once
    per test session for every test that reads it (none changes it in place: they replace fields on a copy)."""
    from decodegap import hardware, published
    from decodegap.analysis import cost
    from decodegap.claims import evidence

    prices = cost.load_prices()
    costs = cost.cost_table(cost.published_configurations(published.load()), prices, hardware.specs_table())
    return evidence.collect(paths.DATA, costs, prices)


@pytest.fixture(scope="session")  # once per worker, however xdist interleaves the modules
def replayed(tmp_path_factory):
    """Every numbered notebook replayed on a copy of the shipped data into a private figures folder, each figure's
    renderer checks written beside it as it is saved (figures.style.CHECK_FIGURES: <tmp>/figure_checks/<name>.json,
    read by tests/test_figures.py). Returns (data, figures)."""
    from decodegap import notebooks
    from decodegap.figures import gallery, style

    tmp = tmp_path_factory.mktemp("replay")
    data = tmp / "data"
    shutil.copytree(paths.DATA, data)
    figures = tmp / "figures"
    before = os.environ.get(style.CHECK_FIGURES)
    os.environ[style.CHECK_FIGURES] = str(tmp / "figure_checks")  # the notebooks' kernels inherit it
    try:
        for nb in notebooks.notebook_paths():
            notebooks.run(nb, dict(DATA_DIR=str(data), FIGURES_DIR=str(figures)), out_dir=tmp / "executed")
    finally:
        if before is None:
            os.environ.pop(style.CHECK_FIGURES, None)
        else:
            os.environ[style.CHECK_FIGURES] = before
    gallery.write(figures)  # as `decodegap reproduce` does after the notebooks
    return data, figures


SHARED_FIXTURES = ("replayed", "swept", "small_data", "shipped_evidence", "replayed_two_gpus")
"""Fixtures that take long to build (every notebook replayed, a sweep of session processes, a data folder, what the
claims read, notebooks 01, 02 and 05 replayed with a second GPU): where the tests run on several workers
(pytest-xdist's --dist loadgroup, as `make test` runs them), the tests using one of them run on one worker, which
builds it once."""


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    import torch

    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            shared = [name for name in SHARED_FIXTURES if name in item.fixturenames]
            if shared:
                item.add_marker(pytest.mark.xdist_group(shared[0]))
                _group_suffix(item, shared[0], config)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run `pytest -m gpu` on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _group_suffix(item, group: str, config) -> None:
    """Give `item` the nodeid suffix `@group` by which xdist's loadgroup schedules a group on one worker. xdist 3.8
    sets it through `item._nodeid`, which pytest 9 no longer reads (its nodeid is `item._id`, a NodeId), so without
    this every group was split over the workers and each built its expensive fixture again. Only on a worker of
    --dist loadgroup, and only where the nodeid is a NodeId (older pytest: xdist's own suffix works)."""
    if not getattr(config.option, "loadgroup", False) or not hasattr(item, "_id") or "@" in item.nodeid:
        return
    from _pytest.nodeid import NodeId

    old = item._id
    new = NodeId(path=old.path, names=old.names, params=old.params)
    object.__setattr__(new, "_str_cache", f"{old}@{group}")  # the same node; only its printed id carries the group
    item._id = new


# The CPU tests run tiny models whose every op takes microseconds: a second intra-op thread only adds its
# hand-offs, and on a busy machine its spin-waits cost more CPU than the ops (the fast tier took about twice as
# long with torch's default of one thread per core). One thread here and in the session processes and notebook
# kernels the tests start (they inherit the environment); set OMP_NUM_THREADS to choose otherwise.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# The tests create runs from this checkout, which may have uncommitted changes while it is worked on: allow them
# (hardware.git_provenance then records the diff's hash). Set at import so that session processes inherit it;
# tests/test_hardware.py checks the refusal without it.
os.environ.setdefault("DECODEGAP_ALLOW_DIRTY", "1")


def run_interpreted(script: str, marker: str, timeout_s: int = 600) -> None:
    """Run `script` in a fresh Python process under Triton's CPU interpreter (TRITON_INTERPRET=1, which Triton reads
    when first imported); skip where Triton is missing; fail unless it exits 0 within `timeout_s` seconds and prints
    `marker`."""
    import importlib.util
    import os
    import subprocess
    import sys

    import pytest

    if importlib.util.find_spec("triton") is None:
        pytest.skip("Triton is not installed here (the GPU tests cover the kernels)")
    done = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, TRITON_INTERPRET="1"),
                          capture_output=True, text=True, timeout=timeout_s)
    assert done.returncode == 0, done.stderr[-3000:]
    assert marker in done.stdout
