"""The int4 GEMV (Triton) on the format of int4_gemv.format:
  int4_gemv  y[N] = W_deq[N, K] x[K] for one row (G >= 32), fp32 accumulation. A program takes BLOCK_N
             rows and 32 x num_warps lanes along K; a loop step gives each lane SUB chunks (4 words, 32
             columns: one 16-byte load a row) of one group for each of its rows, so a warp's load reads
             512 contiguous bytes of a row, and a K = 4096 product is a single step (every load issued
             at once: the small products are latency-bound). Nothing crosses lanes until the end (one
             reduction a program). x arrives as bf16 pairs (16-byte loads) and is reused across the rows.
             A nibble becomes a float with no int-to-float conversion (quarter-rate on sm_90): shifted
             (3 shifts a word) and and-or'ed into the mantissa bits 11, 15 or 19 of a float whose
             exponent makes it read exactly 4096 + q, 256 + q or 16 + q. So T = sum_k f_k x_k over a
             lane's columns of a group is sum_k q_k x_k + C, C = sum_k c_k x_k (c_k the column's 4096,
             256 or 16) depending on x alone, and per row and lane
                 acc += s[n, g] * (T - C) + m[n, g] * X,        X = sum_k x_k,
             one scale and one offset per 16-byte load, not one multiply per weight: per weight one
             and-or (LOP3) and one FFMA (one chain a row through a chunk's 4 words) plus 3/8 shift; with
             the x work shared by the rows, ~3.0-3.5 instructions a weight in all (offline sm_90 SASS of
             the configs; the instruction issue, ~4.2 a weight at 4.2 TB/s on 132 SMs, is as tight as
             the bandwidth). The large constant part costs fp32 bits: the sum is good to ~1e-4 of
             max|y| (interpreter, K <= 4096), far inside a bf16 result's 4e-3.
             BLOCK_N, SUB and the warps are autotuned per (N, K) over INT4_CONFIGS on the first call of
             each shape. No split-K: every product here has N >= 3584 rows, so BLOCK_N <= 16 gives >= 224
             programs of 32-128 lanes, and split-K would need a zeroed fp32 output (a memset launch: the
             fixed per-call time split-K is meant to save) or a second reduction launch.

The kernel needs Triton and a CUDA device, or TRITON_INTERPRET=1 on a CPU (one fixed config there).
"""

from __future__ import annotations

import torch

from decodegap.kernels.int4_gemv.format import DEFAULT_GROUP_SIZE, check_format
from decodegap.kernels.step import _interpreted, _triton

INT4_CONFIGS = ((4, 1, 4), (8, 1, 4), (8, 2, 4), (4, 1, 2), (8, 1, 2), (4, 2, 2), (8, 2, 2), (16, 1, 2),
                (4, 2, 1), (8, 2, 1), (4, 4, 1), (8, 4, 1))
"""(BLOCK_N, SUB_MAX, num_warps) the kernel is autotuned over, per (N, K), on its first call for each shape
(callers warm up before capturing a CUDA graph); CHUNKS = 32 x num_warps lanes along K, one stage (the
loop's loads are not software-pipelined by Triton: more stages change nothing), SUB = min(SUB_MAX, G / 32)
so that a lane's chunks share a group. A lane issues BLOCK_N x SUB 16-byte loads a loop step (4-32: its
registers, 64-255 on sm_90, bound that; only 8_4_1 spills, 16 instructions, at K >= 14336), reusing its x
values across the BLOCK_N rows; the configs trade that against programs (N / BLOCK_N) and steps along K
(K / (1024 x num_warps x SUB); a K = 4096 product is one step at 4 warps and SUB 1, or 2 warps and SUB 2).
Offline SASS, instructions a weight at K = 4096: 3.0 (8_4_1) to 4.5 (4_1_4); 8_2_4 idles half its lanes
there (6.8) and is for K >= 14336."""
INT4_INTERPRETED = (4, 2, 8)
"""(BLOCK_N, SUB_MAX, CHUNKS) under TRITON_INTERPRET=1: one config, no autotuning."""
_MAGIC = tuple(((150 - b) << 23) for b in (11, 15, 19))
"""Float exponents that make mantissa bits b..b+3 count ones (2^(b-23) x 2^(150-b-127) = 1): 4096, 256, 16."""

_COMPILED: dict = {}


