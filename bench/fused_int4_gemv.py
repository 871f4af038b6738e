"""The fused int4 product (decodegap.kernels.fused_int4) on every config of the int4 GEMV's INT4_CONFIGS and each
launch (none, pdl, early: without PDL, with it, with its early trigger; the last two where this GPU has PDL), per
product of the fused int4 step (kernels.fused_int4.configs.products) of Llama-3.1-8B and Qwen2.5-7B (Mistral-7B-v0.3's
are Llama's widths), beside the config the per-process tuner picks: the rows kernels.fused_int4.configs'
FUSED_INT4_CONFIGS is to be read from.

Per (shape, config, launch): an int4-triton layer quantised from a random bf16 weight (std 0.02; Qwen2's qkv with its
bias), its product checked against its reference first (the int4 layer's rounding with the fused references'
prologue and epilogue, kernels.fused.reference; max|y - ref| / max|ref| <= TOL, else status `error` and no timing),
then timed in graph mode: a CUDA graph of GRAPH_CALLS back-to-back calls cycling over enough copies of the layer that
the weights read are >= 3 L2 sizes, replayed GRAPH_REPLAYS times, us per call (what a graphed step pays a product,
launch included). Then the tuner's choice for the shape, flavour and launch (launch.choose_config with an empty
table: Triton's do_bench on the kernel alone), as a row of mode `tuned` with no time.

Writes data/diagnostics/fused_int4_gemv.csv (decodegap.diagnostics; DECODEGAP_DIAG_DIR=OUTDIR writes
OUTDIR/fused_int4_gemv.csv), one row per repetition (gpu, model, shape, K, N, flavour, config, launch, mode, rep, us,
bytes, gbps, max_rel_err, status, reason, then the run's provenance; bytes: the packed words, scales and offsets
streamed), and prints per shape and launch the fastest config, the tuner's and their times, then the table lines the
rows give (over the whole file this GPU has rows in, so that a cell finished by a resumed run gets its line).
A run resumes, config by config: a config of a product and launch that already has a graph row for this GPU (`ok`,
or `error`: a failing config fails again), in the file it appends to or in the repository's
data/diagnostics/fused_int4_gemv.csv, is not timed again, nor the tuner's choice where a row of it exists; --again
times every one (bench/measure.sh's INT4_CONFIGS_AGAIN=1 then starts a file of its own, not seeded with the committed
rows, so no config pools two runs' times).
Usage (repository root, GPU): PYTHONPATH=lib python3 bench/fused_int4_gemv.py [--models llama-3.1-8b,qwen2.5-7b]
    [--launches none,pdl,early] [--products qkv,down,...] [--again]   (bench/measure.sh's `int4_configs` step;
    INT4_LAUNCHES and INT4_PRODUCTS pass the two lists)
"""

import argparse
import copy
import csv
import math
import statistics
import sys
import time
import traceback

import torch

from decodegap import paths, timing
from decodegap.diagnostics import Rows
from decodegap.harness import models
from decodegap.kernels.fused import launch as fused, rotary_args
from decodegap.kernels.fused.product_check import checked_error
from decodegap.kernels.fused_int4 import configs as int4_configs, flavours, launch as fused_int4
from decodegap.kernels.fused_int4.configs import config_key
from decodegap.kernels.int4_gemv.kernel import INT4_CONFIGS
from decodegap.kernels.int4_gemv.layer import Int4GemvLinear

DEVICE = "cuda"
TOL, EPS = 1e-2, 1e-5
CTX = 2048  # the rotary flavours' position (bench/fused_gemv.py's)
GRAPH_CALLS, GRAPH_REPLAYS = 20, 10
L2_BYTES_DEFAULT = 50 * 2 ** 20  # H100/H200 L2, where torch does not report the device's
MODELS = ("llama-3.1-8b", "qwen2.5-7b")
FIELDS = ("gpu", "model", "shape", "K", "N", "flavour", "config", "launch", "mode", "rep", "us", "bytes", "gbps",
          "max_rel_err", "status", "reason")


