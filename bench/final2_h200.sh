#!/usr/bin/env bash
# The last device run of 2026-11-29 (fourth session): the lean ctx-8192 diagnostic (bench/lean_8192_diag.py,
# 90 s at most), then notebook 06's ladder, resumed (the target cell's lean_attn_compile levers after the fix of
# the attention kernel's loop types, then the rest of the grid). Usage (repository root): bash bench/final2_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/final2_h200.sh OUTDIR}
source bench/gpu_env.sh
save() { for f in decode.csv verify.csv kernels.csv breakdown.csv env.json; do cp data/raw/h200/$f "$OUTDIR"/ 2>/dev/null; done; true; }
( while sleep 15; do save; done ) & SAVER=$!
SECONDS=0
timeout 90 python3 bench/lean_8192_diag.py 2>&1 | grep -v "TensorFloat32\|warnings.warn" | tail -n 12 | tee "$OUTDIR"/lean_8192_diag.txt
timeout $((${LADDER_TIMEOUT:-480} - SECONDS)) python3 - <<'PY' 2>&1 | grep -v "TensorFloat32\|warnings.warn" | tail -n 20
from decodegap import sessions
sessions.measure_ladder("h200", ["llama-3.1-8b"], [2048], n_sessions=1)
sessions.measure_ladder("h200", ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.3"], [2048, 4096, 8192, 16384], n_sessions=1)
PY
echo "ladder done at ${SECONDS} s"; kill $SAVER; save
