"""The lean decoder against the HF model it is built from, on the CPU with the tiny configs: same weights,
same inputs, logits equal within tolerance, in bf16/fp32 and on a model quantised to int4-tinygemm; and the
comparison can fail. On the GPU (gpu marker): the int4 lean arms on Llama-3.1-8B."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from decodegap.harness import checks, decode, lean, models
from decodegap.quant import paths as quant
from decodegap.quant import layers as quant_layers
from decodegap import compare
from decodegap import prompts
from decodegap.quant import fuse as quant_fuse

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
            errors.append(compare.max_relative_error(got.step().float(), ref.step().float()))
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
    assert decoder.layers[0].b_qkv is not None
    with torch.no_grad():  # the check fails if the lean decoder ignored the qkv bias
        model.model.layers[0].self_attn.k_proj.bias.add_(1.0)
    assert _lean_vs_hf(model) < 1e-4  # built after the change: still equal
    stale = lean.LeanDecoder(model, CTX + 4)
    assert torch.equal(stale.layers[0].b_qkv[64:96], model.model.layers[0].self_attn.k_proj.bias)


def test_a_wrong_rotary_position_fails_the_comparison():
    model = _build("llama-tiny")
    with torch.inference_mode():
        ref = decode.StaticStep(model, CTX, CTX + 2, feedback=False)
        got = lean.LeanStep(model, CTX, CTX + 2, feedback=False)
        got.pos.add_(1)  # one position ahead: the rotary phase and the cache slot are wrong
        err = compare.max_relative_error(got.step().float(), ref.step().float())
    assert err > 0.05


def test_fused_weights_are_the_hf_weights():
    model = _build("llama-tiny")
    decoder = lean.LeanDecoder(model, 8)
    a, m = model.model.layers[1].self_attn, model.model.layers[1].mlp
    assert torch.equal(decoder.layers[1].w_qkv, torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))
    assert torch.equal(decoder.layers[1].w_gate_up, torch.cat([m.gate_proj.weight, m.up_proj.weight]))
    assert decoder.layers[1].w_qkv.shape == (64 + 2 * 32, 64)  # 4 heads x 16, then 2 kv heads x 16 twice
    assert decoder.layers[1].w_o.data_ptr() == a.o_proj.weight.data_ptr()  # unfused: the HF tensors themselves



def test_the_copies_are_counted_by_hand_and_refused_before_they_are_made_where_they_cannot_fit(monkeypatch):
    """llama-tiny in bf16 (hidden 64, 4 heads and 2 kv heads of 16, intermediate 128, 2 layers): q/k/v is (64 + 2 x 32)
    x 64 = 8,192 weights and gate/up 2 x 128 x 64 = 16,384, so the copies take 2 x 24,576 x 2 = 98,304 bytes; qwen2-tiny
    adds its q/k/v biases (128 values a layer). With less room left than that the decoder is refused as an
    out-of-memory error (what a sweep records as `oom`) in one line, before any copy is made; with room, it builds."""
    from decodegap import outcome

    model = _build("llama-tiny", dtype="bf16")
    assert lean.copied_bytes(model.model.layers) == 98_304
    qwen = _build("qwen2-tiny", dtype="bf16")
    cfg = qwen.config
    qkv = (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * (cfg.hidden_size // cfg.num_attention_heads)
    per_layer = (qkv * (cfg.hidden_size + 1) + 2 * cfg.intermediate_size * cfg.hidden_size) * 2
    assert lean.copied_bytes(qwen.model.layers) == cfg.num_hidden_layers * per_layer
    assert lean.usable_bytes("cpu") is None  # no check off a GPU
    assert lean.copied_bytes(model.model.layers, largest=True) == 32_768  # gate/up alone: 16,384 x 2 bytes
    made = []
    monkeypatch.setattr(lean, "_projection", lambda *a, **k: made.append(a) or (_ for _ in ()).throw(AssertionError))
    monkeypatch.setattr(lean, "usable_bytes", lambda device: 98_303)
    with pytest.raises(torch.OutOfMemoryError) as refused:
        lean.LeanDecoder(model, 8, share_storage=False)
    assert made == []  # refused before the first layer's copy
    status, reason = outcome.classify(refused.value)
    assert status == "oom" and len(reason) <= outcome.REASON_CHARS and "\n" not in reason
    assert reason.startswith("out of memory: the lean decoder's concatenated q/k/v and gate/up weights take 0.0 GiB")
    assert reason.endswith("GiB left on this GPU: its lean arms need about 0.0 GiB more (the HF arms make no copy)")
    monkeypatch.setattr(lean, "usable_bytes", lambda device: 32_767)  # not even one projection at a time
    with pytest.raises(torch.OutOfMemoryError, match="largest concatenated projection, made one at a time to share "
                                                     "the model's storage, takes 0.0 GiB"):
        lean.LeanDecoder(model, 8)
    assert made == []
    monkeypatch.undo()
    monkeypatch.setattr(lean, "usable_bytes", lambda device: 98_304)
    built = lean.LeanDecoder(model, 8)
    assert built.layers[1].w_qkv.shape == (128, 64) and not built.shares_storage
    assert not lean.shared_projection_storage(model)  # with room, copies: the model's own tensors untouched


def test_where_the_copies_do_not_fit_the_model_shares_the_lean_decoders_storage(monkeypatch):
    """With less room than the copies (98,304 bytes) but more than the largest one (32,768), the decoder shares:
    the HF model's q/k/v and gate/up weights become views of the concatenated ones, so the model holds them once; the
    HF model's logits and the lean decoder's are what they were with copies; a later lean decoder of the same model
    reads the same storage and copies nothing; the checks' note names it."""
    torch.manual_seed(0)
    model = _build("llama-tiny")
    ids = torch.randint(0, model.config.vocab_size, (1, 6))
    with torch.no_grad():
        hf_before = model(ids).logits
        copied = lean.LeanDecoder(model, 8)(ids, torch.zeros(1, dtype=torch.long))
    monkeypatch.setattr(lean, "usable_bytes", lambda device: 98_303)
    shared = lean.LeanDecoder(model, 8)
    assert shared.shares_storage and lean.shared_projection_storage(model)
    a, m = model.model.layers[1].self_attn, model.model.layers[1].mlp
    w = shared.layers[1].w_qkv
    for part, start in ((a.q_proj, 0), (a.k_proj, 64 * 64), (a.v_proj, 96 * 64)):  # 64 q rows, then 32 k and 32 v
        assert part.weight.untyped_storage().data_ptr() == w.untyped_storage().data_ptr()
        assert part.weight.storage_offset() == w.storage_offset() + start
    assert m.up_proj.weight.storage_offset() == shared.layers[1].w_gate_up.storage_offset() + 128 * 64
    assert isinstance(a.q_proj.weight, nn.Parameter)  # the same parameter, its data rebound
    with torch.no_grad():
        assert torch.equal(model(ids).logits, hf_before)
        assert torch.equal(shared(ids, torch.zeros(1, dtype=torch.long)), copied)
    assert lean.copied_bytes(model.model.layers) == 0  # joined already: nothing left to copy
    monkeypatch.undo()
    again = lean.LeanDecoder(model, 8)  # room or not, the joined weights are read as they are
    assert again.layers[1].w_qkv.data_ptr() == w.data_ptr() and not again.shares_storage
    assert "lean.share_projection_storage" in lean.SHARED_STORAGE_NOTE

