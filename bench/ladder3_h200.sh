#!/usr/bin/env bash
# First device run of 2026-11-29 (fifth session): which side is off at Llama ctx 8192 (bench/lean_8192_sides.py,
# 150 s at most), then notebook 06's levers that compile nothing, over the grid: the bf16 lean eager and graphed
# levers not measured yet, and int4 tinygemm on the HF graph and on the lean graph with the Triton attention.
# Usage (repository root): bash bench/ladder3_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/ladder3_h200.sh OUTDIR}
source bench/gpu_env.sh
save() { for f in decode.csv verify.csv env.json; do cp data/raw/h200/$f "$OUTDIR"/ 2>/dev/null; done; true; }
( while sleep 15; do save; done ) & SAVER=$!
SECONDS=0
timeout 150 python3 bench/lean_8192_sides.py 2>&1 | grep -v "TensorFloat32\|warnings.warn" | tail -n 30 | tee "$OUTDIR"/lean_8192_sides.txt
echo "diagnostic done at ${SECONDS} s"
timeout $((${LADDER_TIMEOUT:-560} - SECONDS)) python3 - <<'PY' 2>&1 | grep -v "TensorFloat32\|warnings.warn" | tail -n 30
from decodegap import sessions
grid = dict(gpu="h200", models=("llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.3"), contexts=(2048, 4096, 8192, 16384),
            sessions=1, retry_errors=True)
sessions.run_sweep(sessions.SweepPlan(arms=("lean_attn_graph", "graph"), quant="int4-tinygemm", **grid), progress=False)
sessions.run_sweep(sessions.SweepPlan(arms=("lean", "lean_graph", "lean_kernels_graph", "lean_attn_graph"), **grid),
                   progress=False)
PY
echo "sweeps done at ${SECONDS} s"; kill $SAVER; save
