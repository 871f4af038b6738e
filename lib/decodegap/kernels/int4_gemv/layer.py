"""The int4 GEMV's layer: an nn.Linear in the int4-triton format whose single row runs the kernel (through its
custom operator, so torch.compile keeps it whole) and whose prefill dequantises and multiplies. The quantisation
path int4-triton wraps it (quant.layers.Int4TritonLinear)."""

from __future__ import annotations

import torch
from torch import nn

from decodegap.kernels.int4_gemv import ops  # noqa: F401  (registers decodegap::int4_gemv, which forward calls)
from decodegap.kernels.int4_gemv.format import DEFAULT_GROUP_SIZE, PATH_KEY, check_format, dequantise, quantise_rtn
from decodegap.kernels.step import available


_RUNS_ON: dict = {}


def _kernel_runs_on(device_type: str) -> bool:
    """`available(device) is None`, asked once per device type (a dict read inside a compiled forward)."""
    if device_type not in _RUNS_ON:
        _RUNS_ON[device_type] = available(device_type) is None
    return _RUNS_ON[device_type]


class Int4GemvLinear(nn.Module):
    """int4 weight-only nn.Linear(K, N) in the int4-triton format (int4_gemv.format).

    forward(x [..., K]) -> [..., N] bf16 (+ bias): a single row on CUDA (or under TRITON_INTERPRET=1) goes through
    the kernel (the decodegap::int4_gemv operator); more rows (a prefill), or a device where the kernel cannot run,
    is a dequantise-and-matmul, x @ dequantised_weight().T in bf16."""

    path_key = PATH_KEY

    def __init__(self, packed, scales, offsets, group_size: int = DEFAULT_GROUP_SIZE, bias=None):
        super().__init__()
        N, KW = packed.shape
        check_format(KW * 8, group_size)
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
            raise ValueError(f"fuse takes Int4GemvLinear layers, got {[type(p).__name__ for p in parts]}")
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
        if x.numel() == K and _kernel_runs_on(x.device.type):
            y = torch.ops.decodegap.int4_gemv(x, self.packed, self.scales, self.offsets,
                                             self.group_size).reshape(*x.shape[:-1], N)
        else:
            y = x.to(torch.bfloat16) @ self.dequantised_weight().T
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, path={self.path_key}, "
                f"group_size={self.group_size}, bias={self.bias is not None}")