def test_an_unsupported_architecture_is_refused_with_the_reason():
    model = _build("llama-tiny")
    model.config.model_type = "gemma"
    with pytest.raises(lean.LeanUnsupported, match="not model_type 'gemma'"):
        lean.LeanDecoder(model, 8)


def test_the_lean_arms_run_in_the_decode_harness_and_pass_its_check():
    model = _build("mistral-tiny", dtype="bf16", std=0.02)
    timing = decode.run_arm(model, "lean", CTX, warmup=2, steps=3)
    assert len(timing.warmup_ms) == 2 and len(timing.step_ms) == 3 and timing.max_cache_len == CTX + 5
    assert checks.verify_arm(model, "lean", CTX) < 0.1  # against HF eager, teacher-forced
    for arm in ("lean_graph", "lean_compile"):
        with pytest.raises(decode.ArmUnavailable, match="CUDA"):
            decode.run_arm(model, arm, CTX)
    assert decode.max_cache_len("lean_graph", 100, 5, 30) == 100 + decode.GRAPH_SIDE_STREAM_WARMUP + 35


@pytest.mark.slow
def test_a_session_compiles_more_lean_decoders_than_dynamos_default_limit():
    """decode.compiled raises dynamo's recompile limit: each cell builds its own lean decoder, a new module to
    dynamo, and on the H200 the 9th compiled lean cell of a session failed at the default limit of 8."""
    torch._dynamo.reset()
    model = _build("llama-tiny")
    with torch.inference_mode():
        for ctx in range(8, 8 + 10):
            state = lean.LeanStep(model, ctx, ctx + 2)
            state.forward = decode.compiled(state.lean, backend="aot_eager", mode=None, dynamic=False)
            state.step()
    assert torch._dynamo.config.recompile_limit == decode.RECOMPILE_LIMIT
    torch._dynamo.reset()



