"""The check a product bench makes of a fused product before it times it (bench/fused_gemv.py's bf16 products and
bench/fused_int4_gemv.py's int4 ones): its output against its reference's, and a rotary product's cache rows too."""

from __future__ import annotations

from decodegap.kernels.fused import rotary_args


def rel_err(y, ref) -> float:
    """max|y - ref| / max|ref|; of tuples (out_norm's (y, h), a rotary product's (q, k rows, v rows)) the largest."""
    if isinstance(y, tuple):
        return max(rel_err(a, b) for a, b in zip(y, ref))
    return ((y.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


def product_error(got, ref, rotary=None, reference_rotary=None) -> float:
    """The error of a product's output `got` against its reference's `ref` (rel_err); with `rotary`, the largest over q
    and the k and v rows at the token's position (rotary_args.rotary_rows), the kernel's caches against those its
    reference wrote (`reference_rotary`): a cache write that is wrong fails the check even where q is right."""
    if rotary is None:
        return rel_err(got, ref)
    return rel_err((got, *rotary_args.rotary_rows(rotary)), (ref, *rotary_args.rotary_rows(reference_rotary)))


def checked_error(call, reference, x, w, rotary=None, reference_rotary=None) -> float:
    """product_error of call(x, w) against reference(x, w) (`w` a bf16 weight or an int4-triton layer). The kernel's k
    and v rows are zeroed before its call (rotary_args.clear_rows), so that rows an earlier config or launch wrote into
    the shared caches cannot pass for this call's."""
    if rotary is not None:
        rotary_args.clear_rows(rotary)
    return product_error(call(x, w), reference(x, w), rotary, reference_rotary)
