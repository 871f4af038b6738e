"""Custom decode kernels for the lean decoder (Triton), each with the PyTorch reference it must equal.

  gemv              y[N] = W[N, K] x[K] for one row (batch-1 projections): each program reduces BLOCK_N
                    rows of W over K in BLOCK_K chunks, fp32 accumulation; BLOCK_N, BLOCK_K and the warps
                    autotuned per (N, K) over a few configs (GEMV_CONFIGS).
  decode_attention  one query token of every head against a layer's KV cache with grouped-query heads,
                    split-KV: stage 1 gives each (kv head, split) program one slice of the cache and all
                    the query heads that share that kv head (K and V read once for the group; the group,
                    padded to 16 rows, against each block of keys and values as two tl.dot products on
                    the tensor cores), keeping a running max, sum and weighted V (online softmax; the
                    weights cast to the cache's dtype for the second product, as flash attention does);
                    stage 2 merges the splits per head.
                    The number of valid cache positions is read from a device tensor, so the call can be
                    captured in a CUDA graph and replayed as the cache grows.
                    With `pdl` both stages are launched with programmatic dependent launch (the fused step's
                    PDL arms: decodegap.kernels.fused.launch).

The references (`*_reference`) are plain PyTorch and run anywhere; the kernels need Triton and a CUDA device
(or TRITON_INTERPRET=1 on a CPU, which the tests use where Triton is installed). `available()` says why a
kernel cannot run here.
"""

from __future__ import annotations

import math
import os

import torch
import torch.nn.functional as F

from decodegap.kernels.device_buffers import DeviceBuffers

H200_SMS = 132  # streaming multiprocessors of the H200 (and H100 SXM): the split count aims at a few waves