def test_each_layer_has_its_own_cache_tensors():
    """One K and one V buffer per layer, [1, kv_heads, max_cache_len, head_dim], written in place by the step
    (a write into a slice of one all-layer tensor made inductor copy each layer's slice back and forth every
    step: bench/lean_compile_cache_cpu.py, in git history at d764dd2)."""
    model = _build("llama-tiny")
    cfg = model.config
    state = lean.LeanStep(model, 8, 12)
    caches = {name: b for name, b in state.lean.named_buffers() if "_cache_" in name}
    assert len(caches) == 2 * cfg.num_hidden_layers
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    assert {tuple(b.shape) for b in caches.values()} == {(1, cfg.num_key_value_heads, 12, head_dim)}
    before = state.lean.k_cache_1[0, :, 8].clone()
    with torch.inference_mode():
        state.step()
    assert not torch.equal(state.lean.k_cache_1[0, :, 8], before)  # the step wrote position 8 of layer 1
    assert state.lean.k_cache_1[0, :, 9].abs().sum() == 0  # and nothing past it


def _four_layer(key, quantised=False):
    spec = models.load_spec(key)
    model = models.build_model(models.ModelSpec(spec.key, spec.name, None, "4 layers", True,
                                                dict(spec.config, num_hidden_layers=4)), device="cpu", dtype="bf16")
    if quantised:
        quant.quantise_model_(model, "int4-tinygemm")
    return model


@pytest.mark.slow  # a torch.compile trace
@pytest.mark.parametrize("quantised", [False, True])
def test_compiled_lean_step_traces_one_layer_and_reuses_it(quantised):
    """The compiled lean arms mark LeanLayer.forward a nested compile region (as the HF compile arm marks HF's
    decoder layers): one graph of the whole step, in which each of the 4 layers is a call of one subgraph (the
    HF model's first layer is inlined instead: tests/test_decode.py), bf16 and int4 (the int4 layers are modules inside the region); the compiled
    step's logits equal the eager lean step's."""
    if quantised and not CPU_INT4:
        pytest.skip("this torch has no CPU int4 ops")
    if not decode.compile_settings()["layer_regions"]:
        pytest.skip("this torch has no torch.compiler.nested_compile_region")
    torch._dynamo.reset()
    seen = []

    def backend(gm, example_inputs):
        calls = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.invoke_subgraph]
        seen.append((len(calls), len({n.args[0].target for n in calls})))
        return gm

    model = _four_layer("qwen2-tiny", quantised)  # Qwen2: the biases go through the region too
    with torch.inference_mode():
        eager = lean.LeanStep(model, 16, 20, feedback=False)
        state = lean.LeanStep(model, 16, 20, feedback=False)
        state.forward = decode.compiled(state.lean, layers=state.lean.layers, backend=backend, mode=None)
        for _ in range(2):
            torch.testing.assert_close(state.step(), eager.step(), rtol=0, atol=0)
    assert seen == [(4, 1)]
    torch._dynamo.reset()


