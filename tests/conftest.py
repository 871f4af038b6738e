"""Shared fixtures. CPU tests run on the tiny configs; `-m gpu` tests need a CUDA device."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from decodegap import paths

CPU_SPEC_ROW = "cpu-test,CPU (tests only),cpu,,0,DRAM,10,,test fixture: not a datasheet value,\n"


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


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run `pytest -m gpu` on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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
