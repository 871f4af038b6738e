"""Notebook 04's profiled quantised steps and grid tables (decodegap.analysis.quant_profile), on hand-made rows whose
answers are known: cast counts and times, a line through products built from a known fixed cost and rate,
and grids with a failed and a missing cell."""

import pandas as pd
import pytest

from decodegap import hardware
from decodegap.harness import models
from decodegap.analysis import quant_profile

CAST_IN = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
           "::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1")
CAST_OUT = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
            "::{lambda()#3}::operator()() const::{lambda()#10}::operator()() const::{lambda(c10::Half)#1}, s")
FLOAT_COPY = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
              "::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::a")


def _step(quant: str, kernels, arm: str = "lean_attn_graph", model: str = "llama-tiny") -> pd.DataFrame:
    return pd.DataFrame([dict(run_id="r", gpu="h200", model=model, ctx=2048, arm=arm, attn="sdpa", quant=quant,
                              kernel_index=i, kernel=k, gpu_us=us, status="ok", reason=None)
                         for i, (k, us) in enumerate(kernels)])


def test_casts_counts_the_fp16_conversions_around_each_product_and_their_time():
    config = models.load_spec("llama-tiny").config  # 2 decoder layers: 2 x 4 fused products on the lean step
    layers = int(config["num_hidden_layers"])
    product = [(CAST_IN, 3.0), ("void gemm_half_q_half_gptq_kernel<4, false, false>", 10.0), (CAST_OUT, 2.0)]
    layer = [(FLOAT_COPY, 1.5), ("index_copy_kernel", 1.0)] + product * 4
    rows = pd.concat([_step("gptq-exllamav2", layer * layers),
                      _step("int4-triton", [(FLOAT_COPY, 1.5), ("int4_gemv_kernel", 9.0)] * 4 * layers),
                      _step("bf16", [(CAST_IN, 3.0)])])  # bf16 steps are not a quantised path's: left out
    table = quant_profile.casts(rows, {"llama-tiny": config}).set_index("quant")
    assert set(table.index) == {"gptq-exllamav2", "int4-triton"}
    ex = table.loc["gptq-exllamav2"]
    assert ex["casts"] == 2 * 4 * layers == ex["casts_expected"] == 16  # the float copy is not a cast
    assert ex["cast_us"] == pytest.approx(16 / 2 * (3.0 + 2.0))
    assert ex["step_gpu_us"] == pytest.approx(layers * (1.5 + 1.0 + 4 * 15.0))
    assert ex["cast_share"] == pytest.approx(40.0 / 125.0)
    assert table.loc["int4-triton", "casts"] == 0 and table.loc["int4-triton", "casts_expected"] == 0
    [line] = quant_profile.profile_findings(quant_profile.product_fits(
        pd.DataFrame(columns=quant_profile.STEP + ["projection", "calls", "gpu_us", "bytes"]), hardware.specs_table()),
        pd.DataFrame(columns=quant_profile.STEP + ["projection"]), table.reset_index())  # no fits: the casts alone
    assert line.values == pytest.approx(dict(
        gpu="h200", model="llama-tiny", ctx=2048, arm="lean_attn_graph", quant="gptq-exllamav2", casts=16,
        casts_expected=16, cast_ms=16 / 2 * (3.0 + 2.0) / 1e3, step_gpu_ms=layers * (1.5 + 1.0 + 4 * 15.0) / 1e3,
        cast_share=40.0 / 125.0))
    assert "16 conversion kernels (16 expected)" in line  # the sentence renders its values
    assert quant_profile.layer_products(config, "eager") == 7 * layers  # HF's seven products per layer


SHAPES = {"qkv": 50e6, "o": 33e6, "gate_up": 235e6, "down": 117e6, "lm_head": 1050e6}  # bytes per call


def _products(quant: str, fixed_us: float, gbps: float, head_us: float = 250.0) -> pd.DataFrame:
    """projection_table rows: 32 layers of four products taking exactly fixed_us plus their bytes at gbps, and an
    LM head taking head_us."""
    return pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, arm="lean_attn_graph", quant=quant,
                              projection=p, calls=calls, bytes=calls * b, floor_us=0.0, gbps=0.0, of_datasheet=0.0,
                              gpu_us=head_us if p == "lm_head" else calls * (fixed_us + b / (gbps * 1e9) * 1e6))
                         for p, b in SHAPES.items() for calls in [1 if p == "lm_head" else 32]])


