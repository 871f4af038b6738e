"""Launch configs of the fused int4 product (decodegap.kernels.fused_int4.launch.fused_int4_gemv): a table per weight
shape, flavour and launch, else the per-process tuner (launch._tuned, Triton's do_bench over the int4 GEMV's
INT4_CONFIGS on the kernel alone, without PDL and outside a CUDA graph).

The table is not reasoned: each entry is to be the config bench/fused_int4_gemv.py timed fastest for that product in
graph mode with its launch (no PDL, PDL, PDL with the early trigger) on the H200, in
data/diagnostics/fused_int4_gemv.csv, as the bf16 fused GEMV's table (kernels.fused.configs) was made; tests/
test_fused_int4_configs.py checks every entry against those rows. A product without an entry is tuned in each
process, which may choose otherwise from one process to the next (a session reports the choices:
kernels.tuned_choices)."""

from __future__ import annotations

from typing import Mapping

from decodegap.kernels.fused import configs as fused_configs

INT4_STEP_PRODUCTS = ("qkv", "o", "o_norm", "gate_up_norm", "gate_up_plain", "down_silu", "gate_up_silu", "down",
                      "qkv_rotary", "down_norm", "lm_head", "lm_head_plain", "qkv_rotary_plain", "qkv_plain",
                      "down_silu_norm")
"""The products (kernels.fused.configs.products' names) the fused int4 step launches on int4 weights: qkv with the input
norm; o with the residual, or with the post-attention norm in its epilogue too (o_norm, the norm-epilogue levers);
gate_up with that norm as its prologue, or with none (gate_up_plain, after o_norm); down with SiLU(gate) * up as its
prologue and the residual; or gate_up with no prologue and SiLU(gate) * up as its epilogue (gate_up_silu, after
o_norm) and down with the residual alone (down: the SiLU-epilogue lever); qkv with the rotary and the cache write as
its epilogue too (qkv_rotary, the rotary-epilogue levers); the last layer's down with the final norm in its epilogue
(down_norm) and the head then with no prologue (lm_head_plain: the all-epilogues lever); with each layer's input
norm made in the previous down's epilogue, every down is down_norm (down_silu_norm with the SiLU prologue) and qkv
takes no prologue (qkv_rotary_plain, or qkv_plain without the rotary epilogue: the epilogue-norms lever); and the LM
head with the
final norm as its prologue where the path quantises it (int4-triton-head; in every other path it stays bf16, on the
bf16 fused GEMV's table). The bench times each; a product without a table entry (the head until the bench has timed
it) takes launch's tuner's choice."""

FLAVOUR_FLAGS: dict[str, dict] = {"norm": dict(NORM=True), "norm_bias": dict(NORM=True, BIAS=True),
                                  "residual": dict(RESIDUAL=True), "residual_norm": dict(RESIDUAL=True, OUT_NORM=True),
                                  "plain": {}, "silu_residual": dict(SILU_X=True, RESIDUAL=True),
                                  "gate_up": dict(NORM=True, GATE_UP=True), "plain_gate_up": dict(GATE_UP=True),
                                  "norm_rotary": dict(NORM=True, ROTARY=True),
                                  "norm_bias_rotary": dict(NORM=True, BIAS=True, ROTARY=True),
                                  "bias": dict(BIAS=True), "plain_rotary": dict(ROTARY=True),
                                  "bias_rotary": dict(BIAS=True, ROTARY=True),
                                  "silu_residual_norm": dict(SILU_X=True, RESIDUAL=True, OUT_NORM=True)}
"""The kernel's flags of each flavour of the fused int4 product (the rest False)."""

LAUNCHES = ("none", "pdl", "early")
"""How a product is launched: without PDL, with PDL (its trigger after the loop), with PDL and the early trigger."""

