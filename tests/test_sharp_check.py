"""The sharpened-attention check (decodegap.sharp_check): weights scaled and restored exactly, a quantised model
refused untouched, and on a CPU the faults it is calibrated on failing it while the lean decoder as built passes
(the plain check, unsharpened, passes a flipped rotary)."""

import math

import pytest
import torch
from torch import nn

from decodegap import lean, models, sharp_check
from decodegap.sweep import Cell, wants_sharp_check


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


def _narrow_llama():
    spec = models.load_spec("llama-3.1-8b")
    config = dict(spec.config, hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=1,
                  head_dim=64, num_hidden_layers=4, vocab_size=1024, bos_token_id=1, eos_token_id=2)
    return models.build_model(models.ModelSpec(spec.key, spec.name, None, "narrow", True, config), device="cpu")


def _rotary_one_position_off(monkeypatch):
    real = lean.LeanDecoder.forward

    def forward(self, ids, start_pos):  # a decode step's rotary taken at the next position
        if ids.shape[1] != 1:
            return real(self, ids, start_pos)
        cos, sin = self.cos, self.sin
        self.cos, self.sin = torch.roll(cos, -1, 0), torch.roll(sin, -1, 0)
        try:
            return real(self, ids, start_pos)
        finally:
            self.cos, self.sin = cos, sin

    monkeypatch.setattr(lean.LeanDecoder, "forward", forward)


def _block_dropped(monkeypatch):
    real = lean._attention

    def attention(q, keys, values, mask, scale, prefill):  # a decode step skips 32 cached positions
        if not prefill:
            mask = mask.clone()
            mask[..., 96:128] = False
        return real(q, keys, values, mask, scale, prefill)

    monkeypatch.setattr(lean, "_attention", attention)


def _rotary_flipped(monkeypatch):
    real = lean._rotate_half
    monkeypatch.setattr(lean, "_rotate_half", lambda x: -real(x))


@pytest.mark.slow
@pytest.mark.parametrize("fault", [_rotary_flipped, _rotary_one_position_off, _block_dropped])
def test_the_sharpened_check_fails_a_wrong_attention_the_plain_check_can_miss(fault, monkeypatch):
    model = _narrow_llama()
    assert sharp_check.verify_arm_sharpened(model, "lean", 256) < sharp_check.SHARP_TOL  # as built
    fault(monkeypatch)
    err = sharp_check.verify_arm_sharpened(model, "lean", 256)
    assert err > sharp_check.SHARP_TOL and math.isfinite(err)
    if fault is _rotary_flipped:  # unsharpened, the same fault passes the plain check
        assert sharp_check.verify_arm_sharpened(model, "lean", 256, factor=1.0) < sharp_check.SHARP_TOL
