"""Notebook 06's fused int4 products alone (decodegap.analysis.closing_the_gap_int4_products): the products a layer of
each fused lever launches and how, by hand; the per-config table on hand-made rows (medians, rates against the
H200's 4,800 GB/s datasheet, the tuner's cost); a layer's sum, weight floor and the table's saving over the tuner, by
hand; and the shipped line against medians recomputed from data/diagnostics/fused_int4_gemv.csv with the csv module."""

from __future__ import annotations

import csv
import statistics

import pandas as pd
import pytest

from decodegap import hardware, paths
from decodegap.analysis import closing_the_gap_int4_products as ip
from decodegap.arms import REGISTRY
from decodegap.harness import models
from decodegap.kernels.fused.launch import FusedOps
from decodegap.kernels.fused_int4 import configs as int4_configs

H200 = "NVIDIA H200"
Q = "int4-triton"


def test_the_products_a_layer_launches_and_how():
    assert FusedOps().layer_products() == [("qkv", "none"), ("o", "none"), ("gate_up_norm", "none"),
                                           ("down_silu", "none")]
    assert FusedOps(pdl=True, norm_in_epilogue=True).layer_products() == [
        ("qkv", "pdl"), ("o_norm", "pdl"), ("gate_up_plain", "pdl"), ("down_silu", "pdl")]
    # early_products: only the products another product follows (o, gate_up, down) trigger early; qkv does not
    assert FusedOps(pdl=True, norm_in_epilogue=True, early_products=True).layer_products() == [
        ("qkv", "pdl"), ("o_norm", "early"), ("gate_up_plain", "early"), ("down_silu", "early")]
    assert FusedOps(pdl=True, early_trigger=True, rotary_in_qkv=True).layer_products()[0] == ("qkv_rotary", "early")
    # the SiLU in gate_up's epilogue: after o_norm gate_up has no prologue (gate_up_silu), without the norm epilogue
    # gate_up has the norm prologue (gate_up); down takes the activation with the residual alone either way
    assert FusedOps(pdl=True, norm_in_epilogue=True, early_products=True, silu_in_down=False).layer_products() == [
        ("qkv", "pdl"), ("o_norm", "early"), ("gate_up_silu", "early"), ("down", "early")]
    assert FusedOps(silu_in_down=False).layer_products() == [
        ("qkv", "none"), ("o", "none"), ("gate_up", "none"), ("down", "none")]
    # every norm in an epilogue: qkv reads the norm the previous down made (no prologue), down makes the next one
    assert ip.layer_products("lean_fused_epilogue_norms_graph") == [
        ("qkv_rotary_plain", "pdl"), ("o_norm", "early"), ("gate_up_silu", "early"), ("down_norm", "early")]
    assert FusedOps(input_norm_in_epilogue=True).layer_products() == [
        ("qkv_plain", "none"), ("o", "none"), ("gate_up_norm", "none"), ("down_silu_norm", "none")]
    # early_trigger without pdl is no early trigger
    assert FusedOps(early_trigger=True).layer_products()[1] == ("o", "none")
    # the norms as scales: products of their own, which no bench row stands for
    assert FusedOps(norm_in_epilogue=True, input_norm_in_epilogue=True, norm_scale=True).layer_products() == [
        ("qkv_scaled", "none"), ("o_scale", "none"), ("gate_up_plain_scaled", "none"), ("down_silu_scale", "none")]
    assert ip.layer_products("lean_fused_all_norm_scale_graph") == []
    assert ip.layer_products("lean_fused_norms_next_token_graph")[0] == ("qkv_rotary_plain", "pdl")


def test_the_scale_levers_of_a_cell_are_its_confirmed_levers_with_norms_as_scales():
    """scale_levers names the chosen lever and the runner-up of the cell's int4 confirmation that run the norms as
    scales (no bench flavour of their products), in that order; a bf16 row, another cell and a lever whose products
    the bench has are left out."""
    import pandas as pd

    rows = pd.DataFrame([
        dict(gpu="h200", model="m", ctx=2048, kind="int4", arm="lean_fused_all_kv_together_graph",
             runner_up_arm="lean_fused_all_norm_scale_graph"),
        dict(gpu="h200", model="m", ctx=2048, kind="bf16", arm="lean_fused_norm_scale_graph",
             runner_up_arm="lean_fused_next_token_graph"),
        dict(gpu="h200", model="m", ctx=4096, kind="int4", arm="lean_fused_all_norm_scale_graph", runner_up_arm=None)])
    assert ip.scale_levers(rows, "h200", "m", 2048) == ["lean_fused_all_kv_together_graph",
                                                        "lean_fused_all_norm_scale_graph"]
    rows.loc[0, "runner_up_arm"] = "lean_fused_all_next_token_graph"  # its products are the bench's
    assert ip.scale_levers(rows, "h200", "m", 2048) == ["lean_fused_all_kv_together_graph"]
    assert ip.scale_levers(rows, "h100-sxm", "m", 2048) == [] and ip.scale_levers(rows.iloc[0:0], "h200", "m", 2048) == []


