"""The RMSNorm left to the next product as a scale (fused_gemv's and fused_int4_gemv's out_scale and norm_scale;
FusedOps.norm_scale): its operand, NormScale, and the two kernels' arguments of it (their references:
decodegap.kernels.fused.reference's output_scale_reference and scaled_linear_reference)."""

from __future__ import annotations

from typing import NamedTuple

import torch


class NormScale(NamedTuple):
    """RMSNorm(y) of a product's output y, left to the next product as a scale (fused_gemv's out_scale): `x_scaled`
    y times the norm weight, rounded to y's dtype ([N]); `squares` each row block's sum of squares of y (fp32, one a
    row block); `eps` the norm's. The next product reads x_scaled as its x and multiplies its sums by
    1 / rms = rsqrt(sum(squares) / N + eps) (fused_gemv's norm_scale), so no program of either waits for the whole
    of y before it streams its weights. HF rounds y * (1 / rms) first, then the weight: this rounds y * weight and
    scales the fp32 sums, the exact norm's value with other roundings (NormScale products are checked against HF
    within the step's tolerance, not equal to its rounding)."""
    x_scaled: torch.Tensor
    squares: torch.Tensor
    eps: float


SCALE_OFF = dict(SCALE_IN=False, QBLOCK=16, OUT_SCALE=False)
"""The norm-scale constexprs of a product without out_scale or norm_scale (both kernels')."""

MAX_SQUARES = 1 << 12
"""The most sums of squares a consumer loads (one a row block of the product before it: 4096 rows of a 16k hidden
size at BLOCK_N 4); every program holds them in registers until its loop ends."""


def check_scale(out_scale, norm_scale, other_output: bool, prologue: bool) -> None:
    """Refuse a norm scale the kernel cannot run: out_scale beside another output (`other_output`: gate_up, rotary or
    out_norm), norm_scale beside a prologue (norm_weight or silu_x) or with more sums of squares than it reads."""
    if out_scale is not None and other_output:
        raise ValueError("out_scale is implemented for a product with one output per row and no other output norm "
                         "(no gate_up, rotary or out_norm)")
    if norm_scale is not None and (prologue or norm_scale.squares.numel() > MAX_SQUARES):
        raise ValueError(f"norm_scale replaces the norm prologue: it takes no norm_weight or silu_x, and at most "
                         f"{MAX_SQUARES} sums of squares (every program loads them all); got "
                         f"{norm_scale.squares.numel()}")


def scale_args(xc, y, blocks: int, out_scale, norm_scale) -> tuple[dict, NormScale | None]:
    """The kernels' arguments (fused_gemv's and fused_int4_gemv's) of out_scale and norm_scale (OUT_SCALE with y times
    the norm weight and one sum of squares a row block, `blocks` of them at most, written to buffers made here;
    SCALE_IN with the NormScale's squares; out_scale's norm weight and x_scaled in onorm_ptr and h_ptr, which out_norm
    fills otherwise), `xc` in the place of the buffers neither uses; and the NormScale out_scale returns beside y (None
    without it; a caller whose launch runs fewer row blocks keeps only theirs)."""
    args = dict(sq_in_ptr=xc, sq_out_ptr=xc, n_parts=1, **SCALE_OFF)
    scaled = None
    if out_scale is not None:
        scaled = NormScale(torch.empty_like(y), torch.empty(blocks, dtype=torch.float32, device=y.device),
                           float(out_scale[1]))
        args.update(onorm_ptr=out_scale[0].contiguous(), h_ptr=scaled.x_scaled, sq_out_ptr=scaled.squares,
                    OUT_SCALE=True)
    if norm_scale is not None:
        parts = norm_scale.squares.numel()
        args.update(sq_in_ptr=norm_scale.squares, n_parts=parts, SCALE_IN=True,
                    QBLOCK=max(16, 1 << (parts - 1).bit_length()))
    return args, scaled
