"""The decode harness on CPU with the tiny models: correct before timed, and the check can fail."""

from __future__ import annotations

import pytest
import torch

from decodegap.harness import checks, decode, models
from decodegap import compare
from decodegap import prompts
from decodegap.harness import profile

TINY = ("llama-tiny", "qwen2-tiny", "mistral-tiny")
CTX = 32


@pytest.fixture(scope="module")
def tiny():
    return {key: models.build_model(models.load_spec(key), device="cpu") for key in TINY}


@pytest.fixture(scope="module")
def sharp():
    """llama-tiny with N(0, 0.2) weights: attention far from uniform, so positions matter to the logits.
    (With the default std 0.02 a 64-wide model attends almost uniformly and a shifted position changes the
    logits by < 1 % of their max: too little for the 0.1 tolerance to see.)"""
    model = models.build_model(models.load_spec("llama-tiny"), device="cpu")
    models.randomise_(model, seed=0, std=0.2)
    return model


def static_vs_full(model, ctx=CTX, steps=3, shift=0, feedback=True):
    """checks.static_vs_full_forward at the tiny models' context: one error per step decoded."""
    errs = checks.static_vs_full_forward(model, ctx, steps, shift=shift, feedback=feedback)
    assert len(errs) == steps
    return errs


@pytest.mark.parametrize("key", TINY)
def test_static_decode_equals_a_full_forward(tiny, key):
    errs = static_vs_full(tiny[key])
    assert max(errs) < 1e-3, errs  # on a CPU both paths compute the same numbers


@pytest.mark.parametrize("key", TINY)
def test_teacher_forced_static_decode_equals_a_full_forward(tiny, key):
    errs = static_vs_full(tiny[key], feedback=False)
    assert max(errs) < 1e-3, errs


def test_static_decode_equals_a_full_forward_with_sharp_attention(sharp):
    assert max(static_vs_full(sharp)) < 1e-3


@pytest.mark.parametrize("shift", [1, 3])
def test_a_wrong_position_is_caught(sharp, shift):
    # the position one (or three) ahead of the cache slot: RoPE rotates the query wrongly
    assert max(static_vs_full(sharp, shift=shift)) > 0.1


def test_prompt_ids_are_seeded_and_in_the_vocabulary():
    a, b = prompts.prompt_ids(256, 16, "cpu", seed=0), prompts.prompt_ids(256, 16, "cpu", seed=0)
    assert a.shape == (1, 16) and torch.equal(a, b)
    assert not torch.equal(a, prompts.prompt_ids(256, 16, "cpu", seed=1))
    assert int(a.min()) >= 0 and int(a.max()) < 256


@pytest.mark.parametrize("key", TINY)
def test_verify_hf_default_passes(tiny, key):
    err = checks.verify_arm(tiny[key], "hf_default", CTX)
    assert 0 <= err < 1e-3


def test_verify_arm_fails_on_a_broken_arm(sharp, monkeypatch):
    """An hf_default step that feeds a position 3 ahead of the cache: verify_arm must refuse it."""

    def broken_step(self):
        pos = torch.full((1, 1), self.cache.get_seq_length() + 3, dtype=torch.long)
        return self.model(input_ids=self.tok, past_key_values=self.cache, position_ids=pos, use_cache=True).logits

    assert checks.verify_arm(sharp, "hf_default", CTX) < 1e-3
    monkeypatch.setattr(decode.DynamicStep, "step", broken_step)
    with pytest.raises(AssertionError, match="hf_default"):
        checks.verify_arm(sharp, "hf_default", CTX)


