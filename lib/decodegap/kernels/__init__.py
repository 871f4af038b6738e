"""kernels: the package's own Triton kernels (step: the one-row GEMV and the split-KV attention; fused: the fused
step's products; int4_gemv and fused_int4: the same on int4 weights)."""

from __future__ import annotations

import sys

TUNED_KERNELS = {"int4_gemv": "decodegap.kernels.int4_gemv.kernel", "fused_int4_gemv": "decodegap.kernels.fused_int4.launch"}
"""The kernels that tune their launch config in each process (on a shape's first call), by the module that keeps the
choices (its `tuned_configs`)."""


def tuned_choices() -> dict[str, dict[str, str]]:
    """{kernel: {shape and flavour: config}} of every choice the tuned kernels made in this process, for the kernels
    whose module was imported and which chose anything (nothing is imported here: on a machine without Triton it is
    empty). A session reports it with its timing (env.json `sessions`), so a step's time can be read beside the
    configs its process ran."""
    out = {}
    for kernel, module in TUNED_KERNELS.items():
        loaded = sys.modules.get(module)
        choices = loaded.tuned_configs() if loaded is not None else {}
        if choices:
            out[kernel] = choices
    return out
