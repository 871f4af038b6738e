"""GPU tests (`pytest -m gpu`): the harness on the real model shapes, correct before timed."""

from __future__ import annotations

import pytest
import torch

from decodegap import accounting
from decodegap.harness import checks, decode, models
from decodegap.harness import profile

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def llama():
    spec = models.load_spec("llama-3.1-8b")
    model = models.build_model(spec, device="cuda")
    yield spec, model
    del model
    torch.cuda.empty_cache()


def test_built_model_has_the_hand_counted_parameters_and_random_weights(llama):
    spec, model = llama
    assert sum(p.numel() for p in model.parameters()) == accounting.param_count(spec.config).total == 8_030_261_248
    w = model.model.layers[0].mlp.down_proj.weight
    assert w.device.type == "cuda" and w.dtype == torch.bfloat16
    assert 0.015 < float(w.detach().float().std()) < 0.025  # N(0, 0.02), not empty or zero memory


def test_static_decode_equals_full_forward_on_gpu(llama):
    _, model = llama
    assert max(checks.static_vs_full_forward(model, 64)) < 0.1


@pytest.mark.parametrize("arm", ["graph", "hf_default", "compile", "lean", "lean_graph", "lean_compile", "lean_kernels_graph",
                                 "lean_attn_graph", "lean_attn_compile", "lean_fused_graph", "lean_fused_pdl_graph",
                                 "lean_fused_pdl_norm_graph", "lean_fused_pdl_epilogues_graph",
                                 "lean_fused_early_graph", "lean_fused_early_products_graph"])
def test_arm_logits_equal_eager(llama, arm):
    _, model = llama
    assert checks.verify_arm(model, arm, ctx=256) < 0.1


def test_graph_replays_advance_the_cache_slot(llama):
    _, model = llama
    t = decode.run_arm(model, "graph", ctx=128, warmup=2, steps=4)
    assert t.max_cache_len == 128 + decode.forward_calls("graph", 2, 4)
    assert len(t.step_ms) == 4 and all(ms > 0 for ms in t.step_ms)


def test_kernels_per_step_is_large(llama):
    _, model = llama
    # 32 layers, each well over ten kernels: the paper's launch-overhead premise
    assert profile.kernels_per_step(model, "eager", ctx=128) > 32 * 10
