#!/usr/bin/env bash
# Second device run of 2026-11-29 (fifth session): the GPU tests of the compiled lean arms with LeanLayer a nested
# compile region (150 s at most), then notebook 06's ladder in order of need, each sweep resumable, error cells
# measured again: the compiled levers at the target cell (bf16, int4), the lean levers whose check failed at Llama
# ctx 8192 and Mistral ctx 16384 (with cuDNN's attention in the lean prefill, now left out), the compiled bf16 lean levers
# over the grid, the int4 grid levers, then whatever else ladder_plan holds. Usage: bash bench/ladder4_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/ladder4_h200.sh OUTDIR}
source bench/gpu_env.sh
save() { for f in decode.csv verify.csv env.json kernels.csv breakdown.csv; do cp data/raw/h200/$f "$OUTDIR"/ 2>/dev/null; done; true; }
( while sleep 15; do save; done ) & SAVER=$!
SECONDS=0
timeout ${TESTS_TIMEOUT:-150} python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short \
  tests/test_lean.py::test_compiled_lean_arms_with_layer_regions_on_real_widths 2>&1 \
  | grep -v "TensorFloat32\|warnings.warn" | tail -n 30 | tee "$OUTDIR"/gpu_tests.txt
echo "GPU tests done at ${SECONDS} s"
timeout $((${LADDER_TIMEOUT:-580} - SECONDS)) python3 - <<'PY' 2>&1 | grep -v "TensorFloat32\|warnings.warn" | tail -n 30
from decodegap import sessions
MODELS, CONTEXTS = ("llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.3"), (2048, 4096, 8192, 16384)
COMPILED = ("lean_attn_compile", "lean_compile")
def sweep(models, contexts, arms, quant="bf16"):
    sessions.run_sweep(sessions.SweepPlan(gpu="h200", models=tuple(models), contexts=tuple(contexts), arms=tuple(arms),
                                          quant=quant, sessions=1, retry_errors=True), progress=False)
sweep(["llama-3.1-8b"], [2048], COMPILED)
sweep(["llama-3.1-8b"], [2048], COMPILED, "int4-tinygemm")
sweep(["llama-3.1-8b", "mistral-7b-v0.3"], [8192, 16384], ("lean", "lean_graph", "lean_kernels_graph", "lean_attn_graph"))
sweep(MODELS, CONTEXTS, COMPILED[:1])
sweep(MODELS, CONTEXTS, ("lean_attn_compile",), "int4-tinygemm")
sweep(MODELS, CONTEXTS, COMPILED[1:])
sessions.measure_ladder("h200", MODELS, CONTEXTS, n_sessions=1, retry_errors=True)
PY
echo "ladder done at ${SECONDS} s"; kill $SAVER; save
