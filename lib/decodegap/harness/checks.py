"""The decode checks: every arm against eager HF SDPA, teacher-forced, before it is timed (verify_arm, each
sequence of a batch against its own reference), the static-cache step against one full forward pass
(static_vs_full_forward), and a check a wrong attention cannot pass (verify_arm_sharpened, below).

The sharpened check: the arm against eager HF on the same weights with the attention
scores sharpened, where the model's own scores are too flat for the plain check to see a wrong attention.

How peaked a head's attention is depends on the spread of its scores. With random weights of std s (the config's
initializer_range) and RMS-normalised inputs, a q or k entry has variance hidden_size * s^2, so a score
q.k / sqrt(head_dim) has a standard deviation of about hidden_size * s^2 (`score_std`). For the paper's models
that is 1.4-1.6 (Qwen-2.5-7B 3584 * 0.02^2, Llama-3.1-8B 4096 * 0.02^2): attention is far from uniform already,
and on the H200 the plain check fails every fault below by a wide margin while correct arms pass
(data/diagnostics/sharp_noise_gpu.csv, bench/sharp_noise_gpu.py). For a narrow model (the calibration model
below, hidden 256: 0.1) every head attends almost uniformly, an attention that reads the wrong keys still returns
nearly the mean of the values, and the plain check (verify_arm, compare.VERIFY_TOL) passes a sign-flipped
rotary (data/diagnostics/check_sensitivity_cpu.csv). There the q and k projections of every layer are scaled by
sqrt(SHARPEN) each, so every score is SHARPEN times larger (the real models' spread); the arm and HF eager then run
on those weights, and a rotary at the wrong position or sign, or a block of the cache left out, changes which
positions a head reads. The weights are put back exactly afterwards (copies).

`factor_for(config)` is the factor a model needs where its scores are flatter than SHARP_ENOUGH: the one that brings
its spread to SHARP_SPREAD (the real models' spread, which the calibration model reaches at SHARPEN), at most
SHARPEN; else 1 (no sharpened check: it would be the plain one). A model between the two (the Qwen2.5 0.5B-3B, spread
0.36-0.82) is sharpened to the real models' spread, not past it. Sharpening a model whose scores are already spread is wrong: on the
H200, at factor 16 on the real shapes, correct arms land 0.98-1.28 from HF eager (as far as the faults), and at
factor 2 0.05-0.10 (the sharpened softmax amplifies the bf16 kernels' differences), against 0.04-0.06 plain.

Calibrated on a CPU (bench/check_sensitivity_cpu.py: the Llama-3.1-8B architecture at a narrow width, ctx 256): as built
the lean decoder agrees with HF there; a rotary flipped, a rotary one position off and a block of the cache masked
out at decode fail; a cache read one slot off (the newest key dropped, one zero key added) does not fail at this
factor. The check is recorded (verify.csv, check `vs_eager_sharp`) for the cells that need it and does not gate
their timing.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import nn

from decodegap import prompts
from decodegap.arms import COMPILED_ARMS
from decodegap.compare import logits_error, max_relative_error
from decodegap.harness import decode

def teacher_forced_logits(model, arm: str, ctx: int, calls: int = 6, seed: int = 0, attn: str = "sdpa",
                          cache_len: int | None = None, batch: int = 1) -> list:
    """The logits of `calls` forward calls of `arm` (prefill included) on the check's prompts (`batch` of them,
    prompts.batch_prompt_ids), every step fed teacher_token: what verify_arm compares. Returns a list of
    [batch, 1, V] tensors."""
    reason = decode.unavailable_reason(arm, model, batch, attn)
    if reason:
        raise decode.ArmUnavailable(reason)
    warm = decode.COMPILE_MIN_WARMUP if arm in COMPILED_ARMS else 1
    n_steps = calls - decode.forward_calls(arm, warm, 0)
    if n_steps < 1:
        raise ValueError(f"verify_arm needs more than {calls} calls for arm {arm!r}")
    cache_len = max(cache_len or 0, ctx + calls)  # a longer cache than the check needs is fine
    return decode.run_arm(model, arm, ctx, warmup=warm, steps=n_steps, seed=seed, keep_logits=True, feedback=False,
                   attn=attn, cache_len=cache_len, batch=batch).logits


def sequence_errors(got: list, ref: list) -> list[float]:
    """compare.logits_error of each sequence of a batch: row b of every call of `got` against row b of `ref`
    (lists of [batch, 1, V] tensors). For one sequence, [logits_error(got, ref)]."""
    return [logits_error([g[b] for g in got], [r[b] for r in ref]) for b in range(ref[0].shape[0])]


def worst(errors: list[float]) -> float:
    """The largest of per-sequence errors, NaN if any is NaN (a NaN logit fails the check whatever the others)."""
    return float("nan") if any(e != e for e in errors) else max(errors)


def verify_arm_sequences(model, arm: str, ctx: int, calls: int = 6, seed: int = 0, attn: str = "sdpa",
                         cache_len: int | None = None, batch: int = 1) -> list[float]:
    """Each sequence's largest relative logits error of `arm` against eager SDPA (see verify_arm), both sides
    decoding the same `batch` prompts together, teacher-forced, for the same number of calls: one error per
    sequence (sequence_errors), never raising past a tolerance."""
    reason = decode.unavailable_reason(arm, model, batch, attn)
    if reason:  # before the eager reference is run for nothing
        raise decode.ArmUnavailable(reason)
    warm = decode.COMPILE_MIN_WARMUP if arm in COMPILED_ARMS else 1
    total = decode.forward_calls(arm, warm, calls - decode.forward_calls(arm, warm, 0))
    cache_len = max(cache_len or 0, ctx + total)
    got = teacher_forced_logits(model, arm, ctx, calls, seed, attn, cache_len, batch)
    with sdpa_reference(model):
        ref = decode.run_arm(model, "eager", ctx, warmup=0, steps=total, seed=seed, keep_logits=True, feedback=False,
                      cache_len=cache_len, batch=batch).logits
    return sequence_errors(got, ref)


def verify_arm(model, arm: str, ctx: int, calls: int = 6, seed: int = 0, tol: float = 0.1,
               attn: str = "sdpa", cache_len: int | None = None, raise_past_tol: bool = True,
               batch: int = 1, sequences: list | None = None) -> float:
    """Check `arm` against eager SDPA before timing it: both decode the same prompt, teacher-forced, for the
    same number of calls; every call's logits must agree within `tol` (relative to the eager logits' max).
    The reference is HF's eager step with SDPA's default whatever `attn` is: a model built for another
    attention implementation (flex, hf_attention's kernels) is switched to "sdpa" for it (sdpa_reference).
    With `batch` > 1 both sides decode the same `batch` prompts together and each sequence is compared with its
    own reference (verify_arm_sequences; `sequences`, a list, receives each sequence's error). Returns the largest
    relative error over the sequences; raises AssertionError past `tol` (NaN fails too: a kernel that overflows
    fp16 gives NaN logits) unless `raise_past_tol` is False."""
    errors = verify_arm_sequences(model, arm, ctx, calls, seed, attn, cache_len, batch)
    if sequences is not None:
        sequences.extend(errors)
    worst_err = worst(errors)
    if raise_past_tol and not worst_err <= tol:
        raise AssertionError(f"arm {arm!r} at ctx {ctx}: logits differ from eager by {worst_err:.3g} (> {tol})")
    return worst_err


def static_vs_full_forward(model, ctx: int, steps: int = 3, shift: int = 0, feedback: bool = True,
                           seed: int = 0) -> list[float]:
    """The static-cache step against the model itself: decode `steps` tokens with StaticStep after a `ctx`-token
    prompt, then run one full forward pass over the prompt and the same tokens, and return each step's logits'
    max. relative error against that pass's logits at its position. `shift` pushes the step's position that many
    tokens ahead of its cache slot (a wrong position, which RoPE must give away); `feedback` False feeds the
    prompt's argmax every step (teacher-forced). On a CPU both sides compute the same numbers; on a GPU they
    differ by bf16 rounding (compare.VERIFY_TOL)."""
    device = next(model.parameters()).device
    with torch.inference_mode():
        state = decode.StaticStep(model, ctx, ctx + steps, seed=seed, feedback=feedback)
        state.pos.add_(shift)
        tokens, outs = [state.tok.clone()], []
        for _ in range(steps):
            outs.append(state.step().float().clone())
            tokens.append(state.tok.clone())
        ids = torch.cat([prompts.prompt_ids(model.config.vocab_size, ctx, device, seed)] + tokens[:steps], dim=1)
        full = model(ids).logits.float()
    return [max_relative_error(out[0, -1], full[0, ctx + i]) for i, out in enumerate(outs)]


@contextlib.contextmanager
def sdpa_reference(model):
    """`model` with HF's "sdpa" attention inside the block, its own implementation restored after (HF 5.x's
    set_attn_implementation switches every layer: each reads config._attn_implementation per call)."""
    built = model.config._attn_implementation
    if built == "sdpa":
        yield model
        return
    model.set_attn_implementation("sdpa")
    try:
        yield model
    finally:
        model.set_attn_implementation(built)


SHARPEN = 16.0
"""Factor on every attention score (q and k projections each scaled by its square root)."""
SHARP_TOL = 0.1
"""Largest relative logits error accepted (compare.VERIFY_TOL's value; the faults above give more on a CPU)."""
SHARP_ENOUGH = 1.0
"""Score spread (`score_std`) from which a model's attention counts as far from uniform: no sharpening needed.
Between the narrow calibration model (0.10; sharpened: 1.6) and the paper's models (1.43-1.64)."""
CALIBRATION_SPREAD = 256 * 0.02 ** 2
"""The calibration model's score spread (`calibration_model`: hidden 256, initializer_range 0.02)."""
SHARP_SPREAD = SHARPEN * CALIBRATION_SPREAD
"""The spread a sharpened check brings a model's scores to: the calibration model's at SHARPEN, the real models'
(1.43-1.64). Sharpened past it, correct arms fail (the H200 rows above at factor 16 on the real shapes)."""


def score_std(config) -> float:
    """The spread of one attention score, q.k / sqrt(head_dim), under random weights: hidden_size *
    initializer_range^2 (q and k entries each of variance hidden_size * std^2 for RMS-normalised inputs)."""
    return float(config["hidden_size"]) * float(config.get("initializer_range", 0.02)) ** 2


def factor_for(config) -> float:
    """The sharpening a model's check needs: where its scores are flatter than SHARP_ENOUGH, the factor that brings
    their spread to SHARP_SPREAD, at most SHARPEN; else 1.0."""
    spread = score_std(config)
    return min(SHARPEN, SHARP_SPREAD / spread) if spread < SHARP_ENOUGH else 1.0


def sharpened_reason(config) -> str:
    """A sharpened check's reason in verify.csv: its factor and the spread it brings the scores from and to."""
    factor, spread = factor_for(config), score_std(config)
    return f"scores sharpened x{factor:.3g} (spread {spread:.2f} -> {spread * factor:.2f})"


class NotSharpenable(ValueError):
    """The model's q or k projection is not a bf16 nn.Linear (a quantised path): its weights cannot be scaled."""


@contextlib.contextmanager
def sharpened(model, factor: float = SHARPEN):
    """Scale every decoder layer's q_proj and k_proj weight (and bias) by sqrt(factor) in place; put the exact
    original tensors back on exit. Raises NotSharpenable before changing anything when a projection is not an
    nn.Linear."""
    projections = [p for layer in model.model.layers for p in (layer.self_attn.q_proj, layer.self_attn.k_proj)]
    bad = sorted({type(p).__name__ for p in projections if type(p) is not nn.Linear})
    if bad:
        raise NotSharpenable(f"the sharpened check scales bf16 q/k projections; this model has {', '.join(bad)}")
    root = math.sqrt(factor)
    saved = [(p, p.weight.detach().clone(), None if p.bias is None else p.bias.detach().clone()) for p in projections]
    try:
        with torch.no_grad():
            for p, _, _ in saved:
                p.weight.mul_(root)
                if p.bias is not None:
                    p.bias.mul_(root)
        yield model
    finally:
        with torch.no_grad():
            for p, weight, bias in saved:
                p.weight.copy_(weight)
                if bias is not None:
                    p.bias.copy_(bias)


def verify_arm_sharpened(model, arm: str, ctx: int, seed: int = 0, factor: float = SHARPEN, **kwargs) -> float:
    """verify_arm of `arm` on the model with sharpened attention (never raising past a tolerance: the
    caller judges the error against SHARP_TOL); the model's weights are unchanged afterwards."""
    with sharpened(model, factor):
        return verify_arm(model, arm, ctx, seed=seed, raise_past_tol=False, **kwargs)


FAULTS = ("as built", "rotary sign-flipped", "rotary one position off", "cache block dropped",
          "cache read one slot off")
"""The lean decoder as built and the wrong attentions the check is calibrated on (`fault`)."""


def calibration_model(device: str = "cpu"):
    """The model of the calibration: the Llama-3.1-8B architecture at a narrow width (4 layers, hidden 256, 4 heads
    of 64, 1 KV head, vocabulary 1024), random weights as the real shapes have them."""
    from decodegap.harness import models

    spec = models.load_spec("llama-3.1-8b")
    config = dict(spec.config, hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=1,
                  head_dim=64, num_hidden_layers=4, vocab_size=1024, bos_token_id=1, eos_token_id=2)
    return models.build_model(models.ModelSpec(spec.key, spec.name, None, "narrow", True, config), device=device)


@contextlib.contextmanager
def fault(case: str):
    """The lean decoder with one of FAULTS in its attention (decodegap.harness.lean's functions patched, put back on
    exit): the rotary sign-flipped; at decode steps, the rotary taken one position on, 32 cached positions
    (96-127) masked out, or the cache read one slot off (the newest key dropped, a zero key read)."""
    from decodegap.harness import lean

    if case not in FAULTS:
        raise ValueError(f"unknown fault {case!r}; known: {', '.join(FAULTS)}")
    real_forward, real_attention, real_rotate = lean.LeanDecoder.forward, lean._attention, lean._rotate_half

    def one_off(self, ids, start_pos):
        if ids.shape[1] != 1:
            return real_forward(self, ids, start_pos)
        cos, sin = self.cos, self.sin
        self.cos, self.sin = torch.roll(cos, -1, 0), torch.roll(sin, -1, 0)
        try:
            return real_forward(self, ids, start_pos)
        finally:
            self.cos, self.sin = cos, sin

    def dropped(q, k, v, mask, scale, prefill):
        if not prefill:
            mask = mask.clone()
            mask[..., 96:128] = False
        return real_attention(q, k, v, mask, scale, prefill)

    def slot_off(q, k, v, mask, scale, prefill):
        if not prefill:
            k, v = torch.roll(k, 1, dims=2), torch.roll(v, 1, dims=2)
        return real_attention(q, k, v, mask, scale, prefill)

    if case == "rotary sign-flipped":
        lean._rotate_half = lambda x: -real_rotate(x)
    elif case == "rotary one position off":
        lean.LeanDecoder.forward = one_off
    elif case == "cache block dropped":
        lean._attention = dropped
    elif case == "cache read one slot off":
        lean._attention = slot_off
    try:
        yield
    finally:
        lean.LeanDecoder.forward, lean._attention, lean._rotate_half = real_forward, real_attention, real_rotate
