"""int4 weight-only GEMV for batch-1 decode (Triton): the package's own quantisation path `int4-triton`.

Format (group size G, a power of two >= 8 dividing K):
  packed   int32 [N, K/8], row-major: nibble i (bits 4i..4i+3) of word j holds the code q[n, 8j + i] in 0..15
  scales   bf16 [N, K/G]: s[n, g]
  offsets  bf16 [N, K/G]: m[n, g]
  W_deq[n, k] = q[n, k] * s[n, k // G] + m[n, k // G]
The codes and both bf16 tables are all a product streams: `stream_bytes` (K N / 2 + 4 N K / G bytes).

Kernel:
  int4_gemv  y[N] = W_deq[N, K] x[K] for one row, fp32 accumulation: each program takes BLOCK_N rows and
             walks K one block of GROUPS groups at a time, reading each row's words of the block as one
             contiguous run (16-byte loads). A nibble becomes a float with no int-to-float conversion
             (quarter-rate on sm_90): masked into the mantissa of a float with a fixed exponent it reads
             exactly 256 + q (even nibbles, mantissa bits 15..18) or 16 + q (odd nibbles, bits 19..22),
             so T = sum_k f_k x_k over a group equals sum_k q_k x_k + C_g, with C_g = sum_k (256 or 16) x_k
             depending on x alone. Per row and group then
                 y[n] += s[n, g] * (T[n, g] - C_g) + m[n, g] * X_g,        X_g = sum_{k in g} x_k,
             one scale and one offset per group, not one multiply per weight. BLOCK_N, GROUPS, warps
             and stages are autotuned per (N, K) over INT4_CONFIGS on the first call of each shape.
             No split-K: every product here has N >= 3584 rows, so BLOCK_N <= 32 already gives >= 112
             programs, and split-K would need a zeroed fp32 output (a memset kernel, which costs
             the fixed per-launch time split-K is meant to save) or a second reduction launch.

`quantise_rtn` (per-group round to nearest) and `dequantise` are plain PyTorch and run anywhere; the
kernel needs Triton and a CUDA device, or TRITON_INTERPRET=1 on a CPU (one fixed config there).
`Int4TritonLinear` is the layer: one row through the kernel, anything else dequantise-and-matmul.
"""

from __future__ import annotations

import torch
from torch import nn

from .kernels import _interpreted, _triton, available

PATH_KEY = "int4-triton"
DEFAULT_GROUP_SIZE = 128

INT4_CONFIGS = ((8, 2, 4, 1), (8, 4, 4, 1), (16, 1, 4, 1), (16, 2, 4, 1), (16, 2, 4, 3), (16, 4, 8, 1),
                (32, 1, 4, 1), (32, 2, 8, 1), (32, 2, 4, 3), (64, 1, 8, 1), (64, 2, 8, 3), (128, 1, 8, 1))
"""(BLOCK_N, GROUPS, num_warps, num_stages) the kernel is autotuned over, per (N, K), on its first call
for each shape (callers warm up before capturing a CUDA graph). A program reads BLOCK_N x GROUPS x G / 2
bytes of codes per loop step (1-8 KiB at G = 128); the configs trade programs per SM against bytes in
flight per program. Every GROUPS divides the K / G of the Llama-3.1-8B and Qwen-2.5-7B products."""
INT4_INTERPRETED = (16, 2)
"""(BLOCK_N, GROUPS) under TRITON_INTERPRET=1: one config, no autotuning."""
_MAX_BLOCK_N = max(c[0] for c in INT4_CONFIGS)
_MAX_GROUPS = max(c[1] for c in INT4_CONFIGS)

_COMPILED: dict = {}


def stream_bytes(K: int, N: int, group_size: int = DEFAULT_GROUP_SIZE) -> int:
    """Bytes one product streams: the packed codes (K N / 2) and the bf16 scales and offsets (2 x 2 N K / G)."""
    return K * N // 2 + 2 * 2 * N * (K // group_size)


