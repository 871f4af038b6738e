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


# ------------------------------------------------------------------------------ checks written with a run's rows

def layer_rows(info: dict, base: dict) -> list[dict]:
    """verify.csv rows of quant.quantise_model_'s in-run checks (info["checks"]): per linear name one `format` row
    (the worst decoder layer's max |W_deq - W| / half-step, tol quant.power.FORMAT_TOL; ctx 0, rows empty) and one
    `layer` row per row count M (the worst layer's error against x @ W_deq^T, tol quant.QUANT_TOL; ctx = rows =
    M). `base`: run_id, session, gpu, model, quant. Status ok or error by the tolerance, NaN failing."""
    from decodegap.quant import paths as quant, power

    out = []
    common = dict(base, arm="-", attn="-")
    for name, entry in info.get("checks", {}).items():
        ratio, frac, index = entry["format"]
        n = entry["layers"]
        out.append(dict(common, ctx=0, rows=None, check="format", layer=name, max_rel_err=ratio, tol=power.FORMAT_TOL,
                        status="ok" if power.format_passes(ratio) else "error",
                        reason=f"the model's own {n} {name} layers: worst layer {index}, {frac:.2e} of its weights "
                               "past the tolerance"))
        for m, (err, index) in sorted(entry["rows"].items()):
            out.append(dict(common, ctx=m, rows=m, check="layer", layer=name, max_rel_err=err, tol=quant.QUANT_TOL,
                            status="ok" if quant.passes(err, quant.QUANT_TOL) else "error",
                            reason=f"the model's own {n} {name} layers (x N(0, 1)): worst layer {index}"))
    return out


def null_row(base: dict, ctx: int, tol: float, null: float, draws: list[float], path_key: str) -> dict:
    """The verify.csv row (check vs_bf16_null) of a model check's null: its largest draw, the tolerance it sets."""
    from decodegap.quant import power

    return dict(base, ctx=ctx, arm="eager", attn="sdpa", rows=None, check="vs_bf16_null", layer="model",
                max_rel_err=null, tol=tol, status="ok" if null == null else "error",
                reason=f"{len(draws)} draws " + ", ".join(f"{d:.4f}" for d in draws)
                       + f" of U(+-D/2), D the {power.FORMAT_OF.get(path_key, path_key)} step (quant.power)")


# ---------------------------------------------------------------------------------------- power on a model

@contextmanager
def swapped(model, path_key: str, reference: bool = False, fault=None, checks: tuple[int, ...] | None = ()):
    """Inside: `model` with path `path_key`'s layers in place of its decoder linears (quant.quantise_model_, its
    format checks with `checks`), built with `fault` planted (quant.power.planted; the fault is removed once the
    layers are built); yields quantise_model_'s info. The bf16 linears are put back on exit."""
    from decodegap.quant import paths as quant, power

    saved = []
    for layer in model.model.layers:
        for name, mod in layer.named_modules():
            if isinstance(mod, torch.nn.Linear):
                parent = layer.get_submodule(name.rsplit(".", 1)[0]) if "." in name else layer
                saved.append((parent, name.rsplit(".", 1)[-1], mod))
    try:
        with power.planted(fault, quant._reference_key(path_key) if reference else quant.resolve(path_key)):
            info = quant.quantise_model_(model, path_key, reference=reference, checks=checks)
        yield info
    finally:
        for parent, attr, mod in saved:
            setattr(parent, attr, mod)
        if hasattr(model, "decodegap_quant"):
            del model.decodegap_quant


def power_rows(model, ctx: int, reference: list, paths, builds=("reference", "kernel"), faults: bool = True,
               seed: int = 0, model_key: str = "-", on_row=None) -> list[dict]:
    """The model check's power on `model` (bf16) at `ctx`, `reference` its record_layers: per path of `paths` its
    null (quant.model_tolerance's draws), then for each build (`reference`: x @ W_deq^T; `kernel`: the path's own
    kernel, where it runs here) the correct layers and each planted fault (quant.power.faults_for), each through
    forced_layer_error with the worst format check of its layers. Rows as quant.power.POWER_FIELDS (level
    `model`); `on_row(row)` as each is made. A build that cannot run here is left out."""
    import time

    from decodegap.quant import paths as quant, power

    out = []
    layers = len(model.model.layers)
    for key in paths:
        base = dict(level="model", model=model_key, layers=layers, shape="-", rows=ctx, ctx=ctx, path=key,
                    eps_fmt=quant.rounding_bound(model, key))
        t0 = time.time()
        tol, null, draws = quant.model_tolerance(model, key, ctx, reference, seed=seed)
        for i, d in enumerate(draws):
            out.append(dict(base, build="null", case=f"null #{i + 1}", max_rel_err=d, null=null, k=d / null, tol=tol,
                            verdict="-", format_ratio=None, format_frac=None, seconds=(time.time() - t0) / len(draws)))
            if on_row:
                on_row(out[-1])
        for build in builds:
            if build == "reference" and key in power.KERNEL_ONLY:
                continue
            device = next(model.parameters()).device
            if build == "kernel" and quant.unavailable_reason(key, device):
                continue
            for fault in [None] + (power.faults_for(key) if faults else []):
                t0 = time.time()
                try:
                    with swapped(model, key, reference=build == "reference", fault=fault) as info:
                        err = forced_layer_error(model, ctx, reference, seed=seed)
                except quant.QuantUnavailable:
                    break
                worst = max(info["checks"].values(), key=lambda e: e["format"][0])["format"]
                out.append(dict(base, build=build, case=fault.key if fault else "correct", max_rel_err=err, null=null,
                                k=err / null, tol=tol, verdict=power.verdict(err / null), format_ratio=worst[0],
                                format_frac=worst[1], seconds=time.time() - t0))
                if on_row:
                    on_row(out[-1])
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    return out
