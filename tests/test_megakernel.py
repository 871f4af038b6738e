"""Notebook 06's megakernel cell (analysis.closing_the_gap_megakernel): its floor by hand from the parameter count
and the KV bytes, the study's published times against it, the selection and the confirmation read from hand-made
rows whose answers are checked by hand, and the cell kept out of the grid."""

from __future__ import annotations

import pandas as pd
import pytest

from decodegap import checked, hardware, paths
from decodegap.analysis import closing_the_gap_megakernel as megakernel
from decodegap.harness import models
from decodegap.levers import CONFIRM_FIRST_SESSION, CONFIRM_SESSIONS, MEGAKERNEL_CELL

CELL = dict(gpu="h200", model="llama-3.2-1b", ctx=32)
PARAMS = 1_235_814_400  # tests/test_models.py counts them by hand (tied embeddings)
KV_BYTES = 16 * 2 * 8 * 64 * 32 * 2  # layers x (K, V) x kv heads x head_dim x 32 positions x 2 bytes


def _specs_configs():
    data = paths.data_dir(None)
    return hardware.specs_table(data), models.configs({"llama-3.2-1b"}, data)


def _decode(run: str, session: int, arm: str, ms: list) -> list:
    return [dict(CELL, run_id=run, session=session, arm=arm, quant="bf16", attn="sdpa", step=i, step_ms=t,
                 status="ok", reason="", max_cache_len=192, batch=1) for i, t in enumerate(ms)]


def test_the_floor_is_the_weights_once_and_the_kv_at_the_datasheet_bandwidth():
    specs, configs = _specs_configs()
    floor = megakernel.floor_ms(configs, specs)
    assert floor == pytest.approx((2 * PARAMS + KV_BYTES) / 4800e9 * 1e3, rel=1e-12)
    assert 0.51 < floor < 0.52


def test_without_rows_the_published_times_stand_against_the_floor_and_nothing_counts():
    specs, configs = _specs_configs()
    t = megakernel.table(pd.DataFrame(), specs, configs)
    pub = t.set_index("lever")
    floor = (2 * PARAMS + KV_BYTES) / 4800e9 * 1e3
    assert pub.loc["whole-model megakernel", "r_floor_W_all"] == pytest.approx(floor / 0.75983)
    assert pub.loc["CUDA graph + PDL pipeline", "source"] == "published"
    (line,) = megakernel.findings(t)
    assert line.values["measured"] is False and "No checked lever" in line and "759.83 us" in line


def test_the_selection_counts_only_once_a_fresh_sweep_confirms_it():
    """Selection: lever A median 0.68 ms, B 0.72 ms, C unchecked (no time); the choice is A, not confirmed. Then A's
    confirmation sessions take 0.69, 0.70 and 0.71 ms: the median of the session medians is 0.70 ms, which meets the
    0.70 ms target (<=), and R_floor is floor / 0.70."""
    specs, configs = _specs_configs()
    rows = pd.DataFrame(_decode("r1", 0, "lean_fused_early_products_graph", [0.68] * 5)
                        + _decode("r1", 0, "lean_attn_graph", [0.72] * 5)
                        + [dict(_decode("r1", 0, "graph", [1.0])[0], step_ms=float("nan"), status="unchecked")])
    t = megakernel.table(rows, specs, configs)
    sel = t[(t["source"] == "measured")].set_index("arm")
    assert sel.loc["lean_fused_early_products_graph", "t_obs_ms"] == pytest.approx(0.68)
    assert sel.loc["graph", "status"] == "unchecked"
    (line,) = megakernel.findings(t)
    assert line.values["confirmed"] is False and line.values["selected_ms"] == pytest.approx(0.68)
    assert "not confirmed" in line and "2 checked levers" in line
    again = pd.concat([rows] + [pd.DataFrame(_decode("r2", CONFIRM_FIRST_SESSION + i, "lean_fused_early_products_graph",
                                                     [ms] * 5)) for i, ms in enumerate((0.69, 0.70, 0.71))])
    (line,) = megakernel.findings(megakernel.table(again, specs, configs))
    floor = megakernel.floor_ms(configs, specs)
    assert line.values["confirmed"] is True and line.values["t_obs_ms"] == pytest.approx(0.70)
    assert line.values["met"] is True and line.values["r_floor"] == pytest.approx(floor / 0.70)
    # against the study's fastest published time, 759.83 us: 700 / 759.83 = 0.92x, this step the faster
    assert line.values["vs_published_fastest"] == pytest.approx(0.70 / 0.75983)
    assert "0.92x the study's fastest published time (759.8 us, this step faster)" in line
    slower = again.assign(step_ms=again["step_ms"] * 1.01)
    assert megakernel.findings(megakernel.table(slower, specs, configs))[0].values["met"] is False


