"""The fused decode-step kernels (decodegap.kernels.fused.launch): their PyTorch references against the unfused lean step's own
ops, exactly (always, no Triton); the lean decoder's fused step through the references against its unfused step
on tiny Llama and Qwen2 models; the Triton kernels against the references in Triton's interpreter where Triton is
installed; and on the GPU (gpu marker) the kernels on the real shapes and the two fused arms against HF eager."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from decodegap import accounting, arms, compare, paths
from decodegap.harness import checks, decode, lean, models, profile
from decodegap.kernels.fused import configs as fused_configs, launch as fused, reference as fused_reference
from decodegap.kernels.fused import source as fused_kernels
from decodegap.kernels.fused.signature import GEMV_ARG_TYPES, GEMV_OFF
from decodegap.kernels import l2_prefetch, step as kernels
from decodegap.quant import paths as quant

CTX = 24


def _rand(*shape, std=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (std * torch.randn(*shape, generator=gen)).bfloat16()


def _tiny(key, dtype="bf16"):
    model = models.build_model(models.load_spec(key), device="cpu", dtype=dtype)
    models.randomise_(model, seed=1, std=0.2)
    return model


def _distinct_norms_(model, seed: int = 3):
    """Each norm weight of `model` drawn around 1 (models.randomise_ fills them with 1), a different draw for each
    layer and norm."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name and param.ndim == 1:
                param.copy_(1 + 0.5 * torch.randn(param.shape, generator=gen))


# ------------------------------------------------------------------ references = the unfused lean ops, exactly

@pytest.mark.parametrize("shape", [(64,), (1, 1, 96)])
def test_rmsnorm_reference_is_the_lean_rms_norm_bit_for_bit(shape):
    x, w = _rand(*shape, std=3.0, seed=1), _rand(shape[-1], seed=2)
    assert torch.equal(fused_reference.rmsnorm_reference(x, w, 1e-5), lean._rms_norm(x, w, 1e-5))
    assert not torch.equal(fused_reference.rmsnorm_reference(x, w, 1e-5), lean._rms_norm(x, w, 1e-1))  # it can fail


def test_gemv_references_are_the_lean_projections_bit_for_bit():
    x, res, nw = _rand(1, 1, 64, seed=1), _rand(1, 1, 48, seed=2), _rand(64, seed=3)
    w, b, wgu, wd = _rand(48, 64, std=0.1, seed=4), _rand(48, seed=5), _rand(80, 64, std=0.1, seed=6), _rand(48, 40, seed=7)
    h = lean._rms_norm(x, nw, 1e-6)
    assert torch.equal(fused_reference.rmsnorm_gemv_reference(x, nw, w, b, 1e-6), F.linear(h, w, b))
    assert torch.equal(fused_reference.gemv_residual_reference(x, w, res), res + F.linear(x, w))
    gate, up = F.linear(h, wgu).chunk(2, dim=-1)
    act = fused_reference.gate_up_silu_reference(x, nw, wgu, 1e-6)
    assert torch.equal(act, F.silu(gate) * up)
    assert torch.equal(fused_reference.gemv_residual_reference(act, wd, res), res + F.linear(F.silu(gate) * up, wd))
    gate_up = fused_reference.rmsnorm_gemv_reference(x, nw, wgu, None, 1e-6)  # the SiLU in the down product's prologue
    assert torch.equal(fused_reference.silu_gemv_residual_reference(gate_up, wd, res), res + F.linear(F.silu(gate) * up, wd))


def test_rotary_reference_is_the_lean_rotary_bit_for_bit():
    q, cos, sin = _rand(1, 4, 1, 16, std=2.0, seed=1), _rand(1, 1, 1, 16, seed=2), _rand(1, 1, 1, 16, seed=3)
    assert torch.equal(fused_reference.rotary_reference(q, cos, sin), q * cos + lean._rotate_half(q) * sin)


def test_rotary_cache_reference_writes_the_cache_slot_and_nothing_else():
    H, Hkv, D, L = 4, 2, 16, 10
    qkv, cos, sin = _rand((H + 2 * Hkv) * D, seed=1), _rand(L, D, seed=2), _rand(L, D, seed=3)
    k_cache, v_cache = torch.zeros(1, Hkv, L, D, dtype=torch.bfloat16), torch.zeros(1, Hkv, L, D, dtype=torch.bfloat16)
    pos = torch.tensor([3])
    q = fused_reference.rotary_cache_reference(qkv, cos, sin, pos, k_cache, v_cache, H, Hkv)
    qh, kh, vh = qkv.view(1, 1, -1, D).transpose(1, 2).split([H, Hkv, Hkv], dim=1)  # as LeanLayer.forward views them
    c, s = cos[pos][None, None], sin[pos][None, None]
    assert torch.equal(q, (qh * c + lean._rotate_half(qh) * s)[0, :, 0])
    assert torch.equal(k_cache[:, :, 3:4], kh * c + lean._rotate_half(kh) * s)
    assert torch.equal(v_cache[:, :, 3:4], vh)
    assert k_cache[:, :, [0, 1, 2, 4]].abs().sum() == 0 and v_cache[:, :, 4:].abs().sum() == 0


# ---------------------------------------------------------------- the fused step through the references, CPU

def _fused_vs_lean(model, ops=fused.FusedOps(reference=True), steps=4):
    """Teacher-forced: the unfused lean step against the fused step run by `ops`; the largest relative error of
    the logits over the steps, and of layer 1's K cache after them."""
    with torch.inference_mode():
        ref = lean.LeanStep(model, CTX, CTX + steps, feedback=False)
        got = lean.LeanStep(model, CTX, CTX + steps, feedback=False, custom_kernels=("fused", "attention"))
        got.lean.fused = ops
        errors = [compare.max_relative_error(got.step().float(), ref.step().float()) for _ in range(steps)]
    return max(errors), compare.max_relative_error(got.lean.k_cache_1.float(), ref.lean.k_cache_1.float())


@pytest.mark.parametrize("key", ["llama-tiny", "qwen2-tiny"])
def test_the_fused_reference_step_equals_the_lean_step(key):
    logits_err, cache_err = _fused_vs_lean(_tiny(key))
    assert logits_err < 0.05 and cache_err < 0.05  # bf16 tolerance (tests/test_lean.py's)


def test_a_fused_step_that_drops_a_residual_fails_the_comparison():
    class NoResidual(fused.FusedOps):
        def gemv_residual(self, x, weight, residual):
            return F.linear(x, weight)

    assert _fused_vs_lean(_tiny("llama-tiny"), NoResidual(reference=True))[0] > 0.05


def test_the_fused_step_runs_for_decode_steps_only():
    """The prefill (T > 1) keeps the unfused path; a decode step goes through the decoder's FusedOps."""
    model = _tiny("qwen2-tiny")
    calls = []

    class Counting(fused.FusedOps):
        def rotary_cache(self, *args):
            calls.append(1)
            return super().rotary_cache(*args)

    with torch.inference_mode():
        state = lean.LeanStep(model, 8, 12, custom_kernels=("fused", "attention"))
        state.lean.fused = Counting(reference=True)
        assert calls == []
        state.step()
    assert len(calls) == model.config.num_hidden_layers


def test_the_fused_kernel_names_and_their_rules():
    assert lean.kernel_set(True) == {"gemv", "attention"}  # True keeps naming the unfused kernels
    assert lean.kernel_set(("fused", "attention", "pdl")) == {"fused", "attention", "pdl"}
    with pytest.raises(ValueError, match="'fused' takes 'attention' and not 'gemv'"):
        lean.kernel_set(("fused",))
    with pytest.raises(ValueError, match="'fused' takes 'attention' and not 'gemv'"):
        lean.kernel_set(("fused", "attention", "gemv"))
    with pytest.raises(ValueError, match="'pdl' launches the fused kernels"):
        lean.kernel_set(("gemv", "attention", "pdl"))
    with pytest.raises(ValueError, match="'silu_epilogue' is a fused step's option"):
        lean.kernel_set(("attention", "silu_epilogue"))
    with pytest.raises(ValueError, match="'merged_attention' is the split-KV attention's one-kernel form"):
        lean.kernel_set(("gemv", "merged_attention"))
    assert lean.kernel_set(("attention", "merged_attention")) == {"attention", "merged_attention"}
    with pytest.raises(ValueError, match="'kv_together' is how the split-KV attention loads its blocks"):
        lean.kernel_set(("gemv", "kv_together"))
    with pytest.raises(ValueError, match="'rotary_attention' is a fused step's option"):
        lean.kernel_set(("attention", "rotary_attention"))
    with pytest.raises(ValueError, match="the rotary is made once: .*, not both; got .'attention', 'fused'"):
        lean.kernel_set(("fused", "attention", "rotary_epilogue", "rotary_attention"))
    for option in ("attention_prefetch", "l2_prefetch"):  # the fused step's options, refused without it
        with pytest.raises(ValueError, match=f"'{option}' is a fused step's option: it needs 'fused'"):
            lean.kernel_set(("attention", option))
    with pytest.raises(ValueError, match="the rotary is made once"):
        fused.FusedOps(rotary_in_qkv=True, rotary_in_attention=True)
    with pytest.raises(ValueError, match="attention_prefetch .kernel 'attention_prefetch'. reads the cache before "
                       "qkv's newest key is made: it needs rotary_in_attention .kernel 'rotary_attention'.; got"):
        lean.kernel_set(("fused", "attention", "pdl", "attention_prefetch"))
    with pytest.raises(ValueError, match="it needs rotary_in_attention .kernel 'rotary_attention'."):
        fused.FusedOps(attention_prefetch=True)
    with pytest.raises(ValueError, match="needs `rotary`"):  # the qkv row is not rotated without the tables
        fused.FusedOps(rotary_in_attention=True).attention(None, None, None, None, 1.0)
    decoder = lean.LeanDecoder(_tiny("llama-tiny"), 8, ("fused", "attention", "pdl"))
    assert decoder.fused == fused.FusedOps(pdl=True) and lean.LeanDecoder(_tiny("llama-tiny"), 8).fused is None


