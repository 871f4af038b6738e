"""The RMSNorm left to the next product as a scale (kernels.fused.norm_scale, fused_gemv's out_scale and norm_scale,
the norm-scale lever): its references against HF's norm by hand, its refusals, and in Triton's interpreter the two
products against their references and a tiny model's step against the reference step; offline for sm_90 the kernel
with both flags compiles without spills; on the GPU (marker gpu) the bf16 and int4 products on Llama-3.1-8B's
shapes."""

from __future__ import annotations

import pytest
import torch

from decodegap.harness import lean
from decodegap.kernels.fused import launch as fused, source as fused_kernels
from decodegap.kernels.fused.norm_scale import NormScale
from decodegap.kernels.fused.reference import output_scale_reference, rmsnorm_reference, scaled_linear_reference
from decodegap.kernels.fused.signature import GEMV_ARG_TYPES, GEMV_OFF


def test_the_scale_reference_is_the_norm_by_hand_with_its_own_rounding():
    """y = (3, 4) (sum of squares 25, mean 12.5), weight (2, 1), eps 0: x_scaled = (6, 4), 1 / rms = 1 / sqrt(12.5);
    a weight row (1, 1) gives (6 + 4) / sqrt(12.5) = 2.828..., which HF's norm then product give too (to bf16)."""
    y, g = torch.tensor([3.0, 4.0]).bfloat16(), torch.tensor([2.0, 1.0]).bfloat16()
    scale = output_scale_reference(y, g, 0.0)
    assert scale.x_scaled.tolist() == [6.0, 4.0] and scale.squares.tolist() == [25.0] and scale.eps == 0.0
    w = torch.ones(1, 2).bfloat16()
    got = scaled_linear_reference(scale, w)
    assert got.item() == pytest.approx(10 / 12.5 ** 0.5, rel=2 ** -8)
    hf = torch.nn.functional.linear(rmsnorm_reference(y, g, 0.0), w)
    assert got.item() == pytest.approx(hf.item(), rel=2 ** -7)
    # the squares may come in parts (one a row block): only their sum counts
    parts = NormScale(scale.x_scaled, torch.tensor([9.0, 16.0]), 0.0)
    assert torch.equal(scaled_linear_reference(parts, w), got)
    with_bias = scaled_linear_reference(scale, w, torch.tensor([1.0]).bfloat16())
    assert with_bias.item() == pytest.approx(1 + 10 / 12.5 ** 0.5, rel=2 ** -8)


def test_the_scale_reference_stays_within_bf16_of_hfs_norm_on_random_rows():
    gen = torch.Generator().manual_seed(0)
    y = (2 * torch.randn(512, generator=gen)).bfloat16()
    g = (1 + 0.1 * torch.randn(512, generator=gen)).bfloat16()
    w = (0.05 * torch.randn(256, 512, generator=gen)).bfloat16()
    got = scaled_linear_reference(output_scale_reference(y, g, 1e-5), w).float()
    hf = torch.nn.functional.linear(rmsnorm_reference(y, g, 1e-5), w).float()
    assert (got - hf).abs().max() / hf.abs().max() < 2 ** -7


def test_the_lever_asks_for_a_norm_made_in_an_epilogue():
    with pytest.raises(ValueError, match="norm_scale"):
        lean.kernel_set(("fused", "attention", "norm_scale"))
    assert "norm_scale" in lean.kernel_set(("fused", "attention", "norm_epilogue", "norm_scale"))
    assert fused.FusedOps.of_kernels(("fused", "norm_epilogue", "norm_scale")).norm_scale
    assert not fused.FusedOps.of_kernels(("fused", "norm_epilogue")).norm_scale
    ops = fused.FusedOps(norm_scale=True)
    assert ops._out((torch.ones(2), 1e-5)).keys() == {"out_scale"} and ops._out(None) == {}
    assert fused.FusedOps()._out((torch.ones(2), 1e-5)).keys() == {"out_norm"}
    scale = NormScale(torch.ones(4).bfloat16(), torch.ones(1), 1e-5)
    with pytest.raises(ValueError, match="int4-triton layer"):  # not a tensor: the int4 product, which names it
        fused.product(scale, object())


