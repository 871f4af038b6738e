"""PyTorch reference of the fused int4 product (decodegap.kernels.fused_int4.launch): the int4-triton layer's own
rounding (the product accumulated in fp32 against W_deq = q s + m and rounded to bf16, then + bias, rounded), so
that decodegap.kernels.fused.reference's prologue and epilogue references apply to int4 weights unchanged
(they call `linear_reference` for a weight that is not a tensor)."""

from __future__ import annotations

import torch

from decodegap.kernels.fused_int4.launch import int4_tensors
from decodegap.kernels.int4_gemv.format import dequantise


def linear_reference(x, layer):
    """x [..., K] (bf16) through an int4-triton `layer` (fused_int4.launch.int4_tensors): fp32 sums against the
    dequantised weight, rounded to bf16, then its bias added and rounded (the layer's own rounding)."""
    tensors = int4_tensors(layer)
    if tensors is None:
        raise ValueError(f"linear_reference takes an int4-triton layer, got {type(layer).__name__}")
    packed, scales, offsets, group_size, bias = tensors
    y = (x.float() @ dequantise(packed, scales, offsets, group_size).T).to(torch.bfloat16)
    return y if bias is None else (y.float() + bias.float()).to(torch.bfloat16)


def scaled_linear_reference(x, layer, rstd):
    """x [K] (a NormScale's x_scaled) through an int4-triton `layer` as the fused int4 product with norm_scale makes
    it (kernels.fused.reference.scaled_linear_reference's int4 case): the fp32 sums against the dequantised weight
    times `rstd` (the norm's 1 / rms), rounded to bf16, then the layer's bias added and rounded, as linear_reference
    rounds its product."""
    packed, scales, offsets, group_size, bias = int4_tensors(layer)
    y = ((dequantise(packed, scales, offsets, group_size).float() @ x.float().reshape(-1)) * rstd).to(torch.bfloat16)
    return y if bias is None else (y.float() + bias.float()).to(torch.bfloat16)
