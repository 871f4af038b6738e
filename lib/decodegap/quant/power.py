"""What the quantisation checks can detect, and the model check's tolerance derived from each format's rounding
alone, fixed before any quantised model's error is read.

The derivation (compare.MODEL_K_PASS, MODEL_K_FAIL; the rules registry's QT entry reads both):

1. Rounding noise of one weight. Round-to-nearest onto a grid of cell width D (the format's step) leaves
   e = W_deq - W uniform on +-D/2 (variance D^2/12), independent of the activations. Each format's step, from the
   bf16 weight W alone (`step`; G = 128 consecutive inputs of one output row, 64 for nf4's blocks):
     gptq, awq            asymmetric, integer zero: D = (max(W, 0) - min(W, 0)) / 15 per group
     int4-tinygemm,       float zero: D = (max W - min W) / 15 per group
     int4-triton
     awq-marlin           symmetric: D = max|W| / 7 per group (on Gaussian groups 1.17x the asymmetric step)
     bnb-nf4              D = absmax x the width of the NF4 cell that w / absmax rounds into (quant.formats.nf4_cells)
   eps = sqrt(mean D^2 / 12) / rms(W) (`predicted_eps`) is then the relative noise of one product x W^T whatever its
   K and M (e_j = sum_k x_k e_jk, Var e_j = sum_k x_k^2 D^2 / 12): 0.100 asymmetric, 0.118 symmetric, 0.092 nf4 on
   N(0, 0.02) weights.
2. The null. Through a decoder layer the seven products' noises combine (q and k through the softmax, v then o,
   gate and up through SiLU then down) by factors that the model's own activations set, so no closed form fixes
   the layer's error in advance. It is measured instead: the bf16 model with every decoder linear's weight
   replaced by W + U(-D/2, D/2) of the format's own step (`noisy_linears`), through the same forced-layer metric
   (harness.quant_checks.forced_layer_error: each layer fed the bf16 model's recorded input, its output against the
   bf16 layer's) at the same context, NULL_DRAWS draws of the noise; the null is the largest draw. Only the
   rounding model is propagated: no quantised layer, kernel or error enters it, and it is computed in the run that
   checks the cell, on that cell's model and context.
3. The factor. tol = MODEL_K_PASS x null with MODEL_K_PASS = 1 + 3 sigma = 1.3, sigma = 0.10 the relative spread
   of one null draw, from the only nulls measured before this rule (two draws on two Llama-3.1-8B decoder layers
   at ctx 64 on a CPU: 0.415 and 0.360 -> |d1 - d2| / mean / sqrt 2 = 0.10; the fewest layers and positions, so the
   widest spread: more layers and longer contexts concentrate a maximum). A correct path is one more draw of
   (nearly) the same distribution (round-to-nearest's error is fixed by W, but on Gaussian groups as good as
   uniform on +-D/2), so it passes unless it lies 3 sigma above the larger of two draws. MODEL_K_FAIL = sqrt 2: a
   fault that adds an independent error as large as the format's own rounding noise gives sqrt(1 + 1) x null.
   Between the two the verdict is inconclusive, and the sweep gates on tol (such a cell is not timed). The
   elementwise format check and the layer check below catch what falls in that band by other means.
4. The elementwise format check (`format_check`), on every quantised layer: r = |W_deq - W| / (D/2) per weight,
   W_deq read back from the layer's own tensors. Correct round-to-nearest has r <= 1 up to its stored parameters'
   rounding: fp16 scales with an integer zero move the grid's end by 15 steps x 2^-11, r <= 1 + 30 x 2^-11 =
   1.015; bf16 scales with a float zero, r <= 1 + 2^-8; nf4 read back in bf16, r <= 1.03. FORMAT_TOL = 1.05 is
   above all of these; every planted fault moves some weights by a whole step or more (r >= 3).
5. The faults (`FAULTS`), planted in this package's own format code (quant.formats) while a path's layers are
   built, as a mistake in a checkpoint converter or a packer would be: a zero point one too high, the nibbles of an
   int32 packed in the wrong order, codes taken in groups of G/2 but read with G's parameters, the scale matrix
   written without its transpose, and Marlin's scale permutation skipped. bnb-nf4 and int4-triton quantise with
   their own code (bitsandbytes, decodegap.kernels.int4_gemv), so no fault is planted there.

harness.quant_checks measures it all: model_tolerance the null of each model check, product_rows the power on single
products of given shapes (bench/quant_power_cpu.py: the four Llama-3.1-8B shapes on a CPU), power_rows on a model
(two decoder layers on a CPU, the whole model on a GPU: bench/quant_power_gpu.py).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from decodegap.quant import formats as fmt

FORMAT_TOL = 1.05
"""Elementwise format check: the largest |W_deq - W| / (D / 2) a correct layer may show (module docstring, 4)."""
NULL_DRAWS = 2
"""Noise draws of the null per model check (module docstring, 2)."""
FORMAT_OF = {"gptq-exllamav2": "asymmetric", "awq-triton": "asymmetric", "awq-marlin": "symmetric",
             "int4-tinygemm": "float zero", "int4-triton": "float zero", "int4-triton-head": "float zero",
             "bnb-nf4": "nf4"}
"""The rounding each quantised path applies (module docstring, 1)."""
BNB_BLOCKSIZE = 64
KERNEL_ONLY = ("int4-tinygemm", "bnb-nf4")
"""Paths with no reference build: tinygemm runs its kernel on any device, bitsandbytes quantises itself (CUDA)."""


def group_size_of(path_key: str, group_size: int) -> int:
    """The group over which path `path_key` shares its parameters: nf4's blocks of 64, else `group_size`."""
    return BNB_BLOCKSIZE if FORMAT_OF[path_key] == "nf4" else group_size