def test_a_scale_products_config_is_looked_up_as_a_scale_product(monkeypatch):
    """A SCALE_CONFIGS entry serves the norm-scale products of its weight alone: gemv_config(scale=True) and the bench's
    first candidate of a scale flavour take it, the same weight's other products keep GEMV_CONFIGS's, and fused_gemv
    asks for it whenever out_scale or norm_scale is given (a stand-in for gemv_config stops the call before Triton)."""
    from decodegap.kernels.fused import configs

    monkeypatch.setattr(configs, "_interpreted", lambda: False)  # the tables, not the interpreter's small config
    own = configs.GemvConfig(8, 512, warps=2)
    monkeypatch.setitem(configs.SCALE_CONFIGS, (4608, 3584), own)
    assert configs.gemv_config(4608, 3584, scale=True) == own
    assert configs.gemv_config(4608, 3584) == configs.GEMV_CONFIGS[(4608, 3584)] != own
    assert configs.flavour_candidates(4608, 3584, "bias_scaled")[0] == own
    assert configs.flavour_candidates(4608, 3584, "norm_bias")[0] == configs.GEMV_CONFIGS[(4608, 3584)]
    # every reader of the tables by flavour (the bench's summary, the megakernel cell's products) looks up the same
    assert configs.gemv_config(4608, 3584, **configs.flavour_lookup("bias_scaled")) == own
    assert configs.flavour_lookup("plain_rotary") == dict(plain=False, rotary=True, scale=False)
    assert configs.flavour_lookup("plain") == dict(plain=True, rotary=False, scale=False)
    asked = []

    def stand_in(N, K, plain=False, rotary=False, scale=False):
        asked.append(scale)
        raise LookupError("stop before the launch")

    monkeypatch.setattr(fused, "gemv_config", stand_in)
    x, w = torch.randn(64).bfloat16(), torch.randn(32, 64).bfloat16()
    for options, scale in ((dict(norm_scale=NormScale(x, torch.ones(4), 1e-5)), True),
                           (dict(out_scale=(torch.ones(32).bfloat16(), 1e-5)), True), (dict(residual=w[:, 0]), False)):
        with pytest.raises(LookupError):
            fused.fused_gemv(x, w, **options)
        assert asked.pop() is scale


def test_fused_gemv_refuses_a_scale_beside_another_norm_before_it_launches():
    x, w = torch.ones(8).bfloat16(), torch.ones(4, 8).bfloat16()
    scale = NormScale(x, torch.ones(1), 1e-5)
    with pytest.raises(ValueError, match="norm_scale replaces the norm prologue"):
        fused.fused_gemv(x, w, norm_weight=torch.ones(8).bfloat16(), norm_scale=scale)
    with pytest.raises(ValueError, match="at most 4096 sums of squares"):
        fused.fused_gemv(x, w, norm_scale=NormScale(x, torch.ones(4097), 1e-5))
    with pytest.raises(ValueError, match="out_scale is implemented"):
        fused.fused_gemv(x, torch.ones(8, 8).bfloat16(), gate_up=True, out_scale=(torch.ones(4).bfloat16(), 1e-5))


PREAMBLE = """
import torch
from decodegap import arms, compare
from decodegap.harness import lean, models
from decodegap.kernels.fused import configs as fused_configs, launch as fused, reference as fused_reference
from decodegap.kernels.fused.norm_scale import NormScale
from decodegap.kernels.fused.reference import output_scale_reference, scaled_linear_reference

def rand(*shape, std=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (std * torch.randn(*shape, generator=gen)).bfloat16()

def err(got, ref):
    return ((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
"""
"""What both interpreted scripts below start with: their imports, random bf16 operands and the error they compare."""

