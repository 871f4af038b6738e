"""Notebook 06's ladder, targets and kernel breakdown on hand-made rows, and the notebook in measure mode on
a tiny model on the CPU (the lean eager arm runs; graphed, compiled and profiled ones are unavailable)."""

from __future__ import annotations

import pandas as pd
import pytest

from decodegap import accounting, hardware, notebooks, paths
from decodegap.analysis import closing_the_gap as ladder, closing_the_gap_targets as ladder_targets
from decodegap.harness import models
from decodegap.analysis import profiles
from decodegap import levers


def test_kernel_categories_by_name():
    assert profiles.category("nvjet_tst_64x8_64x16_4x1_v_bz_TNT") == "matmul"
    assert profiles.category("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm>") == "matmul"
    assert profiles.category("cudnn_generated_fort_native_sdpa_sm90_flash_fprop") == "attention"
    assert profiles.category("void at::native::(anonymous)::vectorized_elementwise_kernel<4, silu>") == "elementwise"
    assert profiles.category("void at::native::index_elementwise_kernel") == "copy / index"
    assert profiles.category("something_else") == "other"
    assert profiles.category("fused_gemv_kernel") == "matmul" and profiles.category("rotary_cache_kernel") == "elementwise"


def _cells(times: dict, floor_ms: float = 3.4) -> pd.DataFrame:
    """cell_table-like rows {(arm, quant): ms} for h200 llama-3.1-8b ctx 2048."""
    return pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, arm=a, attn="sdpa", quant=q, t_obs_ms=ms,
                              sessions=3, status="ok", t_floor_ms_W_all=floor_ms) for (a, q), ms in times.items()])


def test_ladder_table_orders_levers_and_marks_the_unmeasured():
    table = ladder.ladder_table(_cells({("eager", "bf16"): 24.0, ("graph", "bf16"): 8.5, ("lean_graph", "bf16"): 4.0}))
    assert list(table.lever) == [lever for lever, _, _ in levers.LEVERS]
    got = table.set_index("lever")
    assert got.loc["lean graph", "r_floor_bf16"] == pytest.approx(3.4 / 4.0)
    assert got.loc["HF compiled", "status"] == "not measured" and pd.isna(got.loc["HF compiled", "t_obs_ms"])


def test_target_cell_only_levers_are_swept_and_marked_at_the_target_cell_alone():
    """int4 on the fastest path: over the grid int4 runs on the HF graph and the Triton-attention lean levers (the
    int4 GEMV's also on the fused int4 step's five, and with the int4 LM head on its three fastest and the four
    epilogue levers); the other int4 lean levers, the bf16 SiLU-epilogue, norm-scale, kv-together and
    rotary-in-attention levers and the int4-triton levers with every epilogue at the target cell (llama-3.1-8b,
    ctx 2048, on any GPU) only; elsewhere the
    ladder labels them `target cell only`, at the target's model and context on another GPU `not measured`."""
    plan = levers.ladder_plan(["llama-3.1-8b", "qwen2.5-7b"], [2048, 4096])
    assert plan == [
        ("bf16", ("llama-3.1-8b", "qwen2.5-7b"), (2048, 4096), ("lean", "lean_graph", "lean_compile", "lean_kernels_graph",
                                                              "lean_attn_graph", "lean_attn_compile",
                                                              "lean_fused_graph", "lean_fused_pdl_graph",
                                                              "lean_fused_pdl_norm_graph",
                                                              "lean_fused_pdl_epilogues_graph",
                                                              "lean_fused_early_graph",
                                                              "lean_fused_early_products_graph",
                                                              "lean_fused_merged_graph",
                                                              "lean_fused_next_token_graph")),
        ("bf16", ("llama-3.1-8b",), (2048,), ("lean_fused_silu_epilogue_graph", "lean_fused_norm_scale_graph",
                                               "lean_fused_kv_together_graph", "lean_fused_kv_together_merged_graph",
                                               "lean_fused_rotary_attention_graph",
                                               "lean_fused_rotary_prefetch_graph", "lean_fused_l2_prefetch_graph")),
        ("int4-tinygemm", ("llama-3.1-8b", "qwen2.5-7b"), (2048, 4096), ("graph", "lean_attn_graph", "lean_attn_compile")),
        ("int4-tinygemm", ("llama-3.1-8b",), (2048,), ("lean_graph", "lean_compile", "lean_kernels_graph")),
        ("int4-triton", ("llama-3.1-8b", "qwen2.5-7b"), (2048, 4096), ("graph", "lean_attn_graph", "lean_attn_compile",
                                                                         "lean_fused_graph", "lean_fused_pdl_norm_graph",
                                                                         "lean_fused_early_products_graph",
                                                                         "lean_fused_merged_graph",
                                                                         "lean_fused_silu_epilogue_graph")),
        ("int4-triton", ("llama-3.1-8b",), (2048,), ("lean_fused_all_epilogues_graph",
                                                     "lean_fused_epilogue_norms_graph",
                                                     "lean_fused_norms_next_token_graph",
                                                     "lean_fused_all_next_token_graph")),
        ("int4-triton-head", ("llama-3.1-8b", "qwen2.5-7b"), (2048, 4096),
         ("lean_attn_compile", "lean_fused_pdl_norm_graph", "lean_fused_early_products_graph",
          "lean_fused_silu_epilogue_graph", "lean_fused_all_epilogues_graph", "lean_fused_epilogue_norms_graph",
          "lean_fused_norms_next_token_graph", "lean_fused_all_next_token_graph")),
        ("int4-triton-head", ("llama-3.1-8b",), (2048,), ("lean_fused_all_norm_scale_graph",
                                                          "lean_fused_all_kv_together_graph",
                                                          "lean_fused_all_rotary_attention_graph",
                                                          "lean_fused_all_rotary_prefetch_graph",
                                                          "lean_fused_all_l2_prefetch_graph"))]
    # a target-cell-only lever a confirmation holds fastest at the target cell goes over the grid with the others
    promoted = levers.ladder_plan(["llama-3.1-8b", "qwen2.5-7b"], [2048, 4096],
                                  promoted={("lean_fused_kv_together_graph", "bf16")})
    assert promoted[0][3][-1] == "lean_fused_kv_together_graph" and promoted[0][1:3] == plan[0][1:3]
    assert promoted[1] == ("bf16", ("llama-3.1-8b",), (2048,), ("lean_fused_silu_epilogue_graph",
                                                                "lean_fused_norm_scale_graph",
                                                                "lean_fused_kv_together_merged_graph",
                                                                "lean_fused_rotary_attention_graph",
                                                                "lean_fused_rotary_prefetch_graph",
                                                                "lean_fused_l2_prefetch_graph"))
    assert promoted[2:] == plan[2:]
    assert len(levers.ladder_plan(["qwen2.5-7b"], [2048])) == 4  # no target cell in the grid
    # the target cell's model and context on any GPU (since 2026-12-06): its whole ladder, 4 grid and 4 target sweeps
    assert len(levers.ladder_plan(["llama-3.1-8b"], [2048])) == 8
    only = levers.ladder_plan(["llama-3.1-8b"], [2048], only=("lean_fused_pdl_graph", "lean_compile"))
    assert only == [("bf16", ("llama-3.1-8b",), (2048,), ("lean_compile", "lean_fused_pdl_graph")),
                    ("int4-tinygemm", ("llama-3.1-8b",), (2048,), ("lean_compile",))]  # ladder --levers
    elsewhere = _cells({("eager", "bf16"): 24.0}).assign(ctx=4096)
    table = ladder.ladder_table(pd.concat([_cells({("eager", "bf16"): 24.0}), elsewhere])).set_index(["ctx", "lever"])
    assert table.loc[(2048, "int4 tinygemm, lean graph"), "status"] == "not measured"
    assert table.loc[(4096, "int4 tinygemm, lean graph"), "status"] == "target cell only"
    assert table.loc[(4096, "int4 tinygemm, lean graph + Triton attention"), "status"] == "not measured"
    h100 = ladder.ladder_table(_cells({("eager", "bf16"): 24.0}).assign(gpu="h100-sxm")).set_index("lever")
    assert h100.loc["int4 tinygemm, lean graph", "status"] == "not measured"  # the plan sweeps it there too
    promoted = ladder.ladder_table(pd.concat([_cells({("eager", "bf16"): 24.0}), elsewhere]),
                                   promoted={("lean_graph", "int4-tinygemm")}).set_index(["ctx", "lever"])
    assert promoted.loc[(4096, "int4 tinygemm, lean graph"), "status"] == "not measured"  # the plan sweeps it there
    assert promoted.loc[(4096, "int4 tinygemm, lean compiled"), "status"] == "target cell only"


