"""Fused decode-step kernels for the lean decoder (Triton): one decode step (T == 1) of a bf16 Llama, Mistral or
Qwen2 in seven kernels a layer, the small ops of the unfused step folded into the matrix products around them.
Each kernel has a PyTorch reference written to the same rounding as the unfused ops of decodegap.lean.

  fused_gemv    y = epilogue(prologue(x) @ W^T) for one row: the one GEMV of the fused step, its prologue and
                epilogue chosen by constexpr flags:
                  NORM      RMSNorm of x as the prologue (the qkv, gate_up and LM-head products). Each program
                            reads the whole of x once for its rms, then normalises each chunk of x as its loop
                            reads it, with HF's rounding: normalise in fp32, cast to the activation dtype, times
                            the norm weight rounded to the activation dtype.
                  BIAS      + bias in fp32, one rounding (Qwen2's qkv, as F.linear with a bias).
                  RESIDUAL  residual + bf16(product): the product rounded first, then the add rounded, as
                            `x + F.linear(...)` (the o and down products).
                  GATE_UP   a program reads BLOCK_N rows of gate and the matching rows of up from the fused
                            [gate; up] weight, rounds each sum to bf16, then SiLU(gate) rounded, times up rounded
                            (F.silu(gate) * up), so the MLP's activation is never written.
                  SILU_X    x is [gate; up] (2K values) and the product is taken of SiLU(gate) * up, made with
                            the same rounding as the loop reads x (the down product after a plain gate_up: the
                            fused step's MLP by default, FusedOps.silu_in_down).
                  ROTARY    the qkv product's epilogue is rotary_cache's operation: a program reads BLOCK_N rows
                            of the first halves of the heads and their partners half a head below (the rows
                            rotate_half pairs), rounds each sum (with the bias) to bf16, rotates q and k at the
                            position with rotary_cache's rounding, writes q out and k and v into the caches
                            (FusedOps.rotary_in_qkv: the rotary_cache kernel is then not launched).
                Grid: (ceil(N / BLOCK_N), SPLIT_K). A program reduces BLOCK_N rows over its slice of K in
                BLOCK_K chunks, fp32 accumulation (elementwise into a BLOCK_N x BLOCK_K accumulator, reduced across
                it once at the end), with the next chunk's weight tile loaded before the current one is used
                (register double buffering: two tiles in flight a program, and the first tile loaded
                before the kernel reads anything another kernel wrote, which is what PDL overlaps).
                Split-K (SPLIT_K > 1, for products whose N is small for their K: o and down): each program
                writes its fp32 partial sums to a workspace, then bumps an arrival counter of its row block;
                the last program of a row block to arrive sums the partials in split order (deterministic,
                unlike fp32 atomics, whose order changes the rounding from run to run), runs the epilogue and
                resets the counter to zero. So split-K needs neither a second launch nor a zeroed output (a
                memset launch: the fixed per-kernel cost split-K is meant to save), and a CUDA graph replays it
                as captured.
  rotary_cache  rotary embedding of q and k at position start_pos (a device tensor), with torch's rounding of
                q * cos + rotate_half(q) * sin (each product rounded to the activation dtype, then the sum),
                and the K/V cache write at that position: one program a head of q, k and v.
The step's attention is decodegap.kernels.decode_attention (split-KV), unchanged.

Configs: decodegap.fused_configs holds a GemvConfig per weight shape (N, K) of the three models' products, each
the fastest of its candidates (`candidate_configs`) in bench/fused_gemv.py's rows on the H200, which time them
beside cuBLAS, alone and as a layer's chain in a CUDA graph, with and without PDL (data/diagnostics/fused_gemv.csv);
`gemv_config` falls back to a rule for other shapes.

PDL (programmatic dependent launch, Hopper and later; `pdl=True`): a kernel launched with launch_pdl may start
while the kernel before it in the stream is still running. Each kernel here first loads what no kernel writes
(its first weight tiles), then waits (`gdc_wait`: the previous kernel has completed and its writes are
visible), then reads its inputs, and calls `gdc_launch_dependents` once its last read of the previous kernel's
output is issued (the GEMV: after its loop over x; rotary_cache: after its loads of qkv), which lets the next
kernel start its own weight loads. Every write of every kernel comes after its wait, so no kernel writes a buffer
its predecessor may still read, and the wait makes completion transitive: a kernel that has passed its wait
knows every earlier kernel in the stream has completed (a kernel completes only after it has passed its own
wait). The split-KV attention's two kernels (decodegap.kernels.decode_attention with pdl) wait first and
trigger their dependents once their reads are issued, so the o GEMV after them loads its first weight tiles while
the merge runs. With `early_trigger` every kernel triggers as it starts instead: nothing the trigger allows depends
on where it stands (a dependent still writes only after its wait, which waits for the whole of this kernel), so the
trigger only decides how soon the next grid may launch: once every program of this one has started, instead of once
the last has read its inputs, which for a grid of one wave is at once. A dependent launched early holds its SM
slots while it waits; every program of its predecessor is resident by then, so none is kept from starting.
Triton's interpreter does not run the gdc ops, so they sit behind the constexpr USE_PDL, False there.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .fused_configs import (GEMV_CONFIGS, PLAIN_CONFIGS, STEP_PRODUCTS, GemvConfig, _cdiv,  # noqa: F401
                            candidate_configs, flavour_candidates, gemv_config, products)
from .kernels import (_gdc, _interpreted, _triton, available, decode_attention, decode_attention_reference,
                      gdc_functions)


WORKSPACE_FLOATS = 1 << 20
"""fp32 partial sums the split-K workspace holds (SPLIT_K x N of one product): 4 MiB a device."""
WORKSPACE_ROW_BLOCKS = 1 << 16
"""Arrival counters of the split-K workspace (one a row block of one product)."""

# ------------------------------------------------------------------------------------------- references

def rmsnorm_reference(x, weight, eps: float):
    """HF's RMSNorm with its rounding written out: normalise in fp32, round to x's dtype, multiply by the weight
    in fp32 and round again (what `weight * h.to(dtype)` does in bf16: the product of two bf16 values is exact
    in fp32, so one rounding)."""
    h = x.float()
    h = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return (weight.float() * h.float()).to(torch.promote_types(weight.dtype, x.dtype))


def rmsnorm_gemv_reference(x, norm_weight, weight, bias, eps: float):
    """F.linear(RMSNorm(x), weight, bias): fused_gemv with NORM (and BIAS when `bias` is given)."""
    return F.linear(rmsnorm_reference(x, norm_weight, eps), weight, bias)


def gemv_residual_reference(x, weight, residual):
    """residual + F.linear(x, weight): the product rounded to the activation dtype, then the add in fp32,
    rounded (fused_gemv with RESIDUAL)."""
    return (F.linear(x, weight).float() + residual.float()).to(residual.dtype)


def gemv_residual_norm_reference(x, weight, residual, norm_weight, eps: float):
    """(y, RMSNorm(y)) of y = residual + F.linear(x, weight) (fused_gemv with RESIDUAL and OUT_NORM)."""
    y = gemv_residual_reference(x, weight, residual)
    return y, rmsnorm_reference(y, norm_weight, eps)


def silu_mul_reference(gate_up):
    """SiLU(gate) * up of gate_up = [gate; up] in the activation dtype: SiLU in fp32 rounded, the product in fp32
    rounded (F.silu(gate) * up in bf16)."""
    gate, up = gate_up.chunk(2, dim=-1)
    return (F.silu(gate.float()).to(gate.dtype).float() * up.float()).to(gate.dtype)


def gate_up_silu_reference(x, norm_weight, weight, eps: float):
    """SiLU(gate) * up of the fused [gate; up] weight after RMSNorm(x), gate and up each rounded to the activation
    dtype first (fused_gemv with NORM and GATE_UP)."""
    return silu_mul_reference(F.linear(rmsnorm_reference(x, norm_weight, eps), weight))


def silu_gemv_residual_reference(gate_up, weight, residual):
    """residual + F.linear(SiLU(gate) * up, weight) of gate_up = [gate; up] (fused_gemv with SILU_X and
    RESIDUAL)."""
    return gemv_residual_reference(silu_mul_reference(gate_up), weight, residual)


def rmsnorm_gemv_rotary_reference(x, norm_weight, weight, bias, eps: float, rotary):
    """rotary_cache_reference of the qkv product F.linear(RMSNorm(x), weight, bias), `rotary` = (cos_table,
    sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads): returns rotary q [H x D], writes k and v
    (fused_gemv with NORM and rotary)."""
    return rotary_cache_reference(rmsnorm_gemv_reference(x, norm_weight, weight, bias, eps), *rotary).reshape(-1)


def rotate_half_reference(x):
    """rotate_half of the last dimension: (-x2, x1)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary_reference(x, cos, sin):
    """x * cos + rotate_half(x) * sin with each product rounded to x's dtype, then the sum (as torch does it in
    bf16, elementwise in fp32)."""
    a = (x.float() * cos.float()).to(x.dtype)
    b = (rotate_half_reference(x).float() * sin.float()).to(x.dtype)
    return (a.float() + b.float()).to(x.dtype)