INTERPRETED = PREAMBLE + """
C = fused_configs.GemvConfig
for K, N in [(100, 37), (64, 48)]:
    x, res, nw, w = rand(K, std=2.0, seed=1), rand(N, seed=2), rand(N, seed=3), rand(N, K, std=0.1, seed=4)
    for cfg in (C(8, 32), C(4, 64, split_k=2), C(16, 16, split_k=3)):  # the producer splits K where its config does
        y, scale = fused.fused_gemv(x, w, residual=res, out_scale=(nw, 1e-5), config=cfg)
        ref_y = fused_reference.gemv_residual_reference(x, w, res)
        ref = output_scale_reference(ref_y, nw, 1e-5)
        assert err(y, ref_y) < 1e-2, ("y", K, N, cfg)
        assert torch.equal(scale.x_scaled, (y.float() * nw.float()).bfloat16()), ("x_scaled", cfg)
        assert scale.squares.numel() == -(-N // cfg.block_n), ("one sum a row block", cfg)
        assert abs(scale.squares.sum().item() / y.float().pow(2).sum().item() - 1) < 1e-5, ("squares", cfg)
        assert fused.workspace("cpu")[1].abs().sum() == 0, ("split-K counters left set", cfg)
    # the consumer: plain, with a bias, and gate_up with its SiLU epilogue, over split-K too
    scale = output_scale_reference(rand(K, std=2.0, seed=5), rand(K, seed=6), 1e-5)
    parts = NormScale(scale.x_scaled, torch.stack([scale.squares[0] * 0.25, scale.squares[0] * 0.75]), 1e-5)
    b, wgu = rand(N, seed=7), rand(2 * N, K, std=0.1, seed=8)
    for cfg in (C(8, 32), C(4, 64, split_k=2)):
        assert err(fused.product(parts, w, config=cfg), scaled_linear_reference(scale, w)) < 1e-2, ("plain", cfg)
        got = fused.product(parts, w, bias=b, config=cfg)
        assert err(got, scaled_linear_reference(scale, w, b)) < 1e-2, ("bias", cfg)
        if cfg.split_k == 1:
            got = fused.product(parts, wgu, gate_up=True, config=cfg)
            ref = fused_reference.silu_mul_reference(scaled_linear_reference(scale, wgu))
            assert err(got, ref) < 2e-2, ("gate_up", cfg)
    # a scale of 4 x the squares is half the product: the kernel reads them, not a norm of x_scaled
    four = NormScale(scale.x_scaled, scale.squares * 4, 0.0)
    half = fused.product(four, w, config=C(8, 32)).float()
    assert err(half * 2, fused.product(NormScale(scale.x_scaled, scale.squares, 0.0), w, config=C(8, 32))) < 1e-2

# the lean decoder's step with every norm but the first made in an epilogue as a scale, through the kernels: the
# reference step's logits (HF's rounding) and those of the same step with the norms made by the last row block
for key in ("llama-tiny", "qwen2-tiny"):
    model = models.build_model(models.load_spec(key), device="cpu", dtype="bf16")
    models.randomise_(model, seed=1, std=0.2)
    epilogues = ("fused", "attention", "norm_epilogue", "head_norm_epilogue", "input_norm_epilogue")
    with torch.inference_mode():
        ref = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention"))
        ref.lean.fused = fused.FusedOps(reference=True)
        normed = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=epilogues)
        scaled = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=epilogues + ("norm_scale",))
        assert scaled.lean.fused.norm_scale and not normed.lean.fused.norm_scale
        for _ in range(3):
            a, b, c = ref.step().float(), normed.step().float(), scaled.step().float()
            assert compare.max_relative_error(c, a) < 0.02, (key, compare.max_relative_error(c, a))
            assert compare.max_relative_error(c, b) < 0.02, key
            assert not torch.equal(c, b), key  # the scale's own rounding: the lever runs
print("interpreted norm scale ok")
"""


