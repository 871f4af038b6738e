"""Quantisation paths on the CPU: the byte model by hand, the registry and its unavailable reasons, every
path that runs here against its dequantised weight on real shapes, the swap into a tiny HF model, the
per-layer and whole-step recorders, the paper table's arithmetic, and notebook 04 in replay mode."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
import torch

from decodegap import accounting, hardware, notebooks, paths, published, records
from decodegap.analysis import quantisation as quant_report
from decodegap.experiments import quantisation as quant_experiment
from decodegap.harness import decode, models, runs, sweep
from decodegap.quant import formats as quant_formats, paths as quant
from decodegap.analysis import quant_checks
from decodegap.quant import bytes as quant_bytes
from decodegap.quant import layers as quant_layers
from decodegap import compare

from decodegap.quant import loaders as quant_loaders
from decodegap.quant import fuse as quant_fuse

CONFIGS = {key: models.load_spec(key).config for key in ("qwen2.5-7b", "mistral-7b-v0.3", "llama-3.1-8b")}
CUDA_ONLY = {"bnb-nf4": "bitsandbytes", "awq-marlin": "autoawq", "awq-triton": "autoawq",
             "gptq-exllamav2": "exllamav2"}
CPU_INT4 = all(hasattr(torch.ops.aten, op) for op in ("_convert_weight_to_int4pack_for_cpu",
                                                       "_weight_int4pack_mm_for_cpu"))


# ------------------------------------------------------------------------------------------ byte model

def test_byte_model_of_llama_3_1_8b_by_hand():
    cfg = CONFIGS["llama-3.1-8b"]
    H, I, L, V, G = 4096, 14336, 32, 128256, 128
    # q, o: 4096x4096; k, v: 4096x1024 (8 kv heads x 128); gate, up: 4096x14336; down: 14336x4096
    kn = L * (2 * H * H + 2 * H * 1024 + 3 * H * I)
    assert kn == 6_979_321_856
    norms, row, head = 2 * H * (2 * L + 1), 2 * H, 2 * V * H  # bf16 RMSNorms, one embedding row, bf16 LM head
    unquantised = norms + row + head
    assert unquantised == 532_480 + 8_192 + 1_050_673_152
    bf16 = 2 * kn + unquantised
    assert quant_bytes.streamed_weight_bytes(cfg, "bf16") == bf16 == 15_009_857_536
    assert bf16 == accounting.weight_bytes(cfg, "W_streamed")  # the roofline's own convention
    packed = kn // 2  # two int4 codes per byte
    gptq = packed + 2 * kn // G + 4 * kn // (8 * G) + unquantised  # + fp16 scales [K/G,N] + int32 qzeros [K/G,N/8]
    assert quant_bytes.streamed_weight_bytes(cfg, "gptq-exllamav2") == gptq == 4_677_189_632
    assert quant_bytes.streamed_weight_bytes(cfg, "awq-triton") == gptq  # same three tensors, other layout
    assert quant_bytes.streamed_weight_bytes(cfg, "awq-marlin") == packed + 2 * kn // G + unquantised == 4_649_926_656
    tinygemm = packed + 2 * 2 * kn // G + unquantised  # scales_and_zeros bf16 [K/G, N, 2]
    assert quant_bytes.streamed_weight_bytes(cfg, "int4-tinygemm") == tinygemm == 4_758_978_560
    nf4 = packed + 4 * kn // 64 + 4 * 16 * 7 * L + unquantised  # fp32 absmax per 64 weights + 16-entry fp32 code
    assert quant_bytes.streamed_weight_bytes(cfg, "bnb-nf4") == nf4 == 4_977_096_704
    kv = 2 * L * 8 * 128 * 2048 * 2
    assert quant_bytes.step_bytes(cfg, "gptq-exllamav2", 2048) == gptq + kv == quant_bytes.streamed_weight_bytes(cfg, "gptq-exllamav2", ctx=2048)
    terms = quant_bytes.byte_terms(cfg, "gptq-exllamav2")
    assert terms["linear_packed"] == packed and terms["linear_zeros"] == kn // (2 * G) and terms["lm_head"] == head
    assert quant_bytes.t_floor_ms(cfg, "gptq-exllamav2", 2048, 300) == pytest.approx((gptq + kv) / 300e9 * 1e3)


@pytest.mark.parametrize("model", sorted(CONFIGS))
def test_byte_model_bf16_is_w_streamed_and_int4_streams_about_3x_less(model):
    cfg = CONFIGS[model]
    bf16 = quant_bytes.streamed_weight_bytes(cfg, "bf16")
    assert bf16 == accounting.weight_bytes(cfg, "W_streamed")
    for key in ("bnb-nf4", "awq-marlin", "awq-triton", "gptq-exllamav2", "int4-tinygemm"):
        ratio = bf16 / quant_bytes.streamed_weight_bytes(cfg, key)
        assert 2.9 < ratio < 3.7, (key, ratio)  # not 4x: the LM head stays bf16 and the metadata costs
    # the decoder linears of the byte model are every attention and MLP parameter of the accounting
    counts = accounting.param_count(cfg)
    per_layer = sum(k * n + (n if b else 0) for _, k, n, b in quant_bytes.decoder_linears(cfg))
    assert per_layer * cfg["num_hidden_layers"] == counts.attention + counts.mlp


def test_qwen_biases_are_counted_in_every_path():
    cfg = CONFIGS["qwen2.5-7b"]
    bias = 2 * 28 * (3584 + 512 + 512)  # q, k, v biases (bf16/fp16), 28 layers
    for key in quant.PATHS:
        assert quant_bytes.byte_terms(cfg, key)["linear_bias"] == bias
    assert quant_bytes.byte_terms(CONFIGS["llama-3.1-8b"], "bf16")["linear_bias"] == 0


def test_byte_model_refuses_a_group_size_that_does_not_divide():
    with pytest.raises(ValueError, match="not a multiple of group size 100"):
        quant_bytes.byte_terms(CONFIGS["llama-3.1-8b"], "gptq-exllamav2", group_size=100)
    with pytest.raises(KeyError, match="unknown quantisation path 'int3'"):
        quant_bytes.byte_terms(CONFIGS["llama-3.1-8b"], "int3")


# ---------------------------------------------------------------------------------- registry, reasons

def test_registry_holds_every_path_of_the_issue():
    assert set(quant.PATHS) == {"bf16", "bnb-nf4", "awq-marlin", "awq-triton", "gptq-exllamav2", "int4-tinygemm",
                                "int4-triton", "int4-triton-head"}
    assert quant.ALIASES["awq"] == ("awq-marlin", "awq-triton")  # Marlin first, Triton where it is missing
    heads = {k: p.lm_head for k, p in quant.PATHS.items() if not p.lm_head.startswith("bf16")}
    assert heads == {"int4-triton-head": "int4 (the path's format, G=128)"}  # notebook 06's lever: the head too
    assert {k for k, p in quant.PATHS.items() if p.quantises_head} == set(heads)
    # the published keys are registry keys (the table puts them side by side)
    pub = published.select(published.load(), "quantisation", "step_ms", gpu="l4")
    assert set(pub["quant"]) <= set(quant.PATHS)


@pytest.mark.parametrize("key", sorted(CUDA_ONLY))
def test_cuda_only_paths_are_unavailable_on_the_cpu_naming_device_and_package(key):
    reason = quant.unavailable_reason(key, "cpu")
    assert "needs a CUDA device" in reason
    if not hardware._version(CUDA_ONLY[key]):
        assert CUDA_ONLY[key] in reason
    with pytest.raises(quant_loaders.QuantUnavailable, match="needs a CUDA device"):
        quant.build_linear(key, 256, 256, device="cpu")
    with pytest.raises(quant_loaders.QuantUnavailable, match=key):
        quant.check_linear(key, 256, 256, device="cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the reasons of a machine without the packages")
def test_missing_packages_are_named_even_for_a_cuda_device():
    for key, pkg in CUDA_ONLY.items():
        if not hardware._version(pkg):
            assert f"package {pkg} not installed" in quant.unavailable_reason(key, "cuda")
    awq = quant.unavailable_reason("awq", "cpu")
    assert "awq-marlin:" in awq and "awq-triton:" in awq and "marlin_cuda" in awq
    assert quant.resolve("awq", "cpu") == "awq"  # no member runs here: the alias stays, unavailable
    assert quant.resolve("int4-tinygemm", "cpu") == "int4-tinygemm"
    with pytest.raises(KeyError, match="unknown quantisation path"):
        quant.resolve("int3", "cpu")


def test_cpu_paths_are_available_where_this_torch_has_the_ops():
    assert quant.unavailable_reason("bf16", "cpu") is None
    reason = quant.unavailable_reason("int4-tinygemm", "cpu")
    assert (reason is None) == CPU_INT4
    if not CPU_INT4:
        assert "_for_cpu" in reason


# ----------------------------------------------------------------------------- correctness on the CPU

REAL_SHAPES = [("llama-3.1-8b", "q_proj"), ("llama-3.1-8b", "k_proj"), ("qwen2.5-7b", "k_proj"),
               ("qwen2.5-7b", "o_proj")]


@pytest.mark.parametrize("model,layer", REAL_SHAPES)
@pytest.mark.parametrize("key", ["bf16", "int4-tinygemm", "gptq-exllamav2", "awq-triton"])
@pytest.mark.slow
def test_paths_match_their_dequantised_weight_on_real_shapes(key, model, layer):
    """The CPU kernels (bf16, tinygemm) and the reference product of the CUDA-only formats, at a decode row and
    at prefill rows; the dequantised weight is the stand-in bf16 weight within 4-bit rounding."""
    if key == "int4-tinygemm" and not CPU_INT4:
        pytest.skip("this torch has no CPU int4 ops")
    reference = key in CUDA_ONLY
    k, n = quant.layer_shapes(CONFIGS[model])[layer]
    errors = quant.check_linear(key, k, n, device="cpu", rows=(1, 5), reference=reference)
    assert set(errors) == {1, 5} and max(errors.values()) < 1e-2
    mod = quant.build_linear(key, k, n, device="cpu", seed=3, reference=reference)
    assert mod(torch.randn(1, 1, k, dtype=torch.bfloat16)).shape == (1, 1, n)
    w = mod.dequantised_weight()
    assert w.dtype == torch.bfloat16 and w.shape == (n, k)
    gen = torch.Generator().manual_seed(3)
    source = torch.empty(n, k, dtype=torch.bfloat16).normal_(0.0, quant.WEIGHT_STD, generator=gen)
    if key == "bf16":
        assert torch.equal(w, source)
    else:  # per-group RTN of the given weight: within half a step of it, and no offset (zero mean)
        step = (source.float().reshape(n, -1, 128).amax(-1) - source.float().reshape(n, -1, 128).amin(-1)) / 15
        w32 = mod.dequantised_weight(torch.float32)
        err = (w32 - source.float()).abs().reshape(n, -1, 128)
        assert bool((err <= step[..., None] * 0.52).all())  # half a step, and the scale's rounding
        assert abs(float(w32.mean())) < 1e-4 < float(w32.std())


@pytest.mark.skipif(not CPU_INT4, reason="this torch has no CPU int4 ops")
def test_tinygemm_layout_on_the_cpu():
    mod = quant.build_linear("int4-tinygemm", 512, 256, device="cpu", group_size=128)
    assert mod.scales_and_zeros.shape == (512 // 128, 256, 2) and mod.scales_and_zeros.dtype == torch.bfloat16
    assert mod.packed.numel() * mod.packed.element_size() == 512 * 256 // 2  # two codes per byte
    with pytest.raises(quant_loaders.QuantUnavailable, match="not a multiple of group size 128"):
        quant.build_linear("int4-tinygemm", 64, 64, device="cpu")
    with pytest.raises(quant_loaders.QuantUnavailable, match="out_features % 16"):
        quant.build_linear("int4-tinygemm", 128, 24, device="cpu", group_size=32)


@pytest.mark.skipif(not CPU_INT4, reason="this torch has no CPU int4 ops")
def test_a_wrong_reference_fails_the_layer_check(monkeypatch):
    def without_zero(self):  # a plausible bug: the float zero forgotten
        s = self.scales_and_zeros[..., 0].t().float()
        return (self.codes().float() - 8) * quant_formats.grouped(s, self.group_size)
    monkeypatch.setattr(quant_layers.TinyGemmLinear, "_dequantised", without_zero)
    errors = quant.check_linear("int4-tinygemm", 1024, 256, device="cpu", rows=(1, 3))
    assert not any(quant.passes(e, quant.QUANT_TOL) for e in errors.values())


@pytest.mark.skipif(not CPU_INT4, reason="this torch has no CPU int4 ops")
def test_tinygemm_codes_read_back_through_the_kernel_are_the_quantised_codes():
    for n in (16, 48, 64):  # a CPU packing block of 32 or 64 rows, and tails of it
        w = torch.randn(n, 128) * 0.02
        mod = quant.build_linear("int4-tinygemm", 128, n, device="cpu", group_size=32, weight=w)
        q, _, _ = quant_formats.rtn_float_zero(w, 32)
        assert torch.equal(mod.codes(rows=48), q)  # 48: the identity read in uneven chunks


def _parts(shapes, K=64, G=32, bias=False, seed=0, key="int4-tinygemm"):
    gen = torch.Generator().manual_seed(seed)
    return [quant.build_linear(key, K, n, device="cpu", seed=seed + i, group_size=G, reference=key in CUDA_ONLY,
                               bias=torch.randn(n, generator=gen) if bias else None) for i, n in enumerate(shapes)]


@pytest.mark.parametrize("key", ["int4-tinygemm", "gptq-exllamav2", "awq-triton"])
@pytest.mark.parametrize("shapes,bias", [((64, 32, 32), True), ((64, 32, 32), False), ((128, 128), False),
                                         ((16, 48, 96), True)])
def test_fused_layer_is_its_parts_concatenated(key, shapes, bias):
    """q/k/v (Qwen2: with biases) and gate/up of the tiny configs, and parts that are no whole CPU block:
    the fused layer's output is exactly the parts' outputs side by side, decode row and prefill rows."""
    if key == "int4-tinygemm" and not CPU_INT4:
        pytest.skip("this torch has no CPU int4 ops")
    parts = _parts(shapes, bias=bias, key=key)
    fused = quant_fuse.fuse_linears(parts)
    assert type(fused) is type(parts[0]) and (fused.in_features, fused.out_features) == (64, sum(shapes))
    assert (fused.bias is not None) == bias
    x = torch.randn(1, 5, 64).bfloat16()
    with torch.no_grad():
        for rows in (x[:, :1], x):
            assert torch.equal(fused(rows), torch.cat([p(rows) for p in parts], dim=-1))
    # the weight it applies, read back from its own packed tensors, is the parts' weights
    assert torch.equal(fused.dequantised_weight(), torch.cat([p.dequantised_weight() for p in parts]))


@pytest.mark.skipif(not CPU_INT4, reason="this torch has no CPU int4 ops")
def test_parts_fused_in_the_wrong_order_or_plainly_concatenated_are_detected():
    q, k, v = _parts((64, 32, 32))
    x = torch.randn(1, 1, 64).bfloat16()
    with torch.no_grad():
        ref = torch.cat([q(x), k(x), v(x)], dim=-1)
        assert torch.equal(quant_fuse.fuse_linears([q, k, v])(x), ref)
        assert compare.max_relative_error(quant_fuse.fuse_linears([k, q, v])(x).float(), ref.float()) > 0.5
        # the CPU packing interleaves rows within blocks of 32 or 64: a 16-row part then a 48-row one do not
        # concatenate as packed tensors (why fuse_linears packs the codes again on a CPU)
        a, b = _parts((16, 48))
        naive = torch.ops.aten._weight_int4pack_mm_for_cpu(
            x[0], torch.cat([a.packed, b.packed]), 32, torch.cat([a.scales_and_zeros, b.scales_and_zeros], dim=1))
        ref = torch.cat([a(x), b(x)], dim=-1)[0]
    assert compare.max_relative_error(naive.float(), ref.float()) > 0.5


@pytest.mark.skipif(not CPU_INT4, reason="this torch has no CPU int4 ops")
def test_fuse_linears_refuses_other_layers_and_mismatched_parts():
    q, k = _parts((64, 32))
    with pytest.raises(ValueError, match="one path"):
        quant_fuse.fuse_linears([q, quant.build_linear("bf16", 64, 32, device="cpu")])
    with pytest.raises(ValueError, match="one in_features, group size"):
        quant_fuse.fuse_linears([q, quant.build_linear("int4-tinygemm", 64, 32, device="cpu", group_size=64)])
    with pytest.raises(ValueError, match="not nothing"):
        quant_fuse.fuse_linears([])


def test_gptq_and_awq_formats_pack_what_their_kernels_unpack():
    """The GPU kernels cannot run here; their input formats can be checked: GPTQ packs 8 consecutive k of
    one column per int32 and 8 columns (zero - 1) per qzeros int32, AWQ 8 columns per int32 in the order
    0,2,4,6,1,3,5,7; each unpacker reads back what was packed."""
    K, N, G = 256, 64, 128
    w = torch.randn(N, K) * 0.02
    q, z, s = quant_formats.rtn_asymmetric(w, G, torch.float16, zero_min=1)
    qweight, qzeros, scales = quant_formats.gptq_pack(q, z, s, G)
    assert qweight.shape == (K // 8, N) and qzeros.shape == (K // G, N // 8) and scales.shape == (K // G, N)
    assert qweight.dtype == qzeros.dtype == torch.int32 and scales.dtype == torch.float16
    nib = quant_formats.unpack_int32(qweight)  # [K/8, N, 8]
    assert torch.equal(nib.transpose(1, 2).reshape(K, N), q.t().long())
    assert int(nib[0, 5, 3]) == int(q[5, 3])  # k = 8*0 + 3 of column 5 is nibble 3 of qweight[0, 5]
    assert torch.equal(quant_formats.unpack_int32(qzeros).reshape(K // G, N), (z - 1).t().long())
    deq = (q.float() - quant_formats.grouped(z.float(), G)) * quant_formats.grouped(s, G)
    assert torch.equal(quant_formats.gptq_dequantise(qweight, qzeros, scales, G), deq)
    q, z, s = quant_formats.rtn_asymmetric(w, G, torch.float16)
    qweight, qzeros, scales = quant_formats.awq_pack(q, z, s)
    assert qweight.shape == (K, N // 8) and qzeros.shape == (K // G, N // 8)
    nib = quant_formats.unpack_int32(qweight)  # [K, N/8, 8]: nibble i holds column 8c + AWQ_ORDER[i]
    assert int(nib[7, 2, 1]) == int(q[8 * 2 + 2, 7]) and int(nib[7, 2, 4]) == int(q[8 * 2 + 1, 7])
    assert torch.equal(quant_formats.unpack_int32(qzeros)[..., 1], z[2::8].t().long())
    deq = (q.float() - quant_formats.grouped(z.float(), G)) * quant_formats.grouped(s, G)
    assert torch.equal(quant_formats.awq_dequantise(qweight, qzeros, scales, G), deq)


# ------------------------------------------------------------------------------------ the model swap

@pytest.mark.skipif(not CPU_INT4, reason="this torch has no CPU int4 ops")
def test_quantise_model_swaps_every_decoder_linear_of_a_tiny_model_from_its_own_weights():
    spec = models.load_spec("llama-tiny")
    model = models.build_model(spec, device="cpu")
    with pytest.raises(quant_loaders.QuantUnavailable, match="not a multiple of group size 128"):
        quant.quantise_model_(model, "int4-tinygemm", group_size=128)  # tiny dims 64/128 < 128
    model = models.build_model(spec, device="cpu")
    before = model.lm_head.weight.clone()
    down = model.model.layers[1].mlp.down_proj.weight.detach().clone()
    info = quant.quantise_model_(model, "int4-tinygemm")
    assert quant.default_group_size(spec.config) == 64 == info["group_size"]  # largest of 128/64/32 dividing 64, 128
    assert info["layers"] == 7 * spec.config["num_hidden_layers"] and info["path"] == "int4-tinygemm"
    assert info["weights"] == quant.WEIGHTS
    linears = [n for n, m in model.model.layers.named_modules() if isinstance(m, torch.nn.Linear)]
    assert linears == []
    assert isinstance(model.lm_head, torch.nn.Linear) and torch.equal(model.lm_head.weight, before)
    # the quantised layer stands for the model's own weight: per-group RTN of it, within half a step
    q, s, m = quant_formats.rtn_float_zero(down, 64)
    expected = (q.float() - 8) * quant_formats.grouped(s, 64) + quant_formats.grouped(m, 64)
    assert torch.equal(model.model.layers[1].mlp.down_proj.dequantised_weight(torch.float32), expected)
    # the quantised model decodes, and equals the same model with each layer's dequantised weight in bf16
    ids = torch.randint(0, 256, (1, 12))
    with torch.no_grad():
        got = model(ids).logits.float()
        for layer in model.model.layers:
            for name, mod in list(layer.named_modules()):
                if isinstance(mod, quant_layers.QuantLinear):
                    parent = layer.get_submodule(name.rsplit(".", 1)[0])
                    setattr(parent, name.rsplit(".", 1)[1], quant_layers.BF16Linear(mod.dequantised_weight()))
        ref = model(ids).logits.float()
    assert compare.max_relative_error(got, ref) < 0.05
    timing = decode.run_arm(model, "eager", 8, warmup=1, steps=2)
    assert len(timing.step_ms) == 2


def test_quantise_model_with_a_path_that_cannot_run_leaves_the_model_alone():
    model = models.build_model(models.load_spec("qwen2-tiny"), device="cpu")
    with pytest.raises(quant_loaders.QuantUnavailable, match="gptq-exllamav2: needs a CUDA device"):
        quant.quantise_model_(model, "gptq-exllamav2")
    assert isinstance(model.model.layers[0].self_attn.q_proj, torch.nn.Linear)
    assert quant.quantise_model_(model, "bf16")["layers"] == 0  # the baseline swaps nothing


# ------------------------------------------------------------------------------------------ recorders

@pytest.mark.slow
def test_record_quant_layers_writes_ok_and_unavailable_check_rows(data_dir):
    keys = ["int4-tinygemm", "bnb-nf4", "awq"]
    layers = ("k_proj", "down_proj")
    quant_experiment.record_quant_layers("cpu-test", ["llama-tiny"], keys, data_dir, device="cpu", layers=layers,
                                    rows=(1, 16))
    csv = data_dir / "raw" / "cpu-test" / "verify.csv"
    rows = records.read_csv(csv)
    assert len(rows) == len(keys) * len(layers) * 2 and set(rows.check) == {"layer"}
    assert set(rows.quant) == {"int4-tinygemm", "bnb-nf4", "awq"}  # awq unresolvable here: the alias
    assert set(rows.rows) == {1, 16} and (rows.ctx == rows.rows).all() and set(rows.arm) == {"-"}
    body = rows.set_index(["quant", "layer", "rows"])
    assert body.loc[("int4-tinygemm", "k_proj", 16), "status"] == ("ok" if CPU_INT4 else "unavailable")
    assert body.loc[("bnb-nf4", "k_proj", 1), "status"] == "unavailable"
    assert "CUDA" in body.loc[("awq", "k_proj", 1), "reason"]
    assert (rows[rows.status == "ok"].max_rel_err < quant.QUANT_TOL).all()
    env = json.loads((data_dir / "raw" / "cpu-test" / "env.json").read_text())
    assert env[rows.run_id.iloc[0]]["experiment"] == "quant_layers" and "gpu_state_after" in env[rows.run_id.iloc[0]]
    quant_experiment.record_quant_layers("cpu-test", ["llama-tiny"], keys, data_dir, device="cpu", layers=layers,
                                    rows=(1, 16))
    assert len(records.read_csv(csv)) == len(rows)  # resumed: nothing measured twice


@pytest.mark.slow
def test_measure_quant_records_what_cannot_run_instead_of_faking_it(data_dir):
    resolved = quant_experiment.measure("cpu-test", ["llama-tiny"], [16], ["int4-tinygemm", "gptq-exllamav2"],
                                         ["eager"], sessions=1, steps=2, warmup=1, device="cpu", data=data_dir,
                                         layers=False)
    rows = records.read_csv(data_dir / "raw" / "cpu-test" / "decode.csv")
    gptq = rows[rows.quant == "gptq-exllamav2"]
    assert resolved["gptq-exllamav2"] == "gptq-exllamav2"
    assert set(gptq.status) == {"unavailable"} and gptq.reason.str.contains("needs a CUDA device").all()
    int4 = rows[rows.quant == "int4-tinygemm"]
    env = json.loads((data_dir / "raw" / "cpu-test" / "env.json").read_text())
    if not CPU_INT4:
        assert set(int4.status) == {"unavailable"} and int4.reason.str.contains("_for_cpu").all()
    else:  # the session checks the quantised model against its bf16 self, then times it
        assert resolved["int4-tinygemm"] == "int4-tinygemm" and (int4.status == "ok").sum() == 2
        checks = records.read_csv(data_dir / "raw" / "cpu-test" / "verify.csv")
        vs = checks[checks.check == "vs_bf16"]
        assert len(vs) == 1 and vs.iloc[0].status == "ok" and vs.iloc[0].quant == "int4-tinygemm"
        assert 0 < vs.iloc[0].max_rel_err < vs.iloc[0].tol
        run = vs.iloc[0].run_id  # the null and every layer's checks, in the run that timed the cell
        null = checks[(checks.check == "vs_bf16_null") & (checks.run_id == run)]
        assert len(null) == 1 and vs.iloc[0].tol == pytest.approx(compare.MODEL_K_PASS * null.iloc[0].max_rel_err)
        mine = checks[(checks.run_id == run) & checks.check.isin(["layer", "format"])]
        assert set(mine.layer) == set(quant.LAYERS[:-1]) and (mine.status == "ok").all()
        assert set(mine[mine.check == "layer"].rows) == {1, 16} and set(mine[mine.check == "format"].ctx) == {0}
        assert (set(int4[int4.status == "ok"].run_id) == {run})
        assert any(e.get("quant_weights") == quant.WEIGHTS for e in env.values())
    assert any(e.get("experiment") == "decode" for e in env.values())


# ----------------------------------------------------------------------------------------- reporting

def _said(lines, **match):
    """The one finding of `lines` whose values include `match`."""
    hits = [line for line in lines if all(k in line.values and line.values[k] == v for k, v in match.items())]
    assert len(hits) == 1, (match, hits)
    return hits[0]


def _rows(gpu, model, ctx, quant_key, arm, times, session=0):
    base = dict(run_id="r", session=session, gpu=gpu, model=model, ctx=ctx, max_cache_len=ctx + len(times), arm=arm,
                attn="sdpa", quant=quant_key, reason="")
    return [dict(base, step=i, step_ms=t, status="ok") for i, t in enumerate(times)]


def test_paper_table_and_findings_by_hand(data_dir):
    model, ctx = "qwen2.5-7b", 2048
    raw = (_rows("h200", model, ctx, "bf16", "eager", [10.0, 11.0, 12.0])
           + _rows("h200", model, ctx, "bf16", "eager", [14.0, 14.0, 14.0], session=1)
           + _rows("h200", model, ctx, "int4-tinygemm", "eager", [4.0, 5.0, 6.0]))
    rows = pd.DataFrame(raw)
    specs = hardware.specs_table(data_dir)
    cells = quant_report.cells(rows, specs, CONFIGS)
    table = quant_report.paper_table(cells, published.load(), specs, CONFIGS, model, ctx, ["eager"]).set_index("quant")
    assert list(table.index) == [k for k in quant.PATHS if k != "int4-triton-head"]  # notebook 04's paths
    assert list(table.index) == list(quant_report.NOTEBOOK_PATHS)
    assert table.loc["bf16", "h200 eager ms"] == 12.5  # median of the session medians 11 and 14
    assert table.loc["int4-tinygemm", "h200 eager speed-up"] == pytest.approx(12.5 / 5.0)
    floor = quant_bytes.step_bytes(CONFIGS[model], "int4-tinygemm", ctx) / 4800e9 * 1e3
    assert table.loc["int4-tinygemm", "h200 floor ms"] == pytest.approx(floor)
    assert table.loc["int4-tinygemm", "h200 eager R_floor"] == pytest.approx(floor / 5.0)
    assert table.loc["bf16", "l4 ms (published)"] == 62.32 and table.loc["gptq-exllamav2", "l4 ms (published)"] == 17.36
    assert table.loc["gptq-exllamav2", "l4 speed-up (published)"] == pytest.approx(62.32 / 17.36)
    l4_floor = quant_bytes.step_bytes(CONFIGS[model], "gptq-exllamav2", ctx) / 300e9 * 1e3
    assert table.loc["gptq-exllamav2", "l4 R_floor (our floor, published ms)"] == pytest.approx(l4_floor / 17.36)
    assert table.loc["bnb-nf4", "h200 status"] == "eager: no rows"
    assert table.loc["bf16", "h200 eager sessions"] == 2 and table.loc["int4-tinygemm", "h200 eager check"] == "reference"
    lines = quant_report.findings(table.reset_index(), published.load(), cells, model, [ctx], ["eager"])
    assert all(line.values for line in lines)  # every sentence states its numbers as values
    b = {k: quant_bytes.step_bytes(CONFIGS[model], k, ctx) for k in ("bf16", "int4-tinygemm", "gptq-exllamav2", "bnb-nf4")}
    floor = {k: v / 4800e9 * 1e3 for k, v in b.items()}  # ms at the H200's datasheet bandwidth
    assert _said(lines, gpu="h200", quant="bf16").values == pytest.approx(dict(
        gpu="h200", arm="eager", ctx=ctx, quant="bf16", step_ms_min=12.5, step_ms_max=12.5, models=1, sessions_min=2,
        sessions_max=2, r_floor_min=floor["bf16"] / 12.5, r_floor_max=floor["bf16"] / 12.5))
    assert "ms/step over 1 model (2 sessions), R_floor" in _said(lines, gpu="h200", quant="bf16")  # counted nouns
    frac = (1 - 5.0 / 12.5) / (1 - b["int4-tinygemm"] / b["bf16"])  # the time saved over the bytes saved
    assert frac >= quant_report.REALISED_YES
    line = _said(lines, gpu="h200", quant="int4-tinygemm")
    fewer = b["bf16"] / b["int4-tinygemm"]
    assert line.values == pytest.approx(dict(
        gpu="h200", arm="eager", ctx=ctx, quant="int4-tinygemm", models=1, step_ms_min=5.0, step_ms_max=5.0,
        sessions_min=1, sessions_max=1, check="reference", speedup_min=2.5, speedup_max=2.5,
        bytes_bf16_over_path_min=fewer, bytes_bf16_over_path_max=fewer, realises="yes", realised_fraction_min=frac,
        realised_fraction_max=frac, why="shrinks"))
    assert f"({frac:.0%} of it)" in line  # the sentence renders its values
    l4_floor = {k: v / 300e9 * 1e3 for k, v in b.items()}  # ms at the L4's datasheet bandwidth
    ms = {"bf16": 62.32, "gptq-exllamav2": 17.36, "bnb-nf4": table.loc["bnb-nf4", "l4 ms (published)"]}
    assert _said(lines, gpu="l4", quant="bf16").values == pytest.approx(dict(
        gpu="l4", source="published", quant="bf16", step_ms=62.32, r_floor=l4_floor["bf16"] / 62.32))
    for key, verdict in (("gptq-exllamav2", "yes"), ("bnb-nf4", "no")):
        share = (1 - ms[key] / ms["bf16"]) / (1 - b[key] / b["bf16"])
        line = _said(lines, gpu="l4", quant=key)
        assert line.values == pytest.approx(dict(
            gpu="l4", source="published", quant=key, step_ms=ms[key], speedup=ms["bf16"] / ms[key],
            bytes_bf16_over_path=b["bf16"] / b[key], realises=verdict, realised_fraction=share,
            r_floor=l4_floor[key] / ms[key]))
    assert f"({share:.0%} of it; R_floor" in line  # the sentence renders its values
    pub = published.load()
    pub = pub[(pub["claim"] == "quantisation") & (pub["quantity"] == "step_ms") & (pub["gpu"] != "l4")]
    assert not pub.empty and _said(lines, l4_step_ms=17.36).values == pytest.approx(dict(
        quant="gptq-exllamav2", l4_step_ms=17.36, **{f"{r.gpu}_{r.arm}_bf16_step_ms": r.value for r in pub.itertuples()}))
    assert _said(lines, model=model).values == dict(model=model, ctx=ctx)  # the byte convention's model and context
    assert not any("quant_rows" in line.values for line in lines)  # there are quantised rows
    none = quant_report.findings(table.reset_index(), published.load(), cells.iloc[:0], model, [ctx], ["eager"])
    assert _said(none, quant_rows=False).values == dict(quant_rows=False)


@pytest.mark.notebooks
def test_04_replay_with_quant_rows_fills_our_columns(tmp_path, data_dir):
    raw = data_dir / "raw" / "cpu-test"
    records.append_rows(raw / "decode.csv", records.DECODE, _rows("cpu-test", "llama-tiny", 16, "bf16", "eager", [2.0, 2.0]))
    records.append_rows(raw / "decode.csv", records.DECODE, _rows("cpu-test", "llama-tiny", 16, "int4-tinygemm", "eager",
                                                                  [1.0, 1.0]))
    base = dict(run_id="r", session=0, gpu="cpu-test", model="llama-tiny", quant="int4-tinygemm", reason="")
    checks = [dict(base, ctx=16, arm="eager", attn="sdpa", max_rel_err=0.2, tol=0.3, status="ok", check="vs_bf16",
                   layer="model", rows=None),  # the timing run's own model check, null and layer checks
              dict(base, ctx=16, arm="eager", attn="sdpa", max_rel_err=0.2, tol=0.26, status="ok",
                   check="vs_bf16_null", layer="model", rows=None),
              dict(base, ctx=0, arm="-", attn="-", max_rel_err=1.0, tol=1.05, status="ok", check="format",
                   layer="q_proj", rows=None)]
    checks += [dict(base, ctx=m, arm="-", attn="-", max_rel_err=0.003, tol=0.02, status="ok", check="layer",
                    layer="q_proj", rows=m) for m in (1, 16)]
    records.append_rows(raw / "verify.csv", records.VERIFY, checks)
    figures = tmp_path / "figures"
    notebooks.run(paths.NOTEBOOKS / "04_quantisation_l4.ipynb",
                  dict(DATA_DIR=str(data_dir), FIGURES_DIR=str(figures), MODELS=["llama-tiny"], TABLE_MODEL="llama-tiny",
                       CONTEXTS=[16], ARMS=["eager"]), out_dir=tmp_path / "executed")
    table = pd.read_csv(figures / "04_quant_table.csv").set_index("quant")
    assert table.loc["int4-tinygemm", "cpu-test eager ms"] == 1.0
    assert table.loc["int4-tinygemm", "cpu-test eager speed-up"] == 2.0
    assert table.loc["bf16", "l4 ms (published)"] == 62.32
    bytes_table = pd.read_csv(figures / "04_quant_bytes.csv")
    assert set(bytes_table.model) == {"llama-tiny"} and (bytes_table.group_size.dropna() == 64).all()


def _verify(model, ctx, arm, quant_key, err, status="ok"):
    return dict(run_id="r", session=0, gpu="h200", model=model, ctx=ctx, arm=arm, attn="sdpa", quant=quant_key,
                max_rel_err=err, tol=0.1, status=status, reason="")


def test_checks_label_nan_and_failed_cells_and_keep_them_out_of_verdicts(data_dir):
    """Hand-made verify rows: a passing check, a NaN one recorded as `ok` (before verify_arm failed NaN), a
    failure that left only an `error` decode row (its number, in the text, is not read back), and a check whose
    cell was never timed."""
    m, m2, ctx = "qwen2.5-7b", "llama-3.1-8b", 2048
    raw = []
    for model in (m, m2):
        raw += (_rows("h200", model, ctx, "bf16", "graph", [10.0, 10.0]) + _rows("h200", model, ctx, "bf16", "eager", [20.0])
                + _rows("h200", model, ctx, "int4-tinygemm", "graph", [8.0]) + _rows("h200", model, ctx, "int4-tinygemm", "eager", [30.0]))
    raw += _rows("h200", m2, ctx, "gptq-exllamav2", "eager", [25.0])
    raw.append(dict(_rows("h200", m, ctx, "awq-triton", "graph", [0.0])[0], step=None, step_ms=None, status="error",
                    reason="correctness check failed: arm 'graph' at ctx 2048: logits differ from eager by 0.101 (> 0.1)"))
    verify = pd.DataFrame([_verify(m, ctx, "graph", "int4-tinygemm", 0.0167), _verify(m2, ctx, "graph", "int4-tinygemm", float("nan")),
                           _verify(m2, ctx, "graph", "gptq-exllamav2", 0.01), _verify(m, ctx, "graph", "bf16", 0.02)])
    specs = hardware.specs_table(data_dir)
    cells = quant_report.cells(pd.DataFrame(raw), specs, CONFIGS, verify_rows=verify).set_index(["model", "arm", "quant"])
    assert cells.loc[(m, "graph", "int4-tinygemm"), "check"] == "ok 0.0167"
    assert cells.loc[(m2, "graph", "int4-tinygemm"), "check"] == "failed: NaN logits"
    assert cells.loc[(m2, "eager", "int4-tinygemm"), "check"] == "failed: NaN logits (in its graph check)"
    assert cells.loc[(m, "eager", "int4-tinygemm"), "check"] == "reference"
    assert cells.loc[(m, "graph", "awq-triton"), "check"] == "failed (no verify row)"
    assert cells.loc[(m, "graph", "awq-triton"), "check_failed"]
    assert cells.loc[(m2, "graph", "bf16"), "check"] == "not checked" and not cells.loc[(m2, "graph", "bf16"), "check_failed"]
    assert list(cells["check_failed"][cells["check_failed"]].index.get_level_values("quant")).count("int4-tinygemm") == 2
    never = cells.loc[(m2, "graph", "gptq-exllamav2")]
    assert never["status"] == "not timed" and pd.isna(never["t_obs_ms"]) and never["check"] == "ok 0.0100"
    assert cells.loc[(m, "graph", "int4-tinygemm"), "speedup_over_bf16"] == pytest.approx(10.0 / 8.0)
    lines = quant_report.gpu_findings(cells.reset_index(), [ctx], ["graph"])
    b = {(mm, k): quant_bytes.step_bytes(CONFIGS[mm], k, ctx) for mm in (m, m2) for k in ("bf16", "int4-tinygemm")}
    floor = {key: v / 4800e9 * 1e3 for key, v in b.items()}  # ms at the H200's datasheet bandwidth
    frac = (1 - 8.0 / 10.0) / (1 - b[(m, "int4-tinygemm")] / b[(m, "bf16")])
    saved = (10.0 - 8.0) / (floor[(m, "bf16")] - floor[(m, "int4-tinygemm")])  # ms saved per ms of floor
    assert frac < quant_report.REALISED_PART and saved >= quant_report.REALISED_YES
    r_floor = [floor[(mm, "bf16")] / 10.0 for mm in (m, m2)]
    fewer = b[(m, "bf16")] / b[(m, "int4-tinygemm")]
    line = _said(lines, quant="int4-tinygemm", arm="graph")
    assert line.values == pytest.approx(dict(
        gpu="h200", arm="graph", ctx=ctx, quant="int4-tinygemm", models=1,  # the one cell whose check passed
        step_ms_min=8.0, step_ms_max=8.0, sessions_min=1, sessions_max=1, check="ok", speedup_min=1.25,
        speedup_max=1.25, bytes_bf16_over_path_min=fewer, bytes_bf16_over_path_max=fewer, realises="no",
        realised_fraction_min=frac, realised_fraction_max=frac, why="above the floor",
        saved_over_floor_drop_median=saved, bf16_r_floor_min=min(r_floor), bf16_r_floor_max=max(r_floor), flagged=1,
        **{f"flagged_{m2}_step_ms": 8.0, f"flagged_{m2}_check": "failed: NaN logits"}))
    assert _said(lines, quant="awq-triton").values == dict(  # no verdict: no `realises`
        gpu="h200", arm="graph", ctx=ctx, quant="awq-triton", models=0, untimed=1,
        **{f"untimed_{m}_status": "error", f"untimed_{m}_check": "failed (no verify row)"})
    nan = _said(lines, nan_models=m2)
    assert nan.values == dict(quant="int4-tinygemm", nan_models=m2, nan_contexts="2048", hypothesis=False)
    assert f"on {m2} (ctx 2048)" in nan  # the sentence renders its values


def test_paper_table_says_why_an_alias_member_did_not_run(data_dir):
    rows = pd.DataFrame(_rows("h200", "qwen2.5-7b", 2048, "bf16", "graph", [10.0])
                        + _rows("h200", "qwen2.5-7b", 2048, "awq-triton", "graph", [12.0]))
    specs = hardware.specs_table(data_dir)
    cells = quant_report.cells(rows, specs, CONFIGS)
    table = quant_report.paper_table(cells, published.load(), specs, CONFIGS, "qwen2.5-7b", [2048], ["graph"]).set_index("quant")
    assert table.loc["awq-marlin", "h200 status"].startswith("graph: not run: the `awq` alias ran as awq-triton on h200")
    assert table.loc["bnb-nf4", "h200 status"] == "graph: no rows"
    lines = quant_report.findings(table.reset_index(), published.load(), cells, "qwen2.5-7b", [2048], ["graph"])
    status = table.loc["awq-marlin", "h200 status"]
    assert [line.values for line in lines if "status" in line.values] == [dict(gpu="h200", quant="awq-marlin",
                                                                               status=status)]
    assert f"awq-marlin: {status}." in _said(lines, status=status)  # the sentence renders its values
    # a member with rows of its own (here on another arm) was not passed over: its missing cell has no rows
    both = pd.concat([rows, pd.DataFrame(_rows("h200", "qwen2.5-7b", 2048, "awq-marlin", "eager", [30.0])
                                         + _rows("h200", "qwen2.5-7b", 2048, "bf16", "eager", [25.0]))])
    cells2 = quant_report.cells(both, specs, CONFIGS)
    table2 = quant_report.paper_table(cells2, published.load(), specs, CONFIGS, "qwen2.5-7b", [2048],
                                      ["eager", "graph"]).set_index("quant")
    assert table2.loc["awq-marlin", "h200 status"] == "graph: no rows"
    assert table2.loc["awq-triton", "h200 status"] == "eager: no rows"


def test_check_findings_count_the_layer_and_model_checks_by_hand():
    """One path's layer checks (two at one row, one unavailable; two at prefill rows, one past its tolerance), its
    model check at two contexts (one past its tolerance) and the end-to-end logits errors it replaced."""
    def row(check, err, tol, status="ok", layer="", rows=1, ctx=1):
        return dict(run_id="r", session=0, gpu="h200", model="m1", ctx=ctx, arm="-", attn="sdpa", quant="int4-tinygemm",
                    check=check, layer=layer, rows=rows, max_rel_err=err, tol=tol, status=status, reason="")
    verify = pd.DataFrame([
        row("layer", 0.004, 0.02, layer="q_proj"), row("layer", 0.003, 0.02, layer="k_proj"),
        row("layer", float("nan"), 0.02, "unavailable", layer="v_proj"),
        row("layer", 0.03, 0.02, "failed", layer="q_proj", rows=2048), row("layer", 0.01, 0.02, layer="q_proj", rows=16384),
        row("vs_bf16", 0.3, 0.5, ctx=2048), row("vs_bf16", 0.6, 0.5, "failed", ctx=16384),
        row("vs_bf16_logits", 1.2, float("nan"), ctx=2048), row("vs_bf16_logits", 1.3, float("nan"), ctx=16384)])
    [line] = quant_checks.check_findings(verify)
    check = "model_check_m1_tol0.500"
    assert line.values == pytest.approx(dict(
        gpu="h200", quant="int4-tinygemm", layer_one_row_passed=2, layer_one_row_checks=2, layer_one_row_tol=0.02,
        layer_one_row_max_rel_err=0.004, layer_prefill_passed=1, layer_prefill_checks=2, layer_prefill_tol=0.02,
        layer_prefill_max_rel_err=0.03, layer_prefill_rows="2048, 16384", logits_err_end_to_end_min=1.2,
        logits_err_end_to_end_max=1.3, **{f"{check}_tol": 0.5, f"{check}_max_rel_err_min": 0.3,
                                          f"{check}_max_rel_err_max": 0.6, f"{check}_passed": 1, f"{check}_contexts": 2}))
    assert "1 of 2 contexts pass" in line  # the sentence renders its values


def test_int4_target_sentence_states_the_fastest_step_and_its_bytes_as_values():
    target = dict(gpu="h200", model="llama-3.1-8b", ctx=2048, step_ms=2.0)
    t = dict(quant="int4-triton", arm="graph", t_obs_ms=2.5, target_ms=2.0, step_GB=5.0, streamed_gbps=5.0 / 2.5e-3,
             bytes_at_copy_ms=5.0 / 4.0, copy_gbps=4000.0, bytes_at_datasheet_ms=5.0 / 4.8)
    line = quant_report.int4_target_sentence(t, target)
    assert line.values == dict(gpu="h200", model="llama-3.1-8b", ctx=2048, measured=True, met=False, **t)
    assert "2000 GB/s over the whole step" in line  # the sentence renders its values
    assert quant_report.int4_target_sentence(dict(t, t_obs_ms=1.9), target).values["met"]
    assert quant_report.int4_target_sentence(None, target).values == dict(gpu="h200", model="llama-3.1-8b", ctx=2048,
                                                                          target_ms=2.0, measured=False)


def test_measure_quant_records_why_an_alias_member_was_passed_over(data_dir, monkeypatch):
    """Where `awq` runs as awq-triton, awq-marlin gets `unavailable` decode rows with its own reason."""
    real = quant.unavailable_reason
    monkeypatch.setattr(quant, "unavailable_reason",
                        lambda key, device="cuda": {"awq-marlin": "no module named 'marlin_cuda'", "awq-triton": None}.get(key, real(key, device)))
    monkeypatch.setattr(quant_experiment.sweep, "run_sweep", lambda plan, data, progress=True: None)
    resolved = quant_experiment.measure("cpu-test", ["llama-tiny"], (16,), ["awq"], ("eager",), sessions=1, steps=1,
                                         warmup=0, device="cpu", data=data_dir, layers=False)
    assert resolved == {"awq": "awq-triton"}
    rows = records.read_csv(data_dir / "raw" / "cpu-test" / "decode.csv")
    marlin = rows[rows.quant == "awq-marlin"]
    assert len(marlin) == 1 and set(marlin.status) == {"unavailable"}
    assert marlin.reason.iloc[0] == "awq-marlin: no module named 'marlin_cuda'"


def test_per_product_bytes_of_int4_tinygemm_written_out():
    """Llama-3.1-8B, G = 128: q (K 4096, N 4096) packs 4096 x 4096 / 2 = 8,388,608 bytes of codes and
    2 x 2 x 32 x 4096 = 524,288 of scales and zeros; gate (N 14336) and down (K 14336) 29,360,128 + 1,835,008 each;
    the LM head stays bf16."""
    cfg = models.load_spec("llama-3.1-8b").config
    hf = quant_bytes.projection_bytes(cfg, "int4-tinygemm")
    assert hf["q"] == hf["o"] == 8_388_608 + 524_288 and hf["gate"] == hf["down"] == 29_360_128 + 1_835_008
    assert hf["lm_head"] == 128256 * 4096 * 2
    fused = quant_bytes.projection_bytes(cfg, "int4-tinygemm", "fused")
    assert fused["gate_up"] == 2 * hf["gate"] and fused["qkv"] == hf["q"] + hf["k"] + hf["v"]


@pytest.mark.parametrize("key", ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.3"])
@pytest.mark.parametrize("path_key", ["bf16", "int4-tinygemm", "gptq-exllamav2", "bnb-nf4"])
def test_every_layers_products_the_head_the_norms_and_one_row_are_the_paths_streamed_bytes(key, path_key):
    cfg = models.load_spec(key).config
    for layout in ("hf", "fused"):
        per_call = quant_bytes.projection_bytes(cfg, path_key, layout)
        head = per_call.pop("lm_head")
        terms = quant_bytes.byte_terms(cfg, path_key)
        assert cfg["num_hidden_layers"] * sum(per_call.values()) + head + terms["norms"] + terms["embedding_row"] == \
            quant_bytes.streamed_weight_bytes(cfg, path_key)


def test_per_product_bytes_refuse_an_unknown_path_or_layout():
    cfg = models.load_spec("llama-3.1-8b").config
    with pytest.raises(ValueError, match="unknown projection layout 'split'"):
        quant_bytes.projection_bytes(cfg, "int4-tinygemm", "split")
    with pytest.raises(Exception, match="int3"):
        quant_bytes.projection_bytes(cfg, "int3")


# --- per-product bytes, bf16 (notebook 06's per-product breakdown) ------------------------------------

def test_llama_projection_bytes_written_out():
    hf = quant_bytes.projection_bytes(models.load_spec("llama-3.1-8b").config, "bf16", "hf")
    assert list(hf) == ["q", "k", "v", "o", "gate", "up", "down", "lm_head"]
    assert hf["q"] == hf["o"] == 4096 * 4096 * 2 == 33_554_432
    assert hf["k"] == hf["v"] == 4096 * 1024 * 2 == 8_388_608
    assert hf["gate"] == hf["up"] == hf["down"] == 4096 * 14336 * 2 == 117_440_512
    assert hf["lm_head"] == 128256 * 4096 * 2 == 1_050_673_152
    fused = quant_bytes.projection_bytes(models.load_spec("llama-3.1-8b").config, "bf16", "fused")
    assert list(fused) == ["qkv", "o", "gate_up", "down", "lm_head"]
    assert fused["qkv"] == 33_554_432 + 2 * 8_388_608 == 50_331_648 and fused["gate_up"] == 234_881_024


def test_qwen_projection_bytes_carry_the_qkv_bias():
    hf = quant_bytes.projection_bytes(models.load_spec("qwen2.5-7b").config, "bf16", "hf")
    # Qwen2.5-7B: hidden 3584, 28 heads x 128, 4 KV heads x 128: q 3584 x 3584 + bias 3584, k 3584 x 512 + bias 512
    assert hf["q"] == (3584 * 3584 + 3584) * 2 and hf["k"] == (3584 * 512 + 512) * 2
    assert hf["o"] == 3584 * 3584 * 2  # no bias on o


@pytest.mark.parametrize("key", ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.3", "llama-tiny", "qwen2-tiny",
                                 "mistral-tiny"])
@pytest.mark.parametrize("layout", ["hf", "fused"])
@pytest.mark.parametrize("tied", [False, True])
def test_every_layers_bf16_products_the_head_the_norms_and_one_row_are_w_streamed(key, layout, tied):
    c = dict(models.load_spec(key).config, tie_word_embeddings=tied)  # tied: the table is read once, as the head
    per_call = quant_bytes.projection_bytes(c, "bf16", layout)
    head = per_call.pop("lm_head")
    norms = (c["num_hidden_layers"] * 2 * c["hidden_size"] + c["hidden_size"]) * 2
    one_row = c["hidden_size"] * 2
    assert c["num_hidden_layers"] * sum(per_call.values()) + head + norms + one_row == \
        accounting.weight_bytes(c, "W_streamed")



def test_the_extension_calls_are_custom_operators_with_the_right_output_shape():
    """torch.compile traces ExLlamaV2's and Marlin's calls as registered operators (quant_ops); their fake
    implementations give the output's shape and dtype without the extension, as a compiled trace needs."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from decodegap.quant import ops as quant_ops

    with FakeTensorMode():
        x = torch.empty(3, 256, dtype=torch.float16)
        y = torch.ops.decodegap.exllamav2_gemm(x, 0, 96)
        assert y.shape == (3, 96) and y.dtype == torch.float16
        z = torch.ops.decodegap.marlin_mul(x, torch.empty(16, 512, dtype=torch.int32), torch.empty(2, 256, dtype=torch.float16),
                                           torch.empty(16, dtype=torch.int32), 8)
        assert z.shape == (3, 256) and z.dtype == torch.float16
    key = quant_ops.register_exllamav2("ext", "handle")
    assert quant_ops.HANDLES[key] == ("ext", "handle")
    quant_ops.forget_exllamav2(key)
    assert key not in quant_ops.HANDLES


