"""The fused GEMV of decodegap.kernels.fused.launch against cuBLAS (bf16 F.linear) at batch 1, on every product shape of
Llama-3.1-8B and Qwen-2.5-7B, and Mistral-7B-v0.3's LM head (qkv with the input norm, and Qwen2's bias; o and down with the residual add; gate_up
with the post-attention norm and SiLU; the LM head with the final norm; and the MLP as the fused step launches it by
default: gate_up_norm, gate_up with the norm and no epilogue, and down_silu, down with SiLU(gate) * up as its
prologue and the residual; and for lean_fused_pdl_norm_graph o_norm, o with the residual and the post-attention
norm made by its last row block, and gate_up_plain, gate_up with no prologue; for lean_fused_pdl_epilogues_graph
qkv_rotary, qkv with the rotary and the cache write as its epilogue; for lean_fused_silu_epilogue_graph gate_up_silu,
gate_up with no prologue and the SiLU epilogue, then down with the residual alone; for the norm-scale levers
(lean_fused_norm_scale_graph, lean_fused_kv_together_graph) qkv_scaled, o_scale, gate_up_plain_scaled and
down_silu_scale, each norm left to the next product as a scale), over each shape's candidate configs (fused_configs.candidate_configs: the table's first,
split-K where the shape has few row blocks), and one layer's chain.

Per (shape, kernel, config): a random bf16 weight (std 0.02), the result checked against its reference first
(fused.*_reference; cuBLAS against the fp32 product; max|y - ref| / max|ref| <= TOL, a rotary product's the
largest over q and the k and v rows it wrote into the caches, each against its reference's; else status `error` and
no timing); then
  events  REPS single calls, each between two CUDA events after an L2 flush and a short GPU sleep (so the kernel is
          queued when its start event fires: GPU time, not launch time), no PDL;
  graph   a CUDA graph of GRAPH_CALLS back-to-back calls, replayed GRAPH_REPLAYS times, us per call (what a
          graphed step pays, launch gaps included); the calls cycle over enough weight copies that the working
          set is >= 3 L2 sizes; the fused kernel with and without PDL (pdl column), cuBLAS without.
cuBLAS times the product alone; the fused kernel includes its prologue and epilogue, which the unfused step runs
as kernels of their own: the layer rows compare like with like.
  layer   LAYERS decoder layers of the model (real widths, ctx CTX in the cache) captured in one CUDA graph and
          replayed, us per layer: `lean` = LeanLayer.forward with the split-KV attention (the lean_attn_graph
          step's kernels: cuBLAS products, torch's small ops), `fused` = LeanLayer.fused_step (the
          lean_fused_graph step's), with and without PDL (lean_fused_pdl_graph), and `fused_silu_epilogue` =
          the same with the SiLU in gate_up's epilogue (FusedOps(silu_in_down=False)), with PDL where available.
          `fused_norm_epilogue` = the fused layer with the norm in o's epilogue (FusedOps(norm_in_epilogue=True),
          the lean_fused_pdl_norm_graph step's), with PDL where available; `fused_epilogues` = that layer with the
          rotary and the cache write in qkv's epilogue too (the lean_fused_pdl_epilogues_graph step's), and
          `fused_early` = the norm-epilogue layer with every kernel triggering its dependents as it starts
          (lean_fused_early_graph; kernel `fused_early` in graph mode: a product's table config so launched).
          The fused layer's output is checked against the lean layer's first (relative error <= LAYER_TOL).

Writes data/diagnostics/fused_gemv.csv (decodegap.diagnostics; DECODEGAP_DIAG_DIR=OUTDIR writes OUTDIR/fused_gemv.csv),
one row per repetition (gpu, model, shape, K, N, kernel, config, pdl, mode, rep, us, bytes, gbps, max_rel_err,
status, reason, then the run's provenance: bytes are the weights streamed, for a layer its four products and the
KV it reads), and prints a summary: per shape the median us and GB/s of cuBLAS and of the table's config and the
fastest candidate, per model the layer chains; the fastest candidate of each shape is what configs.py's tables hold.
Usage (repository root, GPU): PYTHONPATH=lib python3 bench/fused_gemv.py (bench/measure.sh's `fused` step;
FUSED_GEMV_PRODUCTS=qkv_scaled,o_scale,... times those products alone)
"""