def test_the_norm_scale_products_and_step_equal_their_references_in_tritons_interpreter():
    """In a fresh process under TRITON_INTERPRET=1: the producer (the residual product with out_scale, unsplit and
    split along K) writes y, y times the norm weight exactly as rounded, and one sum of squares a row block summing to
    y's; the consumer (plain, with a bias, gate_up with SiLU; split-K too) equals scaled_linear_reference with its
    squares in two parts, and a scale of four times the squares halves it; a tiny Llama's and Qwen2's step with every
    norm in an epilogue as a scale stays within 2 % of the reference step and of the same step with the norms whole."""
    from conftest import run_interpreted

    run_interpreted(INTERPRETED, "interpreted norm scale ok")


INTERPRETED_INT4 = PREAMBLE + """
from decodegap.kernels.fused_int4 import launch as fused_int4
from decodegap.kernels.int4_gemv.layer import Int4GemvLinear
from decodegap.quant import paths as quant

for K, N, G in [(64, 37, 32), (256, 24, 64)]:
    x, res, on = rand(K, std=2.0, seed=1), rand(N, seed=2), rand(N, seed=3)
    w, b = rand(N, K, std=0.1, seed=4), rand(N, seed=5)
    plain, biased = Int4GemvLinear.from_weight(w, group_size=G), Int4GemvLinear.from_weight(w, bias=b, group_size=G)
    y, scale = fused_int4.fused_int4_gemv(x, plain, residual=res, out_scale=(on, 1e-5))
    ref_y = fused_reference.gemv_residual_reference(x, plain, res)
    assert err(y, ref_y) < 1e-2 and torch.equal(scale.x_scaled, (y.float() * on.float()).bfloat16()), (K, N)
    assert abs(scale.squares.sum().item() / y.float().pow(2).sum().item() - 1) < 1e-5, (K, N)
    gu = rand(2 * K, std=2.0, seed=6)
    y2, scale2 = fused_int4.fused_int4_gemv(gu, plain, silu_x=True, residual=res, out_scale=(on, 1e-5))
    assert err(y2, fused_reference.silu_gemv_residual_reference(gu, plain, res)) < 1e-2, (K, N)
    ns = output_scale_reference(rand(K, std=2.0, seed=7), rand(K, seed=8), 1e-5)
    parts = NormScale(ns.x_scaled, torch.stack([ns.squares[0] * 0.5, ns.squares[0] * 0.5]), 1e-5)
    for layer in (plain, biased):
        assert err(fused.product(parts, layer), scaled_linear_reference(ns, layer)) < 1e-2, (K, N)
    pair = Int4GemvLinear.from_weight(rand(2 * N, K, std=0.1, seed=9), group_size=G)
    got = fused.product(parts, pair, gate_up=True)
    assert err(got, fused_reference.silu_mul_reference(scaled_linear_reference(ns, pair))) < 2e-2, (K, N)
    four = NormScale(ns.x_scaled, ns.squares * 4, 0.0)  # the kernel reads the squares: 4x halves the product
    half = fused.product(four, plain).float() * 2
    assert err(half, fused.product(NormScale(ns.x_scaled, ns.squares, 0.0), plain)) < 1e-2, (K, N)

# the rotary epilogue reading the scale (qkv of 2 q heads and 1 kv head of 16, at position 5)
for K, G in [(64, 32)]:
    ns = output_scale_reference(rand(K, std=2.0, seed=11), rand(K, seed=12), 1e-5)
    qkv = Int4GemvLinear.from_weight(rand(64, K, std=0.1, seed=14), group_size=G)
    cos, sin, pos = rand(9, 16, seed=15), rand(9, 16, seed=16), torch.tensor([5])
    caches = [torch.zeros(1, 1, 9, 16, dtype=torch.bfloat16) for _ in range(4)]
    q = fused.product(ns, qkv, rotary=(cos, sin, pos, caches[0], caches[1], 2, 1))
    q_ref = fused_reference.rotary_cache_reference(scaled_linear_reference(ns, qkv), cos, sin, pos, caches[2],
                                                   caches[3], 2, 1).reshape(-1)
    assert err(q, q_ref) < 1e-2 and err(caches[0], caches[2]) < 1e-2 and err(caches[1], caches[3]) < 1e-2

# tiny int4 models' step with every norm but the first as a scale (the int4 norm-scale lever's kernels), through the
# kernels: the reference step (HF's rounding) and the same step with the norms whole
for key, path in (("llama-tiny", "int4-triton-head"), ("qwen2-tiny", "int4-triton")):
    model = models.build_model(models.load_spec(key), device="cpu", dtype="bf16")
    models.randomise_(model, seed=1, std=0.2)
    quant.quantise_model_(model, path, reference=True)
    kernels = arms.ARM_KERNELS["lean_fused_all_norm_scale_graph"]
    whole = tuple(k for k in kernels if k not in ("norm_scale", "pdl", "early_products", "next_token"))
    with torch.inference_mode():
        ref = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention"))
        ref.lean.fused = fused.FusedOps(reference=True)
        normed = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=whole)
        scaled = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=whole + ("norm_scale",))
        assert scaled.lean.fused.norm_scale and scaled.lean.fused.input_norm_in_epilogue
        for _ in range(3):  # the same kernels with the norms whole are 2.5 % from the reference by step 3 here
            a, b, c = ref.step().float(), normed.step().float(), scaled.step().float()
            assert compare.max_relative_error(c, a) < 0.03, (key, compare.max_relative_error(c, a))
            assert compare.max_relative_error(c, b) < 0.02 and not torch.equal(c, b), key
print("interpreted int4 norm scale ok")
"""


