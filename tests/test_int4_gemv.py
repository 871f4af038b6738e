"""The int4-triton path: the format and quantiser against hand-computed values, the layer's prefill and
fusion against plain PyTorch, and the Triton kernel against the fp32 reference x @ W_deq^T in Triton's CPU
interpreter where Triton is installed (and on the GPU on the real shapes: gpu marker)."""

from __future__ import annotations

import pytest
import torch

from decodegap.kernels.int4_gemv import format as int4_format, kernel as int4_kernel, layer as int4_layer


def _weight(N, K, seed=0, std=0.02):
    gen = torch.Generator().manual_seed(seed)
    return (std * torch.randn(N, K, generator=gen)).bfloat16()


# ---------------------------------------------------------------------------------------- the format

def test_pack_puts_column_8j_plus_i_in_nibble_i_of_word_j():
    q = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 15, 0, 0, 0, 0, 0, 0, 9]])
    assert int4_format.pack(q).tolist() == [[0x76543210, 0x9000000F - 2 ** 32]]  # the second word's top bit is set
    swapped = int("".join(f"{v:x}" for v in q[0, :8].tolist()), 16)  # column 8j in the HIGH nibble: 0x01234567
    assert swapped != 0x76543210  # the layout the test pins is not symmetric under the swap
    assert torch.equal(int4_format.unpack(int4_format.pack(q)), q.to(torch.int32))


def test_unpack_inverts_pack_on_random_codes():
    q = torch.randint(0, 16, (5, 64), generator=torch.Generator().manual_seed(0), dtype=torch.int32)
    assert torch.equal(int4_format.unpack(int4_format.pack(q)), q)


def test_quantise_rtn_by_hand():
    """G = 8; every expected code and value below is worked out by hand from the definition."""
    w = torch.tensor([[-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 5.5] + [0.75] * 8,
                      [0.0, 0.3, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0] + [1.0, 2, 3, 4, 5, 6, 7, 8]])
    packed, s, m = int4_format.quantise_rtn(w, 8)
    assert s.dtype == m.dtype == torch.bfloat16 and packed.dtype == torch.int32
    # row 0: min -2, max 5.5 -> s 0.5 exactly; a constant group -> s 1, m the constant, codes 0
    # row 1: s = bf16(3 / 15) = 0.2001953125 (0.3 / s = 1.499 -> 1); s = bf16(7 / 15) = 0.466796875
    assert s.float().tolist() == [[0.5, 1.0], [0.2001953125, 0.466796875]]
    assert m.float().tolist() == [[-2.0, 0.75], [0.0, 1.0]]
    assert int4_format.unpack(packed).tolist() == [[0, 1, 2, 3, 4, 5, 6, 15] + [0] * 8,
                                          [0, 1, 15, 0, 0, 0, 0, 0] + [0, 2, 4, 6, 9, 11, 13, 15]]
    deq = int4_format.dequantise(packed, s, m, 8)
    assert torch.equal(deq[0], w[0])  # representable exactly
    assert deq[1, :3].tolist() == [0.0, 0.2001953125, 15 * 0.2001953125]


def test_dequantise_is_code_times_scale_plus_offset_per_group():
    q = torch.arange(32).remainder(16).reshape(1, 32)
    s = torch.tensor([[1.0, 2.0]]).bfloat16()
    m = torch.tensor([[-8.0, 0.5]]).bfloat16()
    deq = int4_format.dequantise(int4_format.pack(q), s, m, 16)
    assert deq[0].tolist() == [k - 8.0 for k in range(16)] + [2.0 * k + 0.5 for k in range(16)]


def test_round_trip_is_within_half_a_step_per_element():
    for G in (32, 128):
        w = _weight(64, 512, seed=G)
        packed, s, m = int4_format.quantise_rtn(w, G)
        err = (int4_format.dequantise(packed, s, m, G) - w.float()).abs()
        half_step = 0.5 * s.float().repeat_interleave(G, dim=1)
        assert (err <= half_step * (1 + 1e-5)).all(), G
        assert err.max() > 0.4 * half_step.max()  # the bound is tight, not vacuous


