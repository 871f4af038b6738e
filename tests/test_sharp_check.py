"""The sharpened-attention check (decodegap.harness.checks): weights scaled and restored exactly, a quantised model
refused untouched, and on a CPU the faults it is calibrated on failing it while the lean decoder as built passes
(the plain check, unsharpened, passes a flipped rotary)."""

import math

import pytest
import torch
from torch import nn

from decodegap.harness import lean, models, checks as sharp_check
from decodegap.harness.sweep import Cell
from decodegap.harness.verification import wants_sharp_check


def _tiny(key="qwen2-tiny"):
    return models.build_model(models.load_spec(key), device="cpu")


def test_sharpened_scales_q_and_k_and_puts_the_exact_weights_back():
    model = _tiny()  # Qwen2: q and k projections with biases
    attn = model.model.layers[0].self_attn
    before = {n: t.detach().clone() for n, t in model.state_dict().items()}
    with sharp_check.sharpened(model, 16.0):
        assert torch.allclose(attn.q_proj.weight.float(), before["model.layers.0.self_attn.q_proj.weight"].float() * 4,
                              rtol=1e-2)
        assert torch.allclose(attn.k_proj.bias.float(), before["model.layers.0.self_attn.k_proj.bias"].float() * 4,
                              rtol=1e-2)
        assert torch.equal(attn.v_proj.weight, before["model.layers.0.self_attn.v_proj.weight"])  # v untouched
    assert all(torch.equal(t, before[n]) for n, t in model.state_dict().items())


def test_a_quantised_projection_is_refused_before_anything_changes():
    model = _tiny("llama-tiny")
    before = model.model.layers[0].self_attn.k_proj.weight.detach().clone()
    model.model.layers[1].self_attn.q_proj = nn.Identity()
    with pytest.raises(sharp_check.NotSharpenable, match="Identity"):
        with sharp_check.sharpened(model):
            pass
    assert torch.equal(model.model.layers[0].self_attn.k_proj.weight, before)


def test_only_uncompiled_bf16_lean_arms_with_sdpa_get_the_sharpened_check():
    assert wants_sharp_check(Cell("m", 2048, "lean_attn_graph")) and wants_sharp_check(Cell("m", 2048, "lean"))
    assert not wants_sharp_check(Cell("m", 2048, "lean_attn_compile"))
    assert not wants_sharp_check(Cell("m", 2048, "graph"))
    assert not wants_sharp_check(Cell("m", 2048, "lean_graph", quant="int4-tinygemm"))
    assert not wants_sharp_check(Cell("m", 2048, "lean_graph", attn="flex"))


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["rotary sign-flipped", "rotary one position off", "cache block dropped"])
def test_the_sharpened_check_fails_a_wrong_attention_the_plain_check_can_miss(fault):
    model = sharp_check.calibration_model()
    assert sharp_check.verify_arm_sharpened(model, "lean", 256) < sharp_check.SHARP_TOL  # as built
    with sharp_check.fault(fault):
        err = sharp_check.verify_arm_sharpened(model, "lean", 256)
        assert err > sharp_check.SHARP_TOL and math.isfinite(err)
        if fault == "rotary sign-flipped":  # unsharpened, the same fault passes the plain check
            assert sharp_check.verify_arm_sharpened(model, "lean", 256, factor=1.0) < sharp_check.SHARP_TOL


def test_a_fault_is_put_back_and_an_unknown_one_refused():
    real = (lean.LeanDecoder.forward, lean._attention, lean._rotate_half)
    for case in sharp_check.FAULTS:
        with sharp_check.fault(case):
            pass
        assert (lean.LeanDecoder.forward, lean._attention, lean._rotate_half) == real
    with pytest.raises(ValueError, match="unknown fault"):
        with sharp_check.fault("rotary off by two"):
            pass


def test_only_models_with_flat_scores_are_sharpened():
    """score_std by hand: 4096 x 0.02^2 = 1.6384 (Llama-3.1-8B: no sharpening, its check is the plain one), the
    calibration model 256 x 0.02^2 = 0.1024 (sharpened by SHARPEN to 1.64, the real models' spread)."""
    llama = models.load_spec("llama-3.1-8b").config
    narrow = dict(llama, hidden_size=256)
    assert sharp_check.score_std(llama) == pytest.approx(1.6384)
    assert sharp_check.score_std(narrow) == pytest.approx(0.1024)
    assert sharp_check.factor_for(llama) == 1.0 and sharp_check.factor_for(narrow) == sharp_check.SHARPEN
    assert not wants_sharp_check(Cell("llama-3.1-8b", 2048, "lean"), llama)
    assert wants_sharp_check(Cell("m", 2048, "lean"), narrow) and wants_sharp_check(Cell("m", 2048, "lean"))
    assert sharp_check.factor_for(sharp_check.calibration_model().config.to_dict()) == sharp_check.SHARPEN
    assert sharp_check.score_std(sharp_check.calibration_model().config.to_dict()) == sharp_check.CALIBRATION_SPREAD


def test_a_model_between_narrow_and_real_is_sharpened_to_the_real_spread_not_past_it():
    """Qwen2.5-0.5B: 896 x 0.02^2 = 0.3584, factor 1.6384 / 0.3584 = 4.571; Qwen2.5-3B: 2048 x 0.0004 = 0.8192,
    factor 2.0; a model narrower than the calibration one keeps SHARPEN (64 x 0.0004 = 0.0256: 64 capped at 16)."""
    small, three = (models.load_spec(k).config for k in ("qwen2.5-0.5b", "qwen2.5-3b"))
    assert sharp_check.factor_for(small) == pytest.approx(4.5714, abs=1e-4)
    assert sharp_check.factor_for(three) == pytest.approx(2.0)
    assert sharp_check.factor_for(dict(small, hidden_size=64)) == sharp_check.SHARPEN
    assert sharp_check.sharpened_reason(small) == "scores sharpened x4.57 (spread 0.36 -> 1.64)"
