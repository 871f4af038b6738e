"""The quantisation paths on a CUDA GPU, each through its package's own kernel: every layer of the real shapes
against its dequantised weight at a decode row and at prefill rows (Marlin's prefill on dequantise + matmul),
Marlin's packing against AutoAWQ's own from_linear, ExLlamaV2's prefill on its reconstruct + cuBLAS path, and
every path's fused projections."""

from __future__ import annotations

import pytest
import torch

from decodegap.harness import models
from decodegap.quant import paths as quant, formats as quant_formats
from decodegap.quant import fuse as quant_fuse, layers as quant_layers, loaders as quant_loaders

pytestmark = pytest.mark.gpu
LLAMA = models.load_spec("llama-3.1-8b").config
KERNEL_PATHS = ("bnb-nf4", "awq-marlin", "awq-triton", "gptq-exllamav2", "int4-tinygemm", "int4-triton")


def _available(key):
    reason = quant.unavailable_reason(key, "cuda")
    if reason:
        pytest.skip(f"{key}: {reason}")


@pytest.mark.parametrize("layer", ["q_proj", "o_proj", "gate_proj", "down_proj"])
@pytest.mark.parametrize("key", KERNEL_PATHS)
def test_each_kernel_applies_its_dequantised_weight(key, layer):
    """At one row and at 2048 (a prefill), every path within quant.QUANT_TOL of x @ W_deq^T; Marlin's prefill runs
    dequantise + matmul (quant_layers.AWQMarlinLinear: its kernel's multi-row configuration is not used)."""
    _available(key)
    k, n = quant.layer_shapes(LLAMA)[layer]
    errors = quant.check_linear(key, k, n, "cuda", rows=(1, 16, 2048))
    assert all(quant.passes(e, quant.QUANT_TOL) for e in errors.values()), errors


def test_marlins_kernel_runs_the_rows_it_is_given_and_no_more():
    """marlin_cuda.mul serves up to KERNEL_MAX_ROWS rows (16: the decode step and anything its 16-row
    configuration takes); one row more goes to dequantise + matmul, which equals the fp32 reference to fp16."""
    _available("awq-marlin")
    layer = quant.build_linear("awq-marlin", 4096, 1024, "cuda", seed=1)
    w = layer.dequantised_weight(torch.float32)
    called = []
    real = quant_layers.quant_ops.marlin_mul
    quant_layers.quant_ops.marlin_mul = lambda *a: called.append(a[0].shape[0]) or real(*a)
    try:
        for m in (1, 16, 17):
            x = torch.randn(m, 4096, device="cuda").to(torch.bfloat16)
            ref = x.float() @ w.t()
            assert float((layer(x).float() - ref).abs().max() / ref.abs().max()) < quant.QUANT_TOL
    finally:
        quant_layers.quant_ops.marlin_mul = real
    assert called == [1, 16]


def test_marlins_permutation_tables_are_autoawqs():
    _available("awq-marlin")
    marlin = quant_loaders.awq_module("modules/linear/marlin.py")
    ours = quant_formats.marlin_perms_reference()
    assert torch.equal(torch.as_tensor(marlin._perm), ours[0]) and torch.equal(torch.as_tensor(marlin._scale_perm), ours[1])


def test_marlin_packing_is_autoawqs_own():
    _available("awq-marlin")
    marlin = quant_loaders.awq_module("modules/linear/marlin.py")
    w = torch.randn(1024, 512, device="cuda") * 0.02
    q, s = quant_formats.rtn_symmetric(w, 128)
    deq = ((q.float() - 8) * quant_formats.grouped(s, 128)).half()
    linear = torch.nn.Linear(512, 1024, bias=False, device="cuda", dtype=torch.float16)
    with torch.no_grad():
        linear.weight.copy_(deq)
    theirs = marlin.WQLinear_Marlin.from_linear(linear, 4, 128, scales=s.half())
    qweight, scales = quant_formats.marlin_pack(q, s, 128, quant_formats.marlin_perms(marlin))
    assert torch.equal(qweight, theirs.qweight) and torch.equal(scales, theirs.scales)


@pytest.mark.parametrize("key", KERNEL_PATHS)
def test_fused_projections_equal_their_parts_on_the_gpu(key):
    _available(key)
    parts = [quant.build_linear(key, 4096, n, "cuda", seed=i) for i, n in enumerate((4096, 1024, 1024))]
    fused = quant_fuse.fuse_linears(parts)
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        ref = torch.cat([p(x) for p in parts], dim=-1).float()
        got = fused(x).float()
    assert float((got - ref).abs().max() / ref.abs().max()) < 1e-2
