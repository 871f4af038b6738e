"""Kernel workspaces made once a device and kept: the arrival counters and partial results the kernels share between
their launches (the one-kernel attention's counters, the fused step's split-K workspace, the next token's). A captured
CUDA graph holds their addresses, so they are never reallocated; counters the kernels leave at zero start at zero."""

from __future__ import annotations

import torch


class DeviceBuffers:
    """The buffers `make(device)` returns (a tensor, or a tuple of them), made at the first call for a device and
    the same object returned at every later call for it. A device is named by its index: a bare "cuda" is the
    current CUDA device ("cuda:0" where that is the current one), the device a kernel's tensors report, so a check of
    the buffers through "cuda" reads the buffers the kernels use."""

    def __init__(self, make):
        self._make = make
        self._by_device: dict = {}

    def __call__(self, device):
        """`device`'s buffers, made now where this is its first call."""
        named = torch.device(device)
        if named.type == "cuda" and named.index is None:
            named = torch.device("cuda", torch.cuda.current_device())
        key = str(named)
        if key not in self._by_device:
            self._by_device[key] = self._make(named)
        return self._by_device[key]