def test_the_cell_stays_out_of_the_grid():
    rows = pd.DataFrame(_decode("r1", 0, "graph", [1.0]) + [dict(_decode("r1", 0, "graph", [1.0])[0],
                                                                 model="llama-3.1-8b", ctx=2048)])
    assert list(checked.grid_rows(rows)["model"]) == ["llama-3.1-8b"]
    assert MEGAKERNEL_CELL["model"] in checked.CELL_ONLY_MODELS


def test_the_plans_measure_the_cell_as_the_study_did_and_refuse_a_confirmation_before_a_selection(data_dir):
    from decodegap.experiments import closing_the_gap

    (plan,) = closing_the_gap.megakernel_plans("h200", data_dir)
    assert (plan.models, plan.contexts, plan.steps, plan.quant, plan.batches) == (
        ("llama-3.2-1b",), (32,), 127, "bf16", (1,))
    assert plan.arms == MEGAKERNEL_CELL["arms"] and plan.sessions == 3 and plan.check_every_session
    with pytest.raises(ValueError, match="no checked selection run"):  # a data folder without the cell's rows
        closing_the_gap.megakernel_plans("h200", data_dir, confirm=True)


def test_the_confirmation_plan_takes_the_selections_two_fastest_checked_levers():
    """On the shipped rows: the selection's fastest (951.8 us) and its runner-up (953.4 us), again from session 200,
    the two arms the shipped confirmation run measured."""
    from decodegap.experiments import closing_the_gap

    (plan,) = closing_the_gap.megakernel_plans("h200", paths.DATA, confirm=True)
    assert plan.arms == ("lean_fused_early_graph", "lean_fused_early_products_graph")
    assert list(plan.session_ids) == [200, 201, 202]
    t = closing_the_gap.megakernel_table(paths.DATA)
    assert set(t[t.role == "confirmation"].arm) == set(plan.arms)


def test_a_new_pair_is_confirmed_in_a_run_of_its_own(monkeypatch):
    """The shipped confirmation run 20261204T135805-a2346c timed lean_fused_early_graph beside
    lean_fused_early_products_graph (sessions 200-202). A selection that now ranks lean_fused_norm_scale_graph first
    and lean_fused_early_graph second must not resume from that run (the resumed sweep would time the new lever
    alone): its plan measures the pair again, in a run of its own. The shipped pair itself resumes."""
    from decodegap.experiments import closing_the_gap

    (plan,) = closing_the_gap.megakernel_plans("h200", paths.DATA, confirm=True)
    assert not plan.again
    ranked = pd.DataFrame(dict(source="measured", role="selection", status="ok",
                               arm=["lean_fused_norm_scale_graph", "lean_fused_early_graph", "graph"],
                               t_obs_ms=[0.90, 0.95, 2.4]))
    monkeypatch.setattr(closing_the_gap, "megakernel_table", lambda data: ranked)
    (plan,) = closing_the_gap.megakernel_plans("h200", paths.DATA, confirm=True)
    assert plan.arms == ("lean_fused_norm_scale_graph", "lean_fused_early_graph") and plan.again
    assert list(plan.session_ids) == [200, 201, 202]


