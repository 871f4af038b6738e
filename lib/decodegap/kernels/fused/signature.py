"""The fused bf16 kernel's argument types for an offline compile (decodegap.kernels.offline), as
decodegap.kernels.fused_int4.signature holds the int4 kernel's: what the sm_90 compile tests (tests/test_fused.py,
tests/test_norm_scale.py) compile fused_gemv_kernel from."""

from __future__ import annotations

from decodegap.kernels.fused.norm_scale import SCALE_OFF

GEMV_ARG_TYPES = dict(x_ptr="*bf16", w_ptr="*bf16", y_ptr="*bf16", norm_ptr="*bf16", bias_ptr="*bf16",
                      res_ptr="*bf16", part_ptr="*fp32", count_ptr="*i32", N="i32", K="i32", K_SPLIT="i32", eps="fp32",
                      onorm_ptr="*bf16", h_ptr="*bf16", ncount_ptr="*i32", eps_out="fp32", cos_ptr="*bf16",
                      sin_ptr="*bf16", pos_ptr="*i64", kc_ptr="*bf16", vc_ptr="*bf16", L="i32", sq_in_ptr="*fp32",
                      sq_out_ptr="*fp32", n_parts="i32")
"""fused_gemv_kernel's runtime arguments and their Triton types (the rest are constexprs)."""
GEMV_OFF = dict(SCALE_OFF, L2_COLS=0)
"""The norm-scale and L2-prefetch constexprs of a product without them (kernels.fused.norm_scale.SCALE_OFF, no
kernels.l2_prefetch: fused.launch's defaults)."""
