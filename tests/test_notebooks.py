"""Notebooks executed by papermill: replay on the shipped data, and measure mode on a tiny model on the CPU."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from decodegap import accounting, hardware, notebooks, paths
from decodegap.harness import models

pytestmark = pytest.mark.notebooks


def _run(stem, tmp_path, **params):
    nb = paths.NOTEBOOKS / f"{stem}.ipynb"
    return notebooks.run(nb, params, out_dir=tmp_path / "executed")


def test_03_replay_tables_every_backend(replayed):
    """On the shipped data the paper's table has a row per backend, the published column among them."""
    from decodegap.harness import attention

    _, figures = replayed
    table = pd.read_csv(figures / "03_attention_table.csv")
    assert table.shape[0] == len(attention.BACKENDS) and "h100-sxm us (published)" in table


def test_04_replay_on_shipped_data_has_the_published_column_and_says_no_rows(replayed):
    from decodegap import records
    from decodegap.analysis.quantisation import NOTEBOOK_PATHS

    _, figures = replayed
    out = figures.parent / "executed" / "04_quantisation_l4.ipynb"
    table = pd.read_csv(figures / "04_quant_table.csv")
    assert sorted(set(table.ctx)) == [2048, 16384] and len(table) == 2 * len(NOTEBOOK_PATHS) == 14
    assert table[table.ctx == 16384]["l4 ms (published)"].isna().all()  # the paper's context is unstated: first context only
    table = table[table.ctx == 2048].set_index("quant")
    assert table.loc["bf16", "l4 ms (published)"] == 62.32 and table.loc["awq-marlin", "l4 ms (published)"] == 45.24
    assert pd.notna(table.loc["gptq-exllamav2", "l4 floor ms"])
    for name in ("04_quant_ms_vs_floor.png", "04_quant_grid.png", "04_quant_bytes.md", "04_quant_table.md",
                 "04_quant_layers.csv", "04_quant_gpu_pairs.csv"):
        assert (figures / name).stat().st_size > 0
    text = "".join("".join(o.get("text", "")) for c in json.loads(out.read_text())["cells"] for o in c.get("outputs", []))
    cells = pd.read_csv(figures / "04_quant_cells.csv")  # counted quantised cells (their checks in their own run)
    no_quant_rows = not ((cells["quant"] != "bf16") & cells["t_obs_ms"].notna()).any()
    found = pd.read_csv(figures / "04_findings.csv")
    assert ("quant_rows" in found and found["quant_rows"].eq(False).any()) == no_quant_rows
    if not (records.load_experiment("decode", paths.DATA)["quant"] != "bf16").any():
        assert "none yet" in text