def _confirmed(table: pd.DataFrame, sessions: int = 3, fresh: float = 1.0) -> pd.DataFrame:
    """The confirmation table of `table`'s chosen levers, each confirmed at its selection median (times `fresh`) in
    `sessions` sessions of a confirmation sweep, the runner-up 1 % slower in each."""
    from decodegap.analysis import closing_the_gap_confirmation as confirm
    from decodegap.levers import CONFIRM_FIRST_SESSION

    choice = confirm.choices(table)
    rows = []
    for c in choice.to_dict("records"):
        arms = [(c["arm"], c["quant"], fresh)] + ([(c["runner_up_arm"], c["runner_up_quant"], 1.01 * fresh)]
                                               if pd.notna(c["runner_up_arm"]) else [])
        rows += [dict(gpu=c["gpu"], model=c["model"], ctx=c["ctx"], run_id="conf", session=CONFIRM_FIRST_SESSION + s,
                      arm=arm, quant=quant, step_ms=c["selected_ms"] * f, status="ok", batch=1)
                 for s in range(sessions) for arm, quant, f in arms]
    return confirm.confirmation_table(choice, pd.DataFrame(rows))


def test_targets_met_and_not_met():
    floor = 3.4  # -> the bf16 target is 3.4 / 0.85 = 4.0 ms
    t = ladder.ladder_table(_cells({("compile", "bf16"): 6.0, ("graph", "int4-tinygemm"): 6.8}, floor))
    missed = ladder_targets.target_findings(t, _confirmed(t))
    bf16, int4 = (line.values for line in missed)
    assert (bf16["lever"], bf16["t_obs_ms"], bf16["met"]) == ("HF compiled", 6.0, False)
    assert bf16["goal_ms"] == pytest.approx(4.0) and bf16["r_floor"] == pytest.approx(3.4 / 6.0)
    assert bf16["over_goal"] == pytest.approx(1.5)
    assert (int4["t_obs_ms"], int4["goal_ms"], int4["met"]) == (6.8, 2.0, False) and int4["over_goal"] == pytest.approx(3.4)
    assert f"{bf16['over_goal']:.2f}x the target time" in missed[0]  # the sentence renders its values
    t = ladder.ladder_table(_cells({("lean_graph", "bf16"): 4.0, ("compile", "bf16"): 4.1,
                                    ("graph", "int4-tinygemm"): 1.9}, floor))
    met = ladder_targets.target_findings(t, _confirmed(t))
    assert [line.values["met"] for line in met] == [True, True] and met[0].values["r_floor"] == pytest.approx(0.85)
    assert met[0].values["margin_median"] == pytest.approx(0.01) and "margin +1.0 %" in met[0]
    # the same selection without its confirmation sweep: not confirmed, not counted, whatever its median
    unconfirmed = ladder_targets.target_findings(t)
    assert [line.values["met"] for line in unconfirmed] == [False, False]
    assert all(line.values["status"] == "not confirmed" and "not counted" in line for line in unconfirmed)
    # a lever confirmed at the cell before the current pick: the target counts its confirmed time, met or not
    for held_ms, met in ((4.0, True), (4.5, False)):
        held = pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, kind="bf16", arm="compile",
                                  quant="bf16", confirmed_ms=held_ms, confirmed_min_ms=held_ms,
                                  confirmed_max_ms=held_ms + 0.02, sessions=9)])
        line = ladder_targets.target_findings(t, confirmed=held)[0]
        assert line.values["status"] == "not confirmed" and line.values["met"] is met
        assert line.values["counted_ms"] == held_ms and line.values["counted_r_floor"] == pytest.approx(3.4 / held_ms)
        assert "The fastest lever confirmed there (9 fresh sessions" in line and "HF compiled" in line
    same = pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, kind="bf16", arm="lean_graph",
                              quant="bf16", confirmed_ms=4.0, confirmed_min_ms=4.0, confirmed_max_ms=4.0, sessions=3)])
    assert "counted_ms" not in ladder_targets.target_findings(t, confirmed=same)[0].values  # the pick itself
    partly = ladder_targets.target_findings(t, _confirmed(t, sessions=2))
    assert partly[0].values["status"] == "partly confirmed" and not partly[0].values["met"]
    # partly confirmed and slower in its fresh sessions than in the selection: the line states the fresh sessions
    partly = ladder_targets.target_findings(t, _confirmed(t, sessions=2, fresh=1.1))
    assert partly[1].values["fresh_ms"] == pytest.approx(1.9 * 1.1) and partly[1].values["selected_ms"] == 1.9
    assert "its 2 fresh sessions so far take 2.09 ms" in partly[1] and not partly[1].values["met"]
    [none] = ladder_targets.target_findings(ladder.ladder_table(_cells({}, floor)))[:1]
    assert none.values == {"kind": "bf16", "measured": False}


def test_a_partly_confirmed_pick_beside_a_counted_lever_states_both_gaps():
    """The pick's 2 fresh sessions at 2.15 ms (int4 goal 2.0 ms: 0.15 ms short) and the lever the target counts,
    confirmed at 2.49 ms (0.49 ms short): the sentence names whose time each gap is taken from."""
    t = ladder.ladder_table(_cells({("lean_fused_early_products_graph", "int4-triton"): 2.0}, 3.4))
    held = pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, kind="int4", arm="lean_attn_graph",
                              quant="int4-triton", confirmed_ms=2.49, confirmed_min_ms=2.48, confirmed_max_ms=2.61,
                              sessions=3)])
    profile = _profile_at_target("lean_fused_early_products_graph", "int4-triton", 1400.0, 1000.0, 10.0)
    int4 = ladder_targets.target_findings(t, _confirmed(t, sessions=2, fresh=1.075), profile, confirmed=held)[1]
    assert int4.values["short_ms"] == pytest.approx(0.15) and int4.values["counted_ms"] == 2.49
    assert ("What stands in the way: 0.15 ms to remove from the median of the chosen lever's fresh sessions; 0.49 ms "
            "from the 2.49 ms of the lever the target counts.") in int4
    assert "(no runner-up timed at the cell)" in int4 and "nan" not in int4  # one lever at the cell


def test_an_unconfirmed_pick_within_the_goal_names_its_confirmation_not_a_negative_time():
    """The pick's selection median at 1.88 ms (int4 goal 2.0 ms), no fresh session yet, beside the lever the target
    counts at 2.49 ms: what stands in the way is the pick's confirmation, with 0.12 ms to spare, and the counted
    lever's 0.49 ms; never "-0.12 ms to remove"."""
    t = ladder.ladder_table(_cells({("lean_fused_early_products_graph", "int4-triton"): 1.88}, 3.4))
    held = pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, kind="int4", arm="lean_attn_graph",
                              quant="int4-triton", confirmed_ms=2.49, confirmed_min_ms=2.48, confirmed_max_ms=2.61,
                              sessions=3)])
    profile = _profile_at_target("lean_fused_early_products_graph", "int4-triton", 1400.0, 1000.0, 10.0)
    int4 = ladder_targets.target_findings(t, _confirmed(t, sessions=0), profile, confirmed=held)[1]
    assert int4.values["short_ms"] == pytest.approx(-0.12) and not int4.values["met"]
    assert ("What stands in the way: its confirmation. The chosen lever's selection median is 0.12 ms within the "
            "goal; the 2.49 ms of the lever the target counts are 0.49 ms over it.") in int4
    assert "-0.12" not in int4