def test_a_lever_timed_before_its_code_changed_names_the_change():
    """The one-kernel attention's merge changed at c640ad5 (2026-12-05 06:08 UTC, levers.CODE_CHANGES), every fused
    lever's LM head and gate_up_plain at 1B at 4a1e32b (23:16 UTC): a run of the one-kernel lever that began before
    both names both, one between them the later alone, another fused lever's run before 4a1e32b that one, and a run
    after both none. The finding says the confirmed time predates the change, and how to measure it again."""
    specs, configs = _specs_configs()
    rows = pd.DataFrame(_decode("20261204T135637-aaaaaa", 0, "lean_fused_merged_graph", [0.97] * 3)
                        + _decode("20261204T135637-aaaaaa", 0, "lean_fused_early_graph", [0.95] * 3)
                        + _decode("20261205T070000-bbbbbb", CONFIRM_FIRST_SESSION, "lean_fused_merged_graph",
                                  [0.96] * 3))
    t = megakernel.table(rows, specs, configs)
    measured = t[t["source"] == "measured"].set_index(["arm", "role"])["changed_since"]
    assert measured[("lean_fused_merged_graph", "selection")] == "c640ad5 4a1e32b"
    assert measured[("lean_fused_merged_graph", "confirmation")] == "4a1e32b"
    assert measured[("lean_fused_early_graph", "selection")] == "4a1e32b"
    confirmed = pd.concat([rows, pd.DataFrame(
        [r for i in range(CONFIRM_SESSIONS) for r in _decode("20261205T070000-bbbbbb", CONFIRM_FIRST_SESSION + i,
                                                             "lean_fused_early_graph", [0.95] * 3)])])
    (line,) = megakernel.findings(megakernel.table(confirmed, specs, configs))
    assert line.values["confirmed"] and line.values["changed_since"] == "4a1e32b"
    assert ("Its confirmation was measured before the fused GEMV table's entries for Llama-3.2-1B's LM head" in line
            and "(4a1e32b): it times code the lever no longer runs" in line and "MEGAKERNEL_AGAIN=1" in line)
    later = confirmed.assign(run_id="20261206T000000-cccccc")
    t_later = megakernel.table(later, specs, configs)
    assert set(t_later.loc[t_later["source"] == "measured", "changed_since"]) == {""}
    (fresh,) = megakernel.findings(t_later)
    assert "changed_since" not in fresh.values and "measured before" not in fresh


def _profile(arm: str, matmul_us: float, attention_us: float, small_us: float) -> pd.DataFrame:
    """A category_table of one profiled step at the cell: 65 products against a 500 us weight floor, 32 attention
    kernels against a 10 us KV floor, and its small kernels."""
    cell = dict(CELL, arm=arm, quant="bf16")
    return pd.DataFrame([dict(cell, category="matmul", kernels=65, gpu_us=matmul_us, floor_us=500.0),
                         dict(cell, category="attention", kernels=32, gpu_us=attention_us, floor_us=10.0),
                         dict(cell, category="elementwise", kernels=20, gpu_us=small_us, floor_us=0.0)])


def test_a_target_not_met_names_the_term_in_the_way_from_the_cells_profile():
    """Confirmed at 0.95 ms against the 0.70 ms target: 250 us to remove. The lever's profiled step: products 800 us
    against their 500 us floor (300 us above it), attention 110 us against 10 (100 above), small kernels 40 us: the
    products are the largest term. Without a profile of that lever the line says its step was not profiled."""
    specs, configs = _specs_configs()
    arm = "lean_fused_early_graph"
    rows = pd.DataFrame(_decode("r1", 0, arm, [0.94] * 5) + sum(
        (_decode("r2", CONFIRM_FIRST_SESSION + i, arm, [0.95] * 5) for i in range(3)), []))
    t = megakernel.table(rows, specs, configs)
    (line,) = megakernel.findings(t, by_category=_profile(arm, 800.0, 110.0, 40.0))
    assert line.values["met"] is False and line.values["short_ms"] == pytest.approx(0.25)
    assert line.values["products_excess_ms"] == pytest.approx(0.30)
    assert line.values["largest_term"] == "the matrix products above their weight floor"
    assert "What stands in the way: 250 us to remove from its confirmed time." in line
    assert "matrix products 0.80 ms against their weight floor 0.50 ms" in line
    # under PDL the kernels' times overlap: 900 + 110 + 40 = 1050 us, 100 us more than the step, each an upper bound
    (overlapping,) = megakernel.findings(t, by_category=_profile(arm, 900.0, 110.0, 40.0))
    assert overlapping.values["overlap_ms"] == pytest.approx(0.10)
    assert "Those kernel times sum to 1.05 ms, 0.10 ms more than the step's 0.95 ms" in overlapping
    (other,) = megakernel.findings(t, by_category=_profile("graph", 800.0, 110.0, 40.0))
    assert "That step was not profiled." in other and "products_ms" not in other.values
    (none,) = megakernel.findings(t)
    assert "Its step was not profiled at the cell." in none


