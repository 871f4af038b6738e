"""The byte model of the quantisation paths: what one decode step streams in each path's real format (packed int4
codes, scales and zeros in their dtypes and layouts; the LM head (bf16 but where a path quantises it), norms, biases and
one embedding row), term
by term, per matrix product, and the path's own memory floor. Beside `accounting` (the bf16 conventions W_all and
W_streamed), which it equals for bf16.
"""

from __future__ import annotations

from typing import Mapping

from decodegap import accounting

DEFAULT_GROUP_SIZE = 128
BNB_BLOCKSIZE = 64
LAYOUT_OF = {"bf16": "bf16", "bnb-nf4": "nf4", "awq-marlin": "marlin", "awq-triton": "awq_gemm", "awq": "awq_gemm",
             "gptq-exllamav2": "gptq", "int4-tinygemm": "tinygemm", "int4-triton": "triton_int4",
             "int4-triton-head": "triton_int4"}
"""Quantisation path (quant.PATHS key, or the alias `awq`) -> its byte layout."""


def _layout(path_key: str) -> str:
    try:
        return LAYOUT_OF[path_key]
    except KeyError:
        raise KeyError(f"unknown quantisation path {path_key!r}; known: {', '.join(LAYOUT_OF)}") from None


def decoder_linears(config: Mapping) -> list[tuple[str, int, int, bool]]:
    """(name, in_features K, out_features N, has_bias) of the seven nn.Linear of ONE decoder layer."""
    h, inter = config["hidden_size"], config["intermediate_size"]
    d = accounting.head_dim(config)
    q_out, kv_out = config["num_attention_heads"] * d, config["num_key_value_heads"] * d
    qkv_bias = config["model_type"] == "qwen2" or bool(config.get("attention_bias", False))
    o_bias = config["model_type"] != "qwen2" and bool(config.get("attention_bias", False))
    mlp_bias = bool(config.get("mlp_bias", False))
    return [("q_proj", h, q_out, qkv_bias), ("k_proj", h, kv_out, qkv_bias), ("v_proj", h, kv_out, qkv_bias),
            ("o_proj", q_out, h, o_bias), ("gate_proj", h, inter, mlp_bias), ("up_proj", h, inter, mlp_bias),
            ("down_proj", inter, h, mlp_bias)]