def layer_bytes(layer) -> int:
    """The bytes one call streams from the layer: its packed words, scales and offsets (and bias)."""
    tensors = fused_int4.int4_tensors(layer)
    return sum(t.numel() * t.element_size() for t in (tensors[0], tensors[1], tensors[2], tensors[4])
               if t is not None)


def operands(K, N, flavour, gen):
    """(x, int4 layer, norm weight, residual, output-norm weight) of one product (x [gate; up] of 2K for
    the silu_residual flavours; Qwen2's qkv bias inside the layer)."""
    x = torch.randn(2 * K if flavour.startswith("silu_residual") else K, generator=gen, device=DEVICE).bfloat16()
    w = (0.02 * torch.randn(N, K, generator=gen, device=DEVICE)).bfloat16()
    b = torch.randn(N, generator=gen, device=DEVICE).bfloat16() if "bias" in flavour.split("_") else None
    layer = Int4GemvLinear.from_weight(w, bias=b)
    nw = (1 + 0.1 * torch.randn(K, generator=gen, device=DEVICE)).bfloat16()
    res, on = (torch.randn(N, generator=gen, device=DEVICE).bfloat16() for _ in range(2))
    return x, layer, nw, res, on


def attempted(files, gpu: str) -> dict:
    """{(K, N, flavour, launch): the configs with a graph-mode row (`ok` or `error`) for `gpu` (a device name), and
    "tuned" where the tuner's choice has a row} over `files` (those that exist)."""
    done: dict = {}
    for path in files:
        if not path.exists():
            continue
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                if r["gpu"] != gpu or r["status"] not in ("ok", "error"):
                    continue
                cell = (int(r["K"]), int(r["N"]), r["flavour"], r["launch"])
                if r["mode"] == "graph":
                    done.setdefault(cell, set()).add(r["config"])
                elif r["mode"] == "tuned" and r["status"] == "ok":
                    done.setdefault(cell, set()).add("tuned")
    return done


def complete_cells(done: dict) -> set:
    """(K, N, flavour, launch) of the cells of `done` (attempted) with a graph-mode row of every config of
    INT4_CONFIGS and the tuner's choice: nothing left to time there."""
    wanted = {config_key(c) for c in INT4_CONFIGS} | {"tuned"}
    return {cell for cell, configs in done.items() if wanted <= configs}


def product_call(flavour, nw, res, on, config, launch, rotary=None, reference_rotary=None):
    """call(x, layer) of the fused int4 product of `flavour` on `config` and `launch`, and its reference
    ref(x, layer) (kernels.fused_int4.flavours.flavour_product; `rotary`: the rotary flavours' operands,
    `reference_rotary` the caches the reference writes)."""
    return flavours.flavour_product(flavour, nw, res, on, EPS, rotary=rotary, reference_rotary=reference_rotary,
                                    pdl=launch != "none", early_trigger=launch == "early", config=config)


def time_graph(calls):
    """us per call of a graph of GRAPH_CALLS calls cycling over `calls`."""
    def capture():
        for i in range(GRAPH_CALLS):
            calls[i % len(calls)]()

    return [ms * 1e3 / GRAPH_CALLS for ms in timing.graph_replay_ms(capture, GRAPH_REPLAYS, warm=calls[0])]


def tuned_choice(x, layer, flavour, nw, res, on, launch, rotary=None) -> str:
    """The tuner's config for this product and launch (an empty table: launch._tuned's do_bench), as config_key."""
    before = dict(fused_int4._TUNED)
    saved = dict(int4_configs.FUSED_INT4_CONFIGS)
    int4_configs.FUSED_INT4_CONFIGS.clear()
    try:
        product_call(flavour, nw, res, on, None, launch, rotary)[0](x, layer)
        torch.cuda.synchronize()
    finally:
        int4_configs.FUSED_INT4_CONFIGS.update(saved)
    new = [v for k, v in fused_int4._TUNED.items() if k not in before]
    return config_key(new[0]) if new else ""