FUSED_INT4_CONFIGS: dict[tuple[int, int, str, str], tuple[int, int, int]] = {
    (6144, 4096, 'norm', 'none'): (8, 1, 4),  # llama-3.1-8b qkv
    (6144, 4096, 'norm', 'pdl'): (8, 1, 2),  # llama-3.1-8b qkv
    (6144, 4096, 'norm', 'early'): (8, 2, 2),  # llama-3.1-8b qkv
    (4096, 4096, 'residual', 'none'): (4, 1, 2),  # llama-3.1-8b o
    (4096, 4096, 'residual', 'pdl'): (4, 1, 2),  # llama-3.1-8b o
    (4096, 4096, 'residual', 'early'): (4, 1, 4),  # llama-3.1-8b o
    (28672, 4096, 'norm', 'none'): (16, 1, 2),  # llama-3.1-8b gate_up_norm
    (28672, 4096, 'norm', 'pdl'): (16, 1, 2),  # llama-3.1-8b gate_up_norm
    (28672, 4096, 'norm', 'early'): (16, 1, 2),  # llama-3.1-8b gate_up_norm
    (4096, 14336, 'silu_residual', 'none'): (8, 1, 2),  # llama-3.1-8b down_silu
    (4096, 14336, 'silu_residual', 'pdl'): (8, 1, 2),  # llama-3.1-8b down_silu
    (4096, 14336, 'silu_residual', 'early'): (8, 1, 2),  # llama-3.1-8b down_silu
    (4096, 4096, 'residual_norm', 'none'): (4, 1, 4),  # llama-3.1-8b o_norm
    (4096, 4096, 'residual_norm', 'pdl'): (4, 1, 2),  # llama-3.1-8b o_norm
    (4096, 4096, 'residual_norm', 'early'): (8, 1, 4),  # llama-3.1-8b o_norm
    (28672, 4096, 'plain', 'none'): (8, 1, 2),  # llama-3.1-8b gate_up_plain
    (28672, 4096, 'plain', 'pdl'): (8, 2, 2),  # llama-3.1-8b gate_up_plain
    (28672, 4096, 'plain', 'early'): (8, 2, 2),  # llama-3.1-8b gate_up_plain
    (4608, 3584, 'norm_bias', 'none'): (8, 1, 4),  # qwen2.5-7b qkv
    (4608, 3584, 'norm_bias', 'pdl'): (8, 1, 4),  # qwen2.5-7b qkv
    (4608, 3584, 'norm_bias', 'early'): (8, 1, 4),  # qwen2.5-7b qkv
    (3584, 3584, 'residual', 'none'): (4, 1, 4),  # qwen2.5-7b o
    (3584, 3584, 'residual', 'pdl'): (4, 1, 2),  # qwen2.5-7b o
    (3584, 3584, 'residual', 'early'): (4, 1, 4),  # qwen2.5-7b o
    (37888, 3584, 'norm', 'none'): (16, 1, 2),  # qwen2.5-7b gate_up_norm
    (37888, 3584, 'norm', 'pdl'): (16, 1, 2),  # qwen2.5-7b gate_up_norm
    (37888, 3584, 'norm', 'early'): (16, 1, 2),  # qwen2.5-7b gate_up_norm
    (4096, 14336, 'residual', 'pdl'): (4, 1, 2),  # llama-3.1-8b down
    (4096, 14336, 'residual', 'early'): (4, 1, 2),  # llama-3.1-8b down
    (28672, 4096, 'plain_gate_up', 'pdl'): (8, 2, 2),  # llama-3.1-8b gate_up_silu
    (28672, 4096, 'plain_gate_up', 'early'): (8, 2, 2),  # llama-3.1-8b gate_up_silu
    (4096, 14336, 'residual_norm', 'pdl'): (4, 1, 2),  # llama-3.1-8b down_norm
    (4096, 14336, 'residual_norm', 'early'): (4, 1, 2),  # llama-3.1-8b down_norm
    (128256, 4096, 'plain', 'pdl'): (8, 2, 2),  # llama-3.1-8b lm_head_plain
    (128256, 4096, 'plain', 'early'): (8, 2, 2),  # llama-3.1-8b lm_head_plain
    (6144, 4096, 'plain_rotary', 'pdl'): (8, 1, 2),  # llama-3.1-8b qkv_rotary_plain
    (6144, 4096, 'plain_rotary', 'early'): (4, 1, 2),  # llama-3.1-8b qkv_rotary_plain
    (6144, 4096, 'norm_rotary', 'pdl'): (8, 1, 2),  # llama-3.1-8b qkv_rotary
    (6144, 4096, 'norm_rotary', 'early'): (8, 2, 2),  # llama-3.1-8b qkv_rotary
}
"""(BLOCK_N, SUB_MAX, num_warps) per (N, K, flavour, launch) at the int4 format's default group size (128, the
bench's; launch.choose_config reads the table at that group size only): see the module docstring. Mistral-7B-v0.3's
products are Llama-3.1-8B's widths. Qwen2.5-7B's down, o_norm and gate_up_plain products have no entry: the bench's
first run on the H200 was cut part-way through its down product (10 of the 12 configs timed at one launch) and never
reached the other two, so the tuner chooses there. A second run (commit 0e4e9c8) timed Llama's products of the
all-epilogues lever at PDL and the early trigger (down, gate_up_silu, down_norm, lm_head_plain) and qkv_rotary_plain at
PDL; it was cut in qkv_rotary_plain's early-trigger configs. A third run (commit 952da62) timed those and qkv_rotary
(the norm prologue and the rotary epilogue) at both launches. Where the tuner chose before these entries, its choice moved between processes (down's sessions at the target cell picked different
configs), and the step's time moved with it."""


