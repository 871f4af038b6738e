"""Custom decode kernels: the PyTorch references against independent computations (always), the Triton
kernels against the references in Triton's CPU interpreter where Triton is installed, and on the GPU on the
real shapes (gpu marker)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from decodegap.kernels import step as kernels
from decodegap.harness import lean, models

SHAPES = {"qwen2.5-7b": (28, 4), "mistral-7b-v0.3": (32, 8), "llama-3.1-8b": (32, 8)}  # (Hq, Hkv), head_dim 128


def _qkv(Hq, Hkv, L, D, dtype=torch.bfloat16, device="cpu", seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(*s, generator=gen) for s in ((Hq, D), (Hkv, L, D), (Hkv, L, D)))
    return q.to(device, dtype), k.to(device, dtype), v.to(device, dtype)


@pytest.mark.parametrize("length", [1, 37, 64])
def test_attention_reference_equals_sdpa_math_on_the_valid_prefix(length):
    q, k, v = _qkv(8, 2, 64, 16, dtype=torch.float32)
    ref = F.scaled_dot_product_attention(q[None, :, None], k[None, :, :length], v[None, :, :length], enable_gqa=True)
    got = kernels.decode_attention_reference(q, k, v, length, 16 ** -0.5)
    assert torch.allclose(got, ref[0, :, 0], atol=1e-5)


def test_attention_reference_ignores_positions_past_the_length():
    q, k, v = _qkv(8, 2, 64, 16, dtype=torch.float32)
    k2, v2 = k.clone(), v.clone()
    k2[:, 40:], v2[:, 40:] = 1e4, -1e4  # garbage past the valid prefix
    assert torch.equal(kernels.decode_attention_reference(q, k, v, 40, 0.25),
                       kernels.decode_attention_reference(q, k2, v2, 40, 0.25))


def test_gemv_reference_is_the_matrix_product():
    gen = torch.Generator().manual_seed(1)
    x, w = torch.randn(1, 1, 5, generator=gen), torch.randn(3, 5, generator=gen)
    assert torch.allclose(kernels.gemv_reference(x, w)[0, 0], torch.stack([(w[n] * x[0, 0]).sum() for n in range(3)]))


def test_split_size_by_hand():
    assert kernels.split_size(16384, 8) == 512  # 2 x 132 / 8 = 33 programs per head -> 16384 / 33 -> 497 -> 512
    assert kernels.split_size(2083, 4) == 32  # 66 per head -> 2083 / 66 -> 32
    assert kernels.split_size(100, 8, block=64) == 64  # never below the block
    # the kv-together levers' block: one block a program at the target cell's cache (ctx 2048 and a few dozen steps)
    assert kernels.split_size(2088, 8, kernels.KV_TOGETHER_BLOCK) == kernels.KV_TOGETHER_BLOCK == 64
    assert kernels.attention_blocks(True) == dict(kv_together=True, block=64) and kernels.attention_blocks(False) == {}


def test_kernels_without_triton_or_a_gpu_say_why(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    reason = kernels.available("cpu")
    assert reason in ("package triton not installed", "Triton kernels need a CUDA device (or TRITON_INTERPRET=1)")


# --------------------------------------------------------------------- Triton's interpreter, on the CPU

INTERPRETED_CHECKS = """
import torch
from decodegap.kernels import step as kernels
from decodegap.harness import lean, models

def qkv(Hq, Hkv, L, D):
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(*s, generator=gen).bfloat16() for s in ((Hq, D), (Hkv, L, D), (Hkv, L, D))]