def test_an_arms_kernels_make_its_fused_ops():
    ops = FusedOps.of_kernels(REGISTRY["lean_fused_early_products_graph"].kernels)
    assert (ops.pdl, ops.norm_in_epilogue, ops.early_products) == (True, True, True)
    assert not (ops.early_trigger or ops.rotary_in_qkv or ops.merged_attention or ops.reference)
    assert FusedOps.of_kernels(REGISTRY["lean_fused_merged_graph"].kernels).merged_attention
    assert ops.silu_in_down and not FusedOps.of_kernels(REGISTRY["lean_fused_silu_epilogue_graph"].kernels).silu_in_down
    assert ip.layer_products("lean_fused_silu_epilogue_graph") == [
        ("qkv", "pdl"), ("o_norm", "early"), ("gate_up_silu", "early"), ("down", "early")]
    assert ip.layer_products("lean_fused_early_products_graph") == [
        ("qkv", "pdl"), ("o_norm", "early"), ("gate_up_plain", "early"), ("down_silu", "early")]
    assert ip.layer_products("lean_attn_compile") == [] and ip.layer_products("no_such_arm") == []


def _rows(cells):
    """Bench rows: cells is [(model, product, K, N, flavour, launch, bytes, {config: [us]}, tuned config)]."""
    out = []
    for model, product, K, N, flavour, launch, nbytes, times, tuned in cells:
        base = dict(gpu=H200, device=H200, model=model, product=product, K=K, N=N, flavour=flavour, launch=launch,
                    bytes=nbytes)
        out += [dict(base, config=c, mode="graph", us=us) for c, v in times.items() for us in v]
        out.append(dict(base, config=tuned, mode="tuned", us=float("nan")))
    return pd.DataFrame(out)


def test_the_config_table_by_hand(monkeypatch):
    monkeypatch.setattr(ip, "INT4_CONFIGS", ((4, 1, 2), (8, 2, 4), (16, 1, 2)))
    monkeypatch.setitem(int4_configs.FUSED_INT4_CONFIGS, (4096, 4096, "residual", "early"), (8, 2, 4))
    rows = _rows([("llama-3.1-8b", "o", 4096, 4096, "residual", "early", 9_600_000,
                   {"n4_s1_w2": [10.0, 10.2, 10.1], "n8_s2_w4": [9.0, 9.4, 9.2]}, "n4_s1_w2")])
    t = ip.config_table(rows, hardware.specs_table())
    r = t.iloc[0]
    assert (r["configs"], bool(r["complete"]), r["fastest_config"]) == (2, False, "n8_s2_w4")  # 2 of 3 timed
    assert r["fastest_us"] == pytest.approx(9.2) and r["gbps"] == pytest.approx(9.6e6 / 9.2 / 1e3)
    assert r["datasheet_fraction"] == pytest.approx(9.6e6 / 9.2 / 1e3 / 4800)  # the H200's datasheet: 4,800 GB/s
    assert (r["tuned_config"], r["tuned_us"]) == ("n4_s1_w2", pytest.approx(10.1))
    assert r["tuned_over_fastest"] == pytest.approx(10.1 / 9.2 - 1)
    assert (r["table_config"], r["table_us"]) == ("n8_s2_w4", pytest.approx(9.2))


LLAMA_LAYER = [("qkv", 4096, 6144, "norm", "pdl", 13_000_000, 9.0, 12.0),
               ("o_norm", 4096, 4096, "residual_norm", "early", 9_000_000, 7.5, 7.5),
               ("gate_up_plain", 4096, 28672, "plain", "early", 62_000_000, 20.0, 21.0),
               ("down_silu", 14336, 4096, "silu_residual", "early", 31_000_000, 19.5, 19.5)]