def test_product_fits_recover_the_fixed_cost_and_rate_and_leave_the_bf16_head_out_of_a_quantised_line():
    specs = hardware.specs_table()
    rows = pd.concat([_products("int4-triton", 3.0, 2400.0), _products("bf16", 5.0, 4000.0, head_us=1050e6 / 4000e3 + 5.0)])
    fits = quant_profile.product_fits(rows, specs).set_index("quant")
    q = fits.loc["int4-triton"]
    assert q["fixed_us"] == pytest.approx(3.0) and q["stream_gbps"] == pytest.approx(2400.0)
    assert q["products"] == 128 and q["fixed_ms"] == pytest.approx(128 * 3.0 / 1e3)
    layer_bytes = 32 * (50e6 + 33e6 + 235e6 + 117e6)
    assert q["products_ms"] == pytest.approx((128 * 3.0 + layer_bytes / 2400e9 * 1e6) / 1e3)
    assert q["stream_of_datasheet"] == pytest.approx(2400.0 / 4800.0)  # the H200's datasheet 4,800 GB/s
    assert fits.loc["bf16", "products"] == 129  # a bf16 step's head is one of its products
    t = dict(quant="int4-triton", copy_gbps=4000.0)
    target = dict(gpu="h200", model="llama-3.1-8b", ctx=2048, step_ms=2.0)
    line = quant_profile.target_obstacles(t, fits.reset_index(), rows, target)
    products_ms = (128 * 3.0 + layer_bytes / 2400e9 * 1e6) / 1e3
    assert line.values == pytest.approx(dict(
        gpu="h200", model="llama-3.1-8b", ctx=2048, arm="lean_attn_graph", quant="int4-triton", products=128,
        products_ms=products_ms, fixed_ms=128 * 3.0 / 1e3, fixed_us=3.0, layer_GB=layer_bytes / 1e9, stream_gbps=2400.0,
        lm_head_ms=0.25, before_attention_ms=products_ms + 0.25, target_ms=2.0, bytes_at_copy_ms=layer_bytes / 4000e9 * 1e3))
    assert f"would take {layer_bytes / 4000e9 * 1e3:.2f} ms" in line  # the sentence renders its values
    [step] = quant_profile.profile_findings(fits.reset_index(), rows, quant_profile.casts(pd.DataFrame(columns=["status", "kernel", "quant"]), {}))
    assert step.values == pytest.approx(dict(
        gpu="h200", model="llama-3.1-8b", ctx=2048, arm="lean_attn_graph", quant="int4-triton", products=128,
        products_ms=products_ms, fixed_us=3.0, fixed_ms=128 * 3.0 / 1e3, stream_gbps=2400.0, stream_of_datasheet=0.5,
        bf16_fixed_us=5.0, bf16_stream_gbps=4000.0, lm_head_us=250.0, lm_head_gbps=0.0))
    assert "bf16 on the same arm: 5.0 us fixed per product, 4000 GB/s" in step  # the sentence renders its values
    assert "Under PDL" not in step  # lean_attn_graph launches without PDL
    fused = rows.assign(arm="lean_fused_early_products_graph")
    [pdl] = quant_profile.profile_findings(quant_profile.product_fits(fused, specs), fused, quant_profile.casts(
        pd.DataFrame(columns=["status", "kernel", "quant"]), {}))
    assert pdl.values["pdl"] and "these shares are lower bounds and the fixed cost an upper bound." in pdl
    assert quant_profile.target_obstacles(dict(t, quant="gptq-exllamav2"), fits.reset_index(), rows, target) is None
    # a path whose int4 head is one of its products (int4-triton-head): the head is on the line, counted once
    head = _products("int4-triton-head", 3.0, 2400.0, head_us=3.0 + 280e6 / 2400e3).replace({"projection": {}})
    head.loc[head["projection"] == "lm_head", "bytes"] = 280e6
    hfit = quant_profile.product_fits(head, specs)
    assert int(hfit["products"].iloc[0]) == 129 and float(hfit["stream_gbps"].iloc[0]) == pytest.approx(2400.0)
    hline = quant_profile.target_obstacles(dict(t, quant="int4-triton-head"), hfit, head, target)
    assert hline.values["lm_head_ms"] == 0.0 and hline.values["layer_GB"] == pytest.approx((layer_bytes + 280e6) / 1e9)
    assert hline.values["before_attention_ms"] == pytest.approx(hline.values["products_ms"])
    assert "bf16 LM head" not in hline and "the int4 LM head among them" in hline
    [hstep] = quant_profile.profile_findings(hfit, head, quant_profile.casts(pd.DataFrame(columns=["status", "kernel",
                                                                                                    "quant"]), {}))
    assert "lm_head_us" not in hstep.values and "bf16 LM head" not in hstep