import math
import os
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

from decodegap import timing
from decodegap.diagnostics import Rows
from decodegap.harness import lean, models
from decodegap.kernels.fused import configs as fused_configs, launch as fused, reference as fused_reference
from decodegap.kernels.fused import rotary_args
from decodegap.kernels.fused.norm_scale import NormScale
from decodegap.kernels.fused.product_check import checked_error, rel_err

DEVICE = "cuda"
TOL, LAYER_TOL = 1e-2, 5e-2
REPS, GRAPH_CALLS, GRAPH_REPLAYS = 30, 20, 10
LAYERS, CTX = 4, 2048
EPS = 1e-5
L2_BYTES_DEFAULT = 50 * 2 ** 20  # H100/H200 L2, where torch does not report the device's
MODELS = tuple(os.environ.get("FUSED_GEMV_MODELS", "llama-3.1-8b,qwen2.5-7b,mistral-7b-v0.3").split(","))
"""The models whose products are timed (FUSED_GEMV_MODELS, comma-separated keys of data/models/; default the grid's
three: FUSED_GEMV_MODELS=llama-3.2-1b times the megakernel cell's); a product whose (K, N, flavour) an earlier model
already had (Mistral's layers are Llama's widths) is not timed again, and a model whose every layer product was is
given no layer chain: Mistral adds its LM head (32768 rows) only."""
PRODUCTS = tuple(p for p in os.environ.get("FUSED_GEMV_PRODUCTS", "").split(",") if p)
"""The products timed (FUSED_GEMV_PRODUCTS, comma-separated names of kernels.fused.configs.products, e.g. the
norm-scale levers' qkv_scaled,o_scale,gate_up_plain_scaled,down_silu_scale; default every product, then the layer
chains): with it no layer chain is timed; a name no model has is refused before the CSV is opened."""
SQUARE_ROWS = 16
"""Elements of x a sum of squares covers in a scaled product's operands: the producer's row block (BLOCK_N 16, the
table's o and down)."""
FIELDS = ("gpu", "model", "shape", "K", "N", "kernel", "config", "pdl", "mode", "rep", "us", "bytes", "gbps",
          "max_rel_err", "status", "reason")


def products(key):
    """(shape, K, N weight rows, flavour) of a model's fused products (fused_configs.products)."""
    return fused_configs.products(models.load_spec(key).config)


