"""The product benches' check on a CPU (kernels.fused.product_check, which bench/fused_gemv.py and
bench/fused_int4_gemv.py both run): a rotary product's error covers q and the k and v rows the kernel wrote into its
caches, each against the rows its reference wrote into its own copy (the kernel stood in for by the reference)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from decodegap import paths
from decodegap.kernels.fused import product_check, reference as fused_reference, rotary_args

HEADS = dict(num_attention_heads=2, num_key_value_heads=1, hidden_size=32)  # head_dim 16, qkv rows (2 + 2) x 16
CTX = 4


def _bench(name: str = "fused_gemv"):
    """bench/<name>.py as a module (bench/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, paths.REPO / "bench" / f"{name}.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _operands():
    """(x, qkv weight, rotary) of a small qkv product on the CPU: the caches zeroed, the token at CTX."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(32, generator=gen).bfloat16()
    w = (0.1 * torch.randn(64, 32, generator=gen)).bfloat16()
    return x, w, rotary_args.random_rotary(HEADS, CTX, "cpu", gen)


def _kernel_stand_in(rotary, k_scale=1.0, v_scale=1.0, writes_caches=True):
    """call(x, w) standing in for the fused kernel: the reference's q, writing its k and v rows (times k_scale and
    v_scale) into `rotary`'s caches, or into a throwaway copy of them where not writes_caches."""
    def call(x, w):
        target = rotary if writes_caches else rotary_args.with_own_caches(rotary)
        q = fused_reference.gemv_rotary_reference(x, w, None, target)
        k_rows, v_rows = rotary_args.rotary_rows(target)
        k_rows.mul_(k_scale)
        v_rows.mul_(v_scale)
        return q
    return call


def _written(rotary, reference_rotary):
    """(q, reference q) of the qkv product, its k and v rows written into both rotary's and reference_rotary's caches
    exactly."""
    x, w, _ = _operands()
    q = fused_reference.gemv_rotary_reference(x, w, None, rotary)
    return q, fused_reference.gemv_rotary_reference(x, w, None, reference_rotary)


def test_product_error_is_zero_for_identical_rows_and_above_the_tolerance_for_a_k_or_v_row_10_percent_off():
    bench = _bench()
    _, _, rotary = _operands()
    own = rotary_args.with_own_caches(rotary)
    q, q_ref = _written(rotary, own)
    assert product_check.product_error(q, q_ref, rotary, own) == 0.0
    for rows in rotary_args.rotary_rows(rotary):  # k, then v: 10 % off while q stays right
        saved = rows.clone()
        rows.mul_(1.1)
        err = product_check.product_error(q, q_ref, rotary, own)
        assert err > bench.TOL and abs(err - 0.1) < 0.01
        assert product_check.product_error(q, q_ref) == 0.0  # q alone: what the check saw before
        rows.copy_(saved)
    assert product_check.product_error(q * 1.1, q_ref, rotary, own) > bench.TOL


@pytest.mark.parametrize("name", ["fused_gemv", "fused_int4_gemv"])
def test_checked_error_fails_a_kernel_whose_rows_are_off_or_never_written(name):
    """Rows an earlier call wrote into the kernel's caches do not pass for this call's: the check zeroes them first
    (the bf16 bench's and the int4 bench's checks alike; their calls take (x, weight or layer) the same way)."""
    bench = _bench(name)
    assert bench.checked_error is product_check.checked_error  # one check, both benches
    x, w, rotary = _operands()
    own = rotary_args.with_own_caches(rotary)
    reference = (lambda x, w: fused_reference.gemv_rotary_reference(x, w, None, own))
    assert bench.checked_error(_kernel_stand_in(rotary), reference, x, w, rotary, own) == 0.0
    assert bench.checked_error(_kernel_stand_in(rotary, k_scale=1.1), reference, x, w, rotary, own) > bench.TOL
    assert bench.checked_error(_kernel_stand_in(rotary, v_scale=0.9), reference, x, w, rotary, own) > bench.TOL
    _kernel_stand_in(rotary)(x, w)  # the right rows already in the caches, from an earlier call
    stale = bench.checked_error(_kernel_stand_in(rotary, writes_caches=False), reference, x, w, rotary, own)
    assert stale == 1.0


def test_the_rotary_reference_of_fused_call_writes_the_caches_it_is_handed_never_the_kernels():
    bench = _bench()
    x, w, rotary = _operands()
    own = rotary_args.with_own_caches(rotary)
    _, reference = bench.fused_call("plain_rotary", None, None, None, None, False, rotary, own)
    q_ref = reference(x, w)
    assert q_ref.shape == (32,)
    assert all(rows.abs().sum() > 0 for rows in rotary_args.rotary_rows(own))
    assert rotary[3].abs().sum() == 0 and rotary[4].abs().sum() == 0
    _, own_copy = bench.fused_call("plain_rotary", None, None, None, None, False, rotary)  # a copy of its own
    assert torch.equal(own_copy(x, w), q_ref) and rotary[3].abs().sum() == 0


BENCH_SCALE_CHECKS = """
import importlib.util, torch
from decodegap import paths
from decodegap.kernels.fused import configs
from decodegap.kernels.fused.product_check import checked_error
spec = importlib.util.spec_from_file_location("fused_gemv", paths.REPO / "bench" / "fused_gemv.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
bench.DEVICE = "cpu"
gen = torch.Generator().manual_seed(0)
for flavour in configs.SCALE_FLAVOURS:
    x, w, nw, b, res = bench.operands(64, 32, flavour, gen)
    call, reference = bench.fused_call(flavour, nw, b, res, configs.GemvConfig(8, 32), False)
    err = checked_error(call, reference, x, w)
    assert err <= bench.TOL, (flavour, err)
    # the check can fail: a reference with another norm weight (out_scale) or other squares (scaled) is far off
    wrong = bench.fused_call(flavour, 2 * nw if flavour.endswith("scaled") else nw, None if b is None else 2 * b,
                             res, configs.GemvConfig(8, 32), False)[1]
    assert checked_error(call, wrong, x, w) > 10 * bench.TOL, flavour
print("bench scale flavours ok")
"""


def test_the_bench_checks_the_norm_scale_products_in_tritons_interpreter():
    """bench/fused_gemv.py's norm-scale flavours (configs.SCALE_FLAVOURS: qkv_scaled, o_scale, gate_up_plain_scaled,
    down_silu_scale and Qwen's biased qkv_scaled) on a small shape: the fused kernel passes the bench's check against
    its reference, and the same check fails against a reference with another norm weight or other sums of squares."""
    from conftest import run_interpreted

    run_interpreted(BENCH_SCALE_CHECKS, "bench scale flavours ok")