def test_the_quantisation_plan_lists_each_paths_sweep_and_writes_nothing(tmp_path, capsys):
    """quantisation --plan: one line per path, in order, each session's cells to time (SweepPlan.pending). By hand,
    on a data folder with no rows: bf16 and int4-tinygemm over llama-3.1-8b x ctx 2048 and 4096 x 2 arms, 2
    sessions: 4 cells a session each, 16 in all; then, with notebook 01's sweep having timed the eager cell at ctx
    2048 in one session, bf16's plan (a reference plan) reads that cell from it in both sessions: 3 and 3. Nothing
    is written; without --gpu it says so."""
    import shutil

    from decodegap import paths
    from decodegap.cli import main

    data = tmp_path / "data"
    shutil.copytree(paths.DATA, data, ignore=shutil.ignore_patterns("raw", "diagnostics"))
    args = ["--data-dir", str(data), "quantisation", "--plan", "--gpu", "h100-sxm", "--models", "llama-3.1-8b",
            "--contexts", "2048,4096", "--arms", "eager,graph", "--sessions", "2", "--paths", "bf16,int4-tinygemm"]
    before = sorted(p.relative_to(data) for p in data.rglob("*"))
    assert main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [
        "llama-3.1-8b bf16 [eager, graph] ctx 2048, 4096 (resumes): cells to time 4 in session 0, 4 in session 1",
        "llama-3.1-8b int4-tinygemm [eager, graph] ctx 2048, 4096 (resumes): cells to time 4 in session 0, 4 in "
        "session 1",
        "2 sweep(s), 16 cell(s) to time (a cell: one arm of one model at one context in one session); the layer checks "
        "come first, not counted here"]
    assert sorted(p.relative_to(data) for p in data.rglob("*")) == before
    grid = sweep.SweepPlan(gpu="h100-sxm", models=("llama-3.1-8b",), contexts=(2048,), arms=("eager", "graph",
                                                                                             "hf_default"), sessions=1)
    runs.update_env("h100-sxm", data, "grid", plan=dataclasses.asdict(grid))
    records.append_rows(data / "raw" / "h100-sxm" / "decode.csv", records.DECODE, [dict(
        run_id="grid", session=0, gpu="h100-sxm", model="llama-3.1-8b", ctx=2048, max_cache_len=2100, arm="eager",
        attn="sdpa", quant="bf16", step=0, step_ms=20.0, status="ok", reason="")])
    assert main(args) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("cells to time 3 in session 0, 3 in session 1")
    assert main(args[:4] + ["--models", "llama-3.1-8b"]) != 0
    assert "give its key with --gpu" in capsys.readouterr().err


