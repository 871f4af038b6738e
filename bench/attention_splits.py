"""The split-KV decode attention (decodegap.kernels.step.decode_attention) by itself, on the grid's attention shapes,
over how it is split and launched: which split, block and load order the fused step's attention should use.

Per (model, ctx) the caches of all of the model's layers are allocated (bf16 [Hkv, L, D] K and V a layer, L = ctx + 40
as a step's cache, `length` = ctx + 20 live positions), so a graph that calls the attention once per layer streams
as much KV as a step does and finds none of it in L2. Per variant:
  block        positions a program loads per iteration (32, 64, 128);
  waves        programs per SM the split aims at (kernels.step.split_size: split = the cache positions a program
               covers, a power of two >= block); split == block means one iteration a program;
  kv_together  V's load written beside K's (decode_attention's kv_together) or after the first product (on sm_90 both
               compile to the same instructions: a control of the bench's noise);
  merged       the merge in the split kernel's last program of a kv head, or a merge kernel;
  warps, stages  the split kernel's num_warps and num_stages (Triton's pipelining of the loop's loads): every form
               above at the default launch (kernels.step.SPLIT_WARPS, SPLIT_STAGES), then the two-kernel form with
               V after the product at every other pair of WARPS and STAGES;
each checked first against decode_attention_reference (max |out - ref| <= TOL, else status `error`, no timing),
then timed as a CUDA graph of one call a layer, with PDL where the GPU has it (as the fused step launches it),
replayed REPLAYS times: us per call. bytes: the K and V of `length` positions a layer; gbps = bytes / us.

Writes data/diagnostics/attention_splits.csv (DECODEGAP_DIAG_DIR=OUTDIR writes OUTDIR/attention_splits.csv), one row
per replay (gpu, model, ctx, L, length, Hq, Hkv, block, waves, split, n_splits, kv_together, merged, warps, stages,
pdl, rep, us, bytes, gbps, max_abs_err, status, reason, then the run's provenance; the rows from before the launch
sweep have warps and stages blank: they ran at Triton's defaults, SPLIT_WARPS and SPLIT_STAGES), and prints each
cell's default (block 32, waves 2, V after the product, two kernels, the default launch: the step's attention until
now) beside its fastest variant.
Usage (repository root, GPU): PYTHONPATH=lib python3 bench/attention_splits.py
(ATTENTION_MODELS, ATTENTION_CONTEXTS: comma-separated, default the grid's attention shapes and contexts; an unknown
model or a context that is not a positive integer is refused before the CSV is opened, and a cell whose caches do not
fit in the GPU's memory is one `error` row saying how much they need, the next cell measured after it)
"""

import itertools
import os
import statistics
import sys
import time
import traceback

import torch

from decodegap import timing
from decodegap.diagnostics import Rows
from decodegap.harness import models
from decodegap.kernels import step as kernels
from decodegap.kernels.fused import launch as fused

DEVICE = "cuda"
TOL = 2e-2
REPLAYS = 20
CACHE_EXTRA, LIVE_EXTRA = 40, 20
MODELS = tuple(os.environ.get("ATTENTION_MODELS", "llama-3.1-8b,qwen2.5-7b").split(","))
"""Mistral-7B-v0.3 has Llama-3.1-8B's attention shape (32 query heads, 8 kv heads, head dim 128, 32 layers)."""
CONTEXTS = os.environ.get("ATTENTION_CONTEXTS", "2048,4096,8192,16384")
BLOCKS, WAVES = (32, 64, 128), (1, 2, 4, 8)
WARPS, STAGES = (2, 4, 8), (1, 2, 3, 4)
DEFAULT = dict(block=32, waves=2, kv_together=False, merged=False, warps=kernels.SPLIT_WARPS,
               stages=kernels.SPLIT_STAGES)
FIELDS = ("gpu", "model", "ctx", "L", "length", "Hq", "Hkv", "block", "waves", "split", "n_splits", "kv_together",
          "merged", "warps", "stages", "pdl", "rep", "us", "bytes", "gbps", "max_abs_err", "status", "reason")


