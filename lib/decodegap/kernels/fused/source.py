"""The Triton source of the fused decode-step kernels: fused_gemv_kernel and rotary_cache_kernel, built once on
first use (`build`). decodegap.kernels.fused.launch launches them, checks their arguments and documents what they compute; the
kernels find the helpers they call (_round_bf16, _output_norm, _output_scale, _load_squares, _input_scale,
_rotary_epilogue and the gdc ops) among this module's globals."""

from __future__ import annotations

from decodegap.kernels.l2_prefetch import l2_prefetch_function
from decodegap.kernels.step import _triton, gdc_functions, rotate_function, round_bf16_function

_COMPILED: dict = {}


def build():
    """(fused_gemv_kernel, rotary_cache_kernel), built once."""
    if "fused" not in _COMPILED:
        triton, tl = _triton()
        gdc_wait, gdc_launch_dependents = gdc_functions()
        round_bf16 = round_bf16_function()  # fp32 -> the nearest bf16 value, still fp32 (the interpreter truncates)

        @triton.jit
        def output_norm(yb, row_ok, block, y_ptr, part_ptr, ncount_ptr, onorm_ptr, h_ptr, N, eps_out,
                        PBLOCK: tl.constexpr, YBLOCK: tl.constexpr):
            """RMSNorm of a product's whole output y [N], made by the row block that arrives last: each row block
            writes the sum of squares of its rows of y (yb: as rounded and stored, fp32) to part_ptr[block] and
            bumps the arrival counter; the last sums them in block order (deterministic), normalises the whole of y
            with HF's rounding into h_ptr and resets the counter for the next product."""
            tl.store(part_ptr + block, tl.sum(tl.where(row_ok, yb * yb, 0.0), axis=0))
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
        def output_scale(yb, rows, row_ok, last, block, onorm_ptr, h_ptr, sq_ptr):
            """RMSNorm of a product's output y left to the next product as a scale (NormScale): each row block writes
            its rows of y times the norm weight, rounded (h_ptr), and the sum of squares of its rows of y (yb: as
            rounded and stored, fp32) to sq_ptr[block]. No program waits for another: the product that reads h sums
            the squares and applies 1 / rms to its own sums (input_scale)."""
            ok = tl.where(last, row_ok, False)
            nw = tl.load(onorm_ptr + rows, mask=ok, other=0.0).to(tl.float32)
            tl.store(h_ptr + rows, _round_bf16(yb * nw).to(h_ptr.dtype.element_ty), mask=ok)
            tl.store(sq_ptr + block, tl.sum(tl.where(ok, yb * yb, 0.0), axis=0), mask=last)

        @triton.jit
        def load_squares(sq_ptr, n_parts, SCALE_IN: tl.constexpr, QBLOCK: tl.constexpr):
            """The previous product's sums of squares (output_scale's, `n_parts` of them; zero past them), or zeros
            without SCALE_IN: loaded after the wait and summed after the loop (input_scale), under its loads."""
            sq = tl.zeros((QBLOCK,), dtype=tl.float32)
            if SCALE_IN:
                qo = tl.arange(0, QBLOCK)
                sq = tl.load(sq_ptr + qo, mask=qo < n_parts, other=0.0, cache_modifier=".cg")
            return sq

        @triton.jit
        def input_scale(sq, K, eps, SCALE_IN: tl.constexpr):
            """1 / rms of the previous product's output, from the sums of squares its row blocks wrote (load_squares),
            over the K values this product reads; 1.0 without SCALE_IN."""
            scale = 1.0
            if SCALE_IN:
                scale = tl.rsqrt(tl.sum(sq, axis=0) / K + eps)
            return scale

        @triton.jit
        def rotary_epilogue(y1, y2, p, n_pairs, cos_ptr, sin_ptr, pos_ptr, q_ptr, kc_ptr, vc_ptr, L,
                            HEAD_D: tl.constexpr, NQ: tl.constexpr, NKV: tl.constexpr):
            """The qkv product's rotary epilogue (fused_gemv's and fused_int4_gemv's) on pairs p < n_pairs (rows of the
            first halves of the heads, y1, and their partners half a head below, y2, each rounded as the product
            returns it): q and k rotated at the position with rotary_cache's rounding, q to q_ptr [NQ x HEAD_D], k
            and v into the caches [NKV, L, HEAD_D] at the position."""
            ok = p < n_pairs
            head = p // (HEAD_D // 2)
            d = p % (HEAD_D // 2)
            pos = tl.load(pos_ptr)
            t1 = pos * HEAD_D + d
            t2 = t1 + HEAD_D // 2
            c1, s1 = tl.load(cos_ptr + t1).to(tl.float32), tl.load(sin_ptr + t1).to(tl.float32)
            c2, s2 = tl.load(cos_ptr + t2).to(tl.float32), tl.load(sin_ptr + t2).to(tl.float32)
            rot = head < NQ + NKV  # q and k heads; v is written as it is
            o1 = tl.where(rot, _round_bf16(_round_bf16(y1 * c1) + _round_bf16(-y2 * s1)), y1)
            o2 = tl.where(rot, _round_bf16(_round_bf16(y2 * c2) + _round_bf16(y1 * s2)), y2)
            o1, o2 = o1.to(q_ptr.dtype.element_ty), o2.to(q_ptr.dtype.element_ty)
            row = head * HEAD_D + d
            is_q, is_v = ok & (head < NQ), ok & (head >= NQ + NKV)
            is_k = ok & rot & (head >= NQ)
            tl.store(q_ptr + row, o1, mask=is_q)
            tl.store(q_ptr + row + HEAD_D // 2, o2, mask=is_q)
            k_at = kc_ptr + (head - NQ).to(tl.int64) * L * HEAD_D + t1
            v_at = vc_ptr + (head - NQ - NKV).to(tl.int64) * L * HEAD_D + t1
            tl.store(k_at, o1, mask=is_k)
            tl.store(k_at + HEAD_D // 2, o2, mask=is_k)
            tl.store(v_at, o1, mask=is_v)
            tl.store(v_at + HEAD_D // 2, o2, mask=is_v)


        @triton.jit
        def weight_row(i, ROTARY: tl.constexpr, HEAD_D: tl.constexpr):
            """The weight row of output i (a scalar or a block of them): i itself, or with ROTARY (i counting the
            first halves of the heads) row head * HEAD_D + d of head i // (HEAD_D / 2), d = i % (HEAD_D / 2)."""
            if ROTARY:
                head = i // (HEAD_D // 2)
                d = i % (HEAD_D // 2)
                return head * HEAD_D + d
            else:
                return i

        @triton.jit
        def partner_rows(N, ROTARY: tl.constexpr, HEAD_D: tl.constexpr):
            """How many rows below its weight row an output's partner lies (PAIRED): the rotary's half a head, or the
            matching row of up, N rows below gate's."""
            if ROTARY:
                return HEAD_D // 2
            else:
                return N

        @triton.jit
        def l2_rows(w_ptr, pid_n, k_lo, k_hi, N, K, BLOCK_N: tl.constexpr, L2_COLS: tl.constexpr,
                    ROTARY: tl.constexpr, PAIRED: tl.constexpr, HEAD_D: tl.constexpr):
            """The first L2_COLS columns (at most the share) of the share [k_lo, k_hi) of each weight row the program
            reads (the kernel's rows, weight_row's, and with PAIRED their partners, partner_rows' below) asked of the
            L2 (kernels.l2_prefetch), one bulk prefetch a row."""
            nbytes = tl.minimum(L2_COLS, k_hi - k_lo) * 2
            for r in tl.static_range(BLOCK_N):
                i = pid_n * BLOCK_N + r
                row = _weight_row(i, ROTARY, HEAD_D)
                if i < N:
                    _l2_prefetch(w_ptr + row.to(tl.int64) * K + k_lo, nbytes)
                    if PAIRED:
                        _l2_prefetch(w_ptr + (row + _partner_rows(N, ROTARY, HEAD_D)).to(tl.int64) * K + k_lo, nbytes)

        # the kernels find the functions they call among this module's globals (compiler and interpreter alike)
        # (and the interpreter triton.language, when another module's kernel, the fused int4 GEMV, calls them)
        globals().update(_round_bf16=round_bf16, _rotate=rotate_function(), _gdc_wait=gdc_wait,
                         _l2_prefetch=l2_prefetch_function(), _l2_rows=l2_rows, _weight_row=weight_row,
                         _partner_rows=partner_rows,
                         _gdc_launch_dependents=gdc_launch_dependents,
                         _output_norm=output_norm, _rotary_epilogue=rotary_epilogue, _output_scale=output_scale,
                         _load_squares=load_squares, _input_scale=input_scale, tl=tl)

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
                              PAIRED: tl.constexpr, EARLY_TRIGGER: tl.constexpr,
                              sq_in_ptr, sq_out_ptr, n_parts, SCALE_IN: tl.constexpr, QBLOCK: tl.constexpr,
                              OUT_SCALE: tl.constexpr, L2_COLS: tl.constexpr):
            if USE_PDL:
                if EARLY_TRIGGER:  # at once: the next kernel may launch and load its first weights (see fused_gemv)
                    _gdc_launch_dependents()
            pid_n = tl.program_id(0)
            pid_k = tl.program_id(1)
            # outputs (of gate, for GATE_UP; with ROTARY the first halves of the heads, N of them) and their rows
            idx = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            rows = _weight_row(idx, ROTARY, HEAD_D)
            row_ok = idx < N
            k_lo = pid_k * K_SPLIT
            k_hi = tl.minimum(k_lo + K_SPLIT, K)
            offs = tl.arange(0, BLOCK_K)
            w_rows = w_ptr + rows[:, None].to(tl.int64) * K
            u_rows = w_rows + _partner_rows(N, ROTARY, HEAD_D) * K  # the rotary's partners, or up's rows (PAIRED)
            cols = k_lo + offs
            mask = row_ok[:, None] & (cols[None, :] < k_hi)
            w = tl.load(w_rows + cols[None, :], mask=mask, other=0.0)  # weights: before the wait
            u = w
            if PAIRED:
                u = tl.load(u_rows + cols[None, :], mask=mask, other=0.0)
            if L2_COLS > 0:  # more of the weights, into the L2 (a hint: fused_gemv's l2_prefetch)
                _l2_rows(w_ptr, pid_n, k_lo, k_hi, N, K, BLOCK_N, L2_COLS, ROTARY, PAIRED, HEAD_D)
            if USE_PDL:
                _gdc_wait()
            sq_in = _load_squares(sq_in_ptr, n_parts, SCALE_IN, QBLOCK)  # NormScale's: summed after the loop
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
                    acc += tl.load(part_ptr + s * N + rows, mask=tl.where(last, row_ok, False), other=0.0,
                                   cache_modifier=".cg")
                tl.atomic_xchg(count_ptr + pid_n, 0, mask=last)  # ready for the next product
            rstd_in = _input_scale(sq_in, K, eps, SCALE_IN)  # with SCALE_IN, the norm's 1 / rms scales the sums
            acc, acc_u = acc * rstd_in, acc_u * rstd_in
            if ROTARY:  # q and k rotated at the position, as rotary_cache does; q to y, k and v into the caches
                y1, y2 = acc, acc_u
                if BIAS:
                    y1 += tl.load(bias_ptr + rows, mask=row_ok, other=0.0).to(tl.float32)
                    y2 += tl.load(bias_ptr + rows + HEAD_D // 2, mask=row_ok, other=0.0).to(tl.float32)
                _rotary_epilogue(_round_bf16(y1), _round_bf16(y2), idx, N, cos_ptr, sin_ptr, pos_ptr, y_ptr, kc_ptr,
                                 vc_ptr, L, HEAD_D, NQ, NKV)
            else:
                if GATE_UP:
                    g = _round_bf16(acc)
                    y = _round_bf16(_round_bf16(g / (1.0 + tl.exp(-g))) * _round_bf16(acc_u))
                else:
                    y = acc
                    if BIAS:
                        y += tl.load(bias_ptr + rows, mask=row_ok, other=0.0).to(tl.float32)
                    if RESIDUAL:
                        res = tl.load(res_ptr + rows, mask=tl.where(last, row_ok, False), other=0.0).to(tl.float32)
                        y = _round_bf16(y) + res
                    y = _round_bf16(y)
                # where(last, row_ok, False): row_ok & last, which Triton 3.9's interpreter refuses as a mask
                tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty), mask=tl.where(last, row_ok, False))
                if OUT_SCALE:  # RMSNorm(y) left to the next product as a scale (see fused_gemv's out_scale)
                    _output_scale(y.to(y_ptr.dtype.element_ty).to(tl.float32), rows, row_ok, last, pid_n, onorm_ptr,
                                  h_ptr, sq_out_ptr)
            if OUT_NORM:  # RMSNorm of the whole output, made by the row block that arrives last (see fused_gemv)
                _output_norm(y.to(y_ptr.dtype.element_ty).to(tl.float32), row_ok, pid_n, y_ptr, part_ptr, ncount_ptr,
                             onorm_ptr, h_ptr, N, eps_out, PBLOCK, YBLOCK)

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
            r = _rotate(x, xp, cos, sin, first)
            is_k = (i >= H) & (i < H + HKV)
            is_v = i >= H + HKV
            out = tl.where(is_v, x, r.to(x.dtype))
            # where(head's kind, d < D, False): (d < D) & the kind, which Triton 3.9's interpreter refuses as a mask
            tl.store(q_ptr + i * D + d, out, mask=tl.where(i < H, d < D, False))
            slot = pos * D + d
            tl.store(k_cache_ptr + (i - H) * L * D + slot, out, mask=tl.where(is_k, d < D, False))
            tl.store(v_cache_ptr + (i - H - HKV) * L * D + slot, out, mask=tl.where(is_v, d < D, False))

        _COMPILED["fused"] = (fused_gemv_kernel, rotary_cache_kernel)
    return _COMPILED["fused"]