def step(path_key: str, weight, group_size: int = 128):
    """The width D [N, K] (fp32) of the rounding cell of each weight of `weight` [N, K] under path `path_key`'s
    format (module docstring, 1), from the weight alone."""
    kind = FORMAT_OF[path_key]
    w = weight.detach().float()
    if kind == "nf4":
        _, lo, hi, absmax = fmt.nf4_cells(w, BNB_BLOCKSIZE)
        return (hi - lo) * absmax
    N, K, ng = fmt.check_groups(w, group_size)
    g = w.reshape(N, ng, group_size)
    if kind == "asymmetric":
        s = (g.amax(-1).clamp(min=0) - g.amin(-1).clamp(max=0)) / 15
    elif kind == "float zero":
        s = (g.amax(-1) - g.amin(-1)) / 15
    else:  # symmetric
        s = g.abs().amax(-1) / 7
    return fmt.grouped(s, group_size)


def half_step(path_key: str, weight, group_size: int = 128):
    """The largest |W_deq - W| [N, K] that correct round-to-nearest leaves for each weight: D / 2, and for nf4 the
    distance from its code to the farther end of its cell (x absmax)."""
    if FORMAT_OF[path_key] == "nf4":
        code, lo, hi, absmax = fmt.nf4_cells(weight, BNB_BLOCKSIZE)
        return torch.maximum(code - lo, hi - code) * absmax
    return step(path_key, weight, group_size) / 2


def predicted_eps(path_key: str, weight, group_size: int = 128) -> float:
    """sqrt(mean D^2 / 12) / rms(W): the relative rounding noise of one product x W^T (module docstring, 1)."""
    d = step(path_key, weight, group_size)
    w = weight.detach().float()
    return float((d.pow(2).mean() / 12).sqrt() / w.pow(2).mean().sqrt().clamp_min(1e-30))


def format_check(path_key: str, weight, deq, group_size: int = 128) -> dict:
    """The elementwise format check of one layer: its W_deq `deq` [N, K] (read back from its own tensors) against
    the bf16 weight it was quantised from. ratio_max = max |W_deq - W| / half_step, frac_past = the share of
    weights past FORMAT_TOL half-steps, eps = rms(W_deq - W) / rms(W) (to set beside predicted_eps)."""
    w = weight.detach().float()
    diff = (deq.float() - w).abs()
    half = half_step(path_key, w, group_size)
    ratio = torch.where(diff > 0, diff / half.clamp_min(1e-30), torch.zeros_like(diff))
    return dict(ratio_max=float(ratio.max()), frac_past=float((ratio > FORMAT_TOL).float().mean()),
                eps=float(diff.pow(2).mean().sqrt() / w.pow(2).mean().sqrt().clamp_min(1e-30)))


