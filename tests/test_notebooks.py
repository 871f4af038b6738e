"""Notebooks executed by papermill: replay on the shipped data, and measure mode on a tiny model on the CPU."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from decodegap import accounting, hardware, models, notebooks, paths

pytestmark = pytest.mark.notebooks


def _run(stem, tmp_path, **params):
    nb = paths.NOTEBOOKS / f"{stem}.ipynb"
    return notebooks.run(nb, params, out_dir=tmp_path / "executed")


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """Notebooks 01 and 02 replayed on a copy of the shipped data into a private figures folder."""
    tmp = tmp_path_factory.mktemp("replay")
    data = tmp / "data"
    shutil.copytree(paths.DATA, data)
    figures = tmp / "figures"
    for stem in ("01_roofline", "02_cuda_graphs_ab"):
        _run(stem, tmp, DATA_DIR=str(data), FIGURES_DIR=str(figures))
    return data, figures


def test_01_replay_rebuilds_the_cell_table_from_raw_rows(replayed):
    data, figures = replayed
    for name in ("01_r_floor_vs_bandwidth.png", "01_step_time_vs_context.png", "01_roofline_cells.md"):
        assert (figures / name).stat().st_size > 0
    cells = pd.read_csv(figures / "01_roofline_cells.csv")
    # Recompute one cell by hand from the raw rows: median over sessions of each session's median.
    raw = pd.read_csv(data / "raw" / "h200" / "decode.csv")
    sel = raw[(raw.model == "qwen2.5-7b") & (raw.ctx == 2048) & (raw.arm == "eager") & (raw.status == "ok")]
    t_obs = sel.groupby("session").step_ms.median().median()
    cfg = models.load_spec("qwen2.5-7b").config
    t_floor = (2 * accounting.param_count(cfg).total + 2 * 28 * 4 * 128 * 2048 * 2) / 4800e9 * 1e3
    row = cells[(cells.gpu == "h200") & (cells.model == "qwen2.5-7b") & (cells.ctx == 2048) & (cells.arm == "eager")].iloc[0]
    assert row.t_obs_ms == pytest.approx(t_obs, abs=1e-3)
    assert row.t_floor_ms_W_all == pytest.approx(t_floor, abs=1e-3)
    assert row.r_floor_W_all == pytest.approx(t_floor / t_obs, abs=1e-3)
    assert row.sessions == sel.session.nunique()
    # every shipped H200 cell of the grid is there, both arms, at least 3 sessions
    grid = cells[(cells.gpu == "h200") & cells.arm.isin(["eager", "hf_default"])]
    assert len(grid) == 3 * 4 * 2 and (grid.sessions >= 3).all()
    assert not (grid.r_floor_W_all > 1).any()


def test_02_replay_gives_speedups_with_cis(replayed):
    _, figures = replayed
    table = pd.read_csv(figures / "02_ab_cells.csv")
    head = table[(table.gpu == "h200") & (table.ctx == 2048)]
    assert len(head) == 3
    assert (head.sessions_graph == 10).all() and (head.sessions_eager == 10).all()
    assert ((head.speedup_graph_ci_low <= head.speedup_graph) & (head.speedup_graph <= head.speedup_graph_ci_high)).all()
    decomp = pd.read_csv(figures / "02_decomposition.csv")
    # the stack adds up: floor + excess + launch overhead = eager step time (tables round to 3 decimals)
    total = decomp.t_floor_ms + decomp.gpu_excess_ms + decomp.launch_overhead_ms
    assert ((total - decomp.eager_ms).abs() < 2e-3).all()
    assert (figures / "02_speedup_ci.png").exists() and (figures / "02_decomposition.png").exists()


def test_01_measure_mode_on_a_tiny_model(tmp_path, data_dir):
    figures = tmp_path / "figures"
    _run("01_roofline", tmp_path, MEASURE=True, GPU="cpu-test", DEVICE="cpu", MODELS=["llama-tiny"],
         CONTEXTS=[16, 32], SESSIONS=1, STEPS=2, WARMUP=1, BANDWIDTH_MIB=8, DATA_DIR=str(data_dir),
         FIGURES_DIR=str(figures))
    rows = pd.read_csv(data_dir / "raw" / "cpu-test" / "decode.csv")
    assert (rows.status == "ok").sum() == 2 * 2 * 2  # contexts x arms x steps
    assert (rows.status == "warmup").sum() == 2 * 2 * 1
    cells = pd.read_csv(figures / "01_roofline_cells.csv")
    assert set(cells.gpu) == {"cpu-test"} and len(cells) == 4
    env = json.loads((data_dir / "raw" / "cpu-test" / "env.json").read_text())
    assert any(e.get("experiment") == "bandwidth" for e in env.values())


def test_02_measure_mode_on_a_tiny_model_records_unavailable_arms(tmp_path, data_dir):
    figures = tmp_path / "figures"
    _run("02_cuda_graphs_ab", tmp_path, MEASURE=True, GPU="cpu-test", DEVICE="cpu", MODELS=["llama-tiny"],
         CONTEXTS=[16], HEADLINE_CTX=16, SESSIONS=1, HEADLINE_SESSIONS=2, COMPILE_CONTEXTS=[16], STEPS=2,
         WARMUP=1, DATA_DIR=str(data_dir), FIGURES_DIR=str(figures))
    rows = pd.read_csv(data_dir / "raw" / "cpu-test" / "decode.csv")
    eager = rows[(rows.arm == "eager") & (rows.status == "ok")]
    assert eager.session.nunique() == 2
    for arm, reason in (("graph", "CUDA graphs need a CUDA device"), ("compile", "reduce-overhead")):
        status = rows[rows.arm == arm]
        assert set(status.status) == {"unavailable"} and status.reason.str.contains(reason).all()
    kernels = pd.read_csv(data_dir / "raw" / "cpu-test" / "kernels.csv")
    assert set(kernels.status) == {"unavailable"}


def test_committed_notebooks_have_parameters_and_no_outputs():
    for nb in notebooks.notebook_paths():
        cells = json.loads(nb.read_text())["cells"]
        assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in cells), nb
        assert not any(c.get("outputs") or c.get("execution_count") for c in cells if c["cell_type"] == "code"), nb


def test_unknown_gpu_in_measure_mode_is_a_clear_error(tmp_path, data_dir):
    import papermill

    with pytest.raises(papermill.PapermillExecutionError, match="unknown GPU key 'nosuch'.*Known: l4"):
        _run("01_roofline", tmp_path, MEASURE=True, GPU="nosuch", DEVICE="cpu", MODELS=["llama-tiny"],
             CONTEXTS=[16], SESSIONS=1, STEPS=1, WARMUP=1, DATA_DIR=str(data_dir), FIGURES_DIR=str(tmp_path / "f"))


def test_hardware_registry_is_what_the_notebooks_read():
    assert hardware.gpu_spec("h200").bandwidth_gbps == 4800


def test_committed_tables_are_what_the_data_regenerate(replayed):
    """figures/ can never be stale: every table the replayed notebooks write equals the committed one."""
    _, figures = replayed
    written = sorted(p for p in figures.iterdir() if p.suffix in (".csv", ".md"))
    assert written, "the replay wrote no tables"
    for path in written:
        committed = paths.FIGURES / path.name
        assert committed.exists(), f"{path.name} is regenerated but not committed in figures/"
        assert path.read_text() == committed.read_text(), f"figures/{path.name} is stale: run `make reproduce`"
