"""Byte accounting by hand: published parameter counts, W_all / W_streamed / K(ctx) written out."""

from __future__ import annotations

import dataclasses

import pytest

from decodegap import accounting
from decodegap.harness import models

REAL = ("llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.3")
TINY = ("llama-tiny", "qwen2-tiny", "mistral-tiny")


def config(key):
    return models.load_spec(key).config


# --- parameter counts -------------------------------------------------------------------------------------

@pytest.mark.parametrize("key, published", [
    ("llama-3.1-8b", 8_030_261_248),
    ("qwen2.5-7b", 7_615_616_512),
    ("mistral-7b-v0.3", 7_248_023_552),
])
def test_param_count_equals_the_published_count(key, published):
    assert accounting.param_count(config(key)).total == published


def test_llama_param_count_by_part_written_out():
    # Llama-3.1-8B: hidden 4096, intermediate 14336, 32 layers, 32 heads, 8 KV heads, head_dim 128, vocab 128256.
    c = accounting.param_count(config("llama-3.1-8b"))
    q = o = 4096 * 4096                     # 16,777,216 each
    k = v = 4096 * (8 * 128)                # 4,194,304 each
    assert c.attention == 32 * (q + k + v + o) == 32 * 41_943_040 == 1_342_177_280
    assert c.mlp == 32 * 3 * 4096 * 14336 == 32 * 176_160_768 == 5_637_144_576
    assert c.norms == 32 * 2 * 4096 + 4096 == 266_240
    assert c.embedding == c.lm_head == 128256 * 4096 == 525_336_576
    assert 1_342_177_280 + 5_637_144_576 + 266_240 + 2 * 525_336_576 == 8_030_261_248


def test_qwen_param_count_includes_the_qkv_bias():
    # Qwen2.5-7B: hidden 3584, intermediate 18944, 28 layers, 28 heads, 4 KV heads, head_dim 128, vocab 152064.
    c = accounting.param_count(config("qwen2.5-7b"))
    per_layer_attn = 3584 * 3584 * 2 + 2 * 3584 * 512 + (3584 + 2 * 512)  # q, o, k, v weights + q/k/v bias
    assert per_layer_attn == 29_364_736
    assert c.attention == 28 * 29_364_736
    assert c.mlp == 28 * 3 * 3584 * 18944
    assert c.embedding == c.lm_head == 152064 * 3584 == 544_997_376


@pytest.mark.parametrize("key, hand", [
    # per layer: q 64*64 + k,v 2*64*32 + o 64*64 = 12,288; mlp 3*64*128 = 24,576; norms 2*64 = 128
    # total = 2 layers * 36,992 + embedding 256*64 + head 256*64 + final norm 64
    ("llama-tiny", 2 * 36_992 + 2 * 16_384 + 64),
    ("mistral-tiny", 2 * 36_992 + 2 * 16_384 + 64),
    ("qwen2-tiny", 2 * (36_992 + 64 + 2 * 32) + 2 * 16_384 + 64),  # + q/k/v bias per layer
])
def test_tiny_param_counts_by_hand(key, hand):
    assert accounting.param_count(config(key)).total == hand


# --- weight bytes -------------------------------------------------------------------------------------

@pytest.mark.parametrize("key, params", [
    ("llama-3.1-8b", 8_030_261_248), ("qwen2.5-7b", 7_615_616_512), ("mistral-7b-v0.3", 7_248_023_552)])
def test_w_all_is_two_bytes_per_parameter(key, params):
    assert accounting.weight_bytes(config(key), "W_all") == 2 * params
    assert accounting.weight_bytes(config(key)) == 2 * params  # W_all, bf16 are the defaults
    assert accounting.weight_bytes(config(key), "W_all", dtype="fp32") == 4 * params


@pytest.mark.parametrize("key, vocab, hidden", [
    ("llama-3.1-8b", 128256, 4096), ("qwen2.5-7b", 152064, 3584), ("mistral-7b-v0.3", 32768, 4096)])
