"""Notebook 06's ladder, targets and kernel breakdown on hand-made rows, and the notebook in measure mode on
a tiny model on the CPU (the lean eager arm runs; graphed, compiled and profiled ones are unavailable)."""

from __future__ import annotations

import pandas as pd
import pytest

from decodegap import accounting, hardware, ladder, models, notebooks, paths, roofline


def test_kernel_categories_by_name():
    assert ladder.category("nvjet_tst_64x8_64x16_4x1_v_bz_TNT") == "matmul"
    assert ladder.category("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm>") == "matmul"
    assert ladder.category("cudnn_generated_fort_native_sdpa_sm90_flash_fprop") == "attention"
    assert ladder.category("void at::native::(anonymous)::vectorized_elementwise_kernel<4, silu>") == "elementwise"
    assert ladder.category("void at::native::index_elementwise_kernel") == "copy / index"
    assert ladder.category("something_else") == "other"


def _cells(times: dict, floor_ms: float = 3.4) -> pd.DataFrame:
    """cell_table-like rows {(arm, quant): ms} for h200 llama-3.1-8b ctx 2048."""
    return pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, arm=a, attn="sdpa", quant=q, t_obs_ms=ms,
                              sessions=3, status="ok", t_floor_ms_W_all=floor_ms) for (a, q), ms in times.items()])


def test_ladder_table_orders_levers_and_marks_the_unmeasured():
    table = ladder.ladder_table(_cells({("eager", "bf16"): 24.0, ("graph", "bf16"): 8.5, ("lean_graph", "bf16"): 4.0}))
    assert list(table.lever) == [lever for lever, _, _ in ladder.LEVERS]
    got = table.set_index("lever")
    assert got.loc["lean graph", "r_floor_bf16"] == pytest.approx(3.4 / 4.0)
    assert got.loc["HF compiled", "status"] == "not measured" and pd.isna(got.loc["HF compiled", "t_obs_ms"])


def test_target_cell_only_levers_are_swept_and_marked_at_the_target_cell_alone():
    """int4 on the fastest path: over the grid int4 runs on the HF graph and the Triton-attention lean levers; the
    other int4 lean levers at the target cell (h200, llama-3.1-8b, ctx 2048) only."""
    plan = ladder.ladder_plan(["llama-3.1-8b", "qwen2.5-7b"], [2048, 4096], "h200")
    assert plan == [
        ("bf16", ("llama-3.1-8b", "qwen2.5-7b"), (2048, 4096), ("lean", "lean_graph", "lean_compile", "lean_kernels_graph",
                                                              "lean_attn_graph", "lean_attn_compile")),
        ("int4-tinygemm", ("llama-3.1-8b", "qwen2.5-7b"), (2048, 4096), ("graph", "lean_attn_graph", "lean_attn_compile")),
        ("int4-tinygemm", ("llama-3.1-8b",), (2048,), ("lean_graph", "lean_compile", "lean_kernels_graph"))]
    assert len(ladder.ladder_plan(["qwen2.5-7b"], [2048], "h200")) == 2  # no target cell in the grid
    assert len(ladder.ladder_plan(["llama-3.1-8b"], [2048], "h100-sxm")) == 2
    elsewhere = _cells({("eager", "bf16"): 24.0}).assign(ctx=4096)
    table = ladder.ladder_table(pd.concat([_cells({("eager", "bf16"): 24.0}), elsewhere])).set_index(["ctx", "lever"])
    assert table.loc[(2048, "int4 tinygemm, lean graph"), "status"] == "not measured"
    assert table.loc[(4096, "int4 tinygemm, lean graph"), "status"] == "target cell only"
    assert table.loc[(4096, "int4 tinygemm, lean graph + Triton attention"), "status"] == "not measured"


def test_targets_met_and_not_met():
    floor = 3.4  # -> the bf16 target is 3.4 / 0.8 = 4.25 ms
    missed = ladder.target_findings(ladder.ladder_table(_cells({("compile", "bf16"): 6.0, ("graph", "int4-tinygemm"): 6.8}, floor)))
    assert "best lever HF compiled 6.00 ms, R_floor 0.567: not met (1.41x the target time)" in missed[0]
    assert "<= 4.25 ms" in missed[0] and "6.80 ms: not met (3.40x the target)" in missed[1]
    met = ladder.target_findings(ladder.ladder_table(_cells({("lean_graph", "bf16"): 4.0, ("graph", "int4-tinygemm"): 1.9}, floor)))
    assert met[0].endswith("met.") and "not met" not in met[0] and met[1].endswith("met.")
    assert "no lever measured yet" in ladder.target_findings(ladder.ladder_table(_cells({}, floor)))[0]


