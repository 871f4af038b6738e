"""The int4-triton GEMV against PyTorch's tinygemm int4 kernel and bf16 F.linear at batch 1, on every
product shape of Llama-3.1-8B and Qwen-2.5-7B (q/k/v and gate/up fused, group size 128), and one Llama
layer's four products in sequence.

Per (shape, kernel): a random bf16 weight (std 0.02), quantised by int4_gemv.format.quantise_rtn (tinygemm gets
the same codes and scales, its zero z = m + 8 s in bf16); the result checked against the fp32 product
with the kernel's own dequantised weight (max|y - ref| / max|ref| <= TOL, else status `error` and no
timing); then
  events  REPS single calls, each between two CUDA events, with a short GPU sleep queued before so the
          kernel is waiting when the first event fires (its GPU time, not the launch's CPU time), and the
          L2 cache flushed before each (a decode step streams every weight once);
  graph   a CUDA graph of GRAPH_CALLS back-to-back calls, replayed GRAPH_REPLAYS times: per call, what a
          graphed decode step pays (launch gaps included); the calls cycle over enough weight copies that
          the working set is >= 3 L2 sizes, so no call finds its weight in L2.
The layer rows: the four Llama products in sequence, graphed, GRAPH_CALLS layers a replay; us per layer.

Writes data/diagnostics/int4_gemv.csv (decodegap.diagnostics; DECODEGAP_DIAG_DIR=OUTDIR writes OUTDIR/int4_gemv.csv),
one row per repetition (gpu, kernel, shape, K, N, group_size, config, mode, rep, us, bytes, max_rel_err, status,
reason, then the run's provenance), prints the autotuner's choice and timings per shape and a summary (median us
and GB/s). Usage (repository root, GPU): PYTHONPATH=lib python3 bench/int4_gemv.py (bench/measure.sh's `gemv` step)
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
from decodegap.kernels.int4_gemv import format as int4_format, kernel as int4_kernel

DEVICE = "cuda"
G = 128
TOL = 1e-2
REPS, GRAPH_CALLS, GRAPH_REPLAYS = 200, 100, 20
PRECOMPILE_S = 90  # the parallel precompile's limit; the autotuner compiles whatever is left
L2_BYTES_DEFAULT = 50 * 2 ** 20  # H100/H200 L2, where torch does not report the device's
L2_BYTES = L2_BYTES_DEFAULT  # main() sets the device's
SHAPES = {  # shape name -> (K, N)
    "llama-3.1-8b qkv": (4096, 6144), "llama-3.1-8b o": (4096, 4096),
    "llama-3.1-8b gate_up": (4096, 28672), "llama-3.1-8b down": (14336, 4096),
    "qwen2.5-7b qkv": (3584, 4608), "qwen2.5-7b o": (3584, 3584),
    "qwen2.5-7b gate_up": (3584, 37888), "qwen2.5-7b down": (18944, 3584),
}
LAYER = ("llama-3.1-8b qkv", "llama-3.1-8b o", "llama-3.1-8b gate_up", "llama-3.1-8b down")
KERNELS = ("int4-triton", "int4-tinygemm", "bf16-linear")
FIELDS = ("gpu", "kernel", "shape", "K", "N", "group_size", "config", "mode", "rep", "us", "bytes",
          "max_rel_err", "status", "reason")


def _compile_one(K, block_n, sub, warps):
    """Compile one (K, config) of the int4 kernel into Triton's on-disk cache (a pool worker)."""
    fn = int4_kernel._kernel().fn
    fn.warmup(torch.int32, torch.int32, torch.bfloat16, torch.bfloat16, torch.bfloat16, 4096, *int4_kernel._MAGIC, K, G=G,
              BLOCK_N=block_n, CHUNKS=32 * warps, SUB_MAX=sub, num_warps=warps, num_stages=1, grid=(1,))