def _profile_at_target(arm: str, quant: str, matmul_us: float, matmul_floor_us: float, small_us: float) -> pd.DataFrame:
    """A category_table of one profiled step at the target cell: its products, 64 attention kernels at 300 us against
    a 100 us floor, and its small kernels."""
    cell = dict(gpu="h200", model="llama-3.1-8b", ctx=2048, arm=arm, quant=quant)
    return pd.DataFrame([dict(cell, category="matmul", kernels=129, gpu_us=matmul_us, floor_us=matmul_floor_us),
                         dict(cell, category="attention", kernels=64, gpu_us=300.0, floor_us=100.0),
                         dict(cell, category="elementwise", kernels=200, gpu_us=small_us, floor_us=0.0)])


def test_a_target_not_met_names_the_term_in_the_way():
    """bf16 at 4.5 ms against the 4.0 ms goal (3.4 / 0.85): 0.5 ms to remove; its profiled step's products sit
    3600 - 3000 = 600 us above their floor, more than attention's 200 and the small kernels' 100 us. The int4
    lever at 2.6 ms (goal 2.0 ms) was not profiled: the same path's other profiled step stands in, named, and its
    small kernels (900 us) are the largest term above the floors (products 1400 - 1000 = 400 us)."""
    floor = 3.4
    t = ladder.ladder_table(_cells({("lean_fused_pdl_graph", "bf16"): 4.5,
                                    ("lean_attn_compile", "int4-triton"): 2.6}, floor))
    profile = pd.concat([_profile_at_target("lean_fused_pdl_graph", "bf16", 3600.0, 3000.0, 100.0),
                         _profile_at_target("lean_attn_graph", "int4-triton", 1400.0, 1000.0, 900.0),
                         _profile_at_target("lean_attn_graph", "int4-tinygemm", 1000.0, 1000.0, 10.0)])
    bf16, int4 = ladder_targets.target_findings(t, _confirmed(t), profile)
    assert not bf16.values["met"] and bf16.values["short_ms"] == pytest.approx(0.5)
    assert bf16.values["products_excess_ms"] == pytest.approx(0.6) and bf16.values["largest_term"].startswith("the matrix")
    assert "What stands in the way: 0.50 ms to remove from its confirmed time." in bf16 and "not profiled" not in bf16
    assert int4.values["short_ms"] == pytest.approx(0.6) and int4.values["profiled_quant"] == "int4-triton"
    assert (int4.values["profiled_arm"], int4.values["largest_term"]) == ("lean_attn_graph", "the small kernels")
    assert "not profiled" in int4 and "(0.90 ms)" in int4
    # an int4 lever of the fused design: its design's bf16 step stands in before its path's unfused one (the same
    # attention, small kernels and gaps), so the products, 600 us above their floor, are the term named
    fused = ladder.ladder_table(_cells({("lean_fused_pdl_norm_graph", "bf16"): 4.5,
                                        ("lean_fused_pdl_norm_graph", "int4-triton"): 2.4}, floor))
    design = pd.concat([profile, _profile_at_target("lean_fused_pdl_norm_graph", "bf16", 3600.0, 3000.0, 100.0)])
    _, fused_int4 = ladder_targets.target_findings(fused, _confirmed(fused), design)
    assert (fused_int4.values["profiled_arm"], fused_int4.values["profiled_quant"]) == ("lean_fused_pdl_norm_graph",
                                                                                        "bf16")
    assert fused_int4.values["largest_term"].startswith("the matrix") and "its design, the same arm" in fused_int4
    assert "overlap" not in fused_int4 and "overlap" not in bf16 and "overlap" not in int4  # sums within the step
    # the lever's own profile summing to more than its step (kernels overlapping under PDL): said, with by how much;
    # another step standing in (the bf16 design above, 4.0 ms against 2.4 ms) is never compared with the lever's time
    own = pd.concat([design, _profile_at_target("lean_fused_pdl_norm_graph", "int4-triton", 2000.0, 1000.0, 200.0)])
    _, overlapping = ladder_targets.target_findings(fused, _confirmed(fused), own)
    assert overlapping.values["overlap_ms"] == pytest.approx(2.5 - 2.4)  # 2000 + 300 + 200 us against 2.4 ms
    assert "sum to 2.50 ms, 0.10 ms more than the step's 2.40 ms" in overlapping
    # a target met names nothing; no profiles, no term
    met = ladder.ladder_table(_cells({("lean_fused_pdl_graph", "bf16"): 3.9}, floor))
    [line, _] = ladder_targets.target_findings(met, _confirmed(met), profile)
    assert line.values["met"] and "stands in the way" not in line
    assert "stands in the way" not in ladder_targets.target_findings(t, _confirmed(t))[0]


def test_the_int4_grid_target_counts_every_int4_cell_by_its_confirmed_lever():
    """Two int4 cells against 2.3 ms: ctx 2048's fastest int4 lever at 2.2 ms meets it (a bf16 lever there is no int4
    cell), ctx 4096's at 2.5 ms does not; unconfirmed, neither counts."""
    cells = pd.concat([_cells({("lean_attn_compile", "int4-triton"): 2.2, ("graph", "int4-tinygemm"): 5.0,
                               ("lean_graph", "bf16"): 4.0}),
                       _cells({("lean_attn_compile", "int4-triton"): 2.5}).assign(ctx=4096)])
    table = ladder.ladder_table(cells)
    [line] = ladder_targets.int4_grid_target_findings(table, _confirmed(table))
    v = line.values
    assert (v["cells"], v["cells_confirmed"], v["cells_met"], v["met"], v["goal_ms"]) == (2, 2, 1, False, 2.3)
    assert (v["slowest_ctx"], v["confirmed_ms_max"]) == (4096, 2.5) and "best of many: not counted): not met." in line
    assert "(2.20-2.50 ms; the slowest m" in line.replace("llama-3.1-8b", "m")
    partly = _confirmed(table)
    partly.loc[(partly.ctx == 4096) & (partly.kind == "int4"), ["status", "confirmed_ms"]] = ["not confirmed", None]
    [one] = ladder_targets.int4_grid_target_findings(table, partly)
    assert "1 of 2 cells' chosen int4 levers confirmed" in one and "(2.20 ms; the one cell llama-3.1-8b ctx 2048" in one
    [single] = ladder_targets.int4_grid_target_findings(ladder.ladder_table(_cells({("lean_attn_compile",
                                                                                     "int4-triton"): 2.2})))
    assert "(2.20 ms, best of many" in single  # one cell's selection: its time, not a span of one value
    [unconfirmed] = ladder_targets.int4_grid_target_findings(table)
    assert not unconfirmed.values["met"] and unconfirmed.values["cells_selected_met"] == 1
    [none] = ladder_targets.int4_grid_target_findings(ladder.ladder_table(_cells({("lean_graph", "bf16"): 4.0})))
    assert none.values == {"measured": False}