def config_key(config) -> str:
    """(BLOCK_N, SUB_MAX, num_warps) as one word, as bench/fused_int4_gemv.py's rows name a config: n4_s1_w2."""
    block_n, sub, warps = config
    return f"n{block_n}_s{sub}_w{warps}"


def products(config: Mapping) -> list[tuple[str, int, int, str]]:
    """(name, K, N weight rows, flavour) of each int4 product of a model's fused int4 step (INT4_STEP_PRODUCTS), from
    its HF config dict."""
    return [p for p in fused_configs.products(config) if p[0] in INT4_STEP_PRODUCTS]


def flavour_of(flags: Mapping, out_norm: bool) -> str:
    """The flavour (FLAVOUR_FLAGS) of a launch's flags (NORM, BIAS, RESIDUAL, SILU_X, GATE_UP, ROTARY) and output norm;
    ValueError for a combination the fused int4 step does not launch."""
    set_flags = {name for name in ("NORM", "BIAS", "RESIDUAL", "SILU_X", "GATE_UP", "ROTARY") if flags.get(name)} | (
        {"OUT_NORM"} if out_norm else set())
    for flavour, wanted in FLAVOUR_FLAGS.items():
        if set(wanted) == set_flags:
            return flavour
    raise ValueError(f"no flavour of the fused int4 product has the flags {sorted(set_flags)}")


def launch_of(pdl: bool, early_trigger: bool) -> str:
    """The launch (LAUNCHES) of a product's PDL options."""
    return "early" if pdl and early_trigger else "pdl" if pdl else "none"


def table_config(N: int, K: int, flavour: str, launch: str,
                 table: Mapping = FUSED_INT4_CONFIGS) -> tuple[int, int, int] | None:
    """The table's (BLOCK_N, SUB_MAX, num_warps) for this product and launch, else None (the tuner chooses)."""
    return table.get((N, K, flavour, launch))


TABLE_GROUP_SIZE = 128
"""The group size the table was timed at (kernels.int4_gemv.format.DEFAULT_GROUP_SIZE, which imports torch; a test
holds them equal): a product of another group size is not read from it."""


def launched_config(N: int, K: int, G: int, flags: Mapping, out_norm: bool) -> tuple[int, int, int] | None:
    """The table's config for a product launched with `flags` (NORM, BIAS, RESIDUAL, SILU_X, GATE_UP, ROTARY, USE_PDL,
    EARLY_TRIGGER; a missing flag is unset) and an output norm or not, as launch.choose_config reads it: at
    TABLE_GROUP_SIZE only, a scale flag read as its flavour without it (flavour_of reads none); else None (the tuner
    chooses). ValueError (flavour_of) for flags the fused int4 step does not launch."""
    if G != TABLE_GROUP_SIZE:
        return None
    return table_config(N, K, flavour_of(flags, out_norm),
                        launch_of(bool(flags.get("USE_PDL")), bool(flags.get("EARLY_TRIGGER"))))
