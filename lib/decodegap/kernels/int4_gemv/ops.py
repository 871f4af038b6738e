"""The int4 GEMV as a custom operator (decodegap::int4_gemv), for the layer under torch.compile."""

from __future__ import annotations

import torch

from decodegap.kernels.int4_gemv import kernel


@torch.library.custom_op("decodegap::int4_gemv", mutates_args=())
def int4_gemv_op(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor,
                 group_size: int) -> torch.Tensor:
    """int4_gemv as one opaque operator, for the layer: torch.compile keeps it as a node and runs its Python
    (the alignment check on x's storage offset, the autotuned launch) at run time, where tracing it breaks the
    graph (`storage_offset()` returns an int; seen on the H200 with torch 2.11)."""
    return kernel.int4_gemv(x, packed, scales, offsets, group_size)


@int4_gemv_op.register_fake
def _(x, packed, scales, offsets, group_size):
    N = packed.shape[0]
    return x.new_empty(*x.shape[:-1], N, dtype=torch.bfloat16) if x.dim() > 1 else x.new_empty(N, dtype=torch.bfloat16)