def test_w_streamed_drops_the_embedding_table_but_one_row(key, vocab, hidden):
    w_all = accounting.weight_bytes(config(key), "W_all")
    assert accounting.weight_bytes(config(key), "W_streamed") == w_all - 2 * vocab * hidden + 2 * hidden


def test_w_streamed_llama_written_out():
    # 2 * 8,030,261,248 - 2 * 128,256 * 4,096 + 2 * 4,096
    assert accounting.weight_bytes(config("llama-3.1-8b"), "W_streamed") == 16_060_522_496 - 1_050_673_152 + 8_192
    assert 16_060_522_496 - 1_050_673_152 + 8_192 == 15_009_857_536


def test_tied_embeddings():
    cfg = dict(config("llama-tiny"), tie_word_embeddings=True)
    counts = accounting.param_count(cfg)
    assert counts.lm_head == 0
    assert counts.embedding == 256 * 64
    assert counts.total == 106_816 - 16_384 == 90_432
    assert accounting.weight_bytes(cfg, "W_all") == 2 * 90_432
    # the table is read once (as the head) plus the one looked-up row
    assert accounting.weight_bytes(cfg, "W_streamed") == 2 * (90_432 + 64) == 180_992


def test_bias_options_of_llama_style_configs():
    base = config("llama-tiny")
    # attention_bias: q (64) + k, v (2 * 32) + o (64) biases per layer, 2 layers
    assert accounting.param_count(dict(base, attention_bias=True)).total == 106_816 + 2 * (64 + 64 + 64)
    # mlp_bias: gate, up (2 * 128) + down (64) per layer
    assert accounting.param_count(dict(base, mlp_bias=True)).total == 106_816 + 2 * (2 * 128 + 64)


def test_bad_convention_raises_value_error():
    with pytest.raises(ValueError, match="W_all"):
        accounting.weight_bytes(config("llama-tiny"), "W_everything")
    with pytest.raises(ValueError):
        accounting.step_bytes(config("llama-tiny"), 16, "w_all")


# --- KV bytes and step bytes ---------------------------------------------------------------------------

def test_kv_bytes_written_out():
    # 2 (K, V) * layers * kv_heads * head_dim * ctx * 2 bytes
    assert accounting.kv_bytes(config("llama-3.1-8b"), 2048) == 2 * 32 * 8 * 128 * 2048 * 2 == 268_435_456
    assert accounting.kv_bytes(config("mistral-7b-v0.3"), 2048) == 2 * 32 * 8 * 128 * 2048 * 2
    assert accounting.kv_bytes(config("qwen2.5-7b"), 2048) == 2 * 28 * 4 * 128 * 2048 * 2 == 117_440_512
    assert accounting.kv_bytes(config("llama-3.1-8b"), 16384) == 8 * 268_435_456
    assert accounting.kv_bytes(config("llama-tiny"), 16) == 2 * 2 * 2 * 16 * 16 * 2 == 4_096
    assert accounting.kv_bytes(config("llama-3.1-8b"), 2048, dtype="fp32") == 2 * 268_435_456


def test_head_dim():
    assert accounting.head_dim(config("llama-3.1-8b")) == 4096 // 32 == 128
    assert accounting.head_dim(config("qwen2.5-7b")) == 3584 // 28 == 128
    assert accounting.head_dim(config("llama-tiny")) == 64 // 4 == 16
    assert accounting.head_dim(dict(config("llama-tiny"), head_dim=32)) == 32


def test_step_bytes_is_weights_plus_kv():
    assert accounting.step_bytes(config("llama-3.1-8b"), 2048) == 16_060_522_496 + 268_435_456 == 16_328_957_952
    assert accounting.step_bytes(config("llama-3.1-8b"), 2048, "W_streamed") == 15_009_857_536 + 268_435_456


