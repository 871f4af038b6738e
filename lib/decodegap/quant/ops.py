"""The CUDA extensions of the quantisation paths as PyTorch custom operators, so that torch.compile (fullgraph) can
trace a step that calls them: dynamo cannot trace a call into a pybind11 extension (ExLlamaV2's
`gemm_half_q_half`, Marlin's `marlin_cuda.mul`), but it keeps a registered operator as one opaque node, whose
output shape comes from its fake implementation. Eager calls run the extension exactly as before.

ExLlamaV2 keeps its quantised matrix behind a handle (a raw pointer, an int) made by make_q_matrix; the layer
registers it in HANDLES under a small integer id, which the operator takes, so that no pointer enters a graph.
"""

from __future__ import annotations

import torch

HANDLES: dict[int, tuple] = {}
"""id -> (exllamav2_ext, handle) of every live ExLlamaV2 layer (quant_layers.GPTQExllamaV2Linear)."""


def register_exllamav2(ext, handle) -> int:
    """A new id for an ExLlamaV2 handle (forget_exllamav2 when the layer goes)."""
    key = max(HANDLES, default=-1) + 1
    HANDLES[key] = (ext, handle)
    return key


def forget_exllamav2(key: int) -> None:
    HANDLES.pop(key, None)


@torch.library.custom_op("decodegap::exllamav2_gemm", mutates_args=())
def exllamav2_gemm(x: torch.Tensor, key: int, out_features: int) -> torch.Tensor:
    """x [M, K] fp16 times the quantised matrix of HANDLES[key] -> [M, out_features] fp16."""
    ext, handle = HANDLES[key]
    out = torch.empty(x.shape[0], out_features, dtype=torch.float16, device=x.device)
    ext.gemm_half_q_half(x, handle, out, False)
    return out


@exllamav2_gemm.register_fake
def _(x, key, out_features):
    return x.new_empty(x.shape[0], out_features, dtype=torch.float16)


@torch.library.custom_op("decodegap::marlin_mul", mutates_args=())
def marlin_mul(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, workspace: torch.Tensor,
               max_par: int) -> torch.Tensor:
    """AutoAWQ's WQLinear_Marlin.forward's call: x [M, K] fp16 -> [M, N] fp16 through marlin_cuda.mul.

    The workspace holds Marlin's inter-block locks: the kernel takes them and gives them back to zero before it
    returns, so at the operator's boundary it is unchanged, and it is declared so (mutates_args=()). Declared
    as mutated, inductor refuses the operator inside the lean decoder's compiled layer regions (invoke_subgraph
    cannot functionalise a mutating custom operator there; seen on the H200 with torch 2.11)."""
    import marlin_cuda

    out = torch.empty(x.shape[0], scales.shape[1], dtype=torch.float16, device=x.device)
    marlin_cuda.mul(x, qweight, out, scales, workspace, -1, -1, -1, max_par)
    return out


@marlin_mul.register_fake
def _(x, qweight, scales, workspace, max_par):
    return x.new_empty(x.shape[0], scales.shape[1], dtype=torch.float16)
