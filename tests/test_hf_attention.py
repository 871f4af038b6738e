"""FA2, FA3 and FlashInfer inside the HF decode step, on a CPU: the names transformers finds, what reaches the kernel
(views of HF's cache, the lengths, no mask), FlashInfer's page table and plans. The kernels themselves need a GPU
(tests/test_attention_gpu.py); here plain-PyTorch stand-ins with the kernels' contracts take their place, labelled
as stand-ins, so that what is tested is decodegap's glue, checked against HF's eager SDPA step."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from decodegap.harness import attention, checks, decode, hf_attention, models
from decodegap import compare


def _gqa(q, k, v, scale, causal_offset=None):
    """Attention of q [Hq, S, D] over k, v [Hkv, n, D] in float32; query i sees keys <= causal_offset + i."""
    g = q.shape[0] // k.shape[0]
    k, v = k.repeat_interleave(g, 0).float(), v.repeat_interleave(g, 0).float()
    scores = q.float() @ k.transpose(-1, -2) * scale
    if causal_offset is not None:
        i = torch.arange(q.shape[1])[:, None]
        scores = scores.masked_fill(torch.arange(k.shape[1])[None, :] > causal_offset + i, float("-inf"))
    return torch.softmax(scores, -1) @ v


class StandInKVCache:
    """Stand-in for flash_attn_with_kvcache on a CPU (not the kernel): its contract in plain PyTorch. q [1, S, Hq, D],
    k_cache, v_cache [1, L, Hkv, D], attend to the first cache_seqlens[0] positions, causal aligned bottom-right;
    output [1, S, Hq, D]. It records what it was handed; `short` makes a decode call (one query token) see that many
    positions fewer, wrong on purpose."""

    def __init__(self):
        self.calls, self.short = [], 0

    def __call__(self, q, k_cache, v_cache, cache_seqlens=None, softmax_scale=None, causal=False):
        self.calls.append(dict(q=q, k_cache=k_cache, seqlens=cache_seqlens.clone()))
        n, s = int(cache_seqlens[0]), q.shape[1]
        n -= self.short if s == 1 else 0
        out = _gqa(q[0].transpose(0, 1), k_cache[0, :n].transpose(0, 1), v_cache[0, :n].transpose(0, 1),
                   softmax_scale, n - s if causal else None)
        return out.transpose(0, 1)[None].to(q.dtype)


class StandInPagedWrapper:
    """Stand-in for flashinfer.BatchDecodeWithPagedKVCacheWrapper on a CPU (not FlashInfer): the constructor, plan
    and run calls paged_kv makes, in plain PyTorch. plan copies the page table into the fixed buffers as FlashInfer's
    CUDA-graph mode does; run reads the tokens through those buffers from the NHD pages it is handed."""

    instances: list = []

    def __init__(self, workspace, kv_layout, use_cuda_graph, use_tensor_cores, paged_kv_indptr_buffer,
                 paged_kv_indices_buffer, paged_kv_last_page_len_buffer):
        assert kv_layout == "NHD" and use_cuda_graph and use_tensor_cores
        self.indptr, self.indices = paged_kv_indptr_buffer, paged_kv_indices_buffer
        self.last = paged_kv_last_page_len_buffer
        self.plans = []
        StandInPagedWrapper.instances.append(self)

    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, q_data_type=None,
             kv_data_type=None, sm_scale=None):
        self.indptr.copy_(indptr)
        self.last.copy_(last_page_len)
        self.indices[:len(indices)].copy_(indices)
        self.page_size, self.scale = page_size, sm_scale
        self.plans.append((int(indptr[1]) - 1) * page_size + int(last_page_len[0]))

    def run(self, q, paged_kv_cache):
        k_pages, v_pages = paged_kv_cache  # [pages, page_size, Hkv, D]
        pages = self.indices[int(self.indptr[0]):int(self.indptr[1])]
        n = (len(pages) - 1) * self.page_size + int(self.last[0])
        k = k_pages[pages].flatten(0, 1)[:n].transpose(0, 1)  # [Hkv, n, D]
        v = v_pages[pages].flatten(0, 1)[:n].transpose(0, 1)
        return _gqa(q[0][:, None], k, v, self.scale)[:, 0][None].to(q.dtype)  # [1, Hq, D]


@pytest.fixture
def stand_in(monkeypatch):
    """A backend key `stand_in` whose in-model kernel is StandInKVCache, registered with transformers."""
    kernel = StandInKVCache()
    monkeypatch.setitem(hf_attention.IN_MODEL, "stand_in",
                        hf_attention.InModel("stand_in", "decodegap_stand_in",
                                             hf_attention.kvcache_attention(lambda: kernel), lambda device: None))
    monkeypatch.setitem(attention.BACKENDS, "stand_in", attention.BACKENDS["sdpa"])
    hf_attention.register()
    return kernel


def test_every_in_model_key_is_a_backend_registered_with_transformers_under_a_name_without_flash():
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    hf_attention.register()
    assert set(hf_attention.IN_MODEL) == {"fa2", "fa3", "flashinfer_paged"} <= set(attention.BACKENDS)
    for key, entry in hf_attention.IN_MODEL.items():
        assert ALL_ATTENTION_FUNCTIONS[entry.hf_name] is entry.forward
        assert hf_attention.hf_implementation(key) == entry.hf_name and "flash" not in entry.hf_name
    assert hf_attention.hf_implementation("flex") == "flex_attention" and hf_attention.hf_implementation("sdpa_math") == "sdpa"


@pytest.mark.parametrize("model_key", ["llama-tiny", "qwen2-tiny"])
def test_a_registered_kernel_runs_the_hf_step_on_views_of_the_cache_and_matches_eager_sdpa(stand_in, model_key):
    spec = models.load_spec(model_key)
    model = models.build_model(spec, device="cpu", attn=hf_attention.hf_implementation("stand_in"))
    assert model.config._attn_implementation == "decodegap_stand_in"
    err = checks.verify_arm(model, "eager", 16, attn="stand_in")
    assert err < compare.VERIFY_TOL
    layers = spec.config["num_hidden_layers"]
    assert len(stand_in.calls) == 7 * layers  # prefill and 6 decode calls per layer; the reference ran SDPA
    prefill, step = stand_in.calls[0], stand_in.calls[layers]
    assert prefill["q"].shape[1] == 16 and prefill["seqlens"].tolist() == [16]  # causal prefill over 16 positions
    assert step["q"].shape[1] == 1 and step["seqlens"].tolist() == [17] and step["seqlens"].dtype == torch.int32
    k = step["k_cache"]  # HF's static cache [1, Hkv, L, D] seen as [1, L, Hkv, D]: a view, not a copy
    assert not k.is_contiguous() and k.stride(-1) == 1 and k.stride(1) == k.shape[-1]


def test_the_check_compares_with_hf_eager_sdpa_even_for_a_model_built_with_another_kernel(stand_in):
    model = models.build_model(models.load_spec("llama-tiny"), device="cpu", attn=hf_attention.hf_implementation("stand_in"))
    stand_in.short = 8  # a decode call sees half the cache: the check against SDPA must see it
    assert checks.verify_arm(model, "eager", 16, attn="stand_in", raise_past_tol=False) > compare.VERIFY_TOL
    assert model.config._attn_implementation == "decodegap_stand_in"  # restored after the SDPA reference


def test_an_in_model_kernel_gets_the_sharpened_check_too(stand_in):
    from decodegap.harness import checks as sharp_check
    from decodegap.harness.sweep import Cell
    from decodegap.harness.verification import wants_sharp_check

    assert wants_sharp_check(Cell("m", 2048, "graph", attn="fa2"))
    assert wants_sharp_check(Cell("m", 2048, "hf_default", attn="flashinfer_paged"))
    assert not wants_sharp_check(Cell("m", 2048, "compile", attn="fa3"))
    assert not wants_sharp_check(Cell("m", 2048, "graph", attn="sdpa_math"))
    model = models.build_model(models.load_spec("llama-tiny"), device="cpu", attn=hf_attention.hf_implementation("stand_in"))
    assert sharp_check.verify_arm_sharpened(model, "eager", 16, attn="stand_in") < sharp_check.SHARP_TOL
    stand_in.short = 8
    assert not sharp_check.verify_arm_sharpened(model, "eager", 16, attn="stand_in") < sharp_check.SHARP_TOL


def test_backends_without_a_whole_step_path_or_built_for_another_are_unavailable_with_the_reason():
    model = models.build_model(models.load_spec("llama-tiny"), device="cpu")
    for key, why in (("flashinfer", "flashinfer_paged"), ("fa3_torch", "per-layer backend only"),
                     ("fa2", "needs 'decodegap_fa2_kvcache'")):
        with pytest.raises(decode.ArmUnavailable, match=why):
            decode.run_arm(model, "eager", 16, warmup=1, steps=1, attn=key)
    fa2 = models.build_model(models.load_spec("llama-tiny"), device="cpu", attn=hf_attention.hf_implementation("fa2"))
    assert hf_attention.attention_unavailable("fa2", "eager", fa2) == "needs a CUDA device"
    assert "arms eager, hf_default, graph only" in hf_attention.attention_unavailable("fa2", "lean", fa2)


# ------------------------------------------------------------------ FlashInfer's plans inside the step

@pytest.fixture
def fi_stand_in(monkeypatch):
    """flashinfer_paged with StandInPagedWrapper in FlashInfer's place (and no CUDA needed)."""
    StandInPagedWrapper.instances.clear()
    entry = hf_attention.IN_MODEL["flashinfer_paged"]
    monkeypatch.setitem(hf_attention.IN_MODEL, "flashinfer_paged",
                        dataclasses.replace(entry, unavailable=lambda d: None))
    model = models.build_model(models.load_spec("qwen2-tiny"), device="cpu",
                               attn=hf_attention.hf_implementation("flashinfer_paged"))
    hf_attention.prepare(model, wrapper_cls=StandInPagedWrapper)
    return model