def shape(key):
    """(layers, Hq, Hkv, head_dim) of model `key`."""
    c = models.load_spec(key).config
    return (c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"],
            c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"])


def variants(L, Hkv):
    """(block, waves, split, kv_together, merged, warps, stages), each split once: waves giving a split another waves
    gave already (split_size's power of two) are not timed again. Every form at the default launch first, then the
    two-kernel form with V after the product at each other launch (WARPS x STAGES)."""
    default = (kernels.SPLIT_WARPS, kernels.SPLIT_STAGES)
    forms = [(kv, merged, *default) for kv, merged in itertools.product((False, True), (False, True))]
    forms += [(False, False, w, s) for w, s in itertools.product(WARPS, STAGES) if (w, s) != default]
    seen = set()
    for form in forms:
        for block, waves in itertools.product(BLOCKS, WAVES):
            split = kernels.split_size(L, Hkv, block, waves=waves)
            if (block, split, *form) not in seen:
                seen.add((block, split, *form))
                yield (block, waves, split, *form)


def contexts(text: str) -> tuple:
    """ATTENTION_CONTEXTS as positive ints, or an exit naming what is wrong."""
    try:
        out = tuple(int(c) for c in text.split(","))
    except ValueError:
        out = ()
    if not out or min(out) < 1:
        sys.exit(f"ATTENTION_CONTEXTS={text!r}: give comma-separated positive context lengths, e.g. 2048,16384")
    return out


def cell(key, ctx, pdl, emit, gen):
    layers, Hq, Hkv, D = shape(key)
    L, length = ctx + CACHE_EXTRA, ctx + LIVE_EXTRA
    try:
        caches = [((torch.randn(Hkv, L, D, generator=gen, device=DEVICE)).bfloat16(),
                   torch.randn(Hkv, L, D, generator=gen, device=DEVICE).bfloat16()) for _ in range(layers)]
    except torch.cuda.OutOfMemoryError:  # the cell's caches do not fit: its row says so, the next cell runs
        torch.cuda.empty_cache()
        need = 2 * layers * Hkv * L * D * 2 / 1e9
        emit(times=None, err=None, status="error", reason=f"out of memory: {need:.1f} GB of K and V caches for "
             f"{layers} layers at ctx {ctx}", model=key, ctx=ctx, L=L, length=length, Hq=Hq, Hkv=Hkv, block="",
             waves="", split="", n_splits="", kv_together="", merged="", warps="", stages="", pdl=int(pdl),
             bytes=2 * Hkv * length * D * 2)
        return
    q = torch.randn(Hq, D, generator=gen, device=DEVICE).bfloat16()
    live = torch.tensor([length], device=DEVICE, dtype=torch.int32)
    scale = D ** -0.5
    ref = kernels.decode_attention_reference(q, *caches[0], length, scale).float()
    nbytes = 2 * Hkv * length * D * 2
    for block, waves, split, kv_together, merged, warps, stages in variants(L, Hkv):
        base = dict(model=key, ctx=ctx, L=L, length=length, Hq=Hq, Hkv=Hkv, block=block, waves=waves, split=split,
                    n_splits=-(-L // split), kv_together=int(kv_together), merged=int(merged), warps=warps,
                    stages=stages, pdl=int(pdl), bytes=nbytes)

        def call(k, v, block=block, split=split, kv_together=kv_together, merged=merged, warps=warps, stages=stages):
            return kernels.decode_attention(q, k, v, live, scale, split=split, block=block, pdl=pdl,
                                            kv_together=kv_together, merged=merged, warps=warps, stages=stages)
        try:
            err = (call(*caches[0]).float() - ref).abs().max().item()
            if not err <= TOL:  # NaN included
                raise AssertionError(f"max_abs_err {err:.3e} > {TOL}")
            times = timing.graph_replay_ms(lambda: [call(k, v) for k, v in caches], REPLAYS)
            emit(times=[ms * 1e3 / layers for ms in times], err=err, **base)
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            emit(times=None, err=None, status="error", reason=f"{type(exc).__name__}: {str(exc)[:300]}", **base)
    caches.clear()
    torch.cuda.empty_cache()


def main():
    t0 = time.time()
    cells = contexts(CONTEXTS)
    for key in MODELS:  # every model known before a row is written (models.UnknownModelError names the known ones)
        shape(key)
    out = Rows("attention_splits", FIELDS)
    gpu = torch.cuda.get_device_name()
    pdl = fused.pdl_unavailable(DEVICE) is None
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    rows = []

    def emit(times, err, status="ok", reason="", **base):
        rows.extend(out.add_times(times, err=err, err_field="max_abs_err", status=status, reason=reason, gpu=gpu,
                                  **base))

    for key in MODELS:
        for ctx in cells:
            cell(key, ctx, pdl, emit, gen)
            print(f"{key} ctx {ctx}: done at {time.time() - t0:.0f} s", flush=True)
    summary(rows)
    print(f"wrote {out.path} ({len(rows)} rows) in {time.time() - t0:.0f} s")


def summary(rows):
    """Per cell: the default variant's (DEFAULT) and the fastest variant's median us per call."""
    med, cells = {}, {}
    for r in rows:
        if r["status"] == "ok":
            cell_key = (r["model"], r["ctx"])
            cells[cell_key] = (int(r["L"]), int(r["Hkv"]))
            med.setdefault(cell_key + (r["block"], r["split"], r["kv_together"], r["merged"], r["warps"], r["stages"]),
                           []).append(float(r["us"]))
    med = {k: statistics.median(v) for k, v in med.items()}
    for cell_key, (L, Hkv) in cells.items():
        mine = {k[2:]: v for k, v in med.items() if k[:2] == cell_key}
        best = min(mine, key=mine.get)
        split = kernels.split_size(L, Hkv, DEFAULT["block"], waves=DEFAULT["waves"])
        default = mine.get((DEFAULT["block"], split, 0, 0, DEFAULT["warps"], DEFAULT["stages"]))
        print(f"{cell_key[0]} ctx {cell_key[1]}: default {default if default is None else round(default, 2)} us; "
              f"fastest (block, split, kv_together, merged, warps, stages) {best} {mine[best]:.2f} us, of "
              f"{len(mine)} variants")
    for r in rows:
        if r["status"] != "ok":
            print(f"  ERROR {r['model']} ctx {r['ctx']} block {r['block']} split {r['split']}: {r['reason']}")


if __name__ == "__main__":
    if len(sys.argv) != 1:
        sys.exit("usage: PYTHONPATH=lib python3 bench/attention_splits.py (DECODEGAP_DIAG_DIR=OUTDIR elsewhere)")
    main()