def _linear_terms(layout: str, name: str, k: int, n: int, G: int, has_bias: bool) -> dict[str, int]:
    """The byte terms of one decoder linear (K in, N out) in `layout` (see byte_terms)."""
    if layout != "bf16" and layout != "nf4" and k % G:
        raise ValueError(f"{name}: in_features {k} is not a multiple of group size {G}")
    terms = {"linear_bias": 2 * n} if has_bias else {}
    if layout == "bf16":
        return {**terms, "linear_weight": 2 * k * n}
    terms["linear_packed"] = k * n // 2
    if layout in ("tinygemm", "triton_int4"):
        terms["linear_scales"] = 2 * 2 * (k // G) * n
    elif layout in ("gptq", "awq_gemm"):
        terms["linear_zeros"] = 4 * (k // G) * (n // 8)
        terms["linear_scales"] = 2 * (k // G) * n
    elif layout == "marlin":
        terms["linear_scales"] = 2 * (k // G) * n
    elif layout == "nf4":
        terms["linear_absmax"] = 4 * -(-k * n // BNB_BLOCKSIZE)
        terms["linear_code"] = 4 * 16
    return terms


def linear_bytes(path_key: str, k: int, n: int, group_size: int = DEFAULT_GROUP_SIZE, has_bias: bool = False) -> int:
    """Bytes one call of a K-in, N-out linear reads in path `path_key`'s format (byte_terms' terms of one linear):
    also what the LM head streams in a path that quantises it (`head_bytes`), or would in one that does not."""
    return sum(_linear_terms(_layout(path_key), "linear", k, n, group_size, has_bias).values())


def head_bytes(config: Mapping, path_key: str, group_size: int = DEFAULT_GROUP_SIZE) -> int:
    """Bytes the LM head (vocab x hidden; the tied embedding table where tied) reads in one step under path
    `path_key`: 2*V*H in bf16, or the path's linear_bytes where it quantises the head (accounting.HEAD_QUANTISED)."""
    v, h = config["vocab_size"], config["hidden_size"]
    return linear_bytes(path_key, h, v, group_size) if path_key in accounting.HEAD_QUANTISED else 2 * v * h


def byte_terms(config: Mapping, path_key: str, group_size: int = DEFAULT_GROUP_SIZE) -> dict[str, int]:
    """Bytes one decode step streams for path `path_key`, term by term (W_streamed convention).

    Per decoder linear (K in, N out, G the group size), by layout:
      bf16      linear_weight  2*K*N                       (bf16 [N, K])
      tinygemm  linear_packed  K*N/2                       (int4 codes, tinygemm-tiled int32)
                linear_scales  2*2*(K/G)*N                 (scales_and_zeros bf16 [K/G, N, 2]: scale AND zero)
      triton_int4  the same two terms (int32 [N, K/8] codes; bf16 scales and offsets [N, K/G] each: int4_gemv)
      gptq      linear_packed  4*(K/8)*N = K*N/2           (qweight int32 [K/8, N])
                linear_zeros   4*(K/G)*(N/8) = K*N/(2G)    (qzeros int32 [K/G, N/8])
                linear_scales  2*(K/G)*N                   (scales fp16 [K/G, N]; no act-order: no g_idx)
      awq_gemm  same three terms (qweight int32 [K, N/8], qzeros int32 [K/G, N/8], scales fp16 [K/G, N])
      marlin    linear_packed  K*N/2 (qweight int32 [K/16, 2N]); linear_scales 2*(K/G)*N; no zeros
                (symmetric). Its lock workspace (N/128*8 int32) is not counted (< 0.001 %).
      nf4       linear_packed  K*N/2                       (uint8, two nf4 codes per byte)
                linear_absmax  4*K*N/64                    (one fp32 absmax per 64-weight block:
                                                            compress_statistics=False, HF's default. With
                                                            double quantisation it would be 1 byte per block
                                                            + fp32 per 256 blocks, but the fp32 absmax is then
                                                            rebuilt, written and read every step)
                linear_code    4*16 per linear             (the nf4 lookup table, 16 fp32, read per call)
    Every path, unquantised:
      linear_bias     2 bytes per bias element (Qwen2's q/k/v biases; bf16 or fp16 in the fp16 kernels)
      norms           2*H per RMSNorm: 2 per layer + the final one
      embedding_row   2*H (one looked-up row of the input embedding)
      lm_head         2*V*H (bf16; for tied embeddings the table, read once as the head), or in the path's own
                      layout where it quantises the head (accounting.HEAD_QUANTISED: `head_bytes`, a tied head untied)
    KV is not a weight term: see `step_bytes`. Activations and the new token's KV write are left out.
    For bf16 the total equals accounting.weight_bytes(config, "W_streamed").
    """
    layout = _layout(path_key)
    h, layers = config["hidden_size"], config["num_hidden_layers"]
    G = group_size
    terms = dict.fromkeys(("linear_weight", "linear_packed", "linear_scales", "linear_zeros", "linear_absmax",
                           "linear_code", "linear_bias"), 0)
    for name, k, n, has_bias in decoder_linears(config):
        for term, nbytes in _linear_terms(layout, name, k, n, G, has_bias).items():
            terms[term] += nbytes
    terms = {t: b * layers for t, b in terms.items()}
    terms["norms"] = 2 * h * (2 * layers + 1)
    terms["embedding_row"] = 2 * h
    terms["lm_head"] = head_bytes(config, path_key, G)
    return terms


def projection_bytes(config: Mapping, path_key: str, layout: str = "hf",
                     group_size: int = DEFAULT_GROUP_SIZE) -> dict[str, int]:
    """Bytes one call of each matrix product of a decoder layer reads for path `path_key` (byte_terms' terms of
    its linears: packed codes, scales, zeros, bias), in accounting.PROJECTIONS[layout] order (`fused`: the lean
    decoder's qkv and gate_up, one layer each, as quant.fuse.fuse_linears builds them), and the LM head's (`head_bytes`:
    bf16 but in a path that quantises it, the vocab x hidden table, tied or not). Every layer's products, the head, the norms and one embedding row
    make up streamed_weight_bytes (for bf16: accounting's W_streamed)."""
    kind = _layout(path_key)
    if layout not in accounting.PROJECTIONS:
        raise ValueError(f"unknown projection layout {layout!r}; use one of {tuple(accounting.PROJECTIONS)}")
    per = {name.removesuffix("_proj"): sum(_linear_terms(kind, name, k, n, group_size, bias).values())
           for name, k, n, bias in decoder_linears(config)}
    if layout == "fused":
        per = dict(qkv=per["q"] + per["k"] + per["v"], o=per["o"], gate_up=per["gate"] + per["up"], down=per["down"])
    per["lm_head"] = head_bytes(config, path_key, group_size)
    return per


def streamed_weight_bytes(config: Mapping, path_key: str, group_size: int = DEFAULT_GROUP_SIZE, ctx: int = 0) -> int:
    """Bytes a decode step streams for path `path_key`: every weight term of `byte_terms` (packed int4
    weights, scales, zeros in each path's real dtype and layout, the LM head (`head_bytes`), norms, biases,
    one embedding row), plus the KV cache at `ctx` (accounting.kv_bytes, bf16; 0 by default)."""
    weights = sum(byte_terms(config, path_key, group_size).values())
    return weights + (accounting.kv_bytes(config, ctx) if ctx else 0)


def step_bytes(config: Mapping, path_key: str, ctx: int, group_size: int = DEFAULT_GROUP_SIZE) -> int:
    """W_path + K(ctx): what one decode step of path `path_key` must move at context `ctx`."""
    return streamed_weight_bytes(config, path_key, group_size, ctx=ctx)


def t_floor_ms(config: Mapping, path_key: str, ctx: int, bandwidth_gbps: float,
               group_size: int = DEFAULT_GROUP_SIZE) -> float:
    """The path's own memory floor (ms): its step bytes at `bandwidth_gbps` (accounting.t_floor_ms)."""
    return accounting.t_floor_ms(step_bytes(config, path_key, ctx, group_size), bandwidth_gbps)


def r_floor(config: Mapping, path_key: str, ctx: int, bandwidth_gbps: float, t_obs_ms: float,
            group_size: int = DEFAULT_GROUP_SIZE) -> float:
    """R_floor of a path: its own floor over the observed step time."""
    return accounting.r_floor(t_floor_ms(config, path_key, ctx, bandwidth_gbps, group_size), t_obs_ms)
