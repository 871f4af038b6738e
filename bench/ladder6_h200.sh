#!/usr/bin/env bash
# The next device run for notebook 06 (written 2026-11-29, not run yet): the GPU tests of the lean decoder and the
# Triton kernels (the compiled lean arms with layer regions among them; the lean_attn_compile ones last ran before
# kernels.prepare), then the ladder, resumed, error cells measured again: Mistral ctx 16384's lean levers (their
# checks now feed both sides one token, decode.teacher_token), int4 lean compiled + Triton attention over the grid,
# and the profile of the compiled lean step at the target cell (sessions.LADDER_TARGET_PROFILED_ARMS).
# Usage (repository root): bash bench/ladder6_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/ladder6_h200.sh OUTDIR}
source bench/gpu_env.sh
save() { for f in decode.csv verify.csv env.json kernels.csv breakdown.csv; do cp data/raw/h200/$f "$OUTDIR"/ 2>/dev/null; done; true; }
( while sleep 15; do save; done ) & SAVER=$!
SECONDS=0
timeout ${TESTS_TIMEOUT:-240} python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/test_kernels.py tests/test_lean.py 2>&1 \
  | grep -v "TensorFloat32\|warnings.warn\|^DEBUG" | tail -n 40 | tee "$OUTDIR"/gpu_tests.txt
echo "GPU tests done at ${SECONDS} s"
timeout $((${LADDER_TIMEOUT:-585} - SECONDS)) python3 - <<'PY' 2>&1 | grep -v "TensorFloat32\|warnings.warn\|^DEBUG" | tail -n 30
from decodegap import sessions
MODELS, CONTEXTS = ("llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.3"), (2048, 4096, 8192, 16384)
sessions.run_sweep(sessions.SweepPlan(gpu="h200", models=("mistral-7b-v0.3",), contexts=(16384,), sessions=1,
                                      arms=("lean", "lean_graph", "lean_compile", "lean_kernels_graph", "lean_attn_graph",
                                            "lean_attn_compile"), retry_errors=True), progress=False)
sessions.record_kernels("h200", ["llama-3.1-8b"], [2048], arms=sessions.LADDER_TARGET_PROFILED_ARMS)
sessions.measure_ladder("h200", MODELS, CONTEXTS, n_sessions=1, retry_errors=True)
PY
echo "ladder done at ${SECONDS} s"; kill $SAVER; save