def test_the_check_feeds_both_sides_one_token_whatever_their_prefill_argmax(sharp, monkeypatch):
    """With random weights the prefill's argmax is a near-tie that bf16 rounding can flip between two correct
    paths; had each side been fed its own argmax, their logits would be unrelated (the H200 saw 1.47-1.64 at
    Llama ctx 8192 and Mistral ctx 16384). Here hf_default's prefill picks another token: still equal."""
    real_init = decode.DynamicStep.__init__

    def flipped(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.tok = (self.tok + 1) % self.model.config.vocab_size

    monkeypatch.setattr(decode.DynamicStep, "__init__", flipped)
    assert checks.verify_arm(sharp, "hf_default", CTX) < 1e-3
    token = prompts.teacher_token(sharp.config.vocab_size)
    assert token == prompts.teacher_token(sharp.config.vocab_size) and 0 <= token < sharp.config.vocab_size
    with torch.inference_mode():  # fed their own (different) tokens, the two sides are far apart
        fed = [decode.DynamicStep(sharp, CTX, feedback=False).step(), decode.StaticStep(sharp, CTX, CTX + 1, feedback=False).step()]
    assert compare.max_relative_error(*fed) > 0.1


def test_verify_arm_needs_enough_calls(tiny):
    with pytest.raises(ValueError):
        checks.verify_arm(tiny["llama-tiny"], "hf_default", CTX, calls=1)


def test_forward_calls_and_cache_length():
    assert decode.forward_calls("eager", 5, 30) == 35
    assert decode.forward_calls("graph", 5, 30) == 3 + 5 + 30
    assert decode.max_cache_len("eager", 2048, 5, 30) == 2083
    assert decode.max_cache_len("graph", 128, 2, 4) == 128 + 3 + 2 + 4


@pytest.mark.parametrize("arm", ["eager", "hf_default"])
def test_run_arm_returns_every_step(tiny, arm):
    ctx, warmup, steps = 16, 2, 4
    t = decode.run_arm(tiny["qwen2-tiny"], arm, ctx, warmup=warmup, steps=steps)
    assert (t.arm, t.ctx) == (arm, ctx)
    assert len(t.step_ms) == steps and len(t.warmup_ms) == warmup
    assert all(ms > 0 for ms in t.step_ms + t.warmup_ms)
    assert t.max_cache_len == ctx + warmup + steps == 22
    assert t.logits == []  # kept only on request


def test_run_arm_keeps_logits_per_call(tiny):
    t = decode.run_arm(tiny["llama-tiny"], "eager", 16, warmup=1, steps=2, keep_logits=True)
    assert len(t.logits) == 3 and t.logits[0].shape == (1, 1, 256)


def test_eager_and_hf_default_agree_step_by_step(tiny):
    model = tiny["mistral-tiny"]
    a = decode.run_arm(model, "eager", 16, warmup=0, steps=4, keep_logits=True, feedback=False).logits
    b = decode.run_arm(model, "hf_default", 16, warmup=0, steps=4, keep_logits=True, feedback=False).logits
    assert max(compare.max_relative_error(x, y) for x, y in zip(b, a)) < 1e-3


@pytest.mark.parametrize("arm", ["graph", "compile"])
def test_cuda_only_arms_are_unavailable_on_cpu(tiny, arm):
    model = tiny["llama-tiny"]
    reason = decode.arm_available(arm, model)
    assert reason and ("CUDA" in reason or "cpu" in reason.lower())
    with pytest.raises(decode.ArmUnavailable) as err:
        decode.run_arm(model, arm, 16, warmup=1, steps=2)
    assert str(err.value) == reason


def test_unknown_arm(tiny):
    with pytest.raises(decode.ArmUnavailable, match="unknown arm 'eagre'.*eager"):
        decode.run_arm(tiny["llama-tiny"], "eagre", 16, warmup=1, steps=2)
    assert decode.arm_available("eager", tiny["llama-tiny"]) is None


def test_kernel_count_needs_cuda(tiny):
    with pytest.raises(decode.ArmUnavailable, match="CUDA"):
        profile.kernels_per_step(tiny["llama-tiny"], "eager", 16)


def test_max_relative_error():
    ref = torch.tensor([1.0, -4.0, 2.0])
    assert compare.max_relative_error(torch.tensor([1.0, -4.0, 3.0]), ref) == 0.25
    assert compare.max_relative_error(ref, ref) == 0.0


def test_cache_len_override_is_used_and_checked():
    """Verification reuses the timing run's cache length (a compiled arm is not compiled twice)."""
    model = models.build_model(models.load_spec("llama-tiny"), device="cpu")
    t = decode.run_arm(model, "eager", 16, warmup=1, steps=2, cache_len=40)
    assert t.max_cache_len == 40
    with pytest.raises(ValueError, match="cache_len 18 < 19"):
        decode.run_arm(model, "eager", 16, warmup=1, steps=2, cache_len=18)
    assert checks.verify_arm(model, "hf_default", 16, cache_len=16 + 35) < 0.1


@pytest.mark.slow
def test_one_compile_serves_every_cache_length(tiny):
    """The compile arm's dynamic shapes: dynamo traces the static-cache step once for all cache lengths
    (with static shapes it would trace once per length; automatic dynamic, twice), and AOT autograd runs
    once (without specialize_float dynamo traces the model a second time: counters["aot_autograd"] == 2).
    Checked with the aot_eager backend, which runs on a CPU; the arm adds inductor and CUDA graphs on top."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = tiny["llama-tiny"]
    forward = decode.compiled(model.forward, backend="aot_eager", mode=None)
    with torch.inference_mode():
        for ctx in (16, 32, 48):
            state = decode.StaticStep(model, ctx, ctx + 4, forward=forward)
            for _ in range(2):
                state.step()
    assert counters["stats"]["unique_graphs"] == 1
    assert counters["aot_autograd"]["total"] == 1
    torch._dynamo.reset()


@pytest.mark.slow
def test_compile_arm_traces_one_decoder_layer_and_reuses_it(tiny):
    """COMPILE_LAYER_REGIONS: the compile arm's step is still one graph, but each decoder layer inside it is a
    call of a nested compile region traced once, and the compiled step's logits equal eager's. The tiny Llama
    with 4 layers: dynamo traces the first layer inline and calls one subgraph for the other three (with 2
    layers it inlines both, so the tiny model's own 2 would show nothing; 32 layers: 31 calls)."""
    from torch._dynamo.utils import counters

    if not decode.compile_settings()["layer_regions"]:
        pytest.skip("this torch has no torch.compiler.nested_compile_region")
    torch._dynamo.reset()
    counters.clear()
    seen = []

    def backend(gm, example_inputs):
        calls = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.invoke_subgraph]
        seen.append((len(calls), len({n.args[0].target for n in calls})))
        return gm

    spec = models.load_spec("llama-tiny")
    model = models.build_model(models.ModelSpec(spec.key, spec.name, None, "4 layers", True,
                                                dict(spec.config, num_hidden_layers=4)), device="cpu")
    forward = decode.compiled(model.forward, layers=model.model.layers, backend=backend, mode=None)
    with torch.inference_mode():
        eager = decode.StaticStep(model, 16, 20).step()
        got = decode.StaticStep(model, 16, 20, forward=forward).step()
    assert seen == [(3, 1)]
    torch.testing.assert_close(got, eager, rtol=0, atol=0)
    assert decode.compile_settings() == dict(decode.COMPILE_OPTIONS, specialize_float=True, layer_regions=True)
    torch._dynamo.reset()


@pytest.mark.parametrize("arm", ["compile", "lean_compile"])
def test_compile_overrides_reach_torch_compile(tiny, arm, monkeypatch):
    """kernel_profile compiles a compiled arm with mode=None: inductor's kernels, which reduce-overhead's CUDA
    graph replays, run one by one for the profiler; every other compile option stays."""
    seen = []

    def spy(fn, **kwargs):
        seen.append(kwargs)
        return fn

    monkeypatch.setattr(torch, "compile", spy)
    with torch.inference_mode():
        decode.step_state(tiny["llama-tiny"], arm, 8, 12, mode=None)
        decode.step_state(tiny["llama-tiny"], arm, 8, 12)
    assert seen == [dict(decode.COMPILE_OPTIONS, mode=None), decode.COMPILE_OPTIONS]
