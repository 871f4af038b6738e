"""The fused step's products on int4 weights (Triton): fused_int4_gemv, the int4 GEMV of decodegap.kernels.int4_gemv
with the prologues and epilogues of decodegap.kernels.fused.launch.fused_gemv, so that an int4-triton model's decode
step runs the fused bf16 step's design (its norms, residual adds and SiLU folded into the products, PDL, the early
trigger) with a quarter of the bf16 step's weight bytes.

  fused_int4_gemv  y = epilogue(W_deq prologue(x)) for one row, W_deq = q s + m per group (int4_gemv.format):
                   NORM      RMSNorm of x as the prologue (qkv and gate_up): each program reads the whole of x
                             once for its rms, then normalises each column as its loop reads it, with HF's
                             rounding (normalise in fp32, round, times the norm weight, round).
                   SILU_X    x is [gate; up] (2K values) and the product is taken of SiLU(gate) * up, each
                             rounded as F.silu(gate) * up in bf16 (the down product).
                   BIAS      + bias after the product is rounded, rounded again (as the int4 layer adds its bias).
                   RESIDUAL  residual + the rounded product, rounded (the o and down products).
                   OUT_NORM  also RMSNorm(y), made by the row block that arrives last (fused_gemv's out_norm: the
                             post-attention norm in the o product's epilogue).
                   GATE_UP   the weight is the fused [gate; up] (N rows) and the output SiLU(gate) * up [N / 2]: a
                             program takes BLOCK_N / 2 rows of gate and the matching rows of up, one weight row set
                             with the rows interleaved (gate, up, gate, up, ...), so its loop is the plain one; each
                             sum rounded to bf16, then F.silu(gate) * up's rounding (the gate_up product's SiLU
                             epilogue: the down product then takes the activation as a plain x).
                   ROTARY    the qkv product's epilogue is rotary_cache's operation, its rows paired the same way: a
                             program takes BLOCK_N / 2 rows of the first halves of the heads and their partners half
                             a head below (the rows rotate_half pairs), interleaved; each sum rounded (+ the bias,
                             rounded, as the int4 layer adds it), q and k rotated at the position with
                             rotary_cache's rounding, q written out, k and v into the caches (fused_gemv's rotary
                             epilogue: the rotary_cache kernel is then not launched).
                 The loop is the int4 GEMV's (its docstring: lanes along K, 16-byte loads, nibbles through float
                 mantissas, one scale and offset a load) with two changes: every program loads its first step's
                 words, scales and offsets before it waits for the previous kernel (PDL), and x's columns pass
                 through the prologue before the sums. No split-K (the int4 GEMV has none). The paired epilogues
                 (GATE_UP, ROTARY) read one row set in the plain loop, where fused_gemv's read two.
The product's reference is decodegap.kernels.fused_int4.reference; FusedOps (decodegap.kernels.fused.launch) calls
fused_int4_gemv for every weight that is an int4-triton layer (`int4_tensors`), fused_gemv for bf16 weights (the LM
head stays bf16 in every quantisation path but int4-triton-head, whose head is an int4-triton layer too: the NORM
flavour, the final norm as its prologue)."""

from __future__ import annotations

import torch

from decodegap.kernels.fused_int4 import configs as int4_configs
from decodegap.kernels.fused.norm_scale import check_scale, scale_args
from decodegap.kernels.fused.rotary_args import check_rotary, kernel_args
from decodegap.kernels.fused.workspace import WORKSPACE_FLOATS, WORKSPACE_ROW_BLOCKS, workspace
from decodegap.kernels.fused_int4.source import build as _kernel
from decodegap.kernels.int4_gemv.format import check_format
from decodegap.kernels.int4_gemv.kernel import _MAGIC, INT4_CONFIGS, INT4_INTERPRETED
from decodegap.kernels.l2_prefetch import l2_prefetch_row_bytes
from decodegap.kernels.step import _interpreted, _triton


_TUNED: dict = {}


def int4_tensors(layer):
    """(packed int32 [N, K/8], scales bf16 [N, K/G], offsets bf16 [N, K/G], group size, bias [N] or None) of an int4-triton
    layer: decodegap.kernels.int4_gemv.layer.Int4GemvLinear, or a layer holding one as `inner` with its bias beside
    it (quant.layers.Int4TritonLinear, also one built with reference=True: the format is the same, only the layer's
own forward differs); None for anything else (a bf16 weight)."""
    from decodegap.kernels.int4_gemv.layer import Int4GemvLinear

    inner = layer if isinstance(layer, Int4GemvLinear) else getattr(layer, "inner", None)
    if not isinstance(inner, Int4GemvLinear):
        return None
    bias = inner.bias if inner.bias is not None else getattr(layer, "bias", None)
    return inner.packed, inner.scales, inner.offsets, inner.group_size, bias