def available(device="cuda") -> str | None:
    """None when the Triton kernels can run on `device`, else the reason."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return "package triton not installed"
    if str(device).startswith("cuda") or _interpreted():
        return None
    return "Triton kernels need a CUDA device (or TRITON_INTERPRET=1)"


# ------------------------------------------------------------------------------------------- references

def gemv_reference(x, weight):
    """x [..., K] @ weight[N, K]^T, as F.linear."""
    return F.linear(x, weight)


def decode_attention_reference(q, k_cache, v_cache, length: int, scale: float):
    """q [Hq, D] against the first `length` positions of k_cache, v_cache [Hkv, L, D] (Hq = g * Hkv, query
    head i reads kv head i // g); softmax in fp32; returns [Hq, D] in q's dtype."""
    g = q.shape[0] // k_cache.shape[0]
    k = k_cache[:, :length].float().repeat_interleave(g, dim=0)  # [Hq, length, D]
    v = v_cache[:, :length].float().repeat_interleave(g, dim=0)
    p = torch.softmax((k @ q.float()[:, :, None])[..., 0] * scale, dim=-1)  # [Hq, length]
    return (p[:, None, :] @ v)[:, 0].to(q.dtype)


# ---------------------------------------------------------------------------------------------- kernels

def _triton():
    import triton
    import triton.language as tl

    return triton, tl


_COMPILED: dict = {}

GEMV_CONFIGS = ((8, 256, 2), (8, 512, 4), (16, 128, 2), (16, 256, 4), (16, 512, 8), (32, 128, 4),
                (32, 256, 4), (32, 256, 8), (64, 128, 4), (64, 128, 8))
"""(BLOCK_N, BLOCK_K, num_warps) the GEMV is autotuned over, per (N, K), on its first call for each shape
(so before a CUDA graph captures it: the graphed arms warm up first). A one-row GEMV is bandwidth-bound:
the configs trade programs per SM (BLOCK_N rows each; 4096 rows make 64 to 512 programs on 132 SMs)
against bytes in flight per program (BLOCK_N x BLOCK_K weights per loop step, 4-16 KiB in bf16)."""
GEMV_INTERPRETED = (16, 256)
"""(BLOCK_N, BLOCK_K) under TRITON_INTERPRET=1: one config, no autotuning (every run there is slow and
none of its timings mean anything)."""


def _gdc():
    """Triton's griddepcontrol ops (triton.language.extra.cuda), or None where this Triton has none."""
    try:
        from triton.language.extra import cuda
    except ImportError:
        return None
    if hasattr(cuda, "gdc_wait") and hasattr(cuda, "gdc_launch_dependents"):
        return cuda
    return None


def gdc_functions():
    """(gdc_wait, gdc_launch_dependents) for kernels launched with programmatic dependent launch (PDL): Triton's,
    or no-ops where this Triton has none (a PDL launch is then refused before it runs: fused.pdl_unavailable)."""
    gdc = _gdc()
    if gdc is not None:
        return gdc.gdc_wait, gdc.gdc_launch_dependents
    triton, _ = _triton()

    @triton.jit
    def gdc_wait():
        pass

    @triton.jit
    def gdc_launch_dependents():
        pass

    return gdc_wait, gdc_launch_dependents


def round_bf16_function():
    """round_bf16(x), a Triton function built once: fp32 -> the nearest bf16 value (ties to even), still fp32. The
    kernels round by hand so that Triton's interpreter, whose fp32 -> bf16 cast truncates, rounds as the GPU and
    torch do (the fused kernels, decodegap.kernels.fused.source, and the attention's rotary prologue)."""
    if "round_bf16" not in _COMPILED:
        triton, tl = _triton()

        @triton.jit
        def round_bf16(x):
            bits = x.to(tl.int32, bitcast=True)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
            return bits.to(tl.float32, bitcast=True)

        globals().update(tl=tl)  # the interpreter looks triton.language up among the function's module globals
        _COMPILED["round_bf16"] = round_bf16
    return _COMPILED["round_bf16"]


def rotate_function():
    """rotate(x, xp, cos, sin, first), a Triton function built once: x rotated at one position as HF does it,
    x * cos + rotate_half(x) * sin with torch's bf16 rounding of each product and the sum, fp32; `xp` the partner of
    each element (half a head away), `first` the first half of the head. rotary_cache's kernel
    (decodegap.kernels.fused.source) and the attention's rotary prologue both call it; it finds round_bf16 as
    `_round_bf16` among its caller module's globals."""
    if "rotate" not in _COMPILED:
        triton, tl = _triton()
        globals().update(_round_bf16=round_bf16_function(), tl=tl)

        @triton.jit
        def rotate(x, xp, cos, sin, first):
            rot = tl.where(first, -xp.to(tl.float32), xp.to(tl.float32))
            return _round_bf16(_round_bf16(x.to(tl.float32) * cos) + _round_bf16(rot * sin))

        _COMPILED["rotate"] = rotate
    return _COMPILED["rotate"]


def _interpreted() -> bool:
    """Triton's CPU interpreter is on (TRITON_INTERPRET=1, read by Triton when it is first imported)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def _gemv_kernel():
    """The GEMV kernel: autotuned over GEMV_CONFIGS keyed on (N, K); the bare kernel in the interpreter."""
    if "gemv" not in _COMPILED:
        triton, tl = _triton()

        @triton.jit
        def gemv_kernel(x_ptr, w_ptr, y_ptr, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
            rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
            acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                cols = k0 + tl.arange(0, BLOCK_K)
                x = tl.load(x_ptr + cols, mask=cols < K, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + rows[:, None] * K + cols[None, :],
                            mask=(rows[:, None] < N) & (cols[None, :] < K), other=0.0).to(tl.float32)
                acc += tl.sum(w * x[None, :], axis=1)
            tl.store(y_ptr + rows, acc.to(y_ptr.dtype.element_ty), mask=rows < N)

        if not _interpreted():
            configs = [triton.Config({"BLOCK_N": n, "BLOCK_K": k}, num_warps=w) for n, k, w in GEMV_CONFIGS]
            gemv_kernel = triton.autotune(configs=configs, key=["N", "K"])(gemv_kernel)
        _COMPILED["gemv"] = gemv_kernel
    return _COMPILED["gemv"]


def gemv(x, weight):
    """One-row x [..., K] (a single row in all) times weight [N, K]^T -> [..., N], in x's dtype."""
    N, K = weight.shape
    if x.numel() != K:
        raise ValueError(f"gemv takes one row: x has {x.numel()} elements, weight has K = {K}")
    triton, _ = _triton()
    xc, wc = x.reshape(K).contiguous(), weight.contiguous()
    y = torch.empty(N, dtype=x.dtype, device=x.device)
    kernel = _gemv_kernel()
    if _interpreted():
        block_n, block_k = GEMV_INTERPRETED
        kernel[(triton.cdiv(N, block_n),)](xc, wc, y, N, K, BLOCK_N=block_n, BLOCK_K=block_k)
    else:
        kernel[lambda meta: (triton.cdiv(N, meta["BLOCK_N"]),)](xc, wc, y, N, K)
    return y.reshape(*x.shape[:-1], N)


def _attention_kernels():
    if "attention" not in _COMPILED:
        triton, tl = _triton()
        gdc_wait, gdc_launch_dependents = gdc_functions()
        round_bf16, rotate = round_bf16_function(), rotate_function()
        # the kernels find the functions they call among this module's globals (compiler and interpreter alike)
        globals().update(_gdc_wait=gdc_wait, _gdc_launch_dependents=gdc_launch_dependents, _round_bf16=round_bf16,
                         _rotate=rotate, tl=tl)

        @triton.jit
        def split_kernel(q_ptr, k_ptr, v_ptr, len_ptr, o_ptr, m_ptr, l_ptr, scale, L, n_splits, group,
                         BLOCK: tl.constexpr, G: tl.constexpr, D: tl.constexpr, UPCAST: tl.constexpr,
                         USE_PDL: tl.constexpr, EARLY_TRIGGER: tl.constexpr, count_ptr, out_ptr,
                         MERGE: tl.constexpr, S: tl.constexpr, KV_TOGETHER: tl.constexpr,
                         cos_ptr, sin_ptr, n_q_heads, ROTARY: tl.constexpr, PREFETCH: tl.constexpr):
            h = tl.program_id(0)
            s = tl.program_id(1)
            gi = tl.arange(0, G)
            d = tl.arange(0, D)
            if PREFETCH:  # the first block of this program's share, K and V, read before the wait (decode_attention's
                # `prefetch`: the length and the older positions were written before the previous kernel ran; the
                # newest position, stale here, is taken from the rotary below)
                length0 = tl.load(len_ptr)
                span0 = tl.cdiv(tl.cdiv(length0, n_splits), BLOCK) * BLOCK
                start0 = s * span0
                pos0 = start0 + tl.arange(0, BLOCK)
                ok0 = (pos0 < tl.minimum(start0 + span0, length0)) & (pos0 != length0 - 1)
                off0 = h * L * D + pos0[:, None] * D + d[None, :]
                k0 = tl.load(k_ptr + off0, mask=ok0[:, None], other=0.0)
                v0 = tl.load(v_ptr + off0, mask=ok0[:, None], other=0.0)
            if USE_PDL:  # q and the newest cache position are the previous kernel's: wait before reading them
                if EARLY_TRIGGER:  # the dependents first, at once (decode_attention's early_trigger)
                    _gdc_launch_dependents()
                _gdc_wait()
            length = tl.load(len_ptr)
            # the live length, not the cache's, spread over the n_splits programs in whole blocks: a cache sized
            # for a longer context (one compiled step serving several contexts) keeps every split busy
            span = tl.cdiv(tl.cdiv(length, n_splits), BLOCK) * BLOCK
            q = tl.load(q_ptr + (h * group + gi)[:, None] * D + d[None, :], mask=gi[:, None] < group,
                        other=0.0)  # [G, D], the group's query heads padded with zero rows to G >= 16
            start = s * span
            end = tl.minimum(start + span, length)
            newest = length - 1
            if ROTARY:  # q_ptr is the qkv product's row: q, k and v of the newest position rotated here
                first = d < D // 2
                half = tl.where(first, d + D // 2, d - D // 2)  # each element's partner, half a head away
                cos = tl.load(cos_ptr + newest * D + d).to(tl.float32)
                sin = tl.load(sin_ptr + newest * D + d).to(tl.float32)
                qp = tl.load(q_ptr + (h * group + gi)[:, None] * D + half[None, :], mask=gi[:, None] < group,
                             other=0.0)
                q = _rotate(q, qp, cos, sin, first[None, :]).to(q.dtype)
                k_row = q_ptr + (n_q_heads + h) * D
                k_new = _rotate(tl.load(k_row + d), tl.load(k_row + half), cos, sin, first).to(q.dtype)
                v_new = tl.load(q_ptr + (n_q_heads + tl.num_programs(0) + h) * D + d)
                # the loop leaves the newest position out (its cache slot is not written yet); the program whose
                # share holds it adds it after the loop, from k_new and v_new, and writes them into the caches
            if UPCAST:
                q = q.to(tl.float32)
            m = tl.full((G,), -1e30, dtype=tl.float32)
            lsum = tl.zeros((G,), dtype=tl.float32)
            acc = tl.zeros((G, D), dtype=tl.float32)
            for b in range(start, end, BLOCK):
                pos = b + tl.arange(0, BLOCK)
                valid = pos < end
                if ROTARY:  # the newest position comes after the loop
                    valid = valid & (pos != newest)
                kv_off = h * L * D + pos[:, None] * D + d[None, :]
                load_ok = valid
                if PREFETCH:  # the first block came before the wait: its loads here masked off, k0 and v0 taken
                    load_ok = tl.where(b != start, valid, False)
                k = tl.load(k_ptr + kv_off, mask=load_ok[:, None], other=0.0)  # [BLOCK, D]
                if PREFETCH:
                    k = tl.where(b == start, k0, k)
                if KV_TOGETHER:  # V's load written beside K's (on sm_90 the compiler issues it there either way)
                    v = tl.load(v_ptr + kv_off, mask=load_ok[:, None], other=0.0)
                    if PREFETCH:
                        v = tl.where(b == start, v0, v)
                if UPCAST:
                    k = k.to(tl.float32)
                # [G, BLOCK] on the tensor cores, fp32 accumulation; the cast keeps the loop's types fixed when
                # inductor passes `scale` as fp64 (a compiled step: lean_attn_compile failed on the H200 without it)
                scores = (tl.dot(q, tl.trans(k)) * scale).to(tl.float32)
                scores = tl.where(valid[None, :], scores, -1e30)
                m_new = tl.maximum(m, tl.max(scores, axis=1))
                alpha = tl.exp(m - m_new)
                p = tl.where(valid[None, :], tl.exp(scores - m_new[:, None]), 0.0)
                if not KV_TOGETHER:
                    v = tl.load(v_ptr + kv_off, mask=load_ok[:, None], other=0.0)
                    if PREFETCH:
                        v = tl.where(b == start, v0, v)
                if UPCAST:
                    v = v.to(tl.float32)
                lsum = lsum * alpha + tl.sum(p, axis=1)
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)  # p in the cache's dtype, as flash attention
                m = m_new
            if USE_PDL:  # every read issued: the merge may launch (it waits for this kernel's writes)
                if not EARLY_TRIGGER:
                    _gdc_launch_dependents()
            if ROTARY:  # the newest position, one more step of the online softmax in the program whose share holds
                # it (its score a sum of exact bf16 products in fp32, its weight rounded to bf16 as the loop's are);
                # the others' sums unchanged. Then its key and value into the caches, for the steps after this one.
                # (Until 2026-12-07 evening the loop took them in place of the slot's loads, a select on every
                # tile that kept the tiles out of the loads' pipeline: rows of commit 534cd3b.)
                owner = (start <= newest) & (newest < end)
                s_new = (tl.sum(q.to(tl.float32) * k_new[None, :].to(tl.float32), axis=1) * scale).to(tl.float32)
                s_new = tl.where(owner, s_new, -1e30)
                m_last = tl.maximum(m, s_new)
                alpha = tl.exp(m - m_last)
                p_new = tl.where(owner, tl.exp(s_new - m_last), 0.0)
                lsum = lsum * alpha + p_new
                acc = acc * alpha[:, None] + (p_new.to(v_new.dtype).to(tl.float32)[:, None]
                                              * v_new[None, :].to(tl.float32))
                m = m_last
                mine = tl.where(owner, d < D, False)
                tl.store(k_ptr + h * L * D + newest * D + d, k_new, mask=mine)
                tl.store(v_ptr + h * L * D + newest * D + d, v_new, mask=mine)
            part = (h * n_splits + s) * G + gi
            tl.store(m_ptr + part, m)
            tl.store(l_ptr + part, lsum)
            tl.store(o_ptr + part[:, None] * D + d[None, :], acc)
            if MERGE:  # the program of this kv head that arrives last merges its splits (no merge kernel)
                tl.debug_barrier()  # every thread's partials stored before the (one-thread) release below
                arrived = tl.atomic_add(count_ptr + h, 1, sem="acq_rel")
                if arrived == n_splits - 1:
                    # as merge_kernel does, per query head of the group: all its splits' partials in one load each
                    # (S, a power of two >= n_splits), the same sums in the same order; no step depends on the one
                    # before, so the loads of the group's heads are not serialised split by split
                    sv = tl.arange(0, S)
                    ok = sv < n_splits
                    for g in range(0, group):
                        part_g = (h * n_splits + sv) * G + g
                        m_g = tl.load(m_ptr + part_g, mask=ok, other=-1e30, cache_modifier=".cg")
                        l_g = tl.load(l_ptr + part_g, mask=ok, other=0.0, cache_modifier=".cg")
                        o_g = tl.load(o_ptr + part_g[:, None] * D + d[None, :], mask=ok[:, None], other=0.0,
                                      cache_modifier=".cg")
                        w = tl.where(ok, tl.exp(m_g - tl.max(m_g, axis=0)), 0.0)
                        out = tl.sum(w[:, None] * o_g, axis=0) / tl.sum(w * l_g, axis=0)
                        tl.store(out_ptr + (h * group + g) * D + d, out.to(out_ptr.dtype.element_ty))
                    tl.atomic_xchg(count_ptr + h, 0)  # ready for the next layer's call

        @triton.jit
        def merge_kernel(o_ptr, m_ptr, l_ptr, out_ptr, n_splits, group,
                         S: tl.constexpr, G: tl.constexpr, D: tl.constexpr, USE_PDL: tl.constexpr,
                         EARLY_TRIGGER: tl.constexpr):
            i = tl.program_id(0)  # query head
            if USE_PDL:
                if EARLY_TRIGGER:
                    _gdc_launch_dependents()
                _gdc_wait()
            h, g = i // group, i % group
            s = tl.arange(0, S)
            d = tl.arange(0, D)
            part = (h * n_splits + s) * G + g
            ok = s < n_splits
            m = tl.load(m_ptr + part, mask=ok, other=-1e30)
            lsum = tl.load(l_ptr + part, mask=ok, other=0.0)
            w = tl.where(ok, tl.exp(m - tl.max(m, axis=0)), 0.0)
            o = tl.load(o_ptr + part[:, None] * D + d[None, :], mask=ok[:, None], other=0.0)
            if USE_PDL:  # the next kernel (the o GEMV) may start loading its weights
                if not EARLY_TRIGGER:
                    _gdc_launch_dependents()
            out = tl.sum(w[:, None] * o, axis=0) / tl.sum(w * lsum, axis=0)
            tl.store(out_ptr + i * D + d, out.to(out_ptr.dtype.element_ty))

        _COMPILED["attention"] = (split_kernel, merge_kernel)
    return _COMPILED["attention"]


def prepare(names) -> None:
    """Build the Triton kernels of `names` (lean.CUSTOM_KERNELS: "attention"; "gemv" is built per shape by its
    autotuner at its first call) before torch.compile traces a step that calls them: dynamo cannot trace
    triton.jit's decorator itself (the H200's lean_attn_compile cells failed in a session whose first use of
    the attention kernel was inside the compiled step)."""
    if "attention" in names:
        _attention_kernels()


def split_size(max_len: int, kv_heads: int, block: int = 32, sms: int = H200_SMS, waves: int = 2) -> int:
    """Cache positions per split: a power of two >= `block` giving about `waves` x `sms` programs over the
    kv heads at the cache's full length."""
    target = max(1, (waves * sms) // max(1, kv_heads))
    return max(block, 1 << max(0, math.ceil(math.log2(max(1, math.ceil(max_len / target))))))


KV_TOGETHER_BLOCK = 64
"""Cache positions a program of the kv-together attention loads per iteration (attention_blocks). Chosen on
2026-12-05 before any row of it: at the grid's shortest context (ctx 2048, a cache of about 2090 positions, 8 kv
heads) split_size gives 64 positions a program, so each program loads its K and V in one block, one memory latency
where the default's two blocks of 32 with V after the scores wait on four. Found after its rows: on sm_90 the
compiler issues V's load beside K's in both orders (the same instructions; tests/test_kernels.py), so of the two
changes only the block reaches the GPU."""


def attention_blocks(kv_together: bool) -> dict:
    """decode_attention's load options for the kernel option "kv_together" (harness.lean.CUSTOM_KERNELS): V beside
    K in blocks of KV_TOGETHER_BLOCK (the split from split_size at that block); none without it."""
    return dict(kv_together=True, block=KV_TOGETHER_BLOCK) if kv_together else {}


SPLIT_WARPS, SPLIT_STAGES = 4, 3
"""The split kernel's num_warps and num_stages by default: Triton's own defaults on CUDA (the launch every step and
every row of the bench before 2026-12-05's launch sweep ran with, passing neither)."""


MERGE_COUNTERS = 1 << 12
"""Arrival counters of the one-kernel attention (decode_attention's `merged`), one a kv head of a call: every call
leaves them at zero."""
_COUNTERS = DeviceBuffers(lambda device: torch.zeros(MERGE_COUNTERS, dtype=torch.int32, device=device))


def merge_counters(device):
    """The one-kernel attention's arrival counters on `device` (int32 [MERGE_COUNTERS], zero), allocated once and
    never reallocated (a captured graph keeps the address)."""
    return _COUNTERS(device)


def _attention_heads(q, k_cache, v_cache, block: int, rotary, prefetch: bool) -> int:
    """decode_attention's query heads, its arguments checked (a ValueError naming what is wrong)."""
    Hkv, _, D = k_cache.shape
    if rotary is None:
        Hq, D = q.shape
    else:
        cos_table, sin_table, Hq = rotary
        if q.numel() != (Hq + 2 * Hkv) * D or cos_table.shape[-1] != D or sin_table.shape != cos_table.shape:
            raise ValueError(f"decode_attention's rotary takes the qkv row, (H + 2 Hkv) x D elements, and tables "
                             f"[max_len, D]; got {q.numel()} elements, H {Hq}, Hkv {Hkv}, head_dim {D}, tables "
                             f"{tuple(cos_table.shape)} and {tuple(sin_table.shape)}")
    if prefetch and rotary is None:
        raise ValueError("decode_attention's prefetch reads the cache before the previous kernel's write of the newest "
                         "position: it needs `rotary`, which supplies that position")
    if Hq % Hkv or D & (D - 1) or D < 16 or block < 16:
        raise ValueError(f"decode_attention needs Hq % Hkv == 0, a power-of-two head_dim >= 16 and block >= 16 "
                         f"(tl.dot's smallest tile), got Hq {Hq}, Hkv {Hkv}, head_dim {D}, block {block}")
    if q.dtype != k_cache.dtype or v_cache.dtype != k_cache.dtype:
        raise ValueError(f"decode_attention needs q and the cache in one dtype, got {q.dtype}, {k_cache.dtype}, "
                         f"{v_cache.dtype}")
    return Hq


def decode_attention(q, k_cache, v_cache, length, scale: float, split: int | None = None, block: int = 32,
                     pdl: bool = False, early_trigger: bool = False, merged: bool = False, kv_together: bool = False,
                     warps: int = SPLIT_WARPS, stages: int = SPLIT_STAGES, rotary=None, prefetch: bool = False):
    """q [Hq, D] against k_cache, v_cache [Hkv, L, D] (contiguous), attending to the first `length`
    positions (`length`: an int32/int64 device tensor of one element); returns [Hq, D] in q's dtype.
    The grid is (Hkv, cdiv(L, split)) programs, `split` from the cache length (split_size); each program reads
    an equal share of the live length in whole blocks, so the work per program follows `length`, not L.
    `pdl`: both kernels launched with programmatic dependent launch (Hopper; the caller checks it is available,
    fused.pdl_unavailable): each waits for the kernel before it first and lets the next one launch once its reads
    are issued (`early_trigger`: as it starts; see decodegap.kernels.fused.launch). `merged`: one kernel, not two:
    each program stores its split's partials and bumps its kv head's arrival counter (merge_counters), and the
    program that arrives last merges the head's splits and writes the output (as the fused GEMV's split-K does), so
    the merge kernel is not launched. `kv_together`: each block's V loaded beside its K in the source, before the
    scores are made (by default V's load follows the first product); on sm_90 both orders compile to the same
    instructions (tests/test_kernels.py), the compiler issuing V's load with K's either way. `warps`, `stages`: the
    split kernel's num_warps and num_stages (Triton's software pipelining of the loop's loads; the defaults are
    Triton's own, which every step has run with). `rotary` (cos_table, sin_table [max_len, D], Hq): q is then the
    qkv product's row ((Hq + 2 Hkv) x D elements: q, k and v of the newest position, length - 1, not yet rotated):
    each program rotates its query heads and the newest key as rotary_cache does (decodegap.kernels.fused.launch,
    the same rounding), its loop leaves the newest position out, and the program whose share holds it adds it after
    the loop (one more step of the online softmax) and writes its key and value into the caches, so the rotary_cache
    kernel is not launched: the caches equal rotary_cache's bit for bit, the output this attention's after
    rotary_cache within rounding (the newest score's sum in another order). `prefetch` (with `rotary`): each
    program reads the length and the first block of its share, K and V, before it waits for the previous kernel (under
    `pdl`), so those loads overlap that kernel's end; the newest position, stale in the cache then, is the rotary's
    anyway. It takes the length and the cache's older positions to have been written before the previous kernel
    ran (so in the fused step: the length by the step's first kernels, which PDL does not overlap, the older
    positions by earlier steps); the same output as without it, bit for bit. History: until
    2026-12-05 that program merged split after split, each step waiting on the one before (run
    20261204T135350-fca0a8 timed lean_fused_merged_graph on int4-triton slower than lean_fused_early_products_graph,
    the same lever with the two kernels, in the same session); it now reads each query head's partials in one load,
    as the merge kernel does, a loop over the group's query heads. Timed since: slower than the two kernels by
    itself (bench/attention_splits.py; notebook 06's 06_attention_splits gives the times) and in the step (the
    ladder's lean_fused_kv_together_merged_graph against lean_fused_kv_together_graph)."""
    Hkv, L, D = k_cache.shape
    Hq = _attention_heads(q, k_cache, v_cache, block, rotary, prefetch)
    triton, _ = _triton()
    group = Hq // Hkv
    split = split or split_size(L, Hkv, block)
    n_splits = triton.cdiv(L, split)
    G, S = max(16, triton.next_power_of_2(group)), triton.next_power_of_2(n_splits)  # tl.dot needs 16 rows
    o = torch.empty(Hkv * n_splits * G, D, dtype=torch.float32, device=q.device)
    m = torch.empty(Hkv * n_splits * G, dtype=torch.float32, device=q.device)
    lsum = torch.empty_like(m)
    out = torch.empty(Hq, D, dtype=q.dtype, device=q.device)
    split_kernel, merge_kernel = _attention_kernels()
    launch = dict(launch_pdl=True) if pdl else {}  # only then: torch.compile traces the launch without it
    # the split kernel's launch only where it differs from Triton's defaults: torch.compile wraps a kernel given
    # num_warps or num_stages in an autotuner of one config, and the steps' attention is traced as it always was
    split_launch = ({} if (warps, stages) == (SPLIT_WARPS, SPLIT_STAGES) else dict(num_warps=warps, num_stages=stages))
    if merged and Hkv > MERGE_COUNTERS:
        raise ValueError(f"the one-kernel attention counts arrivals of at most {MERGE_COUNTERS} kv heads, got {Hkv}")
    qc = q.contiguous()
    # without `merged` the split kernel never touches count_ptr and out_ptr: read-only tensors of the call stand in
    # for them (no tensor a kernel writes appears twice among its arguments, which torch.compile's wrapper would copy)
    merge = (dict(count_ptr=merge_counters(q.device), out_ptr=out) if merged else dict(count_ptr=length, out_ptr=qc))
    # without `rotary` the split kernel never reads cos_ptr and sin_ptr: q stands in for them
    tables = dict(cos_ptr=qc, sin_ptr=qc) if rotary is None else dict(cos_ptr=rotary[0], sin_ptr=rotary[1])
    split_kernel[(Hkv, n_splits)](qc, k_cache, v_cache, length, o, m, lsum, scale, L, n_splits, group,
                                  BLOCK=block, G=G, D=D, UPCAST=_interpreted(), USE_PDL=pdl,
                                  EARLY_TRIGGER=early_trigger, MERGE=merged, S=S if merged else 1,
                                  KV_TOGETHER=kv_together, n_q_heads=Hq, ROTARY=rotary is not None, PREFETCH=prefetch,
                                  **tables, **split_launch, **merge, **launch)
    # UPCAST: products in fp32 under the interpreter, whose bf16 tl.dot (Triton 3.9) is wrong (a 16x16 bf16
    # product off by ~1e10; fp16 and fp32 exact); there it checks the algorithm, the GPU tests the bf16 path
    if merged:
        return out
    merge_kernel[(Hq,)](o, m, lsum, out, n_splits, group, S=S, G=G, D=D, USE_PDL=pdl, EARLY_TRIGGER=early_trigger,
                        **launch)
    return out
