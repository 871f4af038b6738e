"""Exact byte accounting of a decode step from an HF config (a plain dict of config.json fields).

Conventions (state them wherever a floor appears):
  W_all       every parameter's bytes: the paper's convention (it reproduces L4 R_floor ~ 0.81).
  W_streamed  what one decode step must read: every weight except the input-embedding table, of which
              one row is read; the LM head is included. For tied embeddings the table is read once,
              as the head, plus the one looked-up row.
  K(ctx)      KV-cache bytes read at context ctx: 2 * layers * kv_heads * head_dim * ctx * bytes.
Activations and the KV write of the new token are left out of both (they are < 0.01 % of the total).

At batch B (B sequences decoded together, one step for all of them) the weights are read once and each sequence's
KV cache once: bytes = W + B * K(ctx) (`batch_step_bytes`). The compute floor is the time of the step's matrix
products at the datasheet's dense bf16 peak: 2 * matmul parameters * B FLOPs (`compute_floor_ms`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

BYTES_PER_ELEMENT = {"bf16": 2, "fp16": 2, "fp32": 4}
BYTE_CONVENTIONS = ("W_all", "W_streamed")
HEAD_QUANTISED = frozenset({"int4-triton-head"})
"""The quantisation paths (quant.paths keys) whose LM head is quantised too: their step reads the head in the path's
own layout (quant.bytes.head_bytes), and their cells count only with the head check too (checked.quantised_checks).
quant.paths' QuantPath.quantises_head reads it."""


def head_dim(config: Mapping) -> int:
    """Per-head dimension: `head_dim` when the config sets it, else hidden_size / num_attention_heads."""
    return int(config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])


def _has_qkv_bias(config: Mapping) -> bool:
    # Qwen2 always puts a bias on q, k and v (and none on o); Llama/Mistral follow `attention_bias`.
    return config["model_type"] == "qwen2" or bool(config.get("attention_bias", False))


@dataclass(frozen=True)
class ParamCount:
    """Parameter counts of a decoder-only GQA transformer, by part."""

    embedding: int
    attention: int
    mlp: int
    norms: int
    lm_head: int

    @property
    def total(self) -> int:
        return self.embedding + self.attention + self.mlp + self.norms + self.lm_head


def param_count(config: Mapping) -> ParamCount:
    """Parameters of a Llama/Mistral/Qwen2-style model, from the config alone."""
    h, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    n_heads, n_kv, vocab = config["num_attention_heads"], config["num_key_value_heads"], config["vocab_size"]
    d = head_dim(config)
    q_out, kv_out = n_heads * d, n_kv * d
    attn = h * q_out + 2 * h * kv_out + q_out * h
    if _has_qkv_bias(config):
        attn += q_out + 2 * kv_out
    if config["model_type"] != "qwen2" and config.get("attention_bias", False):
        attn += h  # o_proj bias
    mlp = 3 * h * inter + (2 * inter + h if config.get("mlp_bias", False) else 0)
    tied = bool(config.get("tie_word_embeddings", False))
    return ParamCount(
        embedding=vocab * h,
        attention=layers * attn,
        mlp=layers * mlp,
        norms=layers * 2 * h + h,
        lm_head=0 if tied else vocab * h,
    )


def weight_bytes(config: Mapping, convention: str = "W_all", dtype: str = "bf16") -> int:
    """Weight bytes a decode step is charged under `convention` (see the module docstring)."""
    size = BYTES_PER_ELEMENT[dtype]
    counts = param_count(config)
    if convention == "W_all":
        return counts.total * size
    if convention == "W_streamed":
        one_row = config["hidden_size"]
        if config.get("tie_word_embeddings", False):
            return (counts.total + one_row) * size
        return (counts.total - counts.embedding + one_row) * size
    raise ValueError(f"unknown byte convention {convention!r}; use one of {BYTE_CONVENTIONS}")


PROJECTIONS = {"hf": ("q", "k", "v", "o", "gate", "up", "down"), "fused": ("qkv", "o", "gate_up", "down")}
"""A decoder layer's matrix products in the order a decode step runs them: HF's modules one by one, and the lean
decoder's (decodegap.harness.lean) with q/k/v and gate/up fused into one product each. The LM head (`lm_head`) follows the
last layer."""


def kv_bytes(config: Mapping, ctx: int, dtype: str = "bf16") -> int:
    """KV-cache bytes read at context `ctx`: 2 (K and V) * layers * kv_heads * head_dim * ctx * bytes."""
    return (
        2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim(config) * int(ctx)
        * BYTES_PER_ELEMENT[dtype]
    )


def step_bytes(config: Mapping, ctx: int, convention: str = "W_all", dtype: str = "bf16") -> int:
    """W + K(ctx): the bytes one decode step must move at context `ctx`."""
    return weight_bytes(config, convention, dtype) + kv_bytes(config, ctx, dtype)


def t_floor_ms(step_bytes: float, bandwidth_gbps: float) -> float:
    """Time to move `step_bytes` at `bandwidth_gbps` (1e9 bytes/s), in milliseconds."""
    return step_bytes / (bandwidth_gbps * 1e9) * 1e3


def r_floor(t_floor: float, t_obs: float) -> float:
    """R_floor = t_floor / t_obs: 1.0 is perfect use of the bandwidth."""
    return t_floor / t_obs


def batch_step_bytes(config: Mapping, ctx: int, batch: int, convention: str = "W_all", dtype: str = "bf16") -> int:
    """W + batch * K(ctx): the bytes one decode step of `batch` sequences at context `ctx` each must move (the
    weights once, every sequence's KV cache once)."""
    if int(batch) < 1:
        raise ValueError(f"batch must be a whole number of sequences >= 1, got {batch!r}")
    return weight_bytes(config, convention, dtype) + int(batch) * kv_bytes(config, ctx, dtype)


def matmul_params(config: Mapping) -> int:
    """Parameters that multiply a token's activations in one decode step: every attention and MLP weight (their
    biases counted as weights, < 0.01 % of them) and the LM head (vocab x hidden; the tied embedding table when
    the head is tied). The input-embedding lookup and the norms do no matrix product and are left out."""
    c = param_count(config)
    return c.attention + c.mlp + config["vocab_size"] * config["hidden_size"]


def step_flops(config: Mapping, batch: int) -> int:
    """2 * matmul_params * batch: the multiply-adds of the step's weight products for `batch` sequences. Left out:
    attention's own products (scores and values, 4 * layers * heads * head_dim * ctx per sequence), softmax, norms
    and activations."""
    return 2 * matmul_params(config) * int(batch)


def compute_floor_ms(config: Mapping, batch: int, tflops: float) -> float:
    """The step's compute floor in ms: step_flops at `tflops` (the datasheet's dense bf16 TFLOP/s, 1e12 FLOP/s).
    It assumes the matrix units run at their peak at these thin shapes (B rows), which they do not at small B:
    a floor, not an estimate."""
    return step_flops(config, batch) / (float(tflops) * 1e12) * 1e3


def tokens_per_s_per_stream(step_ms: float) -> float:
    """Tokens per second one sequence receives: one token per step."""
    return 1e3 / step_ms


def tokens_per_s_aggregate(step_ms: float, batch: int) -> float:
    """Tokens per second over all `batch` sequences of the step: batch tokens per step."""
    return int(batch) * 1e3 / step_ms
