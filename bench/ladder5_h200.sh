#!/usr/bin/env bash
# Third device run of 2026-11-29 (fifth session): which side is off at Mistral ctx 16384 (every lean lever fails
# its check there, with and without cuDNN's attention in the lean prefill; bench/lean_8192_sides.py, 100 s at
# most), then the lean_attn_compile levers (their Triton kernels now built before the trace): target cell bf16 and
# int4, then the grid, bf16 then int4. Usage (repository root): bash bench/ladder5_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/ladder5_h200.sh OUTDIR}
source bench/gpu_env.sh
save() { for f in decode.csv verify.csv env.json; do cp data/raw/h200/$f "$OUTDIR"/ 2>/dev/null; done; true; }
( while sleep 15; do save; done ) & SAVER=$!
SECONDS=0
timeout 100 python3 bench/lean_8192_sides.py mistral-7b-v0.3 16384 2>&1 | grep "ctx " | tee "$OUTDIR"/mistral_16384_sides.txt
echo "diagnostic done at ${SECONDS} s"
timeout $((${LADDER_TIMEOUT:-585} - SECONDS)) python3 - <<'PY' 2>&1 | grep -v "TensorFloat32\|warnings.warn" | tail -n 30
from decodegap import sessions
MODELS, CONTEXTS = ("llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.3"), (2048, 4096, 8192, 16384)
def sweep(models, contexts, quant):
    sessions.run_sweep(sessions.SweepPlan(gpu="h200", models=tuple(models), contexts=tuple(contexts),
                                          arms=("lean_attn_compile",), quant=quant, sessions=1, retry_errors=True),
                       progress=False)
sweep(["llama-3.1-8b"], [2048], "bf16")
sweep(["llama-3.1-8b"], [2048], "int4-tinygemm")
sweep(MODELS, CONTEXTS, "bf16")
sweep(MODELS, CONTEXTS, "int4-tinygemm")
PY
echo "sweeps done at ${SECONDS} s"; kill $SAVER; save