def test_the_int4_norm_scale_products_and_step_equal_their_references_in_tritons_interpreter():
    """The fused int4 product with the scale, under TRITON_INTERPRET=1: the producer (the residual, and the SiLU
    prologue) writes y times the norm weight exactly and squares summing to y's; the consumer (plain, with the
    layer's bias, gate_up, and the rotary epilogue with its cache rows) equals scaled_linear_reference; four times
    the squares halve it; tiny int4 Llama (its LM head int4 too) and Qwen2 steps with the int4 lever's kernels (no
    PDL, which the interpreter does not run) stay within 2 % of the same kernels with the norms made whole, and within
    3 % of the reference step (as near as those kernels are: 2.5 % by the third step of these random weights)."""
    from conftest import run_interpreted

    run_interpreted(INTERPRETED_INT4, "interpreted int4 norm scale ok")


@pytest.mark.parametrize("pdl", [False, "early"])
def test_the_scale_flags_compile_for_sm90_without_spills(monkeypatch, pdl):
    """fused_gemv_kernel with OUT_SCALE (Llama-3.1-8B's o: split-K, the residual) and with SCALE_IN (its gate_up
    with SiLU in the epilogue, and the LM head's shape), compiled offline for sm_90: no local memory, and the
    producer takes no atomic but split-K's."""
    pytest.importorskip("triton")
    from decodegap.kernels import offline

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(fused_kernels, "_COMPILED", {})
    gemv, _ = fused._kernels()
    types = GEMV_ARG_TYPES
    base = dict(NORM=False, XBLOCK=16, BIAS=False, RESIDUAL=False, GATE_UP=False, SILU_X=False, OUT_NORM=False,
                PBLOCK=16, YBLOCK=16, ROTARY=False, PAIRED=False, HEAD_D=128, NQ=32, NKV=8, **GEMV_OFF,
                USE_PDL=bool(pdl), EARLY_TRIGGER=pdl == "early")
    cases = [(dict(base, BLOCK_N=4, BLOCK_K=512, SPLIT_K=2, RESIDUAL=True, OUT_SCALE=True), 4, True),
             (dict(base, BLOCK_N=16, BLOCK_K=512, SPLIT_K=1, GATE_UP=True, PAIRED=True, SCALE_IN=True, QBLOCK=512),
              4, False),
             (dict(base, BLOCK_N=8, BLOCK_K=512, SPLIT_K=1, SCALE_IN=True, QBLOCK=1024), 2, False)]
    for flags, warps, split in cases:
        compiled = offline.compile_sm90(gemv, types, flags, warps, pdl=bool(pdl))
        usage = offline.cuobjdump(compiled, "--dump-resource-usage")
        assert "LOCAL:0" in usage, (flags, usage)
        assert ("atom.global" in compiled.asm["ptx"]) == split, flags