"""(product, K, N, flavour, launch, bytes, fastest us, tuned us) of a made-up Llama-3.1-8B layer."""


def test_a_layers_sum_floor_and_the_tables_saving_by_hand(monkeypatch):
    monkeypatch.setattr(ip, "INT4_CONFIGS", ((8, 1, 2), (4, 1, 4)))
    for _, K, N, flavour, launch, *_ in LLAMA_LAYER:  # the table's entries: the fastest config
        monkeypatch.setitem(int4_configs.FUSED_INT4_CONFIGS, (N, K, flavour, launch), (8, 1, 2))
    rows = _rows([("llama-3.1-8b", p, K, N, fl, la, b, {"n8_s1_w2": [fast], "n4_s1_w4": [tuned + 1e-9]},
                   "n4_s1_w4") for p, K, N, fl, la, b, fast, tuned in LLAMA_LAYER])
    specs = hardware.specs_table()
    t = ip.config_table(rows, specs)
    configs = models.configs({"llama-3.1-8b", "mistral-7b-v0.3"})
    confirmation = pd.DataFrame([dict(gpu="h200", model=m, ctx=2048, kind="int4", quant=Q, runner_up_quant=Q, arm=arm,
                                      runner_up_arm=ru)
                                 for m, arm, ru in (("llama-3.1-8b", "lean_fused_early_products_graph",
                                                     "lean_attn_compile"),
                                                    ("mistral-7b-v0.3", "lean_attn_compile",
                                                     "lean_fused_early_products_graph"))])
    found = ip.product_findings(t, confirmation, configs, specs, 2048)
    assert len(found) == 1  # Mistral's lever (its runner-up here) runs Llama's products over as many layers: one line
    v = found[0].values
    layer_us = 9.0 + 7.5 + 20.0 + 19.5
    assert v["model"] == "llama-3.1-8b and mistral-7b-v0.3" and v["arm"] == "lean_fused_early_products_graph"
    assert v["layer_us"] == pytest.approx(layer_us) and v["products_ms"] == pytest.approx(layer_us * 32 / 1e3)
    assert v["floor_ms"] == pytest.approx((13 + 9 + 62 + 31) * 1e6 / 4800 / 1e3 * 32 / 1e3)
    assert v["gbps_max"] == pytest.approx(62e6 / 20.0 / 1e3) and v["gbps_min"] == pytest.approx(9e6 / 7.5 / 1e3)
    assert v["at_fastest_rate_ms"] == pytest.approx((13 + 9 + 62 + 31) * 1e6 / (62e6 / 20.0) * 32 / 1e3)  # us a layer
    tuner = ip.tuner_findings(t, confirmation, configs, 2048)[0].values
    assert (tuner["cells"], tuner["other"]) == (4, 4)
    assert tuner["saved_ms_llama-3.1-8b"] == pytest.approx((3.0 + 0.0 + 1.0 + 0.0) * 32 / 1e3, abs=1e-6)


def test_a_product_not_timed_at_every_config_gives_no_sum(monkeypatch):
    monkeypatch.setattr(ip, "INT4_CONFIGS", ((8, 1, 2), (4, 1, 4)))
    rows = _rows([("llama-3.1-8b", p, K, N, fl, la, b, {"n8_s1_w2": [fast]}, "n8_s1_w2")
                  for p, K, N, fl, la, b, fast, _ in LLAMA_LAYER])
    specs = hardware.specs_table()
    confirmation = pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, kind="int4",
                                      quant=Q, runner_up_quant=Q, arm="lean_fused_early_products_graph",
                                      runner_up_arm="lean_attn_compile")])
    found = ip.product_findings(ip.config_table(rows, specs), confirmation, models.configs({"llama-3.1-8b"}), specs,
                                2048)
    assert "qkv (pdl) at 1 of 2 configs" in found[0] and "no sum of its products" in found[0]
    assert "layer_us" not in found[0].values