def test_executed_notebooks_show_every_figure_inline(replayed):
    """Each figure a notebook writes to figures/ (style.save) is also an image output of its cell, the same PNG."""
    import base64

    _, figures = replayed
    executed = figures.parent / "executed"
    for nb in notebooks.notebook_paths():
        cells = json.loads((executed / nb.name).read_text())["cells"]
        saves = sum("".join(c["source"]).count("style.save(") for c in cells if c["cell_type"] == "code")
        images = [o["data"]["image/png"] for c in cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
        assert saves > 0 and len(images) == saves, f"{nb.name}: {len(images)} inline images for {saves} figures"
        texts = [t for c in cells for o in c.get("outputs", []) for t in o.get("data", {}).get("text/plain", [])]
        assert not any("PosixPath(" in t for t in texts), f"{nb.name} echoes a path where a figure belongs"
    written = {p.read_bytes() for p in figures.glob("*.png")}
    assert base64.b64decode(images[-1]) in written


def test_01_replay_rebuilds_the_cell_table_from_raw_rows(replayed):
    data, figures = replayed
    for name in ("01_r_floor_vs_bandwidth.png", "01_step_time_vs_context.png", "01_roofline_cells.md"):
        assert (figures / name).stat().st_size > 0
    cells = pd.read_csv(figures / "01_roofline_cells.csv")
    # Recompute one cell by hand from the raw rows: median over sessions of each session's median.
    raw = pd.read_csv(data / "raw" / "h200" / "decode.csv")
    sel = raw[(raw.model == "qwen2.5-7b") & (raw.ctx == 2048) & (raw.arm == "eager") & (raw.status == "ok")
              & (raw.attn == "sdpa") & (raw.quant == "bf16")]  # notebook 01's cells: default attention, bf16
    env = json.loads((data / "raw" / "h200" / "env.json").read_text())
    widest = max(len((env[r].get("plan") or {}).get("contexts") or ()) for r in set(sel.run_id))
    sel = sel[[len((env[r].get("plan") or {}).get("contexts") or ()) == widest for r in sel.run_id]]  # one sweep
    assert widest == 4 and sel.session.nunique() == 3  # the grid's sessions; the headline top-up is left out
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


def test_02_replay_gives_speedups_with_intervals(replayed):
    data, figures = replayed
    table = pd.read_csv(figures / "02_ab_cells.csv")
    head = table[(table.gpu == "h200") & (table.ctx == 2048)]
    assert len(head) == 3
    # by hand from the raw rows: which run each session is from, and that run's plan (env.json)
    raw = pd.read_csv(data / "raw" / "h200" / "ab.csv")
    raw = raw[(raw.ctx == 2048) & (raw.status == "ok") & (raw.attn == "sdpa") & (raw.quant == "bf16")]
    env = json.loads((data / "raw" / "h200" / "env.json").read_text())
    grid_run = raw.run_id.map(lambda r: "compile" in env[r]["plan"]["arms"])
    n_grid, n_head = raw[grid_run].session.nunique(), raw[~grid_run].session.nunique()
    assert n_grid >= 3 and n_head >= 3 and set(raw[grid_run].session).isdisjoint(raw[~grid_run].session)
    # the grid's table pools no headline session: its headline cells have the grid's sessions only
    assert (head.sessions_graph == n_grid).all() and (head.sessions_eager == n_grid).all()
    grid = table[table.gpu == "h200"]  # every cell of the grid has all three arms, N >= 3
    assert len(grid) == 12 and (grid[["sessions_eager", "sessions_graph", "sessions_compile"]] >= 3).all().all()
    assert ((head.speedup_graph_low <= head.speedup_graph) & (head.speedup_graph <= head.speedup_graph_high)).all()
    # below 10 sessions the interval is the range of the sessions' ratios, named so, and no CI is claimed
    per_grid = raw[grid_run].groupby(["model", "session", "arm"]).step_ms.median().unstack("arm")
    ratios = (per_grid.eager / per_grid.graph).groupby(level="model")
    by_model = head.set_index("model")
    assert by_model.speedup_graph_low.to_dict() == pytest.approx(ratios.min().to_dict(), abs=1e-3)
    assert by_model.speedup_graph_high.to_dict() == pytest.approx(ratios.max().to_dict(), abs=1e-3)
    assert (head.speedup_graph_interval == f"range of {n_grid} sessions").all() and head.speedup_graph_ci_low.isna().all()
    # the headline statistic: the headline sweep's sessions alone, mean of per-session eager / graph medians
    speed = pd.read_csv(figures / "02_speedups.csv")
    headline = speed[(speed.gpu == "h200") & (speed.ctx == 2048) & (speed.arm == "graph") & (speed.sweep == "headline")]
    # the newest headline run alone counts (older headline runs are history, never pooled with it)
    newest = raw[~grid_run].run_id.max()  # run ids start with their UTC start time
    n_head = raw[raw.run_id == newest].session.nunique()
    per = raw[raw.run_id == newest].groupby(["model", "session", "arm"]).step_ms.median().unstack("arm")
    by_hand = (per.eager / per.graph).groupby(level="model").mean()
    assert len(headline) == 3 and (headline.sessions == n_head).all()
    assert headline.set_index("model").speedup.to_dict() == pytest.approx(by_hand.to_dict(), abs=1e-3)
    settings = pd.read_csv(figures / "02_compile_settings.csv")  # both compile settings on all 12 cells
    assert len(settings) == 12 and settings.regions_ms.notna().all() and settings.whole_model_ms.notna().all()
    decomp = pd.read_csv(figures / "02_decomposition.csv")
    # the stack adds up: floor + excess + launch overhead = eager step time (tables round to 3 decimals)
    total = decomp.t_floor_ms + decomp.gpu_excess_ms + decomp.launch_overhead_ms
    assert ((total - decomp.eager_ms).abs() < 2e-3).all()
    assert (figures / "02_speedup_ci.png").exists() and (figures / "02_decomposition.png").exists()


def test_05_replay_prices_every_configuration_and_writes_the_claims(replayed):
    _, figures = replayed
    costs = pd.read_csv(figures / "05_cost_configurations.csv")
    pub = costs[costs.source == "published (paper)"].set_index("configuration")
    l4, h100 = pub[pub.gpu == "l4"], pub[pub.gpu == "h100-sxm"]
    # by hand: $/Mtok = $/h * ms / 3.6
    assert l4.loc["gptq-exllamav2", "usd_per_mtok"] == pytest.approx(0.7992 * 17.36 / 3.6, abs=1e-3)
    assert h100.loc["bf16 graph", "usd_per_mtok"] == pytest.approx(3.9492 * 11.78 / 3.6, abs=1e-3)
    every = costs[costs.source == "measured"]
    assert len(every) > 0 and set(every.gpu) <= {"h200", "h100-sxm"}
    measured = every[every.gpu == "h200"]  # priced at Spheron's rate (no Modal price found)
    assert (measured.price_provider == "spheron").all() and (measured.usd_per_hour == 4.54).all()
    assert measured.price_note.str.contains("no modal price for h200: spheron's price").all()
    row = measured.iloc[0]
    assert row.usd_per_mtok == pytest.approx(4.54 * row.step_ms / 3.6, abs=1e-3)
    h100_ours = every[every.gpu == "h100-sxm"]  # the H100 measured here, at Modal's price as the paper's
    assert (h100_ours.price_provider == "modal").all() and (h100_ours.usd_per_hour == 3.9492).all()
    assert (h100_ours.usd_per_mtok - 3.9492 * h100_ours.step_ms / 3.6).abs().max() < 1e-3 if len(h100_ours) else True
    ladder = pd.read_csv(figures / "05_cost_ladder.csv")
    assert ladder.usd_per_mtok.notna().all() and set(ladder.gpu) == {"l4", "h100-sxm", "h200"}
    assert set(ladder[ladder.gpu == "h200"].price_provider) == {"spheron"}
    claims_table = pd.read_csv(figures / "claims.csv")
    assert set(pd.read_csv(paths.DATA / "published" / "paper.csv").claim) <= set(claims_table.claim)
    md = (figures / "claims.md").read_text()
    assert all(f"| {i} " in md for i in claims_table["id"])
    assert (figures / "05_cost_ladder.png").stat().st_size > 0


def test_07_replay_draws_what_exists_and_says_what_is_not_measured(replayed):
    """Without rows of notebook 07's own sweeps its batch and size tables say "not measured" (never a number), while
    the cell table holds the other notebooks' batch-1 cells and the published points are the paper's."""
    from decodegap.analysis import where_the_thesis_ends as scope
    from decodegap.experiments import where_the_thesis_ends as experiment

    data, figures = replayed
    own = scope.scope_rows(experiment.rows(data))
    cells = pd.read_csv(figures / "07_cells.csv")
    assert {"llama-3.1-8b", "mistral-7b-v0.3", "qwen2.5-7b"} <= set(cells.model) and (cells.batch >= 1).all()
    points = pd.read_csv(figures / "07_published_points.csv").set_index("gpu")
    pub = pd.read_csv(paths.DATA / "published" / "paper.csv")
    eager = pub[(pub.quantity == "step_ms") & (pub.arm == "eager") & (pub.quant == "bf16")].set_index("gpu").value
    assert (points.eager_ms == eager.loc[points.index]).all() and set(points.index) == {"h100-sxm", "l4"}
    found = (figures / "07_findings.md").read_text()
    claims_table = pd.read_csv(figures / "claims.csv").set_index("id")
    if own.empty:
        for stem in ("07_batch_within_floor", "07_fixed_share_by_size", "07_fixed_share_by_batch"):
            assert (pd.read_csv(figures / f"{stem}.csv") == scope.NOT_MEASURED).all().all(), stem
        assert pd.read_csv(figures / "07_launch_share.csv").empty and "Not measured yet" in found
        assert (claims_table.loc[["W1", "W2a", "W2b"], "category"] == "not testable here").all()
    else:
        assert not pd.read_csv(figures / "07_step_model_fits.csv").empty


def test_every_committed_figure_is_regenerated(replayed):
    """No orphan in figures/: every committed table and figure is written by a notebook."""
    _, figures = replayed
    written = {p.name for p in figures.iterdir()}
    committed = {p.name for p in paths.FIGURES.iterdir() if p.suffix in (".csv", ".md", ".png")}
    assert committed <= written, f"not regenerated by any notebook: {sorted(committed - written)}"


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
         CONTEXTS=[16], HEADLINE_CTX=16, SESSIONS=1, HEADLINE_SESSIONS=1, COUNT_KERNELS=True, STEPS=2,
         WARMUP=1, DATA_DIR=str(data_dir), FIGURES_DIR=str(figures))
    rows = pd.read_csv(data_dir / "raw" / "cpu-test" / "ab.csv")
    eager = rows[(rows.arm == "eager") & (rows.status == "ok")]
    assert sorted(eager.session.unique()) == [0, 1]  # the grid's session, then a headline session of its own
    # (several headline sessions numbered after the grid's: tests/test_sweep.py, without a session process each)
    for arm, reason in (("graph", "CUDA graphs need a CUDA device"), ("compile", "reduce-overhead")):
        status = rows[rows.arm == arm]
        assert set(status.status) == {"unavailable"} and status.reason.str.contains(reason).all()
    kernels = pd.read_csv(data_dir / "raw" / "cpu-test" / "kernels.csv")
    assert set(kernels.status) == {"unavailable"}
    env = json.loads((data_dir / "raw" / "cpu-test" / "env.json").read_text())
    walls = [e["ab_sweep"] for e in env.values() if "ab_sweep" in e]
    assert len(walls) == 1 and walls[0]["total_s"] >= walls[0]["grid_s"] + walls[0]["headline_s"] - 0.2


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