def test_the_prefill_attends_without_cudnn_and_decode_steps_with_the_default_choice(monkeypatch):
    """lean.PREFILL_SDPA_BACKENDS: the prefill's SDPA calls run with cuDNN's attention switched off (with it, the
    lean levers failed their check at Llama ctx 8192 on the H200), the decode steps' with PyTorch's default."""
    seen = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(q, *args, **kwargs):
        seen.append((q.shape[2], torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.math_sdp_enabled()))
        return sdpa(q, *args, **kwargs)

    monkeypatch.setattr(lean.F, "scaled_dot_product_attention", spy)
    model = _build("llama-tiny")
    assert torch.backends.cuda.cudnn_sdp_enabled()
    with torch.inference_mode():
        state = lean.LeanStep(model, 8, 12)
        state.step()
    layers = model.config.num_hidden_layers
    assert seen == [(8, False, True)] * layers + [(1, True, True)] * layers
    assert torch.backends.cuda.cudnn_sdp_enabled()  # switched back on after the prefill

# ------------------------------------------------------------------------------------- int4 (tinygemm)

CPU_INT4 = quant.unavailable_reason("int4-tinygemm", "cpu") is None
needs_cpu_int4 = pytest.mark.skipif(not CPU_INT4, reason="this torch has no CPU int4 ops")
INT4_SCALE = 10.0


def _int4(key):
    """A tiny HF model quantised to int4-tinygemm, every layer's scales and zeros times INT4_SCALE: weights of
    std ~0.2 as in the bf16 tests (attention far from uniform). The scaling makes the layers' seed-based
    `dequantised_weight` stale; these tests compare the lean decoder with the HF model, never with it."""
    model = _build(key, dtype="bf16")
    quant.quantise_model_(model, "int4-tinygemm")
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, quant_layers.TinyGemmLinear):
                mod.scales_and_zeros.mul_(INT4_SCALE)
    return model


@needs_cpu_int4
@pytest.mark.parametrize("key", TINY)
def test_lean_logits_equal_hf_on_an_int4_model(key):
    assert _lean_vs_hf(_int4(key)) < 0.05  # the bf16 tests' tolerance (measured: 0, the same kernels)


@needs_cpu_int4
def test_int4_projections_are_fused_tinygemm_layers_holding_the_hf_codes():
    model = _build("qwen2-tiny", dtype="bf16")
    quant.quantise_model_(model, "int4-tinygemm")
    decoder = lean.LeanDecoder(model, 8)
    a, m, p = model.model.layers[1].self_attn, model.model.layers[1].mlp, decoder.layers[1]
    assert isinstance(p.w_qkv, quant_layers.TinyGemmLinear) and p.b_qkv is None  # the biases are inside it
    assert (p.w_qkv.in_features, p.w_qkv.out_features) == (64, 128)
    parts = (a.q_proj, a.k_proj, a.v_proj)
    assert torch.equal(p.w_qkv.bias, torch.cat([q.bias for q in parts]))
    # the fused layer's weight, read back from its packed codes, is the HF layers' synthesised weights
    assert torch.equal(p.w_qkv.dequantised_weight(), torch.cat([q.dequantised_weight() for q in parts]))
    assert torch.equal(p.w_gate_up.dequantised_weight(),
                       torch.cat([m.gate_proj.dequantised_weight(), m.up_proj.dequantised_weight()]))
    assert p.w_o is a.o_proj and p.w_down is m.down_proj  # unfused: the HF model's own layers


@needs_cpu_int4
def test_int4_parts_fused_in_the_wrong_order_fail_the_comparison(monkeypatch):
    model = _int4("llama-tiny")
    ids = prompts.prompt_ids(model.config.vocab_size, CTX, "cpu")

    def prefill_error():  # the lean decoder's prefill logits against the HF model's, every position
        with torch.inference_mode():
            got = lean.LeanDecoder(model, CTX)(ids, torch.zeros(1, dtype=torch.long)).float()
            return compare.max_relative_error(got, model(ids).logits.float())

    assert prefill_error() < 0.05
    real = quant_fuse.fuse_linears
    monkeypatch.setattr(quant_fuse, "fuse_linears", lambda parts: real(list(parts)[::-1]))  # v, k, q and up, gate
    assert prefill_error() > 0.05


