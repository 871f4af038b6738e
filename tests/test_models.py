"""Model registry and building: published config numbers, random bf16 weights, seeds, local checkpoints."""

from __future__ import annotations

import json

import pytest
import torch

from decodegap.harness import models

TINY = ("llama-tiny", "qwen2-tiny", "mistral-tiny")
QWEN_FAMILY = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-14b", "qwen2.5-32b")  # tests/test_where_the_thesis_ends.py
MEGAKERNEL_CELL = ("llama-3.2-1b",)  # notebook 06's cell of the public megakernel study

# data/README.md, "key numbers": hidden, intermediate, layers, heads, KV heads, vocab (all untied)
PUBLISHED = {
    "qwen2.5-7b": (3584, 18944, 28, 28, 4, 152064),
    "mistral-7b-v0.3": (4096, 14336, 32, 32, 8, 32768),
    "llama-3.1-8b": (4096, 14336, 32, 32, 8, 128256),
}


def test_registry_keys():
    assert models.model_keys() == sorted(list(PUBLISHED) + list(TINY) + list(QWEN_FAMILY) + list(MEGAKERNEL_CELL))


def test_llama_3_2_1b_has_its_published_size_and_ties_its_embeddings():
    """Llama-3.2-1B: 1,235,814,400 parameters counted by hand from its config (the tied embedding once): embedding
    128256 x 2048; per layer q 2048x2048, k and v 2048x512 (8 kv heads x head_dim 64), o 2048x2048, gate, up and
    down 2048x8192 each, two norms of 2048; 16 layers; the final norm 2048; no separate LM head."""
    spec = models.load_spec("llama-3.2-1b")
    h, i, kv = 2048, 8192, 8 * 64
    by_hand = 128256 * h + 16 * (2 * h * h + 2 * h * kv + 3 * h * i + 2 * h) + h
    with torch.device("meta"):
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_config(models.hf_config(spec))
    assert spec.config["tie_word_embeddings"] is True and model.config.tie_word_embeddings
    assert sum(p.numel() for p in model.parameters()) == by_hand == 1_235_814_400


def test_unknown_model_lists_known_keys_and_how_to_add_one():
    with pytest.raises(models.UnknownModelError) as err:
        models.load_spec("gpt-5")
    msg = str(err.value)
    assert "'gpt-5'" in msg
    for key in list(PUBLISHED) + list(TINY):
        assert key in msg
    assert "gpt-5.json" in msg and "config" in msg  # where to put a new one
    assert isinstance(err.value, KeyError)


@pytest.mark.parametrize("key", sorted(PUBLISHED))
def test_real_configs_have_the_published_numbers(key):
    spec = models.load_spec(key)
    c = spec.config
    got = (c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"],
           c["num_key_value_heads"], c["vocab_size"])
    assert got == PUBLISHED[key]
    assert c["tie_word_embeddings"] is False
    assert spec.tiny is False and spec.hf_repo and spec.source.startswith("https://huggingface.co/")
    assert "head_dim" not in c  # none of the three published files has one


def test_config_details_from_the_provenance_table():
    llama = models.load_spec("llama-3.1-8b").config
    assert llama["rope_scaling"] == {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}
    mistral = models.load_spec("mistral-7b-v0.3").config
    assert mistral["sliding_window"] is None and mistral["rope_theta"] == 1e6
    qwen = models.load_spec("qwen2.5-7b").config
    assert "rope_scaling" not in qwen
    assert qwen["max_position_embeddings"] == 131072 and qwen["sliding_window"] == 131072
    assert qwen["use_sliding_window"] is False


@pytest.mark.parametrize("tiny, real", [("llama-tiny", "llama-3.1-8b"), ("qwen2-tiny", "qwen2.5-7b"),
                                        ("mistral-tiny", "mistral-7b-v0.3")])