def test_the_megakernel_step_profiles_the_confirmed_levers_after_their_confirmation(monkeypatch):
    """measure_megakernel: the selection sweep, the confirmation sweep, then one profiled step of each confirmed
    lever at the cell (what the finding above reads), in that order."""
    from decodegap.experiments import closing_the_gap
    from decodegap.harness.sweep import SweepPlan

    calls = []
    plan = SweepPlan(gpu="h200", models=("llama-3.2-1b",), contexts=(32,), arms=("lean_fused_early_graph",
                                                                               "lean_attn_graph"))
    monkeypatch.setattr(closing_the_gap.keys, "gpu_to_measure", lambda *a, **k: "h200")
    monkeypatch.setattr(closing_the_gap, "megakernel_plans",
                        lambda gpu, data, confirm=False, **k: [plan] if confirm else [plan.__class__(
                            gpu="h200", models=("llama-3.2-1b",), contexts=(32,), arms=("graph",))])
    monkeypatch.setattr(closing_the_gap, "run_sweep", lambda p, data: calls.append(("sweep", p.arms)) or "run")
    monkeypatch.setattr(closing_the_gap.profile, "record_kernels",
                        lambda gpu, models_, contexts, arms, **k: calls.append(("profile", models_, contexts, arms)))
    assert closing_the_gap.measure_megakernel("h200") == ["run", "run"]
    assert calls == [("sweep", ("graph",)), ("sweep", plan.arms),
                     ("profile", ["llama-3.2-1b"], [32], plan.arms)]


def _gemv_rows(times: dict, device: str = "NVIDIA H200", launch: str = "pdl") -> list:
    """bench/fused_gemv.py's graphed rows as closing_the_gap_int4_products.load_bf16 gives them: per product
    {config: us}, at Llama-3.2-1B's widths."""
    shapes = dict(qkv=(2048, 3072), o_norm=(2048, 2048), gate_up_plain=(2048, 16384), down_silu=(8192, 2048),
                  lm_head=(2048, 128256), lm_head_plain=(2048, 128256))
    return [dict(device=device, product=p, K=shapes[p][0], N=shapes[p][1], launch=launch, config=c, us=us,
                 bytes=2 * shapes[p][0] * shapes[p][1]) for p, by in times.items() for c, us in by.items()]