kernels.prepare(("gemv",))
assert "attention" not in kernels._COMPILED  # built only when asked (decode.step_state asks before compiling)
kernels.prepare(("attention",))
assert "attention" in kernels._COMPILED
for Hq, Hkv, L, length in [(8, 2, 100, 77), (7, 1, 64, 64), (28, 4, 300, 1)]:
    q, k, v = qkv(Hq, Hkv, L, 16)
    got = kernels.decode_attention(q, k, v, torch.tensor([length]), 0.25, split=32, block=16)
    ref = kernels.decode_attention_reference(q, k, v, length, 0.25)
    assert (got.float() - ref.float()).abs().max() < 2e-2, (Hq, Hkv, L, length)
    # one kernel: the last program of each kv head merges its splits; the same sums in the same order as the merge
    # kernel's, so the same output, and its counters left at zero
    one = kernels.decode_attention(q, k, v, torch.tensor([length]), 0.25, split=32, block=16, merged=True)
    assert (one.float() - got.float()).abs().max() < 1e-2, (Hq, Hkv, L, length)
    assert kernels.merge_counters("cpu").abs().sum() == 0
    # V loaded beside K: the same loads and the same sums, so the same output as the default order, bit for bit
    both = kernels.decode_attention(q, k, v, torch.tensor([length]), 0.25, split=32, block=16, kv_together=True)
    assert torch.equal(both, got), (Hq, Hkv, L, length)
    # another launch (warps, stages): the same program, so the same output
    other = kernels.decode_attention(q, k, v, torch.tensor([length]), 0.25, split=32, block=16, warps=2, stages=1)
    assert torch.equal(other, got), (Hq, Hkv, L, length)
q, k, v = qkv(8, 2, 2048, 16)  # a cache far longer than the live length: its splits share the 77 positions
got = kernels.decode_attention(q, k, v, torch.tensor([77]), 0.25, block=16)
assert (got.float() - kernels.decode_attention_reference(q, k, v, 77, 0.25).float()).abs().max() < 2e-2
gen = torch.Generator().manual_seed(2)
x, w = torch.randn(1, 1, 100, generator=gen).bfloat16(), (0.1 * torch.randn(37, 100, generator=gen)).bfloat16()
got, ref = kernels.gemv(x, w), kernels.gemv_reference(x, w)
assert got.shape == (1, 1, 37) and (got.float() - ref.float()).abs().max() < 2e-2 * ref.abs().max()
model = models.build_model(models.load_spec("qwen2-tiny"), device="cpu")
models.randomise_(model, seed=3, std=0.2)
with torch.inference_mode():
    plain = lean.LeanStep(model, 12, 16, feedback=False)
    fast = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=True)
    attn = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("attention",))  # cuBLAS projections
    one = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("attention", "merged_attention"))
    kv = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("attention", "kv_together"))
    for _ in range(3):
        a, b, c, e = plain.step().float(), fast.step().float(), attn.step().float(), one.step().float()
        assert (a - b).abs().max() < 0.05 * a.abs().max() and (a - c).abs().max() < 0.05 * a.abs().max()
        assert (e - c).abs().max() < 0.02 * a.abs().max()  # the attention in one kernel: the two-kernel step's
        assert (kv.step().float() - c).abs().max() < 0.02 * a.abs().max()  # V beside K, blocks of 64
    # a batch of 3 sequences: the split-KV attention reads them as 3 x kv_heads heads, against SDPA under the mask
    plain3 = lean.LeanStep(model, 12, 16, feedback=False, batch=3)
    attn3 = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("attention",), batch=3)
    for _ in range(3):
        a, c = plain3.step().float(), attn3.step().float()  # [3, 1, V]
        assert a.shape == c.shape and a.shape[0] == 3 and (a - c).abs().max() < 0.05 * a.abs().max()
        assert (a[0] - a[2]).abs().max() > 0.05 * a.abs().max()  # the sequences differ: a mix-up would show
from decodegap.quant import layers as quant_layers, paths as quant
if quant.unavailable_reason("int4-tinygemm", "cpu") is None:  # int4: tinygemm projections, split-KV attention
    quant.quantise_model_(model, "int4-tinygemm")
    with torch.inference_mode():
        plain = lean.LeanStep(model, 12, 16, feedback=False)
        fast = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=True)
        assert isinstance(fast.lean.layers[0].w_qkv, quant_layers.TinyGemmLinear)
        for _ in range(3):
            a, b = plain.step().float(), fast.step().float()
            assert (a - b).abs().max() < 0.05 * a.abs().max()
