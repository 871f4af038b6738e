"""The next token of a greedy decode step in one kernel: argmax of the logits written into the step's token, and its
position advanced by one, where the lean step otherwise launches torch's argmax (a one-block reduction over the
whole vocabulary), a copy into the token and an add to the position.

  next_token_kernel  BLOCK logits a program (fp32): each program writes its largest value and the first index that
                     holds it to a workspace, then bumps an arrival counter; the program that arrives last reads
                     the partial results in program order, takes the largest value and the first index holding it
                     (torch.argmax's choice among ties: the first), writes it as the token, adds one to the
                     position and resets the counter, so a CUDA graph replays it as captured.

A NaN logit is not ordered (torch.argmax would return its index): a step whose logits hold a NaN fails its checks
before any of its times count. next_token_reference_ is the same operation in PyTorch."""

from __future__ import annotations

import torch

from decodegap.kernels.device_buffers import DeviceBuffers
from decodegap.kernels.step import _triton

BLOCK = 2048
"""Logits a program reads: 63 programs for a vocabulary of 128256."""
MAX_PROGRAMS = 1 << 12
"""Programs the workspace holds partial results for: vocabularies up to BLOCK x MAX_PROGRAMS logits."""

_COMPILED: dict = {}
_WORKSPACES = DeviceBuffers(lambda device: (torch.empty(MAX_PROGRAMS, dtype=torch.float32, device=device),
                                            torch.empty(MAX_PROGRAMS, dtype=torch.int32, device=device),
                                            torch.zeros(1, dtype=torch.int32, device=device)))


def _kernel():
    if "next_token" not in _COMPILED:
        triton, tl = _triton()

        @triton.jit
        def next_token_kernel(x_ptr, tok_ptr, pos_ptr, val_ptr, idx_ptr, count_ptr, V,
                              BLOCK: tl.constexpr, PBLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < V, other=float("-inf")).to(tl.float32)
            best = tl.max(x, axis=0)
            tl.store(val_ptr + tl.program_id(0), best)
            tl.store(idx_ptr + tl.program_id(0), tl.min(tl.where(x == best, offs, V), axis=0))
            tl.debug_barrier()  # the partial results stored before the (one-thread) release below
            arrived = tl.atomic_add(count_ptr, 1, sem="acq_rel")
            if arrived == tl.num_programs(0) - 1:
                p = tl.arange(0, PBLOCK)
                vals = tl.load(val_ptr + p, mask=p < tl.num_programs(0), other=float("-inf"), cache_modifier=".cg")
                idxs = tl.load(idx_ptr + p, mask=p < tl.num_programs(0), other=V, cache_modifier=".cg")
                top = tl.max(vals, axis=0)
                tl.store(tok_ptr, tl.min(tl.where(vals == top, idxs, V), axis=0).to(tl.int64))
                tl.store(pos_ptr, tl.load(pos_ptr) + 1)
                tl.atomic_xchg(count_ptr, 0)  # ready for the next step

        _COMPILED["next_token"] = next_token_kernel
    return _COMPILED["next_token"]


def _workspace(device) -> tuple:
    """(fp32 values [MAX_PROGRAMS], int32 indices [MAX_PROGRAMS], int32 counter [1] at zero) of `device`: allocated
    once (a captured graph keeps its addresses); each launch leaves the counter at zero."""
    return _WORKSPACES(device)


def _check(logits, tok, pos) -> int:
    """The vocabulary size of one sequence's logits; ValueError naming what next_token_ cannot take."""
    V = logits.shape[-1]
    if logits.numel() != V:
        raise ValueError(f"next_token_ takes the logits of one sequence and one position, got shape "
                         f"{tuple(logits.shape)}: batch > 1 keeps torch's argmax")
    if tok.numel() != 1 or tok.dtype != torch.long or pos.numel() != 1 or pos.dtype != torch.long:
        raise ValueError(f"next_token_ writes one int64 token and one int64 position, got {tok.dtype} "
                         f"[{tok.numel()}] and {pos.dtype} [{pos.numel()}]")
    if -(-V // BLOCK) > MAX_PROGRAMS:
        raise ValueError(f"next_token_ takes at most {BLOCK * MAX_PROGRAMS} logits, got {V}")
    return V


def next_token_(logits, tok, pos) -> None:
    """tok <- argmax(logits) (the first index among ties), pos <- pos + 1, in one kernel (see the module docstring);
    logits of one sequence ([1, 1, V] or [V]), tok and pos int64 tensors of one element on the same device."""
    V = _check(logits, tok, pos)
    triton, _ = _triton()
    programs = -(-V // BLOCK)
    vals, idxs, count = _workspace(logits.device)
    _kernel()[(programs,)](logits.reshape(-1), tok, pos, vals, idxs, count, V, BLOCK=BLOCK,
                           PBLOCK=triton.next_power_of_2(programs), num_warps=4)


def next_token_reference_(logits, tok, pos) -> None:
    """next_token_'s operation in PyTorch: torch.argmax into tok, one added to pos."""
    _check(logits, tok, pos)
    tok.copy_(logits.reshape(-1).argmax().reshape(tok.shape))
    pos.add_(1)