def test_the_int4_grid_names_what_the_slowest_cell_must_lose_and_what_its_context_explains():
    """ctx 2048 confirmed at 2.2 ms (floor 3.4 ms), ctx 8192 at 2.6 ms (floor 3.7 ms): 0.30 ms over the 2.3 ms goal;
    the step grew 0.40 ms from ctx 2048, 0.30 ms of it the KV floor's growth, so the context's cost above its floor is
    0.10 ms, less than the 0.30 ms to remove. With ctx 8192's floor at 3.5 ms the context's cost above its floor, 0.30 ms,
    covers the time to remove; a slowest cell at its model's only confirmed context names the time to remove alone."""
    cells = pd.concat([_cells({("lean_attn_compile", "int4-triton"): 2.2}, 3.4),
                       _cells({("lean_attn_compile", "int4-triton"): 2.6}, 3.7).assign(ctx=8192)])
    table = ladder.ladder_table(cells)
    [line] = ladder_targets.int4_grid_target_findings(table, _confirmed(table))
    v = line.values
    assert v["slowest_over_ms"] == pytest.approx(0.3) and v["growth_ms"] == pytest.approx(0.4)
    assert v["kv_floor_growth_ms"] == pytest.approx(0.3) and v["context_excess_ms"] == pytest.approx(0.1)
    assert (v["base_ctx"], v["base_ms"]) == (2048, 2.2)
    assert "What stands in the way: 0.30 ms to remove from the slowest confirmed cell (2.60 ms, 1.13x the goal)." in line
    assert "0.40 ms more than the same model's confirmed cell at ctx 2048 (2.20 ms)" in line
    assert ("0.10 ms is the longer context's cost above its floor, less than the 0.30 ms to remove; the step at ctx 2048 "
            "must shrink too.") in line
    # the context's cost above its floor as large as the time to remove: nothing said of the shorter step
    cells = pd.concat([_cells({("lean_attn_compile", "int4-triton"): 2.2}, 3.4),
                       _cells({("lean_attn_compile", "int4-triton"): 2.6}, 3.5).assign(ctx=8192)])
    table = ladder.ladder_table(cells)
    [enough] = ladder_targets.int4_grid_target_findings(table, _confirmed(table))
    assert enough.values["context_excess_ms"] == pytest.approx(0.3)
    assert "as much as or more than the 0.30 ms to remove." in enough and "must shrink" not in enough
    # the slowest cell alone over the goal, at its model's one confirmed context
    table = ladder.ladder_table(_cells({("lean_attn_compile", "int4-triton"): 2.5}))
    [alone] = ladder_targets.int4_grid_target_findings(table, _confirmed(table))
    assert "0.20 ms to remove from the slowest confirmed cell (2.50 ms, 1.09x the goal)." in alone
    assert "growth_ms" not in alone.values and "more than the same model's" not in alone
    # every confirmed cell within the goal: nothing stands in the way
    table = ladder.ladder_table(_cells({("lean_attn_compile", "int4-triton"): 2.2}))
    [met] = ladder_targets.int4_grid_target_findings(table, _confirmed(table))
    assert "stands in the way" not in met and "slowest_over_ms" not in met.values


def test_earlier_targets_are_judged_on_the_same_rows_and_say_when_they_held():
    """4.1 ms on a 3.4 ms floor (R_floor 0.829): not the current bf16 target's 0.85, but the earlier 0.80; every
    earlier target keeps its line, led by its dates."""
    t = ladder.ladder_table(_cells({("lean_fused_pdl_graph", "bf16"): 4.1}))
    [current, _] = ladder_targets.target_findings(t, _confirmed(t))
    assert not current.values["met"]
    earlier = ladder_targets.earlier_target_findings(t, _confirmed(t))
    assert [line.values["earlier"] for line in earlier] == [e["name"] for e in levers.EARLIER_TARGETS]
    bf16 = next(line for line in earlier if line.values["earlier"] == "bf16")
    assert bf16.values["met"] and bf16.values["goal_ms"] == pytest.approx(3.4 / 0.80)
    assert all(line.startswith("Earlier target (held ") for line in earlier)
    assert all(e["until"] >= e["since"] and e["why"] for e in levers.EARLIER_TARGETS)


def test_the_grid_target_counts_cells_by_their_fastest_lever_and_names_the_weakest():
    """Two cells (floor 3.0 ms, goal 3.0 / 0.80 = 3.75 ms): ctx 2048's fastest lever at 3.75 ms meets it (a slower
    lever there does not count against it), ctx 4096's at 5.0 ms does not; the weakest cell's profiled step names
    its largest term above the floor (products 1.6 - 1.0 over attention 0.5 - 0.1 and small kernels 0.3)."""
    cells = pd.concat([_cells({("lean_graph", "bf16"): 3.75, ("eager", "bf16"): 24.0}, 3.0),
                       _cells({("lean_attn_graph", "bf16"): 5.0}, 3.0).assign(ctx=4096)])
    profile = pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=4096, arm="lean_attn_graph", quant="bf16",
                                 category=c, kernels=k, gpu_us=us, floor_us=f)
                            for c, k, us, f in (("matmul", 129, 1600.0, 1000.0), ("attention", 64, 500.0, 100.0),
                                                ("elementwise", 10, 300.0, 0.0))])
    table = ladder.ladder_table(cells)
    [line] = ladder_targets.grid_target_findings(table, profile, confirmation=_confirmed(table))
    v = line.values
    assert (v["cells"], v["cells_confirmed"], v["cells_met"], v["met"]) == (2, 2, 1, False)
    assert (v["weakest_ctx"], v["weakest_ms"], v["weakest_goal_ms"]) == (4096, 5.0, pytest.approx(3.75))
    assert v["r_floor_min"] == pytest.approx(0.6) and v["r_floor_max"] == pytest.approx(0.8)
    assert v["products_excess_ms"] == pytest.approx(0.6) and v["largest_term"].startswith("the matrix products")
    assert "2 of 2 cells' chosen levers confirmed by a fresh sweep, 1 of them meeting it" in line and "(1.33x)" in line
    one = ladder.ladder_table(cells[cells.ctx == 2048])
    [met] = ladder_targets.grid_target_findings(one, confirmation=_confirmed(one))
    assert met.values["met"] and met.endswith("met.")
    [selected] = ladder_targets.grid_target_findings(one)  # the selection alone reaches it, and is not counted
    assert not selected.values["met"] and selected.values["cells_selected_met"] == 1
    assert "0 of 1 cells' chosen levers confirmed" in selected and "best of many: not counted" in selected
    assert "weakest cell on the selection sweeps" not in selected  # it reaches the goal: nothing to name
    # nothing confirmed: the selection's weakest cell (ctx 4096, 5.0 ms against 3.75 ms) is named, not counted, with
    # its profiled step's largest term
    [unconfirmed] = ladder_targets.grid_target_findings(table, profile)
    u = unconfirmed.values
    assert (u["selected_weakest_ctx"], u["selected_weakest_ms"]) == (4096, 5.0)
    assert u["selected_weakest_goal_ms"] == pytest.approx(3.75) and "(1.33x)" in unconfirmed
    assert u["selected_weakest_largest_term"].startswith("the matrix products") and "(not counted)" in unconfirmed
    [none] = ladder_targets.grid_target_findings(ladder.ladder_table(_cells({}, 3.0)))
    assert none.values == {"measured": False}


def test_category_table_sets_each_category_against_the_floor_of_its_bytes(data_dir):
    config = models.load_spec("llama-3.1-8b").config
    rows = pd.DataFrame([dict(run_id="r", gpu="h200", model="llama-3.1-8b", ctx=2048, arm="eager", attn="sdpa",
                              quant="bf16", kernel_index=i, kernel=k, gpu_us=us, status="ok", reason="")
                         for i, (k, us) in enumerate([("nvjet_gemv", 3000.0), ("nvjet_gemv", 1000.0),
                                                      ("fmha_decode", 300.0), ("rms_norm_kernel", 50.0)])])
    table = profiles.category_table(rows, {"llama-3.1-8b": config}, hardware.specs_table(data_dir)).set_index("category")
    bandwidth = 4800.0  # H200 datasheet, GB/s
    assert table.loc["matmul", "kernels"] == 2 and table.loc["matmul", "gpu_us"] == 4000.0
    assert table.loc["matmul", "floor_us"] == pytest.approx(accounting.weight_bytes(config, "W_streamed") / bandwidth / 1e3)
    # K(2048) for Llama-3.1-8B: 2 x 32 layers x 8 kv heads x 128 x 2048 x 2 bytes = 268,435,456 bytes
    assert table.loc["attention", "floor_us"] == pytest.approx(268_435_456 / bandwidth / 1e3)
    assert table.loc["norm", "floor_us"] == 0.0 and table.loc["norm", "excess_us"] == 50.0