def test_flashinfer_step_plans_once_per_step_from_the_host_length_and_matches_eager_sdpa(fi_stand_in):
    model = fi_stand_in
    err = checks.verify_arm(model, "eager", 16, attn="flashinfer_paged")
    assert err < compare.VERIFY_TOL
    wrapper = StandInPagedWrapper.instances[-1]
    assert wrapper.plans == [17, 18, 19, 20, 21, 22]  # one plan per decode step (not per layer), from 16 + 1
    assert wrapper.scale == pytest.approx(model.model.layers[0].self_attn.scaling)
    hooks = hf_attention.replay_hooks(model)  # what a graph arm runs before each replay: the next step's plan
    assert len(hooks) == 1
    with pytest.raises(ValueError, match="kv_len 23 is past this page table's capacity 22"):
        hooks[0]()  # the cache (16 + 6 positions) is full: no plan past its end
    state = getattr(model.model.layers[1].self_attn, hf_attention.STATE_ATTR)
    assert state is getattr(model.model.layers[0].self_attn, hf_attention.STATE_ATTR)  # one state for every layer
    assert state.kv_len == 22
    state.kv_len = 20
    with torch.inference_mode():  # as decode.run_arm replays its graph
        hooks[0]()
    assert wrapper.plans[-1] == 21 and state.kv_len == 21


def test_flashinfer_step_on_hf_default_cache_grows_its_page_table(fi_stand_in):
    err = checks.verify_arm(fi_stand_in, "hf_default", 16, attn="flashinfer_paged")
    assert err < compare.VERIFY_TOL
    first, last = StandInPagedWrapper.instances[0], StandInPagedWrapper.instances[-1]
    assert len(first.indices) == 16 and len(last.indices) == 32  # the cache outgrew the prefill's table: doubled
    assert last.plans == [17, 18, 19, 20, 21, 22]
