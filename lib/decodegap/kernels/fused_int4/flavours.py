"""The fused int4 product of each flavour beside its reference, as one pair of functions of (x, layer): what the
bench that times the flavours (bench/fused_int4_gemv.py) and the GPU test that checks them (tests/test_fused_int4.py)
both run."""

from __future__ import annotations

from decodegap.kernels.fused import reference as fused_reference, rotary_args
from decodegap.kernels.fused_int4.configs import FLAVOUR_FLAGS
from decodegap.kernels.fused_int4.launch import fused_int4_gemv
from decodegap.kernels.fused_int4.reference import linear_reference


def flavour_product(flavour: str, norm_weight, residual, out_norm_weight, eps: float, rotary=None,
                    reference_rotary=None, **launch):
    """(call, reference) of the fused int4 product of `flavour` (kernels.fused_int4.configs.FLAVOUR_FLAGS), each
    taking (x, layer): `call` fused_int4_gemv with the flavour's prologue and epilogue (`launch`: its pdl,
    early_trigger and config), `reference` the same in PyTorch (kernels.fused.reference on the int4 layer's
    rounding). `norm_weight` feeds the norm prologue, `residual` the residual epilogue, `out_norm_weight` the output
    norm of residual_norm and silu_residual_norm (whose calls and references return (y, RMSNorm(y))); the silu_residual
    flavours take x as [gate; up]; bias and plain are the same call (Qwen2's bias sits inside the layer); the
    gate_up flavours (the SiLU epilogue, after the norm prologue or none) take the [gate; up] layer and return
    SiLU(gate) * up, half its rows; the rotary flavours (qkv with the rotary epilogue, after the norm prologue or
    none) take `rotary` (the tables, position, caches and head counts, fused_int4_gemv's) and return the rotary q,
    the reference writing k and v into `reference_rotary`'s caches (default: its own copy of the caches; a caller
    that compares the rows written passes rotary_args.with_own_caches(rotary) and reads them there with
    rotary_args.rotary_rows)."""
    if flavour not in FLAVOUR_FLAGS:
        raise ValueError(f"no flavour {flavour!r} of the fused int4 product; known: {', '.join(FLAVOUR_FLAGS)}")
    if flavour.endswith("_rotary"):
        if rotary is None:
            raise ValueError(f"the {flavour} product takes `rotary`: (cos, sin, start_pos, k_cache, v_cache, H, Hkv)")
        ref_rotary = rotary_args.with_own_caches(rotary) if reference_rotary is None else reference_rotary
        if flavour.startswith("norm"):
            return (lambda x, layer: fused_int4_gemv(x, layer, norm_weight=norm_weight, eps=eps, rotary=rotary,
                                                     **launch),
                    lambda x, layer: fused_reference.rmsnorm_gemv_rotary_reference(x, norm_weight, layer, None, eps,
                                                                                   ref_rotary))
        return (lambda x, layer: fused_int4_gemv(x, layer, rotary=rotary, **launch),  # after the norm in an epilogue
                lambda x, layer: fused_reference.gemv_rotary_reference(x, layer, None, ref_rotary))
    if flavour in ("norm", "norm_bias"):  # Qwen2's bias sits inside the layer
        return (lambda x, layer: fused_int4_gemv(x, layer, norm_weight=norm_weight, eps=eps, **launch),
                lambda x, layer: fused_reference.rmsnorm_gemv_reference(x, norm_weight, layer, None, eps))
    if flavour in ("residual", "residual_norm", "silu_residual", "silu_residual_norm"):
        silu = flavour.startswith("silu")
        out_norm = (out_norm_weight, eps) if flavour.endswith("_norm") else None

        def reference(x, layer):
            return fused_reference.with_output_norm((fused_reference.silu_gemv_residual_reference if silu else
                                                     fused_reference.gemv_residual_reference)(x, layer, residual),
                                                    out_norm)

        return (lambda x, layer: fused_int4_gemv(x, layer, silu_x=silu, residual=residual, out_norm=out_norm,
                                                 **launch), reference)
    if flavour in ("plain", "bias"):
        return (lambda x, layer: fused_int4_gemv(x, layer, **launch), linear_reference)
    if flavour == "gate_up":
        return (lambda x, layer: fused_int4_gemv(x, layer, norm_weight=norm_weight, eps=eps, gate_up=True, **launch),
                lambda x, layer: fused_reference.gate_up_silu_reference(x, norm_weight, layer, eps))
    return (lambda x, layer: fused_int4_gemv(x, layer, gate_up=True, **launch),  # plain_gate_up
            fused_reference.gate_up_plain_silu_reference)