def _check_format(K: int, group_size: int) -> None:
    G = group_size
    if G < 8 or G & (G - 1):
        raise ValueError(f"int4 group size must be a power of two >= 8 (8 codes a word), got {G}")
    if K % G:
        raise ValueError(f"int4 needs K a multiple of the group size: K = {K}, group size {G}")


# ------------------------------------------------------------------------------- format, in PyTorch

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
    _check_format(K, group_size)
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
    _check_format(K, group_size)
    s = scales.float().repeat_interleave(group_size, dim=1)
    m = offsets.float().repeat_interleave(group_size, dim=1)
    return q * s + m


# --------------------------------------------------------------------------------------------- kernel

def _kernel():
    """The GEMV: autotuned over INT4_CONFIGS keyed on (N, K); the bare kernel under the interpreter."""
    if "int4_gemv" not in _COMPILED:
        triton, tl = _triton()

        @triton.jit
        def int4_gemv_kernel(x_ptr, p_ptr, s_ptr, m_ptr, y_ptr, N, K: tl.constexpr, G: tl.constexpr, EVEN: tl.constexpr,
                             BLOCK_N: tl.constexpr, GROUPS: tl.constexpr):
            GW: tl.constexpr = G // 8  # words a group
            KW = K // 8
            NG = K // G
            rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
            gi = tl.arange(0, GROUPS)
            wj = tl.arange(0, GW)
            word_off = rows[:, None, None] * KW + gi[None, :, None] * GW + wj[None, None, :]  # [BN, GROUPS, GW]
            x_off = gi[:, None] * G + 8 * wj[None, :]  # [GROUPS, GW]: column of nibble 0 of each word
            acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
            BLOCK_K: tl.constexpr = GROUPS * G
            for k0 in range(0, K, BLOCK_K):
                g0 = k0 // G
                groups = g0 + gi
                sm_off = rows[:, None] * NG + groups[None, :]
                xp = x_ptr + g0 * G + x_off
                if EVEN:
                    w = tl.load(p_ptr + g0 * GW + word_off)
                    s = tl.load(s_ptr + sm_off).to(tl.float32)
                    m = tl.load(m_ptr + sm_off).to(tl.float32)
                    x0, x1, x2, x3 = tl.load(xp), tl.load(xp + 1), tl.load(xp + 2), tl.load(xp + 3)
                    x4, x5, x6, x7 = tl.load(xp + 4), tl.load(xp + 5), tl.load(xp + 6), tl.load(xp + 7)
                else:
                    ok = (rows[:, None] < N) & (groups[None, :] < NG)
                    xok = (groups < NG)[:, None]
                    w = tl.load(p_ptr + g0 * GW + word_off, mask=ok[:, :, None], other=0)
                    s = tl.load(s_ptr + sm_off, mask=ok, other=0.0).to(tl.float32)
                    m = tl.load(m_ptr + sm_off, mask=ok, other=0.0).to(tl.float32)
                    x0 = tl.load(xp, mask=xok, other=0.0)
                    x1 = tl.load(xp + 1, mask=xok, other=0.0)
                    x2 = tl.load(xp + 2, mask=xok, other=0.0)
                    x3 = tl.load(xp + 3, mask=xok, other=0.0)
                    x4 = tl.load(xp + 4, mask=xok, other=0.0)
                    x5 = tl.load(xp + 5, mask=xok, other=0.0)
                    x6 = tl.load(xp + 6, mask=xok, other=0.0)
                    x7 = tl.load(xp + 7, mask=xok, other=0.0)
                x0, x1, x2, x3 = x0.to(tl.float32), x1.to(tl.float32), x2.to(tl.float32), x3.to(tl.float32)
                x4, x5, x6, x7 = x4.to(tl.float32), x5.to(tl.float32), x6.to(tl.float32), x7.to(tl.float32)
                # one shifted copy serves two nibbles: the even one lands at bits 15..18, the odd at 19..22
                a, b, c, d = w << 15, w << 7, w >> 1, w >> 9
                EV: tl.constexpr = 0x00078000
                OD: tl.constexpr = 0x00780000
                E256: tl.constexpr = 0x43800000  # 256.0: mantissa bits 15..18 then read 256 + q
                E16: tl.constexpr = 0x41800000  # 16.0: mantissa bits 19..22 then read 16 + q
                t = ((a & EV) | E256).to(tl.float32, bitcast=True) * x0[None, :, :]
                t += ((a & OD) | E16).to(tl.float32, bitcast=True) * x1[None, :, :]
                t += ((b & EV) | E256).to(tl.float32, bitcast=True) * x2[None, :, :]
                t += ((b & OD) | E16).to(tl.float32, bitcast=True) * x3[None, :, :]
                t += ((c & EV) | E256).to(tl.float32, bitcast=True) * x4[None, :, :]
                t += ((c & OD) | E16).to(tl.float32, bitcast=True) * x5[None, :, :]
                t += ((d & EV) | E256).to(tl.float32, bitcast=True) * x6[None, :, :]
                t += ((d & OD) | E16).to(tl.float32, bitcast=True) * x7[None, :, :]
                x_even = x0 + x2 + x4 + x6
                x_odd = x1 + x3 + x5 + x7
                X = tl.sum(x_even + x_odd, axis=1)  # [GROUPS]
                C = tl.sum(256.0 * x_even + 16.0 * x_odd, axis=1)
                T = tl.sum(t, axis=2)  # [BN, GROUPS]
                acc += tl.sum(s * (T - C[None, :]) + m * X[None, :], axis=1)
            tl.store(y_ptr + rows, acc.to(y_ptr.dtype.element_ty), mask=rows < N)

        if not _interpreted():
            configs = [triton.Config({"BLOCK_N": n, "GROUPS": g}, num_warps=w, num_stages=st)
                       for n, g, w, st in INT4_CONFIGS]
            int4_gemv_kernel = triton.autotune(configs=configs, key=["N", "K"])(int4_gemv_kernel)
        _COMPILED["int4_gemv"] = int4_gemv_kernel
    return _COMPILED["int4_gemv"]