def time_launch(emit, base, x, layer, copies, operands_, launch, had):
    """Every config of INT4_CONFIGS not in `had` (those with rows already) for one product and launch, each checked
    against its reference before it is timed (a failing one a row of status `error`), then the tuner's choice
    unless `had` has it; rows through `emit`."""
    flavour, nw, res, on, rotary = operands_
    ref_rotary = None if rotary is None else rotary_args.with_own_caches(rotary)
    for config in (c for c in INT4_CONFIGS if config_key(c) not in had):
        call, reference = product_call(flavour, nw, res, on, config, launch, rotary, ref_rotary)
        try:
            err = checked_error(call, reference, x, layer, rotary, ref_rotary)
            if not err <= TOL:  # NaN included
                raise AssertionError(f"max_rel_err {err:.3e} > {TOL}")
            emit(config=config_key(config), launch=launch, mode="graph", err=err,
                 times=time_graph([lambda c=c: call(x, c) for c in copies]), **base)
        except Exception as exc:  # noqa: BLE001 (a failing config is a row, not the end of the run)
            traceback.print_exc()
            emit(config=config_key(config), launch=launch, mode="graph", times=None, status="error",
                 reason=f"{type(exc).__name__}: {str(exc)[:300]}", **base)
    if "tuned" in had:
        return
    try:
        emit(config=tuned_choice(x, layer, flavour, nw, res, on, launch, rotary), launch=launch, mode="tuned",
             times=None, reason="launch._tuned's choice (Triton's do_bench, kernel alone)", **base)
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc()
        emit(config="", launch=launch, mode="tuned", times=None, status="error",
             reason=f"{type(exc).__name__}: {str(exc)[:300]}", **base)


def chosen_products(text: str) -> set:
    """The product names of a --products value, each one of INT4_STEP_PRODUCTS; exits naming an unknown one (before
    anything is written)."""
    names = [x for x in text.split(",") if x]
    unknown = [x for x in names if x not in int4_configs.INT4_STEP_PRODUCTS]
    if unknown or not names:
        sys.exit(f"fused_int4_gemv: --products takes names of {', '.join(int4_configs.INT4_STEP_PRODUCTS)}; got "
                 f"{text!r}")
    return set(names)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--launches", default=",".join(int4_configs.LAUNCHES))
    parser.add_argument("--products", default=",".join(int4_configs.INT4_STEP_PRODUCTS),
                        help="comma-separated product names of INT4_STEP_PRODUCTS (default: all of them)")
    parser.add_argument("--again", action="store_true", help="time the products and launches already timed too")
    args = parser.parse_args(argv)
    keys = [k for k in args.models.split(",") if k]
    launches = [x for x in args.launches.split(",") if x]
    unknown = [x for x in launches if x not in int4_configs.LAUNCHES]
    if unknown or not launches:
        sys.exit(f"fused_int4_gemv: --launches takes {', '.join(int4_configs.LAUNCHES)}; got {args.launches!r}")
    wanted = chosen_products(args.products)
    for key in keys:  # an unknown model is refused here, before anything is written
        try:
            models.load_spec(key)
        except models.UnknownModelError as exc:
            sys.exit(f"fused_int4_gemv: {exc}")
    if not torch.cuda.is_available():
        sys.exit("fused_int4_gemv: needs a CUDA device (the kernel is Triton's, timed in CUDA graphs)")
    pdl_reason = fused.pdl_unavailable(DEVICE)
    if pdl_reason is not None and set(launches) - {"none"}:
        print(f"PDL unavailable ({pdl_reason}): timing the launch without it only", flush=True)
        launches = ["none"]
    t0 = time.time()
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or L2_BYTES_DEFAULT
    out = Rows("fused_int4_gemv", FIELDS)
    gpu = torch.cuda.get_device_name()
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    rows = []
    done = {} if args.again else attempted({out.path, paths.DATA / "diagnostics" / "fused_int4_gemv.csv"}, gpu)
    complete = complete_cells(done)

    def emit(times, status="ok", reason="", err=None, **fields):
        rows.extend(out.add_times(times, err=err, status=status, reason=reason, gpu=gpu, **fields))

    timed = set()
    for key in keys:
        for name, K, N, flavour in int4_configs.products(models.load_spec(key).config):
            if name not in wanted or (K, N, flavour) in timed:
                continue
            timed.add((K, N, flavour))
            todo = [launch for launch in launches if (K, N, flavour, launch) not in complete]
            if not todo:
                print(f"{key} {name}: every config timed at {', '.join(launches)} already (--again times it again)")
                continue
            x, layer, nw, res, on = operands(K, N, flavour, gen)
            spec_config = models.load_spec(key).config
            rotary = rotary_args.random_rotary(spec_config, CTX, DEVICE, gen) if flavour.endswith("_rotary") else None
            nbytes = layer_bytes(layer)
            copies = [layer] + [copy.deepcopy(layer) for _ in range(max(1, math.ceil(3 * l2 / nbytes)) - 1)]
            base = dict(model=key, shape=f"{key} {name}", K=K, N=N, flavour=flavour, bytes=nbytes)
            for launch in todo:
                time_launch(emit, base, x, layer, copies, (flavour, nw, res, on, rotary), launch,
                            done.get((K, N, flavour, launch), set()))
            del copies
            torch.cuda.empty_cache()
            print(f"{key} {name}: done at {time.time() - t0:.0f} s", flush=True)
    with open(out.path, newline="") as fh:  # the whole file: a resumed cell's configs come from two runs
        summary([r for r in csv.DictReader(fh) if r["gpu"] == gpu], gpu)
    print(f"wrote {out.path} ({len(rows)} rows) in {time.time() - t0:.0f} s")


