"""The int4 weight formats of the quantisation paths, in plain PyTorch: per-group round-to-nearest (RTN) of a
model's own weights, each format's packing, and the inverse of each packing (the reference the kernels are
checked against). No kernel runs here; `quant` wraps these tensors in the layers that call the kernels.

Every path quantises the same bf16 weight W [N, K] (out x in), in groups of G consecutive inputs of one output
row, so every path stands for the same model: a zero-mean W gives a zero-mean dequantised weight (no offset that
adds up over K). The formats (q the 4-bit codes, 0..15):
  tinygemm  W ~ (q - 8) * s + m        s, m bf16 per group (m a float zero); scales_and_zeros bf16 [K/G, N, 2]
  gptq      W ~ (q - z) * s            z integer 1..15, stored as z - 1 (ExLlamaV2 adds the 1 back);
                                       qweight int32 [K/8, N] (nibble i of row r: k = 8r + i),
                                       qzeros int32 [K/G, N/8] (nibble i of column c: n = 8c + i), scales fp16 [K/G, N]
  awq       W ~ (q - z) * s            z integer 0..15; qweight int32 [K, N/8] and qzeros int32 [K/G, N/8], nibble i
                                       holding column 8c + AWQ_ORDER[i]; scales fp16 [K/G, N]
  marlin    W ~ (q - 8) * s            symmetric (s = max|W| / 7 per group), fp16 scales; qweight int32 [K/16, 2N]
                                       in Marlin's tiled, permuted layout (AutoAWQ's WQLinear_Marlin.from_linear:
                                       its permutation tables are read from AutoAWQ itself, `marlin_perms`)
Asymmetric RTN: per group lo = min(W, 0), hi = max(W, 0), s = (hi - lo) / 15 rounded to the scale dtype first,
z = round(-lo / s), q = clamp(round(W / s) + z, 0, 15): |W - W_deq| <= s / 2 inside the group's range.
"""

from __future__ import annotations

import torch

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # AWQ packing: nibble i of an int32 holds column 8c + AWQ_ORDER[i]
GPTQ_ZERO_OFFSET = 1  # GPTQ (v1) checkpoints store z - 1; ExLlamaV2's kernel adds the 1 back
MARLIN_TILE = 16


def check_groups(weight, group_size: int) -> tuple[int, int, int]:
    """(N, K, groups per row) of a 2-D weight; ValueError when K is not a multiple of the group size."""
    if weight.dim() != 2:
        raise ValueError(f"a weight is [out_features, in_features], got shape {tuple(weight.shape)}")
    N, K = weight.shape
    if K % group_size:
        raise ValueError(f"in_features {K} is not a multiple of group size {group_size}")
    return N, K, K // group_size


def grouped(t, group_size: int):
    """[N, K/G] per-group values broadcast to [N, K]."""
    return t.repeat_interleave(group_size, dim=1)


def rtn_asymmetric(weight, group_size: int, scale_dtype=torch.float16, zero_min: int = 0):
    """Asymmetric RTN with an integer zero point: codes q [N, K] int32 (0..15), zeros z [N, K/G] int32
    (zero_min..15), scales s [N, K/G] fp32 holding values of `scale_dtype`. W_deq = (q - z) * s."""
    N, K, ng = check_groups(weight, group_size)
    w = weight.float().reshape(N, ng, group_size)
    lo, hi = w.amin(-1).clamp(max=0.0), w.amax(-1).clamp(min=0.0)
    s = ((hi - lo) / 15).clamp(min=torch.finfo(torch.float16).tiny).to(scale_dtype).float()
    z = torch.round(-lo / s).clamp(zero_min, 15)
    q = torch.clamp(torch.round(w / s[..., None]) + z[..., None], 0, 15)
    return q.reshape(N, K).to(torch.int32), z.to(torch.int32), s


def rtn_float_zero(weight, group_size: int):
    """tinygemm's RTN: codes q [N, K] int32, scales s and float zeros m [N, K/G] fp32 holding bf16 values, with
    W_deq = (q - 8) * s + m (m = group min + 8 s, rounded to bf16 before the codes are taken)."""
    N, K, ng = check_groups(weight, group_size)
    w = weight.float().reshape(N, ng, group_size)
    lo, hi = w.amin(-1), w.amax(-1)
    s = ((hi - lo) / 15).clamp(min=torch.finfo(torch.bfloat16).tiny).to(torch.bfloat16).float()
    m = (lo + 8 * s).to(torch.bfloat16).float()
    q = torch.clamp(torch.round((w - m[..., None]) / s[..., None]) + 8, 0, 15)
    return q.reshape(N, K).to(torch.int32), s, m