def test_the_shipped_line_against_the_rows_medians():
    """The Llama-3.1-8B line of the shipped rows: each product of its fused int4 lever at the table's config, the
    median of its graph-mode repetitions recomputed here with the csv and statistics modules."""
    path = paths.DATA / "diagnostics" / "fused_int4_gemv.csv"
    if not path.exists():
        pytest.skip("no fused_int4_gemv.csv rows")
    times: dict = {}
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            if r["mode"] == "graph" and r["status"] == "ok" and r["model"] == "llama-3.1-8b":
                key = (int(r["N"]), int(r["K"]), r["flavour"], r["launch"], r["config"])
                times.setdefault(key, []).append(float(r["us"]))
    layer = ip.layer_products("lean_fused_early_products_graph")
    shapes = {name: (K, N, fl) for name, K, N, fl in int4_configs.products(models.load_spec("llama-3.1-8b").config)}
    expected = 0.0
    for product, launch in layer:
        K, N, flavour = shapes[product]
        entry = int4_configs.FUSED_INT4_CONFIGS[(N, K, flavour, launch)]
        expected += statistics.median(times[(N, K, flavour, launch, ip.config_key(entry))])
    specs = hardware.specs_table()
    confirmation = pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, kind="int4",
                                      quant=Q, runner_up_quant=Q, arm="lean_fused_early_products_graph",
                                      runner_up_arm="lean_attn_compile")])
    found = ip.product_findings(ip.config_table(ip.load(), specs), confirmation, models.configs({"llama-3.1-8b"}),
                                specs, 2048)
    assert found[0].values["layer_us"] == pytest.approx(expected)


def test_the_bf16_products_beside_them_by_hand(monkeypatch):
    """The bf16 bench's rows at the config its early launch was timed at (the table's), per launch; the layer's bf16
    time, the bytes ratio and the time ratio against the int4 layer of test_a_layers_sum_floor..."""
    monkeypatch.setattr(ip, "INT4_CONFIGS", ((8, 1, 2),))
    for _, K, N, flavour, launch, *_ in LLAMA_LAYER:
        monkeypatch.setitem(int4_configs.FUSED_INT4_CONFIGS, (N, K, flavour, launch), (8, 1, 2))
    rows = _rows([("llama-3.1-8b", p, K, N, fl, la, b, {"n8_s1_w2": [fast]}, "n8_s1_w2")
                  for p, K, N, fl, la, b, fast, _ in LLAMA_LAYER])
    bf16_rows = []
    for p, K, N, _, launch, nbytes, fast, _ in LLAMA_LAYER:
        for config, us in (("table", 2 * fast), ("other", fast)):  # the faster config is not the table's: not read
            if launch == "early" and config == "other":
                continue  # the bench times the early launch at the table's config only
            bf16_rows.append(dict(device=H200, product=p, K=K, N=N, launch=launch, config=config, us=us,
                                  bytes=4 * nbytes))
        bf16_rows.append(dict(device=H200, product=p, K=K, N=N, launch="early", config="table", us=3 * fast,
                              bytes=4 * nbytes))
    bf16 = ip.bf16_table(pd.DataFrame(bf16_rows))
    qkv = bf16[(bf16["product"] == "qkv") & (bf16["launch"] == "pdl")].iloc[0]
    assert (qkv["bf16_config"], qkv["bf16_us"]) == ("table", 18.0)  # 2 x 9.0 at the table's config, not 9.0
    specs = hardware.specs_table()
    confirmation = pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, kind="int4",
                                      quant=Q, runner_up_quant=Q, arm="lean_fused_early_products_graph",
                                      runner_up_arm="lean_attn_compile")])
    v = ip.product_findings(ip.config_table(rows, specs), confirmation, models.configs({"llama-3.1-8b"}), specs, 2048,
                            bf16=bf16)[0].values
    # qkv launched with pdl: 18.0 us; the others early: the median of 2x and 3x their time, 2.5x
    assert v["bf16_layer_us"] == pytest.approx(18.0 + 2.5 * (7.5 + 20.0 + 19.5))
    assert v["bytes_ratio"] == pytest.approx(4.0) and v["time_ratio"] == pytest.approx(v["bf16_layer_us"] / 56.0)
    step = ip.target_step(ip.config_table(rows, specs), confirmation, models.configs({"llama-3.1-8b"}), "h200",
                          "llama-3.1-8b", 2048, bf16)
    assert list(step["product"]) == ["qkv", "o_norm", "gate_up_plain", "down_silu"] and set(step["layers"]) == {32}
    assert step["bf16_us"].sum() == pytest.approx(v["bf16_layer_us"]) and set(step["arm"]) == {
        "lean_fused_early_products_graph"}
    assert ip.target_step(ip.config_table(rows, specs), confirmation, models.configs({"llama-3.1-8b"}), "l4",
                          "llama-3.1-8b", 2048, bf16).empty  # no bench rows of that GPU