def format_passes(ratio_max: float) -> bool:
    return bool(ratio_max == ratio_max and ratio_max <= FORMAT_TOL)


# ----------------------------------------------------------------------------------------------------- null

def _linears(model):
    for layer in model.model.layers:
        for mod in layer.modules():
            if isinstance(mod, nn.Linear):
                yield mod


@contextlib.contextmanager
def noisy_linears(model, path_key: str, group_size: int = 128, seed: int = 0, modules=None):
    """Inside: every decoder nn.Linear of `model` (the LM head, embedding and norms untouched), or the nn.Linear
    `modules` given (the LM head's null: [model.lm_head]), holds its bf16 weight plus U(-D/2, D/2) of path
    `path_key`'s own step (`step`), drawn with `seed`; the weights are put back on exit."""
    G = group_size_of(path_key, group_size)
    saved = []
    try:
        with torch.no_grad():
            for i, mod in enumerate(_linears(model) if modules is None else modules):
                w = mod.weight.data
                gen = torch.Generator(device=w.device).manual_seed(int(seed) * 100003 + i)
                d = step(path_key, w, G)
                u = (torch.rand(d.shape, generator=gen, device=w.device) - 0.5) * d
                saved.append((mod, w))
                mod.weight.data = (w.float() + u).to(w.dtype)
                del d, u
        yield model
    finally:
        for mod, w in saved:
            mod.weight.data = w


# --------------------------------------------------------------------------------------------------- faults

@dataclass(frozen=True)
class Fault:
    """A mistake planted in quant.formats while a path's layers are built (`planted`). `replace(path_key, orig)`
    gives {formats attribute: replacement} for a path it applies to, `orig` the formats module's own functions."""

    key: str
    label: str
    paths: tuple[str, ...]
    replace: Callable = None

    def applies(self, path_key: str) -> bool:
        return path_key in self.paths


def _transposed(s, group_size):  # [N, K/G] whose .t() is s's row-major memory read as [K/G, N]
    N, ng = s.shape
    return s.contiguous().reshape(ng, N).t()


def _wrong_zero(path, o):
    if path == "gptq-exllamav2":  # z stored as z (read back as z + 1)
        return {"gptq_pack": lambda q, z, s, g: o["gptq_pack"](q, z + 1, s, g)}
    if path == "awq-triton":
        return {"awq_pack": lambda q, z, s: o["awq_pack"](q, (z + 1).clamp(max=15), s)}
    def float_zero(w, g):  # tinygemm's float zero one step too high
        q, s, m = o["rtn_float_zero"](w, g)
        return q, s, (m + s).to(torch.bfloat16).float()
    return {"rtn_float_zero": float_zero}


