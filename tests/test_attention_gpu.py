"""GPU tests (`pytest -m gpu`) of FA2 (flash-attn's trimmed build), FA3 and FlashInfer: per layer against SDPA's math
backend on the three models' shapes, and inside the HF decode step (eager and graphed) against eager SDPA. A backend
whose package is missing here is skipped with the reason (the sweeps record it as `unavailable`)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from decodegap.harness import attention, checks, decode, hf_attention, models, paged_kv
from decodegap import compare

pytestmark = pytest.mark.gpu

IN_MODEL_KEYS = ("fa2", "fa3", "flashinfer_paged")


def _skip_unless_available(key: str) -> None:
    reason = hf_attention.IN_MODEL[key].unavailable("cuda")
    if reason:
        pytest.skip(f"{key}: {reason}")


@pytest.mark.parametrize("model", ["qwen2.5-7b", "mistral-7b-v0.3", "llama-3.1-8b"])
@pytest.mark.parametrize("key", IN_MODEL_KEYS)
@pytest.mark.parametrize("ctx", [2048, 16384])
def test_per_layer_kernel_equals_the_math_backend(model, key, ctx):
    _skip_unless_available(key)
    shape = attention.Shape.from_config(model, models.load_spec(model).config)
    _, err = attention.check(key, shape, ctx)  # raises past its tolerance
    assert err < 2e-2


def test_flashinfer_paged_takes_qwens_group_of_7_that_single_decode_refuses():
    _skip_unless_available("flashinfer_paged")
    shape = attention.Shape.from_config("qwen2.5-7b", models.load_spec("qwen2.5-7b").config)
    assert shape.q_heads // shape.kv_heads == 7
    with pytest.raises(attention.BackendUnavailable, match="group_size"):
        attention.check("flashinfer", shape, 2048)
    attention.check("flashinfer_paged", shape, 2048)


def test_flashinfer_reads_hf_cache_as_strided_pages_like_contiguous_pages():
    _skip_unless_available("flashinfer_paged")

    q, k, v = attention.decode_inputs(attention.Shape("m", 28, 4, 128), 300)
    paged = paged_kv.PagedDecode(28, 4, 128, 300, q.device, q.dtype, None, attention.flashinfer_wrapper_class())
    paged.plan(300)
    pages = [paged_kv.paged_view(t).contiguous() for t in (k, v)]  # the same pages, laid out as FlashInfer's own
    assert not paged_kv.paged_view(k).is_contiguous()
    assert torch.equal(paged.run(q, k, v), paged.wrapper.run(q[:, :, 0, :], tuple(pages)))


@pytest.fixture(scope="module", params=["qwen2.5-7b", "llama-3.1-8b"])
def two_layer_spec(request):
    """The real shapes (heads, head dim 128, vocabulary) with two decoder layers: quick to build, the same calls."""
    spec = models.load_spec(request.param)
    return dataclasses.replace(spec, config={**spec.config, "num_hidden_layers": 2})


@pytest.mark.parametrize("arm", ["eager", "graph"])
@pytest.mark.parametrize("key", IN_MODEL_KEYS)
def test_in_model_kernel_step_equals_eager_sdpa(two_layer_spec, key, arm):
    _skip_unless_available(key)
    model = models.build_model(two_layer_spec, device="cuda", attn=hf_attention.hf_implementation(key))
    try:
        err = checks.verify_arm(model, arm, 512, calls=8, attn=key)
        assert err < compare.VERIFY_TOL
        timing = decode.run_arm(model, arm, 512, warmup=2, steps=4, attn=key)
        assert len(timing.step_ms) == 4 and all(t > 0 for t in timing.step_ms)
    finally:
        del model
        torch.cuda.empty_cache()


def test_trimmed_flash_attn_refuses_another_head_dim_with_its_reason():
    from decodegap import hardware

    _skip_unless_available("fa2")
    if "flash_attn" not in hardware.kernel_builds():
        pytest.skip("flash_attn_2_cuda is not bench/build_flash_attn.sh's trimmed build here")
    q, k, v = attention.decode_inputs(attention.Shape("m", 8, 2, 64), 64)
    with pytest.raises(attention.BackendUnavailable, match="head dim 128 only"):
        attention.backend("fa2").prepare(q, k, v)