@pytest.mark.parametrize("eager_over_graph, launch_bound", [((2.5, 3.0, 3.5), True), ((2.0,), True),
                                                             ((1.1, 1.2, 1.3), False), ((1.5, 2.5, 1.9), False)])
def test_an_eager_step_is_called_launch_bound_only_where_launches_are_half_of_it(eager_over_graph, launch_bound):
    """The launch share (eager - graph) / eager = 1 - 1 / eager_over_graph, median over bf16's models: 1 - 1/3 = 0.67
    and 1 - 1/2 = 0.5 (the edge, included) are launch-bound; 1 - 1/1.2 = 0.17 and 1 - 1/1.9 = 0.47 are not, and then
    the reason is the graphed arm's (here its kernel: a share 0.1 realised, 0.2 ms saved per ms of floor)."""
    bf16 = pd.DataFrame(dict(r_floor_quant=[0.2] * len(eager_over_graph), eager_over_graph=list(eager_over_graph)))
    text, values = quant_report._why("eager", 0.1, 0.2, 1.05, 0.15, bf16)
    share = 1 - 1 / pd.Series(eager_over_graph).median()
    assert values["bf16_launch_share_median"] == pytest.approx(share)
    if launch_bound:
        assert values["why"] == "launch-bound" and text.startswith("the eager step is launch-bound")
    else:
        assert values["why"] == "kernel" and "launch-bound (" not in text
        assert text.endswith(f"the eager step is not launch-bound here (bf16 {min(eager_over_graph):.2f}-"
                             f"{max(eager_over_graph):.2f}x its graph arm's time, launch share {share:.2f}, below 0.5)")
    graphed, graph_values = quant_report._why("graph", 0.1, 0.2, 1.05, 0.15, bf16)
    assert graph_values["why"] == "kernel" and "launch" not in graphed and "bf16_launch_share_median" not in graph_values
