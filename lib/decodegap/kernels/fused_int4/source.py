"""The Triton source of the fused int4 product, fused_int4_gemv_kernel, built once on first use (`build`).
decodegap.kernels.fused_int4.launch launches it, checks its arguments and documents what it computes. Its inner loop
is the int4 GEMV's (decodegap.kernels.int4_gemv.kernel: 16-byte loads of packed words, nibbles read through float
mantissas, one scale and one offset a load), with the fused step's prologues and epilogues
(decodegap.kernels.fused.source) around it; it finds the helpers it calls (_round_bf16, _output_norm,
_output_scale, _load_squares, _input_scale, the gdc ops, _chunk_dot, _step_tiles, _unpack_pairs, _prologue,
_program_rows, _input_rstd, _rotary_epilogue, _l2_prefetch, _l2_rows, _read_row) among this
module's globals."""

from __future__ import annotations

from decodegap.kernels.l2_prefetch import l2_prefetch_function
from decodegap.kernels.step import _triton, gdc_functions

_COMPILED: dict = {}


def build():
    """fused_int4_gemv_kernel, built once (the bare kernel: launch chooses its config)."""
    if "fused_int4" not in _COMPILED:
        triton, tl = _triton()
        from decodegap.kernels.fused import source as fused_source
        from decodegap.kernels.int4_gemv import kernel as int4_kernel

        fused_source.build()  # defines _round_bf16 and _output_norm there
        int4_kernel._kernel()  # defines _chunk_dot there
        gdc_wait, gdc_launch_dependents = gdc_functions()

        @triton.jit
        def unpack_pairs(xp, C: tl.constexpr, S: tl.constexpr):
            """The 8 columns of each word of a chunk as floats, x0 .. x7 [C, 1, S, 4 (word)], from bf16 pairs read
            as int32 at xp [C, 1, S, 4] (pairs 0..3 of word 0; + 4 q for word q): four 16-byte loads and a transpose
            within each lane's registers, as the int4 GEMV reads x."""
            l0, l1, l2, l3 = tl.load(xp), tl.load(xp + 4), tl.load(xp + 8), tl.load(xp + 12)
            xj = tl.join(tl.join(l0, l1), tl.join(l2, l3))  # [C, 1, S, 4 (pair), 2 (q % 2), 2 (q // 2)]
            xj = tl.reshape(tl.permute(xj, (0, 1, 2, 5, 4, 3)), (C, 1, S, 4, 2, 2))
            even, odd = tl.split(xj)
            x01, x45 = tl.split(even)
            x23, x67 = tl.split(odd)
            HI: tl.constexpr = -65536  # 0xFFFF0000: the high bf16 of a pair, already a float's top half
            return ((x01 << 16).to(tl.float32, bitcast=True), (x01 & HI).to(tl.float32, bitcast=True),
                    (x23 << 16).to(tl.float32, bitcast=True), (x23 & HI).to(tl.float32, bitcast=True),
                    (x45 << 16).to(tl.float32, bitcast=True), (x45 & HI).to(tl.float32, bitcast=True),
                    (x67 << 16).to(tl.float32, bitcast=True), (x67 & HI).to(tl.float32, bitcast=True))

        @triton.jit
        def prologue(x, rstd, other, NORM: tl.constexpr, SILU_X: tl.constexpr):
            """One column of x as the product reads it: RMSNorm'd (x * rstd rounded, times the norm weight `other`,
            rounded), or SiLU(gate = x) * up (`other`), each rounded as torch does in bf16, or x itself."""
            if NORM:
                x = _round_bf16(_round_bf16(x * rstd) * other)
            elif SILU_X:
                x = _round_bf16(_round_bf16(x / (1.0 + tl.exp(-x))) * other)
            return x

        @triton.jit
        def program_rows(N, BLOCK_N: tl.constexpr, PAIRED: tl.constexpr, ROTARY: tl.constexpr, HEAD_D: tl.constexpr):
            """(output rows, weight rows read) of this program: BLOCK_N rows; PAIRED, BLOCK_N / 2 pairs p of the N / 2
            and each pair's two rows, interleaved (first, second, first, second, ...): gate row p and up row p (N / 2
            rows below), or with ROTARY the row of the first half of a head (head p // (HEAD_D / 2), d = p % (HEAD_D
            / 2)) and its rotary partner half a head below. A row past the end reads the last and is never stored."""
            if PAIRED:
                j = tl.arange(0, BLOCK_N)
                rows = tl.program_id(0) * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)
            else:
                rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
                j = tl.arange(0, BLOCK_N)  # after rows: the order the kernel compiled in before read_row (the same PTX)
            return rows, _read_row(j, N, BLOCK_N, PAIRED, ROTARY, HEAD_D)

        @triton.jit
        def read_row(j, N, BLOCK_N: tl.constexpr, PAIRED: tl.constexpr, ROTARY: tl.constexpr, HEAD_D: tl.constexpr):
            """The weight row read for row j (a tensor of them, or one number) of the program's BLOCK_N (program_rows'
            `read`)."""
            if PAIRED:
                p = tl.minimum(tl.program_id(0) * (BLOCK_N // 2) + j // 2, N // 2 - 1)
                if ROTARY:
                    read = (p // (HEAD_D // 2)) * HEAD_D + p % (HEAD_D // 2) + (j % 2) * (HEAD_D // 2)
                else:
                    read = p + (j % 2) * (N // 2)
            else:
                read = tl.minimum(tl.program_id(0) * BLOCK_N + j, N - 1)
            return read

        @triton.jit
        def l2_rows(p_ptr, N, KW: tl.constexpr, BLOCK_N: tl.constexpr, L2_BYTES: tl.constexpr, PAIRED: tl.constexpr,
                    ROTARY: tl.constexpr, HEAD_D: tl.constexpr):
            """The first L2_BYTES of each packed weight row the program reads (program_rows' `read`, a row at a
            time) asked of the L2 (kernels.l2_prefetch), one bulk prefetch a row."""
            for j in tl.static_range(BLOCK_N):
                read = _read_row(j, N, BLOCK_N, PAIRED, ROTARY, HEAD_D)
                _l2_prefetch(p_ptr + read.to(tl.int64) * KW, L2_BYTES)

        @triton.jit
        def input_rstd(xb_ptr, K, eps, NORM: tl.constexpr, XBLOCK: tl.constexpr):
            """1 / rms(x) of the norm prologue, x read whole (bf16) by every program; 1.0 without NORM."""
            rstd = 1.0
            if NORM:
                xo = tl.arange(0, XBLOCK)
                xa = tl.load(xb_ptr + xo, mask=xo < K, other=0.0).to(tl.float32)
                rstd = tl.rsqrt(tl.sum(xa * xa, axis=0) / K + eps)
            return rstd

        globals().update(_round_bf16=fused_source._round_bf16, _program_rows=program_rows, _input_rstd=input_rstd,
                         _rotary_epilogue=fused_source._rotary_epilogue, _output_norm=fused_source._output_norm,
                         _output_scale=fused_source._output_scale, _input_scale=fused_source._input_scale,
                         _load_squares=fused_source._load_squares,
                         _gdc_wait=gdc_wait, _gdc_launch_dependents=gdc_launch_dependents,
                         _chunk_dot=int4_kernel._chunk_dot, _step_tiles=int4_kernel._step_tiles,
                         _unpack_pairs=unpack_pairs, _prologue=prologue, _l2_prefetch=l2_prefetch_function(),
                         _l2_rows=l2_rows, _read_row=read_row)

        @triton.jit
        def fused_int4_gemv_kernel(x_ptr, xb_ptr, p_ptr, s_ptr, m_ptr, y_ptr, norm_ptr, bias_ptr, res_ptr, part_ptr,
                                   onorm_ptr, h_ptr, ncount_ptr, N, E11, E15, E19, eps, eps_out,
                                   K: tl.constexpr, G: tl.constexpr, BLOCK_N: tl.constexpr, CHUNKS: tl.constexpr,
                                   SUB_MAX: tl.constexpr, NORM: tl.constexpr, XBLOCK: tl.constexpr,
                                   SILU_X: tl.constexpr, BIAS: tl.constexpr, RESIDUAL: tl.constexpr,
                                   OUT_NORM: tl.constexpr, PBLOCK: tl.constexpr, YBLOCK: tl.constexpr,
                                   USE_PDL: tl.constexpr, EARLY_TRIGGER: tl.constexpr, GATE_UP: tl.constexpr,
                                   cos_ptr, sin_ptr, pos_ptr, kc_ptr, vc_ptr, L, ROTARY: tl.constexpr,
                                   HEAD_D: tl.constexpr, NQ: tl.constexpr, NKV: tl.constexpr, PAIRED: tl.constexpr,
                                   sq_in_ptr, sq_out_ptr, n_parts, SCALE_IN: tl.constexpr, QBLOCK: tl.constexpr,
                                   OUT_SCALE: tl.constexpr, L2_BYTES: tl.constexpr):
            # x_ptr, norm_ptr: bf16 pairs read as int32 ([K/2]; x [K] of gate, then [K] of up, with SILU_X); xb_ptr: x
            # as bf16 (the norm's sum of squares)
            if USE_PDL:
                if EARLY_TRIGGER:  # at once: the next kernel may launch and load its first weights
                    _gdc_launch_dependents()
            KW: tl.constexpr = K // 8
            NG: tl.constexpr = K // G
            CPG: tl.constexpr = G // 32  # chunks (4 words, 32 columns, one 16-byte load) a group
            SUB: tl.constexpr = SUB_MAX if SUB_MAX <= CPG else CPG  # a lane's chunks share one group
            NCH: tl.constexpr = K // 32
            STEP: tl.constexpr = CHUNKS * SUB  # chunks a loop step
            rows, safe_rows = _program_rows(N, BLOCK_N, PAIRED, ROTARY, HEAD_D)
            c = tl.arange(0, CHUNKS)
            sub = tl.arange(0, SUB)
            vv = tl.arange(0, 4)[None, None, None, :]
            row_off = safe_rows[None, :, None, None] * KW
            sm_off = safe_rows[None, :] * NG + (c * SUB // CPG)[:, None]  # [C, BN]
            EVEN_K: tl.constexpr = NCH % STEP == 0  # no masks (the int4 GEMV's step tiles)
            # the first step's weights, scales and offsets: loaded before the wait (what PDL overlaps)
            s, m, w, word0 = _step_tiles(p_ptr, s_ptr, m_ptr, 0, c, sub, vv, row_off, sm_off, NCH, SUB, CPG, EVEN_K)
            if L2_BYTES > 0:  # more of the packed weights, into the L2 (a hint: fused_int4_gemv's l2_prefetch)
                _l2_rows(p_ptr, N, KW, BLOCK_N, L2_BYTES, PAIRED, ROTARY, HEAD_D)
            if USE_PDL:
                _gdc_wait()
            rstd = _input_rstd(xb_ptr, K, eps, NORM, XBLOCK)
            sq_in = _load_squares(sq_in_ptr, n_parts, SCALE_IN, QBLOCK)  # NormScale's: summed after the loop
            acc = tl.zeros((CHUNKS, BLOCK_N), dtype=tl.float32)
            for ch0 in range(0, NCH, STEP):
                if ch0 > 0:  # this step's tiles (the first step's are loaded)
                    s, m, w, word0 = _step_tiles(p_ptr, s_ptr, m_ptr, ch0, c, sub, vv, row_off, sm_off, NCH, SUB,
                                                 CPG, EVEN_K)
                xw = word0 * 4 + vv  # [C, 1, SUB, 4]: word 0's pairs 0..3 of each lane's chunks
                x0, x1, x2, x3, x4, x5, x6, x7 = _unpack_pairs(x_ptr + xw, CHUNKS, SUB)
                n0, n1, n2, n3, n4, n5, n6, n7 = x0, x1, x2, x3, x4, x5, x6, x7  # no second operand
                if NORM:
                    n0, n1, n2, n3, n4, n5, n6, n7 = _unpack_pairs(norm_ptr + xw, CHUNKS, SUB)
                if SILU_X:  # up, K columns after gate
                    n0, n1, n2, n3, n4, n5, n6, n7 = _unpack_pairs(x_ptr + K // 2 + xw, CHUNKS, SUB)
                x0, x1 = _prologue(x0, rstd, n0, NORM, SILU_X), _prologue(x1, rstd, n1, NORM, SILU_X)
                x2, x3 = _prologue(x2, rstd, n2, NORM, SILU_X), _prologue(x3, rstd, n3, NORM, SILU_X)
                x4, x5 = _prologue(x4, rstd, n4, NORM, SILU_X), _prologue(x5, rstd, n5, NORM, SILU_X)
                x6, x7 = _prologue(x6, rstd, n6, NORM, SILU_X), _prologue(x7, rstd, n7, NORM, SILU_X)
                sa = tl.sum(tl.sum(x0 + x3 + x6, axis=3), axis=2)  # [C, 1]: the lane's columns read 4096 + q
                sb = tl.sum(tl.sum(x1 + x4 + x7, axis=3), axis=2)  # 256 + q
                sc = tl.sum(tl.sum(x2 + x5, axis=3), axis=2)  # 16 + q
                X = sa + sb + sc
                Cx = 4096.0 * sa + 256.0 * sb + 16.0 * sc
                e11, e15, e19 = E11 | (N >> 31), E15 | (N >> 31), E19 | (N >> 31)  # see int4_gemv's kernel
                T = _chunk_dot(w, x0, x1, x2, x3, x4, x5, x6, x7, e11, e15, e19, CHUNKS, BLOCK_N, SUB)
                acc += s * (T - Cx) + m * X
            if USE_PDL:
                if not EARLY_TRIGGER:
                    _gdc_launch_dependents()  # x, the previous kernel's output, is read
            # the product in bf16, as the int4 layer returns it (with SCALE_IN its sums times the norm's 1 / rms)
            y = _round_bf16(tl.sum(acc, axis=0) * _input_scale(sq_in, K, eps, SCALE_IN))
            if BIAS:
                y = _round_bf16(y + tl.load(bias_ptr + safe_rows).to(tl.float32))
            n_out = N
            if PAIRED:  # each pair's two rows: gate and up, or a head's first-half row and its rotary partner
                y1, y2 = tl.split(tl.reshape(y, (BLOCK_N // 2, 2)))
                n_out = N // 2
                if GATE_UP:  # SiLU(gate) * up from the rounded gate and up, as F.silu(gate) * up in bf16
                    y = _round_bf16(_round_bf16(y1 / (1.0 + tl.exp(-y1))) * y2)
                else:  # ROTARY: q out, k and v into the caches
                    _rotary_epilogue(y1, y2, rows, n_out, cos_ptr, sin_ptr, pos_ptr, y_ptr, kc_ptr, vc_ptr, L,
                                     HEAD_D, NQ, NKV)
            row_ok = rows < n_out
            if RESIDUAL:
                y = _round_bf16(y + tl.load(res_ptr + safe_rows).to(tl.float32))
            if not ROTARY:
                tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty), mask=row_ok)
            if OUT_SCALE:  # RMSNorm(y) left to the next product as a scale (as fused_gemv's)
                _output_scale(y, rows, row_ok, tl.program_id(0) >= 0, tl.program_id(0), onorm_ptr, h_ptr, sq_out_ptr)
            if OUT_NORM:  # RMSNorm of the whole output, made by the row block that arrives last (as fused_gemv's)
                _output_norm(y, row_ok, tl.program_id(0), y_ptr, part_ptr, ncount_ptr, onorm_ptr, h_ptr, N, eps_out,
                             PBLOCK, YBLOCK)

        _COMPILED["fused_int4"] = fused_int4_gemv_kernel
    return _COMPILED["fused_int4"]
