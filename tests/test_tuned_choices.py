"""The launch configs a session's tuned kernels chose, as the session reports them with its timing
(kernels.tuned_choices): each fresh process tunes the int4 kernels again, so a step's time is read beside them."""

from __future__ import annotations

import sys
from types import SimpleNamespace

from decodegap import kernels


def test_the_choices_of_both_int4_kernels_by_shape_and_flavour(monkeypatch):
    from decodegap.kernels.fused_int4 import launch
    from decodegap.kernels.int4_gemv import kernel

    flags = (("BIAS", False), ("EARLY_TRIGGER", True), ("NORM", False), ("RESIDUAL", True), ("SILU_X", True),
             ("USE_PDL", True), ("XBLOCK", 16))  # down: SiLU(gate) * up in, the residual out, PDL, early trigger
    monkeypatch.setattr(launch, "_TUNED", {(4096, 14336, 128, flags, False): (8, 2, 4)})
    chosen = SimpleNamespace(kwargs={"BLOCK_N": 4, "SUB_MAX": 1, "CHUNKS": 64}, num_warps=2, num_stages=1)
    monkeypatch.setitem(kernel._COMPILED, "int4_gemv", SimpleNamespace(cache={(6144, 4096, "torch.int32"): chosen}))
    assert kernels.tuned_choices() == {
        "int4_gemv": {"N=6144 K=4096": "BLOCK_N=4 SUB_MAX=1 CHUNKS=64 num_warps=2 num_stages=1"},
        "fused_int4_gemv": {"N=4096 K=14336 G=128 EARLY_TRIGGER RESIDUAL SILU_X USE_PDL":
                            "BLOCK_N=8 SUB_MAX=2 num_warps=4"}}
    assert kernel.tuned_config(6144, 4096) == "BLOCK_N=4 SUB_MAX=1 CHUNKS=64 num_warps=2 num_stages=1"
    assert kernel.tuned_config(4096, 4096) == ""  # a shape not yet called


def test_nothing_is_reported_or_imported_where_no_tuned_kernel_ran(monkeypatch):
    for module in kernels.TUNED_KERNELS.values():
        monkeypatch.delitem(sys.modules, module, raising=False)
    assert kernels.tuned_choices() == {}
    assert not any(module in sys.modules for module in kernels.TUNED_KERNELS.values())