def operands(K, N, flavour, gen):
    """(x, weight, norm weight, bias, residual) of one product, on the GPU (x [gate; up] of 2K for the silu_residual
    flavours; the output norm's weight in the bias's place for the residual_norm and the out_scale ones; for the
    scaled ones, x_scaled and, in the norm weight's place, its producer's sums of squares, one every SQUARE_ROWS
    elements of x as a producer's row blocks write them)."""
    x = torch.randn(2 * K if flavour.startswith("silu_residual") else K, generator=gen, device=DEVICE).bfloat16()
    w = (0.02 * torch.randn(N, K, generator=gen, device=DEVICE)).bfloat16()
    nw = (1 + 0.1 * torch.randn(K, generator=gen, device=DEVICE)).bfloat16()
    if flavour.endswith("scaled"):  # the sums of squares in nw's place
        nw = x.float().pow(2).reshape(-1, SQUARE_ROWS).sum(1)
    b = torch.randn(N, generator=gen, device=DEVICE).bfloat16() if "bias" in flavour.split("_") else None
    if flavour.endswith(("residual_norm", "_scale")):  # the output norm's weight, in b's place
        b = (1 + 0.1 * torch.randn(N, generator=gen, device=DEVICE)).bfloat16()
    res = torch.randn(N // 2 if flavour.endswith("gate_up") else N, generator=gen, device=DEVICE).bfloat16()
    return x, w, nw, b, res


def rotary_operands(key, gen):
    """(cos, sin, start_pos, k_cache, v_cache, H, Hkv) of the qkv product's rotary epilogue on model `key`'s heads:
    random bf16 tables and caches of CTX + 8 positions, the token at CTX (rotary_args.random_rotary)."""
    return rotary_args.random_rotary(models.load_spec(key).config, CTX, DEVICE, gen)


def fused_call(flavour, nw, b, res, config, pdl, rotary=None, reference_rotary=None):
    """call(x, w) of the fused kernel for `flavour`, and its reference ref(x, w) (`rotary`: the rotary flavours'
    operands, rotary_operands; the reference writes into `reference_rotary`'s caches, a copy of them made here where
    it is None). `pdl`: False, True or "early" (PDL with the early trigger)."""
    launch = dict(pdl=bool(pdl), early_trigger=pdl == "early")
    if flavour.endswith("_rotary"):
        bias = b if "bias" in flavour else None
        ref_rotary = rotary_args.with_own_caches(rotary) if reference_rotary is None else reference_rotary
        if not flavour.startswith("norm"):  # after the norm in the previous down's epilogue: no prologue
            return (lambda x, w: fused.fused_gemv(x, w, bias=bias, rotary=rotary, config=config, **launch),
                    lambda x, w: fused_reference.gemv_rotary_reference(x, w, bias, ref_rotary))
        return (lambda x, w: fused.fused_gemv(x, w, norm_weight=nw, eps=EPS, bias=bias, rotary=rotary,
                                              config=config, **launch),
                lambda x, w: fused_reference.rmsnorm_gemv_rotary_reference(x, nw, w, bias, EPS, ref_rotary))
    if flavour.endswith("scaled"):  # x is x_scaled, nw its producer's sums of squares
        bias = b if flavour == "bias_scaled" else None
        return (lambda x, w: fused.fused_gemv(x, w, bias=bias, norm_scale=NormScale(x, nw, EPS), config=config,
                                              **launch),
                lambda x, w: fused_reference.scaled_linear_reference(NormScale(x, nw, EPS), w, bias))
    if flavour.endswith("residual_scale"):  # b is the output norm's weight
        silu = flavour.startswith("silu")
        reference = fused_reference.silu_gemv_residual_reference if silu else fused_reference.gemv_residual_reference
        return (lambda x, w: _scale_outputs(*fused.fused_gemv(x, w, silu_x=silu, residual=res, out_scale=(b, EPS),
                                                               config=config, **launch)),
                lambda x, w: _scale_outputs(reference(x, w, res), norm_weight=b))
    if flavour == "residual":
        return (lambda x, w: fused.fused_gemv(x, w, residual=res, config=config, **launch),
                lambda x, w: fused_reference.gemv_residual_reference(x, w, res))
    if flavour == "gate_up":
        return (lambda x, w: fused.fused_gemv(x, w, norm_weight=nw, eps=EPS, gate_up=True, config=config, **launch),
                lambda x, w: fused_reference.gate_up_silu_reference(x, nw, w, EPS))
    if flavour == "plain_gate_up":
        return (lambda x, w: fused.fused_gemv(x, w, gate_up=True, config=config, **launch),
                lambda x, w: fused_reference.gate_up_plain_silu_reference(x, w))
    if flavour == "residual_norm":
        return (lambda x, w: fused.fused_gemv(x, w, residual=res, out_norm=(b, EPS), config=config, **launch),
                lambda x, w: fused_reference.gemv_residual_norm_reference(x, w, res, b, EPS))
    if flavour in ("plain", "bias"):
        return (lambda x, w: fused.fused_gemv(x, w, bias=b, config=config, **launch), lambda x, w: F.linear(x, w, b))
    if flavour == "silu_residual":
        return (lambda x, w: fused.fused_gemv(x, w, silu_x=True, residual=res, config=config, **launch),
                lambda x, w: fused_reference.silu_gemv_residual_reference(x, w, res))
    if flavour == "silu_residual_norm":
        return (lambda x, w: fused.fused_gemv(x, w, silu_x=True, residual=res, out_norm=(b, EPS), config=config,
                                              **launch),
                lambda x, w: fused_reference.with_output_norm(fused_reference.silu_gemv_residual_reference(x, w, res),
                                                              (b, EPS)))
    return (lambda x, w: fused.fused_gemv(x, w, norm_weight=nw, eps=EPS, bias=b, config=config, **launch),
            lambda x, w: fused_reference.rmsnorm_gemv_reference(x, nw, w, b, EPS))


def _scale_outputs(y, scaled=None, norm_weight=None):
    """What an out_scale product's check compares: (y, x_scaled, the sum of its sums of squares); of a reference's y
    (`scaled` None), those of output_scale_reference(y, norm_weight)."""
    if scaled is None:
        scaled = fused_reference.output_scale_reference(y, norm_weight, EPS)
    return y, scaled.x_scaled, scaled.squares.sum().reshape(1)


def time_events(call, flush):
    def before():
        flush.zero_()
        torch.cuda._sleep(200_000)  # ~0.1 ms of GPU time: the call is queued before its start event fires

    return [ms * 1e3 for ms in timing.event_times_ms(call, REPS, cuda=True, before=before)]


def time_graph(calls):
    """us per call of a graph of GRAPH_CALLS calls cycling over `calls`."""
    def capture():
        for i in range(GRAPH_CALLS):
            calls[i % len(calls)]()

    return [ms * 1e3 / GRAPH_CALLS for ms in timing.graph_replay_ms(capture, GRAPH_REPLAYS, warm=calls[0])]


def layer_chain(key, pdl_ok, emit):
    """The layer rows of model `key` (see the module docstring)."""
    spec = models.load_spec(key)
    cfg = dict(spec.config, num_hidden_layers=LAYERS)
    model = models.build_model(models.ModelSpec(spec.key, spec.name, None, f"{LAYERS} layers", True, cfg), device=DEVICE)
    with torch.inference_mode():
        dec = lean.LeanDecoder(model, CTX + 8, ("attention",))
        for i in range(LAYERS):
            for name in (f"k_cache_{i}", f"v_cache_{i}"):
                getattr(dec, name).normal_()
        start = torch.tensor([CTX], device=DEVICE)
        pos, length = start.clone(), start + 1
        cos, sin = dec.cos[pos][None, None], dec.sin[pos][None, None]
        x0 = torch.randn(1, 1, cfg["hidden_size"], device=DEVICE).bfloat16()
        caches = [(getattr(dec, f"k_cache_{i}"), getattr(dec, f"v_cache_{i}")) for i in range(LAYERS)]

        def lean_step():
            x = x0
            for layer, (kc, vc) in zip(dec.layers, caches):
                x = layer(x, cos, sin, None, start, pos, kc, vc)
            return x

        def fused_step(pdl, silu_in_down=True, norm_in_epilogue=False, rotary_in_qkv=False, early_trigger=False):
            ops = fused.FusedOps(pdl=pdl, silu_in_down=silu_in_down, norm_in_epilogue=norm_in_epilogue,
                                 rotary_in_qkv=rotary_in_qkv, early_trigger=early_trigger)

            def run():
                x = x0.reshape(-1)
                for layer, (kc, vc) in zip(dec.layers, caches):
                    x = layer.fused_step(x, ops, dec.cos, dec.sin, start, length, kc, vc)
                return x
            return run

        ref = lean_step().reshape(-1)
        layer_bytes = sum(2 * w.numel() for w in (dec.layers[0].w_qkv, dec.layers[0].w_o, dec.layers[0].w_gate_up,
                                                  dec.layers[0].w_down))
        layer_bytes += 2 * 2 * dec.n_kv_heads * dec.head_dim * (CTX + 1)  # K and V read by the attention
        emit_args = dict(model=key, shape=f"{key} layer", K="", N="", config="table", bytes=layer_bytes)
        chains = [("lean", False, lean_step)] + [("fused", p, fused_step(p)) for p in sorted({False, pdl_ok})]
        chains.append(("fused_silu_epilogue", pdl_ok, fused_step(pdl_ok, silu_in_down=False)))
        chains.append(("fused_norm_epilogue", pdl_ok, fused_step(pdl_ok, norm_in_epilogue=True)))
        chains.append(("fused_epilogues", pdl_ok, fused_step(pdl_ok, norm_in_epilogue=True, rotary_in_qkv=True)))
        if pdl_ok:
            chains.append(("fused_early", True, fused_step(True, norm_in_epilogue=True, early_trigger=True)))
        for kernel, pdl, step in chains:
            try:
                err = 0.0 if kernel == "lean" else rel_err(step(), ref)
                if not err <= LAYER_TOL:
                    raise AssertionError(f"fused layers differ from the lean layers by {err:.3e} > {LAYER_TOL}")
                us = [ms * 1e3 / LAYERS for ms in timing.graph_replay_ms(step, GRAPH_REPLAYS)]
                emit(kernel=kernel, pdl=pdl, mode="layer", times=us, err=err, **emit_args)
            except Exception as exc:  # noqa: BLE001 (a failing chain is a row, not the end of the run)
                traceback.print_exc()
                emit(kernel=kernel, pdl=pdl, mode="layer", times=None, err=None, status="error",
                     reason=f"{type(exc).__name__}: {str(exc)[:300]}", **emit_args)
    torch.cuda.empty_cache()


def chosen(key):
    """Model `key`'s products to time: PRODUCTS' where given, else all of them."""
    return [p for p in products(key) if not PRODUCTS or p[0] in PRODUCTS]


def main():
    t0 = time.time()
    known = {p[0] for key in MODELS for p in products(key)}  # models.UnknownModelError names an unknown model
    if set(PRODUCTS) - known:
        sys.exit(f"FUSED_GEMV_PRODUCTS names {sorted(set(PRODUCTS) - known)}, which no model of FUSED_GEMV_MODELS has; "
                 f"known: {', '.join(sorted(known))}")
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or L2_BYTES_DEFAULT
    out = Rows("fused_gemv", FIELDS)
    gpu = torch.cuda.get_device_name()
    pdl_reason = fused.pdl_unavailable(DEVICE)
    pdl_ok = pdl_reason is None
    print(f"PDL: {'available' if pdl_ok else 'unavailable: ' + pdl_reason}", flush=True)
    flush = torch.empty(2 * l2 + 2 ** 20, dtype=torch.uint8, device=DEVICE)
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    rows = []

    def emit(times, err, pdl, status="ok", reason="", **fields):
        rows.extend(out.add_times(times, err=err, status=status, reason=reason, gpu=gpu, pdl=int(pdl), **fields))

    timed = set()
    for key in MODELS:
        fresh = [p for p in chosen(key) if p[1:] not in timed]
        timed |= {p[1:] for p in fresh}
        for name, K, N, flavour in fresh:
            shape, nbytes = f"{key} {name}", 2 * N * K
            x, w, nw, b, res = operands(K, N, flavour, gen)
            xb = x[:K]  # cuBLAS's operand: the product alone
            bias = b if flavour in ("norm_bias", "norm_bias_rotary") else None
            rotary = rotary_operands(key, gen) if flavour.endswith("_rotary") else None
            copies = [w] + [w.clone() for _ in range(max(1, math.ceil(3 * l2 / nbytes)) - 1)]
            base = dict(model=key, shape=shape, K=K, N=N, bytes=nbytes)
            try:  # cuBLAS, the product alone
                err = rel_err(F.linear(xb, w, bias), xb.float() @ w.float().T + (0 if bias is None else bias.float()))
                if not err <= TOL:
                    raise AssertionError(f"max_rel_err {err:.3e} > {TOL}")
                emit(kernel="cublas", config="", pdl=False, mode="events", err=err,
                     times=time_events(lambda: F.linear(xb, w, bias), flush), **base)
                emit(kernel="cublas", config="", pdl=False, mode="graph", err=err,
                     times=time_graph([lambda c=c: F.linear(xb, c, bias) for c in copies]), **base)
            except Exception as exc:  # noqa: BLE001
                traceback.print_exc()
                emit(kernel="cublas", config="", pdl=False, mode="events", times=None, err=None, status="error",
                     reason=f"{type(exc).__name__}: {str(exc)[:300]}", **base)
            for i, config in enumerate(fused_configs.flavour_candidates(N, K, flavour)):
                for pdl in sorted({False, pdl_ok}) + (["early"] if pdl_ok and i == 0 else []):  # the table's early
                    own = None if rotary is None else rotary_args.with_own_caches(rotary)
                    call, reference = fused_call(flavour, nw, b, res, config, pdl, rotary, own)
                    kernel = "fused_early" if pdl == "early" else "fused"
                    try:
                        err = checked_error(call, reference, x, w, rotary, own)
                        if not err <= TOL:  # NaN included
                            raise AssertionError(f"max_rel_err {err:.3e} > {TOL}")
                        if not pdl:
                            emit(kernel="fused", config=config.key, pdl=False, mode="events", err=err,
                                 times=time_events(lambda: call(x, w), flush), **base)
                        emit(kernel=kernel, config=config.key, pdl=bool(pdl), mode="graph", err=err,
                             times=time_graph([lambda c=c: call(x, c) for c in copies]), **base)
                    except Exception as exc:  # noqa: BLE001
                        traceback.print_exc()
                        emit(kernel=kernel, config=config.key, pdl=bool(pdl), mode="graph", times=None, err=None,
                             status="error", reason=f"{type(exc).__name__}: {str(exc)[:300]}", **base)
            torch.cuda.empty_cache()
            print(f"{shape}: done at {time.time() - t0:.0f} s", flush=True)
        if not PRODUCTS and any(name != "lm_head" for name, *_ in fresh):
            layer_chain(key, pdl_ok, emit)
    summary(rows, gpu)
    print(f"wrote {out.path} ({len(rows)} rows) in {time.time() - t0:.0f} s")


def summary(rows, gpu):
    """Per shape: cuBLAS, the table's config and the fastest candidate (graph mode, median us and GB/s); per
    model: the layer chains."""
    med = {}
    for r in rows:
        if r["status"] == "ok":
            med.setdefault((r["shape"], r["kernel"], r["config"], r["pdl"], r["mode"]), []).append(float(r["us"]))
    med = {k: statistics.median(v) for k, v in med.items()}
    nbytes = {r["shape"]: int(r["bytes"]) for r in rows}
    table = {f"{key} {name}": fused_configs.gemv_config(N, K, **fused_configs.flavour_lookup(flavour)).key
             for key in MODELS for name, K, N, flavour in products(key)}
    print(f"\n{gpu}: median us per call (graph mode) and GB/s (weight bytes / time)")
    for shape in dict.fromkeys(r["shape"] for r in rows):
        line = [f"  {shape:24s}"]
        for label, k in [("cuBLAS", (shape, "cublas", "", 0, "graph")),
                         ("table", (shape, "fused", table.get(shape, "table"), 0, "graph")),
                         ("table+PDL", (shape, "fused", table.get(shape, "table"), 1, "graph")),
                         ("lean", (shape, "lean", "table", 0, "layer")),
                         ("fused", (shape, "fused", "table", 0, "layer")),
                         ("fused+PDL", (shape, "fused", "table", 1, "layer")),
                         ("SiLU epilogue+PDL", (shape, "fused_silu_epilogue", "table", 1, "layer")),
                         ("norm epilogue+PDL", (shape, "fused_norm_epilogue", "table", 1, "layer")),
                         ("norm, rotary epilogues+PDL", (shape, "fused_epilogues", "table", 1, "layer")),
                         ("table+early PDL", (shape, "fused_early", table.get(shape, "table"), 1, "graph")),
                         ("norm epilogue+early PDL", (shape, "fused_early", "table", 1, "layer"))]:
            if k in med:
                line.append(f"{label} {med[k]:7.2f} us {nbytes[shape] / med[k] / 1e3:5.0f} GB/s")
        fastest = min(((v, k) for k, v in med.items() if k[0] == shape and k[1] == "fused" and k[4] == "graph"),
                      default=None)
        if fastest:
            line.append(f"fastest {fastest[1][2]}{'+PDL' if fastest[1][3] else ''} {fastest[0]:.2f} us")
        print(" | ".join(line))
    errors = [r for r in rows if r["status"] != "ok"]
    for r in errors:
        print(f"  ERROR {r['shape']} {r['kernel']} {r['config']} pdl={r['pdl']}: {r['reason']}")


if __name__ == "__main__":
    if len(sys.argv) != 1:
        sys.exit("usage: PYTHONPATH=lib python3 bench/fused_gemv.py (DECODEGAP_DIAG_DIR=OUTDIR to write elsewhere)")
    main()
