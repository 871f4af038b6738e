"""The lean decoder against the HF model it is built from, on the CPU with the tiny configs: same weights,
same inputs, logits equal within tolerance; and the comparison can fail."""

from __future__ import annotations

import pytest
import torch

from decodegap import decode, lean, models

TINY = ("llama-tiny", "qwen2-tiny", "mistral-tiny")
CTX = 24


def _build(key, dtype="fp32", std=0.2):
    """A tiny HF model with N(0, std) weights (std 0.2: attention far from uniform, so positions matter)."""
    model = models.build_model(models.load_spec(key), device="cpu", dtype=dtype)
    models.randomise_(model, seed=1, std=std)
    return model


def _lean_vs_hf(model, ctx=CTX, steps=4):
    """Teacher-forced: HF StaticStep and LeanStep decode the same prompt and feed the same token each step.
    Returns the largest relative error of the logits over the steps (prefill's last token included)."""
    with torch.inference_mode():
        ref = decode.StaticStep(model, ctx, ctx + steps, feedback=False)
        got = lean.LeanStep(model, ctx, ctx + steps, feedback=False)
        assert torch.equal(ref.tok, got.tok)  # same prefill argmax
        errors = []
        for _ in range(steps):
            errors.append(decode.max_relative_error(got.step().float(), ref.step().float()))
    return max(errors)


@pytest.mark.parametrize("key", TINY)
def test_lean_logits_equal_hf_in_fp32(key):
    assert _lean_vs_hf(_build(key)) < 1e-4


@pytest.mark.parametrize("key", TINY)
def test_lean_logits_equal_hf_in_bf16(key):
    assert _lean_vs_hf(_build(key, dtype="bf16")) < 0.05


def test_qwen2_biases_are_used():
    model = _build("qwen2-tiny")
    assert model.model.layers[0].self_attn.q_proj.bias is not None
    decoder = lean.LeanDecoder(model, 8)
    assert decoder.layers[0]["b_qkv"] is not None
    with torch.no_grad():  # the check fails if the lean decoder ignored the qkv bias
        model.model.layers[0].self_attn.k_proj.bias.add_(1.0)
    assert _lean_vs_hf(model) < 1e-4  # built after the change: still equal
    stale = lean.LeanDecoder(model, CTX + 4)
    assert torch.equal(stale.layers[0]["b_qkv"][64:96], model.model.layers[0].self_attn.k_proj.bias)


def test_a_wrong_rotary_position_fails_the_comparison():
    model = _build("llama-tiny")
    with torch.inference_mode():
        ref = decode.StaticStep(model, CTX, CTX + 2, feedback=False)
        got = lean.LeanStep(model, CTX, CTX + 2, feedback=False)
        got.pos.add_(1)  # one position ahead: the rotary phase and the cache slot are wrong
        err = decode.max_relative_error(got.step().float(), ref.step().float())
    assert err > 0.05


def test_fused_weights_are_the_hf_weights_and_the_byte_count_adds_up():
    model = _build("llama-tiny")
    decoder = lean.LeanDecoder(model, 8)
    cfg = model.config
    a = model.model.layers[1].self_attn
    assert torch.equal(decoder.layers[1]["w_qkv"], torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))
    # llama-tiny: hidden 64, 4 heads x 16, 2 kv heads, intermediate 128, 2 layers, vocab 256, fp32
    h, kv, inter, vocab = 64, 2 * 16, 128, 256
    per_layer = (h * h + 2 * kv * h) + h * h + 2 * inter * h + inter * h + 2 * h
    assert decoder.weight_bytes() == 4 * (2 * per_layer + h + vocab * h)
    assert cfg.num_hidden_layers == 2 and cfg.hidden_size == h


def test_an_unsupported_architecture_is_refused_with_the_reason():
    model = _build("llama-tiny")
    model.config.model_type = "gemma"
    with pytest.raises(lean.LeanUnsupported, match="not model_type 'gemma'"):
        lean.LeanDecoder(model, 8)


def test_the_lean_arms_run_in_the_decode_harness_and_pass_its_check():
    model = _build("mistral-tiny", dtype="bf16", std=0.02)
    timing = decode.run_arm(model, "lean", CTX, warmup=2, steps=3)
    assert len(timing.warmup_ms) == 2 and len(timing.step_ms) == 3 and timing.max_cache_len == CTX + 5
    assert decode.verify_arm(model, "lean", CTX) < 0.1  # against HF eager, teacher-forced
    for arm in ("lean_graph", "lean_compile"):
        with pytest.raises(decode.ArmUnavailable, match="CUDA"):
            decode.run_arm(model, arm, CTX)
    assert decode.max_cache_len("lean_graph", 100, 5, 30) == 100 + decode.GRAPH_SIDE_STREAM_WARMUP + 35