@needs_cpu_int4
def test_a_quantised_layer_the_lean_decoder_cannot_read_is_refused():
    model = _build("mistral-tiny", dtype="bf16")
    quant.quantise_model_(model, "int4-tinygemm")
    model.model.layers[1].mlp.down_proj = quant.build_linear("bf16", 128, 64, device="cpu")
    with pytest.raises(lean.LeanUnsupported, match="layer 1 has BF16Linear"):
        lean.LeanDecoder(model, 8)


@pytest.mark.slow  # a torch.compile trace
@needs_cpu_int4
def test_the_int4_lean_decoder_traces_as_one_graph_and_runs_in_the_harness():
    """torch.compile(fullgraph=True) of the int4 lean step (the lean_compile arm's, here with the eager
    backend: no graph breaks at the quantised projections); and the lean arm's check on an int4 model."""
    model = _int4("qwen2-tiny")
    with torch.inference_mode():
        decoder = lean.LeanDecoder(model, CTX)
        ids, pos = torch.tensor([[5]]), torch.tensor([3])
        ref = decoder(ids, pos)
        got = torch.compile(decoder, backend="aot_eager", fullgraph=True)(ids, pos)
    assert torch.equal(got, ref)
    assert checks.verify_arm(model, "lean", CTX) < 0.1


# --------------------------------------------------------------------------------- the GPU, Llama-3.1-8B

@pytest.fixture(scope="module")
def llama_int4():
    model = models.build_model(models.load_spec("llama-3.1-8b"), device="cuda")
    quant.quantise_model_(model, "int4-tinygemm")
    yield model
    del model
    torch.cuda.empty_cache()


