"""The model check of a quantised path: the quantised model against the bf16 model it was quantised from, layer by
layer, teacher-forced.

Why layer by layer: on the 7-8B shapes with random weights the logits of two models whose weights differ by 4-bit
rounding (~10 % relative noise per linear) are unrelated (max|d| / max|ref| 1.15-1.44 for every path, tinygemm
included, on the H200): a random 28-32-layer network amplifies any perturbation, as it already turns bf16 rounding
into a 4-5 % logits difference (compare.VERIFY_TOL). An end-to-end comparison then fails every path, a correct
one as much as a wrong one. So every decoder layer of the quantised model is fed the bf16 model's input to that
layer (its hidden states, at the prefill and at every teacher-forced decode step; its KV cache is then written
from those inputs), and its output is compared with the bf16 layer's: the error of a layer is
max|out_q - out_bf16| / max|out_bf16 - in_bf16| (relative to what the layer adds to the residual stream). The
check's error is the worst layer's; its tolerance comes from 4-bit rounding (quant.model_tolerance).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from decodegap.harness import decode


def _hidden(out):
    return out[0] if isinstance(out, (tuple, list)) else out


@contextmanager
def _hooks(model, pre=None, post=None):
    handles = []
    for i, layer in enumerate(model.model.layers):
        if pre is not None:
            handles.append(layer.register_forward_pre_hook(lambda m, args, kwargs, i=i: pre(i, args, kwargs),
                                                           with_kwargs=True))
        if post is not None:
            handles.append(layer.register_forward_hook(lambda m, args, kwargs, out, i=i: post(i, args, kwargs, out),
                                                       with_kwargs=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _input(args, kwargs):
    return args[0] if args else kwargs["hidden_states"]


def record_layers(model, ctx: int, seed: int = 0) -> list[list[tuple]]:
    """Per decoder layer, per forward call of decode.teacher_forced_logits (prefill, then the teacher-forced
    steps): (input, output) hidden states of the bf16 model. Holds 2 x layers x ctx x hidden values."""
    io = [[] for _ in model.model.layers]

    def post(i, args, kwargs, out):
        io[i].append((_input(args, kwargs).detach().clone(), _hidden(out).detach().clone()))

    with _hooks(model, post=post):
        decode.teacher_forced_logits(model, "eager", ctx, seed=seed)
    return io


def forced_layer_error(model, ctx: int, reference: list[list[tuple]], seed: int = 0) -> float:
    """The worst layer error (see the module docstring) of `model` fed, layer by layer, the inputs `reference`
    holds (record_layers of the bf16 model, same ctx and seed). NaN if any layer gives NaN."""
    calls = [0 for _ in model.model.layers]
    worst = [0.0]

    def pre(i, args, kwargs):
        if calls[i] >= len(reference[i]):
            raise RuntimeError(f"layer {i}: more layer calls than the bf16 model's {len(reference[i])}")
        forced = reference[i][calls[i]][0]
        if args:
            return (forced, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": forced}

    def post(i, args, kwargs, out):
        ref_in, ref_out = reference[i][calls[i]]
        calls[i] += 1
        got = _hidden(out).float()
        err = float((got - ref_out.float()).abs().max() / (ref_out.float() - ref_in.float()).abs().max().clamp_min(1e-12))
        if worst[0] == worst[0]:  # a NaN, once seen, stays the answer
            worst[0] = err if err != err else max(worst[0], err)

    with torch.inference_mode(), _hooks(model, pre=pre, post=post):
        decode.teacher_forced_logits(model, "eager", ctx, seed=seed)
    if any(c != len(r) for c, r in zip(calls, reference)):
        raise RuntimeError(f"the quantised model made {calls} layer calls, the bf16 model {[len(r) for r in reference]} "
                           "(a reference of another ctx or number of steps)")
    return worst[0]
