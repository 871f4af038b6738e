"""A decode check a wrong attention cannot pass: the arm against eager HF on the same weights with the attention
scores sharpened.

With the models' random weights (std 0.02) every head attends almost uniformly, so an attention that reads the
wrong keys still returns nearly the mean of the values and the logits check (decode.verify_arm, compare.VERIFY_TOL)
passes it: a sign-flipped rotary passes (data/diagnostics/check_power_cpu.csv). Here the q and k projections of
every layer are scaled by sqrt(SHARPEN) each, so every score is SHARPEN times larger and each head attends to a few
positions; the arm and HF eager then run on those weights, and a rotary at the wrong position or sign, or a block of
the cache left out, changes which positions a head reads. The weights are put back exactly afterwards (copies).

The factor and tolerance are calibrated on a CPU (bench/check_power_cpu.py: the Llama-3.1-8B architecture at a
narrow width, ctx 256): as built the lean decoder agrees with HF there; a rotary flipped, a rotary one position
off and a block of the cache masked out at decode fail; a cache read one slot off (the newest key dropped, one
zero key added) does not fail at this factor. How far a correct arm lands from HF on a GPU with sharpened scores
(bf16 kernels differ) is not measured yet: the check is recorded (verify.csv, check `vs_eager_sharp`) and does
not gate the timing until it is.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import nn

SHARPEN = 16.0
"""Factor on every attention score (q and k projections each scaled by its square root)."""
SHARP_TOL = 0.1
"""Largest relative logits error accepted (compare.VERIFY_TOL's value; the faults above give more on a CPU)."""


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
    """decode.verify_arm of `arm` on the model with sharpened attention (never raising past a tolerance: the
    caller judges the error against SHARP_TOL); the model's weights are unchanged afterwards."""
    from . import decode

    with sharpened(model, factor):
        return decode.verify_arm(model, arm, ctx, seed=seed, raise_past_tol=False, **kwargs)


FAULTS = ("as built", "rotary sign-flipped", "rotary one position off", "cache block dropped",
          "cache read one slot off")
"""The lean decoder as built and the wrong attentions the check is calibrated on (`fault`)."""


def calibration_model(device: str = "cpu"):
    """The model of the calibration: the Llama-3.1-8B architecture at a narrow width (4 layers, hidden 256, 4 heads
    of 64, 1 KV head, vocabulary 1024), random weights as the real shapes have them."""
    from . import models

    spec = models.load_spec("llama-3.1-8b")
    config = dict(spec.config, hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=1,
                  head_dim=64, num_hidden_layers=4, vocab_size=1024, bos_token_id=1, eos_token_id=2)
    return models.build_model(models.ModelSpec(spec.key, spec.name, None, "narrow", True, config), device=device)


@contextlib.contextmanager
def fault(case: str):
    """The lean decoder with one of FAULTS in its attention (decodegap.lean's functions patched, put back on
    exit): the rotary sign-flipped; at decode steps, the rotary taken one position on, 32 cached positions
    (96-127) masked out, or the cache read one slot off (the newest key dropped, a zero key read)."""
    from . import lean

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
