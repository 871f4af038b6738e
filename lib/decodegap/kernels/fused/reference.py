"""PyTorch references of the fused decode-step kernels (decodegap.kernels.fused.launch), each written to the same rounding as the
unfused ops of decodegap.harness.lean: what the kernels must equal, and what FusedOps(reference=True) runs on any device.
A weight that is not a tensor is an int4-triton layer (the fused int4 step): its product is
decodegap.kernels.fused_int4.reference.linear_reference, its bias inside it."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from decodegap.kernels.fused.norm_scale import NormScale


def _linear(x, weight, bias=None):
    """F.linear(x, weight, bias) of a bf16 weight; an int4-triton layer's product (its bias inside) otherwise."""
    if isinstance(weight, torch.Tensor):
        return F.linear(x, weight, bias)
    from decodegap.kernels.fused_int4.reference import linear_reference

    if bias is not None:
        raise ValueError("an int4-triton layer holds its bias: pass bias None")
    return linear_reference(x, weight)


def rmsnorm_reference(x, weight, eps: float):
    """HF's RMSNorm with its rounding written out: normalise in fp32, round to x's dtype, multiply by the weight
    in fp32 and round again (what `weight * h.to(dtype)` does in bf16: the product of two bf16 values is exact
    in fp32, so one rounding)."""
    h = x.float()
    h = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return (weight.float() * h.float()).to(torch.promote_types(weight.dtype, x.dtype))


def rmsnorm_gemv_reference(x, norm_weight, weight, bias, eps: float):
    """F.linear(RMSNorm(x), weight, bias): fused_gemv with NORM (and BIAS when `bias` is given)."""
    return _linear(rmsnorm_reference(x, norm_weight, eps), weight, bias)


def gemv_residual_reference(x, weight, residual):
    """residual + F.linear(x, weight): the product rounded to the activation dtype, then the add in fp32,
    rounded (fused_gemv with RESIDUAL)."""
    return (_linear(x, weight).float() + residual.float()).to(residual.dtype)


def gemv_residual_norm_reference(x, weight, residual, norm_weight, eps: float):
    """(y, RMSNorm(y)) of y = residual + F.linear(x, weight) (fused_gemv with RESIDUAL and OUT_NORM)."""
    return with_output_norm(gemv_residual_reference(x, weight, residual), (norm_weight, eps))


def with_output_norm(y, out_norm):
    """y, or with `out_norm` (norm weight, eps) (y, RMSNorm(y)): what a product with the output norm returns."""
    return y if out_norm is None else (y, rmsnorm_reference(y, *out_norm))


def silu_mul_reference(gate_up):
    """SiLU(gate) * up of gate_up = [gate; up] in the activation dtype: SiLU in fp32 rounded, the product in fp32
    rounded (F.silu(gate) * up in bf16)."""
    gate, up = gate_up.chunk(2, dim=-1)
    return (F.silu(gate.float()).to(gate.dtype).float() * up.float()).to(gate.dtype)


def gate_up_silu_reference(x, norm_weight, weight, eps: float):
    """SiLU(gate) * up of the fused [gate; up] weight after RMSNorm(x), gate and up each rounded to the activation
    dtype first (fused_gemv with NORM and GATE_UP)."""
    return silu_mul_reference(_linear(rmsnorm_reference(x, norm_weight, eps), weight))


def gate_up_plain_silu_reference(x, weight):
    """SiLU(gate) * up of the fused [gate; up] weight on x itself, gate and up each rounded to the activation dtype
    first (fused_gemv with GATE_UP and no prologue: after the o product's output norm)."""
    return silu_mul_reference(_linear(x, weight))


def silu_gemv_residual_reference(gate_up, weight, residual):
    """residual + F.linear(SiLU(gate) * up, weight) of gate_up = [gate; up] (fused_gemv with SILU_X and
    RESIDUAL)."""
    return gemv_residual_reference(silu_mul_reference(gate_up), weight, residual)


def rmsnorm_gemv_rotary_reference(x, norm_weight, weight, bias, eps: float, rotary):
    """rotary_cache_reference of the qkv product F.linear(RMSNorm(x), weight, bias), `rotary` = (cos_table,
    sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads): returns rotary q [H x D], writes k and v
    (fused_gemv with NORM and rotary)."""
    return rotary_cache_reference(rmsnorm_gemv_reference(x, norm_weight, weight, bias, eps), *rotary).reshape(-1)


def gemv_rotary_reference(x, weight, bias, rotary):
    """rotary_cache_reference of the qkv product F.linear(x, weight, bias) of an input already normalised (the
    previous down's epilogue made it): fused_gemv with rotary and no prologue."""
    return rotary_cache_reference(_linear(x, weight, bias), *rotary).reshape(-1)


def rotate_half_reference(x):
    """rotate_half of the last dimension: (-x2, x1)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary_reference(x, cos, sin):
    """x * cos + rotate_half(x) * sin with each product rounded to x's dtype, then the sum (as torch does it in
    bf16, elementwise in fp32)."""
    a = (x.float() * cos.float()).to(x.dtype)
    b = (rotate_half_reference(x).float() * sin.float()).to(x.dtype)
    return (a.float() + b.float()).to(x.dtype)


def rotary_cache_reference(qkv, cos_table, sin_table, start_pos, k_cache, v_cache, n_heads: int, n_kv_heads: int):
    """qkv [(H + 2 Hkv) D] of one token at position start_pos ([1] long tensor): returns rotary q [H, D]; writes
    rotary k and v at that position of k_cache, v_cache [1, Hkv, L, D] (rotary_cache)."""
    D = k_cache.shape[-1]
    q, k, v = qkv.reshape(-1, D).split([n_heads, n_kv_heads, n_kv_heads])
    cos, sin = cos_table[start_pos], sin_table[start_pos]  # [1, D]
    k_cache.index_copy_(2, start_pos, rotary_reference(k, cos, sin)[None, :, None])
    v_cache.index_copy_(2, start_pos, v[None, :, None])
    return rotary_reference(q, cos, sin)


def output_scale_reference(y, norm_weight, eps: float) -> NormScale:
    """The NormScale a product with out_scale returns beside y: y times the norm weight in fp32, rounded to y's dtype,
    and y's sum of squares (fp32) as one part (the kernel writes one a row block; the next product sums them)."""
    squares = y.float().pow(2).sum().reshape(1)
    return NormScale((y.float() * norm_weight.float()).to(y.dtype), squares, float(eps))


def scaled_linear_reference(scale: NormScale, weight, bias=None):
    """F.linear(RMSNorm(y), weight, bias) as a product with norm_scale makes it: the fp32 sums of x_scaled against the
    weight times 1 / rms (rsqrt(sum(squares) / K + eps)), plus the bias in fp32, rounded once to the activation
    dtype; of an int4-triton layer (any weight not a tensor; its bias inside it), that layer's rounding."""
    x = scale.x_scaled
    rstd = torch.rsqrt(scale.squares.float().sum() / x.numel() + scale.eps)
    if not isinstance(weight, torch.Tensor):  # an int4-triton layer: its own rounding, then its bias
        from decodegap.kernels.fused_int4.reference import scaled_linear_reference as int4_scaled

        return int4_scaled(x, weight, rstd)
    y = (weight.float() @ x.float().reshape(-1)) * rstd
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)
