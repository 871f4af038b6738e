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
check's error is the worst layer's; its tolerance comes from 4-bit rounding (`model_tolerance`: MODEL_K_PASS x the
null, quant.power's derivation). A path that quantises the LM head too (quant.paths' int4-triton-head) has a head
check beside it, built the same way (`forced_head_error`, `head_tolerance`): the head fed the bf16 model's final
hidden states, its logits against the bf16 head's relative to their largest value, within MODEL_K_PASS x the null
of the head's own format rounding (checks vs_bf16_head and vs_bf16_head_null, layer lm_head).

Below the check: the rows a sweep's run writes of its checks (`layer_rows`, `null_row`), and the checks' power, what
they can detect, measured on single products (`product_rows`, bench/quant_power_cpu.py) and on a model
(`power_rows`, bench/quant_power_gpu.py).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable

import torch

from decodegap import compare
from decodegap.compare import max_relative_error
from decodegap.harness import checks
from decodegap.quant import paths as quant, power
from decodegap.quant.loaders import QuantUnavailable


def _hidden(out):
    return out[0] if isinstance(out, (tuple, list)) else out


@contextmanager
def _hooks(layers, pre=None, post=None):
    handles = []
    for i, layer in enumerate(layers):
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


def record_io(layers, run: Callable[[], object]) -> list[list[tuple]]:
    """Per module of `layers`, per forward call while `run()` runs: its (input, output) hidden states."""
    io = [[] for _ in layers]

    def post(i, args, kwargs, out):
        io[i].append((_input(args, kwargs).detach().clone(), _hidden(out).detach().clone()))

    with _hooks(layers, post=post):
        run()
    return io


CHUNK_ROWS = 1024
"""Rows (positions) `chunked_maxima` compares at a time: at the LM head's prefill (ctx x vocab logits) an fp32 copy
of the whole would take ctx x vocab x 4 bytes for each operand, several such copies at the peak (enough at the
longest contexts to run a GPU with less memory than the H200 out of it); a chunk takes CHUNK_ROWS x vocab x 4 bytes."""


def chunked_maxima(got, ref_out, ref_in=None, rows: int = CHUNK_ROWS) -> tuple[float, float]:
    """(max|got - ref_out|, max|ref_out - ref_in|) in fp32 (ref_in None: max|ref_out|), over `rows` rows (the last
    dimension's vectors) at a time, so that no fp32 copy of a whole operand is made: the same two maxima as on the
    whole tensors, NaN if either has a NaN."""
    width = ref_out.shape[-1]
    got, ref_out = got.reshape(-1, width), ref_out.reshape(-1, width)
    ref_in = ref_in.reshape(-1, width) if ref_in is not None else None
    if got.shape != ref_out.shape or (ref_in is not None and ref_in.shape != ref_out.shape):
        raise ValueError(f"compared shapes differ: {tuple(got.shape)}, {tuple(ref_out.shape)}"
                         + (f", {tuple(ref_in.shape)}" if ref_in is not None else ""))
    diff, scale = [], []
    for i in range(0, max(ref_out.shape[0], 1), rows):
        r = ref_out[i:i + rows].float()
        diff.append((got[i:i + rows].float() - r).abs().amax() if r.numel() else r.new_zeros(()))
        s = r - ref_in[i:i + rows].float() if ref_in is not None else r
        scale.append(s.abs().amax() if s.numel() else s.new_zeros(()))
    return float(torch.stack(diff).max()), float(torch.stack(scale).max())