def _mean_offset_in_sigmas(w, deq):
    """The mean quantisation error in units of its standard error (|z| >> 4: a coherent offset)."""
    err = (deq - w.float()).flatten()
    return (err.mean() / (err.std() / err.numel() ** 0.5)).item()


def test_zero_mean_weights_stay_zero_mean_and_a_biased_quantiser_would_be_caught():
    w = _weight(256, 1024, seed=3)
    w = (w.float() - w.float().mean()).bfloat16()
    packed, s, m = int4_format.quantise_rtn(w, 128)
    deq = int4_format.dequantise(packed, s, m, 128)
    assert abs(_mean_offset_in_sigmas(w, deq)) < 4
    assert abs(deq.mean().item() - w.float().mean().item()) < 2e-5  # vs a weight std of 0.02, steps ~ 5e-3
    # the same statistic on a floor quantiser (a -s/2 coherent offset) is far outside the bound
    g = w.float().reshape(256, 8, 128)
    lo, step = g.amin(-1, keepdim=True), (g.amax(-1, keepdim=True) - g.amin(-1, keepdim=True)) / 15
    biased = (torch.floor((g - lo) / step).clamp(0, 15) * step + lo).reshape(256, 1024)
    assert abs(_mean_offset_in_sigmas(w, biased)) > 100


def test_stream_bytes_by_hand():
    # Llama-3.1-8B qkv: codes 4096 * 6144 / 2 = 12,582,912 B; scales + offsets 2 * 2 * 6144 * 32 = 786,432 B
    assert int4_format.stream_bytes(4096, 6144, 128) == 13_369_344
    assert int4_format.stream_bytes(14336, 4096) == 14336 * 4096 // 2 + 4 * 4096 * 112


def test_the_format_refuses_what_it_cannot_hold():
    with pytest.raises(ValueError, match="multiple of the group size: K = 100"):
        int4_format.quantise_rtn(torch.zeros(4, 100), 32)
    with pytest.raises(ValueError, match="power of two >= 8.*48"):
        int4_format.quantise_rtn(torch.zeros(4, 96), 48)
    layer = int4_layer.Int4GemvLinear.from_weight(_weight(8, 64), group_size=32)
    with pytest.raises(ValueError, match="one row: x has 128 elements"):
        int4_kernel.int4_gemv(torch.zeros(2, 64), layer.packed, layer.scales, layer.offsets, 32)


# -------------------------------------------------------------------- the layer (no Triton needed)

