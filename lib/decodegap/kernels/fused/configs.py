"""Launch configs of the fused step's GEMV (decodegap.kernels.fused.launch.fused_gemv): a GemvConfig per weight shape (N rows of
the weight, K) of the products of the models in data/models/, and a rule for other shapes.

The table is not reasoned: each entry is the config bench/fused_gemv.py timed fastest for that shape and that
product's prologue and epilogue on the H200 (graph mode, with PDL), in data/diagnostics/fused_gemv.csv;
tests/test_fused.py checks the table against those rows, shape by shape, wherever the file has them. A product
flavour not yet timed takes the config that won on the products of the same weight, and the test names it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from decodegap.kernels.step import H200_SMS, _interpreted


@dataclass(frozen=True)
class GemvConfig:
    """Launch parameters of fused_gemv for one weight shape: BLOCK_N output rows and BLOCK_K columns a tile,
    `split_k` programs along K (1: none), `warps` and `stages` (Triton's num_warps, num_stages)."""

    block_n: int
    block_k: int
    split_k: int = 1
    warps: int = 4
    stages: int = 1

    @property
    def key(self) -> str:
        """The config as one word for tables: n16_k512_s2_w4_p1."""
        return f"n{self.block_n}_k{self.block_k}_s{self.split_k}_w{self.warps}_p{self.stages}"


GEMV_CONFIGS: dict[tuple[int, int], GemvConfig] = {
    # Llama-3.1-8B (Mistral-7B-v0.3 has the same widths, its LM head 32768 rows)
    (6144, 4096): GemvConfig(16, 512),  # qkv with the input norm
    (4096, 4096): GemvConfig(16, 512, warps=8),  # o with the residual
    (28672, 4096): GemvConfig(4, 1024, stages=3),  # gate_up with the post-attention norm ([gate; up] out, gate_up_norm)
    (4096, 14336): GemvConfig(16, 512, warps=8),  # down with SiLU(gate) * up as its prologue and the residual (down_silu)
    (128256, 4096): GemvConfig(16, 512),  # LM head with the final norm
    (32768, 4096): GemvConfig(4, 1024, stages=3),  # Mistral's LM head with the final norm
    # Qwen2.5-7B
    (4608, 3584): GemvConfig(16, 512),  # qkv with the input norm and the bias
    (3584, 3584): GemvConfig(16, 512, warps=8),  # o
    (37888, 3584): GemvConfig(16, 512),  # gate_up_norm
    (3584, 18944): GemvConfig(16, 512, warps=8),  # down_silu
    (152064, 3584): GemvConfig(8, 512, warps=2),  # LM head
    # Llama-3.2-1B (the megakernel cell): only its LM head, whose rule's config (8 rows of 1024 columns on 4 warps)
    # ran 21 % slower than this one; its other products' rule configs are within 2 % of their fastest
    (128256, 2048): GemvConfig(8, 512, warps=2),  # LM head with the final norm
}
"""GemvConfig per weight shape (N, K) (for gate_up, N counts the fused weight's gate and up rows), as the fused step
uses the products: see the module docstring for where each entry comes from. What the rows showed on the H200: at
batch 1 split-K lost on every product it was tried on (one program a row block over the whole of K, more row
blocks instead); 16 rows of 512 columns, whose x moves through shared memory, won on most shapes against the
register-only layouts (BLOCK_K = 256 x warps) the first table was reasoned from, on 8 warps where the loop does
more per element of x (down with the SiLU prologue) or the product is small (o)."""

PLAIN_CONFIGS: dict[tuple[int, int], GemvConfig] = {
    (16384, 2048): GemvConfig(4, 1024, stages=3),  # Llama-3.2-1B's gate_up_plain: 2.9 % faster than its rule's config
}
"""GemvConfig per weight shape (N, K) of a product with neither prologue nor epilogue, where it differs from
GEMV_CONFIGS's for the same shape: the gate_up of the fused step with the norm in o's epilogue
(lean_fused_pdl_norm_graph; bench/fused_gemv.py's gate_up_plain). At the 7-8B models' widths none: in gate_up_plain's
rows the config of the same weight with the norm prologue (GEMV_CONFIGS's) is the fastest, or within the test's 2 % of
it. Llama-3.2-1B's (the megakernel cell's levers run it) has no GEMV_CONFIGS entry, and its rule's config ran more than
2 % slower than the fastest candidate (2026-12-05)."""

ROTARY_CONFIGS: dict[tuple[int, int], GemvConfig] = {
    (6144, 4096): GemvConfig(4, 1024),  # Llama-3.1-8B's and Mistral-7B-v0.3's qkv_rotary
    (4608, 3584): GemvConfig(4, 1024, stages=3),  # Qwen2.5-7B's
}
"""GemvConfig per weight shape (N, K) of the qkv product with the rotary and the cache write as its epilogue
(fused_gemv's rotary: lean_fused_pdl_epilogues_graph; bench/fused_gemv.py's qkv_rotary), whose programs read two
row sets as gate_up's do: the fastest of qkv_rotary's candidates, as for GEMV_CONFIGS. The first rows of the lever
ran GEMV_CONFIGS's entry for the same weight (16 rows of 512 columns), slower in qkv_rotary's rows; tiles of 16 and
32 rows on 4 warps, which hold two row sets a program, were slower still."""

SCALE_CONFIGS: dict[tuple[int, int], GemvConfig] = {}
"""GemvConfig per weight shape (N, K) of a norm-scale levers' product (SCALE_FLAVOURS: x read with the norm's scale, or
y's norm left to the next product as a scale; FusedOps.norm_scale), where it differs from GEMV_CONFIGS's for the same
weight: the fastest of bench/fused_gemv.py's candidates for that product on the H200, as for GEMV_CONFIGS. Empty:
those products have no H200 rows yet (on an H100 SXM Qwen2.5-7B's qkv_scaled ran fastest on another config than its
weight's entry; data/diagnostics/fused_gemv.csv), and until they do they take their weight's entry."""

INTERPRETED_BLOCK_K = 32
"""BLOCK_K of the default config under TRITON_INTERPRET=1, so that the tests' small K run several loop steps."""


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def table_entry(N: int, K: int, plain: bool = False, rotary: bool = False, scale: bool = False) -> GemvConfig | None:
    """The tables' config of weight shape (N, K), as gemv_config looks it up (`plain`: PLAIN_CONFIGS's first;
    `rotary`: ROTARY_CONFIGS's first; `scale`: SCALE_CONFIGS's first; then GEMV_CONFIGS's); None where they hold none
    and the rule decides."""
    if scale and (N, K) in SCALE_CONFIGS:
        return SCALE_CONFIGS[(N, K)]
    if plain and (N, K) in PLAIN_CONFIGS:
        return PLAIN_CONFIGS[(N, K)]
    if rotary and (N, K) in ROTARY_CONFIGS:
        return ROTARY_CONFIGS[(N, K)]
    return GEMV_CONFIGS.get((N, K))


def gemv_config(N: int, K: int, plain: bool = False, rotary: bool = False, scale: bool = False) -> GemvConfig:
    """The config of weight shape (N, K) (`plain`: of a product with no prologue or epilogue, PLAIN_CONFIGS's
    first; `rotary`: of the qkv product with the rotary epilogue, ROTARY_CONFIGS's first; `scale`: of a norm-scale
    product, SCALE_CONFIGS's first): GEMV_CONFIGS's, else BLOCK_N 8, BLOCK_K the largest power of two up to K
    (16 to 1024) on BLOCK_K / 256 warps (at least one), split along K in two or four while that leaves fewer than 4
    programs an SM and at least four BLOCK_K steps a split. Under the interpreter BLOCK_K is INTERPRETED_BLOCK_K."""
    if _interpreted():
        return GemvConfig(8, INTERPRETED_BLOCK_K)
    entry = table_entry(N, K, plain, rotary, scale)
    if entry is not None:
        return entry
    block_k = max(16, min(1024, 1 << (max(1, K).bit_length() - 1)))
    split = 1
    while split < 4 and _cdiv(N, 8) * split < 4 * H200_SMS and K // (2 * split) >= 4 * block_k:
        split *= 2
    return GemvConfig(8, block_k, split, warps=max(1, block_k // 256))


def candidate_configs(N: int, K: int, gate_up: bool = False, plain: bool = False,
                      rotary: bool = False, scale: bool = False) -> tuple[GemvConfig, ...]:
    """The configs bench/fused_gemv.py times for weight shape (N, K): the table's (or the rule's; `plain`,
    `rotary`: gemv_config's for a product with no prologue or epilogue, or with the rotary one) first, then 4 and
    8 rows on 2, 4 and 8 warps with BLOCK_K = 256 x warps, Triton's pipelining (3 stages), shapes whose x moves
    through shared memory (16 and 32 rows of 512 columns, 16 of 1024, each on 4 and 8 warps; 16 of 512 and 8 of 1024
    pipelined), and split-K 2 and 4
    where the product has fewer than 8 row blocks of 8 an SM (never for gate_up, whose epilogue needs the whole of
    both sums)."""
    rows = N // 2 if gate_up else N
    out = [gemv_config(N, K, plain, rotary, scale), GemvConfig(4, 1024), GemvConfig(8, 1024), GemvConfig(8, 512, warps=2),
           GemvConfig(4, 2048, warps=8), GemvConfig(8, 2048, warps=8), GemvConfig(4, 1024, stages=3),
           GemvConfig(16, 512), GemvConfig(32, 512), GemvConfig(16, 1024), GemvConfig(16, 512, warps=8),
           GemvConfig(16, 512, stages=3), GemvConfig(16, 512, warps=8, stages=3), GemvConfig(32, 512, warps=8),
           GemvConfig(16, 1024, warps=8), GemvConfig(8, 1024, stages=3)]
    if _cdiv(rows, 8) < 8 * H200_SMS and not gate_up and not rotary:
        out += [GemvConfig(4, 1024, split_k=2), GemvConfig(8, 1024, split_k=2), GemvConfig(4, 1024, split_k=4),
                GemvConfig(8, 1024, split_k=4)]
    return tuple(dict.fromkeys(c for c in out if c.split_k == 1 or not gate_up))


def products(config: Mapping) -> list[tuple[str, int, int, str]]:
    """(name, K, N weight rows, flavour) of each fused product of a model (its HF config dict), as
    bench/fused_gemv.py times them and names their rows. Flavour: norm (the norm prologue), norm_bias (and Qwen2's
    bias), residual, gate_up (the norm prologue and the SiLU epilogue), silu_residual (the SiLU prologue and the
    residual), residual_norm (the residual and the output's norm, out_norm), plain, plain_gate_up (the SiLU
    epilogue alone), norm_rotary and norm_bias_rotary (the qkv product with the rotary and the cache write as its
    epilogue). STEP_PRODUCTS are the default fused step's; o_norm and gate_up_plain the norm-epilogue arm's,
    qkv_rotary the epilogues arm's too; gate_up and down the versions they replaced; gate_up_silu and down the
    SiLU-epilogue arm's MLP after o_norm; down_norm (the last layer's down, the final norm in its epilogue) and
    lm_head_plain (the head with no prologue) the all-epilogues arm's; with the input norm in the previous down's
    epilogue too (FusedOps.input_norm_in_epilogue), every layer's down is down_norm (down_silu_norm with the SiLU
    prologue) and qkv takes no prologue: qkv_rotary_plain (flavours plain_rotary, bias_rotary) or qkv_plain (plain,
    bias). With the norms left as scales (FusedOps.norm_scale; launch.SCALE_PRODUCTS) the norm-scale levers launch
    qkv_scaled (flavour scaled, or bias_scaled: x read with the norm's scale), o_scale (residual_scale: the residual and
    out_scale), gate_up_plain_scaled (scaled) and down_silu_scale (silu_residual_scale)."""
    hidden, inter, heads = config["hidden_size"], config["intermediate_size"], config["num_attention_heads"]
    D = hidden // heads
    heads_dim, qkv = heads * D, (heads + 2 * config["num_key_value_heads"]) * D
    qkv_flavour = "norm_bias" if config.get("model_type") == "qwen2" else "norm"
    plain_qkv = "bias" if config.get("model_type") == "qwen2" else "plain"
    return [("qkv", hidden, qkv, qkv_flavour),
            ("o", heads_dim, hidden, "residual"), ("gate_up", hidden, 2 * inter, "gate_up"),
            ("gate_up_norm", hidden, 2 * inter, "norm"), ("down", inter, hidden, "residual"),
            ("down_silu", inter, hidden, "silu_residual"), ("lm_head", hidden, config["vocab_size"], "norm"),
            ("o_norm", heads_dim, hidden, "residual_norm"), ("gate_up_plain", hidden, 2 * inter, "plain"),
            ("qkv_rotary", hidden, qkv, qkv_flavour + "_rotary"), ("gate_up_silu", hidden, 2 * inter, "plain_gate_up"),
            ("down_norm", inter, hidden, "residual_norm"), ("lm_head_plain", hidden, config["vocab_size"], "plain"),
            ("qkv_rotary_plain", hidden, qkv, plain_qkv + "_rotary"), ("qkv_plain", hidden, qkv, plain_qkv),
            ("down_silu_norm", inter, hidden, "silu_residual_norm"),
            ("qkv_scaled", hidden, qkv, ("bias_" if plain_qkv == "bias" else "") + "scaled"),
            ("o_scale", heads_dim, hidden, "residual_scale"), ("gate_up_plain_scaled", hidden, 2 * inter, "scaled"),
            ("down_silu_scale", inter, hidden, "silu_residual_scale")]


STEP_PRODUCTS = ("qkv", "o", "gate_up_norm", "down_silu", "lm_head")
"""The products (products' names) the default fused step launches."""

SCALE_FLAVOURS = ("scaled", "bias_scaled", "residual_scale", "silu_residual_scale")
"""The flavours of the norm-scale levers' products (products): x read with the norm's scale (norm_scale), or y's
norm left to the next product as a scale (out_scale)."""


def flavour_lookup(flavour: str) -> dict:
    """The table flags of gemv_config and table_entry (plain, rotary, scale) for a product of `flavour` (products), as
    fused_gemv sets them from its arguments when it launches one."""
    return dict(plain=flavour == "plain", rotary=flavour.endswith("_rotary"), scale=flavour in SCALE_FLAVOURS)


def flavour_candidates(N: int, K: int, flavour: str) -> tuple[GemvConfig, ...]:
    """candidate_configs for a product of `flavour` (products): the gate_up ones', the rotary ones' and residual_norm's
    without split-K (an epilogue that needs the whole of each sum, or of the output), plain's and the rotary ones'
    with their own config first."""
    out = candidate_configs(N, K, gate_up=flavour in ("gate_up", "plain_gate_up"), **flavour_lookup(flavour))
    return tuple(c for c in out if c.split_k == 1) if flavour.endswith("residual_norm") else out
