#!/usr/bin/env bash
# Notebook 06's measurements on the H200 (resumable): the GPU tests of the lean decoder and the Triton kernels
# (every kernel against its reference on the real shapes; lean vs HF logits, bf16 and int4), then every lean
# lever of the target cell (Llama-3.1-8B, ctx 2048; bf16, then int4 tinygemm; each checked against HF eager
# before it is timed) and its per-kernel profiles, then the same over the rest of the 12-cell grid as time
# allows. Rows are copied to OUTDIR every 15 s. Usage (repository root): bash bench/ladder_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/ladder_h200.sh OUTDIR}
source bench/gpu_env.sh
save() {  # the device returns at most 8 files
  for f in decode.csv verify.csv kernels.csv breakdown.csv env.json; do cp data/raw/h200/$f "$OUTDIR"/ 2>/dev/null; done; true; }
( while sleep 15; do save; done ) & SAVER=$!
SECONDS=0
timeout ${TESTS_TIMEOUT:-200} python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/test_kernels.py tests/test_lean.py 2>&1 \
  | grep -v "TensorFloat32\|warnings.warn" | tail -n 60 | tee "$OUTDIR"/gpu_tests.txt
echo "GPU tests done at ${SECONDS} s"
timeout $((${LADDER_TIMEOUT:-575} - SECONDS)) python3 - <<'PY' 2>&1 | grep -v "TensorFloat32\|warnings.warn" | tail -n 40
from decodegap import sessions
# the target cell first; cells recorded only as `error` are measured again (the causes found so far are fixed:
# the attention kernel's loop types under inductor, dynamo's recompile limit)
sessions.measure_ladder("h200", ["llama-3.1-8b"], [2048], n_sessions=1, retry_errors=True)
sessions.measure_ladder("h200", ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.3"], [2048, 4096, 8192, 16384], n_sessions=1,
                        retry_errors=True)
PY
echo "ladder done at ${SECONDS} s"; kill $SAVER; save
