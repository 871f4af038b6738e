"""Weights asked of the L2 before a kernel waits for its predecessor: the fused step's `l2_prefetch` option.

Under programmatic dependent launch (PDL) a product's programs start while the kernel before it still runs, load
their first weight tile into registers and wait (decodegap.kernels.fused.launch's module docstring). The weights do
not depend on the previous kernel, so a program may ask for more of them before it waits, without registers to hold
them: one bulk prefetch a row (PTX `cp.async.bulk.prefetch.L2.global`, sm_90 and later) brings the first columns of
each of its rows' share into the L2, and the loop after the wait finds them there. It is a hint: no value changes
(the L2 is where every write becomes visible, so a line fetched early is never stale), and a line evicted before the
loop reads it is read again from memory. The prefetch is bounded (L2_PREFETCH_BYTES a product), so what one product
asks for fits in the L2 beside the stream of the product before it.

`l2_prefetch_function` builds the Triton function the kernels call; `l2_prefetch_row_bytes` is the host's rule for
how much of each row a program asks for (`l2_prefetch_cols` the same in bf16 columns)."""

from __future__ import annotations

from decodegap.kernels.step import _interpreted, _triton

L2_PREFETCH_BYTES = 8 << 20
"""Bytes of weights one product asks of the L2 before its wait, over all its programs (8 MiB): a sixth of the
H100's and the H200's 50 MB L2, so the prefetch survives the stream of the product before it (which passes through
the same L2), and about 1.7 us of the H200's datasheet bandwidth, the order of the fixed cost a product pays a step
(notebook 06's where-the-time-goes rows). Chosen on 2026-12-07 before any row of the lever that uses it."""

L2_LINE_BYTES = 128
"""Bytes of one L2 line, what the prefetch of a row is counted in (64 bf16 columns, 256 int4 columns)."""


def l2_prefetch_row_bytes(rows: int, share_bytes: int, splits: int = 1, budget_bytes: int = L2_PREFETCH_BYTES) -> int:
    """Bytes of each row's share a program asks of the L2 before its wait: the most whole lines (L2_LINE_BYTES) such
    that `rows` weight rows (every row a program reads, gate's and up's alike) times `splits` shares of K a row
    stay within `budget_bytes`, and at most the share (`share_bytes`); 0 where not one line a row fits (the bf16 LM
    head's 128,256 rows: nothing is prefetched)."""
    if min(rows, share_bytes, splits) < 1:
        raise ValueError(f"the L2 prefetch takes positive rows, share and splits, got {rows}, {share_bytes}, {splits}")
    lines = budget_bytes // (rows * splits * L2_LINE_BYTES)
    return int(min(lines * L2_LINE_BYTES, share_bytes))


def l2_prefetch_cols(rows: int, share_cols: int, splits: int = 1, budget_bytes: int = L2_PREFETCH_BYTES) -> int:
    """l2_prefetch_row_bytes in bf16 columns: the columns of each row's share of `share_cols` (fused_gemv's)."""
    return l2_prefetch_row_bytes(rows, 2 * share_cols, splits, budget_bytes) // 2


def l2_prefetch_function():
    """l2_prefetch(ptr, nbytes), a Triton function built once: the program's first thread asks the L2 for `nbytes`
    bytes from `ptr` on (a multiple of 16, `ptr` 16-byte aligned; nothing when `nbytes` is 0). Triton's interpreter
    runs no inline PTX, so there it does nothing (the prefetch changes no value)."""
    if "l2_prefetch" not in _BUILT:
        triton, tl = _triton()
        if _interpreted():
            @triton.jit
            def l2_prefetch(ptr, nbytes):
                pass
        else:
            @triton.jit
            def l2_prefetch(ptr, nbytes):
                tl.inline_asm_elementwise(
                    "{ .reg .pred p; .reg .b32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
                    "setp.ne.and.u32 p, $2, 0, p; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
                    "=r,l,r", [ptr, nbytes], dtype=tl.int32, is_pure=False, pack=1)

        globals().update(tl=tl)  # the interpreter looks triton.language up among the function's module globals
        _BUILT["l2_prefetch"] = l2_prefetch
    return _BUILT["l2_prefetch"]


_BUILT: dict = {}