def _pairs(t, what: str):
    """A bf16 vector as int32 pairs, 16-byte aligned (the kernel reads 8 bf16 at once)."""
    t = t.reshape(-1).contiguous()
    if t.dtype != torch.bfloat16:
        raise ValueError(f"fused_int4_gemv takes bf16 {what}, got {t.dtype}")
    if t.storage_offset() % 8:
        t = t.clone()
    return t, t.view(torch.int32)


def fused_int4_gemv(x, layer, *, norm_weight=None, eps: float = 0.0, residual=None, silu_x: bool = False,
                    out_norm=None, gate_up: bool = False, rotary=None, pdl: bool = False, early_trigger: bool = False,
                    config=None, out_scale=None, norm_scale=None, l2_prefetch: bool = False):
    """One row x (bf16, numel K; 2K with `silu_x`: [gate; up]) through fused_int4_gemv_kernel (see the module
    docstring) against the int4-triton `layer` ([N, K], its bias inside): returns y [N] bf16, or (y, RMSNorm(y))
    with `out_norm` = (norm weight [N], eps), or SiLU(gate) * up [N / 2] with `gate_up` (the layer [gate; up]), or
    with `rotary` = (cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads) the rotary q [H x D]
    (k and v written at start_pos of the caches [1, Hkv, L, D]; the layer the model's qkv). `config`: (BLOCK_N,
    SUB_MAX, num_warps), else `choose_config`'s (the table's for this shape, flavour and launch,
    kernels.fused_int4.configs, else the tuned choice over the int4 GEMV's configs, per weight shape and flavour, on
    the first call: warm up before capturing a CUDA graph). `out_scale` and `norm_scale`: the norm left to the next
    product as a scale, as fused_gemv's (kernels.fused.norm_scale; x is then norm_scale's x_scaled): (y, NormScale)
    with out_scale, its squares one a row block of the config that ran. `l2_prefetch`: before its wait each program
    also asks the L2 for the first bytes of its packed rows, L2_PREFETCH_BYTES over the product (kernels.l2_prefetch;
    no value changes)."""
    tensors = int4_tensors(layer)
    if tensors is None:
        raise ValueError(f"fused_int4_gemv takes an int4-triton layer (Int4GemvLinear or a layer with one as "
                         f"`inner`), got {type(layer).__name__}")
    packed, scales, offsets, G, bias = tensors
    N, K = packed.shape[0], packed.shape[1] * 8
    _check_operands(x, N, K, G, bias, norm_weight, residual, silu_x, gate_up, out_norm)
    if rotary is not None:
        check_rotary(N, rotary, gate_up or silu_x or residual is not None or out_norm is not None)
    check_scale(out_scale, norm_scale, gate_up or rotary is not None or out_norm is not None,
                norm_weight is not None or silu_x)
    triton, _ = _triton()
    xb, xi = _pairs(x, "x")
    ni = _pairs(norm_weight, "norm weights")[1] if norm_weight is not None else xi
    rows = rotary[5] * rotary[3].shape[-1] if rotary is not None else N // 2 if gate_up else N  # q alone, rotary
    y = torch.empty(rows, dtype=torch.bfloat16, device=x.device)
    h = torch.empty_like(y) if out_norm is not None else y
    extra = dict(part_ptr=y, onorm_ptr=y, h_ptr=h, ncount_ptr=xi, eps_out=0.0, OUT_NORM=False, YBLOCK=16)
    if out_norm is not None:
        partials, counts = workspace(x.device)
        extra.update(part_ptr=partials, onorm_ptr=out_norm[0].reshape(-1).contiguous(),
                     ncount_ptr=counts[WORKSPACE_ROW_BLOCKS - 1:], eps_out=float(out_norm[1]), OUT_NORM=True,
                     YBLOCK=triton.next_power_of_2(N))
    rotary_args = kernel_args(rotary, xb)  # its ROTARY flag joins the flavour's flags, the rest the arguments
    flags = dict(NORM=norm_weight is not None, XBLOCK=triton.next_power_of_2(K) if norm_weight is not None else 16,
                 SILU_X=silu_x, BIAS=bias is not None, RESIDUAL=residual is not None, GATE_UP=gate_up, USE_PDL=pdl,
                 EARLY_TRIGGER=early_trigger, ROTARY=rotary_args.pop("ROTARY"))
    extra.update(rotary_args, PAIRED=gate_up or rotary is not None,
                 L2_BYTES=l2_prefetch_row_bytes(N, K // 2) if l2_prefetch else 0)  # rows of K / 2 bytes, 16-aligned
    # squares for as many row blocks as any config runs: the tuner's launches too; NormScale keeps the chosen one's
    scale_extra, scaled = scale_args(xb, y, triton.cdiv(N, min(c[0] for c in INT4_CONFIGS + (INT4_INTERPRETED,))),
                                     out_scale, norm_scale)
    flags.update(SCALE_IN=scale_extra.pop("SCALE_IN"), OUT_SCALE=scale_extra.pop("OUT_SCALE"))  # the tuner's key
    extra.update(scale_extra)
    eps = eps if norm_scale is None else norm_scale.eps
    args = (xi, xb, packed.contiguous(), scales.contiguous(), offsets.contiguous(), y, ni,
            bias if bias is not None else xb, residual.reshape(-1).contiguous() if residual is not None else xb)
    kernel = _kernel()

    def launch(block_n: int, sub: int, warps: int, chunks: int | None = None):
        """One launch on config (BLOCK_N, SUB_MAX, num_warps); CHUNKS lanes along K (32 a warp by default)."""
        blocks = triton.cdiv(N, block_n)
        if out_norm is not None and blocks > WORKSPACE_FLOATS:
            raise ValueError(f"out_norm takes at most {WORKSPACE_FLOATS} row blocks, got {blocks}")
        kernel[(blocks,)](*args, N=N, E11=_MAGIC[0], E15=_MAGIC[1], E19=_MAGIC[2], eps=float(eps), K=K, G=G,
                          BLOCK_N=block_n, CHUNKS=chunks or 32 * warps, SUB_MAX=sub, num_warps=warps, num_stages=1,
                          PBLOCK=triton.next_power_of_2(blocks) if out_norm is not None else 16, **flags, **extra,
                          **(dict(launch_pdl=True) if pdl else {}))

    if _interpreted():  # one config, CHUNKS lanes along K on one "warp"
        block_n, sub, chunks = INT4_INTERPRETED
        launch(block_n, sub, 1, chunks)
    else:
        chosen = config or choose_config(N, K, G, flags, out_norm is not None, launch)
        launch(*chosen)
        block_n = chosen[0]
    if scaled is not None:
        return y, scaled._replace(squares=scaled.squares[:triton.cdiv(N, block_n)])
    return y if out_norm is None else (y, h)


def _check_operands(x, N: int, K: int, G: int, bias, norm_weight, residual, silu_x: bool, gate_up: bool,
                    out_norm) -> None:
    """Refuse, before any launch, operands the kernel cannot take: a format or group size it does not read, an x that
    is not one row of K (2K with silu_x), two prologues, a residual of another length, or gate_up on an odd weight or
    beside a bias, residual, output norm or SiLU prologue."""
    check_format(K, G)
    if G < 32:
        raise ValueError(f"fused_int4_gemv needs a group size >= 32 (its 16-byte loads stay in one group), got {G}")
    if x.numel() != (2 * K if silu_x else K):
        raise ValueError(f"fused_int4_gemv takes one row: x has {x.numel()} elements, the weight has K = {K}"
                         + (" (silu_x takes [gate; up], 2K)" if silu_x else ""))
    if silu_x and norm_weight is not None:
        raise ValueError("silu_x and norm_weight are two prologues: fused_int4_gemv takes one")
    if residual is not None and residual.numel() != N:
        raise ValueError(f"the residual has {residual.numel()} elements, the product {N} rows")
    if gate_up and (N % 2 or bias is not None or residual is not None or out_norm is not None or silu_x):
        raise ValueError("gate_up takes an even number of weight rows ([gate; up]) and no bias, residual, output "
                         "norm or SiLU prologue")


def choose_config(N: int, K: int, G: int, flags: dict, out_norm: bool, launch) -> tuple:
    """(BLOCK_N, SUB_MAX, num_warps) of one product: the table's (kernels.fused_int4.configs.FUSED_INT4_CONFIGS, by
    shape, flavour and launch, as int4_configs.launched_config reads it: at the group size it was timed at only, a
    product with the norm as a scale taking its flavour's entry without it), else the tuned choice (`_tuned`, kept
    per process)."""
    chosen = int4_configs.launched_config(N, K, G, flags, out_norm)
    return chosen or _tuned((N, K, G, tuple(sorted(flags.items())), out_norm), launch)


def tuned_configs() -> dict[str, str]:
    """Every choice `_tuned` made in this process, {'N=.. K=.. G=.. FLAGS': 'BLOCK_N=.. SUB_MAX=.. num_warps=..'}, the
    flags those of the product's flavour that are set (NORM, SILU_X, BIAS, RESIDUAL, GATE_UP, USE_PDL, EARLY_TRIGGER,
    OUT_NORM):
    a session records them, since each fresh process tunes again and may choose otherwise."""
    out = {}
    for (N, K, G, flags, out_norm), (block_n, sub, warps) in _TUNED.items():
        set_flags = [name for name, value in flags if value is True] + (["OUT_NORM"] if out_norm else [])
        out[" ".join([f"N={N} K={K} G={G}"] + set_flags)] = f"BLOCK_N={block_n} SUB_MAX={sub} num_warps={warps}"
    return out


def _tuned(key: tuple, launch) -> tuple:
    """The fastest of INT4_CONFIGS for `key` (weight shape, group size and flavour), each `launch`ed on the GPU and
    timed with Triton's do_bench (as the int4 GEMV's autotuner does), then kept."""
    if key not in _TUNED:
        triton, _ = _triton()
        times = {config: triton.testing.do_bench(lambda config=config: launch(*config), warmup=5, rep=20)
                 for config in INT4_CONFIGS}
        _TUNED[key] = min(times, key=times.get)
    return _TUNED[key]