OUTPUT_LINES = 40
"""The most lines a notebook cell prints or shows as text (issue 30, item 8): a long table shows its head and tail
(tables.short_outputs), a long list of findings its first lines (tables.say); the whole is in figures/."""


def cell_output_lines(cell) -> int:
    """Lines of text one executed cell shows: its streams and the text form of its results."""
    n = 0
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            n += "".join(out["text"]).count("\n")
        elif "text/plain" in out.get("data", {}) and "image/png" not in out["data"]:
            n += "".join(out["data"]["text/plain"]).count("\n") + 1
    return n


def test_no_cell_prints_more_than_about_40_lines(replayed):
    _, figures = replayed
    long = {}
    for nb in notebooks.notebook_paths():
        cells = json.loads((figures.parent / "executed" / nb.name).read_text())["cells"]
        for i, cell in enumerate(cells):
            if cell["cell_type"] == "code" and cell_output_lines(cell) > OUTPUT_LINES:
                long[f"{nb.stem} cell {i}"] = cell_output_lines(cell)
    assert long == {}


def test_the_output_count_can_fail():
    cell = {"outputs": [{"output_type": "stream", "text": ["x\n"] * 50}]}
    assert cell_output_lines(cell) == 50 > OUTPUT_LINES


def test_each_notebook_kernel_has_sockets_of_its_own():
    """Two notebooks run at once from one working directory (the test workers, a user's two papermill runs) must
    not share IPC socket names: jupyter_client's default is kernel-ipc-<port> in the working directory, ports from 1."""
    import os
    import tempfile

    manager = notebooks._local_kernel_manager()
    a, b = manager(kernel_name="python3"), manager(kernel_name="python3")
    assert a.transport == b.transport == "ipc"
    assert a.ip != b.ip and os.path.dirname(a.ip) == os.path.dirname(b.ip) == tempfile.gettempdir()


def test_the_gallery_and_claim_r4o_print_the_same_spans(replayed):
    """The gallery's 04_quant_grid line reads notebook 04's pair table (04_quant_gpu_pairs.csv), claim R4o the cells
    themselves: each model's bf16 span of the share of the gain realised prints alike in both (the table at three
    decimals printed Mistral-7B's 58.55 % as 58, the claim as 59; 2026-12-07)."""
    import re

    _, figures = replayed
    line = pd.read_csv(figures / "gallery.csv").set_index("figure").loc["04_quant_grid.png", "finding"]
    r4o = pd.read_csv(figures / "claims.csv").set_index("id").loc["R4o", "evidence"]
    claimed = dict(re.findall(r"h200 over h100-sxm, (\S+) \(\d+ contexts\): bf16 (\S+) %", r4o))
    shown = dict(re.findall(r"On (\S+) \(lean_attn_graph, ctx [^)]*\) the H200, .*? \(realising (\S+) % of that gain\)",
                            line))
    assert len(claimed) == 3 and claimed == shown