def rtn_symmetric(weight, group_size: int, scale_dtype=torch.float16):
    """Symmetric RTN around 8 (Marlin): codes q [N, K] int32 (1..15 for the extremes), scales s = max|W| / 7
    [N, K/G] fp32 holding `scale_dtype` values; W_deq = (q - 8) * s."""
    N, K, ng = check_groups(weight, group_size)
    w = weight.float().reshape(N, ng, group_size)
    s = (w.abs().amax(-1) / 7).clamp(min=torch.finfo(torch.float16).tiny).to(scale_dtype).float()
    q = torch.clamp(torch.round(w / s[..., None]) + 8, 0, 15)
    return q.reshape(N, K).to(torch.int32), s


NF4_CODE = (-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
            -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
            0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
            0.7229568362236023, 1.0)
"""bitsandbytes' NF4 code (functional.get_4bit_type("nf4")): a weight w of a block with absmax a is stored as the
index of the code value nearest to w / a, and read back as code * a."""


def nf4_cells(weight, blocksize: int = 64):
    """Per weight of `weight` [N, K] (blocks of `blocksize` consecutive weights of the flattened row-major
    weight, as bitsandbytes quantises it): (code [N, K], the NF4 value nearest to w / absmax; lo, hi [N, K], the
    bounds of the interval of w / absmax that rounds to it, the midpoints to its neighbours, -1 and 1 at the ends;
    absmax [N, K] broadcast), all fp32."""
    w = weight.detach().float()
    flat = w.reshape(-1, blocksize)
    absmax = flat.abs().amax(-1, keepdim=True).clamp_min(1e-30)
    code = torch.tensor(NF4_CODE, device=w.device)
    mids = (code[1:] + code[:-1]) / 2
    idx = torch.bucketize(flat / absmax, mids)  # nearest code (ties to the upper one)
    lo = torch.cat([code.new_tensor([-1.0]), mids])[idx]
    hi = torch.cat([mids, code.new_tensor([1.0])])[idx]
    shape = w.shape
    return (code[idx].reshape(shape), lo.reshape(shape), hi.reshape(shape),
            absmax.expand_as(flat).reshape(shape))


def rounding_error_bound(weight, group_size: int) -> float:
    """The relative size of 4-bit rounding noise for `weight` [N, K], from the weight alone (no quantiser):
    sqrt(mean over groups of s^2 / 12) / rms(W), s = (max - min) / 15 of each group (the step of uniform
    16-level codes over the group's range; rounding noise uniform on +-s/2 has variance s^2 / 12)."""
    N, K, ng = check_groups(weight, group_size)
    w = weight.detach().float().reshape(N, ng, group_size)
    s = (w.amax(-1) - w.amin(-1)) / 15
    return float((s.pow(2).mean() / 12).sqrt() / w.pow(2).mean().sqrt().clamp_min(1e-30))


# ------------------------------------------------------------------------------------------------- nibbles

def pack_int32(nibbles):
    """[..., 8] values 0..15 -> [...] int32, nibble i = nibbles[..., i] (bits 4i..4i+3)."""
    shifts = torch.arange(0, 32, 4, device=nibbles.device, dtype=torch.int64)
    packed = (nibbles.to(torch.int64) << shifts).sum(dim=-1)
    packed = torch.where(packed >= 2**31, packed - 2**32, packed)  # two's complement into int32
    return packed.to(torch.int32)


def unpack_int32(packed):
    """Inverse of pack_int32: [...] int32 -> [..., 8] int64 nibbles."""
    shifts = torch.arange(0, 32, 4, device=packed.device, dtype=torch.int64)
    return (packed.to(torch.int64)[..., None] >> shifts) & 0xF


# ---------------------------------------------------------------------------------------------------- GPTQ