@pytest.mark.notebooks
def test_notebook_06_measure_mode_on_a_tiny_model(tmp_path, data_dir):
    figures = tmp_path / "figures"
    notebooks.run(paths.NOTEBOOKS / "06_closing_the_gap.ipynb",
                  dict(MEASURE=True, GPU="cpu-test", DEVICE="cpu", MODELS=["llama-tiny"], CONTEXTS=[16], SESSIONS=1,
                       STEPS=2, WARMUP=1, LADDER_GPU="cpu-test", DATA_DIR=str(data_dir), FIGURES_DIR=str(figures)),
                  out_dir=tmp_path / "executed")
    rows = pd.read_csv(data_dir / "raw" / "cpu-test" / "decode.csv")
    assert (rows[rows.arm == "lean"].status == "ok").sum() == 2  # bf16 only: int4 has no lean eager lever
    checks = pd.read_csv(data_dir / "raw" / "cpu-test" / "verify.csv")
    sharp = checks[checks.check == "vs_eager_sharp"]  # the sharpened check of the bf16 lean eager cell, recorded
    assert list(sharp.arm) == ["lean"] and list(sharp.quant) == ["bf16"] and list(sharp.status) == ["ok"]
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


def test_torch_compile_kernels_are_categorised_by_what_they_do_not_the_ops_they_came_from():
    """Inductor names a fused kernel after its nodes' ops: `matmul` in a pointwise kernel's name is not a product."""
    assert profiles.category("triton_poi_fused_add_arange_cat_embedding_index_matmul_mul_neg_select_slice_9") == "elementwise"
    assert profiles.category("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_11") == "norm"
    assert profiles.category("triton_per_fused_add_mean_mul_rsqrt_3") == "norm"
    assert profiles.category("triton_tem_fused_mm_0") == "matmul"
    assert profiles.category("split_kernel") == "attention"
    assert profiles.category("void cublasLt::splitKreduce_kernel<32, 16, int, float>") == "matmul"


def _profile(arm: str, kernels: list[tuple[str, float]], model: str = "llama-tiny") -> pd.DataFrame:
    return pd.DataFrame([dict(run_id="r", gpu="h200", model=model, ctx=2048, arm=arm, attn="sdpa", quant="bf16",
                              kernel_index=i, kernel=k, gpu_us=us, status="ok", reason="")
                         for i, (k, us) in enumerate(kernels)])


def test_projection_table_names_each_product_and_sets_it_against_its_bytes(data_dir):
    # llama-tiny widened so that tinygemm's group size 128 divides every K: hidden 128 (4 heads x 32, 2 KV heads),
    # intermediate 256, 2 layers
    config = dict(models.load_spec("llama-tiny").config, hidden_size=128, intermediate_size=256)
    layer = [("rms_norm_kernel", 1.0), ("nvjet_qkv", 10.0), ("void cublasLt::splitKreduce_kernel<>", 2.0),
             ("split_kernel", 3.0), ("nvjet_o", 5.0), ("triton_red_fused_add_matmul_mean_rsqrt_2", 1.0),
             ("nvjet_gate_up", 20.0), ("vectorized_elementwise_kernel<silu>", 1.0), ("nvjet_down", 8.0)]
    int4_layer = [(k.replace("nvjet", "tinygemm_m16n8k16_chunk_kernel"), us) for k, us in layer]
    hf_layer = [("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32>", 9.0)] + [
        (f"nvjet_{p}", 4.0) for p in ("q", "k", "v", "o", "gate", "up", "down")]
    rows = pd.concat([_profile("lean_attn_compile", layer * 2 + [("nvjet_head", 30.0)]),
                      _profile("eager", hf_layer * 2 + [("nvjet_head", 30.0)]),
                      _profile("lean", layer * 2),  # no LM head: not 2 x 4 + 1 products, left out
                      _profile("lean_attn_compile", int4_layer * 2 + [("nvjet_head", 30.0)]).assign(quant="int4-tinygemm")])
    specs = hardware.specs_table(data_dir)
    table = profiles.projection_table(rows, {"llama-tiny": config}, specs).set_index(["arm", "quant", "projection"]).sort_index()
    assert set(table.index.droplevel("projection")) == {("lean_attn_compile", "bf16"), ("eager", "bf16"),
                                                       ("lean_attn_compile", "int4-tinygemm")}
    qkv = table.loc[("lean_attn_compile", "bf16", "qkv")]
    assert qkv["calls"] == 2 and qkv["gpu_us"] == 2 * (10.0 + 2.0)  # the split-K reduction is its product's
    # qkv reads 128 x (128 + 2 x 64) bf16 weights = 65,536 bytes per call
    assert qkv["bytes"] == 2 * 65_536
    assert qkv["floor_us"] == pytest.approx(2 * 65_536 / 4800e9 * 1e6)
    assert qkv["gbps"] == pytest.approx(2 * 65_536 / 24e-6 / 1e9)
    # int4 tinygemm: 128 x 256 codes / 2 = 16,384 bytes + scales and zeros 2 x 2 x (128 / 128) x 256 = 1,024
    assert table.loc[("lean_attn_compile", "int4-tinygemm", "qkv"), "bytes"] == 2 * (16_384 + 1_024)
    assert table.loc[("lean_attn_compile", "int4-tinygemm", "lm_head"), "bytes"] == 256 * 128 * 2  # bf16 head
    assert table.loc[("lean_attn_compile", "bf16", "lm_head"), "gpu_us"] == 30.0
    assert table.loc[("eager", "bf16", "q"), "gpu_us"] == 8.0  # the rotary's fp32 sgemm is not a product of weights
    assert len(table.loc[("eager", "bf16")]) == 8
    narrow = profiles.projection_table(rows, {"llama-tiny": models.load_spec("llama-tiny").config}, specs)
    assert set(narrow.quant) == {"bf16"}  # hidden 64: G = 128 does not divide it, the int4 step is left out


SHAPES = {"qkv": 50e6, "o": 33e6, "gate_up": 235e6, "down": 117e6, "lm_head": 1050e6}  # bytes per call


def _products(fixed_us: float, gbps: float) -> pd.DataFrame:
    """projection_table rows of products taking exactly `fixed_us` plus their bytes at `gbps` (32 layers, one head)."""
    return pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, arm="lean_attn_compile", quant="bf16",
                              projection=p, calls=calls, gpu_us=calls * (fixed_us + b / (gbps * 1e9) * 1e6), bytes=calls * b,
                              floor_us=0.0, gbps=0.0, of_datasheet=0.5)
                         for p, b in SHAPES.items() for calls in [1 if p == "lm_head" else 32]])


def test_a_line_through_the_products_recovers_fixed_cost_and_streaming_rate():
    """Products that take exactly 6 us plus their bytes at 4,000 GB/s give back 6 us and 4,000 GB/s."""
    rows = _products(6.0, 4000.0)
    fit = profiles.product_cost_fit(rows).iloc[0]
    assert fit["fixed_us"] == pytest.approx(6.0) and fit["stream_gbps"] == pytest.approx(4000.0)
    assert fit["products"] == 4 * 32 + 1
    line = ladder.projection_findings(rows)[0]
    v = line.values
    assert "pdl" not in v and "Under PDL" not in line  # lean_attn_compile launches without PDL
    pdl = ladder.projection_findings(rows.assign(arm="lean_fused_early_products_graph"))[0]
    assert pdl.values["pdl"] and "these shares are lower bounds and the fixed cost an upper bound" in pdl
    assert v["fixed_us"] == pytest.approx(6.0) and v["stream_gbps"] == pytest.approx(4000.0) and v["products"] == 129
    assert v["fixed_ms"] == pytest.approx(129 * 6.0 / 1e3)
    assert v["products_ms"] == pytest.approx(rows["gpu_us"].sum() / 1e3)
    assert profiles.product_cost_fit(rows.head(2)).empty  # two shapes do not make a line