def test_the_products_on_their_configs_bound_what_configs_can_give():
    """lean_fused_early_graph on the cell launches qkv, o_norm, gate_up_plain and down_silu in each of 16 layers and
    the LM head once. On the configs the step runs (the table's for gate_up_plain and the LM head since 2026-12-05, the
    rule's for the others) 6 + 6 + 20 + 12 us a layer and 150 us for
    the head: 16 x 44 + 150 = 854 us a step; on the fastest 5 + 6 + 18 + 11 and 120: 16 x 40 + 120 = 760 us, so the
    configs give at most 94 us, of 252 us between a 952 us lever and the 700 us target; 760 us > 700 us, so even the
    fastest configs miss it. Their weights at 4.8 TB/s: 2 x (3072 + 2048 + 16384) x 2048 + 2 x 2048 x 8192 bytes a
    layer and 2 x 128256 x 2048 for the head. Another GPU's rows and rows without PDL, faster still, are not read."""
    from decodegap.kernels.fused.configs import gemv_config

    specs, configs = _specs_configs()
    rule = {p: gemv_config(N, K, plain=p == "gate_up_plain").key for p, (K, N) in dict(
        qkv=(2048, 3072), o_norm=(2048, 2048), gate_up_plain=(2048, 16384), down_silu=(8192, 2048),
        lm_head=(2048, 128256)).items()}
    times = {p: {rule[p]: us, "other": best} for p, (us, best) in dict(
        qkv=(6.0, 5.0), o_norm=(6.0, 6.5), gate_up_plain=(20.0, 18.0), down_silu=(12.0, 11.0),
        lm_head=(150.0, 120.0)).items()}
    times["lm_head_plain"] = {gemv_config(128256, 2048, plain=True).key: 118.0}
    fast = {p: {c: us / 10 for c, us in by.items()} for p, by in times.items()}
    rows = pd.DataFrame(_gemv_rows(times) + _gemv_rows(fast, device="NVIDIA H100 80GB HBM3")
                        + _gemv_rows(fast, launch="none"))
    t = megakernel.product_configs(rows, configs, specs, "lean_fused_early_graph")
    assert list(t["product"]) == ["qkv", "o_norm", "gate_up_plain", "down_silu", "lm_head"]
    assert list(t["per_step"]) == [16, 16, 16, 16, 1]
    assert list(t["table_entry"]) == [False, False, True, False, True]  # PLAIN_CONFIGS's and GEMV_CONFIGS's 1B entries
    assert t.set_index("product").loc["o_norm", "fastest_config"] == rule["o_norm"]
    (line,) = megakernel.product_findings(t, 0.952)
    assert line.values["step_us"] == pytest.approx(854.0) and line.values["fastest_us"] == pytest.approx(760.0)
    assert line.values["gain_us"] == pytest.approx(94.0) and line.values["gap_us"] == pytest.approx(252.0)
    layer_bytes = 2 * (3072 + 2048 + 16384) * 2048 + 2 * 2048 * 8192
    assert line.values["floor_us"] == pytest.approx((16 * layer_bytes + 2 * 128256 * 2048) / 4800e3)
    assert "at most 94 us of the 252 us" in line and "fewer kernels" in line
    assert "(2 of 5 from the fused GEMV's table, the others its rule's)" in line
    # the norm-scale lever's products have no bench flavour: the finding says which were not timed
    (scaled,) = megakernel.product_findings(megakernel.product_configs(rows, configs, specs,
                                                                      "lean_fused_norm_scale_graph"), None)
    assert "qkv_scaled" in scaled.values["missing"] and "fewer kernels" not in scaled
    assert scaled.values["step_us"] == pytest.approx(118.0)  # the LM head alone, the one product timed
    assert megakernel.product_findings(t.iloc[0:0], None)[0].values["measured"] is False


def test_again_measures_the_cell_in_runs_of_their_own(monkeypatch):
    """megakernel_plans(again=True) plans the selection and the confirmation in runs of their own (on the shipped rows,
    whose pair would otherwise resume), and `closing-the-gap --megakernel --again` passes it to measure_megakernel;
    --megakernel still refuses --confirm."""
    from decodegap import cli
    from decodegap.experiments import closing_the_gap

    (selection,) = closing_the_gap.megakernel_plans("h200", paths.DATA, again=True)
    (confirmation,) = closing_the_gap.megakernel_plans("h200", paths.DATA, confirm=True, again=True)
    assert selection.again and confirmation.again and list(confirmation.session_ids) == [200, 201, 202]
    assert not closing_the_gap.megakernel_plans("h200", paths.DATA)[0].again
    seen = {}
    monkeypatch.setattr(closing_the_gap, "measure_megakernel", lambda gpu, **kw: seen.update(kw, gpu=gpu) or [])
    monkeypatch.setattr(cli, "_resolve_gpu", lambda gpu, data, device=None: gpu)
    assert cli.main(["closing-the-gap", "--gpu", "h200", "--megakernel", "--again"]) == 0
    assert seen["again"] is True and seen["gpu"] == "h200"
    assert cli.main(["closing-the-gap", "--gpu", "h200", "--megakernel"]) == 0 and seen["again"] is False
    assert cli.main(["closing-the-gap", "--gpu", "h200", "--megakernel", "--confirm"]) != 0