def rotary_cache_reference(qkv, cos_table, sin_table, start_pos, k_cache, v_cache, n_heads: int, n_kv_heads: int):
    """qkv [(H + 2 Hkv) D] of one token at position start_pos ([1] long tensor): returns rotary q [H, D]; writes
    rotary k and v at that position of k_cache, v_cache [1, Hkv, L, D] (rotary_cache)."""
    D = k_cache.shape[-1]
    q, k, v = qkv.reshape(-1, D).split([n_heads, n_kv_heads, n_kv_heads])
    cos, sin = cos_table[start_pos], sin_table[start_pos]  # [1, D]
    k_cache.index_copy_(2, start_pos, rotary_reference(k, cos, sin)[None, :, None])
    v_cache.index_copy_(2, start_pos, v[None, :, None])
    return rotary_reference(q, cos, sin)


# ---------------------------------------------------------------------------------------------- kernels

_COMPILED: dict = {}
_WORKSPACES: dict = {}


def _kernels():
    """(fused_gemv_kernel, rotary_cache_kernel), built once."""
    if "fused" not in _COMPILED:
        triton, tl = _triton()
        gdc_wait, gdc_launch_dependents = gdc_functions()

        @triton.jit
        def round_bf16(x):
            """fp32 -> the nearest bf16 value (ties to even), still fp32: the kernels round by hand so that Triton's
            interpreter, whose fp32 -> bf16 cast truncates, rounds as the GPU and torch do."""
            bits = x.to(tl.int32, bitcast=True)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
            return bits.to(tl.float32, bitcast=True)

        # the kernels find the functions they call among this module's globals (compiler and interpreter alike)
        globals().update(_round_bf16=round_bf16, _gdc_wait=gdc_wait, _gdc_launch_dependents=gdc_launch_dependents)

        @triton.jit
        def fused_gemv_kernel(x_ptr, w_ptr, y_ptr, norm_ptr, bias_ptr, res_ptr, part_ptr, count_ptr,
                              N, K, K_SPLIT, eps,
                              BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
                              NORM: tl.constexpr, XBLOCK: tl.constexpr, BIAS: tl.constexpr,
                              RESIDUAL: tl.constexpr, GATE_UP: tl.constexpr, SILU_X: tl.constexpr,
                              USE_PDL: tl.constexpr, onorm_ptr, h_ptr, ncount_ptr, eps_out,
                              OUT_NORM: tl.constexpr, PBLOCK: tl.constexpr, YBLOCK: tl.constexpr,
                              cos_ptr, sin_ptr, pos_ptr, kc_ptr, vc_ptr, L,
                              ROTARY: tl.constexpr, HEAD_D: tl.constexpr, NQ: tl.constexpr, NKV: tl.constexpr,
                              PAIRED: tl.constexpr, EARLY_TRIGGER: tl.constexpr):
            if USE_PDL:
                if EARLY_TRIGGER:  # at once: the next kernel may launch and load its first weights (see fused_gemv)
                    _gdc_launch_dependents()
            pid_n = tl.program_id(0)
            pid_k = tl.program_id(1)
            idx = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output rows (of gate, for GATE_UP)
            if ROTARY:  # idx counts the first halves of the heads (N of them): row head * D + d, its partner + D/2
                head = idx // (HEAD_D // 2)
                d = idx % (HEAD_D // 2)
                rows = head * HEAD_D + d
            else:
                rows = idx
            row_ok = idx < N
            k_lo = pid_k * K_SPLIT
            k_hi = tl.minimum(k_lo + K_SPLIT, K)
            offs = tl.arange(0, BLOCK_K)
            w_rows = w_ptr + rows[:, None].to(tl.int64) * K
            if ROTARY:
                u_rows = w_rows + (HEAD_D // 2) * K  # the rotary partners, half a head below
            else:
                u_rows = w_rows + N * K  # the matching rows of up, N rows below gate's
            cols = k_lo + offs
            mask = row_ok[:, None] & (cols[None, :] < k_hi)
            w = tl.load(w_rows + cols[None, :], mask=mask, other=0.0)  # weights: before the wait
            u = w
            if PAIRED:
                u = tl.load(u_rows + cols[None, :], mask=mask, other=0.0)
            if USE_PDL:
                _gdc_wait()
            rstd = 1.0
            if NORM:
                xo = tl.arange(0, XBLOCK)
                xa = tl.load(x_ptr + xo, mask=xo < K, other=0.0).to(tl.float32)
                rstd = tl.rsqrt(tl.sum(xa * xa, axis=0) / K + eps)
            # [BLOCK_N, BLOCK_K] accumulators, reduced across the tile once after the loop: a loop step is loads and
            # FMAs only, no cross-thread reduction (a shuffle and a shared-memory round trip a step otherwise)
            acc2 = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
            acc2_u = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
            for k0 in range(k_lo, k_hi, BLOCK_K):
                nxt = k0 + BLOCK_K + offs  # the next step's tile, issued before this step waits for x
                mask = row_ok[:, None] & (nxt[None, :] < k_hi)
                w_next = tl.load(w_rows + nxt[None, :], mask=mask, other=0.0)
                u_next = w_next
                if PAIRED:
                    u_next = tl.load(u_rows + nxt[None, :], mask=mask, other=0.0)
                cols = k0 + offs
                col_ok = cols < k_hi
                xk = tl.load(x_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
                if NORM:
                    nw = tl.load(norm_ptr + cols, mask=col_ok, other=0.0)
                    xf = _round_bf16(_round_bf16(xk * rstd) * nw.to(tl.float32))
                elif SILU_X:  # x is [gate; up]: the MLP's activation made as the loop reads it
                    up = tl.load(x_ptr + K + cols, mask=col_ok, other=0.0).to(tl.float32)
                    xf = _round_bf16(_round_bf16(xk / (1.0 + tl.exp(-xk))) * up)
                else:
                    xf = xk
                acc2 += w.to(tl.float32) * xf[None, :]
                w = w_next
                if PAIRED:
                    acc2_u += u.to(tl.float32) * xf[None, :]
                    u = u_next
            acc = tl.sum(acc2, axis=1)
            acc_u = tl.sum(acc2_u, axis=1)
            if USE_PDL:
                if not EARLY_TRIGGER:
                    _gdc_launch_dependents()  # x, the previous kernel's output, is read
            last = pid_k == SPLIT_K - 1  # a scalar: True when there is no split
            if SPLIT_K > 1:  # partials to the workspace; the last program of the row block sums them
                tl.store(part_ptr + pid_k * N + rows, acc, mask=row_ok)
                tl.debug_barrier()  # every thread's partials stored before the (one-thread) release below
                arrived = tl.atomic_add(count_ptr + pid_n, 1, sem="acq_rel")
                last = arrived == SPLIT_K - 1
                acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
                for s in tl.static_range(SPLIT_K):  # split order: the same sum every run
                    acc += tl.load(part_ptr + s * N + rows, mask=row_ok & last, other=0.0, cache_modifier=".cg")
                tl.atomic_xchg(count_ptr + pid_n, 0, mask=last)  # ready for the next product
            if ROTARY:  # q and k rotated at the position, as rotary_cache does; q to y, k and v into the caches
                y1, y2 = acc, acc_u
                if BIAS:
                    y1 += tl.load(bias_ptr + rows, mask=row_ok, other=0.0).to(tl.float32)
                    y2 += tl.load(bias_ptr + rows + HEAD_D // 2, mask=row_ok, other=0.0).to(tl.float32)
                y1, y2 = _round_bf16(y1), _round_bf16(y2)
                pos = tl.load(pos_ptr)
                t1, t2 = pos * HEAD_D + d, pos * HEAD_D + d + HEAD_D // 2
                c1, s1 = tl.load(cos_ptr + t1).to(tl.float32), tl.load(sin_ptr + t1).to(tl.float32)
                c2, s2 = tl.load(cos_ptr + t2).to(tl.float32), tl.load(sin_ptr + t2).to(tl.float32)
                rot = head < NQ + NKV  # q and k heads; v is written as it is
                o1 = tl.where(rot, _round_bf16(_round_bf16(y1 * c1) + _round_bf16(-y2 * s1)), y1)
                o2 = tl.where(rot, _round_bf16(_round_bf16(y2 * c2) + _round_bf16(y1 * s2)), y2)
                o1, o2 = o1.to(y_ptr.dtype.element_ty), o2.to(y_ptr.dtype.element_ty)
                is_q, is_v = row_ok & (head < NQ), row_ok & (head >= NQ + NKV)
                is_k = row_ok & rot & (head >= NQ)
                tl.store(y_ptr + rows, o1, mask=is_q)
                tl.store(y_ptr + rows + HEAD_D // 2, o2, mask=is_q)
                k_at = kc_ptr + (head - NQ).to(tl.int64) * L * HEAD_D + t1
                v_at = vc_ptr + (head - NQ - NKV).to(tl.int64) * L * HEAD_D + t1
                tl.store(k_at, o1, mask=is_k)
                tl.store(k_at + HEAD_D // 2, o2, mask=is_k)
                tl.store(v_at, o1, mask=is_v)
                tl.store(v_at + HEAD_D // 2, o2, mask=is_v)
            else:
                if GATE_UP:
                    g = _round_bf16(acc)
                    y = _round_bf16(_round_bf16(g / (1.0 + tl.exp(-g))) * _round_bf16(acc_u))
                else:
                    y = acc
                    if BIAS:
                        y += tl.load(bias_ptr + rows, mask=row_ok, other=0.0).to(tl.float32)
                    if RESIDUAL:
                        res = tl.load(res_ptr + rows, mask=row_ok & last, other=0.0).to(tl.float32)
                        y = _round_bf16(y) + res
                    y = _round_bf16(y)
                tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty), mask=row_ok & last)
            if OUT_NORM:  # RMSNorm of the whole output, made by the row block that arrives last (see fused_gemv)
                yb = y.to(y_ptr.dtype.element_ty).to(tl.float32)
                tl.store(part_ptr + pid_n, tl.sum(tl.where(row_ok, yb * yb, 0.0), axis=0))
                tl.debug_barrier()  # every thread's y stored before the (one-thread) release below
                arrived = tl.atomic_add(ncount_ptr, 1, sem="acq_rel")
                if arrived == tl.num_programs(0) - 1:
                    po = tl.arange(0, PBLOCK)
                    sq = tl.load(part_ptr + po, mask=po < tl.num_programs(0), other=0.0, cache_modifier=".cg")
                    rstd_out = tl.rsqrt(tl.sum(sq, axis=0) / N + eps_out)
                    yo = tl.arange(0, YBLOCK)
                    ya = tl.load(y_ptr + yo, mask=yo < N, other=0.0, cache_modifier=".cg").to(tl.float32)
                    nwo = tl.load(onorm_ptr + yo, mask=yo < N, other=0.0).to(tl.float32)
                    h = _round_bf16(_round_bf16(ya * rstd_out) * nwo)
                    tl.store(h_ptr + yo, h.to(h_ptr.dtype.element_ty), mask=yo < N)
                    tl.atomic_xchg(ncount_ptr, 0)  # ready for the next product

        @triton.jit
        def rotary_cache_kernel(qkv_ptr, cos_ptr, sin_ptr, pos_ptr, q_ptr, k_cache_ptr, v_cache_ptr, L,
                                H: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, USE_PDL: tl.constexpr,
                                EARLY_TRIGGER: tl.constexpr):
            if USE_PDL:
                if EARLY_TRIGGER:
                    _gdc_launch_dependents()
            i = tl.program_id(0)  # head i of qkv: q (i < H), then k, then v
            d = tl.arange(0, D)
            first = d < D // 2
            partner = tl.where(first, d + D // 2, d - D // 2)
            if USE_PDL:
                _gdc_wait()
            pos = tl.load(pos_ptr)
            x = tl.load(qkv_ptr + i * D + d)
            xp = tl.load(qkv_ptr + i * D + partner)
            if USE_PDL:
                if not EARLY_TRIGGER:
                    _gdc_launch_dependents()  # qkv, the previous kernel's output, is read
            cos = tl.load(cos_ptr + pos * D + d).to(tl.float32)
            sin = tl.load(sin_ptr + pos * D + d).to(tl.float32)
            rot = tl.where(first, -xp.to(tl.float32), xp.to(tl.float32))  # rotate_half(x)
            r = _round_bf16(_round_bf16(x.to(tl.float32) * cos) + _round_bf16(rot * sin))
            is_k = (i >= H) & (i < H + HKV)
            is_v = i >= H + HKV
            out = tl.where(is_v, x, r.to(x.dtype))
            tl.store(q_ptr + i * D + d, out, mask=(d < D) & (i < H))
            slot = pos * D + d
            tl.store(k_cache_ptr + (i - H) * L * D + slot, out, mask=(d < D) & is_k)
            tl.store(v_cache_ptr + (i - H - HKV) * L * D + slot, out, mask=(d < D) & is_v)

        _COMPILED["fused"] = (fused_gemv_kernel, rotary_cache_kernel)
    return _COMPILED["fused"]


def pdl_unavailable(device="cuda") -> str | None:
    """None when the kernels can be launched with programmatic dependent launch on `device`, else the reason:
    Triton missing, no CUDA device (Triton's interpreter does not run the gdc ops), a GPU older than Hopper (sm_90),
    a CUDA older than 12.3 (PDL in captured graphs), or a Triton without launch_pdl and the gdc ops."""
    reason = available(device)
    if reason:
        return reason
    if _interpreted() or not str(device).startswith("cuda"):
        return "programmatic dependent launch needs a CUDA GPU (Triton's interpreter does not run the gdc ops)"
    if not torch.cuda.is_available():
        return "programmatic dependent launch needs a CUDA GPU; none is visible"
    major, minor = torch.cuda.get_device_capability(torch.device(device))
    if major < 9:
        return f"programmatic dependent launch needs sm_90 or later (Hopper); this GPU is sm_{major}{minor}"
    cuda = tuple(int(p) for p in (torch.version.cuda or "0.0").split(".")[:2])
    if cuda < (12, 3):
        return f"programmatic dependent launch inside a CUDA graph needs CUDA 12.3 or later; torch has {torch.version.cuda}"
    if _gdc() is None:
        return "this Triton has no triton.language.extra.cuda.gdc_wait / gdc_launch_dependents"
    from triton.backends.nvidia.compiler import CUDAOptions

    if "launch_pdl" not in CUDAOptions.__dataclass_fields__:
        return "this Triton's launcher takes no launch_pdl option"
    return None


def weights_unsupported(hf_model) -> str | None:
    """None when the fused step can run `hf_model`'s decoder layers (bf16, every projection an nn.Linear), else
    the reason: the fused kernels read bf16 weights with the activation's rounding, not a quantised layer's
    format nor another dtype."""
    dtype = hf_model.model.embed_tokens.weight.dtype
    if dtype != torch.bfloat16:
        return f"the fused kernels run bf16 models; this one is {dtype}"
    for i, layer in enumerate(hf_model.model.layers):
        a, m = layer.self_attn, layer.mlp
        kinds = {type(p).__name__ for p in (a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj,
                                            m.down_proj) if type(p) is not nn.Linear}
        if kinds:
            return f"the fused kernels read bf16 nn.Linear weights; layer {i} has {', '.join(sorted(kinds))}"
    return None


def workspace(device) -> tuple:
    """(fp32 partials [WORKSPACE_FLOATS], int32 arrival counters [WORKSPACE_ROW_BLOCKS], zero) of `device`'s
    split-K workspace: allocated once and never reallocated (a captured graph keeps its addresses). The
    kernels of one stream share it: each split-K kernel leaves every counter at zero when it completes, and the
    next touches it only after its wait (PDL) or its launch. Two streams running split-K products at once
    would need one workspace each."""
    key = str(torch.device(device))
    if key not in _WORKSPACES:
        _WORKSPACES[key] = (torch.empty(WORKSPACE_FLOATS, dtype=torch.float32, device=device),
                            torch.zeros(WORKSPACE_ROW_BLOCKS, dtype=torch.int32, device=device))
    return _WORKSPACES[key]


def fused_gemv(x, weight, *, norm_weight=None, eps: float = 0.0, bias=None, residual=None, gate_up: bool = False,
               silu_x: bool = False, out_norm=None, rotary=None, config: GemvConfig | None = None, pdl: bool = False,
               early_trigger: bool = False):
    """One row x (numel K) through fused_gemv (see the module docstring) against weight [N, K]: returns [N] in
    x's dtype ([N / 2] for gate_up). `norm_weight`: the RMSNorm prologue; `silu_x`: x is [gate; up] (numel 2K)
    and the product is taken of SiLU(gate) * up; `bias` [N]; `residual` [N]: the residual epilogue; `config`:
    launch parameters (gemv_config's by default); `pdl`: launch with PDL (`early_trigger`: its dependents
    triggered as it starts, not after its reads of x; see the module docstring). `out_norm` (norm weight [N], eps):
    also RMSNorm(y), returned as (y, h): each row block writes its sum of squares of y (as rounded) to the
    workspace and bumps an arrival counter; the row block that arrives last sums them in block order
    (deterministic) and normalises the whole of y, as the split-K reduction does its partials, so the next
    product reads h without a norm prologue of its own and no kernel is added (the o product's epilogue, for
    gate_up: FusedOps.norm_in_epilogue). `rotary` (cos_table, sin_table, start_pos, k_cache, v_cache, n_heads,
    n_kv_heads), for the qkv product: rotary_cache's operation as the epilogue (rotary_cache_qkv_reference), each
    program taking the rows of the first halves of its heads and their partners half a head below (as gate_up
    takes gate's rows and up's), so no kernel of its own is launched: returns rotary q [H x D] and writes k and v
    at start_pos of the caches [1, Hkv, L, D]."""
    N, K = weight.shape
    if x.numel() != (2 * K if silu_x else K):
        raise ValueError(f"fused_gemv takes one row: x has {x.numel()} elements, weight has K = {K}"
                         + (" (silu_x takes [gate; up], 2K)" if silu_x else ""))
    if silu_x and norm_weight is not None:
        raise ValueError("silu_x and norm_weight are two prologues: fused_gemv takes one")
    if weight.dtype != torch.bfloat16 or x.dtype != torch.bfloat16:
        raise ValueError(f"fused_gemv rounds to bf16: it takes bf16 x and weight, got {x.dtype} and {weight.dtype}")
    rows = N // 2 if gate_up or rotary is not None else N
    if gate_up and (N % 2 or bias is not None or residual is not None):
        raise ValueError("gate_up takes an even number of weight rows ([gate; up]) and no bias or residual")
    if rotary is not None:
        _check_rotary(N, rotary, gate_up or silu_x or residual is not None or out_norm is not None)
    plain = not (norm_weight is not None or bias is not None or residual is not None or gate_up or silu_x
                 or out_norm is not None or rotary is not None)
    cfg = config or gemv_config(N, K, plain, rotary=rotary is not None)
    k_split = _cdiv(_cdiv(K, cfg.split_k), cfg.block_k) * cfg.block_k  # columns a split: a multiple of BLOCK_K
    split = _cdiv(K, k_split)
    if split > 1 and (gate_up or rotary is not None):
        raise ValueError("split-K is not implemented for gate_up or rotary (their epilogues need the whole of both "
                         "sums)")
    if out_norm is not None and (split > 1 or gate_up):
        raise ValueError("out_norm is implemented for an unsplit product with one output per row (no split-K, no "
                         "gate_up)")
    blocks = _cdiv(rows, cfg.block_n)
    if split * rows > WORKSPACE_FLOATS or blocks > WORKSPACE_ROW_BLOCKS:
        raise ValueError(f"split-K of {split} x {rows} rows exceeds the workspace ({WORKSPACE_FLOATS} floats, "
                         f"{WORKSPACE_ROW_BLOCKS} row blocks)")
    if out_norm is not None and blocks >= WORKSPACE_ROW_BLOCKS:  # its arrival counter is the workspace's last
        raise ValueError(f"out_norm takes fewer than {WORKSPACE_ROW_BLOCKS} row blocks, got {blocks}")
    triton, _ = _triton()
    xc, wc = x.reshape(-1).contiguous(), weight.contiguous()
    y = torch.empty(rows, dtype=x.dtype, device=x.device)
    partials, counts = workspace(x.device) if split > 1 or out_norm is not None else (y, y)
    h = torch.empty_like(y) if out_norm is not None else None
    extra = dict(onorm_ptr=xc, h_ptr=y, ncount_ptr=counts, eps_out=0.0, OUT_NORM=False, PBLOCK=16, YBLOCK=16)
    if out_norm is not None:
        extra.update(onorm_ptr=out_norm[0].contiguous(), h_ptr=h, ncount_ptr=counts[WORKSPACE_ROW_BLOCKS - 1:],
                     eps_out=float(out_norm[1]), OUT_NORM=True, PBLOCK=triton.next_power_of_2(blocks),
                     YBLOCK=triton.next_power_of_2(rows))
    extra.update(cos_ptr=xc, sin_ptr=xc, pos_ptr=xc, kc_ptr=xc, vc_ptr=xc, L=0, ROTARY=False, HEAD_D=2, NQ=1, NKV=1,
                 PAIRED=gate_up, EARLY_TRIGGER=early_trigger)
    if rotary is not None:
        cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads = rotary
        y = torch.empty(n_heads * k_cache.shape[-1], dtype=x.dtype, device=x.device)
        extra.update(cos_ptr=cos_table, sin_ptr=sin_table, pos_ptr=start_pos, kc_ptr=k_cache, vc_ptr=v_cache,
                     L=k_cache.shape[2], ROTARY=True, HEAD_D=k_cache.shape[-1], NQ=n_heads, NKV=n_kv_heads,
                     PAIRED=True)
    gemv_kernel, _ = _kernels()
    gemv_kernel[(blocks, split)](
        xc, wc, y, xc if norm_weight is None else norm_weight.contiguous(), xc if bias is None else bias.contiguous(),
        xc if residual is None else residual.reshape(rows).contiguous(), partials, counts, rows, K, k_split,
        float(eps), BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, SPLIT_K=split, NORM=norm_weight is not None,
        XBLOCK=triton.next_power_of_2(K) if norm_weight is not None else 16, BIAS=bias is not None,
        RESIDUAL=residual is not None, GATE_UP=gate_up, SILU_X=silu_x, USE_PDL=pdl, num_warps=cfg.warps,
        num_stages=cfg.stages, launch_pdl=pdl, **extra)
    return y if out_norm is None else (y, h)


def _check_rotary(N: int, rotary, other_epilogue: bool) -> None:
    """Refuse a rotary epilogue fused_gemv cannot run: a weight that is not the model's q, k and v heads, caches
    or tables of another shape, or a second epilogue."""
    cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads = rotary
    _, Hkv, _, D = k_cache.shape
    if other_epilogue:
        raise ValueError("rotary is the qkv product's epilogue: it takes no gate_up, silu_x, residual or out_norm")
    if (Hkv != n_kv_heads or N != (n_heads + 2 * n_kv_heads) * D or D & (D - 1) or D < 2
            or v_cache.shape != k_cache.shape or not (k_cache.is_contiguous() and v_cache.is_contiguous())
            or cos_table.shape[-1] != D or sin_table.shape != cos_table.shape):
        raise ValueError(f"rotary needs the weight's rows to be (H + 2 Hkv) x head_dim, contiguous caches "
                         f"[1, Hkv, L, head_dim] of one shape, cos and sin tables [L, head_dim] and a power-of-two "
                         f"head_dim; got {N} rows, H {n_heads}, Hkv {n_kv_heads}, caches {tuple(k_cache.shape)} and "
                         f"{tuple(v_cache.shape)}, tables {tuple(cos_table.shape)}")


def rotary_cache(qkv, cos_table, sin_table, start_pos, k_cache, v_cache, n_heads: int, n_kv_heads: int,
                 pdl: bool = False, early_trigger: bool = False):
    """rotary_cache_reference's operation in one kernel: returns rotary q [H, D]; writes k and v at start_pos
    of k_cache, v_cache [1, Hkv, L, D] (contiguous). cos_table, sin_table [L, D]: the decoder's tables."""
    _, Hkv, L, D = k_cache.shape
    if Hkv != n_kv_heads or qkv.numel() != (n_heads + 2 * n_kv_heads) * D or D & (D - 1):
        raise ValueError(f"rotary_cache needs qkv of (H + 2 Hkv) x D elements and a power-of-two head_dim; got "
                         f"{qkv.numel()} elements, H {n_heads}, Hkv {n_kv_heads} (cache {Hkv}), head_dim {D}")
    q = torch.empty(n_heads, D, dtype=qkv.dtype, device=qkv.device)
    _, kernel = _kernels()
    kernel[(n_heads + 2 * n_kv_heads,)](qkv.contiguous(), cos_table, sin_table, start_pos, q, k_cache, v_cache, L,
                                        H=n_heads, HKV=n_kv_heads, D=D, USE_PDL=pdl, EARLY_TRIGGER=early_trigger,
                                        num_warps=1, launch_pdl=pdl)
    return q


@dataclass(frozen=True)
class FusedOps:
    """The fused step's operations, as LeanLayer.fused_step calls them: the Triton kernels (launched with PDL
    when `pdl`) or, with `reference`, their PyTorch references (any device; the attention's length read on the
    host). `silu_in_down` chooses where the MLP's SiLU(gate) * up is made: in the down product's prologue (True,
    the gate_up product then plain with the norm prologue: bench/fused_gemv.py's down_silu and gate_up_norm), or
    in the gate_up product's epilogue (False: its gate_up). `norm_in_epilogue`: the post-attention RMSNorm made
    in the o product's epilogue by its last row block (fused_gemv's out_norm), gate_up then a plain GEMV with no
    prologue (with silu_in_down only). `rotary_in_qkv`: the rotary and the cache write made in the qkv product's
    epilogue (fused_gemv's rotary), so the rotary_cache kernel is not launched. `early_trigger` (with `pdl`):
    every kernel triggers its dependents as it starts."""

    pdl: bool = False
    reference: bool = False
    silu_in_down: bool = True
    norm_in_epilogue: bool = False
    rotary_in_qkv: bool = False
    early_trigger: bool = False

    @property
    def _launch(self) -> dict:
        return dict(pdl=self.pdl, early_trigger=self.pdl and self.early_trigger)

    def qkv_rotary(self, x, norm_weight, w_qkv, b_qkv, eps: float, cos_table, sin_table, start_pos, k_cache,
                   v_cache, n_heads: int, n_kv_heads: int):
        """Rotary q [H, D] of qkv(RMSNorm(x)) (+ bias), k and v written at start_pos of the caches [1, Hkv, L, D]:
        the qkv product and rotary_cache, or one kernel with rotary_in_qkv."""
        if not self.rotary_in_qkv or self.reference:
            qkv = self.rmsnorm_gemv(x, norm_weight, w_qkv, b_qkv, eps)
            return self.rotary_cache(qkv, cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads)
        rotary = (cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads)
        q = fused_gemv(x, w_qkv, norm_weight=norm_weight, eps=eps, bias=b_qkv, rotary=rotary, **self._launch)
        return q.reshape(n_heads, -1)

    def o_and_mlp(self, o, w_o, x, norm_weight, w_gate_up, w_down, eps: float):
        """The layer after its attention: x + o @ w_o^T, then the MLP block with its residual (mlp)."""
        if not self.norm_in_epilogue or self.reference or not self.silu_in_down:
            return self.mlp(self.gemv_residual(o, w_o, x), norm_weight, w_gate_up, w_down, eps)
        x, h = fused_gemv(o, w_o, residual=x, out_norm=(norm_weight, eps), **self._launch)
        return self._silu_down(fused_gemv(h, w_gate_up, **self._launch), w_down, x)

    def rmsnorm_gemv(self, x, norm_weight, weight, bias, eps: float):
        if self.reference:
            return rmsnorm_gemv_reference(x, norm_weight, weight, bias, eps)
        return fused_gemv(x, weight, norm_weight=norm_weight, eps=eps, bias=bias, **self._launch)

    def rotary_cache(self, qkv, cos_table, sin_table, start_pos, k_cache, v_cache, n_heads: int, n_kv_heads: int):
        if self.reference:
            return rotary_cache_reference(qkv, cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads)
        return rotary_cache(qkv, cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads, **self._launch)

    def attention(self, q, k_cache, v_cache, length, scale: float):
        """q [H, D] against the first `length` ([1] device tensor) positions of k_cache, v_cache [Hkv, L, D]."""
        if self.reference:
            return decode_attention_reference(q, k_cache, v_cache, int(length), scale)
        return decode_attention(q, k_cache, v_cache, length, scale, **self._launch)

    def gemv_residual(self, x, weight, residual):
        if self.reference:
            return gemv_residual_reference(x, weight, residual)
        return fused_gemv(x, weight, residual=residual, **self._launch)

    def gate_up_silu(self, x, norm_weight, weight, eps: float):
        if self.reference:
            return gate_up_silu_reference(x, norm_weight, weight, eps)
        return fused_gemv(x, weight, norm_weight=norm_weight, eps=eps, gate_up=True, **self._launch)

    def mlp(self, x, norm_weight, w_gate_up, w_down, eps: float):
        """x + down(SiLU(gate) * up) of gate_up(RMSNorm(x)): the MLP block with its residual, in two kernels."""
        if not self.silu_in_down:
            return self.gemv_residual(self.gate_up_silu(x, norm_weight, w_gate_up, eps), w_down, x)
        if self.reference:
            return silu_gemv_residual_reference(rmsnorm_gemv_reference(x, norm_weight, w_gate_up, None, eps), w_down, x)
        return self._silu_down(fused_gemv(x, w_gate_up, norm_weight=norm_weight, eps=eps, **self._launch), w_down, x)

    def _silu_down(self, gate_up, w_down, x):
        """x + down(SiLU(gate) * up), the SiLU in down's prologue (fused_gemv's silu_x)."""
        return fused_gemv(gate_up, w_down, silu_x=True, residual=x, **self._launch)
