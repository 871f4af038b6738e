"""The fused int4 step (decodegap.kernels.fused_int4): its reference against the int4-triton layer's own product, the
lean decoder's fused step on tiny int4-triton models through the references against its unfused int4 step (always,
no Triton), the refusals (another quantisation path, the rotary epilogue, fused_gemv's options it lacks), and in
Triton's interpreter the kernel against its reference on every flavour and the fused int4 step against the
reference step. The GPU tests (gpu marker) check the kernel on the real shapes and the arm against the path's own
eager step."""

from __future__ import annotations

import pytest
import torch

from decodegap import arms, compare
from decodegap.harness import lean, models
from decodegap.kernels.fused import launch as fused, rotary_args
from decodegap.kernels.fused_int4 import flavours, launch as fused_int4, reference as int4_reference
from decodegap.kernels.int4_gemv.format import dequantise
from decodegap.kernels.int4_gemv.kernel import INT4_CONFIGS
from decodegap.kernels.int4_gemv.layer import Int4GemvLinear
from decodegap.quant import paths as quant


def _rand(*shape, std=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (std * torch.randn(*shape, generator=gen)).bfloat16()


def _tiny_int4(key):
    model = models.build_model(models.load_spec(key), device="cpu", dtype="bf16")
    models.randomise_(model, seed=1, std=0.2)
    info = quant.quantise_model_(model, "int4-triton", reference=True)  # the format; the layer's forward in fp32
    assert info["path"] == "int4-triton"
    return model


def test_the_reference_is_the_layer_product_rounded_once_then_its_bias():
    """linear_reference = bf16(x W_deq^T in fp32), then + bias rounded: checked against a hand-built product of
    the dequantised weight (dequantise is the format's tested inverse), with and without a bias."""
    w, x, b = _rand(24, 64, std=0.1, seed=1), _rand(64, std=2.0, seed=2), _rand(24, seed=3)
    layer = Int4GemvLinear.from_weight(w, group_size=32)
    wd = dequantise(layer.packed, layer.scales, layer.offsets, 32)
    expect = (x.float() @ wd.T).bfloat16()
    assert torch.equal(int4_reference.linear_reference(x, layer), expect)
    with_bias = Int4GemvLinear.from_weight(w, bias=b, group_size=32)
    assert torch.equal(int4_reference.linear_reference(x, with_bias), (expect.float() + b.float()).bfloat16())
    with pytest.raises(ValueError, match="int4-triton layer"):
        int4_reference.linear_reference(x, w)


def test_int4_tensors_reads_the_int4_triton_layers_only():
    model = _tiny_int4("qwen2-tiny")
    q = model.model.layers[0].self_attn.q_proj
    packed, scales, offsets, group, bias = fused_int4.int4_tensors(q)
    assert packed.shape == (q.out_features, q.in_features // 8) and group == 64 and bias is not None  # Qwen2's bias
    assert fused_int4.int4_tensors(torch.nn.Linear(64, 8)) is None
    assert fused_int4.int4_tensors(_rand(8, 64)) is None


def test_an_int4_triton_model_runs_the_fused_step_and_other_paths_are_refused():
    model = _tiny_int4("llama-tiny")
    assert fused.weights_unsupported(model) is None and fused.int4_weights(model)
    assert lean.LeanDecoder(model, 8, ("fused", "attention", "pdl", "norm_epilogue")).fused is not None
    assert lean.LeanDecoder(model, 8, ("fused", "attention", "pdl", "norm_epilogue", "rotary_epilogue")).fused.rotary_in_qkv
    other = _tiny_int4("llama-tiny")  # one layer of another path among the int4-triton ones
    down = other.model.layers[1].mlp.down_proj
    other.model.layers[1].mlp.down_proj = quant.build_linear("gptq-exllamav2", down.in_features, down.out_features,
                                                             device="cpu", group_size=64, reference=True)
    assert fused.weights_unsupported(other) == ("the fused kernels read bf16 nn.Linear weights or int4-triton "
                                                "layers; layer 1 has GPTQExllamaV2Linear, Int4TritonLinear")


def test_every_fused_arm_runs_an_int4_model(monkeypatch):
    """As on a GPU with PDL (its checks stood in for here): every fused arm runs an int4-triton model, the rotary
    epilogue's too (the int4 kernel pairs each head's rotary rows), as it runs a bf16 model."""
    from decodegap.harness import decode
    from decodegap.kernels import step as kernels_step

    monkeypatch.setattr(decode, "_is_cuda", lambda model: True)
    monkeypatch.setattr(kernels_step, "available", lambda device="cuda": None)
    monkeypatch.setattr(fused, "pdl_unavailable", lambda device="cuda": None)
    model = _tiny_int4("qwen2-tiny")
    fused_arms = [key for key, arm in arms.REGISTRY.items() if "fused" in arm.kernels]
    assert "lean_fused_pdl_epilogues_graph" in fused_arms and "lean_fused_all_epilogues_graph" in fused_arms
    for arm in fused_arms:
        assert decode.arm_available(arm, model) is None, arm
    bf16 = models.build_model(models.load_spec("qwen2-tiny"), device="cpu", dtype="bf16")
    assert decode.arm_available("lean_fused_pdl_epilogues_graph", bf16) is None


def test_product_names_what_the_int4_kernel_cannot_take():
    layer = Int4GemvLinear.from_weight(_rand(32, 64, std=0.1), group_size=32)
    x = _rand(64)
    for options, word in ((dict(config=(8, 1, 2)), "GemvConfig"), (dict(bias=_rand(32)), "bias")):
        with pytest.raises(ValueError, match=word):
            fused.product(x, layer, **options)
    cache = torch.zeros(1, 1, 8, 16, dtype=torch.bfloat16)  # head_dim 16: one kv head, 32 rows are 2 heads
    with pytest.raises(ValueError, match="rotary needs the weight's rows to be"):
        fused_int4.fused_int4_gemv(x, layer, rotary=(_rand(8, 16), _rand(8, 16), torch.tensor([3]), cache, cache, 1, 1))
    with pytest.raises(ValueError, match="rotary is the qkv product's epilogue"):
        fused_int4.fused_int4_gemv(x, layer, residual=_rand(32),
                                   rotary=(_rand(8, 16), _rand(8, 16), torch.tensor([3]), cache, cache, 1, 1))
    for options in (dict(residual=_rand(32)), dict(out_norm=(_rand(32), 1e-5)), dict(norm_weight=None, silu_x=True)):
        gu = _rand(128) if options.get("silu_x") else x
        with pytest.raises(ValueError, match="gate_up takes an even number of weight rows"):
            fused_int4.fused_int4_gemv(gu, layer, gate_up=True, **options)
    odd = Int4GemvLinear.from_weight(_rand(33, 64, std=0.1), group_size=32)
    with pytest.raises(ValueError, match="gate_up takes an even number of weight rows"):
        fused_int4.fused_int4_gemv(x, odd, gate_up=True)
    with pytest.raises(ValueError, match="int4-triton layer"):
        fused_int4.fused_int4_gemv(x, _rand(32, 64))
    with pytest.raises(ValueError, match="one row"):
        fused_int4.fused_int4_gemv(_rand(2, 64), layer)
    with pytest.raises(ValueError, match="two prologues"):
        fused_int4.fused_int4_gemv(_rand(128), layer, silu_x=True, norm_weight=_rand(64))


@pytest.mark.parametrize("key", ["llama-tiny", "qwen2-tiny"])
def test_the_fused_int4_reference_step_equals_the_unfused_int4_step(key):
    """The lean decoder's fused step through FusedOps(reference=True) on a tiny int4-triton model (Qwen2: the qkv
    bias inside the int4 layer) gives the unfused lean step's logits on the same model within bf16 rounding, and a
    step that drops the o product's residual does not (the comparison can fail)."""
    model = _tiny_int4(key)
    with torch.inference_mode():
        plain = lean.LeanStep(model, 12, 16, feedback=False)
        ref = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention"))
        ref.lean.fused = fused.FusedOps(reference=True)
        for _ in range(3):
            a, b = plain.step().float(), ref.step().float()
            assert compare.max_relative_error(b, a) < 0.05, key

        class NoResidual(fused.FusedOps):
            def gemv_residual(self, x, weight, residual):
                return super().gemv_residual(x, weight, torch.zeros_like(residual))

        broken = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention"))
        broken.lean.fused = NoResidual(reference=True)
        assert compare.max_relative_error(broken.step().float(), plain.step().float()) > 0.2


INTERPRETED_CHECKS = """
import torch
from decodegap import compare
from decodegap import arms
from decodegap.harness import lean, models
from decodegap.kernels.fused import launch as fused, reference as fused_reference
from decodegap.kernels.fused_int4 import launch as fused_int4
from decodegap.kernels.int4_gemv.layer import Int4GemvLinear
from decodegap.quant import paths as quant

def rand(*shape, std=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (std * torch.randn(*shape, generator=gen)).bfloat16()

def close(got, ref, what, tol=1e-2):
    err = ((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
    assert got.shape == ref.shape and err < tol, (what, got.shape, ref.shape, err)

# K: one chunk a lane and lanes past K (64), several loop steps with the last partial (1280), groups of 32 to 128;
# N: tails of the row blocks
for K, N, G in [(64, 37, 32), (256, 9, 64), (1280, 21, 128), (96, 8, 32)]:
    x, res, nw, on = rand(K, std=2.0, seed=1), rand(N, seed=2), rand(K, seed=3), rand(N, seed=4)
    w, b = rand(N, K, std=0.1, seed=5), rand(N, seed=6)
    plain, biased = Int4GemvLinear.from_weight(w, group_size=G), Int4GemvLinear.from_weight(w, bias=b, group_size=G)
    close(fused_int4.fused_int4_gemv(x, plain), fused_reference._linear(x, plain), ("plain", K, N, G))
    close(fused_int4.fused_int4_gemv(x, plain, norm_weight=nw, eps=1e-5),
          fused_reference.rmsnorm_gemv_reference(x, nw, plain, None, 1e-5), ("norm", K, N, G))
    close(fused_int4.fused_int4_gemv(x, biased, norm_weight=nw, eps=1e-5),
          fused_reference.rmsnorm_gemv_reference(x, nw, biased, None, 1e-5), ("norm_bias", K, N, G))
    close(fused_int4.fused_int4_gemv(x, plain, residual=res), fused_reference.gemv_residual_reference(x, plain, res),
          ("residual", K, N, G))
    got = fused_int4.fused_int4_gemv(x, plain, residual=res, out_norm=(on, 1e-5))
    ref = fused_reference.gemv_residual_norm_reference(x, plain, res, on, 1e-5)
    close(got[0], ref[0], ("out_norm y", K, N, G))
    close(got[1], ref[1], ("out_norm h", K, N, G))
    assert fused.workspace("cpu")[1].abs().sum() == 0  # the output norm's counter reset for the next product
    gu = rand(2 * K, std=2.0, seed=7)
    close(fused_int4.fused_int4_gemv(gu, plain, silu_x=True, residual=res),
          fused_reference.silu_gemv_residual_reference(gu, plain, res), ("silu_x", K, N, G))
    # the SiLU epilogue on a [gate; up] weight of 2N rows: SiLU(gate) * up, N rows (after the norm prologue or none)
    pair = Int4GemvLinear.from_weight(rand(2 * N, K, std=0.1, seed=8), group_size=G)
    close(fused_int4.fused_int4_gemv(x, pair, gate_up=True), fused_reference.gate_up_plain_silu_reference(x, pair),
          ("plain_gate_up", K, N, G))
    close(fused_int4.fused_int4_gemv(x, pair, norm_weight=nw, eps=1e-5, gate_up=True),
          fused_reference.gate_up_silu_reference(x, nw, pair, 1e-5), ("gate_up", K, N, G))
    # a fault it must catch: gate and up read from each other's rows
    crossed = Int4GemvLinear(*(torch.cat([t[N:], t[:N]]) for t in (pair.packed, pair.scales, pair.offsets)), G)
    err = compare.max_relative_error(fused_int4.fused_int4_gemv(x, crossed, gate_up=True).float(),
                                     fused_reference.gate_up_plain_silu_reference(x, pair).float())
    assert err > 0.05, ("gate and up crossed pass", K, N, G, err)
    # a fault the comparison must catch: the codes of one group's rows read with the nibble order swapped
    swapped = Int4GemvLinear(((plain.packed & 0x0F0F0F0F) << 4) | ((plain.packed >> 4) & 0x0F0F0F0F),
                             plain.scales, plain.offsets, G)
    err = compare.max_relative_error(fused_int4.fused_int4_gemv(x, swapped).float(),
                                     fused_reference._linear(x, plain).float())
    assert err > 0.05, ("swapped nibbles pass", K, N, G, err)

# the rotary epilogue on a qkv of 2 q heads and 1 kv head of 16 (64 rows; with a bias too), at position 5: q, and k
# and v in the caches, as the reference writes them; cos and sin swapped must fail
for K, G in [(64, 32), (256, 64)]:
    x, nw = rand(K, std=2.0, seed=11), rand(K, seed=12)
    for bias in (None, rand(64, seed=13)):
        qkv = Int4GemvLinear.from_weight(rand(64, K, std=0.1, seed=14), bias=bias, group_size=G)
        cos, sin = rand(9, 16, seed=15), rand(9, 16, seed=16)
        caches = [torch.zeros(1, 1, 9, 16, dtype=torch.bfloat16) for _ in range(4)]
        pos = torch.tensor([5])
        q = fused_int4.fused_int4_gemv(x, qkv, norm_weight=nw, eps=1e-5, rotary=(cos, sin, pos, caches[0], caches[1], 2, 1))
        q_ref = fused_reference.rmsnorm_gemv_rotary_reference(x, nw, qkv, None, 1e-5, (cos, sin, pos, caches[2], caches[3], 2, 1))
        close(q, q_ref, ("rotary q", K, G, bias is not None))
        close(caches[0], caches[2], ("rotary k", K, G, bias is not None))
        close(caches[1], caches[3], ("rotary v", K, G, bias is not None))
        swapped = fused_int4.fused_int4_gemv(x, qkv, norm_weight=nw, eps=1e-5, rotary=(sin, cos, pos, caches[0], caches[1], 2, 1))
        assert compare.max_relative_error(swapped.float(), q_ref.float()) > 0.05, ("cos and sin swapped pass", K, G)
        # the L2 prefetch's walk over the program's paired rows (the prefetch itself a no-op here): bit for bit
        again = [c.clone() for c in caches[:2]]
        q = fused_int4.fused_int4_gemv(x, qkv, norm_weight=nw, eps=1e-5, rotary=(cos, sin, pos, caches[0], caches[1], 2, 1))
        pre = fused_int4.fused_int4_gemv(x, qkv, norm_weight=nw, eps=1e-5, rotary=(cos, sin, pos, again[0], again[1], 2, 1),
                                         l2_prefetch=True)
        assert torch.equal(pre, q) and torch.equal(again[0], caches[0]) and torch.equal(again[1], caches[1])
# and on plain and gate_up products with row-block tails
for K, N, G in [(256, 9, 64)]:
    x, plain, pair = rand(K, seed=31), Int4GemvLinear.from_weight(rand(N, K, std=0.1, seed=32), group_size=G), \
        Int4GemvLinear.from_weight(rand(2 * N, K, std=0.1, seed=33), group_size=G)
    assert torch.equal(fused_int4.fused_int4_gemv(x, plain, l2_prefetch=True), fused_int4.fused_int4_gemv(x, plain))
    assert torch.equal(fused_int4.fused_int4_gemv(x, pair, gate_up=True, l2_prefetch=True),
                       fused_int4.fused_int4_gemv(x, pair, gate_up=True))

# the fused step of tiny int4-triton models with its products through the kernel: the reference step's logits, and
# the unfused step's. The rotary and the attention run their references here: their kernels are the bf16 step's
# (tests/test_fused.py), as is the LM head's product, and this Triton's interpreter refuses their scalar-and-vector
# masks
class Products(fused.FusedOps):
    def rmsnorm_gemv(self, x, norm_weight, weight, bias, eps):  # the bf16 LM head: the bf16 kernel's reference
        if isinstance(weight, torch.Tensor):
            return fused_reference.rmsnorm_gemv_reference(x, norm_weight, weight, bias, eps)
        return super().rmsnorm_gemv(x, norm_weight, weight, bias, eps)

    def gemv(self, x, weight):  # the bf16 LM head after the final norm in down's epilogue: its reference too
        if isinstance(weight, torch.Tensor):
            return fused_reference._linear(x, weight)
        return super().gemv(x, weight)

    def rotary_cache(self, *args):
        return fused_reference.rotary_cache_reference(*args)

    def attention(self, q, k_cache, v_cache, length, scale, rotary=None):  # rotary: rotary_in_attention's, unset here
        return fused.decode_attention_reference(q, k_cache, v_cache, int(length), scale)

for key, path in (("llama-tiny", "int4-triton"), ("qwen2-tiny", "int4-triton"), ("llama-tiny", "int4-triton-head")):
    model = models.build_model(models.load_spec(key), device="cpu", dtype="bf16")
    models.randomise_(model, seed=1, std=0.2)
    quant.quantise_model_(model, path, reference=True)  # int4-triton-head: the LM head through the kernel too
    with torch.inference_mode():
        plain = lean.LeanStep(model, 12, 16, feedback=False)
        ref = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention"))
        ref.lean.fused = fused.FusedOps(reference=True)
        got = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention"))
        got.lean.fused = Products()
        epi = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention", "norm_epilogue"))
        epi.lean.fused = Products(norm_in_epilogue=True)
        sil = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention", "norm_epilogue",
                                                                          "silu_epilogue"))
        sil.lean.fused = Products(norm_in_epilogue=True, silu_in_down=False)  # the SiLU in gate_up's epilogue
        every = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=arms.ARM_KERNELS["lean_fused_all_epilogues_graph"])
        every.lean.fused = Products(norm_in_epilogue=True, silu_in_down=False, rotary_in_qkv=True,
                                    head_norm_in_epilogue=True)  # the rotary and the final norm in epilogues too
        norms = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=arms.ARM_KERNELS["lean_fused_epilogue_norms_graph"])
        norms.lean.fused = Products(norm_in_epilogue=True, silu_in_down=False, rotary_in_qkv=True,
                                    head_norm_in_epilogue=True, input_norm_in_epilogue=True)  # every norm in one
        for _ in range(3):
            a, b, c, e = plain.step().float(), ref.step().float(), got.step().float(), epi.step().float()
            s, r, n = sil.step().float(), every.step().float(), norms.step().float()
            assert compare.max_relative_error(c, b) < 0.02 and compare.max_relative_error(c, a) < 0.05, key
            assert compare.max_relative_error(e, b) < 0.02 and compare.max_relative_error(s, b) < 0.02, key
            assert compare.max_relative_error(r, b) < 0.02 and compare.max_relative_error(n, b) < 0.02, key
print("interpreted fused int4 kernel ok")
"""


def test_the_fused_int4_kernel_equals_its_reference_in_tritons_interpreter():
    """Every flavour of fused_int4_gemv (plain, norm, norm with the layer's bias, residual, residual with the output's
    norm, the SiLU prologue, the SiLU epilogue after the norm prologue or none, the rotary epilogue with and without
    a bias: q and both caches) on shapes with row-block tails, lanes past K, several loop steps and group sizes 32-128,
    within bf16 of the reference; a swapped nibble order, gate and up crossed, and cos and sin swapped fail the same
    comparison; and the fused step of a tiny int4-triton Llama and Qwen2 with its products through the kernel (also
    with the norm in o's epilogue, with it the SiLU in gate_up's epilogue, and with the rotary in qkv's too; the
    rotary, the attention and the bf16 LM head through their references; an int4-triton-head Llama's int4 head
    through the kernel too) against the reference step and the unfused int4 step; with l2_prefetch, the plain, gate_up
    and rotary products bit for bit. In a fresh process with TRITON_INTERPRET=1."""
    from conftest import run_interpreted

    run_interpreted(INTERPRETED_CHECKS, "interpreted fused int4 kernel ok", timeout_s=1800)  # 19 min on 2 CPUs


# ------------------------------------------------------------- Triton's offline compiler for sm_90, no GPU

def _int4_products(key):
    """(name, K, N, flavour) of the int4 products of a model's fused int4 steps: the four of the default step, the
    norm-epilogue arm's o, the SiLU-epilogue arm's gate_up and down, qkv with the rotary epilogue, and the
    epilogue-norms arm's qkv with the rotary epilogue and no prologue and down with the next norm in its epilogue."""
    c = models.load_spec(key).config
    hidden, inter, heads, kv = (c["hidden_size"], c["intermediate_size"], c["num_attention_heads"],
                                c["num_key_value_heads"])
    D = hidden // heads
    return [("qkv", hidden, (heads + 2 * kv) * D, "norm_bias" if c["model_type"] == "qwen2" else "norm"),
            ("o", heads * D, hidden, "residual"), ("o_norm", heads * D, hidden, "residual_norm"),
            ("gate_up_norm", hidden, 2 * inter, "norm"), ("down_silu", inter, hidden, "silu_residual"),
            ("gate_up_silu", hidden, 2 * inter, "plain_gate_up"), ("down", inter, hidden, "residual"),
            ("qkv_rotary", hidden, (heads + 2 * kv) * D, ("norm_bias" if c["model_type"] == "qwen2" else "norm")
             + "_rotary"),
            ("qkv_rotary_plain", hidden, (heads + 2 * kv) * D, ("bias" if c["model_type"] == "qwen2" else "plain")
             + "_rotary"), ("down_norm", inter, hidden, "residual_norm")]


@pytest.mark.parametrize("pdl", [False, True, "early"])
def test_the_fused_int4_kernel_compiles_for_sm90_as_designed(monkeypatch, pdl):
    """Every int4 product of the three models' fused int4 step, compiled offline for sm_90 by this Triton on two
    of the int4 GEMV's configs: 16-byte loads of the packed words, no register spills; with PDL one wait after
    the first step's weight loads and one trigger after the loop (early trigger: before any load), none without."""
    pytest.importorskip("triton")
    from test_fused import _sm90

    from decodegap.kernels.fused_int4 import signature, source as int4_source

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(int4_source, "_COMPILED", {})
    kernel = int4_source.build()
    seen = {}
    for key in ("llama-3.1-8b", "qwen2.5-7b"):
        for name, K, N, flavour in _int4_products(key):
            for block_n, sub, warps in ((8, 1, 4), (4, 2, 2)):
                flags = signature.constexprs(K, N, flavour, (block_n, sub, warps), models.load_spec(key).config)
                cell = tuple(sorted(flags.items()))
                if cell not in seen:
                    seen[cell] = _sm90(kernel, signature.ARG_TYPES, flags, warps, pdl)
                ptx, usage = seen[cell]
                what = (key, name, block_n, sub, warps, pdl)
                assert "ld.global" in ptx and ".v4.b32" in ptx and "LOCAL:0" in usage, (what, usage)
                lines = ptx.splitlines()
                waits = [i for i, line in enumerate(lines) if "griddepcontrol.wait" in line]
                triggers = [i for i, line in enumerate(lines) if "griddepcontrol.launch_dependents" in line]
                first_load = next(i for i, line in enumerate(lines) if "ld.global" in line)
                last_load = max(i for i, line in enumerate(lines) if "ld.global" in line and ".v4" in line)
                if pdl == "early":
                    assert len(waits) == 1 and len(triggers) == 1 and triggers[0] < first_load < waits[0], what
                elif pdl:
                    assert len(waits) == 1 and len(triggers) == 1 and first_load < waits[0] < triggers[0], what
                    # every 16-byte load (weights, x) issued before the trigger, but the output norm's reads of y
                    assert flags["OUT_NORM"] or last_load < triggers[0], what
                else:
                    assert not waits and not triggers, what
                assert ("atom.global.gpu.acq_rel.add" in ptx) == flags["OUT_NORM"], what
    assert len(seen) >= 10


@pytest.mark.parametrize("flavour", ["plain", "norm", "plain_gate_up", "norm_rotary"])
def test_the_int4_l2_prefetch_compiles_to_bulk_prefetches_before_the_wait(monkeypatch, flavour):
    """fused_int4_gemv_kernel with L2_BYTES, compiled offline for sm_90: one bulk L2 prefetch a packed row the program
    reads (BLOCK_N of them, paired rows included), all before PDL's wait, no register spills; none with L2_BYTES 0."""
    pytest.importorskip("triton")
    from test_fused import _sm90

    from decodegap.kernels import l2_prefetch
    from decodegap.kernels.fused_int4 import signature, source as int4_source

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(int4_source, "_COMPILED", {})
    monkeypatch.setattr(l2_prefetch, "_BUILT", {})
    kernel = int4_source.build()
    config = models.load_spec("llama-3.1-8b").config
    for l2_bytes, rows in ((0, 0), (1280, 8)):
        flags = dict(signature.constexprs(4096, 6144, flavour, (8, 1, 4), config), L2_BYTES=l2_bytes)
        ptx, usage = _sm90(kernel, signature.ARG_TYPES, flags, 4, "early")
        lines = ptx.splitlines()
        prefetches = [i for i, line in enumerate(lines) if "cp.async.bulk.prefetch.L2.global" in line]
        wait = next(i for i, line in enumerate(lines) if "griddepcontrol.wait" in line)
        assert len(prefetches) == rows and all(i < wait for i in prefetches), (flavour, l2_bytes, len(prefetches))
        assert "LOCAL:0" in usage


# ------------------------------------------------------------------------------------- on the GPU

def _product_error(name, K, N, flavour, use_pdl, config, gen, key="llama-3.1-8b") -> float:
    """One int4 product of the fused int4 step on the GPU, on `config` (None: the autotuned choice), against its
    reference (the int4 layer's rounding): the largest error relative to the reference's largest value (the rotary
    flavours: over q and the k and v rows written into the caches, model `key`'s heads at position 2048)."""
    x = torch.randn(2 * K if flavour.startswith("silu_residual") else K, generator=gen, device="cuda").bfloat16()
    w = (0.02 * torch.randn(N, K, generator=gen, device="cuda")).bfloat16()
    b = torch.randn(N, generator=gen, device="cuda").bfloat16() if "bias" in flavour.split("_") else None
    layer = Int4GemvLinear.from_weight(w, bias=b)
    nw = (1 + 0.1 * torch.randn(K, generator=gen, device="cuda")).bfloat16()
    res, on = (torch.randn(N, generator=gen, device="cuda").bfloat16() for _ in range(2))
    if flavour.endswith("_rotary"):
        rotary = rotary_args.random_rotary(models.load_spec(key).config, 2048, "cuda", gen)
        ref_rotary = rotary_args.with_own_caches(rotary)
        call, reference = flavours.flavour_product(flavour, nw, res, on, 1e-5, rotary=rotary,
                                                   reference_rotary=ref_rotary, pdl=use_pdl, config=config)
        q, q_ref = call(x, layer), reference(x, layer)
        got = torch.cat([t.reshape(-1) for t in (q, *rotary_args.rotary_rows(rotary))])
        ref = torch.cat([t.reshape(-1) for t in (q_ref, *rotary_args.rotary_rows(ref_rotary))])
    else:
        call, reference = flavours.flavour_product(flavour, nw, res, on, 1e-5, pdl=use_pdl, config=config)
        got, ref = call(x, layer), reference(x, layer)
    if flavour.endswith("residual_norm"):  # the output norm's row: what the o product hands the MLP
        got, ref = got[1], ref[1]
    assert got.shape == ref.shape, (name, got.shape, ref.shape)
    return ((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


@pytest.mark.gpu
@pytest.mark.parametrize("key", ["llama-3.1-8b", "qwen2.5-7b"])
def test_fused_int4_gemv_on_every_product_shape_on_the_gpu(key):
    """Each int4 product of the fused int4 step on the real shapes, with and without PDL where this GPU has it, on
    one config of the autotuner's (INT4_CONFIGS[0]: a compile per flavour, not the autotuner's 12; the tuned choice is
    what every measured session runs, and its in-run checks test it), against its reference (the int4 layer's
    rounding); the output norm leaves its counter at zero."""
    pdl = fused.pdl_unavailable("cuda") is None
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, K, N, flavour in _int4_products(key):
        for use_pdl in sorted({False, pdl}):
            err = _product_error(name, K, N, flavour, use_pdl, INT4_CONFIGS[0], gen, key)
            assert err < 1e-2, (key, name, use_pdl, err)
    assert fused.workspace("cuda")[1].abs().sum().item() == 0


@pytest.mark.gpu
def test_the_int4_l2_prefetch_changes_no_value_on_the_gpu():
    """fused_int4_gemv with l2_prefetch on Llama-3.1-8B's product shapes (qkv with its norm, gate_up with its norm,
    down with the SiLU prologue and the residual), the tuned config, with PDL where this GPU has it: bit for bit the
    product without it."""
    pdl = fused.pdl_unavailable("cuda") is None
    gen = torch.Generator(device="cuda").manual_seed(2)

    def rand(*shape, std=1.0):
        return (std * torch.randn(*shape, generator=gen, device="cuda")).bfloat16()

    nw, x = rand(4096), rand(4096)
    for w, xi, options in ((rand(6144, 4096, std=0.02), x, dict(norm_weight=nw, eps=1e-5)),
                           (rand(28672, 4096, std=0.02), x, dict(norm_weight=nw, eps=1e-5)),
                           (rand(4096, 14336, std=0.02), rand(2 * 14336), dict(silu_x=True, residual=rand(4096)))):
        layer = Int4GemvLinear.from_weight(w)
        want = fused_int4.fused_int4_gemv(xi, layer, pdl=pdl, **options)
        got = fused_int4.fused_int4_gemv(xi, layer, pdl=pdl, l2_prefetch=True, **options)
        torch.cuda.synchronize()
        assert torch.equal(got, want), tuple(w.shape)


@pytest.mark.gpu
def test_fused_int4_gemv_on_every_config_and_the_tuned_choice_on_the_gpu():
    """Llama-3.1-8B's gate_up product (norm prologue) and its down product (SiLU prologue, K = 14336) on every config
    the autotuner tries, and once through the autotuner itself."""
    gen = torch.Generator(device="cuda").manual_seed(1)
    products = [p for p in _int4_products("llama-3.1-8b") if p[0] in ("gate_up_norm", "down_silu")]
    for name, K, N, flavour in products:
        for config in INT4_CONFIGS + (None,):
            err = _product_error(name, K, N, flavour, False, config, gen)
            assert err < 1e-2, (name, config, err)