@pytest.mark.gpu
@pytest.mark.parametrize("pdl", [False, True, "early"])
def test_the_norm_scale_products_on_llamas_shapes_equal_their_references_on_the_gpu(pdl):
    """Llama-3.1-8B's products of the norm-scale lever at their table configs on the GPU: o and down (split-K where
    their configs split) with out_scale, then gate_up (SiLU in down's prologue: plain [gate; up]), qkv and the LM head
    reading the scale, each against its reference (bf16 sums in another order: 1e-2 of the largest output)."""
    from decodegap.harness import models
    from decodegap.kernels.fused.reference import gemv_residual_reference, silu_gemv_residual_reference

    if pdl and fused.pdl_unavailable("cuda"):
        pytest.skip(fused.pdl_unavailable("cuda"))
    c = models.load_spec("llama-3.1-8b").config
    H, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    gen = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape, std=1.0):
        return (std * torch.randn(*shape, generator=gen, device="cuda")).bfloat16()

    launch = dict(pdl=bool(pdl), early_trigger=pdl == "early")
    x, res, nw = rand(H), rand(H), (1 + 0.1 * torch.randn(H, generator=gen, device="cuda")).bfloat16()
    w_o, w_down = rand(H, H, std=0.02), rand(H, I, std=0.02)
    gu = rand(2 * I)

    def err(got, ref):
        return ((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()

    for y, scale, ref_y in (fused.fused_gemv(x, w_o, residual=res, out_scale=(nw, 1e-5), **launch)
                            + (gemv_residual_reference(x, w_o, res),),
                            fused.fused_gemv(gu, w_down, silu_x=True, residual=res, out_scale=(nw, 1e-5), **launch)
                            + (silu_gemv_residual_reference(gu, w_down, res),)):
        assert err(y, ref_y) < 1e-2
        ref = output_scale_reference(y, nw, 1e-5)
        assert torch.equal(scale.x_scaled, ref.x_scaled)
        assert abs(scale.squares.sum().item() / ref.squares.item() - 1) < 1e-4
        for w in (rand(2 * I, H, std=0.02), rand((c["num_attention_heads"] + 2 * c["num_key_value_heads"])
                                                  * (H // c["num_attention_heads"]), H, std=0.02), rand(V, H, std=0.02)):
            assert err(fused.product(scale, w, **launch), scaled_linear_reference(ref, w)) < 1e-2, w.shape
    torch.cuda.synchronize()


@pytest.mark.parametrize("pdl", [False, "early"])
def test_the_int4_scale_flags_compile_for_sm90_without_spills(monkeypatch, pdl):
    """fused_int4_gemv_kernel with OUT_SCALE (Llama-3.1-8B's down with the residual) and with SCALE_IN (its gate_up
    with the SiLU epilogue, and qkv with the rotary epilogue), compiled offline for sm_90: no local memory, and no
    atomic (the scale's producer waits for no other program)."""
    pytest.importorskip("triton")
    from decodegap.harness import models
    from decodegap.kernels import offline
    from decodegap.kernels.fused_int4 import signature, source as int4_source

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(int4_source, "_COMPILED", {})
    kernel = int4_source.build()
    config = models.load_spec("llama-3.1-8b").config
    cases = [(4096, 14336, "residual", dict(OUT_SCALE=True)), (4096, 28672, "plain_gate_up", dict(SCALE_IN=True)),
             (4096, 6144, "plain_rotary", dict(SCALE_IN=True, QBLOCK=1024))]
    for K, N, flavour, scale in cases:
        flags = dict(signature.constexprs(K, N, flavour, (8, 1, 2), config), **scale, USE_PDL=bool(pdl),
                     EARLY_TRIGGER=pdl == "early")
        compiled = offline.compile_sm90(kernel, signature.ARG_TYPES, flags, 2, pdl=bool(pdl))
        assert "LOCAL:0" in offline.cuobjdump(compiled, "--dump-resource-usage"), (flavour, scale)
        assert "atom.global" not in compiled.asm["ptx"], (flavour, scale)


@pytest.mark.gpu
@pytest.mark.parametrize("pdl", [False, "early"])
def test_the_int4_norm_scale_products_on_llamas_shapes_equal_their_references_on_the_gpu(pdl):
    """Llama-3.1-8B's int4 products of the int4 norm-scale lever on the GPU, at their table configs: o and down (down
    with SiLU(gate) * up as its prologue too) with out_scale, then gate_up with the SiLU epilogue, qkv with the rotary
    epilogue and its cache rows, and the int4 LM head reading the scale, each against its reference on the same int4
    layer (1e-2 of the largest output; 2e-2 after the SiLU, as in the interpreter)."""
    from decodegap.harness import models
    from decodegap.kernels.fused import reference as ref_kernels
    from decodegap.kernels.fused_int4 import launch as fused_int4
    from decodegap.kernels.int4_gemv.layer import Int4GemvLinear

    if pdl and fused.pdl_unavailable("cuda"):
        pytest.skip(fused.pdl_unavailable("cuda"))
    c = models.load_spec("llama-3.1-8b").config
    H, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    NQ, NKV = c["num_attention_heads"], c["num_key_value_heads"]
    D, L = H // NQ, 64
    gen = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape, std=1.0):
        return (std * torch.randn(*shape, generator=gen, device="cuda")).bfloat16()

    def int4(n, k):
        return Int4GemvLinear.from_weight(rand(n, k, std=0.02))

    def err(got, ref):
        return ((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()

    launch = dict(pdl=bool(pdl), early_trigger=pdl == "early")
    x, res, nw = rand(H), rand(H), (1 + 0.1 * torch.randn(H, generator=gen, device="cuda")).bfloat16()
    o, down, gu = int4(H, H), int4(H, I), rand(2 * I)
    gate_up, qkv, head = int4(2 * I, H), int4((NQ + 2 * NKV) * D, H), int4(V, H)
    cos, sin, pos = rand(L, D), rand(L, D), torch.tensor([5], device="cuda")
    for y, scale, ref_y in (fused_int4.fused_int4_gemv(x, o, residual=res, out_scale=(nw, 1e-5), **launch)
                            + (ref_kernels.gemv_residual_reference(x, o, res),),
                            fused_int4.fused_int4_gemv(gu, down, silu_x=True, residual=res, out_scale=(nw, 1e-5),
                                                       **launch)
                            + (ref_kernels.silu_gemv_residual_reference(gu, down, res),)):
        assert err(y, ref_y) < 1e-2
        ref = output_scale_reference(y, nw, 1e-5)
        assert torch.equal(scale.x_scaled, ref.x_scaled)
        assert abs(scale.squares.sum().item() / ref.squares.item() - 1) < 1e-4
        got = fused.product(scale, gate_up, gate_up=True, **launch)
        assert err(got, ref_kernels.silu_mul_reference(scaled_linear_reference(ref, gate_up))) < 2e-2
        assert err(fused.product(scale, head, **launch), scaled_linear_reference(ref, head)) < 1e-2
        caches = [torch.zeros(1, NKV, L, D, dtype=torch.bfloat16, device="cuda") for _ in range(4)]
        q = fused.product(scale, qkv, rotary=(cos, sin, pos, caches[0], caches[1], NQ, NKV), **launch)
        q_ref = ref_kernels.rotary_cache_reference(scaled_linear_reference(ref, qkv), cos, sin, pos, caches[2],
                                                   caches[3], NQ, NKV).reshape(-1)
        assert err(q, q_ref) < 1e-2 and err(caches[0], caches[2]) < 1e-2 and err(caches[1], caches[3]) < 1e-2
    torch.cuda.synchronize()