def _cell(model, ctx, quant, ms, failed=False, arm="lean_attn_graph"):
    return dict(gpu="h200", model=model, ctx=ctx, arm=arm, attn="sdpa", quant=quant, t_obs_ms=ms,
                check_failed=failed, speedup_over_bf16=None, realised_fraction=None)


def test_grid_and_coverage_leave_a_failed_or_missing_cell_empty_and_name_it():
    cells = pd.DataFrame([_cell("m1", 2048, "bf16", 6.0), _cell("m1", 4096, "bf16", 6.5),
                          _cell("m1", 2048, "int4-triton", 4.0), _cell("m1", 4096, "int4-triton", 9.9, failed=True),
                          _cell("m1", 2048, "int4-triton", 30.0, arm="eager")])
    grid = quant_profile.grid(cells, "lean_attn_graph")
    assert list(grid.columns) == ["bf16", "int4-triton"]  # the registry's order
    assert grid.loc[("h200", "m1", 2048), "int4-triton"] == 4.0
    assert pd.isna(grid.loc[("h200", "m1", 4096), "int4-triton"])  # its check failed
    cov = quant_profile.coverage(cells, ["lean_attn_graph", "eager"], ["m1"], [2048, 4096]).set_index(["quant", "arm"])
    assert cov.loc[("bf16", "lean_attn_graph"), "cells"] == 2 and cov.loc[("bf16", "lean_attn_graph"), "missing"] == ""
    assert cov.loc[("int4-triton", "lean_attn_graph"), "cells"] == 1
    assert cov.loc[("int4-triton", "lean_attn_graph"), "missing"] == "m1 4096"
    assert cov.loc[("int4-triton", "eager"), "missing"] == "m1 4096" and cov.loc[("bf16", "eager"), "cells"] == 0
    bf16, int4 = quant_profile.grid_findings(cells, "lean_attn_graph")
    assert bf16.values == dict(gpu="h200", arm="lean_attn_graph", quant="bf16", step_ms_min=6.0, step_ms_max=6.5, cells=2,
                               models=1, ctx_min=2048, ctx_max=4096)
    assert int4.values == dict(gpu="h200", arm="lean_attn_graph", quant="int4-triton", step_ms_min=4.0, step_ms_max=4.0,
                               cells=1, models=1, ctx_min=2048, ctx_max=2048)  # the failed cell left out
    assert "over 2 cells (1 model, ctx" in bf16 and "over 1 cell (1 model, ctx" in int4  # counted nouns
    timed = cells.assign(speedup_over_bf16=[None, None, 6.0 / 4.0, None, None], realised_fraction=[None, None, 0.5, None, None])
    [_, int4] = quant_profile.grid_findings(timed, "lean_attn_graph")
    assert int4.values == dict(gpu="h200", arm="lean_attn_graph", quant="int4-triton", step_ms_min=4.0, step_ms_max=4.0,
                               cells=1, models=1, ctx_min=2048, ctx_max=2048, speedup_min=1.5, speedup_max=1.5,
                               realised_fraction_min=0.5, realised_fraction_max=0.5)
    assert "1.50x over bf16, 50 % of its byte saving realised" in int4  # the sentence renders its values


def test_paths_on_different_models_are_compared_on_the_models_they_share():
    from decodegap.analysis import quantisation as quant_report

    group = pd.DataFrame([dict(quant="a", model="m1", realised_fraction=0.5, bytes_quant=10.0),
                          dict(quant="a", model="m2", realised_fraction=0.7, bytes_quant=20.0),
                          dict(quant="b", model="m1", realised_fraction=0.2, bytes_quant=10.5)])
    share, nbytes, common = quant_report.shares_on_common_models(group)
    assert common == ["m1"]
    assert share.to_dict() == {"a": 0.5, "b": 0.2} and nbytes.to_dict() == {"a": 10.0, "b": 10.5}
    share, _, common = quant_report.shares_on_common_models(group[group["model"] == "m2"].assign(quant=["a"]))
    assert common == ["m2"] and share.to_dict() == {"a": 0.7}
