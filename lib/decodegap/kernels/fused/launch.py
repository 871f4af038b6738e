"""Fused decode-step kernels for the lean decoder (Triton): one decode step (T == 1) of a bf16 Llama, Mistral or
Qwen2 in seven kernels a layer, the small ops of the unfused step folded into the matrix products around them.
Each kernel has a PyTorch reference written to the same rounding as the unfused ops of decodegap.harness.lean
(decodegap.kernels.fused.reference, re-exported here); the Triton source is decodegap.kernels.fused.source. This module launches
them, checks their arguments first, and holds FusedOps, the step's operations as the lean decoder calls them.

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
The step's attention is decodegap.kernels.step.decode_attention (split-KV), unchanged.

Configs: decodegap.kernels.fused.configs holds a GemvConfig per weight shape (N, K) of the three models' products, each
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
wait). The split-KV attention's two kernels (decodegap.kernels.step.decode_attention with pdl) wait first and
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
from torch import nn

from decodegap.kernels.fused.configs import GemvConfig, _cdiv, gemv_config
from decodegap.kernels.fused.norm_scale import NormScale, check_scale, scale_args
from decodegap.kernels.fused.rotary_args import check_rotary, kernel_args
from decodegap.kernels.fused.reference import (_linear, gate_up_silu_reference, gemv_residual_reference,
                                               rmsnorm_gemv_reference, rotary_cache_reference,
                                               silu_gemv_residual_reference, with_output_norm)
from decodegap.kernels.fused.source import build as _kernels
from decodegap.kernels.fused.workspace import WORKSPACE_FLOATS, WORKSPACE_ROW_BLOCKS, workspace
from decodegap.kernels.fused_int4.configs import launch_of
from decodegap.kernels.fused_int4.launch import fused_int4_gemv, int4_tensors
from decodegap.kernels.l2_prefetch import l2_prefetch_cols
from decodegap.kernels.step import (_gdc, _interpreted, _triton, attention_blocks, available, decode_attention,
                                    decode_attention_reference)


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


def weights_unsupported(hf_model, kernels=()) -> str | None:
    """None when the fused step with the options `kernels` (lean.CUSTOM_KERNELS' names) can run `hf_model`'s decoder
    layers (bf16, every projection an nn.Linear, or every one an int4-triton layer: the fused int4 step,
    decodegap.kernels.fused_int4), else the reason: the fused kernels read bf16 weights or the int4-triton format
    with the activation's rounding, not another quantised layer's format nor another dtype. `kernels` is read by
    none of the fused step's options today: the int4 kernel has every epilogue the bf16 one has."""
    dtype = hf_model.model.embed_tokens.weight.dtype
    if dtype != torch.bfloat16:
        return f"the fused kernels run bf16 models; this one is {dtype}"
    for i, layer in enumerate(hf_model.model.layers):
        a, m = layer.self_attn, layer.mlp
        parts = (a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj, m.down_proj)
        if all(int4_tensors(p) is not None for p in parts):
            continue
        kinds = {type(p).__name__ for p in parts if type(p) is not nn.Linear}
        if kinds:
            return (f"the fused kernels read bf16 nn.Linear weights or int4-triton layers; layer {i} has "
                    f"{', '.join(sorted(kinds))}")
    return None


def int4_weights(hf_model) -> bool:
    """Whether the decoder layers' projections are int4-triton layers (the fused int4 step)."""
    return int4_tensors(hf_model.model.layers[0].self_attn.q_proj) is not None


def product(x, weight, **options):
    """fused_gemv(x, weight, **options) for a bf16 weight; fused_int4_gemv for an int4-triton layer (its bias
    inside: a bias argument, or a config of fused_gemv's, is a ValueError naming it). `x` a NormScale: its x_scaled
    read with the norm's scale (norm_scale, either kernel's)."""
    if isinstance(x, NormScale):
        x, options = x.x_scaled, dict(options, norm_scale=x)
    if isinstance(weight, torch.Tensor):
        return fused_gemv(x, weight, **options)
    if options.get("bias") is not None or options.get("config") is not None:
        raise ValueError("fused_int4_gemv has no bias argument or GemvConfig: an int4-triton layer holds its bias, and "
                         "its configs are kernels.fused_int4.configs'")
    options = {k: v for k, v in options.items() if k not in ("bias", "config")}
    return fused_int4_gemv(x, weight, **options)


def fused_gemv(x, weight, *, norm_weight=None, eps: float = 0.0, bias=None, residual=None, gate_up: bool = False,
               silu_x: bool = False, out_norm=None, rotary=None, config: GemvConfig | None = None, pdl: bool = False,
               early_trigger: bool = False, out_scale=None, norm_scale: NormScale | None = None,
               l2_prefetch: bool = False):
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
    at start_pos of the caches [1, Hkv, L, D]. `out_scale` (norm weight [N], eps): RMSNorm(y) left to the next
    product as a scale instead, returned as (y, NormScale): each row block writes its rows of y times the norm weight
    and its sum of squares of y, and no program waits for another (split-K allowed); `norm_scale` (a NormScale, x its
    x_scaled): this product's sums scaled by the norm's 1 / rms before its epilogue, in place of the norm prologue
    (NormScale says how the two roundings differ). `l2_prefetch`: kernels.l2_prefetch's (no value changes)."""
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
        check_rotary(N, rotary, gate_up or silu_x or residual is not None or out_norm is not None)
    plain = not (norm_weight is not None or bias is not None or residual is not None or gate_up or silu_x
                 or out_norm is not None or rotary is not None or out_scale is not None or norm_scale is not None)
    cfg = config or gemv_config(N, K, plain, rotary=rotary is not None,
                                scale=out_scale is not None or norm_scale is not None)
    k_split = _cdiv(_cdiv(K, cfg.split_k), cfg.block_k) * cfg.block_k  # columns a split: a multiple of BLOCK_K
    split = _cdiv(K, k_split)
    if split > 1 and (gate_up or rotary is not None):
        raise ValueError("split-K is not implemented for gate_up or rotary (their epilogues need the whole of both "
                         "sums)")
    check_scale(out_scale, norm_scale, gate_up or rotary is not None or out_norm is not None,
                 norm_weight is not None or silu_x)
    if out_norm is not None and (split > 1 or gate_up):
        raise ValueError("out_norm is implemented for an unsplit product with one output per row (no split-K, no "
                         "gate_up)")
    blocks = _cdiv(rows, cfg.block_n)
    _check_workspace(split, rows, blocks, out_norm is not None)
    triton, _ = _triton()
    xc, wc = x.reshape(-1).contiguous(), weight.contiguous()
    # rotary: q alone comes out (k and v go into the caches); else one output a row
    y = torch.empty(rotary[5] * rotary[3].shape[-1] if rotary is not None else rows, dtype=x.dtype, device=x.device)
    partials, counts = workspace(x.device) if split > 1 or out_norm is not None else (y, y)
    h = torch.empty_like(y) if out_norm is not None else None
    extra = dict(onorm_ptr=xc, h_ptr=y, ncount_ptr=counts, eps_out=0.0, OUT_NORM=False, PBLOCK=16, YBLOCK=16)
    if out_norm is not None:
        extra.update(onorm_ptr=out_norm[0].contiguous(), h_ptr=h, ncount_ptr=counts[WORKSPACE_ROW_BLOCKS - 1:],
                     eps_out=float(out_norm[1]), OUT_NORM=True, PBLOCK=triton.next_power_of_2(blocks),
                     YBLOCK=triton.next_power_of_2(rows))
    extra.update(kernel_args(rotary, xc), PAIRED=gate_up or rotary is not None, EARLY_TRIGGER=early_trigger,
                 L2_COLS=_l2_cols(wc, N, k_split, split, l2_prefetch))
    scale_extra, scaled = scale_args(xc, y, blocks, out_scale, norm_scale)
    extra.update(scale_extra)
    eps = eps if norm_scale is None else norm_scale.eps
    gemv_kernel, _ = _kernels()
    gemv_kernel[(blocks, split)](
        xc, wc, y, xc if norm_weight is None else norm_weight.contiguous(), xc if bias is None else bias.contiguous(),
        xc if residual is None else residual.reshape(rows).contiguous(), partials, counts, rows, K, k_split,
        float(eps), BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, SPLIT_K=split, NORM=norm_weight is not None,
        XBLOCK=triton.next_power_of_2(K) if norm_weight is not None else 16, BIAS=bias is not None,
        RESIDUAL=residual is not None, GATE_UP=gate_up, SILU_X=silu_x, USE_PDL=pdl, num_warps=cfg.warps,
        num_stages=cfg.stages, launch_pdl=pdl, **extra)
    if scaled is not None:
        return y, scaled
    return y if out_norm is None else (y, h)


def _check_workspace(split: int, rows: int, blocks: int, out_norm: bool) -> None:
    """fused_gemv's split-K partials and arrival counters fit the workspace (out_norm's counter is its last)."""
    if split * rows > WORKSPACE_FLOATS or blocks > WORKSPACE_ROW_BLOCKS:
        raise ValueError(f"split-K of {split} x {rows} rows exceeds the workspace ({WORKSPACE_FLOATS} floats, "
                         f"{WORKSPACE_ROW_BLOCKS} row blocks)")
    if out_norm and blocks >= WORKSPACE_ROW_BLOCKS:
        raise ValueError(f"out_norm takes fewer than {WORKSPACE_ROW_BLOCKS} row blocks, got {blocks}")


def _l2_cols(weight, N: int, k_split: int, split: int, l2_prefetch: bool) -> int:
    """fused_gemv's L2_COLS: with l2_prefetch each program asks the L2 for the first columns of its rows' shares
    before its wait, L2_PREFETCH_BYTES over the product (kernels.l2_prefetch.l2_prefetch_cols over every row of the
    weight), else 0; a weight whose rows are not 16-byte aligned (a bulk prefetch's rule) is refused."""
    if not l2_prefetch:
        return 0
    K = weight.shape[1]
    if weight.data_ptr() % 16 or K % 8:
        raise ValueError(f"l2_prefetch asks the L2 for whole rows' shares, 16-byte aligned: this weight's rows start at "
                         f"{weight.data_ptr()} with {K} columns (a multiple of 8 is needed); run it without l2_prefetch")
    return l2_prefetch_cols(N, k_split, split)


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


SCALE_PRODUCTS = {"o_norm": "o_scale", "gate_up_plain": "gate_up_plain_scaled", "gate_up_silu": "gate_up_silu_scaled",
                  "down_norm": "down_scale", "down_silu_norm": "down_silu_scale", "qkv_plain": "qkv_scaled",
                  "qkv_rotary_plain": "qkv_rotary_scaled"}
"""FusedOps.layer_products' names of the products whose norm made in an epilogue is a scale (FusedOps.norm_scale):
the product that made it whole, or read it, of the same name without the scale."""


@dataclass(frozen=True)
class FusedOps:
    """The fused step's operations, as LeanLayer.fused_step calls them: the Triton kernels (launched with PDL
    when `pdl`) or, with `reference`, their PyTorch references (any device; the attention's length read on the
    host). `silu_in_down` chooses where the MLP's SiLU(gate) * up is made: in the down product's prologue (True,
    the gate_up product then plain with the norm prologue: bench/fused_gemv.py's down_silu and gate_up_norm), or
    in the gate_up product's epilogue (False: its gate_up; down then takes the activation with the residual alone,
    its down). `norm_in_epilogue`: the post-attention RMSNorm made in the o product's epilogue by its last row
    block (fused_gemv's out_norm), gate_up then with no prologue (gate_up_plain, or gate_up_silu with the SiLU in
    its epilogue). `rotary_in_qkv`: the rotary and the cache write made in the qkv product's
    epilogue (fused_gemv's rotary), so the rotary_cache kernel is not launched. `early_trigger` (with `pdl`):
    every kernel triggers its dependents as it starts; `early_products`: only the products another product follows
    (o, gate_up and down; down's successor is the next layer's qkv), the qkv product, rotary_cache, the attention and
    the LM head triggering after their reads as without it. `merged_attention`: the split-KV attention in one kernel
    (decode_attention's `merged`: its last program a kv head merges the splits; no merge kernel).
    `head_norm_in_epilogue`: the final RMSNorm made in the last layer's down epilogue (out_norm, as o's with
    norm_in_epilogue), the LM head then with no prologue (`gemv`): the decoder passes `out_norm` to that layer.
    `input_norm_in_epilogue`: each layer's input RMSNorm but the first's made in the previous layer's down epilogue
    the same way, its qkv product then with no prologue (qkv_rotary's `normed`): the decoder passes each layer the
    next layer's norm as `out_norm` and the RMSNorm it returns on to that layer. `norm_scale`: each of those norms
    made in an epilogue is left to the next product as a scale (fused_gemv's out_scale and norm_scale, NormScale):
    no program of the product before it waits for the whole output, and the product after it applies 1 / rms to its
    sums instead of reading a normalised x (the bf16 and the int4 kernels alike; the first layer's input norm stays
    qkv's prologue). `kv_together`: the attention loads each block's V beside its K, in blocks of
    kernels.step.KV_TOGETHER_BLOCK positions (decode_attention's `kv_together`; on sm_90 only the block changes the
    compiled kernel). `rotary_in_attention`: the rotary and the cache write made in the attention's split kernel
    (decode_attention's `rotary`), which takes the qkv product's row, so the rotary_cache kernel is not launched and
    the qkv product stays plain (not with rotary_in_qkv). `attention_prefetch` (with rotary_in_attention): the
    attention reads the first block of each program's share before it waits for qkv (decode_attention's `prefetch`),
    and qkv lets it launch as qkv starts (the early trigger, with `pdl`), so the cache's loads overlap the qkv
    product. `l2_prefetch` (with `pdl`): each product's programs ask the L2 for the first columns of their rows
    before they wait (fused_gemv's and fused_int4_gemv's l2_prefetch, kernels.l2_prefetch)."""

    pdl: bool = False
    reference: bool = False
    silu_in_down: bool = True
    norm_in_epilogue: bool = False
    rotary_in_qkv: bool = False
    early_trigger: bool = False
    early_products: bool = False
    merged_attention: bool = False
    head_norm_in_epilogue: bool = False
    input_norm_in_epilogue: bool = False
    norm_scale: bool = False
    kv_together: bool = False
    rotary_in_attention: bool = False
    attention_prefetch: bool = False
    l2_prefetch: bool = False

    def __post_init__(self):
        """The rules between the options, the one place they are checked (harness.lean.kernel_set asks here for a
        fused step's kernels); each message names the option and its kernel's name."""
        if self.rotary_in_qkv and self.rotary_in_attention:
            raise ValueError("the rotary is made once: in the qkv product's epilogue (rotary_in_qkv, kernel "
                             "'rotary_epilogue') or in the attention (rotary_in_attention, kernel 'rotary_attention'), "
                             "not both")
        if self.attention_prefetch and not self.rotary_in_attention:
            raise ValueError("attention_prefetch (kernel 'attention_prefetch') reads the cache before qkv's newest key "
                             "is made: it needs rotary_in_attention (kernel 'rotary_attention')")
        if self.l2_prefetch and not self.pdl:
            raise ValueError("l2_prefetch (kernel 'l2_prefetch') asks the L2 for weights while the previous kernel "
                             "runs: it needs pdl (kernel 'pdl')")

    @classmethod
    def of_kernels(cls, chosen) -> "FusedOps":
        """The FusedOps of a lean decoder's custom kernels (harness.lean.CUSTOM_KERNELS' names, with "fused"): "pdl",
        "norm_epilogue", "rotary_epilogue", "early_trigger", "early_products" and "merged_attention" set its options,
        "silu_epilogue" clears silu_in_down, "head_norm_epilogue" and "input_norm_epilogue" set head_norm_in_epilogue
        and input_norm_in_epilogue, "norm_scale" norm_scale, "kv_together" kv_together, "rotary_attention"
        rotary_in_attention, "attention_prefetch" attention_prefetch, "l2_prefetch" l2_prefetch (arms.Arm.kernels)."""
        chosen = frozenset(chosen)
        return cls(pdl="pdl" in chosen, silu_in_down="silu_epilogue" not in chosen,
                   head_norm_in_epilogue="head_norm_epilogue" in chosen,
                   input_norm_in_epilogue="input_norm_epilogue" in chosen,
                   norm_in_epilogue="norm_epilogue" in chosen,
                   rotary_in_qkv="rotary_epilogue" in chosen, early_trigger="early_trigger" in chosen,
                   early_products="early_products" in chosen, merged_attention="merged_attention" in chosen,
                   norm_scale="norm_scale" in chosen, kv_together="kv_together" in chosen,
                   rotary_in_attention="rotary_attention" in chosen,
                   attention_prefetch="attention_prefetch" in chosen, l2_prefetch="l2_prefetch" in chosen)

    @property
    def _launch(self) -> dict:
        return dict(pdl=self.pdl, early_trigger=self.pdl and self.early_trigger)

    @property
    def _qkv_launch(self) -> dict:
        """The qkv product's launch: with attention_prefetch the early trigger, so the attention reads its cache
        under qkv."""
        return dict(pdl=self.pdl, early_trigger=self.pdl and (self.early_trigger or self.attention_prefetch))

    def _product(self, x, weight, launch: dict, **options):
        """product(x, weight, **options) with `launch` (_launch, _qkv_launch or _between) and the step's prefetch
        option (l2_prefetch, when set): every product a step launches goes through here."""
        return product(x, weight, **options, **launch, **(dict(l2_prefetch=True) if self.l2_prefetch else {}))

    @property
    def _between(self) -> dict:
        """The launch of a product another product follows (o, gate_up, down)."""
        return dict(pdl=self.pdl, early_trigger=self.pdl and (self.early_trigger or self.early_products))

    def _out(self, out_norm) -> dict:
        """A product's output-norm option: out_norm (the norm made by the last row block), or with norm_scale
        out_scale (left to the next product as a scale); none without `out_norm` (norm weight, eps)."""
        if out_norm is None:
            return {}
        return dict(out_scale=out_norm) if self.norm_scale else dict(out_norm=out_norm)

    def layer_products(self) -> list[tuple[str, str]]:
        """(product, launch) of each product one decoder layer's step launches, in order: the product's name in
        kernels.fused.configs.products and its launch, "none", "pdl" or "early" (PDL with the early trigger), as
        the methods below launch them (the LM head, launched once per step, is not a layer's)."""
        qkv = ("qkv" + ("_rotary" if self.rotary_in_qkv else "") + ("_plain" if self.input_norm_in_epilogue else ""),
               launch_of(**self._qkv_launch))
        between = launch_of(**self._between)
        if self.norm_in_epilogue:  # as o_and_mlp
            middle = [("o_norm", between), ("gate_up_plain" if self.silu_in_down else "gate_up_silu", between)]
        else:
            middle = [("o", between), ("gate_up_norm" if self.silu_in_down else "gate_up", between)]
        down = ("down_silu" if self.silu_in_down else "down") + ("_norm" if self.input_norm_in_epilogue else "")
        products = [qkv] + middle + [(down, between)]
        if self.norm_scale:  # the norms as scales: products of their own (no bench flavour of them yet)
            products = [(SCALE_PRODUCTS.get(name, name), launch) for name, launch in products]
        return products

    def qkv_rotary(self, x, norm_weight, w_qkv, b_qkv, eps: float, cos_table, sin_table, start_pos, k_cache,
                   v_cache, n_heads: int, n_kv_heads: int, normed=None):
        """Rotary q [H, D] of qkv(RMSNorm(x)) (+ bias), k and v written at start_pos of the caches [1, Hkv, L, D]:
        the qkv product and rotary_cache, or one kernel with rotary_in_qkv; with rotary_in_attention the qkv
        product's row alone, q, k and v not yet rotated nor written (the attention does both). `normed`: RMSNorm(x)
        already made (the previous down's epilogue, input_norm_in_epilogue), qkv then with no norm prologue."""
        prologue = dict(norm_weight=norm_weight, eps=eps) if normed is None else {}
        if self.rotary_in_attention and not self.reference:
            return self._product(x if normed is None else normed, w_qkv, self._qkv_launch, bias=b_qkv, **prologue)
        if not self.rotary_in_qkv or self.reference:
            qkv = (self.rmsnorm_gemv(x, norm_weight, w_qkv, b_qkv, eps) if normed is None else
                   self.gemv_bias(normed, w_qkv, b_qkv))
            return self.rotary_cache(qkv, cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads)
        rotary = (cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads)
        q = self._product(x if normed is None else normed, w_qkv, self._launch, bias=b_qkv, rotary=rotary, **prologue)
        return q.reshape(n_heads, -1)

    def o_and_mlp(self, o, w_o, x, norm_weight, w_gate_up, w_down, eps: float, out_norm=None):
        """The layer after its attention: x + o @ w_o^T, then the MLP block with its residual (mlp); `out_norm`
        (norm weight, eps): (x, RMSNorm(x)), the norm in down's epilogue."""
        if not self.norm_in_epilogue or self.reference:
            return self.mlp(self.gemv_residual(o, w_o, x), norm_weight, w_gate_up, w_down, eps, out_norm)
        x, h = self._product(o, w_o, self._between, residual=x, **self._out((norm_weight, eps)))
        if not self.silu_in_down:  # SiLU(gate) * up in gate_up's epilogue, down with the residual alone
            return self.gemv_residual(self._product(h, w_gate_up, self._between, gate_up=True), w_down, x,
                                      out_norm=out_norm)
        return self._silu_down(self._product(h, w_gate_up, self._between), w_down, x, out_norm)

    def rmsnorm_gemv(self, x, norm_weight, weight, bias, eps: float):
        if self.reference:
            return rmsnorm_gemv_reference(x, norm_weight, weight, bias, eps)
        return self._product(x, weight, self._launch, norm_weight=norm_weight, eps=eps, bias=bias)

    def rotary_cache(self, qkv, cos_table, sin_table, start_pos, k_cache, v_cache, n_heads: int, n_kv_heads: int):
        if self.reference:
            return rotary_cache_reference(qkv, cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads)
        return rotary_cache(qkv, cos_table, sin_table, start_pos, k_cache, v_cache, n_heads, n_kv_heads, **self._launch)

    def attention(self, q, k_cache, v_cache, length, scale: float, rotary=None):
        """q [H, D] against the first `length` ([1] device tensor) positions of k_cache, v_cache [Hkv, L, D]. With
        rotary_in_attention, q is qkv_rotary's qkv row and `rotary` (cos_table, sin_table, H) rotates it and writes
        the newest position's k and v (decode_attention's `rotary`)."""
        if self.reference:
            return decode_attention_reference(q, k_cache, v_cache, int(length), scale)
        if self.rotary_in_attention and rotary is None:
            raise ValueError("FusedOps.rotary_in_attention: the attention takes the qkv row and needs `rotary` "
                             "(cos_table, sin_table, n_heads)")
        rotary = dict(rotary=rotary, prefetch=self.attention_prefetch) if self.rotary_in_attention else {}
        return decode_attention(q, k_cache, v_cache, length, scale, merged=self.merged_attention, **rotary,
                                **attention_blocks(self.kv_together), **self._launch)

    def gemv_residual(self, x, weight, residual, out_norm=None):
        """residual + x @ weight^T; with `out_norm` (norm weight, eps) (y, RMSNorm(y))."""
        if self.reference:
            return with_output_norm(gemv_residual_reference(x, weight, residual), out_norm)
        return self._product(x, weight, self._between, residual=residual, **self._out(out_norm))

    def gemv(self, x, weight):
        """x @ weight^T with no prologue or epilogue (the LM head after head_norm_in_epilogue)."""
        return self.gemv_bias(x, weight, None)

    def gemv_bias(self, x, weight, bias):
        """x @ weight^T (+ bias) with no prologue (the qkv product after input_norm_in_epilogue without
        rotary_in_qkv)."""
        if self.reference:
            return _linear(x, weight, bias)
        return self._product(x, weight, self._launch, bias=bias)

    def gate_up_silu(self, x, norm_weight, weight, eps: float):
        if self.reference:
            return gate_up_silu_reference(x, norm_weight, weight, eps)
        return self._product(x, weight, self._between, norm_weight=norm_weight, eps=eps, gate_up=True)

    def mlp(self, x, norm_weight, w_gate_up, w_down, eps: float, out_norm=None):
        """x + down(SiLU(gate) * up) of gate_up(RMSNorm(x)): the MLP block with its residual, in two kernels;
        `out_norm` (norm weight, eps): (y, RMSNorm(y)), the norm in down's epilogue."""
        if not self.silu_in_down:
            return self.gemv_residual(self.gate_up_silu(x, norm_weight, w_gate_up, eps), w_down, x, out_norm=out_norm)
        if self.reference:
            return with_output_norm(silu_gemv_residual_reference(
                rmsnorm_gemv_reference(x, norm_weight, w_gate_up, None, eps), w_down, x), out_norm)
        return self._silu_down(self._product(x, w_gate_up, self._between, norm_weight=norm_weight, eps=eps),
                               w_down, x, out_norm)

    def _silu_down(self, gate_up, w_down, x, out_norm=None):
        """x + down(SiLU(gate) * up), the SiLU in down's prologue (fused_gemv's silu_x)."""
        return self._product(gate_up, w_down, self._between, silu_x=True, residual=x, **self._out(out_norm))
