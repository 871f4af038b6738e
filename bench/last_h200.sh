#!/usr/bin/env bash
# The last device run of 2026-11-29 (third session), with the device time that was left: (1) the rest of
# notebook 02's A/B sweep (resumes ab.csv: Llama's third grid session, then the headline cells to 10
# sessions); (2) notebook 06's lean levers at its target cell (Llama-3.1-8B, ctx 2048, one session; each arm
# checked against HF eager on the real shapes before it is timed), bf16 and int4 tinygemm, and the per-kernel
# breakdown of that cell; (3) the GPU tests of the lean decoder and the Triton kernels, as far as time allows.
# Usage (repository root): bash bench/last_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/last_h200.sh OUTDIR}
source bench/gpu_env.sh
# as run, it copied every CSV: the device returns at most 8 files, and verify.csv was left behind
save() {  # the device returns at most 8 files
  for f in ab.csv decode.csv verify.csv kernels.csv breakdown.csv env.json; do cp data/raw/h200/$f "$OUTDIR"/ 2>/dev/null; done; true; }
( while sleep 15; do save; done ) & SAVER=$!
SECONDS=0
timeout 300 python3 -m decodegap ab --gpu h200 --no-progress 2>&1 | grep -v "TensorFloat32\|warnings.warn" | tail -n 20
echo "A/B sweep part ended at ${SECONDS} s"; save
timeout $((515 - SECONDS)) python3 - <<'PY' 2>&1 | grep -v "TensorFloat32\|warnings.warn" | tail -n 30
from decodegap import sessions
common = dict(gpu="h200", models=("llama-3.1-8b",), contexts=(2048,), sessions=1)
sessions.run_sweep(sessions.SweepPlan(arms=("lean_graph", "lean_kernels_graph", "lean"), **common), progress=False)
sessions.record_kernels("h200", ["llama-3.1-8b"], [2048], arms=("eager", "lean", "lean_kernels"))
sessions.run_sweep(sessions.SweepPlan(arms=("lean_graph", "lean_kernels_graph"), quant="int4-tinygemm", **common), progress=False)
sessions.run_sweep(sessions.SweepPlan(arms=("lean_compile",), **common), progress=False)
PY
echo "lean levers ended at ${SECONDS} s"; save
timeout $((548 - SECONDS)) python3 -m pytest -m gpu -q -p no:cacheprovider -x tests/test_kernels.py tests/test_lean.py 2>&1 | tail -n 12
echo "GPU tests ended at ${SECONDS} s"; kill $SAVER; save