@pytest.mark.gpu
def test_fused_int4_layout_on_the_real_llama_shapes():
    """CUDA tinygemm packs tiles of 8 output rows: q/k/v (4096 -> 4096, 1024, 1024) and gate/up
    (4096 -> 14336 twice) fused by concatenating their packed tensors give exactly the parts' outputs."""
    config = models.load_spec("llama-3.1-8b").config
    shapes = quant.layer_shapes(config)
    gen = torch.Generator().manual_seed(0)
    for names in (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")):
        parts = [quant.build_linear("int4-tinygemm", *shapes[n], device="cuda", seed=i) for i, n in enumerate(names)]
        fused = quant_fuse.fuse_linears(parts)
        assert fused.packed.shape[0] == sum(shapes[n][1] for n in names) // 8
        x = torch.randn(1, 7, 4096, generator=gen).cuda().bfloat16()
        with torch.no_grad():
            for rows in (x[:, :1], x):
                assert torch.equal(fused(rows), torch.cat([p(rows) for p in parts], dim=-1)), names
        if names[0] == "q_proj":
            assert torch.equal(fused.dequantised_weight(), torch.cat([p.dequantised_weight() for p in parts]))


@pytest.mark.gpu
@pytest.mark.parametrize("arm", ["lean", "lean_graph", "lean_compile", "lean_kernels_graph"])
def test_int4_lean_arms_equal_hf_int4_on_llama(llama_int4, arm):
    """Teacher-forced against HF eager on the same int4 model (checks.verify_arm), at a short context."""
    assert checks.verify_arm(llama_int4, arm, ctx=64) < 0.1



@pytest.mark.gpu
@pytest.mark.parametrize("quantised", [False, True])
@pytest.mark.parametrize("arm", ["lean_compile", "lean_attn_compile"])
def test_compiled_lean_arms_with_layer_regions_on_real_widths(arm, quantised):
    """The compiled lean arms (LeanLayer a nested compile region; the int4 layers and, for lean_attn_compile, the
    Triton split-KV attention inside it) against HF eager on Llama-3.1-8B's widths with 4 layers, inductor."""
    spec = models.load_spec("llama-3.1-8b")
    model = models.build_model(models.ModelSpec(spec.key, spec.name, None, "4 layers", True,
                                                dict(spec.config, num_hidden_layers=4)), device="cuda")
    if quantised:
        quant.quantise_model_(model, "int4-tinygemm")
    assert checks.verify_arm(model, arm, ctx=300) < 0.1
    torch._dynamo.reset()


def test_a_decoder_prefilled_again_forgets_the_longer_context_before():
    """One lean decoder serving two contexts (decode.COMPILE_ONCE_ARMS): prefilled at ctx 40, then at ctx 24, its
    logits equal a fresh decoder's of the same cache length at ctx 24 exactly; the first prefill's keys past 24 are
    never read."""
    model = _build("llama-tiny")
    with torch.inference_mode():
        shared = lean.LeanStep(model, 40, 64, feedback=False)
        again = lean.LeanStep(model, 24, 64, feedback=False, lean=shared.lean)
        fresh = lean.LeanStep(model, 24, 64, feedback=False)
        assert again.lean is shared.lean
        for _ in range(3):
            assert torch.equal(again.step(), fresh.step())
    with pytest.raises(ValueError, match="cannot serve cache length 80"):
        lean.LeanStep(model, 24, 80, lean=shared.lean)


def test_compile_once_arms_compile_one_decoder_per_model_and_cache_length(monkeypatch):
    """decode.step_state keeps the compiled decoder of a COMPILE_ONCE arm: a second context on the same model and
    cache length prefills it again instead of compiling (compiles counted through a stand-in for torch.compile);
    another model, or release_compiled, compiles afresh. The cache length is the longest cell's."""
    from decodegap.kernels import step as kernels

    assert decode.COMPILE_ONCE_ARMS == ("lean_attn_compile",)
    assert decode.shared_cache_lens([("lean_attn_compile", 2048), ("lean_attn_compile", 16384), ("graph", 16384),
                                     ("lean_compile", 8192)], warmup=5, steps=30) == {"lean_attn_compile": 16384 + 35}
    compiles = []
    monkeypatch.setattr(decode, "compiled", lambda fn, layers=(), **kw: compiles.append(fn) or fn)
    monkeypatch.setattr(kernels, "prepare", lambda names: None)
    a, b = _build("llama-tiny"), _build("qwen2-tiny")
    decode.release_compiled()
    with torch.inference_mode():
        first = decode.step_state(a, "lean_attn_compile", 40, 64)
        second = decode.step_state(a, "lean_attn_compile", 24, 64)
        assert len(compiles) == 1 and second.lean is first.lean and second.forward is first.forward
        decode.step_state(a, "lean_attn_compile", 24, 48)  # another cache length
        decode.step_state(b, "lean_attn_compile", 24, 64)  # another model
        decode.step_state(a, "lean_compile", 24, 64)  # attends over its whole cache: compiled per cell
        decode.step_state(a, "lean_compile", 24, 64)
        assert len(compiles) == 5
        decode.release_compiled()
        decode.step_state(a, "lean_attn_compile", 24, 64)
        assert len(compiles) == 6
    decode.release_compiled()


@pytest.mark.gpu
def test_lean_attn_compile_compiles_once_for_two_contexts_and_stays_correct():
    """Two contexts of lean_attn_compile sharing one cache length (as a sweep runs them): dynamo compiles the step
    once, and each context passes its check against HF eager."""
    from torch._dynamo.utils import counters

    spec = models.load_spec("llama-3.1-8b")
    model = models.build_model(models.ModelSpec(spec.key, spec.name, None, "2 layers", True,
                                                dict(spec.config, num_hidden_layers=2)), device="cuda")
    torch._dynamo.reset()
    decode.release_compiled()
    cache_len = decode.shared_cache_lens([("lean_attn_compile", 300), ("lean_attn_compile", 700)], 5, 30)["lean_attn_compile"]
    decode.run_arm(model, "lean_attn_compile", 700, cache_len=cache_len)
    graphs = counters["stats"]["unique_graphs"]
    assert graphs >= 1
    for ctx in (700, 300):
        assert checks.verify_arm(model, "lean_attn_compile", ctx, cache_len=cache_len) < 0.1
        decode.run_arm(model, "lean_attn_compile", ctx, cache_len=cache_len)
    assert counters["stats"]["unique_graphs"] == graphs  # the second context and both checks compiled nothing
    decode.release_compiled()
    torch._dynamo.reset()
