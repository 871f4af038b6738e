"""The quantisation checks can fail: on the tiny configs the quantised model (the CPU tinygemm kernel, and the
reference product of the GPTQ and AWQ formats), each decoder layer fed the bf16 model's input (quant_check),
stays inside its tolerance (MODEL_K_PASS x the null of its own format's rounding: quant.power) against the bf16
model it was quantised from, and its weights within half a step of the bf16 weights, while every planted fault
(quant.power.FAULTS) fails the elementwise format check and, but for transposed scales on the tiny shapes, the
model check too."""

from __future__ import annotations

import copy

import pytest
import torch

from decodegap import compare
from decodegap.harness import models, quant_checks as quant_check
from decodegap.quant import paths as quant, formats as quant_formats, power

CPU_INT4 = all(hasattr(torch.ops.aten, op) for op in ("_convert_weight_to_int4pack_for_cpu",
                                                       "_weight_int4pack_mm_for_cpu"))
TINY = ("llama-tiny", "qwen2-tiny", "mistral-tiny")


CTX = 32


@pytest.fixture(scope="module", params=TINY)
def bf16(request):
    model = models.build_model(models.load_spec(request.param), device="cpu")
    return model, quant_check.record_layers(model, CTX)


def test_the_tolerance_is_the_null_of_the_formats_own_rounding(bf16):
    """The tolerance is MODEL_K_PASS x the largest of NULL_DRAWS null draws: the bf16 model with every decoder
    weight plus U(+-D/2) of the format's own step, through the same forced-layer metric; nothing quantised enters."""
    model, ref = bf16
    before = [p.detach().clone() for p in model.parameters()]
    tol, null, draws = quant_check.model_tolerance(model, "gptq-exllamav2", CTX, ref)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # the noise is taken out again
    assert len(draws) == power.NULL_DRAWS and null == max(draws) and tol == pytest.approx(compare.MODEL_K_PASS * null)
    with power.noisy_linears(model, "gptq-exllamav2", quant.default_group_size(model.config.to_dict()), seed=1):
        assert quant_check.forced_layer_error(model, CTX, ref) == pytest.approx(draws[0])
    w = model.model.layers[0].mlp.down_proj.weight.detach()  # [64, 128], group 64: two groups per row
    g = w.float().reshape(w.shape[0], 2, 64)
    s = (g.amax(-1).clamp(min=0) - g.amin(-1).clamp(max=0)) / 15
    assert torch.allclose(power.step("gptq-exllamav2", w, 64), quant_formats.grouped(s, 64))
    by_hand = float((s.pow(2).mean() / 12).sqrt() / w.float().pow(2).mean().sqrt())
    assert power.predicted_eps("gptq-exllamav2", w, 64) == pytest.approx(by_hand, rel=1e-5)
    sym = power.predicted_eps("awq-marlin", w, 64)
    assert 1.05 < sym / by_hand < 1.35  # Marlin's symmetric step is wider than the asymmetric one
    assert 1.0 < compare.MODEL_K_PASS < compare.MODEL_K_FAIL


@pytest.mark.parametrize("key", ["int4-tinygemm", "gptq-exllamav2", "awq-triton", "int4-triton"])
def test_a_correct_path_passes_both_checks(bf16, key):
    if key == "int4-tinygemm" and not CPU_INT4:
        pytest.skip("this torch has no CPU int4 ops")
    model, ref = bf16
    tol, null, _ = quant_check.model_tolerance(model, key, CTX, ref)
    with quant_check.swapped(model, key, reference=key != "int4-tinygemm") as info:
        err = quant_check.forced_layer_error(model, CTX, ref)
    assert 0.5 * null < err <= tol  # the rounding noise shows, inside its null's band
    assert all(power.format_passes(e["format"][0]) for e in info["checks"].values())
    assert max(e["format"][0] for e in info["checks"].values()) > 0.9  # some weight sits near half a step


FAULT_CASES = [(f.key, key) for f in power.FAULTS.values() for key in f.paths if key != "awq-marlin"]
MODEL_CHECK_CATCHES = {"wrong_zero_point", "swapped_nibbles", "wrong_group_size"}
"""The faults the model check fails by itself on the tiny configs (its tolerance alone); transposed scales move
few weights of a tiny layer's two groups per row far enough for it (gptq, awq), and are caught by the format
check there; at the 7-8B shapes the model check fails every fault (data/diagnostics/quant_power_*.csv)."""


@pytest.fixture(scope="module")
def llama_tiny():
    model = models.build_model(models.load_spec("llama-tiny"), device="cpu")
    ref = quant_check.record_layers(model, CTX)
    return model, ref, {key: quant_check.model_tolerance(model, key, CTX, ref)
                        for key in ("gptq-exllamav2", "awq-triton", "int4-tinygemm")}


@pytest.mark.parametrize("fault,key", FAULT_CASES)
def test_each_planted_fault_fails(llama_tiny, fault, key):
    if key == "int4-tinygemm" and not CPU_INT4:
        pytest.skip("this torch has no CPU int4 ops")
    model, ref, tols = llama_tiny
    tol, null, _ = tols[key]
    with quant_check.swapped(model, key, reference=key != "int4-tinygemm", fault=fault) as info:
        err = quant_check.forced_layer_error(model, CTX, ref)
    worst = max(e["format"][0] for e in info["checks"].values())
    assert worst >= 3 and not power.format_passes(worst)  # a whole step off, at least, somewhere
    if fault in MODEL_CHECK_CATCHES or key == "int4-tinygemm":
        assert not quant.passes(err, tol) and quant_check.verdict(err / null) == "fail"
    assert quant_formats.gptq_pack is power.PLANTED_FROM["gptq_pack"]  # the fault is gone once the layers are built
    assert all(type(m) is torch.nn.Linear for layer in model.model.layers for m in layer.modules()
               if hasattr(m, "weight") and m.weight is not None and m.weight.dim() == 2)  # the bf16 model back