def _kernel():
    """The GEMV: autotuned over INT4_CONFIGS keyed on (N, K); the bare kernel under the interpreter."""
    if "int4_gemv" not in _COMPILED:
        triton, tl = _triton()

        @triton.jit
        def split_words(t, C: tl.constexpr, R: tl.constexpr, S: tl.constexpr):
            """[C, R, S, 4] -> the four [C, R, S] tensors of words 0..3 (in registers: no data moves)."""
            lo, hi = tl.split(tl.reshape(t, (C, R, S, 2, 2)))
            v0, v2 = tl.split(lo)
            v1, v3 = tl.split(hi)
            return v0, v1, v2, v3

        @triton.jit
        def word_dot(t, w, x0, x1, x2, x3, x4, x5, x6, x7, e11, e15, e19):
            """t + sum_i f_i x_i over the 8 nibbles of word w, f_i read from mantissa bits 11, 15 or 19."""
            a, b, d = w << 11, w >> 1, w >> 13
            t += ((a & 0x7800) | e11).to(tl.float32, bitcast=True) * x0
            t += ((a & 0x78000) | e15).to(tl.float32, bitcast=True) * x1
            t += ((a & 0x780000) | e19).to(tl.float32, bitcast=True) * x2
            t += ((b & 0x7800) | e11).to(tl.float32, bitcast=True) * x3
            t += ((b & 0x78000) | e15).to(tl.float32, bitcast=True) * x4
            t += ((b & 0x780000) | e19).to(tl.float32, bitcast=True) * x5
            t += ((d & 0x7800) | e11).to(tl.float32, bitcast=True) * x6
            t += ((d & 0x78000) | e15).to(tl.float32, bitcast=True) * x7
            return t

        # the kernel finds the functions it calls among this module's globals (compiler and interpreter alike); the
        # interpreter also looks there for triton.language when another module's kernel (the fused int4 GEMV) calls them
        globals().update(_split_words=split_words, _word_dot=word_dot, tl=tl)

        @triton.jit
        def chunk_dot(w, x0, x1, x2, x3, x4, x5, x6, x7, e11, e15, e19, C: tl.constexpr, R: tl.constexpr,
                      S: tl.constexpr):
            """T [C, R]: per lane and row, sum_k f_k x_k over the lane's S chunks of 4 words w [C, R, S, 4], f_k read
            from the nibbles' mantissa bits; x0 .. x7 [C, 1, S, 4]: column i of each word. One FFMA chain a row and
            chunk runs through the chunk's 4 words (no per-word sums to add up)."""
            ws = _split_words(w, C, R, S)
            q0, q1 = _split_words(x0, C, 1, S), _split_words(x1, C, 1, S)
            q2, q3 = _split_words(x2, C, 1, S), _split_words(x3, C, 1, S)
            q4, q5 = _split_words(x4, C, 1, S), _split_words(x5, C, 1, S)
            q6, q7 = _split_words(x6, C, 1, S), _split_words(x7, C, 1, S)
            t = tl.zeros((C, R, S), dtype=tl.float32)
            for k in tl.static_range(4):  # the chunk's words
                t = _word_dot(t, ws[k], q0[k], q1[k], q2[k], q3[k], q4[k], q5[k], q6[k], q7[k], e11, e15, e19)
            return tl.sum(t, axis=2)

        @triton.jit
        def step_tiles(p_ptr, s_ptr, m_ptr, ch0, c, sub, vv, row_off, sm_off, NCH: tl.constexpr, SUB: tl.constexpr,
                       CPG: tl.constexpr, EVEN_K: tl.constexpr):
            """One loop step's tiles from chunk ch0: scales s and offsets m [C, BN] (fp32), the packed words w
            [C, BN, SUB, 4] and word0 [C, 1, SUB, 1], each lane's chunks' first word (where x is read). Without
            EVEN_K (the steps do not divide the K chunks) lanes past K read the last chunks again and count for
            nothing (s = m = 0); with it, no masks."""
            first = ch0 + c * SUB  # [C] each lane's first chunk
            if EVEN_K:
                s = tl.load(s_ptr + ch0 // CPG + sm_off, eviction_policy="evict_first").to(tl.float32)
                m = tl.load(m_ptr + ch0 // CPG + sm_off, eviction_policy="evict_first").to(tl.float32)
            else:
                ok = (first < NCH)[:, None]
                s = tl.load(s_ptr + ch0 // CPG + sm_off, mask=ok, other=0.0, eviction_policy="evict_first")
                m = tl.load(m_ptr + ch0 // CPG + sm_off, mask=ok, other=0.0, eviction_policy="evict_first")
                s, m = s.to(tl.float32), m.to(tl.float32)
                first = tl.minimum(first, NCH - SUB)
            word0 = (first[:, None] + sub[None, :])[:, None, :, None] * 4  # [C, 1, SUB, 1]: chunks' word 0
            w = tl.load(p_ptr + row_off + word0 + vv, eviction_policy="evict_first")  # [C, BN, SUB, 4]
            return s, m, w, word0

        globals().update(_chunk_dot=chunk_dot, _step_tiles=step_tiles)

        @triton.jit
        def int4_gemv_kernel(x_ptr, p_ptr, s_ptr, m_ptr, y_ptr, N, E11, E15, E19, K: tl.constexpr,
                             G: tl.constexpr, BLOCK_N: tl.constexpr, CHUNKS: tl.constexpr, SUB_MAX: tl.constexpr):
            # x_ptr: x as int32 pairs of bf16 [K/2]. A chunk: 4 words (32 columns, one 16-byte load) of a row;
            # each of the CHUNKS lanes along K takes SUB consecutive chunks of one group for BLOCK_N rows
            KW: tl.constexpr = K // 8
            NG: tl.constexpr = K // G
            CPG: tl.constexpr = G // 32  # chunks a group
            SUB: tl.constexpr = SUB_MAX if SUB_MAX <= CPG else CPG  # a lane's chunks share one group
            NCH: tl.constexpr = K // 32
            STEP: tl.constexpr = CHUNKS * SUB  # chunks a loop step
            EVEN_K: tl.constexpr = NCH % STEP == 0
            rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
            safe_rows = tl.minimum(rows, N - 1)  # rows past N read row N - 1 and are not stored: no load masks
            c = tl.arange(0, CHUNKS)
            sub = tl.arange(0, SUB)
            v = tl.arange(0, 4)
            row_off = safe_rows[None, :, None, None] * KW
            vv = v[None, None, None, :]
            sm_off = safe_rows[None, :] * NG + (c * SUB // CPG)[:, None]  # [C, BN]
            acc = tl.zeros((CHUNKS, BLOCK_N), dtype=tl.float32)
            for ch0 in range(0, NCH, STEP):
                s, m, w, word0 = _step_tiles(p_ptr, s_ptr, m_ptr, ch0, c, sub, vv, row_off, sm_off, NCH, SUB, CPG,
                                             EVEN_K)
                xp = x_ptr + word0 * 4 + vv  # [C, 1, SUB, 4]: word 0's pairs 0..3, then + 4 q for word q
                l0, l1, l2, l3 = tl.load(xp), tl.load(xp + 4), tl.load(xp + 8), tl.load(xp + 12)
                # l_q holds pairs 0..3 of word q along its last dim (a 16-byte load); the products want pair p
                # of word q at [..., q]: a transpose within each lane's registers
                xj = tl.join(tl.join(l0, l1), tl.join(l2, l3))  # [C, 1, SUB, 4 (pair), 2 (q % 2), 2 (q // 2)]
                xj = tl.reshape(tl.permute(xj, (0, 1, 2, 5, 4, 3)), (CHUNKS, 1, SUB, 4, 2, 2))
                even, odd = tl.split(xj)  # pair % 2: [C, 1, SUB, 4 (word), 2 (pair // 2)]
                x01, x45 = tl.split(even)
                x23, x67 = tl.split(odd)
                HI: tl.constexpr = -65536  # 0xFFFF0000: the high bf16 of a pair, already a float's top half
                x0, x1 = (x01 << 16).to(tl.float32, bitcast=True), (x01 & HI).to(tl.float32, bitcast=True)
                x2, x3 = (x23 << 16).to(tl.float32, bitcast=True), (x23 & HI).to(tl.float32, bitcast=True)
                x4, x5 = (x45 << 16).to(tl.float32, bitcast=True), (x45 & HI).to(tl.float32, bitcast=True)
                x6, x7 = (x67 << 16).to(tl.float32, bitcast=True), (x67 & HI).to(tl.float32, bitcast=True)
                sa = tl.sum(tl.sum(x0 + x3 + x6, axis=3), axis=2)  # [C, 1]: the lane's columns read 4096 + q
                sb = tl.sum(tl.sum(x1 + x4 + x7, axis=3), axis=2)  # 256 + q
                sc = tl.sum(tl.sum(x2 + x5, axis=3), axis=2)  # 16 + q
                X = sa + sb + sc  # the lane's share of sum_k x_k
                Cx = 4096.0 * sa + 256.0 * sb + 16.0 * sc
                # nibbles into mantissa bits 11, 15, 19 (3 shifts a word) of floats that then read 4096 + q,
                # 256 + q, 16 + q: one and-or each, a LOP3 when the exponent is in a register (not a second
                # immediate). Hence the arguments, or'ed with N >> 31 (0): ptxas would reload a plain argument
                # from the constant bank at every use when registers run short (+20% instructions)
                e11, e15, e19 = E11 | (N >> 31), E15 | (N >> 31), E19 | (N >> 31)
                T = _chunk_dot(w, x0, x1, x2, x3, x4, x5, x6, x7, e11, e15, e19, CHUNKS, BLOCK_N, SUB)  # [C, BN]
                acc += s * (T - Cx) + m * X
            y = tl.sum(acc, axis=0)
            tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty), mask=rows < N)

        if not _interpreted():
            configs = [triton.Config({"BLOCK_N": n, "SUB_MAX": sub, "CHUNKS": 32 * w}, num_warps=w,
                                     num_stages=1) for n, sub, w in INT4_CONFIGS]
            int4_gemv_kernel = triton.autotune(configs=configs, key=["N", "K"])(int4_gemv_kernel)
        _COMPILED["int4_gemv"] = int4_gemv_kernel
    return _COMPILED["int4_gemv"]


def prepare() -> None:
    """Build the kernel (not yet tuned: that is per shape, at its first call) before torch.compile traces a
    function that calls it (dynamo cannot trace triton.jit's decorator itself)."""
    _kernel()


def int4_gemv(x, packed, scales, offsets, group_size: int = DEFAULT_GROUP_SIZE, out=None):
    """One row x [K] or [1, K] (bf16) times W_deq[N, K]^T -> y [N] bf16 ([1, N] for a [1, K] x), fp32
    accumulation. packed int32 [N, K/8], scales and offsets bf16 [N, K/G], all contiguous on x's device.
    `out`: a contiguous [N] tensor to write instead (fp32 keeps the accumulator unrounded: the tests)."""
    N, KW = packed.shape
    K, G = KW * 8, group_size
    check_format(K, G)
    if G < 32:
        raise ValueError(f"int4_gemv needs a group size >= 32 (its 16-byte loads stay in one group), got {G}")
    if x.numel() != K:
        raise ValueError(f"int4_gemv takes one row: x has {x.numel()} elements, the weight has K = {K}")
    if scales.shape != (N, K // G) or offsets.shape != (N, K // G):
        raise ValueError(f"scales and offsets must be [N, K/G] = [{N}, {K // G}], got {tuple(scales.shape)} "
                         f"and {tuple(offsets.shape)}")
    triton, _ = _triton()
    xc = x.reshape(K).to(torch.bfloat16).contiguous()
    if xc.storage_offset() % 8:  # a view off a 16-byte boundary (the loads read 8 bf16 at once); metadata
        xc = xc.clone()  # only, so torch.compile traces it (data_ptr() it cannot)
    xc = xc.view(torch.int32)  # bf16 pairs
    y = torch.empty(N, dtype=torch.bfloat16, device=x.device) if out is None else out
    kernel = _kernel()
    args = (xc, packed.contiguous(), scales.contiguous(), offsets.contiguous(), y, N, *_MAGIC, K)
    if _interpreted():
        block_n, sub, chunks = INT4_INTERPRETED
        kernel[(triton.cdiv(N, block_n),)](*args, G=G, BLOCK_N=block_n, CHUNKS=chunks, SUB_MAX=sub)
    else:
        kernel[lambda meta: (triton.cdiv(N, meta["BLOCK_N"]),)](*args, G=G)
    return y.reshape(*x.shape[:-1], N) if x.dim() > 1 else y


def tuned_config(N: int, K: int) -> str:
    """The autotuner's choice for (N, K) as text ('' before the shape's first call, or under the interpreter)."""
    return tuned_configs().get(f"N={N} K={K}", "")


def tuned_configs() -> dict[str, str]:
    """Every choice the autotuner made in this process, {'N=.. K=..': 'BLOCK_N=.. SUB_MAX=.. CHUNKS=.. num_warps=..
    num_stages=..'} (empty before the first call, or under the interpreter): a session records them, since each
    fresh process tunes again and may choose otherwise."""
    kernel = _COMPILED.get("int4_gemv")
    return {f"N={key[0]} K={key[1]}": f"BLOCK_N={config.kwargs['BLOCK_N']} SUB_MAX={config.kwargs['SUB_MAX']} "
                                      f"CHUNKS={config.kwargs['CHUNKS']} num_warps={config.num_warps} "
                                      f"num_stages={config.num_stages}"
            for key, config in getattr(kernel, "cache", {}).items()}