def forced_error(layers, run: Callable[[], object], reference: list[list[tuple]], what: str = "the model",
                 relative_to_added: bool = True) -> float:
    """The worst error of `layers` while `run()` runs, each module fed, call by call, the input `reference` holds
    (record_io of the reference model, same calls): its output against the reference's, relative to what the
    reference module adds (see the module docstring), or with `relative_to_added` False to the reference output's
    largest value (the LM head, whose logits are not added to its input). NaN if any module gives NaN."""
    calls = [0 for _ in layers]
    worst = [0.0]

    def pre(i, args, kwargs):
        if calls[i] >= len(reference[i]):
            raise RuntimeError(f"layer {i}: more layer calls than the reference's {len(reference[i])}")
        forced = reference[i][calls[i]][0]
        if args:
            return (forced, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": forced}

    def post(i, args, kwargs, out):
        ref_in, ref_out = reference[i][calls[i]]
        calls[i] += 1
        diff, scale = chunked_maxima(_hidden(out), ref_out, ref_in if relative_to_added else None)
        err = diff / max(scale, 1e-12)
        if worst[0] == worst[0]:  # a NaN, once seen, stays the answer
            worst[0] = err if err != err else max(worst[0], err)

    with torch.inference_mode(), _hooks(layers, pre=pre, post=post):
        run()
    if any(c != len(r) for c, r in zip(calls, reference)):
        raise RuntimeError(f"{what} made {calls} layer calls, the reference {[len(r) for r in reference]} "
                           "(a reference of another ctx or number of steps)")
    return worst[0]


def _teacher_forced(model, ctx: int, seed: int):
    """checks.teacher_forced_logits of `model` at `ctx` and `seed`, as a call: the run every forced check records
    and replays."""
    return lambda: checks.teacher_forced_logits(model, "eager", ctx, seed=seed)


def record_layers(model, ctx: int, seed: int = 0) -> list[list[tuple]]:
    """Per decoder layer, per forward call of checks.teacher_forced_logits (prefill, then the teacher-forced
    steps): (input, output) hidden states of the bf16 model. Holds 2 x layers x ctx x hidden values."""
    return record_io(model.model.layers, _teacher_forced(model, ctx, seed))


def forced_layer_error(model, ctx: int, reference: list[list[tuple]], seed: int = 0) -> float:
    """The worst layer error (see the module docstring) of `model` fed, layer by layer, the inputs `reference`
    holds (record_layers of the bf16 model, same ctx and seed). NaN if any layer gives NaN."""
    return forced_error(model.model.layers, _teacher_forced(model, ctx, seed), reference, "the quantised model")


def model_tolerance(model, path_key: str, ctx: int, reference: list, group_size: int | None = None, seed: int = 0,
                    draws: int | None = None) -> tuple[float, float, list[float]]:
    """(tolerance, null, the null's draws) of the model check of path `path_key` on the bf16 `model`, at `ctx`
    against `reference` (record_layers of this model, ctx and seed): each draw is the forced layer error of the
    model with every decoder linear's weight plus U(-D/2, D/2) of the format's own step (quant.power.noisy_linears),
    the null the largest of `draws` (quant.power.NULL_DRAWS) draws, the tolerance compare.MODEL_K_PASS x null. The
    model is left as it was."""
    return _null(model, path_key, group_size, seed, draws, lambda: forced_layer_error(model, ctx, reference, seed=seed))


def _null(model, path_key: str, group_size: int | None, seed: int, draws: int | None, error, modules=None) -> tuple:
    """(MODEL_K_PASS x null, null, draws): `error()` with the weights of every decoder linear (or of `modules`) plus
    U(-D/2, D/2) of path `path_key`'s own step (quant.power.noisy_linears), `draws` (quant.power.NULL_DRAWS) times,
    the null the largest (NaN if any draw is)."""
    key = quant._reference_key(quant.resolve(path_key, next(model.parameters()).device))
    G = group_size or quant.default_group_size(model.config.to_dict())
    values = []
    for d in range(draws or power.NULL_DRAWS):
        with power.noisy_linears(model, key, G, seed=seed * 1000 + d + 1, modules=modules):
            values.append(error())
    null = max(values) if all(v == v for v in values) else float("nan")
    return compare.MODEL_K_PASS * null, null, values


def record_head(model, ctx: int, seed: int = 0) -> list[list[tuple]]:
    """The LM head's (input, logits) per forward call of checks.teacher_forced_logits (as record_layers keeps the
    decoder layers'), of the bf16 model: the reference of the head check of a path that quantises the head."""
    return record_io([model.lm_head], _teacher_forced(model, ctx, seed))


def forced_head_error(model, ctx: int, reference: list[list[tuple]], seed: int = 0) -> float:
    """The head check's error: `model`'s LM head fed, call by call, the bf16 model's head input `reference` holds
    (record_head, same ctx and seed), max|logits - logits_bf16| / max|logits_bf16| over the calls. It has a check
    of its own, apart from the decoder layers' (`forced_layer_error`), since its error is relative to the logits,
    not to what a layer adds to the residual stream, and a fault in the head alone would hide under the layers'
    worst. NaN if the head gives NaN."""
    return forced_error([model.lm_head], _teacher_forced(model, ctx, seed), reference, "the quantised head",
                        relative_to_added=False)


def head_tolerance(model, path_key: str, ctx: int, reference: list, group_size: int | None = None, seed: int = 0,
                   draws: int | None = None) -> tuple[float, float, list[float]]:
    """(tolerance, null, the null's draws) of the head check of path `path_key` on the bf16 `model`, as
    model_tolerance's for the decoder layers: each draw is forced_head_error of the model with the LM head's weight
    plus U(-D/2, D/2) of the format's own step (the decoder layers untouched), the null the largest draw, the
    tolerance compare.MODEL_K_PASS x null. The model is left as it was."""
    return _null(model, path_key, group_size, seed, draws, lambda: forced_head_error(model, ctx, reference, seed=seed),
                 modules=[model.lm_head])


# ------------------------------------------------------------------------------ checks written with a run's rows

def layer_rows(info: dict, base: dict) -> list[dict]:
    """verify.csv rows of quant.quantise_model_'s in-run checks (info["checks"]): per linear name one `format` row
    (the worst decoder layer's max |W_deq - W| / half-step, tol quant.power.FORMAT_TOL; ctx 0, rows empty) and one
    `layer` row per row count M (the worst layer's error against x @ W_deq^T, tol quant.QUANT_TOL; ctx = rows =
    M). `base`: run_id, session, gpu, model, quant. Status ok or error by the tolerance, NaN failing."""
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


def null_row(base: dict, ctx: int, tol: float, null: float, draws: list[float], path_key: str,
             check: str = "vs_bf16_null", layer: str = "model") -> dict:
    """The verify.csv row (check vs_bf16_null, layer model; the head check's: vs_bf16_head_null, layer lm_head) of a
    model check's null: its largest draw, the tolerance it sets."""
    return dict(base, ctx=ctx, arm="eager", attn="sdpa", rows=None, check=check, layer=layer,
                max_rel_err=null, tol=tol, status="ok" if null == null else "error",
                reason=f"{len(draws)} draws " + ", ".join(f"{d:.4f}" for d in draws)
                       + f" of U(+-D/2), D the {power.FORMAT_OF.get(path_key, path_key)} step (quant.power)")


# ------------------------------------------------------------------------------------------ the checks' power

POWER_FIELDS = ("level", "model", "layers", "shape", "rows", "ctx", "path", "build", "case", "max_rel_err", "null",
                "k", "tol", "verdict", "eps_fmt", "format_ratio", "format_frac", "seconds")
"""The columns of the power rows (data/diagnostics/quant_power_*.csv, before their provenance): level `product`
(one product x W^T, error against x W^T of the bf16 weight) or `model` (the forced-layer model check); case
`null #i`, `correct` or a fault key; k = error / null (the largest null draw), tol = MODEL_K_PASS x null, verdict
pass / inconclusive / fail by MODEL_K_PASS and MODEL_K_FAIL (`verdict`); format_ratio / format_frac the elementwise
check's worst ratio and share of weights past quant.power.FORMAT_TOL (the worst layer of the model). The null rows'
build is the string `null` (read them with pandas' keep_default_na=False, or by their case)."""


def verdict(k: float) -> str:
    """pass (k <= compare.MODEL_K_PASS), fail (k >= compare.MODEL_K_FAIL, or NaN), else inconclusive."""
    if not k == k or k >= compare.MODEL_K_FAIL:
        return "fail"
    return "pass" if k <= compare.MODEL_K_PASS else "inconclusive"


def product_rows(shapes, paths, rows: int = 128, device="cpu", group_size: int = 128, seed: int = 0,
                 draws: int = power.NULL_DRAWS, reference: bool = True, on_row=None) -> list[dict]:
    """Power on single products: for each (name, K, N) of `shapes` a stand-in bf16 weight N(0, quant.WEIGHT_STD) and x
    [rows, K] N(0, 1) (seeded), and for each path of `paths`: the null (x (W + U)^T, `draws` draws), the correct
    layer and each planted fault (quant.power.faults_for), each product's error against x W^T in fp32 (max|y - ref| /
    max|ref|), its k against the null and the elementwise format check. `reference`: the reference product of
    the CUDA-only formats (int4-tinygemm runs its kernel on any device). Rows as POWER_FIELDS; `on_row(row)` is
    called as each is made."""
    out = []
    for name, K, N in shapes:
        gen = torch.Generator().manual_seed(seed + K + N)
        w = (torch.randn(N, K, generator=gen) * quant.WEIGHT_STD).to(torch.bfloat16).to(device)
        x = torch.randn(rows, K, generator=gen).to(torch.bfloat16).to(device)
        ref = x.float() @ w.float().t()
        for key in paths:
            G = power.group_size_of(key, group_size)
            base = dict(level="product", model="-", layers=0, shape=f"{name} {K}x{N}", rows=rows, ctx=0, path=key,
                        eps_fmt=power.predicted_eps(key, w, G))
            nulls = []
            for d in range(draws):
                t0 = time.time()
                gn = torch.Generator(device=w.device).manual_seed(seed * 100003 + 7919 * d + 1)
                st = power.step(key, w, G)
                wn = (w.float() + (torch.rand(st.shape, generator=gn, device=w.device) - 0.5) * st).to(torch.bfloat16)
                nulls.append(max_relative_error(x.float() @ wn.float().t(), ref))
                out.append(dict(base, build="null", case=f"null #{d + 1}", max_rel_err=nulls[-1],
                                seconds=time.time() - t0))
            null = max(nulls)
            for r in out[-draws:]:  # written once the null (the largest draw) is known
                r.update(null=null, k=r["max_rel_err"] / null, tol=compare.MODEL_K_PASS * null, verdict="-",
                         format_ratio=None, format_frac=None)
                if on_row:
                    on_row(r)
            kernel = key in power.KERNEL_ONLY or not reference
            if kernel and quant.unavailable_reason(key, device):
                continue  # its null alone
            for fault in [None] + power.faults_for(key):
                t0 = time.time()
                try:
                    with power.planted(fault, key):
                        layer = quant.build_linear(key, K, N, device, weight=w, group_size=group_size,
                                                   reference=not kernel)
                except QuantUnavailable:
                    continue
                with torch.no_grad():
                    y = layer(x).float()
                    chk = power.format_check(key, w, layer.dequantised_weight(torch.float32), G)
                err = max_relative_error(y, ref)
                row = dict(base, build="kernel" if kernel else "reference", case=fault.key if fault else "correct",
                           max_rel_err=err, null=null, k=err / null, tol=compare.MODEL_K_PASS * null,
                           verdict=verdict(err / null), format_ratio=chk["ratio_max"], format_frac=chk["frac_past"],
                           seconds=time.time() - t0)
                out.append(row)
                if on_row:
                    on_row(row)
                del layer, y
    return out



@contextmanager
def swapped(model, path_key: str, reference: bool = False, fault=None, checks: tuple[int, ...] | None = ()):
    """Inside: `model` with path `path_key`'s layers in place of its decoder linears (quant.quantise_model_, its
    format checks with `checks`), built with `fault` planted (quant.power.planted; the fault is removed once the
    layers are built); yields quantise_model_'s info. The bf16 linears (and LM head) are put back on exit."""
    saved = []
    for layer in model.model.layers:
        for name, mod in layer.named_modules():
            if isinstance(mod, torch.nn.Linear):
                parent = layer.get_submodule(name.rsplit(".", 1)[0]) if "." in name else layer
                saved.append((parent, name.rsplit(".", 1)[-1], mod))
    saved.append((model, "lm_head", model.lm_head))  # a path that quantises the head replaces it too
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
    null (model_tolerance's draws), then for each build (`reference`: x @ W_deq^T; `kernel`: the path's own
    kernel, where it runs here) the correct layers and each planted fault (quant.power.faults_for), each through
    forced_layer_error with the worst format check of its layers. Rows as POWER_FIELDS (level
    `model`); `on_row(row)` as each is made. A build that cannot run here is left out."""
    out = []
    layers = len(model.model.layers)
    for key in paths:
        base = dict(level="model", model=model_key, layers=layers, shape="-", rows=ctx, ctx=ctx, path=key,
                    eps_fmt=quant.rounding_bound(model, key))
        t0 = time.time()
        tol, null, draws = model_tolerance(model, key, ctx, reference, seed=seed)
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
                except QuantUnavailable:
                    break
                worst = max(info["checks"].values(), key=lambda e: e["format"][0])["format"]
                out.append(dict(base, build=build, case=fault.key if fault else "correct", max_rel_err=err, null=null,
                                k=err / null, tol=tol, verdict=verdict(err / null), format_ratio=worst[0],
                                format_frac=worst[1], seconds=time.time() - t0))
                if on_row:
                    on_row(out[-1])
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    return out