def _swapped_nibbles(path, o):
    order = torch.tensor(fmt.AWQ_ORDER)
    if path == "awq-triton":  # packed in plain order, read in AWQ's
        def awq(q, z, s):
            N, K = q.shape
            return (fmt.pack_int32(q.t().reshape(K, N // 8, 8)), fmt.pack_int32(z.t().reshape(z.shape[1], N // 8, 8)),
                    s.t().contiguous().half())
        return {"awq_pack": awq}
    if path == "gptq-exllamav2":  # packed in AWQ's order, read in plain order
        def gptq(q, z, s, g):
            N, K = q.shape
            qweight = fmt.pack_int32(q.t().reshape(K // 8, 8, N).transpose(1, 2)[..., order.to(q.device)])
            _, qzeros, scales = o["gptq_pack"](q, z, s, g)
            return qweight, qzeros, scales
        return {"gptq_pack": gptq}
    if path == "awq-marlin":  # Marlin's int32 without its nibble interleave
        def marlin(q, s, g, perms):
            perm = torch.as_tensor(perms[0])
            inverse = torch.argsort(torch.tensor(fmt.MARLIN_INTERLEAVE))
            return o["marlin_pack"](q, s, g, (perm.reshape(-1, 8)[:, inverse].reshape(-1), perms[1]))
        return {"marlin_pack": marlin}
    def tinygemm(w, g):  # each pair of adjacent codes swapped (the two nibbles of a byte)
        q, s, m = o["rtn_float_zero"](w, g)
        N, K = q.shape
        return q.reshape(N, K // 2, 2).flip(-1).reshape(N, K).contiguous(), s, m
    return {"rtn_float_zero": tinygemm}


def _wrong_group(path, o):
    if path == "awq-marlin":
        def sym(w, g, scale_dtype=torch.float16):
            q, s = o["rtn_symmetric"](w, g // 2, scale_dtype)
            return q, s[:, ::2].contiguous()
        return {"rtn_symmetric": sym}
    if path == "int4-tinygemm":
        def fz(w, g):
            q, s, m = o["rtn_float_zero"](w, g // 2)
            return q, s[:, ::2].contiguous(), m[:, ::2].contiguous()
        return {"rtn_float_zero": fz}
    def asym(w, g, scale_dtype=torch.float16, zero_min=0):
        q, z, s = o["rtn_asymmetric"](w, g // 2, scale_dtype, zero_min)
        return q, z[:, ::2].contiguous(), s[:, ::2].contiguous()
    return {"rtn_asymmetric": asym}


def _transposed_scales(path, o):
    if path == "gptq-exllamav2":
        return {"gptq_pack": lambda q, z, s, g: o["gptq_pack"](q, z, _transposed(s, g), g)}
    if path == "awq-triton":
        return {"awq_pack": lambda q, z, s: o["awq_pack"](q, z, _transposed(s, None))}
    if path == "awq-marlin":
        return {"marlin_pack": lambda q, s, g, perms: o["marlin_pack"](q, _transposed(s, g), g, perms)}
    def fz(w, g):  # tinygemm's scales and float zeros, both
        q, s, m = o["rtn_float_zero"](w, g)
        return q, _transposed(s, g), _transposed(m, g)
    return {"rtn_float_zero": fz}


def _no_scale_perm(path, o):
    def marlin(q, s, g, perms):
        return o["marlin_pack"](q, s, g, (perms[0], torch.arange(len(perms[1]))))
    return {"marlin_pack": marlin}


ASYM = ("gptq-exllamav2", "awq-triton")
FAULTS: dict[str, Fault] = {f.key: f for f in (
    Fault("wrong_zero_point", "wrong zero point (one too high)", ASYM + ("int4-tinygemm",), _wrong_zero),
    Fault("swapped_nibbles", "swapped nibble order", ASYM + ("awq-marlin", "int4-tinygemm"), _swapped_nibbles),
    Fault("wrong_group_size", "wrong group size (codes of G/2, parameters of G)",
          ASYM + ("awq-marlin", "int4-tinygemm"), _wrong_group),
    Fault("transposed_scales", "transposed scales (written without the transpose)",
          ASYM + ("awq-marlin", "int4-tinygemm"), _transposed_scales),
    Fault("marlin_scale_perm_skipped", "Marlin scale_perm skipped", ("awq-marlin",), _no_scale_perm),
)}
"""The planted faults (module docstring, 5), by key. Marlin is symmetric: it stores no zero point to get wrong."""
PATCHED = ("gptq_pack", "awq_pack", "marlin_pack", "rtn_asymmetric", "rtn_symmetric", "rtn_float_zero")
PLANTED_FROM = {name: getattr(fmt, name) for name in PATCHED}
"""quant.formats' own functions, as imported (a fault replaces them only inside `planted`)."""


def faults_for(path_key: str) -> list[Fault]:
    return [f for f in FAULTS.values() if f.applies(path_key)]


@contextlib.contextmanager
def planted(fault: Fault | str | None, path_key: str):
    """Inside: quant.formats with `fault` planted for path `path_key` (None: nothing planted); restored on exit.
    ValueError for a fault that does not apply to the path."""
    if fault is None:
        yield
        return
    fault = FAULTS[fault] if isinstance(fault, str) else fault
    if not fault.applies(path_key):
        raise ValueError(f"fault {fault.key} does not apply to {path_key} (it applies to {', '.join(fault.paths)})")
    orig = {name: getattr(fmt, name) for name in PATCHED}
    replacements = fault.replace(path_key, orig)
    try:
        for name, fn in replacements.items():
            setattr(fmt, name, fn)
        yield
    finally:
        for name in replacements:
            setattr(fmt, name, orig[name])