def summary(rows, gpu):
    """Per shape and launch: the fastest config and the tuner's (graph mode, median us and GB/s), then the
    FUSED_INT4_CONFIGS lines of the fastest, for the shapes and launches where every config was timed (a run cut
    part-way through a shape names no fastest there)."""
    med, tuned, meta = {}, {}, {}
    for r in rows:
        cell = (r["shape"], r["launch"])
        meta[r["shape"]] = (int(r["N"]), int(r["K"]), r["flavour"], int(r["bytes"]))
        if r["mode"] == "tuned" and r["status"] == "ok":
            tuned[cell] = r["config"]
        elif r["status"] == "ok":
            med.setdefault(cell, {}).setdefault(r["config"], []).append(float(r["us"]))
    print(f"\n{gpu}: median us per call (graph mode) and GB/s (bytes streamed / time)")
    lines = []
    for (shape, launch), by_config in med.items():
        times = {c: statistics.median(v) for c, v in by_config.items()}
        best = min(times, key=times.get)
        N, K, flavour, nbytes = meta[shape]
        pick = tuned.get((shape, launch), "")
        if len(times) < len(INT4_CONFIGS):
            print(f"  {shape:24s} {launch:5s} {len(times)} of {len(INT4_CONFIGS)} configs timed: no entry")
            continue
        text = (f"  {shape:24s} {launch:5s} fastest {best} {times[best]:7.2f} us {nbytes / times[best] / 1e3:5.0f} GB/s"
                + (f" | tuned {pick} {times[pick]:7.2f} us" if pick in times else " | tuned -"))
        print(text)
        block_n, sub, warps = (int(part[1:]) for part in best.split("_"))
        lines.append(f"    ({N}, {K}, {flavour!r}, {launch!r}): ({block_n}, {sub}, {warps}),  # {shape}")
    for r in rows:
        if r["status"] != "ok":
            print(f"  ERROR {r['shape']} {r['config']} {r['launch']}: {r['reason']}")
    print("\nFUSED_INT4_CONFIGS entries of the fastest configs:\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