def gptq_pack(q, z, s, group_size: int):
    """(qweight int32 [K/8, N], qzeros int32 [K/G, N/8], scales fp16 [K/G, N]) from codes q [N, K], zeros z
    [N, K/G] (1..15) and scales s [N, K/G]."""
    N, K = q.shape
    if K % 8 or N % 8:
        raise ValueError(f"GPTQ packs 8 values per int32: in {K} and out {N} features must be multiples of 8")
    qweight = pack_int32(q.t().reshape(K // 8, 8, N).transpose(1, 2))
    qzeros = pack_int32((z - GPTQ_ZERO_OFFSET).t().reshape(K // group_size, N // 8, 8))
    return qweight, qzeros, s.t().contiguous().half()


def gptq_dequantise(qweight, qzeros, scales, group_size: int):
    """W_deq [N, K] fp32 read back from GPTQ tensors (unshuffled: before ExLlamaV2's make_q_matrix)."""
    K8, N = qweight.shape
    q = unpack_int32(qweight).transpose(1, 2).reshape(K8 * 8, N).t()
    z = unpack_int32(qzeros).reshape(qzeros.shape[0], N).t() + GPTQ_ZERO_OFFSET
    return (q.float() - grouped(z.float(), group_size)) * grouped(scales.t().float(), group_size)


# ----------------------------------------------------------------------------------------------------- AWQ

def awq_pack(q, z, s):
    """(qweight int32 [K, N/8], qzeros int32 [K/G, N/8], scales fp16 [K/G, N]) in AWQ's nibble order."""
    N, K = q.shape
    if N % 8:
        raise ValueError(f"AWQ packs 8 columns per int32: out_features {N} % 8 != 0")
    order = torch.tensor(AWQ_ORDER, device=q.device)
    qweight = pack_int32(q.t().reshape(K, N // 8, 8)[..., order])
    qzeros = pack_int32(z.t().reshape(z.shape[1], N // 8, 8)[..., order])
    return qweight, qzeros, s.t().contiguous().half()


def awq_dequantise(qweight, qzeros, scales, group_size: int):
    """W_deq [N, K] fp32 read back from AWQ GEMM tensors."""
    K, N8 = qweight.shape
    inverse = torch.argsort(torch.tensor(AWQ_ORDER, device=qweight.device))
    q = unpack_int32(qweight)[..., inverse].reshape(K, N8 * 8).t()
    z = unpack_int32(qzeros)[..., inverse].reshape(qzeros.shape[0], N8 * 8).t()
    return (q.float() - grouped(z.float(), group_size)) * grouped(scales.t().float(), group_size)


# -------------------------------------------------------------------------------------------------- Marlin

MARLIN_INTERLEAVE = (0, 2, 4, 6, 1, 3, 5, 7)  # the nibble order of Marlin's packed int32 (the last step of its perm)


def marlin_perms(marlin_module):
    """(perm, scale_perm) of Marlin's layout, as AutoAWQ's marlin module defines them (`_perm`, `_scale_perm`)."""
    return marlin_module._perm, marlin_module._scale_perm


def marlin_perms_reference():
    """(perm, scale_perm) as IST-DASLab/marlin's `_get_perms` (and AutoAWQ's, which copies it) computes them:
    for the reference (CPU) builds where AutoAWQ is not installed; tests/test_quant_gpu checks that they equal
    AutoAWQ's own tables."""
    perm = []
    for i in range(32):
        col, first = i // 4, []
        for block in (0, 1):
            for row in (2 * (i % 4), 2 * (i % 4) + 1, 2 * (i % 4 + 4), 2 * (i % 4 + 4) + 1):
                first.append(16 * row + col + 8 * block)
        for j in range(4):
            perm.extend(p + 256 * j for p in first)
    perm = torch.tensor(perm).reshape(-1, 8)[:, list(MARLIN_INTERLEAVE)].reshape(-1)
    scale_perm = torch.tensor([i + 8 * j for i in range(8) for j in range(8)])
    return perm, scale_perm


def marlin_pack(q, s, group_size: int, perms):
    """(qweight int32 [K/16, 2N], scales fp16 [K/G, N]) in Marlin's layout: the steps of AutoAWQ's
    WQLinear_Marlin.from_linear after its own rounding (which, given these scales, gives these codes), done on
    the tensors' device instead of numpy. `perms` from marlin_perms. Grouped scales only (G < K)."""
    perm, scale_perm = (torch.as_tensor(p, device=q.device) for p in perms)
    N, K = q.shape
    if K % 128 or N % 256 or group_size >= K:
        raise ValueError(f"Marlin needs in_features % 128 == 0, out_features % 256 == 0 and grouped scales, "
                         f"got {K}x{N}, G={group_size}")
    t = MARLIN_TILE
    w = q.t().reshape(K // t, t, N // t, t).permute(0, 2, 1, 3).reshape(K // t, N * t)
    w = w.reshape(-1, perm.numel())[:, perm].reshape(K // t, N * t)
    qweight = pack_int32(w.reshape(K // t, N * t // 8, 8))
    scales = s.t().reshape(-1, scale_perm.numel())[:, scale_perm].reshape(-1, N).contiguous().half()
    return qweight, scales


def marlin_dequantise(qweight, scales, group_size: int, perms):
    """W_deq [N, K] fp32 read back from Marlin tensors (the inverse permutations of marlin_pack)."""
    perm, scale_perm = (torch.as_tensor(p, device=qweight.device) for p in perms)
    t = MARLIN_TILE
    K, N = qweight.shape[0] * t, qweight.shape[1] // 2
    w = unpack_int32(qweight).reshape(K // t, N * t)
    w = w.reshape(-1, perm.numel())[:, torch.argsort(perm)].reshape(K // t, N * t)
    q = w.reshape(K // t, N // t, t, t).permute(0, 2, 1, 3).reshape(K, N).t()
    s = scales.float().reshape(-1, scale_perm.numel())[:, torch.argsort(scale_perm)].reshape(-1, N).t()
    return (q.float() - 8) * grouped(s, group_size)