def precompile(Ks):
    """Every (K, config) compiled in parallel processes before the autotuner asks for them one at a time
    (it then finds them in the cache). Best effort: whatever fails here is compiled by the autotuner."""
    from concurrent.futures import ProcessPoolExecutor, wait
    from multiprocessing import get_context

    t0 = time.time()
    jobs = [(K, *c) for K in sorted(set(Ks)) for c in int4_kernel.INT4_CONFIGS]
    try:
        pool = ProcessPoolExecutor(max_workers=min(16, os.cpu_count() or 1), mp_context=get_context("spawn"))
        futures = [pool.submit(_compile_one, *j) for j in jobs]
        wait(futures, timeout=PRECOMPILE_S)
        pool.shutdown(wait=False, cancel_futures=True)  # a stuck worker must not hold up the run
        failed = [f"{j}: {'not done in time' if not f.done() or f.cancelled() else f.exception()}"
                  for j, f in zip(jobs, futures) if not f.done() or f.cancelled() or f.exception() is not None]
    except Exception as exc:  # noqa: BLE001
        failed = [f"pool: {type(exc).__name__}: {exc}"]
    print(f"precompiled {len(jobs) - len(failed)}/{len(jobs)} kernels in {time.time() - t0:.0f} s"
          + "".join(f"\n  failed {f[:300]}" for f in failed), flush=True)


def rel_err(y, ref):
    return ((y.float() - ref).abs().max() / ref.abs().max()).item()


def build(kernel, K, N, gen):
    """(copies: list of call(x) -> y, one per weight copy; max_rel_err; bytes a call streams)."""
    w = (0.02 * torch.randn(N, K, generator=gen, device=DEVICE)).bfloat16()
    x = torch.randn(1, K, generator=gen, device=DEVICE).bfloat16()
    if kernel == "bf16-linear":
        nbytes = 2 * N * K
        make = lambda: (lambda w2: (lambda xx: F.linear(xx, w2)))(w.clone())  # noqa: E731
        ref = x.float() @ w.float().T
    else:
        packed, s, m = int4_format.quantise_rtn(w, G)
        nbytes = int4_format.stream_bytes(K, N, G)
        if kernel == "int4-triton":
            ref = x.float() @ int4_format.dequantise(packed, s, m, G).T
            make = lambda: (lambda p, s2, m2: (lambda xx: int4_kernel.int4_gemv(xx, p, s2, m2, G)))(  # noqa: E731
                packed.clone(), s.clone(), m.clone())
        else:
            q = int4_format.unpack(packed)
            tg = torch.ops.aten._convert_weight_to_int4pack((q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8), 8)
            z = (m.float() + 8 * s.float()).bfloat16()
            sz = torch.stack([s.t(), z.t()], dim=-1).contiguous()  # [K/G, N, 2]
            w_tg = (q.float() - 8) * s.float().repeat_interleave(G, 1) + z.float().repeat_interleave(G, 1)
            ref = x.float() @ w_tg.T
            make = lambda: (lambda p, sz2: (lambda xx: torch.ops.aten._weight_int4pack_mm(xx, p, G, sz2)))(  # noqa
                tg.clone(), sz.clone())
    first = make()
    err = rel_err(first(x), ref)
    n_copies = max(1, math.ceil(3 * L2_BYTES / nbytes))
    return x, [first] + [make() for _ in range(n_copies - 1)], err, nbytes


def time_events(call, x, flush):
    """us of each of REPS single calls, each after an L2 flush and a short GPU sleep (so the call is queued before
    its start event is reached)."""
    def before():
        flush.zero_()
        torch.cuda._sleep(200_000)  # ~0.1 ms of GPU time

    return [ms * 1e3 for ms in timing.event_times_ms(lambda: call(x), REPS, cuda=True, before=before)]


def time_graph(calls_of_one_step):
    """Capture GRAPH_CALLS steps (each a list of (call, x)); replay; us per step."""
    def capture():
        for i in range(GRAPH_CALLS):
            for call, x in calls_of_one_step(i):
                call(x)

    def warm():
        for call, x in calls_of_one_step(0):
            call(x)

    return [ms * 1e3 / GRAPH_CALLS for ms in timing.graph_replay_ms(capture, GRAPH_REPLAYS, warm=warm)]


