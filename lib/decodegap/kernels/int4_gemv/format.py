"""The int4-triton format, in PyTorch (runs anywhere): group size G, a power of two >= 8 dividing K;
  packed   int32 [N, K/8], row-major: nibble i (bits 4i..4i+3) of word j holds the code q[n, 8j + i] in 0..15
  scales   bf16 [N, K/G]: s[n, g]
  offsets  bf16 [N, K/G]: m[n, g]
  W_deq[n, k] = q[n, k] * s[n, k // G] + m[n, k // G]
The codes and both bf16 tables are all a product streams: `stream_bytes` (K N / 2 + 4 N K / G bytes).
`quantise_rtn` (per-group round to nearest) makes them from a weight, `dequantise` the reference every kernel
result is checked against."""

from __future__ import annotations

import torch

PATH_KEY = "int4-triton"
DEFAULT_GROUP_SIZE = 128


def stream_bytes(K: int, N: int, group_size: int = DEFAULT_GROUP_SIZE) -> int:
    """Bytes one product streams: the packed codes (K N / 2) and the bf16 scales and offsets (2 x 2 N K / G)."""
    return K * N // 2 + 2 * 2 * N * (K // group_size)


def check_format(K: int, group_size: int) -> None:
    """ValueError unless the group size is a power of two >= 8 (8 codes a word) dividing K."""
    G = group_size
    if G < 8 or G & (G - 1):
        raise ValueError(f"int4 group size must be a power of two >= 8 (8 codes a word), got {G}")
    if K % G:
        raise ValueError(f"int4 needs K a multiple of the group size: K = {K}, group size {G}")


def pack(q):
    """Codes q [N, K] (integers 0..15) -> int32 [N, K/8], nibble i of word j = column 8j + i."""
    N, K = q.shape
    if K % 8:
        raise ValueError(f"packing 8 codes a word needs K % 8 == 0, got K = {K}")
    shifts = 4 * torch.arange(8, dtype=torch.int64, device=q.device)
    words = (q.to(torch.int64).reshape(N, K // 8, 8) << shifts).sum(-1)  # 0 .. 2^32 - 1
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)


def unpack(packed):
    """int32 [N, K/8] -> codes int32 [N, K] (0..15); the inverse of `pack`."""
    N, KW = packed.shape
    shifts = 4 * torch.arange(8, dtype=torch.int32, device=packed.device)
    return ((packed[:, :, None] >> shifts) & 0xF).reshape(N, KW * 8)


def quantise_rtn(weight, group_size: int = DEFAULT_GROUP_SIZE):
    """Per-group round to nearest of weight [N, K] (any float dtype) -> (packed int32 [N, K/8], scales bf16
    [N, K/G], offsets bf16 [N, K/G]). Per (row, group): m = min, s = (max - min) / 15 (1 where max == min,
    the group then being m exactly), both rounded to bf16 first; then q = clamp(round((W - m) / s), 0, 15)
    with the rounded s and m, so W_deq = q s + m is within s / 2 of W (a bf16 weight's min is exact in
    bf16) and its rounding errors have no coherent offset."""
    N, K = weight.shape
    check_format(K, group_size)
    w = weight.detach().float().reshape(N, K // group_size, group_size)
    lo, hi = w.amin(-1), w.amax(-1)
    s = torch.where(hi > lo, (hi - lo) / 15, torch.ones_like(lo)).to(torch.bfloat16)
    s = torch.where(s.float() > 0, s, torch.ones_like(s))  # a spread below bf16's smallest step
    m = lo.to(torch.bfloat16)
    q = torch.clamp(torch.round((w - m.float()[..., None]) / s.float()[..., None]), 0, 15)
    return pack(q.reshape(N, K).to(torch.int32)), s.contiguous(), m.contiguous()


def dequantise(packed, scales, offsets, group_size: int = DEFAULT_GROUP_SIZE):
    """W_deq [N, K] fp32 = q * s + m, per group (the reference every kernel result is checked against)."""
    q = unpack(packed).float()
    N, K = q.shape
    check_format(K, group_size)
    s = scales.float().repeat_interleave(group_size, dim=1)
    m = offsets.float().repeat_interleave(group_size, dim=1)
    return q * s + m