def test_the_budget_splits_the_measured_step_and_says_what_the_goal_leaves():
    """Products of 6 us + bytes at 4,000 GB/s over 32 x (50 + 33 + 235 + 117) MB + 1,050 MB = 14.97 GB: 3.7425 ms
    streaming, 129 x 6 us = 0.774 ms fixed, 4.5165 ms in all; with attention 0.3 and elementwise 0.2 ms the kernels
    sum to 5.0165 ms, so a 5.2 ms step has 0.18 ms between kernels; the 4.0 ms goal (R_floor 0.85 of a 3.4 ms floor)
    leaves 4.0 - 3.7425 = 0.2575 ms
    beside the weights, where the rest takes 5.2 - 3.7425 = 1.46 ms."""
    products = _products(6.0, 4000.0)
    cell = dict(gpu="h200", model="llama-3.1-8b", ctx=2048, arm="lean_attn_compile", quant="bf16")
    by_category = pd.DataFrame([dict(cell, category="matmul", kernels=129, gpu_us=products.gpu_us.sum()),
                                dict(cell, category="attention", kernels=64, gpu_us=300.0),
                                dict(cell, category="elementwise", kernels=100, gpu_us=200.0)])
    table = ladder.ladder_table(_cells({("lean_attn_compile", "bf16"): 5.2}))
    (line,) = ladder.budget_findings(by_category, products, table)
    v = line.values
    assert v["lever"] == "lean compiled + Triton attention" and v["t_obs_ms"] == 5.2
    assert v["products_ms"] == pytest.approx(4.5165) and v["stream_ms"] == pytest.approx(3.7425)
    assert v["fixed_ms"] == pytest.approx(0.774) and v["head_ms"] == 0.0
    assert (v["attention_ms"], v["small_ms"]) == (pytest.approx(0.3), pytest.approx(0.2))
    assert v["between_ms"] == pytest.approx(5.2 - 5.0165) and v["goal_ms"] == pytest.approx(4.0)
    assert v["left_ms"] == pytest.approx(4.0 - 3.7425) and v["rest_ms"] == pytest.approx(5.2 - 3.7425)
    assert f"leaves {v['left_ms']:.2f} ms beside the weights" in line  # the sentence renders its values
    assert ladder.budget_findings(by_category, products, ladder.ladder_table(_cells({("eager", "bf16"): 24.0}))) == []
    int4 = ladder.budget_findings(by_category.assign(quant="int4-tinygemm"), products.assign(quant="int4-tinygemm"),
                                  ladder.ladder_table(_cells({("lean_attn_compile", "int4-tinygemm"): 5.2})))
    v = int4[0].values
    assert v["lever"] == "int4 tinygemm, lean compiled + Triton attention" and v["t_obs_ms"] == 5.2
    # int4's goal is 2.0 ms per step; its bf16 LM head (6 + 262.5 us) is off the line: 128 products stream
    # 13.92 GB in 3.48 ms, so the goal is 3.48 + 0.2685 - 2.0 = 1.75 ms short of them
    stream_ms = 32 * (50e6 + 33e6 + 235e6 + 117e6) / 4000e9 * 1e3
    assert v["stream_ms"] == pytest.approx(stream_ms) and v["head_ms"] == pytest.approx(0.2685)
    assert v["goal_ms"] == 2.0 and v["left_ms"] == pytest.approx(2.0 - stream_ms - 0.2685)
    assert "head_projected_ms" not in v and "LM head stays bf16" not in int4[0]  # no config given: no projection
    # given Llama-3.1-8B's config: its head in tinygemm's format is 4096 x 128256 / 2 codes + 2 x 2 bytes of scale
    # and zero per 128 weights = 262,668,288 + 16,416,768 = 279,085,056 bytes, at the bf16 head's measured
    # 1,050 MB / 268.5 us
    config = {"llama-3.1-8b": models.load_spec("llama-3.1-8b").config}
    (line,) = ladder.budget_findings(by_category.assign(quant="int4-tinygemm"), products.assign(quant="int4-tinygemm"),
                                     ladder.ladder_table(_cells({("lean_attn_compile", "int4-tinygemm"): 5.2})), config)
    p = line.values
    assert p["head_quant_bytes"] == 279_085_056 and p["head_bytes"] == 1_050_000_000
    assert p["head_projected_ms"] == pytest.approx(279_085_056 / (1050e6 / 268.5e-6) * 1e3)
    assert p["head_saving_ms"] == pytest.approx(0.2685 - p["head_projected_ms"])
    assert "a projection from these rows, not a measurement" in line
    assert "LM head stays bf16" not in ladder.budget_findings(by_category, products, table, config)[0]  # bf16: none


def test_gap_findings_set_the_goal_against_the_bytes_a_step_reads_at_copy_speed(data_dir):
    """Llama-3.1-8B ctx 2048: W_streamed = 8,030,261,248 - 525,336,576 + 4,096 params = 7,504,928,768 x 2 bytes and
    K(2048) = 268,435,456 bytes, 15,278,292,992 bytes: 3.183 ms at 4,800 GB/s, 3.638 ms at a 4,200 GB/s copy. The
    goal, R_floor 0.85 of a 3.4 ms floor, is 4.0 ms: 4.0 - 3.638 = 0.36 ms above it."""
    config = models.load_spec("llama-3.1-8b").config
    rows = _profile("lean_attn_compile", [("nvjet_gemv", 4000.0), ("split_kernel", 300.0), ("triton_poi_fused_add_1", 50.0)],
                    model="llama-3.1-8b")
    by_category = profiles.category_table(rows, {"llama-3.1-8b": config}, hardware.specs_table(data_dir))
    lines = ladder.gap_findings(by_category, ladder.ladder_table(_cells({("lean_attn_compile", "bf16"): 4.5})),
                                hardware.specs_table(data_dir), {"h200": 4200.0})
    step, budget = (line.values for line in lines)
    assert (step["arm"], step["kernels"], step["small_kernels"]) == ("lean_attn_compile", 3, 1)
    assert step["gpu_ms"] == pytest.approx(4.35) and step["products_ms"] == pytest.approx(4.0)
    assert step["attention_ms"] == pytest.approx(0.3) and step["small_ms"] == pytest.approx(0.05)
    read_ms = 15_278_292_992 / 4800e9 * 1e3
    assert budget["read_ms"] == pytest.approx(read_ms) and budget["copy_ms"] == pytest.approx(read_ms * 4800 / 4200)
    assert budget["goal_ms"] == pytest.approx(4.0) and budget["above_ms"] == pytest.approx(4.0 - read_ms * 4800 / 4200)
    assert f"leaves {budget['above_ms']:.2f} ms above that" in lines[1]  # the sentence renders its values


def test_the_products_figure_draws_each_step_with_its_line_and_the_datasheet_line():
    from decodegap.figures import closing_the_gap as ladder_plots

    rows = _products(6.0, 4000.0)
    fig = ladder_plots.products(rows, profiles.product_cost_fit(rows), "h200", "llama-3.1-8b", 2048, 4800.0)
    (ax,) = fig.axes
    points = [c for c in ax.collections if len(c.get_offsets())]  # one marker per product (the rest: legend keys)
    assert sum(len(c.get_offsets()) for c in points) == len(rows) and len(ax.lines) == 2  # its line, the datasheet's
    fit_line, datasheet = ax.lines
    x, y = fit_line.get_data()
    assert y[0] == pytest.approx(6.0 + x[0] * 1e3 / 4000.0) and datasheet.get_ydata()[-1] == pytest.approx(x[-1] / 4.8)
    empty = ladder_plots.products(rows, profiles.product_cost_fit(rows), "h200", "qwen2.5-7b", 2048, 4800.0)
    assert not empty.axes[0].lines