@pytest.mark.parametrize("options, early", [
    (dict(), [False] * 6),
    (dict(early_trigger=True), [True] * 6),
    (dict(early_products=True), [False, False, False, True, True, True]),  # qkv, rotary, attention late; o, gate_up, down
    (dict(early_products=True, merged_attention=True), [False, False, False, True, True, True]),
    (dict(early_products=True, silu_in_down=False), [False, False, False, True, True, True]),
    (dict(early_products=True, rotary_in_attention=True), [False, False, True, True, True]),  # no rotary kernel
    (dict(early_products=True, rotary_in_attention=True, attention_prefetch=True), [True, False, True, True, True]),
])
def test_each_kernel_of_a_layer_triggers_where_its_option_says(monkeypatch, options, early):
    """The launch each kernel of one fused layer (norm in o's epilogue, PDL) gets, in launch order: qkv, rotary_cache,
    the attention, o, gate_up, down; recorded by stand-ins for the launchers, so no kernel runs."""
    launched, flavours = [], []

    def gemv(x, weight, **kw):
        launched.append(kw["early_trigger"])
        flavours.append((bool(kw.get("gate_up")), bool(kw.get("silu_x")), x.numel()))
        y = torch.zeros(weight.shape[0] // 2 if kw.get("gate_up") else weight.shape[0], dtype=x.dtype)
        return (y, y.clone()) if kw.get("out_norm") is not None else y

    def rotary(qkv, cos, sin, pos, k_cache, v_cache, n_heads, n_kv_heads, pdl, early_trigger):
        launched.append(early_trigger)
        return torch.zeros(n_heads, k_cache.shape[-1], dtype=qkv.dtype)

    def attention(q, k_cache, v_cache, length, scale, pdl, early_trigger, merged=False, rotary=None,
                  prefetch=False):
        launched.append(early_trigger)
        merges.append(merged)
        rotaries.append((rotary is not None, prefetch))
        return torch.zeros(k_cache.shape[0] * 4, k_cache.shape[-1], dtype=q.dtype) if rotary else torch.zeros_like(q)

    merges, rotaries = [], []

    monkeypatch.setattr(fused, "fused_gemv", gemv)
    monkeypatch.setattr(fused, "rotary_cache", rotary)
    monkeypatch.setattr(fused, "decode_attention", attention)
    dec = lean.LeanDecoder(_tiny("llama-tiny"), 16)
    ops = fused.FusedOps(pdl=True, norm_in_epilogue=True, **options)
    start = torch.tensor([3])
    dec.layers[0].fused_step(torch.zeros(dec.layers[0].w_o.shape[0], dtype=torch.bfloat16), ops, dec.cos, dec.sin,
                             start, start + 1, dec.k_cache_0, dec.v_cache_0)
    assert launched == early
    assert merges == [options.get("merged_attention", False)]  # the attention in one kernel where asked
    assert rotaries == [(options.get("rotary_in_attention", False), options.get("attention_prefetch", False))]
    # the MLP: gate_up on the hidden row, then down; the SiLU in gate_up's epilogue (down's x the intermediate
    # row) or in down's prologue (down's x [gate; up], twice the intermediate)
    hidden, inter = dec.layers[0].w_o.shape[0], dec.layers[0].w_down.shape[1]
    silu_epilogue = not options.get("silu_in_down", True)
    assert flavours[-2:] == [(silu_epilogue, False, hidden), (False, not silu_epilogue,
                                                              inter if silu_epilogue else 2 * inter)]


def _reference_launchers(monkeypatch, silu: bool = True):
    """fused_gemv, rotary_cache and decode_attention replaced by their PyTorch references (the flags read as the kernel
    reads them), so that FusedOps' own wiring runs on a CPU; `silu` False: a gate_up epilogue that forgets SiLU."""
    def gemv(x, weight, *, norm_weight=None, eps=0.0, bias=None, residual=None, gate_up=False, silu_x=False,
             out_norm=None, rotary=None, **_launch):
        if rotary is not None:
            if norm_weight is None:  # after the norm in the previous down's epilogue
                return fused_reference.gemv_rotary_reference(x, weight, bias, rotary)
            return fused_reference.rmsnorm_gemv_rotary_reference(x, norm_weight, weight, bias, eps, rotary)
        if silu_x:
            x = fused_reference.silu_mul_reference(x)
        elif norm_weight is not None:
            x = fused_reference.rmsnorm_reference(x, norm_weight, eps)
        y = fused_reference._linear(x, weight, bias)
        if gate_up:
            y = fused_reference.silu_mul_reference(y) if silu else y.chunk(2)[0] * y.chunk(2)[1]
        if residual is not None:
            y = (y.float() + residual.float()).to(residual.dtype)
        return fused_reference.with_output_norm(y, out_norm)

    monkeypatch.setattr(fused, "fused_gemv", gemv)
    monkeypatch.setattr(fused, "rotary_cache", lambda *args, pdl, early_trigger: fused_reference.rotary_cache_reference(
        *args))
    def attention(q, k, v, length, scale, rotary=None, **_launch):
        if rotary is not None:  # q is the qkv row: rotated, and k and v written, as the split kernel does
            cos, sin, n_heads = rotary
            q = fused_reference.rotary_cache_reference(q, cos, sin, length - 1, k[None], v[None], n_heads, k.shape[0])
        return kernels.decode_attention_reference(q, k, v, int(length), scale)

    monkeypatch.setattr(fused, "decode_attention", attention)


def _fused_steps_agree(monkeypatch, model, ops):
    """With each launcher its reference (_reference_launchers), three steps of `model`'s fused step through `ops` give
    the reference step's logits within bf16 rounding and the unfused lean step's; returns the maker of fused steps
    (FusedOps -> a LeanStep), for the test's broken launchers."""
    def steps(fused_ops):
        step = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention"))
        step.lean.fused = fused_ops
        return step

    _reference_launchers(monkeypatch)
    plain = lean.LeanStep(model, 12, 16, feedback=False)
    ref, got = steps(fused.FusedOps(reference=True)), steps(ops)
    for _ in range(3):
        a, b, c = plain.step().float(), ref.step().float(), got.step().float()
        assert compare.max_relative_error(c, b) < 0.02 and compare.max_relative_error(c, a) < 0.05, ops
    return steps


@pytest.mark.parametrize("key", ["llama-tiny", "qwen2-tiny"])
@pytest.mark.parametrize("arm", ["lean_fused_silu_epilogue_graph", "lean_fused_all_epilogues_graph",
                                 "lean_fused_epilogue_norms_graph"])
def test_the_silu_epilogue_step_gives_the_lean_steps_logits(monkeypatch, key, arm):
    """The SiLU-epilogue levers' steps (norm in o's epilogue, gate_up with no prologue and SiLU(gate) * up as its
    epilogue, down with the residual alone; the all-epilogues lever also the rotary in qkv's epilogue and the final
    norm in the last down's, the head then plain; the epilogue-norms lever also each layer's input norm in the
    previous down's, qkv then plain) through FusedOps' launch path, each launcher its reference: the reference
    step's logits within bf16 rounding, and the unfused lean step's; a gate_up epilogue without SiLU fails both."""
    model = _tiny(key)
    _distinct_norms_(model)  # so that a norm made with another layer's weight is caught
    ops = fused.FusedOps.of_kernels(arms.REGISTRY[arm].kernels)
    assert not ops.silu_in_down and ops.norm_in_epilogue
    assert ops.rotary_in_qkv == ops.head_norm_in_epilogue == (arm != "lean_fused_silu_epilogue_graph")
    assert ops.input_norm_in_epilogue == (arm == "lean_fused_epilogue_norms_graph")
    with torch.inference_mode():
        steps = _fused_steps_agree(monkeypatch, model, ops)
        _reference_launchers(monkeypatch, silu=False)
        broken = steps(ops)
        assert compare.max_relative_error(broken.step().float(), steps(fused.FusedOps(reference=True)).step().float()) > 0.2


@pytest.mark.parametrize("key", ["llama-tiny", "qwen2-tiny"])
@pytest.mark.parametrize("arm", ["lean_fused_rotary_attention_graph", "lean_fused_all_rotary_attention_graph",
                                 "lean_fused_rotary_prefetch_graph"])
def test_the_rotary_in_the_attention_step_gives_the_lean_steps_logits(monkeypatch, key, arm):
    """The rotary-in-attention levers' steps (qkv a plain product, the attention taking its row, rotating q and the
    newest key and writing the newest key and value into the caches) through FusedOps' launch path, each launcher its
    reference: the reference step's logits within bf16 rounding, and the unfused lean step's; an attention that
    rotates q but never writes the newest key and value fails."""
    model = _tiny(key)
    _distinct_norms_(model)
    ops = fused.FusedOps.of_kernels(arms.REGISTRY[arm].kernels)
    assert ops.rotary_in_attention and not ops.rotary_in_qkv and ops.kv_together
    ops = dataclasses.replace(ops, norm_scale=False)  # the stand-in products make norms whole (test_norm_scale's own)
    with torch.inference_mode():
        steps = _fused_steps_agree(monkeypatch, model, ops)

        def unwritten(q, k, v, length, scale, rotary, **_launch):  # rotates into copies of the caches
            cos, sin, n_heads = rotary
            q = fused_reference.rotary_cache_reference(q, cos, sin, length - 1, k[None].clone(), v[None].clone(),
                                                       n_heads, k.shape[0])
            return kernels.decode_attention_reference(q, k, v, int(length), scale)

        monkeypatch.setattr(fused, "decode_attention", unwritten)
        broken, ref = steps(ops), steps(fused.FusedOps(reference=True))
        errors = [compare.max_relative_error(broken.step().float(), ref.step().float()) for _ in range(3)]
        assert max(errors) > 0.05, errors


def test_the_l2_prefetch_step_asks_every_bf16_product_for_it(monkeypatch):
    """The L2-prefetch lever's step through FusedOps' launch path, each launcher its reference: the reference step's
    logits (the prefetch changes no value), and every product a step launches (a layer's four and the LM head)
    launched with l2_prefetch, none without the option, an int4 layer's product too; the option is refused without
    PDL (kernel_set, FusedOps)."""
    model = _tiny("llama-tiny")
    _distinct_norms_(model)
    ops = fused.FusedOps.of_kernels(arms.REGISTRY["lean_fused_l2_prefetch_graph"].kernels)
    assert ops.l2_prefetch and ops.pdl and ops.kv_together and not ops.rotary_in_attention
    ops = dataclasses.replace(ops, norm_scale=False)  # the stand-in products make norms whole (test_norm_scale's own)
    products = 4 * model.config.num_hidden_layers + 1
    with torch.inference_mode():
        steps = _fused_steps_agree(monkeypatch, model, ops)
        reference_gemv, asked = fused.fused_gemv, []

        def recording(x, weight, **options):
            asked.append(options.get("l2_prefetch", False))
            return reference_gemv(x, weight, **options)

        monkeypatch.setattr(fused, "fused_gemv", recording)
        for with_option in (True, False):
            step = steps(dataclasses.replace(ops, l2_prefetch=with_option))
            asked.clear()
            step.step()
            assert asked == [with_option] * products
    with pytest.raises(ValueError, match="l2_prefetch .* asks the L2 .* needs pdl .kernel 'pdl'.; got"):
        lean.kernel_set(("fused", "attention", "l2_prefetch"))
    with pytest.raises(ValueError, match="l2_prefetch .kernel 'l2_prefetch'. asks the L2 .* needs pdl"):
        fused.FusedOps(l2_prefetch=True)
    int4 = {}  # an int4-triton layer's product takes it too (the int4 kernel's own tests run it)
    monkeypatch.setattr(fused, "fused_int4_gemv", lambda x, layer, **options: int4.update(options))
    fused.product(torch.zeros(8, dtype=torch.bfloat16), object(), pdl=True, l2_prefetch=True)
    assert int4 == dict(pdl=True, l2_prefetch=True)


def test_the_l2_prefetch_takes_whole_lines_within_its_budget():
    """kernels.l2_prefetch's rule by hand: 8 MiB over the product's rows and shares, in 128-byte lines (64 bf16
    columns, 256 int4 columns), at most the share."""
    assert l2_prefetch.L2_PREFETCH_BYTES == 8 * 1024 * 1024
    cols = l2_prefetch.l2_prefetch_cols
    assert cols(6144, 4096) == 640  # Llama-3.1-8B's qkv: 8388608 / (6144 x 2 x 64) = 10.7 lines
    assert cols(4096, 4096) == 1024  # o: 16 lines
    assert cols(28672, 4096) == 128  # gate_up, gate's and up's rows: 2.3 lines
    assert cols(4096, 14336) == 1024  # down
    assert cols(128256, 4096) == 0  # the LM head: not one line a row
    assert cols(3072, 2048) == 1344  # Llama-3.2-1B's qkv: 21.3 lines
    assert cols(64, 256) == 256  # the share caps it
    assert cols(4096, 2048, splits=4) == 256  # 8388608 / (4096 x 4 x 2 x 64) = 4 lines
    with pytest.raises(ValueError, match="positive rows"):
        cols(0, 4096)
    row_bytes = l2_prefetch.l2_prefetch_row_bytes  # the int4 kernel's: packed rows of K / 2 bytes
    assert row_bytes(6144, 2048) == 1280  # Llama-3.1-8B's int4 qkv: 10 lines of its 16
    assert row_bytes(28672, 2048) == 256  # gate_up: 2 lines
    assert row_bytes(128256, 2048) == 0  # the int4 LM head
    assert row_bytes(64, 512) == 512  # the share caps it


def test_each_fused_arm_builds_the_fused_step_its_kernels_name():
    """Every arm of the registry whose kernels include "fused": the lean decoder it builds runs the fused step with
    the options its kernels name (PDL, the norm and the rotary in the epilogues, the early triggers, the norms as
    scales), it is refused on a CPU as a graph (the fused step runs captured) and its products are the lean decoder's
    four."""
    model = _tiny("llama-tiny")
    fused_arms = {key: arm for key, arm in arms.REGISTRY.items() if "fused" in arm.kernels}
    assert fused_arms  # the registry has fused arms for this test to read
    for key, arm in fused_arms.items():
        ops = lean.LeanDecoder(model, 8, arm.kernels).fused
        chosen = set(arm.kernels)
        assert (ops.pdl, ops.norm_in_epilogue, ops.rotary_in_qkv, ops.early_trigger, ops.early_products,
                ops.merged_attention, ops.silu_in_down, ops.head_norm_in_epilogue, ops.input_norm_in_epilogue,
                ops.norm_scale, ops.kv_together, ops.rotary_in_attention, ops.attention_prefetch, ops.l2_prefetch) == (
            "pdl" in chosen, "norm_epilogue" in chosen, "rotary_epilogue" in chosen, "early_trigger" in chosen,
            "early_products" in chosen, "merged_attention" in chosen, "silu_epilogue" not in chosen,
            "head_norm_epilogue" in chosen, "input_norm_epilogue" in chosen, "norm_scale" in chosen,
            "kv_together" in chosen, "rotary_attention" in chosen, "attention_prefetch" in chosen,
            "l2_prefetch" in chosen), key
        assert decode.arm_available(key, model) == "CUDA graphs need a CUDA device", key
        assert arms.projection_layout(key) == "fused" and len(accounting.PROJECTIONS["fused"]) == 4
    assert lean.LeanDecoder(model, 8, ("attention",)).fused is None  # no fused step without "fused"


def test_a_non_bf16_model_is_refused_with_the_reason():
    model = _tiny("llama-tiny", dtype="fp32")
    assert fused.weights_unsupported(model) == "the fused kernels run bf16 models; this one is torch.float32"
    with pytest.raises(lean.LeanUnsupported, match="bf16 models"):
        lean.LeanDecoder(model, 8, ("fused", "attention"))
    assert fused.weights_unsupported(_tiny("llama-tiny")) is None


def test_a_model_with_quantisation_layers_is_refused_with_the_reason():
    """A quant_layers.QuantLinear (here the bf16 path's layer, which builds on any device; the GPU test refuses a
    tinygemm model) is not the nn.Linear whose bf16 weight the fused kernels read."""
    model = _tiny("qwen2-tiny")
    down = model.model.layers[1].mlp.down_proj
    model.model.layers[1].mlp.down_proj = quant.build_linear("bf16", down.in_features, down.out_features, device="cpu")
    reason = "the fused kernels read bf16 nn.Linear weights or int4-triton layers; layer 1 has BF16Linear"
    assert fused.weights_unsupported(model) == reason
    with pytest.raises(lean.LeanUnsupported, match=reason):
        lean.LeanDecoder(model, 8, ("fused", "attention"))


def test_pdl_is_unavailable_off_a_hopper_gpu_with_the_reason(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    reason = fused.pdl_unavailable("cpu")
    assert reason in ("package triton not installed", "Triton kernels need a CUDA device (or TRITON_INTERPRET=1)")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    if fused.available("cpu") is None:  # Triton installed: the interpreter runs the kernels but not the gdc ops
        assert "interpreter does not run the gdc ops" in fused.pdl_unavailable("cpu")


def test_gemv_configs_by_shape():
    """The table's config for a real shape; the rule elsewhere: BLOCK_K the largest power of two up to K (at most
    1024) on BLOCK_K / 256 warps, split along K while a product has few row blocks for its K; candidates start with
    the chosen config, split only products with few row blocks, never gate_up."""
    assert fused_configs.gemv_config(4096, 14336) == fused_configs.GEMV_CONFIGS[(4096, 14336)]
    assert fused_configs.gemv_config(5000, 300) == fused_configs.GemvConfig(8, 256, warps=1)
    assert fused_configs.gemv_config(1024, 8192) == fused_configs.GemvConfig(8, 1024, split_k=2)  # 128 row blocks
    assert fused_configs.gemv_config(1024, 16384) == fused_configs.GemvConfig(8, 1024, split_k=4)  # at most 4
    assert fused_configs.gemv_config(1024, 4096).split_k == 1  # too few BLOCK_K steps to split
    for (N, K), config in fused_configs.GEMV_CONFIGS.items():
        assert fused_configs.candidate_configs(N, K)[0] == config
    assert all(c.split_k == 1 for c in fused_configs.candidate_configs(28672, 4096, gate_up=True))
    assert any(c.split_k > 1 for c in fused_configs.candidate_configs(4096, 14336))
    assert all(c.split_k == 1 for c in fused_configs.candidate_configs(128256, 4096))
    assert fused_configs.GemvConfig(16, 512, split_k=2).key == "n16_k512_s2_w4_p1"


def test_the_config_table_is_the_fastest_config_measured():
    """Each table entry against data/diagnostics/fused_gemv.csv (graph mode, with PDL, the H200) for the product
    the fused step launches with it: the table's config is the fastest candidate timed, or within 2 % of it (the
    spread of one config timed twice); a product with neither prologue nor epilogue (gate_up_plain) against
    gemv_config(plain=True), qkv with the rotary epilogue (qkv_rotary) against gemv_config(rotary=True), the
    norm-scale levers' products (configs.SCALE_FLAVOURS) against gemv_config's entry for their weight. Products with no
    rows yet are skipped, and at least qkv, o and the LM head of both
    models have rows."""
    import pandas as pd

    rows = pd.read_csv(paths.DATA / "diagnostics" / "fused_gemv.csv")
    rows = rows[(rows.status == "ok") & (rows["mode"] == "graph") & (rows.kernel == "fused") & (rows.pdl == 1)
                & (rows.gpu == "NVIDIA H200")]  # the table is the H200's: another GPU's rows are its own diagnostics
    median = rows.groupby(["shape", "config"]).us.median()
    checked, held = [], []
    # Mistral: its LM head, once the diagnostic has timed it; Llama-3.2-1B: the megakernel cell's products
    for key in REAL + ("mistral-7b-v0.3", "llama-3.2-1b"):
        step = _products(key, step_only=True) + [p for p in _products(key)
                                                 if p[0] in ("o_norm", "gate_up_plain", "qkv_rotary")
                                                 or p[3] in fused_configs.SCALE_FLAVOURS]
        for name, K, N, flavour in step:
            shape = f"{key} {name}"
            if shape not in median.index.get_level_values("shape"):
                continue
            how = fused_configs.flavour_lookup(flavour)
            if key == "llama-3.2-1b" and fused_configs.table_entry(N, K, **how) is None:
                continue  # the megakernel cell's widths hold entries only where the rule's config lost by over 2 %
            by_config = median[shape]
            table = fused_configs.gemv_config(N, K, **how).key
            assert table in by_config and by_config[table] <= 1.02 * by_config.min(), (shape, table, by_config.idxmin())
            checked.append(name)
            held.append(shape)
    assert {"qkv", "o", "lm_head"} <= set(checked) and len(checked) >= 6, checked
    # the megakernel cell's LM head and gate_up_plain, whose rule configs ran 21 % and 2.9 % slower, are held too
    assert {"llama-3.2-1b lm_head", "llama-3.2-1b gate_up_plain"} <= set(held), held


def test_fused_gemv_names_what_it_cannot_take():
    """Checked before Triton is imported, so the message is the same on any machine."""
    x, w = _rand(64), _rand(32, 64)
    with pytest.raises(ValueError, match="one row: x has 32 elements, weight has K = 64"):
        fused.fused_gemv(x[:32], w)
    with pytest.raises(ValueError, match="bf16 x and weight, got torch.float32"):
        fused.fused_gemv(x.float(), w)
    with pytest.raises(ValueError, match="even number of weight rows"):
        fused.fused_gemv(x, w[:31], gate_up=True)
    with pytest.raises(ValueError, match=r"silu_x takes \[gate; up\], 2K"):
        fused.fused_gemv(x, w, silu_x=True, residual=w[:, 0])
    with pytest.raises(ValueError, match="two prologues"):
        fused.fused_gemv(torch.cat([x, x]), w, silu_x=True, norm_weight=x)
    with pytest.raises(ValueError, match="not implemented for gate_up"):
        fused.fused_gemv(x, w, gate_up=True, config=fused_configs.GemvConfig(8, 16, split_k=2))


# --------------------------------------------------------------------- Triton's interpreter, on the CPU

INTERPRETED_CHECKS = """
import torch
from decodegap.harness import checks, decode, lean, models
from decodegap import compare
from decodegap.kernels.fused import configs as fused_configs, launch as fused, reference as fused_reference
from decodegap.kernels import step as kernels

def rand(*shape, std=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (std * torch.randn(*shape, generator=gen)).bfloat16()

def close(got, ref, what):  # the products' sums differ from F.linear's in order only
    err = ((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
    assert got.shape == ref.shape and err < 1e-2, (what, got.shape, ref.shape, err)

C = fused_configs.GemvConfig
configs = [C(8, 32), C(16, 16, split_k=3), C(4, 64, split_k=2), C(32, 128), C(8, 16, split_k=4)]
for K, N in [(100, 37), (64, 48), (257, 9)]:  # odd N and K: tails of both
    x, res, nw = rand(K, std=2.0, seed=1), rand(N, seed=2), rand(K, seed=3)
    w, b, wgu = rand(N, K, std=0.1, seed=4), rand(N, seed=5), rand(2 * N, K, std=0.1, seed=6)
    for cfg in configs:
        close(fused.fused_gemv(x, w, norm_weight=nw, eps=1e-5, config=cfg), fused_reference.rmsnorm_gemv_reference(x, nw, w, None, 1e-5), ("norm", K, N, cfg))
        close(fused.fused_gemv(x, w, norm_weight=nw, eps=1e-5, bias=b, config=cfg), fused_reference.rmsnorm_gemv_reference(x, nw, w, b, 1e-5), ("bias", K, N, cfg))
        close(fused.fused_gemv(x, w, residual=res, config=cfg), fused_reference.gemv_residual_reference(x, w, res), ("residual", K, N, cfg))
        if cfg.split_k == 1:
            close(fused.fused_gemv(x, wgu, norm_weight=nw, eps=1e-5, gate_up=True, config=cfg), fused_reference.gate_up_silu_reference(x, nw, wgu, 1e-5), ("gate_up", K, N, cfg))
        if cfg.split_k == 1:  # the norm of the output, made by the row block that arrives last
            rn = rand(N, seed=11)
            got, ref = fused.fused_gemv(x, w, residual=res, out_norm=(rn, 1e-5), config=cfg), fused_reference.gemv_residual_norm_reference(x, w, res, rn, 1e-5)
            close(got[0], ref[0], ("out_norm y", K, N, cfg))
            close(got[1], ref[1], ("out_norm h", K, N, cfg))
        gu = rand(2 * K, std=2.0, seed=10)  # [gate; up]: the down product's SiLU prologue
        close(fused.fused_gemv(gu, w, silu_x=True, residual=res, config=cfg), fused_reference.silu_gemv_residual_reference(gu, w, res), ("silu_x", K, N, cfg))
        assert fused.workspace("cpu")[1].abs().sum() == 0, ("split-K counters left set", cfg)  # ready for the next product
# split-K sums its partials in split order: the same result every call, and the rounding of an unsplit one here
x, w, res = rand(1000, seed=7), rand(24, 1000, std=0.1, seed=8), rand(24, seed=9)
one = fused.fused_gemv(x, w, residual=res, config=C(8, 32))
for split in (2, 3, 5):
    a, b = (fused.fused_gemv(x, w, residual=res, config=C(8, 32, split_k=split)) for _ in range(2))
    assert torch.equal(a, b) and (a.float() - one.float()).abs().max() <= 2 ** -6 * one.float().abs().max(), split

# rotary + cache write: exact (no sums); GQA shapes, a head_dim of 16 and of 128
for H, Hkv, D, L, p in [(4, 2, 16, 10, 3), (7, 1, 32, 5, 4), (28, 4, 128, 6, 0)]:
    qkv, cos, sin = rand((H + 2 * Hkv) * D, std=2.0, seed=1), rand(L, D, seed=2), rand(L, D, seed=3)
    caches = [torch.full((1, Hkv, L, D), 7.0, dtype=torch.bfloat16) for _ in range(4)]
    pos = torch.tensor([p])
    got = fused.rotary_cache(qkv, cos, sin, pos, caches[0], caches[1], H, Hkv)
    ref = fused_reference.rotary_cache_reference(qkv, cos, sin, pos, caches[2], caches[3], H, Hkv)
    assert torch.equal(got, ref) and torch.equal(caches[0], caches[2]) and torch.equal(caches[1], caches[3]), (H, Hkv, D)

# the rotary and the cache write as the qkv product's epilogue: bit for bit the qkv product (same config) followed by
# rotary_cache, and within bf16 of the reference; with and without the bias, odd K, several row blocks a head
for H, Hkv, D, L, p, K in [(4, 2, 16, 10, 3, 45), (7, 1, 32, 5, 4, 70), (2, 1, 128, 6, 0, 33)]:
    N = (H + 2 * Hkv) * D
    x, w, nw, bias = rand(K, std=2.0, seed=1), rand(N, K, std=0.2, seed=2), rand(K, seed=3), rand(N, seed=4)
    cos, sin, pos = rand(L, D, seed=5), rand(L, D, seed=6), torch.tensor([p])
    for b in (None, bias):
        for cfg in (C(8, 32), C(16, 16)):
            caches = [torch.full((1, Hkv, L, D), 7.0, dtype=torch.bfloat16) for _ in range(6)]
            got = fused.fused_gemv(x, w, norm_weight=nw, eps=1e-5, bias=b, config=cfg,
                                   rotary=(cos, sin, pos, caches[0], caches[1], H, Hkv))
            qkv = fused.fused_gemv(x, w, norm_weight=nw, eps=1e-5, bias=b, config=cfg)
            same = fused.rotary_cache(qkv, cos, sin, pos, caches[2], caches[3], H, Hkv).reshape(-1)
            assert torch.equal(got, same) and torch.equal(caches[0], caches[2]) and torch.equal(caches[1], caches[3])
            ref = fused_reference.rmsnorm_gemv_rotary_reference(x, nw, w, b, 1e-5, (cos, sin, pos, caches[4], caches[5], H, Hkv))
            close(got, ref, ("rotary", H, Hkv, D, cfg))
            close(caches[0], caches[4], ("rotary k", H, Hkv, D, cfg))
            close(caches[1], caches[5], ("rotary v", H, Hkv, D, cfg))

# the rotary and the cache write in the attention's split kernel: the caches bit for bit rotary_cache's (their other
# positions untouched), the output rotary_cache then the attention's within rounding (the newest position added after
# the loop); its prefetch the same output bit for bit; the newest position in the first split, a middle one (not at a
# block's start) and the last, GQA and MHA, the default load order, V beside K and the one-kernel form
for H, Hkv, D, L, length, split in [(8, 2, 16, 100, 77, 32), (4, 1, 32, 64, 1, 32), (8, 2, 16, 100, 42, 16),
                                    (4, 4, 16, 50, 50, 16)]:
    qkv, cos, sin = rand((H + 2 * Hkv) * D, std=2.0, seed=1), rand(L, D, seed=2), rand(L, D, seed=3)
    for options in (dict(), dict(kv_together=True), dict(merged=True)):
        caches = [rand(1, Hkv, L, D, seed=4 + i % 2) for i in range(6)]  # the same old contents in the three pairs
        n = torch.tensor([length])
        q = fused.rotary_cache(qkv, cos, sin, n - 1, caches[0], caches[1], H, Hkv)
        want = kernels.decode_attention(q, caches[0][0], caches[1][0], n, 0.25, split=split, block=16, **options)
        got = kernels.decode_attention(qkv, caches[2][0], caches[3][0], n, 0.25, split=split, block=16,
                                       rotary=(cos, sin, H), **options)
        what = (H, Hkv, D, length, options)
        assert (got.float() - want.float()).abs().max() < 1e-2 * want.float().abs().max(), what
        assert torch.equal(caches[2], caches[0]) and torch.equal(caches[3], caches[1]), what
        assert not torch.equal(caches[2], rand(1, Hkv, L, D, seed=4))  # the newest key was written
        early = kernels.decode_attention(qkv, caches[4][0], caches[5][0], n, 0.25, split=split, block=16,
                                         rotary=(cos, sin, H), prefetch=True, **options)
        assert torch.equal(early, got) and torch.equal(caches[4], caches[2]), what
try:  # the qkv row of another model's heads is refused, naming the shapes
    kernels.decode_attention(qkv, caches[2][0], caches[3][0], n, 0.25, rotary=(cos, sin, H + 1))
    raise AssertionError("a qkv row of the wrong length was taken")
except ValueError as e:
    assert "(H + 2 Hkv) x D elements" in str(e), e
try:  # without the rotary the newest position is the previous kernel's write: no prefetch then
    kernels.decode_attention(q, caches[0][0], caches[1][0], n, 0.25, prefetch=True)
    raise AssertionError("a prefetch without the rotary was taken")
except ValueError as e:
    assert "it needs `rotary`" in str(e), e

# the lean decoder's fused step through the Triton kernels: the reference step's logits, and the unfused step's
for key in ("llama-tiny", "qwen2-tiny"):
    model = models.build_model(models.load_spec(key), device="cpu", dtype="bf16")
    models.randomise_(model, seed=1, std=0.2)
    with torch.inference_mode():
        plain = lean.LeanStep(model, 12, 16, feedback=False)
        ref = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention"))
        ref.lean.fused = fused.FusedOps(reference=True)
        got = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention"))
        assert got.lean.fused == fused.FusedOps()
        epi = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention", "norm_epilogue"))
        assert epi.lean.fused == fused.FusedOps(norm_in_epilogue=True)
        both = lean.LeanStep(model, 12, 16, feedback=False,
                             custom_kernels=("fused", "attention", "norm_epilogue", "rotary_epilogue"))
        assert both.lean.fused == fused.FusedOps(norm_in_epilogue=True, rotary_in_qkv=True)
        kv = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention", "kv_together"))
        assert kv.lean.fused == fused.FusedOps(kv_together=True)
        rot = lean.LeanStep(model, 12, 16, feedback=False,
                            custom_kernels=("fused", "attention", "kv_together", "rotary_attention"))
        assert rot.lean.fused == fused.FusedOps(kv_together=True, rotary_in_attention=True)
        # (PDL's wait and trigger do not run in the interpreter: the prefetch's loads without them)
        pre = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention", "kv_together",
                                                                           "rotary_attention", "attention_prefetch"))
        assert pre.lean.fused == fused.FusedOps(kv_together=True, rotary_in_attention=True, attention_prefetch=True)
        for _ in range(3):
            a, b, c, e = plain.step().float(), ref.step().float(), got.step().float(), epi.step().float()
            assert compare.max_relative_error(c, b) < 0.02 and compare.max_relative_error(c, a) < 0.05, key
            assert compare.max_relative_error(e, b) < 0.02, key
            assert compare.max_relative_error(both.step().float(), b) < 0.02, key
            k = kv.step().float()
            assert compare.max_relative_error(k, b) < 0.02, key  # V beside K, blocks of 64
            r = rot.step().float()
            assert compare.max_relative_error(r, k) < 0.02, key  # the rotary in the attention: the same step
            assert torch.equal(pre.step().float(), r), key  # and its first block read before the wait, bit for bit
# the L2 prefetch's walk over the program's rows (the prefetch itself a no-op here): the product without it, bit for bit
x, nw, w, wgu = rand(256, seed=21), rand(256, seed=22), rand(40, 256, std=0.1, seed=23), rand(80, 256, std=0.1, seed=24)
for cfg in (C(16, 64), C(8, 64, split_k=2)):
    with_it = fused.fused_gemv(x, w, norm_weight=nw, eps=1e-5, config=cfg, l2_prefetch=True)
    assert torch.equal(with_it, fused.fused_gemv(x, w, norm_weight=nw, eps=1e-5, config=cfg)), cfg
with_it = fused.fused_gemv(x, wgu, gate_up=True, config=C(16, 64), l2_prefetch=True)
assert torch.equal(with_it, fused.fused_gemv(x, wgu, gate_up=True, config=C(16, 64)))
print("interpreted fused kernels ok")
"""


def test_fused_kernels_equal_their_references_in_tritons_interpreter():
    """Every fused_gemv flavour (norm, norm + bias, residual, residual + the output's norm, gate_up, the SiLU
    prologue) over five configs (split-K 2 to 4
    included) on shapes with odd N and K; split-K's determinism and its counters reset; rotary_cache exactly, on
    three GQA shapes; and the fused step of a tiny Llama and Qwen2 through the kernels (also with the norm in o's
    epilogue, with the attention's V loaded beside K, and with the rotary in the attention), against the reference
    step and the unfused step; the attention's rotary against rotary_cache then the attention (its caches bit for
    bit), its prefetch bit for bit the same; fused_gemv with l2_prefetch (its walk over the rows, the prefetch a no-op
    here) bit for bit the product without it. In a fresh process with TRITON_INTERPRET=1."""
    from conftest import run_interpreted

    run_interpreted(INTERPRETED_CHECKS, "interpreted fused kernels ok")


# ------------------------------------------------------------- Triton's offline compiler for sm_90, no GPU

FLAGS = {"norm": dict(NORM=True), "norm_bias": dict(NORM=True, BIAS=True), "residual": dict(RESIDUAL=True),
         "gate_up": dict(NORM=True, GATE_UP=True, PAIRED=True), "silu_residual": dict(SILU_X=True, RESIDUAL=True),
         "norm_rotary": dict(NORM=True, ROTARY=True, PAIRED=True),
         "norm_bias_rotary": dict(NORM=True, BIAS=True, ROTARY=True, PAIRED=True)}


def _sm90(kernel, types, constexprs, warps, pdl):
    """(PTX, cuobjdump's resource line) of `kernel` compiled for sm_90 as a launch specialises it (pointers and
    ints divisible by 16), without a GPU (decodegap.kernels.offline). `pdl`: False, True, or "early" (PDL with
    EARLY_TRIGGER)."""
    from decodegap.kernels import offline

    constexprs = dict(constexprs, USE_PDL=bool(pdl), EARLY_TRIGGER=pdl == "early")
    compiled = offline.compile_sm90(kernel, types, constexprs, warps, pdl=bool(pdl))
    return compiled.asm["ptx"], offline.cuobjdump(compiled, "--dump-resource-usage")


@pytest.mark.parametrize("pdl", [False, True, "early"])
def test_the_table_configs_compile_for_sm90_as_designed(monkeypatch, pdl):
    """Every product of the fused step of the three models with its table config, compiled offline for sm_90 by
    this Triton, the o product also with the norm in its epilogue (out_norm) and qkv with the rotary in its
    epilogue: 16-byte weight loads in the K loop;
    no register spills; with PDL one gdc wait after the first weight tile's loads and one launch_dependents after
    the loop (with the early trigger: before any load), without PDL none; split-K's and out_norm's arrival counters acquire-release atomics."""
    pytest.importorskip("triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(fused_kernels, "_COMPILED", {})
    gemv, _ = fused._kernels()
    types = GEMV_ARG_TYPES
    seen = {}
    for key in ("llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.3"):
        c = models.load_spec(key).config
        products = [p + (False,) for p in _products(key, step_only=True)]
        products += [p[:4] + (True,) for p in products if p[0] == "o"]  # o with the norm in its epilogue
        products += [p + (False,) for p in _products(key) if p[0] == "qkv_rotary"]
        for name, K, N, flavour, out_norm in products:
            config = fused_configs.gemv_config(N, K, rotary=name == "qkv_rotary")
            k_split = -(-(-(-K // config.split_k)) // config.block_k) * config.block_k
            flags = dict(BLOCK_N=config.block_n, BLOCK_K=config.block_k, SPLIT_K=-(-K // k_split), NORM=False,
                         XBLOCK=16, BIAS=False, RESIDUAL=False, GATE_UP=False, SILU_X=False, OUT_NORM=out_norm,
                         PBLOCK=1 << (-(-N // config.block_n) - 1).bit_length() if out_norm else 16,
                         YBLOCK=1 << (N - 1).bit_length() if out_norm else 16, ROTARY=False, PAIRED=False,
                         HEAD_D=c["hidden_size"] // c["num_attention_heads"], NQ=c["num_attention_heads"],
                         NKV=c["num_key_value_heads"], **GEMV_OFF)
            flags.update(FLAGS[flavour])
            if flags["NORM"]:
                flags["XBLOCK"] = 1 << (K - 1).bit_length()
            cell = tuple(sorted(flags.items()))
            if cell not in seen:
                seen[cell] = _sm90(gemv, types, flags, config.warps, pdl)
            ptx, usage = seen[cell]
            what = (key, name, config, out_norm)
            assert "ld.global.v4.b32" in ptx and "LOCAL:0" in usage, what
            loop = ptx.split("Inner Loop Header")[1].split("bra")[0]
            assert "ld.global.v4.b32" in loop, what
            lines = ptx.splitlines()
            waits = [i for i, line in enumerate(lines) if "griddepcontrol.wait" in line]
            triggers = [i for i, line in enumerate(lines) if "griddepcontrol.launch_dependents" in line]
            header = next(i for i, line in enumerate(lines) if "Inner Loop Header" in line)
            loop_end = next(i for i in range(header, len(lines)) if "bra" in lines[i])  # the back branch
            first_load = next(i for i, line in enumerate(lines) if "ld.global" in line)
            if pdl == "early":
                assert len(waits) == 1 and len(triggers) == 1 and triggers[0] < first_load < waits[0] < loop_end, what
            elif pdl:
                assert len(waits) == 1 and len(triggers) == 1 and first_load < waits[0] < loop_end < triggers[0], what
            else:
                assert not waits and not triggers, what
            assert ("atom.global.gpu.acq_rel.add" in ptx) == (flags["SPLIT_K"] > 1 or out_norm), what
    assert len(seen) >= 6


@pytest.mark.parametrize("flavour", ["norm", "gate_up", "norm_rotary", "residual"])
def test_the_l2_prefetch_compiles_to_bulk_prefetches_before_the_wait(monkeypatch, flavour):
    """fused_gemv_kernel with L2_COLS, compiled offline for sm_90: one bulk L2 prefetch a row the program reads (16
    rows; gate_up's and the rotary's partners too), all before PDL's wait, no register spills; none with L2_COLS 0."""
    pytest.importorskip("triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(fused_kernels, "_COMPILED", {})
    monkeypatch.setattr(l2_prefetch, "_BUILT", {})
    gemv, _ = fused._kernels()
    flags = dict(BLOCK_N=16, BLOCK_K=512, SPLIT_K=1, NORM=False, XBLOCK=16, BIAS=False, RESIDUAL=False, GATE_UP=False,
                 SILU_X=False, OUT_NORM=False, PBLOCK=16, YBLOCK=16, ROTARY=False, PAIRED=False, HEAD_D=128, NQ=32,
                 NKV=8, **GEMV_OFF)
    flags.update(FLAGS[flavour])
    if flags["NORM"]:
        flags["XBLOCK"] = 4096
    for l2_cols, rows in ((0, 0), (640, 16 * (2 if flags["PAIRED"] else 1))):
        ptx, usage = _sm90(gemv, GEMV_ARG_TYPES, dict(flags, L2_COLS=l2_cols), 4, "early")
        lines = ptx.splitlines()
        prefetches = [i for i, line in enumerate(lines) if "cp.async.bulk.prefetch.L2.global" in line]
        wait = next(i for i, line in enumerate(lines) if "griddepcontrol.wait" in line)
        assert len(prefetches) == rows and all(i < wait for i in prefetches), (flavour, l2_cols, len(prefetches))
        assert "LOCAL:0" in usage


@pytest.mark.parametrize("pdl", [False, True, "early"])
def test_the_attention_kernels_compile_for_sm90_with_and_without_pdl(monkeypatch, pdl):
    """decode_attention's two stages on Llama's heads (a group of 4, head_dim 128), and its one-kernel form (the
    split stage merging in its last program), compiled offline for sm_90: with PDL each waits before its first load
    and triggers its dependents once after its loads of the cache and the previous kernel's output (the split stage
    after its loop over the cache; with the early trigger before the wait), without PDL neither; the one-kernel
    form's arrival counter an acquire-release atomic; no register spills. The split stage with the rotary, and with
    its prefetch, whose first block's loads (and the length's) come before the wait."""
    pytest.importorskip("triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(kernels, "_COMPILED", {})
    split, merge = kernels._attention_kernels()
    split_types = dict(q_ptr="*bf16", k_ptr="*bf16", v_ptr="*bf16", len_ptr="*i32", o_ptr="*fp32", m_ptr="*fp32",
                       l_ptr="*fp32", scale="fp32", L="i32", n_splits="i32", group="i32", count_ptr="*i32",
                       out_ptr="*bf16", cos_ptr="*bf16", sin_ptr="*bf16", n_q_heads="i32")
    cases = [(split, split_types, dict(BLOCK=32, G=16, D=128, UPCAST=False, MERGE=False, S=1)),
             (split, split_types, dict(BLOCK=64, G=16, D=128, UPCAST=False, MERGE=False, S=1, ROTARY=True)),
             (split, split_types, dict(BLOCK=64, G=16, D=128, UPCAST=False, MERGE=False, S=1, ROTARY=True,
                                       PREFETCH=True)),
             (merge, dict(o_ptr="*fp32", m_ptr="*fp32", l_ptr="*fp32", out_ptr="*bf16", n_splits="i32", group="i32"),
              dict(S=16, G=16, D=128)),
             (split, split_types, dict(BLOCK=32, G=16, D=128, UPCAST=False, MERGE=True, S=64))]  # one kernel, as
    # at Llama-3.1-8B ctx 2048 (33 splits)
    for kernel, types, flags in cases:
        ptx, usage = _sm90(kernel, types, flags, 4, pdl)
        lines = ptx.splitlines()
        waits = [i for i, line in enumerate(lines) if "griddepcontrol.wait" in line]
        triggers = [i for i, line in enumerate(lines) if "griddepcontrol.launch_dependents" in line]
        loads = [i for i, line in enumerate(lines) if "ld.global" in line]
        merged = flags.get("MERGE", False)  # its merge reads the kernel's own partials after the trigger
        cache_loads = [i for i in loads if ".cg" not in lines[i]] if merged else loads
        assert "LOCAL:0" in usage, kernel
        assert ("atom.global.gpu.acq_rel.add" in ptx) == merged, kernel
        if pdl and flags.get("PREFETCH"):  # the length, K and V of the first block loaded before the wait
            assert sum(i < waits[0] for i in loads) >= 3, kernel
            loads = [i for i in loads if i > waits[0]]
        if pdl == "early":
            assert len(waits) == 1 and len(triggers) == 1 and triggers[0] < waits[0] < loads[0], kernel
        elif pdl:
            assert len(waits) == 1 and len(triggers) == 1 and waits[0] < loads[0] < cache_loads[-1] < triggers[0], \
                kernel
        else:
            assert not waits and not triggers, kernel


# ------------------------------------------------------------------------------- the GPU, real shapes

REAL = ("llama-3.1-8b", "qwen2.5-7b")
FUSED_ARMS = tuple(k for k, a in arms.REGISTRY.items() if "fused" in a.kernels)  # the arms the fused step runs


def _products(key, step_only=False):
    """(name, K, weight rows N, flavour) of a model's fused products (bench/fused_gemv.py's names): flavour norm /
    norm_bias / residual / gate_up / silu_residual / residual_norm / plain. `step_only`: the five the fused step
    launches by default (gate_up_norm and down_silu, not the SiLU-epilogue gate_up, the plain down, and the
    norm-epilogue arm's o_norm and gate_up_plain)."""
    return [p for p in fused_configs.products(models.load_spec(key).config) if not step_only or p[0] in fused_configs.STEP_PRODUCTS]


def _call(flavour, x, w, nw, b, res, pdl=False, config=None):
    """(kernel output, reference) of one product flavour."""
    if flavour == "residual":
        return fused.fused_gemv(x, w, residual=res, pdl=pdl, config=config), fused_reference.gemv_residual_reference(x, w, res)
    if flavour == "gate_up":
        return (fused.fused_gemv(x, w, norm_weight=nw, eps=1e-5, gate_up=True, pdl=pdl, config=config),
                fused_reference.gate_up_silu_reference(x, nw, w, 1e-5))
    if flavour == "residual_norm":  # nw stands for the output norm's weight here: the product's N is K
        got = fused.fused_gemv(x, w, residual=res, out_norm=(nw, 1e-5), pdl=pdl, config=config)
        return torch.cat(got), torch.cat(fused_reference.gemv_residual_norm_reference(x, w, res, nw, 1e-5))
    if flavour == "plain":
        return fused.fused_gemv(x, w, pdl=pdl, config=config), F.linear(x, w)
    if flavour == "plain_gate_up":
        return (fused.fused_gemv(x, w, gate_up=True, pdl=pdl, config=config),
                fused_reference.gate_up_plain_silu_reference(x, w))
    if flavour == "silu_residual":
        gu = torch.cat([x, x.flip(0)])  # [gate; up]
        return (fused.fused_gemv(gu, w, silu_x=True, residual=res, pdl=pdl, config=config),
                fused_reference.silu_gemv_residual_reference(gu, w, res))
    bias = b if flavour == "norm_bias" else None
    return (fused.fused_gemv(x, w, norm_weight=nw, eps=1e-5, bias=bias, pdl=pdl, config=config),
            fused_reference.rmsnorm_gemv_reference(x, nw, w, bias, 1e-5))


@pytest.mark.gpu
@pytest.mark.parametrize("key", REAL)
def test_fused_gemv_on_every_product_shape_on_the_gpu(key):
    """Each product of the model with its table config, with PDL where this GPU has it, and every candidate
    config of the diagnostic, against its reference; split-K leaves its counters at zero."""
    pdl = fused.pdl_unavailable("cuda") is None
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, K, N, flavour in _products(key):
        if flavour in fused_configs.SCALE_FLAVOURS:  # tests/test_norm_scale.py's GPU tests check those products
            continue
        x = torch.randn(K, generator=gen, device="cuda").bfloat16()
        w = (0.02 * torch.randn(N, K, generator=gen, device="cuda")).bfloat16()
        nw, b = (1 + 0.1 * torch.randn(K, generator=gen, device="cuda")).bfloat16(), torch.randn(N, device="cuda").bfloat16()
        rows = N // 2 if flavour == "gate_up" else N
        res = torch.randn(rows, generator=gen, device="cuda").bfloat16()
        for config in fused_configs.flavour_candidates(N, K, flavour):
            for use_pdl in sorted({False, pdl}):
                if flavour.endswith("_rotary"):
                    got, ref = _rotary_call(key, x, w, nw, b if "bias" in flavour else None, use_pdl, config)
                else:
                    got, ref = _call(flavour, x, w, nw, b, res, use_pdl, config)
                err = ((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
                assert got.shape == ref.shape and err < 1e-2, (key, name, config, use_pdl, err)
        assert fused.workspace("cuda")[1].abs().sum().item() == 0


@pytest.mark.gpu
@pytest.mark.parametrize("key", REAL)
def test_rotary_cache_on_the_real_heads_on_the_gpu(key):
    c = models.load_spec(key).config
    H, Hkv, D, L = c["num_attention_heads"], c["num_key_value_heads"], 128, 2083
    gen = torch.Generator(device="cuda").manual_seed(0)
    qkv = torch.randn((H + 2 * Hkv) * D, generator=gen, device="cuda").bfloat16()
    cos, sin = (torch.randn(L, D, generator=gen, device="cuda").bfloat16() for _ in range(2))
    caches = [torch.zeros(1, Hkv, L, D, dtype=torch.bfloat16, device="cuda") for _ in range(4)]
    pos = torch.tensor([2049], device="cuda")
    for pdl in sorted({False, fused.pdl_unavailable("cuda") is None}):
        got = fused.rotary_cache(qkv, cos, sin, pos, caches[0], caches[1], H, Hkv, pdl=pdl)
        ref = fused_reference.rotary_cache_reference(qkv, cos, sin, pos, caches[2], caches[3], H, Hkv)
        assert torch.equal(got, ref) and torch.equal(caches[0], caches[2]) and torch.equal(caches[1], caches[3])


@pytest.mark.gpu
def test_pdl_is_available_on_a_hopper_gpu():
    """On sm_90+ with this Triton the PDL arm must run, not fall back to `unavailable` unseen."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("PDL needs sm_90")
    assert fused.pdl_unavailable("cuda") is None


def _replays_as_eager(chain):
    """`chain` captured in a CUDA graph (after a warm-up on a side stream) replays its eager result bit for bit,
    three times, and leaves the workspace's arrival counters at zero."""
    eager = chain()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        chain()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = chain()
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, eager)
    assert fused.workspace("cuda")[1].abs().sum().item() == 0


@pytest.mark.gpu
def test_split_k_replays_in_a_cuda_graph_with_pdl():
    """A captured chain of split-K products (the down shape, PDL where available) replayed: the eager result,
    bit for bit, every replay, with the counters back at zero (the last program of each row block resets them)."""
    pdl = fused.pdl_unavailable("cuda") is None
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(14336, generator=gen, device="cuda").bfloat16()
    w = (0.02 * torch.randn(4096, 14336, generator=gen, device="cuda")).bfloat16()
    res = torch.randn(4096, generator=gen, device="cuda").bfloat16()
    config = fused_configs.GemvConfig(16, 512, split_k=4)

    def chain():
        y = res
        for _ in range(3):
            y = fused.fused_gemv(x, w, residual=y, config=config, pdl=pdl)
        return y

    _replays_as_eager(chain)


@pytest.mark.gpu
def test_the_output_norm_replays_in_a_cuda_graph_with_pdl():
    """A captured chain of o products with the norm in their epilogue (out_norm; PDL where available), each
    feeding its h to the next: the eager results bit for bit, every replay, the arrival counter back at zero."""
    pdl = fused.pdl_unavailable("cuda") is None
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(4096, generator=gen, device="cuda").bfloat16()
    w = (0.02 * torch.randn(4096, 4096, generator=gen, device="cuda")).bfloat16()
    nw = (1 + 0.1 * torch.randn(4096, generator=gen, device="cuda")).bfloat16()

    def chain():
        h, y = x, x
        for _ in range(3):
            y, h = fused.fused_gemv(h, w, residual=y, out_norm=(nw, 1e-5), pdl=pdl)
        return torch.cat([y, h])

    _replays_as_eager(chain)


def _rotary_operands(key, L=2083, p=2049, seed=0):
    """(cos, sin, start_pos, k_cache, v_cache, H, Hkv) of the qkv product's rotary epilogue on `key`'s heads, with
    random bf16 tables and a cache of L positions (caches of nines, so a missing write shows)."""
    c = models.load_spec(key).config
    H, Hkv = c["num_attention_heads"], c["num_key_value_heads"]
    D = c["hidden_size"] // H
    gen = torch.Generator(device="cuda").manual_seed(seed)
    cos, sin = (torch.randn(L, D, generator=gen, device="cuda").bfloat16() for _ in range(2))
    caches = [torch.full((1, Hkv, L, D), 9.0, dtype=torch.bfloat16, device="cuda") for _ in range(2)]
    return (cos, sin, torch.tensor([p], device="cuda"), *caches, H, Hkv)


def _rotary_call(key, x, w, nw, b, pdl, config):
    """(q, k and v at the position) of the rotary epilogue, and the same from rmsnorm_gemv_rotary_reference."""
    got, ref = _rotary_operands(key), _rotary_operands(key)
    q = fused.fused_gemv(x, w, norm_weight=nw, eps=1e-5, bias=b, rotary=got, pdl=pdl, config=config)
    q_ref = fused_reference.rmsnorm_gemv_rotary_reference(x, nw, w, b, 1e-5, ref)
    p = int(got[2])
    return (torch.cat([q, got[3][0, :, p].reshape(-1), got[4][0, :, p].reshape(-1)]),
            torch.cat([q_ref, ref[3][0, :, p].reshape(-1), ref[4][0, :, p].reshape(-1)]))


@pytest.mark.gpu
@pytest.mark.parametrize("key", REAL)
def test_the_rotary_epilogue_replays_in_a_cuda_graph_with_pdl(key):
    """A captured chain of qkv products with the rotary epilogue (PDL where available), each feeding its q (H x D =
    hidden on both models) to the next and writing its k and v into the cache: the eager q and caches bit for bit, every replay; and the same q and caches as the qkv product
    with the same config followed by the rotary_cache kernel."""
    pdl = fused.pdl_unavailable("cuda") is None
    c = models.load_spec(key).config
    K = c["hidden_size"]
    rotary = _rotary_operands(key)
    N = (rotary[5] + 2 * rotary[6]) * rotary[3].shape[-1]
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(K, generator=gen, device="cuda").bfloat16()
    w = (0.02 * torch.randn(N, K, generator=gen, device="cuda")).bfloat16()
    nw = (1 + 0.1 * torch.randn(K, generator=gen, device="cuda")).bfloat16()
    b = torch.randn(N, generator=gen, device="cuda").bfloat16() if c.get("model_type") == "qwen2" else None

    def chain():
        q = x
        for _ in range(3):
            q = fused.fused_gemv(q, w, norm_weight=nw, eps=1e-5, bias=b, rotary=rotary, pdl=pdl)
        return torch.cat([q, rotary[3].reshape(-1), rotary[4].reshape(-1)])

    _replays_as_eager(chain)
    two = _rotary_operands(key)
    config = fused_configs.gemv_config(N, K, rotary=True)
    one = fused.fused_gemv(x, w, norm_weight=nw, eps=1e-5, bias=b, rotary=rotary, pdl=pdl, config=config)
    qkv = fused.fused_gemv(x, w, norm_weight=nw, eps=1e-5, bias=b, pdl=pdl, config=config)
    assert torch.equal(one, fused.rotary_cache(qkv, *two, pdl=pdl).reshape(-1))
    assert torch.equal(rotary[3], two[3]) and torch.equal(rotary[4], two[4])


@pytest.mark.gpu
@pytest.mark.parametrize("key", REAL)
@pytest.mark.parametrize("early", [dict(early_trigger=True), dict(early_products=True)])
def test_the_early_trigger_changes_no_bit_of_a_graphed_layer_chain(key, early):
    """Two decoder layers of the real widths through the fused kernels with both epilogues and PDL, captured in a
    CUDA graph with the early trigger (every kernel's, or the products' another product follows): the eager chain bit
    for bit every replay, and bit for bit the chain with the
    trigger after the reads (the trigger's place only decides when the next kernel may launch; a race shows here)."""
    if fused.pdl_unavailable("cuda") is not None:
        pytest.skip(fused.pdl_unavailable("cuda"))
    model = _two_layers(key)
    with torch.inference_mode():
        dec = lean.LeanDecoder(model, 308, ("attention",))
        for i in range(2):
            for name in (f"k_cache_{i}", f"v_cache_{i}"):
                getattr(dec, name).normal_()
        start = torch.tensor([300], device="cuda")
        x0 = torch.randn(model.config.hidden_size, device="cuda").bfloat16()

        def chain(ops):
            def run():
                x = x0
                for i, layer in enumerate(dec.layers):
                    x = layer.fused_step(x, ops, dec.cos, dec.sin, start, start + 1, getattr(dec, f"k_cache_{i}"),
                                         getattr(dec, f"v_cache_{i}"))
                return x
            return run

        late = chain(fused.FusedOps(pdl=True, norm_in_epilogue=True, rotary_in_qkv=True))()
        early = chain(fused.FusedOps(pdl=True, norm_in_epilogue=True, rotary_in_qkv=True, **early))
        assert torch.equal(early(), late)
        _replays_as_eager(early)


def _two_layers(key):
    spec = models.load_spec(key)
    return models.build_model(models.ModelSpec(spec.key, spec.name, None, "2 layers", True,
                                               dict(spec.config, num_hidden_layers=2)), device="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("key", REAL)
@pytest.mark.parametrize("arm", FUSED_ARMS)
def test_fused_arms_equal_hf_eager_on_real_widths(key, arm):
    """The graphed fused steps against HF eager (checks.verify_arm, the project's tolerance) on 2 layers of the
    real widths, and the fused step's logits against the lean eager step's; fewer kernels a step than the lean
    step with the unfused Triton kernels."""
    model = _two_layers(key)
    reason = decode.arm_available(arm, model)
    if "pdl" in arms.REGISTRY[arm].kernels and torch.cuda.get_device_capability() < (9, 0):
        assert reason and "sm_90" in reason
        return
    assert reason is None
    assert checks.verify_arm(model, arm, ctx=300, tol=0.1) < 0.1
    with torch.inference_mode():
        plain = lean.LeanStep(model, 300, 304, feedback=False)
        got = lean.LeanStep(model, 300, 304, feedback=False, custom_kernels=arms.REGISTRY[arm].kernels)
        for _ in range(3):
            assert compare.max_relative_error(got.step().float(), plain.step().float()) < 0.05
    assert profile.kernels_per_step(model, arm, 300) < profile.kernels_per_step(model, "lean_kernels", 300)


@pytest.mark.gpu
def test_the_l2_prefetch_changes_no_value_on_the_gpu():
    """fused_gemv with l2_prefetch on Llama-3.1-8B's product widths, each with its table config and with PDL where
    this GPU has it (qkv with its norm, o with the residual, gate_up with the norm, down with the SiLU prologue and
    the residual): bit for bit the product without it."""
    pdl = fused.pdl_unavailable("cuda") is None
    gen = torch.Generator().manual_seed(7)

    def rand(*shape, std=1.0):
        return (std * torch.randn(*shape, generator=gen)).to("cuda", torch.bfloat16)

    x, nw = rand(4096), rand(4096)
    cases = [(x, rand(6144, 4096, std=0.02), dict(norm_weight=nw, eps=1e-5)),
             (x, rand(4096, 4096, std=0.02), dict(residual=rand(4096))),
             (x, rand(28672, 4096, std=0.02), dict(norm_weight=nw, eps=1e-5)),
             (rand(2 * 14336), rand(4096, 14336, std=0.02), dict(silu_x=True, residual=rand(4096)))]
    for xi, w, options in cases:
        want = fused.fused_gemv(xi, w, pdl=pdl, **options)
        got = fused.fused_gemv(xi, w, pdl=pdl, l2_prefetch=True, **options)
        torch.cuda.synchronize()
        assert torch.equal(got, want), tuple(w.shape)


@pytest.mark.gpu
def test_the_fused_arms_are_unavailable_on_a_quantised_model():
    model = _two_layers("llama-3.1-8b")
    quant.quantise_model_(model, "int4-tinygemm")
    for arm in FUSED_ARMS:
        with pytest.raises(decode.ArmUnavailable, match="bf16 nn.Linear weights; layer 0 has TinyGemmLinear"):
            decode.run_arm(model, arm, 64, warmup=1, steps=1)
