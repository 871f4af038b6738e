"""The split-K workspace of the fused step's kernels (fused_gemv's split-K partials and arrival counters, and the
output norm's of fused_gemv and fused_int4_gemv): one a device, allocated once."""

from __future__ import annotations

import torch

from decodegap.kernels.device_buffers import DeviceBuffers

WORKSPACE_FLOATS = 1 << 20
"""fp32 partial sums the split-K workspace holds (SPLIT_K x N of one product): 4 MiB a device."""
WORKSPACE_ROW_BLOCKS = 1 << 16
"""Arrival counters of the split-K workspace (one a row block of one product)."""

_WORKSPACES = DeviceBuffers(lambda device: (torch.empty(WORKSPACE_FLOATS, dtype=torch.float32, device=device),
                                            torch.zeros(WORKSPACE_ROW_BLOCKS, dtype=torch.int32, device=device)))


def workspace(device) -> tuple:
    """(fp32 partials [WORKSPACE_FLOATS], int32 arrival counters [WORKSPACE_ROW_BLOCKS], zero) of `device`'s
    split-K workspace: allocated once and never reallocated (a captured graph keeps its addresses). The
    kernels of one stream share it: each split-K kernel leaves every counter at zero when it completes, and the
    next touches it only after its wait (PDL) or its launch. Two streams running split-K products at once
    would need one workspace each."""
    return _WORKSPACES(device)
