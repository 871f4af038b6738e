#!/usr/bin/env bash
# Every GPU test (`pytest -m gpu`: the HF arms and every lean lever against eager on a real-shape Llama, the int4
# lean arms against HF int4, the Triton kernels against their references on every shape they are used for, the
# compiled lean arms with layer regions), on the commit that closes notebook 06. Ran once (commit dbf3a39, 191 s):
# 31 passed, slowest lean_attn_compile against eager (36.8 s, its compile) and HF compile (32.1 s).
# Usage (repository root): bash bench/gpu_tests_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/gpu_tests_h200.sh OUTDIR}
source bench/gpu_env.sh
SECONDS=0
timeout ${TESTS_TIMEOUT:-540} python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short --durations=8 tests/ 2>&1 \
  | grep -v "TensorFloat32\|warnings.warn\|^DEBUG" | tail -n 60 | tee "$OUTDIR"/gpu_tests.txt
echo "GPU tests done at ${SECONDS} s" | tee -a "$OUTDIR"/gpu_tests.txt