def test_category_table_sets_each_category_against_the_floor_of_its_bytes(data_dir):
    config = models.load_spec("llama-3.1-8b").config
    rows = pd.DataFrame([dict(run_id="r", gpu="h200", model="llama-3.1-8b", ctx=2048, arm="eager", attn="sdpa",
                              quant="bf16", kernel_index=i, kernel=k, gpu_us=us, status="ok", reason="")
                         for i, (k, us) in enumerate([("nvjet_gemv", 3000.0), ("nvjet_gemv", 1000.0),
                                                      ("fmha_decode", 300.0), ("rms_norm_kernel", 50.0)])])
    table = ladder.category_table(rows, {"llama-3.1-8b": config}, hardware.specs_table(data_dir)).set_index("category")
    bandwidth = 4800.0  # H200 datasheet, GB/s
    assert table.loc["matmul", "kernels"] == 2 and table.loc["matmul", "gpu_us"] == 4000.0
    assert table.loc["matmul", "floor_us"] == pytest.approx(accounting.weight_bytes(config, "W_streamed") / bandwidth / 1e3)
    # K(2048) for Llama-3.1-8B: 2 x 32 layers x 8 kv heads x 128 x 2048 x 2 bytes = 268,435,456 bytes
    assert table.loc["attention", "floor_us"] == pytest.approx(268_435_456 / bandwidth / 1e3)
    assert table.loc["norm", "floor_us"] == 0.0 and table.loc["norm", "excess_us"] == 50.0


def test_notebook_06_measure_mode_on_a_tiny_model(tmp_path, data_dir):
    figures = tmp_path / "figures"
    notebooks.run(paths.NOTEBOOKS / "06_closing_the_gap.ipynb",
                  dict(MEASURE=True, GPU="cpu-test", DEVICE="cpu", MODELS=["llama-tiny"], CONTEXTS=[16], SESSIONS=1,
                       STEPS=2, WARMUP=1, LADDER_GPU="cpu-test", DATA_DIR=str(data_dir), FIGURES_DIR=str(figures)),
                  out_dir=tmp_path / "executed")
    rows = pd.read_csv(data_dir / "raw" / "cpu-test" / "decode.csv")
    assert (rows[rows.arm == "lean"].status == "ok").sum() == 2  # bf16 only: int4 has no lean eager lever
    swept = {"bf16": ("lean_graph", "lean_compile"),  # the int4 levers are swept too (the CPU has tinygemm's op)
             "int4-tinygemm": ("graph", "lean_attn_graph", "lean_attn_compile")}
    for quant, arms in swept.items():
        of = rows[rows.quant == quant]
        for arm in arms:
            assert set(of[of.arm == arm].status) == {"unavailable"}
    assert rows[(rows.quant == "int4-tinygemm") & (rows.arm == "lean_graph")].empty  # a target-cell-only lever
    table = pd.read_csv(figures / "06_ladder.csv").set_index("lever")
    assert table.loc["lean eager", "status"] == "ok" and table.loc["lean graph", "status"] == "unavailable"
    assert "CUDA" in table.loc["lean graph", "reason"]
    assert table.loc["int4 tinygemm, lean graph", "status"] == "target cell only"
    breakdown = pd.read_csv(data_dir / "raw" / "cpu-test" / "breakdown.csv")
    assert set(breakdown.status) == {"unavailable"} and breakdown.reason.str.contains("CUDA").all()
    assert (figures / "06_ladder.png").stat().st_size > 0


def test_a_lever_whose_check_failed_says_so_with_the_reason():
    cells = _cells({("eager", "bf16"): 24.0})
    lost = dict(gpu="h200", model="llama-3.1-8b", ctx=2048, arm="lean", attn="sdpa", quant="bf16", t_obs_ms=float("nan"),
                sessions=0, status="error", reason="correctness check failed: 1.5 (> 0.1)", t_floor_ms_W_all=3.4)
    table = ladder.ladder_table(pd.concat([cells, pd.DataFrame([lost])], ignore_index=True)).set_index("lever")
    assert table.loc["lean eager", "status"] == "error" and "check failed" in table.loc["lean eager", "reason"]
    assert table.loc["lean graph", "status"] == "not measured" and table.loc["HF eager", "status"] == "ok"
