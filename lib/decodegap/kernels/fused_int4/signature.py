"""The fused int4 kernel's signature for an offline compile (decodegap.kernels.offline): its arguments' types and each
product's constexprs, set as decodegap.kernels.fused_int4.launch sets them for a launch without PDL. The sm_90
compile test (tests/test_fused_int4.py) and the instruction count (bench/int4_sass.py) compile from these."""

from __future__ import annotations

from decodegap.kernels.fused.norm_scale import SCALE_OFF
from decodegap.kernels.fused_int4.configs import FLAVOUR_FLAGS
from decodegap.kernels.int4_gemv.format import DEFAULT_GROUP_SIZE

ARG_TYPES = dict(x_ptr="*i32", xb_ptr="*bf16", p_ptr="*i32", s_ptr="*bf16", m_ptr="*bf16", y_ptr="*bf16",
                 norm_ptr="*i32", bias_ptr="*bf16", res_ptr="*bf16", part_ptr="*fp32", onorm_ptr="*bf16",
                 h_ptr="*bf16", ncount_ptr="*i32", N="i32", E11="i32", E15="i32", E19="i32", eps="fp32",
                 eps_out="fp32", cos_ptr="*bf16", sin_ptr="*bf16", pos_ptr="*i64", kc_ptr="*bf16", vc_ptr="*bf16",
                 L="i32", sq_in_ptr="*fp32", sq_out_ptr="*fp32", n_parts="i32")
"""fused_int4_gemv_kernel's runtime arguments and their Triton types (the rest are constexprs)."""


def constexprs(K: int, N: int, flavour: str, config: tuple[int, int, int], model_config: dict,
               group_size: int = DEFAULT_GROUP_SIZE) -> dict:
    """The kernel's constexprs for product (K, N) of `flavour` (configs.FLAVOUR_FLAGS) on `config` (BLOCK_N, SUB_MAX,
    num_warps), without PDL; the rotary flavours take their head counts from `model_config` (an HF config dict)."""
    block_n, sub, warps = config
    flags = dict(K=K, G=group_size, BLOCK_N=block_n, CHUNKS=32 * warps, SUB_MAX=sub, NORM=False, XBLOCK=16,
                 SILU_X=False, BIAS=False, RESIDUAL=False, OUT_NORM=False, PBLOCK=16, YBLOCK=16, GATE_UP=False,
                 ROTARY=False, PAIRED=False, HEAD_D=2, NQ=1, NKV=1, USE_PDL=False, EARLY_TRIGGER=False, L2_BYTES=0,
                 **SCALE_OFF)
    flags.update(FLAVOUR_FLAGS[flavour])
    flags["PAIRED"] = flags["GATE_UP"] or flags["ROTARY"]
    if flags["NORM"]:
        flags["XBLOCK"] = 1 << (K - 1).bit_length()
    if flags["OUT_NORM"]:
        flags.update(PBLOCK=1 << (-(-N // block_n) - 1).bit_length(), YBLOCK=1 << (N - 1).bit_length())
    if flags["ROTARY"]:
        heads = model_config["num_attention_heads"]
        flags.update(HEAD_D=model_config["hidden_size"] // heads, NQ=heads, NKV=model_config["num_key_value_heads"])
    return flags