# --- the count agrees with the model transformers builds ----------------------------------------------

def _numel(model) -> int:
    return sum(p.numel() for p in model.parameters())  # shared (tied) tensors are listed once


@pytest.mark.parametrize("key", TINY)
def test_param_count_equals_the_built_model(key):
    spec = models.load_spec(key)
    model = models.build_model(spec, device="cpu")
    assert _numel(model) == accounting.param_count(spec.config).total


@pytest.mark.parametrize("change", [
    {"tie_word_embeddings": True}, {"attention_bias": True}, {"mlp_bias": True}])
def test_param_count_equals_the_built_model_for_config_variants(change):
    spec = models.load_spec("llama-tiny")
    spec = dataclasses.replace(spec, config=dict(spec.config, **change))
    model = models.build_model(spec, device="cpu")
    assert _numel(model) == accounting.param_count(spec.config).total
    if change.get("tie_word_embeddings"):
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
        assert _numel(model) == 90_432



# --- floors per batch ------------------------------------------------------------------------------------
# llama-tiny: hidden 64, 2 layers, 4 heads of head_dim 16, 2 KV heads, vocab 256, head untied.
# W_all = 2 bytes * 106,816 parameters = 213,632; K(ctx) = 2 (K, V) * 2 layers * 2 KV heads * 16 * ctx * 2 bytes
# = 256 bytes per token of context.

def test_batch_bytes_are_weights_once_plus_one_kv_cache_per_sequence():
    cfg = config("llama-tiny")
    assert accounting.kv_bytes(cfg, 100) == 2 * 2 * 2 * 16 * 100 * 2 == 25_600
    assert accounting.batch_step_bytes(cfg, 100, 1) == 213_632 + 25_600 == 239_232
    assert accounting.batch_step_bytes(cfg, 100, 4) == 213_632 + 4 * 25_600 == 316_032
    assert accounting.batch_step_bytes(cfg, 100, 1) == accounting.step_bytes(cfg, 100)
    with pytest.raises(ValueError, match="batch must be"):
        accounting.batch_step_bytes(cfg, 100, 0)


def test_compute_floor_counts_the_weight_products_by_hand():
    cfg = config("llama-tiny")
    # per layer q, o 64*64 + k, v 2*64*32 = 12,288; mlp 3*64*128 = 24,576; the head 256*64; no embedding, no norms
    assert accounting.matmul_params(cfg) == 2 * 12_288 + 2 * 24_576 + 16_384 == 90_112
    assert accounting.step_flops(cfg, 4) == 2 * 90_112 * 4 == 720_896
    assert accounting.compute_floor_ms(cfg, 4, tflops=1.0) == pytest.approx(720_896 / 1e12 * 1e3)
    tied = dict(cfg, tie_word_embeddings=True)  # the tied table still multiplies as the head
    assert accounting.matmul_params(tied) == 90_112


def test_qwen_compute_floor_at_batch_64_on_the_h200_is_below_its_bandwidth_floor():
    cfg = config("qwen2.5-7b")
    # matmul parameters: 7,615,616,512 - embedding 544,997,376 - norms 28 * 2 * 3584 + 3584 (204,288 in all)
    assert accounting.matmul_params(cfg) == 7_615_616_512 - 544_997_376 - 204_288 == 7_070_414_848
    compute = accounting.compute_floor_ms(cfg, 64, tflops=989.5)
    assert compute == pytest.approx(2 * 7_070_414_848 * 64 / 989.5e12 * 1e3)  # 0.915 ms
    bandwidth = accounting.t_floor_ms(accounting.batch_step_bytes(cfg, 2048, 64), 4800)
    assert compute < bandwidth


def test_tokens_per_second_per_stream_and_aggregate():
    assert accounting.tokens_per_s_per_stream(20.0) == 50.0
    assert accounting.tokens_per_s_aggregate(20.0, 8) == 400.0