def test_cli_closing_the_gap_passes_its_options_to_the_experiments_measure(monkeypatch, data_dir):
    """`python -m decodegap closing-the-gap` parses the grid and its options and hands them to the experiment's measure."""
    from decodegap import cli
    from decodegap.experiments import closing_the_gap

    seen = []
    monkeypatch.setattr(closing_the_gap, "measure", lambda *a, **kw: seen.append((a, kw)))
    rc = cli.main(["--data-dir", str(data_dir), "closing-the-gap", "--gpu", "cpu-test", "--device", "cpu",
                   "--models", "llama-tiny", "--contexts", "64, 128", "--sessions", "2", "--steps", "7",
                   "--warmup", "1", "--retry-errors", "--levers", "lean_fused_graph,lean_attn_compile"])
    assert rc == 0
    assert seen == [(("cpu-test", ("llama-tiny",), (64, 128), 2, 7, 1, "cpu", str(data_dir)),
                     {"retry_errors": True, "only": ("lean_fused_graph", "lean_attn_compile"), "again": False})]
    seen.clear()
    assert cli.main(["--data-dir", str(data_dir), "closing-the-gap", "--gpu", "cpu-test", "--device", "cpu",
                     "--models", "llama-tiny"]) == 0
    (args, kw), = seen
    seen.clear()
    assert cli.main(["--data-dir", str(data_dir), "ladder", "--gpu", "cpu-test", "--device", "cpu", "--models",
                     "llama-tiny", "--levers", "lean_fused_pdl_graph", "--again"]) == 0
    assert seen[0][1] == {"retry_errors": False, "only": ("lean_fused_pdl_graph",), "again": True}
    assert args[2:6] == ((2048, 4096, 8192, 16384), 3, 30, 5) and kw == {"retry_errors": False, "only": None, "again": False}


def test_cli_closing_the_gap_refuses_a_bad_context_before_measuring(monkeypatch, data_dir, capsys):
    from decodegap import cli
    from decodegap.experiments import closing_the_gap

    monkeypatch.setattr(closing_the_gap, "measure", lambda *a, **kw: pytest.fail("measured despite a bad option"))
    assert cli.main(["--data-dir", str(data_dir), "closing-the-gap", "--gpu", "cpu-test", "--device", "cpu",
                     "--models", "llama-tiny", "--contexts", "2k"]) == 2
    assert "--contexts takes comma-separated whole numbers" in capsys.readouterr().err


def test_reading_findings_by_hand():
    """The lean graph against HF's graph at the target cell, a profiled step category by category, the growth
    with context and the fastest lever per cell, from a two-context ladder and a two-category profile."""
    t = levers.TARGETS["bf16"]
    rows = []
    for ctx, graph_ms, lean_ms, attn_ms in ((t["ctx"], 9.0, 8.0, 6.0), (4 * t["ctx"], 18.0, 16.0, 6.6)):
        for arm, ms in (("graph", graph_ms), ("lean_graph", lean_ms), ("lean_attn_graph", attn_ms)):
            rows.append(dict(gpu=t["gpu"], model=t["model"], ctx=ctx, lever=arm, arm=arm, quant="bf16", t_obs_ms=ms,
                             status="ok"))
    prof = pd.DataFrame([dict(gpu=t["gpu"], model=t["model"], ctx=t["ctx"], arm=arm, quant="bf16", category=c,
                              kernels=k, gpu_us=us, floor_us=f)
                         for arm, c, k, us, f in (("eager", "matmul", 200, 4000.0, 3000.0),
                                                  ("eager", "elementwise", 800, 1500.0, 0.0),
                                                  ("lean", "matmul", 100, 3900.0, 3000.0),
                                                  ("lean", "elementwise", 700, 1400.0, 0.0))])
    lines = ladder.reading_findings(pd.DataFrame(rows), prof)
    assert lines[0].values == dict(lean_graph_ms=8.0, graph_ms=9.0, graph_over_lean=9.0 / 8.0, lean_kernels=800,
                                   hf_kernels=1000)
    assert lines[1].values == dict(arm="eager", kernels=1000, gpu_ms=5.5, small_kernels=800, small_ms=1.5)
    growth = lines[3].values
    assert (growth["ctx_first"], growth["ctx_last"]) == (t["ctx"], 4 * t["ctx"])
    assert growth["graph_growth"] == pytest.approx(2.0) and growth["lean_attn_graph_growth"] == pytest.approx(1.1)
    assert lines[4].values == dict(cells=2, fastest="lean_attn_graph", fastest_cells=2)
    assert "(x1.10)" in lines[3]  # the sentence renders its values


def test_a_cell_timed_only_with_superseded_weights_says_so():
    """selection.with_superseded's rows of the old weight synthesis: the ladder keeps their time and names them in the
    reason; a cell with rows of the model's own weights does not."""
    rows = pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, arm=a, quant=q, status=s, weights=w)
                         for a, q, s, w in [("lean_attn_compile", "int4-tinygemm", "ok", "synthesised (superseded)"),
                                            ("lean_attn_graph", "int4-tinygemm", "ok", "rtn from bf16"),
                                            ("lean_graph", "int4-tinygemm", "error", "synthesised (superseded)"),
                                            ("compile", "bf16", "ok", float("nan"))]])  # an A/B row: no label
    old = ladder.superseded_cells(rows)
    assert old == {("h200", "llama-3.1-8b", 2048, "lean_attn_compile", "int4-tinygemm")}
    table = ladder.ladder_table(_cells({("lean_attn_compile", "int4-tinygemm"): 3.2,
                                        ("lean_attn_graph", "int4-tinygemm"): 4.8}), superseded=old).set_index("arm")
    table = table[table.quant == "int4-tinygemm"]
    assert table.loc["lean_attn_compile", "reason"] == ladder.SUPERSEDED_REASON
    assert table.loc["lean_attn_compile", "t_obs_ms"] == 3.2 and table.loc["lean_attn_graph", "reason"] == ""
    assert ladder.superseded_cells(rows.drop(columns="weights")) == set()


def test_levers_with_no_timed_cell_are_named():
    """A lever of the ladder without a timed cell on a GPU gets a line naming it; measured ones are not named. Where
    the unmeasured are more than the measured, they are counted and the measured ones named instead."""
    table = ladder.ladder_table(_cells({("eager", "bf16"): 24.0, ("lean_attn_compile", "bf16"): 4.9}))
    [never] = ladder_targets.unmeasured_findings(table)
    n = table["lever"].nunique()
    assert never.values["unmeasured_levers"] == n - 2
    assert never == (f"Not measured on the h200 in any cell: {n - 2} of the {n} levers, all but HF eager; "
                     f"lean compiled + Triton attention.")
    few = table.assign(status="ok")  # every lever timed but one
    few.loc[few["lever"] == "lean graph, fused Triton step + PDL", "status"] = "not measured"
    [one] = ladder_targets.unmeasured_findings(few)
    assert one == "Not measured on the h200 in any cell: lean graph, fused Triton step + PDL."


def test_a_cell_awaiting_its_picks_confirmation_counts_the_lever_confirmed_there_before():
    """The grids count a cell whose current pick awaits confirmation on the lever confirmed there before (its
    confirmed time and R_floor), and leave a confirmed cell and a cell with no earlier lever as they are."""
    from decodegap.analysis import closing_the_gap_confirmation as confirm

    base = dict(gpu="h200", kind="bf16", t_floor_bf16_ms=3.4, runner_up=None, selected_ms=4.0,
                confirmed_min_ms=float("nan"), confirmed_max_ms=float("nan"))
    cells = pd.DataFrame([
        dict(base, model="a", ctx=2048, lever="new", arm="lean_graph", quant="bf16", status="not confirmed",
             confirmed_ms=float("nan"), r_floor_bf16=float("nan")),
        dict(base, model="a", ctx=4096, lever="x", arm="lean_graph", quant="bf16", status=confirm.CONFIRMED,
             confirmed_ms=4.1, r_floor_bf16=3.4 / 4.1),
        dict(base, model="b", ctx=2048, lever="y", arm="lean_graph", quant="bf16", status="not confirmed",
             confirmed_ms=float("nan"), r_floor_bf16=float("nan"))])
    held = pd.DataFrame([dict(gpu="h200", model=m, ctx=c, kind="bf16", arm="compile", quant="bf16",
                              confirmed_ms=4.25, confirmed_min_ms=4.2, confirmed_max_ms=4.3, sessions=3)
                         for m, c in (("a", 2048), ("a", 4096))])
    out, n = ladder_targets._with_held(cells, held)
    assert n == 1 and list(out["status"]) == [confirm.CONFIRMED, confirm.CONFIRMED, "not confirmed"]
    assert out.loc[0, "lever"] == "HF compiled" and out.loc[0, "confirmed_ms"] == 4.25
    assert out.loc[0, "r_floor_bf16"] == pytest.approx(3.4 / 4.25)
    assert out.loc[1, "confirmed_ms"] == 4.1 and out.loc[1, "lever"] == "x"  # its own confirmation stands
    line = ladder_targets.grid_target_findings(pd.DataFrame(), target=dict(gpu="h200", r_floor=0.8),
                                               confirmation=cells, confirmed=held)[0]
    assert line.values["cells_confirmed"] == 2 and line.values["cells_held"] == 1 and "1 of them on the lever" in line