print("interpreted kernels ok")
"""


def test_the_split_kernel_is_given_a_launch_only_where_it_is_not_the_default(monkeypatch):
    """decode_attention passes num_warps and num_stages to the split kernel only for a launch other than Triton's
    defaults (SPLIT_WARPS, SPLIT_STAGES): a step at the default launch calls the kernel as before the launch sweep,
    which torch.compile traces without wrapping it in an autotuner. Stand-ins for Triton record each call."""
    import types

    calls = []

    class Kernel:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            return lambda *args, **kwargs: calls.append((self.name, kwargs))

    monkeypatch.setattr(kernels, "_triton", lambda: (types.SimpleNamespace(
        cdiv=lambda a, b: -(-a // b), next_power_of_2=lambda n: 1 << (max(1, n) - 1).bit_length()), None))
    monkeypatch.setattr(kernels, "_attention_kernels", lambda: (Kernel("split"), Kernel("merge")))
    q, k, v = _qkv(8, 2, 64, 16)
    for launch, expected in ((dict(), {}), (dict(warps=kernels.SPLIT_WARPS, stages=kernels.SPLIT_STAGES), {}),
                             (dict(warps=8, stages=1), dict(num_warps=8, num_stages=1))):
        calls.clear()
        kernels.decode_attention(q, k, v, torch.tensor([40]), 0.25, **launch)
        (split, split_kwargs), (merge, merge_kwargs) = calls
        assert (split, merge) == ("split", "merge")
        assert {n: split_kwargs[n] for n in ("num_warps", "num_stages") if n in split_kwargs} == expected, launch
        assert "num_warps" not in merge_kwargs and "num_stages" not in merge_kwargs


def test_kernels_equal_their_references_in_tritons_interpreter():
    """The split-KV attention (three GQA shapes, a cache length of 1 included; in two kernels and in one), the GEMV (its one
    interpreter config), and the lean decoder with its kernels against without, bf16 and int4, in a fresh
    process with TRITON_INTERPRET=1 (Triton reads the flag when it is first imported)."""
    from conftest import run_interpreted

    run_interpreted(INTERPRETED_CHECKS, "interpreted kernels ok")


def test_gemv_is_autotuned_on_its_shape_over_a_small_config_set(monkeypatch):
    """Outside the interpreter the GEMV is a triton.autotune'd kernel keyed on (N, K) over GEMV_CONFIGS:
    BLOCK_N in {8..64}, BLOCK_K in {128..512}, 2-8 warps, a dozen configs at most (each is timed on the
    first call of every projection shape)."""
    pytest.importorskip("triton")
    from triton.runtime.autotuner import Autotuner

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(kernels, "_COMPILED", {})
    tuned = kernels._gemv_kernel()
    assert isinstance(tuned, Autotuner) and list(tuned.keys) == ["N", "K"]
    configs = {(c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"], c.num_warps) for c in tuned.configs}
    assert configs == set(kernels.GEMV_CONFIGS) and 8 <= len(configs) <= 12
    assert {n for n, _, _ in configs} == {8, 16, 32, 64} and {k for _, k, _ in configs} == {128, 256, 512}
    assert {w for _, _, w in configs} == {2, 4, 8}


# ------------------------------------------------------------------------------- the GPU, real shapes

@pytest.mark.gpu
@pytest.mark.parametrize("model", sorted(SHAPES))
@pytest.mark.parametrize("L,length", [(2083, 2049), (16419, 16385)])
def test_split_kv_attention_on_the_gpu(model, L, length):
    Hq, Hkv = SHAPES[model]
    q, k, v = _qkv(Hq, Hkv, L, 128, device="cuda")
    got = kernels.decode_attention(q, k, v, torch.tensor([length], device="cuda"), 128 ** -0.5)
    ref = kernels.decode_attention_reference(q, k, v, length, 128 ** -0.5)
    assert (got.float() - ref.float()).abs().max() < 2e-2
    one = kernels.decode_attention(q, k, v, torch.tensor([length], device="cuda"), 128 ** -0.5, merged=True)
    assert (one.float() - got.float()).abs().max() < 1e-2 and kernels.merge_counters("cuda").abs().sum().item() == 0
    for block in (32, 64):  # V loaded beside K, one block a program where the split allows: the same output
        both = kernels.decode_attention(q, k, v, torch.tensor([length], device="cuda"), 128 ** -0.5, block=block,
                                        split=block, kv_together=True)
        assert (both.float() - ref.float()).abs().max() < 2e-2, block


@pytest.mark.gpu
@pytest.mark.parametrize("model", sorted(SHAPES))
@pytest.mark.parametrize("L,length", [(2083, 2049), (16419, 16385)])
def test_the_rotary_in_the_attention_equals_rotary_cache_then_the_attention_on_the_gpu(model, L, length):
    """decode_attention's `rotary` (the rotary_attention levers) on the real shapes, as those levers launch it (blocks
    of 64, with PDL where this GPU has it; with and without the prefetch of the first block): rotary_cache followed
    by the attention, the caches bit for bit, the output within rounding."""
    from decodegap.kernels.fused import launch as fused

    Hq, Hkv = SHAPES[model]
    pdl = fused.pdl_unavailable("cuda") is None
    gen = torch.Generator().manual_seed(5)
    qkv = torch.randn((Hq + 2 * Hkv) * 128, generator=gen).to("cuda", torch.bfloat16)
    cos, sin = (torch.randn(L, 128, generator=gen).to("cuda", torch.bfloat16) for _ in range(2))
    _, k, v = _qkv(Hq, Hkv, L, 128, device="cuda", seed=6)
    caches = [k[None].clone(), v[None].clone(), k[None].clone(), v[None].clone()]
    n = torch.tensor([length], device="cuda")
    for options, prefetch in ((kernels.attention_blocks(True), False), (kernels.attention_blocks(True), True),
                              ({}, False)):
        q = fused.rotary_cache(qkv, cos, sin, n - 1, caches[0], caches[1], Hq, Hkv, pdl=pdl)
        want = kernels.decode_attention(q, caches[0][0], caches[1][0], n, 128 ** -0.5, pdl=pdl, **options)
        got = kernels.decode_attention(qkv, caches[2][0], caches[3][0], n, 128 ** -0.5, pdl=pdl,
                                       rotary=(cos, sin, Hq), prefetch=prefetch, **options)
        assert (got.float() - want.float()).abs().max() < 1e-2, options
        assert torch.equal(caches[2], caches[0]) and torch.equal(caches[3], caches[1]), options
        assert not torch.equal(caches[2], k[None])  # the newest key was written


@pytest.mark.gpu
def test_the_one_kernel_attention_replays_in_a_cuda_graph_with_pdl():
    """The one-kernel attention captured with PDL and replayed as the length grows: each replay equals the
    two-kernel attention at that length, and its arrival counters are back at zero after every replay."""
    from decodegap.kernels.fused import launch as fused

    pdl = fused.pdl_unavailable("cuda") is None
    q, k, v = _qkv(32, 8, 4096, 128, device="cuda")
    length = torch.tensor([1000], device="cuda")
    kernels.decode_attention(q, k, v, length, 128 ** -0.5, merged=True, pdl=pdl)  # built before the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = kernels.decode_attention(q, k, v, length, 128 ** -0.5, merged=True, pdl=pdl)
    for n in (1000, 1001, 2500, 4096):
        length.fill_(n)
        graph.replay()
        torch.cuda.synchronize()
        two = kernels.decode_attention(q, k, v, length, 128 ** -0.5)
        assert (out.float() - two.float()).abs().max() < 1e-2, n
        assert kernels.merge_counters("cuda").abs().sum().item() == 0, n


@pytest.mark.gpu
@pytest.mark.parametrize("model", sorted(SHAPES))
def test_gemv_on_every_projection_shape_on_the_gpu(model):
    from decodegap.quant import bytes as quant_bytes

    config = models.load_spec(model).config
    shapes = {(k, n) for _, k, n, _ in quant_bytes.decoder_linears(config)} | {(config["hidden_size"], config["vocab_size"])}
    gen = torch.Generator().manual_seed(0)
    for K, N in sorted(shapes):
        x = torch.randn(1, 1, K, generator=gen).cuda().bfloat16()
        w = (0.02 * torch.randn(N, K, generator=gen)).cuda().bfloat16()
        got, ref = kernels.gemv(x, w).float(), kernels.gemv_reference(x, w).float()
        assert (got - ref).abs().max() < 2e-2 * ref.abs().max(), (K, N)


def test_the_kernel_arms_are_unavailable_with_the_reason_where_they_cannot_run(monkeypatch):
    from decodegap.harness import decode

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    model = models.build_model(models.load_spec("llama-tiny"), device="cpu")
    with pytest.raises(decode.ArmUnavailable, match="[Tt]riton"):
        decode.run_arm(model, "lean_kernels", 8, warmup=1, steps=1)
    for arm in ("lean_kernels_graph", "lean_attn_graph"):
        with pytest.raises(decode.ArmUnavailable, match="CUDA graphs need a CUDA device"):
            decode.run_arm(model, arm, 8, warmup=1, steps=1)


def test_a_lean_decoder_takes_some_or_all_custom_kernels_by_name():
    assert lean.kernel_set(True) == {"gemv", "attention"} and lean.kernel_set(False) == frozenset()
    assert lean.kernel_set(("attention",)) == {"attention"}
    with pytest.raises(ValueError, match="unknown custom kernel.*'gemm'"):
        lean.kernel_set(("gemm",))
    from decodegap import arms

    assert {a for a, k in arms.ARM_KERNELS.items() if "gemv" not in k and "fused" not in k} == {"lean_attn_graph",
                                                                                                "lean_attn_compile"}


def test_decode_attention_names_what_it_cannot_take():
    """Checked before Triton is imported, so the message is the same on any machine."""
    q, k = torch.zeros(8, 64, dtype=torch.bfloat16), torch.zeros(2, 32, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="head_dim >= 16.*head_dim 8"):
        kernels.decode_attention(q[:, :8], k[..., :8], k[..., :8], torch.tensor([4]), 1.0)
    with pytest.raises(ValueError, match="Hq % Hkv == 0.*Hq 7, Hkv 2"):
        kernels.decode_attention(q[:7], k, k, torch.tensor([4]), 1.0)
    with pytest.raises(ValueError, match="one dtype.*torch.float32"):
        kernels.decode_attention(q.float(), k, k, torch.tensor([4]), 1.0)


# ------------------------------------------------------------- Triton's offline compiler for sm_90, no GPU

def _split_kernel_sass(block: int, kv_together: bool, merged: bool, rotary: bool = False) -> list[str]:
    """The split-KV attention's split kernel compiled offline for sm_90 (decodegap.kernels.offline) as the step launches
    it on Llama-3.1-8B's heads (group 4 padded to 16 rows, head dim 128, PDL), its SASS instructions without their
    addresses."""
    import re

    from decodegap.kernels import offline

    split_kernel, _ = kernels._attention_kernels()
    types = dict(q_ptr="*bf16", k_ptr="*bf16", v_ptr="*bf16", len_ptr="*i32", o_ptr="*fp32", m_ptr="*fp32",
                 l_ptr="*fp32", scale="fp32", L="i32", n_splits="i32", group="i32", count_ptr="*i32", out_ptr="*bf16",
                 cos_ptr="*bf16", sin_ptr="*bf16", n_q_heads="i32")
    compiled = offline.compile_sm90(split_kernel, types, dict(BLOCK=block, G=16, D=128, UPCAST=False, USE_PDL=True,
                                                              EARLY_TRIGGER=False, MERGE=merged, S=64 if merged else 1,
                                                              KV_TOGETHER=kv_together, ROTARY=rotary), 4, pdl=True)
    sass = offline.cuobjdump(compiled, "-sass")
    return [re.sub(r"/\*[0-9a-f]+\*/", "", line).strip() for line in sass.splitlines()
            if re.match(r"\s+/\*[0-9a-f]{4}\*/", line)]


@pytest.mark.parametrize("block", [32, 64])
def test_v_beside_k_compiles_as_the_default_order_on_sm90(monkeypatch, block):
    """The kv-together levers wrote V's load beside K's; this Triton compiles the split kernel to the same
    instructions in both orders (the compiler issues V's loads with K's either way), so what those levers change on
    the GPU is their block (kernels.step.KV_TOGETHER_BLOCK). A Triton that orders them apart fails here: the levers'
    docstrings would then be wrong. The merged form is checked to differ, so that a compile ignoring its constexprs
    cannot pass."""
    pytest.importorskip("triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(kernels, "_COMPILED", {})
    default = _split_kernel_sass(block, kv_together=False, merged=False)
    assert sum("LDG" in i for i in default) >= 4  # q, K, V and the length: real loads were compiled
    assert _split_kernel_sass(block, kv_together=True, merged=False) == default
    assert _split_kernel_sass(block, kv_together=False, merged=True) != default
    assert _split_kernel_sass(block, kv_together=True, merged=False, rotary=True) != default  # the rotary compiled