def test_marlins_faults_fail_a_small_products_checks():
    """Marlin (in_features % 128, out_features % 256: no tiny config has its shapes) on one 512 x 256 product: the
    correct layer passes, each of its faults fails the product check and the format check."""
    rows = quant_check.product_rows([("small", 512, 256)], ["awq-marlin"], rows=16)
    got = {r["case"]: r for r in rows if r["build"] != "null"}
    assert got["correct"]["verdict"] == "pass" and power.format_passes(got["correct"]["format_ratio"])
    assert set(got) == {"correct"} | {f.key for f in power.faults_for("awq-marlin")}
    for case, r in got.items():
        if case != "correct":
            assert r["verdict"] == "fail" and r["format_ratio"] >= 3, r


@pytest.mark.slow
def test_every_fault_fails_the_format_check_of_one_real_shape_product():
    """At a 7-8B shape (one k_proj 4096 x 1024 of Llama-3.1-8B) every fault, Marlin's included, fails the product's
    check against the bf16 weight by itself (k >= MODEL_K_FAIL) and the format check; the correct layers pass."""
    rows = quant_check.product_rows([("k_proj", 4096, 1024)], ["gptq-exllamav2", "awq-triton", "awq-marlin"], rows=16)
    got = {(r["path"], r["case"]): r for r in rows}
    for key in ("gptq-exllamav2", "awq-triton", "awq-marlin"):
        assert got[(key, "correct")]["verdict"] == "pass" and power.format_passes(got[(key, "correct")]["format_ratio"])
        for f in power.faults_for(key):
            r = got[(key, f.key)]
            assert r["verdict"] == "fail" and r["format_ratio"] >= 3, r


def test_the_forced_layers_see_no_difference_between_a_model_and_itself(bf16):
    model, ref = bf16
    assert quant_check.forced_layer_error(copy.deepcopy(model), CTX, ref) == 0.0
    with pytest.raises(RuntimeError, match="layer calls"):  # the reference of another number of calls
        quant_check.forced_layer_error(copy.deepcopy(model), CTX, [r[:-1] for r in ref])


def test_nan_and_inf_fail_every_check():
    assert quant.passes(0.01, 0.1) and not quant.passes(0.2, 0.1)
    assert not quant.passes(float("nan"), 0.1) and not quant.passes(float("inf"), 0.1)
    nan = [torch.tensor([[[float("nan"), 1.0]]])]
    assert not quant.passes(compare.logits_error(nan, [torch.tensor([[[1.0, 1.0]]])]), 10.0)


def test_marlin_packing_reads_back_whatever_the_permutation_tables():
    """marlin_pack and marlin_dequantise are inverses for any permutation tables of Marlin's sizes (1024 entries per
    tile row chunk, 64 per scale chunk); AutoAWQ supplies the real ones on the GPU machine (test_quant_gpu)."""
    gen = torch.Generator().manual_seed(0)
    perms = (torch.randperm(1024, generator=gen), torch.randperm(64, generator=gen))
    w = torch.randn(256, 256, generator=gen) * 0.02
    q, s = quant_formats.rtn_symmetric(w, 128)
    qweight, scales = quant_formats.marlin_pack(q, s, 128, perms)
    assert qweight.shape == (256 // 16, 2 * 256) and qweight.dtype == torch.int32 and scales.shape == (2, 256)
    deq = quant_formats.marlin_dequantise(qweight, scales, 128, perms)
    assert torch.equal(deq, (q.float() - 8) * quant_formats.grouped(s.half().float(), 128))
    with pytest.raises(ValueError, match="out_features % 256"):
        quant_formats.marlin_pack(q[:128], s[:128], 128, perms)


def test_a_nan_in_any_layer_is_the_model_checks_answer(bf16):
    model, ref = bf16
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.model.layers[0].mlp.down_proj.weight[0, 0] = float("nan")
    err = quant_check.forced_layer_error(broken, CTX, ref)
    assert err != err and not quant.passes(err, 1e9)


def test_the_errors_maxima_by_chunks_are_those_of_the_whole():
    """chunked_maxima, what the forced checks compare with (the LM head's prefill logits a chunk of rows at a time):
    by hand on a 3 x 2 case, and on random [1, 7, 5] operands with chunks of 1, 2 and 3 rows equal to the maxima over
    the whole; a NaN anywhere is the answer; operands of different shapes are refused."""
    got = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]])
    ref = torch.tensor([[1.0, 2.5], [3.0, 4.0], [6.0, 8.0]])
    base = torch.tensor([[0.0, 0.0], [0.0, 10.0], [0.0, 0.0]])
    assert quant_check.chunked_maxima(got, ref, rows=1) == (1.0, 8.0)  # |5-6|, |9-8|; max|ref| 8
    assert quant_check.chunked_maxima(got, ref, base, rows=2) == (1.0, 8.0)  # |4-10| = 6 < |8-0|
    gen = torch.Generator().manual_seed(0)
    a, b, c = (torch.randn(1, 7, 5, generator=gen).bfloat16() for _ in range(3))
    whole = (float((a.float() - b.float()).abs().max()), float((b.float() - c.float()).abs().max()))
    for rows in (1, 2, 3, 1024):
        assert quant_check.chunked_maxima(a, b, c, rows=rows) == whole, rows
    a[0, 6, 4] = float("nan")
    diff, _ = quant_check.chunked_maxima(a, b, rows=2)
    assert diff != diff
    with pytest.raises(ValueError, match="compared shapes differ"):
        quant_check.chunked_maxima(a[:, :6], b)
