"""fuse_linears: one quantised layer for the several of one path that read the same input (the lean decoder's qkv
and gate_up), each path's packed tensors joined as its kernel reads them."""

from __future__ import annotations

import torch
from torch import nn

from decodegap.quant.layers import (BF16Linear, BnbNF4Linear, Int4TritonLinear, PackedLinear, QuantLinear,
                                    TinyGemmLinear, tinygemm_pack)


def _device(layer: nn.Module):
    """The device of a layer's tensors: buffers for most paths, a parameter for bitsandbytes' Params4bit."""
    return next(iter(layer.state_dict().values())).device


def fuse_linears(parts) -> QuantLinear:
    """One quantised layer for several of one path that read the same input (q/k/v, gate/up): its output is
    torch.cat of theirs along the last dimension, and so is its `dequantised_weight()`. tinygemm's packed codes
    and scales_and_zeros are joined as they are (CUDA: the first packed dimension counts tiles of 8 output rows;
    CPU: rows are interleaved by the CPU's vector width, so the codes are read back and packed again); the other
    packed paths (GPTQ, AWQ, Marlin) concatenate each packed tensor along its output dimension (dim 1: Marlin's
    permutation works within chunks of 64 columns); the Triton int4 layer fuses its own tensors; bitsandbytes
    concatenates its flattened codes and absmax (BnbNF4Linear.fuse). Biases are concatenated (zeros for a part without one, if
    another has one). ValueError for mixed paths or parts that differ in K, group size or device."""
    parts = list(parts)
    kinds = sorted({type(p).__name__ for p in parts})
    if not parts or len(kinds) > 1 or not isinstance(parts[0], QuantLinear) or isinstance(parts[0], BF16Linear):
        raise ValueError(f"fuse_linears fuses quantised layers of one path, not {', '.join(kinds) or 'nothing'}")
    first = parts[0]
    K, G = first.in_features, first.group_size
    device = _device(first)
    if any((p.in_features, p.group_size, _device(p)) != (K, G, device) for p in parts):
        raise ValueError("fuse_linears needs parts of one in_features, group size and device: "
                         + ", ".join(f"{p.in_features}/{p.group_size}" for p in parts))
    bias = None
    if any(p.bias is not None for p in parts):
        bias = torch.cat([p.bias if p.bias is not None else torch.zeros(p.out_features, dtype=torch.bfloat16,
                                                                        device=device) for p in parts])
    N = sum(p.out_features for p in parts)
    if type(first) is TinyGemmLinear:
        if first.cuda:
            if any(p.packed.shape[1:] != first.packed.shape[1:] for p in parts):
                raise ValueError(f"fuse_linears: packed tiles differ: {[tuple(p.packed.shape) for p in parts]}")
            packed = torch.cat([p.packed for p in parts])
        else:
            packed = tinygemm_pack(torch.cat([p.codes() for p in parts]), cuda=False)
        sz = torch.cat([p.scales_and_zeros for p in parts], dim=1).contiguous()
        return TinyGemmLinear(None, bias, G, packed=packed, scales_and_zeros=sz, shape=(N, K), device=device)
    if isinstance(first, PackedLinear):
        tensors = {name: torch.cat([getattr(p, name) for p in parts], dim=1) for name in first.TENSORS}
        return type(first)(K, N, G, bias, first.reference, **tensors)
    if type(first) is Int4TritonLinear:
        fused = type(first).__new__(type(first))
        QuantLinear.__init__(fused, K, N, G, bias, first.reference)
        fused.inner = first.inner.fuse([p.inner for p in parts])
        return fused
    if type(first) is BnbNF4Linear:
        return BnbNF4Linear.fuse(parts, bias)
    raise ValueError(f"fuse_linears cannot fuse {type(first).__name__} layers")
