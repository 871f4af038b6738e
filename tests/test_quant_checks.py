"""The model check of a quantised path can fail: on the tiny configs the quantised model (the CPU tinygemm kernel,
and the reference product of the GPTQ and AWQ formats), each decoder layer fed the bf16 model's input
(quant_check), stays inside its tolerance against the bf16 model it was quantised from, while a wrong zero point,
a swapped nibble order or a wrong group size lands far outside it. End to end, the logits do not tell them apart
as well: a random model amplifies the rounding noise (on the 7-8B shapes a correct path's logits are unrelated)."""

from __future__ import annotations

import copy

import pytest
import torch

from decodegap import compare
from decodegap.harness import models, quant_checks as quant_check
from decodegap.quant import paths as quant, formats as quant_formats

CPU_INT4 = all(hasattr(torch.ops.aten, op) for op in ("_convert_weight_to_int4pack_for_cpu",
                                                       "_weight_int4pack_mm_for_cpu"))
TINY = ("llama-tiny", "qwen2-tiny", "mistral-tiny")


CTX = 32


@pytest.fixture(scope="module", params=TINY)
def bf16(request):
    model = models.build_model(models.load_spec(request.param), device="cpu")
    return model, quant_check.record_layers(model, CTX)


def _error(model, ref, key):
    quantised = copy.deepcopy(model)
    quant.quantise_model_(quantised, key, reference=key != "int4-tinygemm")
    return quant_check.forced_layer_error(quantised, CTX, ref)


def test_the_tolerance_comes_from_4_bit_rounding_of_the_bf16_weights(bf16):
    model, _ = bf16
    tol, bound = quant.model_tolerance(model, "gptq-exllamav2")
    w = model.model.layers[0].mlp.down_proj.weight.detach()  # [64, 128], group 64: two groups per row
    s = (w.float().reshape(w.shape[0], 2, 64).amax(-1) - w.float().reshape(w.shape[0], 2, 64).amin(-1)) / 15
    by_hand = float((s.pow(2).mean() / 12).sqrt() / w.float().pow(2).mean().sqrt())
    assert quant_formats.rounding_error_bound(w, 64) == pytest.approx(by_hand, rel=1e-5)
    assert bound >= by_hand and 0.05 < bound < 0.15  # 16 levels over a Gaussian group's range
    assert tol == pytest.approx(quant.MODEL_TOL_FACTOR * bound)


@pytest.mark.parametrize("key", ["int4-tinygemm", "gptq-exllamav2", "awq-triton"])
def test_a_correct_path_is_well_inside_the_tolerance(bf16, key):
    if key == "int4-tinygemm" and not CPU_INT4:
        pytest.skip("this torch has no CPU int4 ops")
    model, ref = bf16
    tol, bound = quant.model_tolerance(model, key)
    err = _error(model, ref, key)
    assert bound < err < tol  # the rounding noise of two or three chained products shows, inside the tolerance


def _wrong_zero_point(q, z, s, group_size):  # zeros stored as z, read back as z + 1
    return _GPTQ_PACK(q, z + 1, s, group_size)


def _swapped_nibbles(q, z, s):  # AWQ's columns packed in plain order, read in AWQ's
    N, K = q.shape
    return (quant_formats.pack_int32(q.t().reshape(K, N // 8, 8)),
            quant_formats.pack_int32(z.t().reshape(z.shape[1], N // 8, 8)), s.t().contiguous().half())


def _wrong_group_size(weight, group_size, scale_dtype=torch.float16, zero_min=0):  # quantised in groups of G/2
    q, z, s = _RTN(weight, group_size // 2, scale_dtype, zero_min)
    return q, z[:, ::2].contiguous(), s[:, ::2].contiguous()


_GPTQ_PACK, _RTN = quant_formats.gptq_pack, quant_formats.rtn_asymmetric


@pytest.mark.parametrize("fault,attr,key", [(_wrong_zero_point, "gptq_pack", "gptq-exllamav2"),
                                            (_swapped_nibbles, "awq_pack", "awq-triton"),
                                            (_wrong_group_size, "rtn_asymmetric", "awq-triton")])
def test_a_wrong_format_fails_the_model_check(bf16, monkeypatch, fault, attr, key):
    model, ref = bf16
    tol, _ = quant.model_tolerance(model, key)
    monkeypatch.setattr(quant_formats, attr, fault)
    err = _error(model, ref, key)
    assert not quant.passes(err, tol) and err > 8 * tol / quant.MODEL_TOL_FACTOR  # 8x the rounding noise at least


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