def prepare() -> None:
    """Build the kernel (not yet tuned: that is per shape, at its first call) before torch.compile traces a
    function that calls it (dynamo cannot trace triton.jit's decorator itself)."""
    _kernel()


def int4_gemv(x, packed, scales, offsets, group_size: int = DEFAULT_GROUP_SIZE, out=None):
    """One row x [K] or [1, K] (bf16) times W_deq[N, K]^T -> y [N] bf16 ([1, N] for a [1, K] x), fp32
    accumulation. packed int32 [N, K/8], scales and offsets bf16 [N, K/G], all contiguous on x's device.
    `out`: a contiguous [N] tensor to write instead (fp32 keeps the accumulator unrounded: the tests)."""
    N, KW = packed.shape
    K, G = KW * 8, group_size
    _check_format(K, G)
    if x.numel() != K:
        raise ValueError(f"int4_gemv takes one row: x has {x.numel()} elements, the weight has K = {K}")
    if scales.shape != (N, K // G) or offsets.shape != (N, K // G):
        raise ValueError(f"scales and offsets must be [N, K/G] = [{N}, {K // G}], got {tuple(scales.shape)} "
                         f"and {tuple(offsets.shape)}")
    triton, _ = _triton()
    xc = x.reshape(K).to(torch.bfloat16).contiguous()
    y = torch.empty(N, dtype=torch.bfloat16, device=x.device) if out is None else out
    kernel = _kernel()
    args = (xc, packed.contiguous(), scales.contiguous(), offsets.contiguous(), y, N, K)
    if _interpreted():
        block_n, groups = INT4_INTERPRETED
        even = N % block_n == 0 and (K // G) % groups == 0
        kernel[(triton.cdiv(N, block_n),)](*args, G=G, EVEN=even, BLOCK_N=block_n, GROUPS=groups)
    else:
        even = N % _MAX_BLOCK_N == 0 and (K // G) % _MAX_GROUPS == 0  # then every config divides the shape
        kernel[lambda meta: (triton.cdiv(N, meta["BLOCK_N"]),)](*args, G=G, EVEN=even)
    return y.reshape(*x.shape[:-1], N) if x.dim() > 1 else y


def tuned_config(N: int, K: int) -> str:
    """The autotuner's choice for (N, K) as text ('' before the shape's first call, or under the interpreter)."""
    kernel = _COMPILED.get("int4_gemv")
    for key, config in getattr(kernel, "cache", {}).items():
        if tuple(key[:2]) == (N, K):
            return f"BLOCK_N={config.kwargs['BLOCK_N']} GROUPS={config.kwargs['GROUPS']} " \
                   f"num_warps={config.num_warps} num_stages={config.num_stages}"
    return ""


# ---------------------------------------------------------------------------------------------- layer

class Int4TritonLinear(nn.Module):
    """int4 weight-only nn.Linear(K, N) in this module's format (`path_key` int4-triton).

    forward(x [..., K]) -> [..., N] bf16 (+ bias): a single row on CUDA (or under TRITON_INTERPRET=1)
    goes through `int4_gemv`; more rows (a prefill), or a device where the kernel cannot run, is a
    dequantise-and-matmul, x @ dequantised_weight().T in bf16."""

    path_key = PATH_KEY

    def __init__(self, packed, scales, offsets, group_size: int = DEFAULT_GROUP_SIZE, bias=None):
        super().__init__()
        N, KW = packed.shape
        _check_format(KW * 8, group_size)
        self.in_features, self.out_features, self.group_size = KW * 8, N, group_size
        self.register_buffer("packed", packed.contiguous())
        self.register_buffer("scales", scales.to(torch.bfloat16).contiguous())
        self.register_buffer("offsets", offsets.to(torch.bfloat16).contiguous())
        self.register_buffer("bias", None if bias is None else bias.detach().to(torch.bfloat16).clone())

    @classmethod
    def from_weight(cls, weight, bias=None, group_size: int = DEFAULT_GROUP_SIZE):
        """Quantise weight [N, K] (`quantise_rtn`); bias [N] or None."""
        return cls(*quantise_rtn(weight, group_size), group_size=group_size, bias=bias)

    @classmethod
    def fuse(cls, parts):
        """One layer for several that read the same input (q/k/v, gate/up): output torch.cat of the parts'
        outputs along N; biases concatenated (zeros for a part without one when another has one).
        ValueError for parts that differ in K or group size."""
        parts = list(parts)
        if not parts or not all(isinstance(p, cls) for p in parts):
            raise ValueError(f"fuse takes Int4TritonLinear layers, got {[type(p).__name__ for p in parts]}")
        first = parts[0]
        if any(p.in_features != first.in_features or p.group_size != first.group_size for p in parts):
            raise ValueError("fuse needs one K and one group size: got "
                             f"{[(p.in_features, p.group_size) for p in parts]}")
        bias = None
        if any(p.bias is not None for p in parts):
            bias = torch.cat([p.bias if p.bias is not None else
                              torch.zeros(p.out_features, dtype=torch.bfloat16, device=p.packed.device)
                              for p in parts])
        return cls(torch.cat([p.packed for p in parts]), torch.cat([p.scales for p in parts]),
                   torch.cat([p.offsets for p in parts]), first.group_size, bias)

    def dequantised_weight(self, dtype=torch.bfloat16):
        """W_deq [N, K] in `dtype`."""
        return dequantise(self.packed, self.scales, self.offsets, self.group_size).to(dtype)

    def forward(self, x):
        K, N = self.in_features, self.out_features
        if x.numel() == K and available(x.device) is None:
            y = int4_gemv(x, self.packed, self.scales, self.offsets, self.group_size).reshape(*x.shape[:-1], N)
        else:
            y = x.to(torch.bfloat16) @ self.dequantised_weight().T
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, path={self.path_key}, "
                f"group_size={self.group_size}, bias={self.bias is not None}")
