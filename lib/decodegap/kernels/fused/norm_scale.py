"""The RMSNorm left to the next product as a scale (fused_gemv's out_scale and norm_scale; FusedOps.norm_scale): its
operand, NormScale, and the PyTorch references of the two products written to the kernel's rounding."""

from __future__ import annotations

from typing import NamedTuple

import torch


class NormScale(NamedTuple):
    """RMSNorm(y) of a product's output y, left to the next product as a scale (fused_gemv's out_scale): `x_scaled`
    y times the norm weight, rounded to y's dtype ([N]); `squares` each row block's sum of squares of y (fp32, one a
    row block); `eps` the norm's. The next product reads x_scaled as its x and multiplies its sums by
    1 / rms = rsqrt(sum(squares) / N + eps) (fused_gemv's norm_scale), so no program of either waits for the whole
    of y before it streams its weights. HF rounds y * (1 / rms) first, then the weight: this rounds y * weight and
    scales the fp32 sums, the exact norm's value with other roundings (NormScale products are checked against HF
    within the step's tolerance, not equal to its rounding)."""
    x_scaled: torch.Tensor
    squares: torch.Tensor
    eps: float


def output_scale_reference(y, norm_weight, eps: float) -> NormScale:
    """The NormScale a product with out_scale returns beside y: y times the norm weight in fp32, rounded to y's dtype,
    and y's sum of squares (fp32) as one part (the kernel writes one a row block; the next product sums them)."""
    squares = y.float().pow(2).sum().reshape(1)
    return NormScale((y.float() * norm_weight.float()).to(y.dtype), squares, float(eps))


def scaled_linear_reference(scale: NormScale, weight, bias=None):
    """F.linear(RMSNorm(y), weight, bias) as a product with norm_scale makes it: the fp32 sums of x_scaled against the
    weight times 1 / rms (rsqrt(sum(squares) / K + eps)), plus the bias in fp32, rounded once to the activation
    dtype."""
    x = scale.x_scaled
    rstd = torch.rsqrt(scale.squares.float().sum() / x.numel() + scale.eps)
    y = (weight.float() @ x.float().reshape(-1)) * rstd
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)
