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


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run `pytest -m gpu` on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# The CPU tests run tiny models whose every op takes microseconds: a second intra-op thread only adds its
# hand-offs, and on a busy machine its spin-waits cost more CPU than the ops (the fast tier took about twice as
# long with torch's default of one thread per core). One thread here and in the session processes and notebook
# kernels the tests start (they inherit the environment); set OMP_NUM_THREADS to choose otherwise.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# The tests create runs from this checkout, which may have uncommitted changes while it is worked on: allow them
# (hardware.git_provenance then records the diff's hash). Set at import so that session processes inherit it;
# tests/test_hardware.py checks the refusal without it.
os.environ.setdefault("DECODEGAP_ALLOW_DIRTY", "1")


def run_interpreted(script: str, marker: str) -> None:
    """Run `script` in a fresh Python process under Triton's CPU interpreter (TRITON_INTERPRET=1, which Triton reads
    when first imported); skip where Triton is missing; fail unless it exits 0 and prints `marker`."""
    import importlib.util
    import os
    import subprocess
    import sys

    import pytest

    if importlib.util.find_spec("triton") is None:
        pytest.skip("Triton is not installed here (the GPU tests cover the kernels)")
    done = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, TRITON_INTERPRET="1"),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert marker in done.stdout