def test_layer_products_are_the_launches_the_fused_ops_make(monkeypatch):
    """FusedOps.layer_products against what its methods launch: `product` replaced by a recorder of each call's
    flavour and PDL options, one layer's methods called as the lean decoder calls them (qkv_rotary, o_and_mlp)."""
    import torch

    from decodegap.kernels.fused import launch as fused

    calls = []

    def product(x, w, norm_weight=None, eps=None, bias=None, residual=None, gate_up=False, silu_x=False,
                out_norm=None, rotary=None, pdl=False, early_trigger=False):
        name = ("qkv_rotary" if rotary is not None else "o_norm" if out_norm is not None else "down_silu" if silu_x
                else "gate_up" if gate_up else "down" if residual is not None and w == "w_down"
                else "o" if residual is not None else "qkv" if w == "w_qkv" else "gate_up_norm"
                if norm_weight is not None else "gate_up_plain")
        calls.append((name, "early" if pdl and early_trigger else "pdl" if pdl else "none"))
        return ("x", "h") if out_norm is not None else torch.zeros(4) if rotary is not None else "y"

    monkeypatch.setattr(fused, "product", product)
    monkeypatch.setattr(fused, "rotary_cache", lambda *a, **k: "q")
    for kernels in (("fused", "attention"), ("fused", "attention", "pdl"),
                    ("fused", "attention", "pdl", "norm_epilogue"),
                    ("fused", "attention", "pdl", "norm_epilogue", "early_products"),
                    ("fused", "attention", "pdl", "norm_epilogue", "early_trigger"),
                    ("fused", "attention", "pdl", "norm_epilogue", "rotary_epilogue")):
        ops = FusedOps.of_kernels(kernels)
        calls.clear()
        ops.qkv_rotary("x", "nw", "w_qkv", None, 1e-5, None, None, None, None, None, 2, 1)
        ops.o_and_mlp("o", "w_o", "x", "nw", "w_gate_up", "w_down", 1e-5)
        assert calls == ops.layer_products(), kernels


def test_rows_of_a_gpu_the_registry_lacks_are_left_out_and_said(monkeypatch):
    monkeypatch.setattr(ip, "INT4_CONFIGS", ((8, 1, 2),))
    rows = _rows([("llama-3.1-8b", "o", 4096, 4096, "residual", "early", 9_000_000, {"n8_s1_w2": [5.0]}, "n8_s1_w2")])
    rows = pd.concat([rows, rows.assign(gpu="NVIDIA H999", device="NVIDIA H999")])
    specs = hardware.specs_table()
    t = ip.config_table(rows, specs)
    assert set(t[t["device"] == "NVIDIA H999"]["gpu"].isna()) == {True} and set(t[t["device"] == H200]["gpu"]) == {
        "h200"}
    found = ip.product_findings(t, pd.DataFrame(), {}, specs, 2048)
    assert len(found) == 1 and "NVIDIA H999" in found[0] and "left out" in found[0]
    assert [f.values["gpu"] for f in ip.tuner_findings(t, pd.DataFrame(), {}, 2048)] == ["h200"]


def test_the_gallery_line_without_products_says_so(tmp_path):
    """A findings file with no products line (no bench rows, or the tuner's line only) gives the gallery's
    'not timed' sentence, not an error."""
    from decodegap.figures import gallery

    for text in ("finding\n", "finding,gpu,cells,other\nThe per-process tuner ...,h200,27,16\n"):
        (tmp_path / "06_findings_int4_products.csv").write_text(text)
        assert "No fused int4 products timed alone" in gallery._int4_products(tmp_path)["06_int4_products.png"]
    # confirmed levers that run the norms as scales: the products exist, not their flavour, and the line says which
    (tmp_path / "06_confirmation.csv").write_text(
        "gpu,model,ctx,kind,arm,runner_up_arm\nh200,llama-3.1-8b,2048,int4,lean_fused_all_kv_together_graph,"
        "lean_fused_all_next_token_graph\n")
    line = gallery._int4_products(tmp_path)["06_int4_products.png"]
    assert "(lean_fused_all_kv_together_graph) leave each norm to the next product as a scale" in line
