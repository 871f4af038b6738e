#!/usr/bin/env bash
# First device run of 2026-11-29 (sixth session): the GPU tests of the Triton kernels and of the compiled lean arms
# with layer regions (the lean_attn_compile ones last ran before kernels.prepare; 200 s at most), then Mistral
# ctx 16384's bf16 lean levers measured again (their checks now feed both sides one token, decode.teacher_token),
# the profile of the compiled lean step with the Triton attention at the target cell, and the profiles of the
# ladder's profiled arms over the grid (sessions.LADDER_PROFILED_ARMS; eager is there already).
# Ran once (308 s, commit ddbe539): GPU tests 13 passed in 77 s; Mistral ctx 16384's six bf16 lean levers all ok
# (checks 0.045-0.075; 105 s); the compiled target step profiled (47 s, 520 kernels) and the grid (69 s). Its
# breakdown.csv outgrew the 16 MiB a returned file may have and did not come back (bench/ladder7_h200.sh gzips it).
# bench/ladder7_h200.sh is the rest of measure_ladder. Usage (repository root): bash bench/ladder6_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/ladder6_h200.sh OUTDIR}
source bench/gpu_env.sh
save() { for f in decode.csv verify.csv env.json kernels.csv breakdown.csv; do cp data/raw/h200/$f "$OUTDIR"/ 2>/dev/null; done; true; }
( while sleep 15; do save; done ) & SAVER=$!
SECONDS=0
timeout ${TESTS_TIMEOUT:-200} python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/test_kernels.py \
  "tests/test_lean.py::test_compiled_lean_arms_with_layer_regions_on_real_widths" 2>&1 \
  | grep -v "TensorFloat32\|warnings.warn\|^DEBUG" | tail -n 40 | tee "$OUTDIR"/gpu_tests.txt
echo "GPU tests done at ${SECONDS} s"
timeout $((${LADDER_TIMEOUT:-585} - SECONDS)) python3 - <<'PY' 2>&1 | grep -v "TensorFloat32\|warnings.warn\|^DEBUG" | tail -n 30
import time
from decodegap import sessions
MODELS, CONTEXTS = ("llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.3"), (2048, 4096, 8192, 16384)
t = time.time()
sessions.run_sweep(sessions.SweepPlan(gpu="h200", models=("mistral-7b-v0.3",), contexts=(16384,), sessions=1,
                                      arms=("lean", "lean_graph", "lean_compile", "lean_kernels_graph", "lean_attn_graph",
                                            "lean_attn_compile"), retry_errors=True), progress=False)
print(f"mistral 16384 lean levers: {time.time() - t:.0f} s", flush=True); t = time.time()
sessions.record_kernels("h200", ["llama-3.1-8b"], [2048], arms=sessions.LADDER_TARGET_PROFILED_ARMS)
print(f"target profile of the compiled step: {time.time() - t:.0f} s", flush=True); t = time.time()
sessions.record_kernels("h200", MODELS, CONTEXTS, arms=sessions.LADDER_PROFILED_ARMS)
print(f"grid profiles: {time.time() - t:.0f} s", flush=True)
PY
echo "run done at ${SECONDS} s"; kill $SAVER; save