def test_prefill_forward_is_the_dequantised_matmul_plus_bias(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(int4_layer, "_RUNS_ON", {})  # asked again: no kernel on this CPU without the interpreter
    w, bias = _weight(48, 256), torch.linspace(-1, 1, 48)
    layer = int4_layer.Int4GemvLinear.from_weight(w, bias=bias, group_size=64)
    assert (layer.in_features, layer.out_features, layer.group_size) == (256, 48, 64)
    assert layer.packed.shape == (48, 32) and layer.scales.shape == layer.offsets.shape == (48, 4)
    x = torch.randn(3, 256, generator=torch.Generator().manual_seed(1)).bfloat16()
    ref = x.float() @ int4_format.dequantise(layer.packed, layer.scales, layer.offsets, 64).T + bias.bfloat16().float()
    got = layer(x)
    assert got.shape == (3, 48) and got.dtype == torch.bfloat16
    assert (got.float() - ref).abs().max() < 1e-2 * ref.abs().max()
    one = layer(x[:1])  # one row, no kernel here: the same fallback
    assert one.shape == (1, 48) and (one.float() - ref[:1]).abs().max() < 1e-2 * ref.abs().max()


def test_fuse_is_the_concatenation_of_the_parts():
    parts = [int4_layer.Int4GemvLinear.from_weight(_weight(n, 128, seed=n), bias=b, group_size=32)
             for n, b in ((16, None), (8, torch.full((8,), 0.5)), (24, None))]
    fused = int4_layer.Int4GemvLinear.fuse(parts)
    assert fused.out_features == 48 and fused.in_features == 128
    assert torch.equal(fused.dequantised_weight(), torch.cat([p.dequantised_weight() for p in parts]))
    assert fused.bias.tolist() == [0.0] * 16 + [0.5] * 8 + [0.0] * 24
    x = torch.randn(2, 1, 128, generator=torch.Generator().manual_seed(2)).bfloat16()
    assert torch.equal(fused(x), torch.cat([p(x) for p in parts], dim=-1))
    assert int4_layer.Int4GemvLinear.fuse(parts[::2]).bias is None
    with pytest.raises(ValueError, match="one K and one group size"):
        int4_layer.Int4GemvLinear.fuse([parts[0], int4_layer.Int4GemvLinear.from_weight(_weight(8, 128), group_size=64)])


# --------------------------------------------------------------------- Triton's interpreter, on the CPU

INTERPRETED_CHECKS = """
import torch
from decodegap.kernels.int4_gemv import format as int4_format, kernel as int4_kernel, layer as int4_layer

gen = torch.Generator().manual_seed(0)
# (N, K, G): K a multiple of the step (8 lanes x SUB 2 chunks of 32 columns) and not (lanes past K), N not a
# multiple of BLOCK_N (rows past N), G 32 (SUB then 1) and 64
for N, K, G in [(32, 512, 128), (40, 384, 128), (6, 1152, 128), (24, 96, 32), (7, 256, 64)]:
    w = (0.02 * torch.randn(N, K, generator=gen)).bfloat16()
    packed, s, m = int4_format.quantise_rtn(w, G)
    x = torch.randn(K, generator=gen).bfloat16()
    ref = x.double() @ int4_format.dequantise(packed, s, m, G).double().T
    acc = int4_kernel.int4_gemv(x, packed, s, m, G, out=torch.empty(N, dtype=torch.float32))
    rel = ((acc.double() - ref).abs().max() / ref.abs().max()).item()
    assert rel < 5e-4, (N, K, G, rel)  # the fp32 accumulator before the bf16 cast
    y = int4_kernel.int4_gemv(x[None], packed, s, m, G)
    assert y.shape == (1, N) and y.dtype == torch.bfloat16
    rel = ((y[0].double() - ref).abs().max() / ref.abs().max()).item()
    assert rel < 1e-2, (N, K, G, rel)  # the interpreter's bf16 cast truncates: up to 2^-7
    shifted = torch.cat([x[:1], x])[1:]  # the same x at an odd element offset (not 4-byte aligned)
    assert torch.equal(int4_kernel.int4_gemv(shifted, packed, s, m, G), y[0])
# GPU configs (BLOCK_N, SUB_MAX, CHUNKS = 32 x warps), called directly: SUB 4, 1 warp; SUB 1, 4 warps (one step)
N, K = 12, 4096
w = (0.02 * torch.randn(N, K, generator=gen)).bfloat16()
packed, s, m = int4_format.quantise_rtn(w, 128)
x = torch.randn(K, generator=gen).bfloat16()
ref = x.double() @ int4_format.dequantise(packed, s, m, 128).double().T
for block_n, sub, chunks in [(4, 4, 32), (8, 1, 128), (8, 2, 64)]:
    acc = torch.empty(N)
    int4_kernel._kernel()[(-(-N // block_n),)](x.view(torch.int32), packed, s, m, acc, N, *int4_kernel._MAGIC, K, G=128,
                                      BLOCK_N=block_n, CHUNKS=chunks, SUB_MAX=sub)
    rel = ((acc.double() - ref).abs().max() / ref.abs().max()).item()
    assert rel < 5e-4, (block_n, sub, chunks, rel)
calls = []
kernel = int4_kernel.int4_gemv
int4_kernel.int4_gemv = lambda *a, **k: calls.append(1) or kernel(*a, **k)
parts = [int4_layer.Int4GemvLinear.from_weight((0.02 * torch.randn(n, 256, generator=gen)).bfloat16(), group_size=128)
         for n in (32, 16)]
fused = int4_layer.Int4GemvLinear.fuse(parts)
x = torch.randn(1, 256, generator=gen).bfloat16()
one, prefill = fused(x), fused(x.expand(3, 256))
assert len(calls) == 1  # the one-row call, not the prefill
assert (one.float() - prefill[:1].float()).abs().max() < 2e-2 * prefill.float().abs().max()
try:
    int4_kernel.int4_gemv(x, *int4_format.quantise_rtn(torch.zeros(8, 64), 16), 16)
    raise AssertionError("a group of 16 went through")
except ValueError as exc:
    assert "group size >= 32" in str(exc)
print("interpreted int4 gemv ok")
"""


def test_int4_gemv_equals_the_reference_in_tritons_interpreter():
    """The kernel (its one interpreter config: BLOCK_N 4, 8 lanes, SUB 2) on five small shapes against the
    fp64 product of x and W_deq: the fp32 accumulator within 5e-4 of max|ref| (measured 3e-5 to 1.1e-4: the
    magic-exponent floats carry 4096 + q, which costs fp32 bits), the bf16 result within 1e-2 (the
    interpreter's bf16 cast truncates); a one-row forward through the kernel; G < 32 refused. A fresh
    process with TRITON_INTERPRET=1 (Triton reads it when first imported)."""
    from conftest import run_interpreted

    run_interpreted(INTERPRETED_CHECKS, "interpreted int4 gemv ok")


def test_int4_gemv_is_autotuned_on_its_shape_over_a_small_config_set(monkeypatch):
    """Outside the interpreter: triton.autotune keyed on (N, K) over INT4_CONFIGS (<= 12 configs, CHUNKS =
    32 lanes a warp)."""
    pytest.importorskip("triton")
    from triton.runtime.autotuner import Autotuner

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(int4_kernel, "_COMPILED", {})
    tuned = int4_kernel._kernel()
    assert isinstance(tuned, Autotuner) and list(tuned.keys) == ["N", "K"]
    configs = {(c.kwargs["BLOCK_N"], c.kwargs["SUB_MAX"], c.num_warps) for c in tuned.configs}
    assert configs == set(int4_kernel.INT4_CONFIGS) and len(configs) <= 12
    assert all(c.kwargs["CHUNKS"] == 32 * c.num_warps for c in tuned.configs)
    assert all(4 <= n * sub <= 32 for n, sub, _ in configs)  # 16-byte loads a lane a step: more spill registers


# ------------------------------------------------------------------------------- the GPU, real shapes

@pytest.mark.gpu
def test_int4_gemv_is_captured_by_a_cuda_graph_and_called_from_a_compiled_function():
    """After a warm-up call (the autotuning), a CUDA graph replays the kernel on new x, and torch.compile of a
    function calling the layer (the GEMV an opaque custom operator there) gives the eager result within bf16
    rounding."""
    K, N = 4096, 4096
    layer = int4_layer.Int4GemvLinear.from_weight(_weight(N, K).cuda())
    x = torch.randn(1, K, generator=torch.Generator().manual_seed(1)).bfloat16().cuda()
    eager = layer(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = layer(x)
    x.copy_(2 * x)
    graph.replay()
    assert torch.allclose(out.float(), (2 * eager).float(), rtol=1e-2, atol=1e-2 * eager.float().abs().max().item())
    compiled = torch.compile(lambda t: layer(t) * 1.0)
    want = layer(x).float()  # within one bf16 rounding step: the H200 run of 3c937e9 found 1 ulp, not 0
    assert torch.allclose(compiled(x).float(), want, rtol=2 ** -8, atol=2 ** -8 * want.abs().max().item())


@pytest.mark.gpu
@pytest.mark.parametrize("K,N", [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096), (3584, 4608),
                                 (3584, 3584), (3584, 37888), (18944, 3584), (4096, 200)])
def test_int4_gemv_on_the_gpu(K, N):
    w = _weight(N, K).cuda()
    layer = int4_layer.Int4GemvLinear.from_weight(w)
    x = torch.randn(1, K, generator=torch.Generator().manual_seed(1)).bfloat16().cuda()
    ref = x.float() @ layer.dequantised_weight(torch.float32).T
    got = layer(x).float()
    assert (got - ref).abs().max() < 5e-3 * ref.abs().max(), (K, N)
