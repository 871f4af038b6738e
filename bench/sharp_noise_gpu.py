"""The sharpened check's noise floor on a GPU (decodegap.harness.checks, issue of notebook 06): how far a correct arm
lands from HF eager when every attention score is sharpened, on the real shapes in bf16, and how far the faults it
is calibrated on land (the lean decoder's rotary flipped or one position off, a cache block dropped, the cache
read one slot off). A tolerance that gates the timing must sit above the first and below the second.
For each model and context: every uncompiled lean arm and HF's graph arm, the plain check (factor 1) and the
sharpened one (checks.SHARPEN); then, on the lean arm at the first context, each fault, sharpened and plain.
Writes data/diagnostics/sharp_noise_gpu.csv (decodegap.diagnostics): one row per (model, ctx, arm, case, sharpen),
the max. relative logits error against HF eager, or the error raised.
Usage (repository root, GPU): PYTHONPATH=lib python3 bench/sharp_noise_gpu.py [--contexts 2048,16384] [--models M,...] [--arms A,...] [--factors 1,16]
"""

import argparse

import torch
from decodegap.diagnostics import Rows

from decodegap.harness import models, checks

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--contexts", default="2048,16384")
parser.add_argument("--models", default="llama-3.1-8b,qwen2.5-7b,mistral-7b-v0.3")
parser.add_argument("--arms", default="graph,lean,lean_graph,lean_kernels,lean_kernels_graph,lean_attn_graph")
parser.add_argument("--factors", default=f"1,{checks.SHARPEN:g}", help="sharpening factors (1: the plain check)")
args = parser.parse_args()
CONTEXTS = [int(c) for c in args.contexts.split(",")]
ARMS = args.arms.split(",")
FACTORS = [float(f) for f in args.factors.split(",")]
rows = Rows("sharp_noise_gpu", ("model", "ctx", "arm", "case", "sharpen", "max_rel_err", "status", "reason"))


def check(model, key, ctx, arm, case, factor):
    try:
        with checks.fault(case):
            err = checks.verify_arm_sharpened(model, arm, ctx, factor=factor, tol=1e9)
        rows.add(model=key, ctx=ctx, arm=arm, case=case, sharpen=factor, max_rel_err=err, status="ok", reason="")
    except Exception as exc:  # noqa: BLE001 (a diagnostic: record and go on)
        rows.add(model=key, ctx=ctx, arm=arm, case=case, sharpen=factor, max_rel_err="", status="error",
                 reason=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")


for key in args.models.split(","):
    model = models.build_model(models.load_spec(key), device="cuda")
    for ctx in CONTEXTS:
        for arm in ARMS:
            for factor in FACTORS:
                check(model, key, ctx, arm, "as built", factor)
    for case in checks.FAULTS[1:]:
        for factor in FACTORS:
            check(model, key, CONTEXTS[0], "lean", case, factor)
    del model
    torch.cuda.empty_cache()