def test_the_ladder_promotes_the_levers_confirmed_fastest_at_the_target_cell(tmp_path):
    """On the shipped rows the kv-together levers are confirmed fastest of their kinds at the target cell (runs
    20261205T155814-2be9f5, bf16, and 20261205T155920-fac1a2 with 20261205T160920-09b2e3, int4), so the ladder's plan
    sweeps them over the grid; the norm-scale levers they overtook stay at the target cell. A data folder without
    confirmation rows promotes none."""
    from decodegap.experiments import closing_the_gap as experiment

    assert experiment.promoted_levers(None) == {("lean_fused_kv_together_graph", "bf16"),
                                                ("lean_fused_all_kv_together_graph", "int4-triton-head")}
    grid = {quant: arms for quant, models, contexts, arms in experiment.plan("h200", ["llama-3.1-8b", "qwen2.5-7b"],
                                                                             [2048, 4096])
            if len(models) == 2}
    assert "lean_fused_kv_together_graph" in grid["bf16"] and "lean_fused_norm_scale_graph" not in grid["bf16"]
    assert "lean_fused_all_kv_together_graph" in grid["int4-triton-head"]
    assert "lean_fused_all_norm_scale_graph" not in grid["int4-triton-head"]
    assert experiment.promoted_levers(tmp_path) == frozenset()


def test_each_lever_is_profiled_on_its_own_path():
    """measure's profiles (profiled_levers): in bf16 only the profiled arms that have a bf16 lever, at every cell; an
    int4 lever's arm on its own path at the target cell only, and only where the grid holds the target cell's model and
    context (on any GPU). (The
    ladder's run of 2026-12-05 profiled the int4-only lean_fused_all_kv_together_graph on the bf16 model.)"""
    from decodegap.experiments import closing_the_gap as experiment

    grid = (("llama-3.1-8b",), (2048, 4096))
    sweeps = [("bf16", *grid, ("lean_fused_kv_together_graph",)),
              ("int4-triton-head", *grid, ("lean_fused_all_kv_together_graph", "lean_attn_compile"))]
    only = ("lean_fused_kv_together_graph", "lean_fused_all_kv_together_graph", "lean_attn_compile")
    assert experiment.profiled_levers(sweeps, only, *grid) == [
        ("bf16", ("lean_fused_kv_together_graph",), False),
        ("int4-triton-head", ("lean_fused_all_kv_together_graph",), True)]  # the compiled arm is not profiled here
    assert experiment.profiled_levers(sweeps, only, ("qwen2.5-7b",), (2048, 4096)) == [
        ("bf16", ("lean_fused_kv_together_graph",), False)]  # no target cell in that grid
    (quant, everything, _), *_ = experiment.profiled_levers(sweeps, None, *grid)
    assert quant == "bf16" and "lean_fused_kv_together_graph" in everything and "eager" in everything
    assert not {"lean_fused_all_kv_together_graph", "lean_fused_all_next_token_graph"} & set(everything)


def test_the_grid_findings_name_the_target_cells_confirmed_lever_where_it_has_no_rows():
    """The lever confirmed fastest at the target cell (kv-together, 4.0 ms at llama-3.1-8b ctx 2048), promoted to the
    grid but not yet timed at ctx 4096: the grid line says so and names the command; with rows there, or not promoted
    (`target cell only` there: the ladder's plan does not sweep it), it says nothing of it."""
    kv = ("lean_fused_kv_together_graph", "bf16")
    promoted = frozenset({kv})
    cells = pd.concat([_cells({kv: 4.0, ("lean_graph", "bf16"): 4.5}, 3.0),
                       _cells({("lean_graph", "bf16"): 5.0}, 3.0).assign(ctx=4096)])
    table = ladder.ladder_table(cells, promoted=promoted)
    [line] = ladder_targets.grid_target_findings(table, confirmation=_confirmed(table))
    assert line.values["target_lever_unswept"] == 1 and line.values["target_lever_arm"] == kv[0]
    assert ("has no rows in 1 of the grid's 1 other cells: `python -m decodegap ladder --gpu h200 --levers "
            "lean_fused_kv_together_graph` times it there") in line
    unpromoted = ladder.ladder_table(cells)
    [quiet] = ladder_targets.grid_target_findings(unpromoted, confirmation=_confirmed(unpromoted))
    assert "target_lever_unswept" not in quiet.values and "has no rows in" not in quiet
    swept = pd.concat([cells, _cells({kv: 4.2}, 3.0).assign(ctx=4096)])
    full = ladder.ladder_table(swept, promoted=promoted)
    [done] = ladder_targets.grid_target_findings(full, confirmation=_confirmed(full))
    assert "has no rows in" not in done
    [unconfirmed] = ladder_targets.grid_target_findings(table)  # nothing confirmed at the target: nothing to name
    assert "has no rows in" not in unconfirmed


def test_the_selection_plan_lists_what_a_ladder_call_would_time_and_writes_nothing(tmp_path, capsys):
    """closing-the-gap --plan without --confirm: the selection sweeps of levers.ladder_plan in order, each session's
    cells to time. On a data folder with no rows, by hand: lean_graph over llama-3.1-8b x ctx 2048 and 4096, the
    kv-together lever (target cell only, not promoted: no confirmation rows) and int4 tinygemm's lean_graph (target
    cell only) at ctx 2048; 2 sessions: 4 + 2 + 2 = 8 cells, and nothing written."""
    import shutil

    from decodegap import paths
    from decodegap.cli import main

    data = tmp_path / "data"
    shutil.copytree(paths.DATA, data, ignore=shutil.ignore_patterns("raw", "diagnostics"))
    before = sorted(p.relative_to(data) for p in data.rglob("*"))
    assert main(["--data-dir", str(data), "closing-the-gap", "--plan", "--gpu", "h100-sxm", "--models", "llama-3.1-8b",
                 "--contexts", "2048,4096", "--sessions", "2", "--levers", "lean_graph,lean_fused_kv_together_graph"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [
        "llama-3.1-8b bf16 [lean_graph] ctx 2048, 4096 (resumes): cells to time 2 in session 0, 2 in session 1",
        "llama-3.1-8b bf16 [lean_fused_kv_together_graph] ctx 2048 (resumes): cells to time 1 in session 0, 1 in "
        "session 1",
        "llama-3.1-8b int4-tinygemm [lean_graph] ctx 2048 (resumes): cells to time 1 in session 0, 1 in session 1",
        "3 sweep(s), 8 cell(s) to time (a cell: one arm of one model at one context in one session); then the levers' "
        "steps profiled, not counted here"]
    assert sorted(p.relative_to(data) for p in data.rglob("*")) == before
    assert main(["--data-dir", str(data), "closing-the-gap", "--plan", "--gpu", "no-such-gpu"]) != 0
    assert "no-such-gpu" in capsys.readouterr().err