def main():
    global L2_BYTES
    t0 = time.time()
    L2_BYTES = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or L2_BYTES_DEFAULT
    out = Rows("int4_gemv", FIELDS)
    gpu = torch.cuda.get_device_name()
    flush = torch.empty(256 * 2 ** 20, dtype=torch.uint8, device=DEVICE)
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    rows, built = [], {}
    int4_kernel.prepare()
    precompile(K for K, _ in SHAPES.values())

    def emit(kernel, shape, K, N, config, mode, times, nbytes, err, status="ok", reason=""):
        rows.extend(out.add_times(times, err=err, status=status, reason=reason, gpu=gpu, kernel=kernel, shape=shape,
                                  K=K, N=N, group_size=G, config=config, mode=mode, bytes=nbytes))

    for shape, (K, N) in SHAPES.items():
        for kernel in KERNELS:
            config, err, nbytes = "", None, ""
            try:
                x, copies, err, nbytes = build(kernel, K, N, gen)
                if kernel == "int4-triton":
                    config = int4_kernel.tuned_config(N, K)
                    tuner = int4_kernel._kernel()
                    print(f"{shape} K={K} N={N}: autotuner chose {config}", flush=True)
                    for c, t in sorted(getattr(tuner, "configs_timings", {}).items(), key=lambda kv: kv[1][0]):
                        print(f"    {c.kwargs} w{c.num_warps} s{c.num_stages}: {t[0] * 1e3:.2f} us", flush=True)
                if not err <= TOL:  # NaN included
                    raise AssertionError(f"max_rel_err {err:.3e} > {TOL}")
                built[(shape, kernel)] = (x, copies, err, nbytes, config)
                emit(kernel, shape, K, N, config, "events", time_events(copies[0], x, flush), nbytes, err)
                emit(kernel, shape, K, N, config, "graph",
                     time_graph(lambda i: [(copies[i % len(copies)], x)]), nbytes, err)
            except Exception as exc:  # noqa: BLE001 (a failing kernel is a row, not the end of the run)
                traceback.print_exc()
                emit(kernel, shape, K, N, config, "events", None, nbytes, err, "error",
                     f"{type(exc).__name__}: {str(exc)[:300]}")
            torch.cuda.empty_cache()
        for key in [k for k in built if k[0] == shape and shape not in LAYER]:
            del built[key]  # keep only the layer's weights
    for kernel in KERNELS:
        parts = [built.get((shape, kernel)) for shape in LAYER]
        shape, K, N = "llama-3.1-8b layer", "", ""
        if any(p is None for p in parts):
            emit(kernel, shape, K, N, "", "graph", None, "", None, "error", "a product of the layer failed above")
            continue
        nbytes = sum(p[3] for p in parts)
        err = max(p[2] for p in parts)
        config = "; ".join(p[4] for p in parts)
        n_copies = min(len(p[1]) for p in parts)
        try:
            times = time_graph(lambda i: [(p[1][i % n_copies], p[0]) for p in parts])
            emit(kernel, shape, K, N, config, "graph", times, nbytes, err)
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            emit(kernel, shape, K, N, config, "graph", None, nbytes, err, "error", f"{type(exc).__name__}: {exc}")

    print(f"\n{gpu}: median us and GB/s (bytes streamed / time) per shape, kernel and mode")
    groups = {}
    for r in rows:
        groups.setdefault((r["shape"], r["kernel"], r["mode"]), []).append(r)
    for (shape, kernel, mode), rs in groups.items():
        if rs[0]["status"] != "ok":
            print(f"  {shape:22s} {kernel:14s} {mode:6s} ERROR {rs[0]['reason']}")
            continue
        us = statistics.median(float(r["us"]) for r in rs)
        print(f"  {shape:22s} {kernel:14s} {mode:6s} {us:9.2f} us {int(rs[0]['bytes']) / us / 1e3:7.0f} GB/s "
              f"err {rs[0]['max_rel_err']}  {rs[0]['config']}")
    print(f"wrote {out.path} ({len(rows)} rows) in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    if len(sys.argv) != 1:
        sys.exit("usage: PYTHONPATH=lib python3 bench/int4_gemv.py (DECODEGAP_DIAG_DIR=OUTDIR to write elsewhere)")
    main()