def test_tiny_configs_change_only_the_dimensions(tiny, real):
    t, r = models.load_spec(tiny).config, models.load_spec(real).config
    changed = {k for k in set(t) | set(r) if t.get(k) != r.get(k)}
    dims = {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "vocab_size", "max_position_embeddings", "bos_token_id", "eos_token_id"}
    assert changed <= dims, changed - dims
    assert (t["hidden_size"], t["intermediate_size"], t["num_hidden_layers"], t["num_attention_heads"],
            t["num_key_value_heads"], t["vocab_size"]) == (64, 128, 2, 4, 2, 256)
    assert models.load_spec(tiny).tiny is True


@pytest.fixture(scope="module")
def built():
    return {key: models.build_model(models.load_spec(key), device="cpu") for key in TINY}


@pytest.mark.parametrize("key", TINY)
def test_build_model_gives_random_bf16_weights(built, key):
    model = built[key]
    assert not model.training
    assert model.config.model_type == models.load_spec(key).model_type
    params = dict(model.named_parameters())
    norms = [n for n in params if "norm" in n]
    assert len(norms) == 2 * 2 + 1  # two per layer and the final one
    for name, p in params.items():
        assert p.dtype == torch.bfloat16, name
        assert p.device.type == "cpu", name
        x = p.detach().float()
        if name in norms:
            assert torch.all(x == 1.0), name
            continue
        assert torch.count_nonzero(x) > 0.99 * x.numel(), name  # random normal, never empty or zero
        assert abs(float(x.mean())) < 0.01, name
        if x.numel() >= 4096:  # every weight matrix: std within a few percent of initializer_range 0.02
            assert 0.018 < float(x.std()) < 0.022, (name, float(x.std()))
        else:  # biases (Qwen2's q/k/v), 32 or 64 values
            assert 0.01 < float(x.std()) < 0.03, (name, float(x.std()))
    if key == "qwen2-tiny":
        assert "model.layers.0.self_attn.q_proj.bias" in params
        assert "model.layers.0.self_attn.o_proj.bias" not in params


def test_same_seed_same_weights_other_seed_other_weights():
    spec = models.load_spec("llama-tiny")
    a = models.build_model(spec, device="cpu", seed=0)
    b = models.build_model(spec, device="cpu", seed=0)
    c = models.build_model(spec, device="cpu", seed=1)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    w = "model.layers.1.mlp.down_proj.weight"
    assert not torch.equal(sa[w], sc[w])
    assert not torch.equal(sa["lm_head.weight"], sc["lm_head.weight"])


def test_other_dtype():
    model = models.build_model(models.load_spec("mistral-tiny"), device="cpu", dtype="fp32")
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_hf_config_carries_the_fields():
    cfg = models.hf_config(models.load_spec("qwen2-tiny"), attn="eager")
    assert (cfg.hidden_size, cfg.num_key_value_heads, cfg.vocab_size) == (64, 2, 256)
    assert cfg._attn_implementation == "eager"


def test_checkpoint_dir_without_config_raises(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="config.json"):
        models.build_model(models.load_spec("llama-tiny"), device="cpu", checkpoint_dir=tmp_path)


def test_load_a_real_checkpoint_from_a_local_directory(tmp_path):
    spec = models.load_spec("llama-tiny")
    saved = models.build_model(spec, device="cpu", seed=3)
    saved.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["hidden_size"] == 64
    loaded = models.build_model(spec, device="cpu", checkpoint_dir=tmp_path)
    w = "model.layers.0.self_attn.k_proj.weight"
    assert loaded.state_dict()[w].dtype == torch.bfloat16
    assert torch.equal(loaded.state_dict()[w], saved.state_dict()[w])
    # the seed-0 random build differs: the weights really came from the folder
    assert not torch.equal(loaded.state_dict()[w], models.build_model(spec, device="cpu").state_dict()[w])


def test_configs_gives_each_key_once_in_key_order():
    got = models.configs(["llama-3.1-8b", "qwen2.5-7b", "llama-3.1-8b"])
    assert list(got) == ["llama-3.1-8b", "qwen2.5-7b"]
    assert got["llama-3.1-8b"]["hidden_size"] == 4096 and got["qwen2.5-7b"]["hidden_size"] == 3584
