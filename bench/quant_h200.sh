#!/usr/bin/env bash
# Notebook 04's measurements on the H200, in one run. Wheels in .whl/ (bitsandbytes with only its CUDA 13
# library, exllamav2, autoawq, torchao: installed from wheels in .whl/) are installed first; a missing path
# becomes `unavailable` rows. ExLlamaV2's extension is JIT-built first (its time is printed), so that the
# timed sessions do not share the CPU with nvcc. One session per path (device time): see the README.
# `awq` runs as awq-triton where marlin_cuda does not import (it is not on the package index); since
# quant_bench records a passed-over alias member, awq-marlin then gets `unavailable` rows with the reason (the
# committed H200 rows predate that). The timeout below can end the sweep mid-cell: a cell with a verify row
# and no decode rows was never timed (notebook 04 shows it as `not timed`).
# Usage (repository root): bash bench/quant_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/quant_h200.sh OUTDIR}
source bench/gpu_env.sh
SECONDS=0
timeout 300 python3 -c "from exllamav2.ext import exllamav2_ext; print('exllamav2 extension ready')" 2>&1 | tail -3
echo "exllamav2 JIT build done at ${SECONDS} s"
timeout $((560 - SECONDS)) python3 - <<'PY'
from decodegap import quant, quant_bench
for key in quant.PATHS:
    print(key, "->", quant.unavailable_reason(key, "cuda") or "available", flush=True)
print(quant_bench.measure_quant("h200", ["qwen2.5-7b", "mistral-7b-v0.3", "llama-3.1-8b"], contexts=(2048, 16384),
                                arms=("eager", "graph"), sessions=1))
PY
echo "quantisation sweep done at ${SECONDS} s"
cp data/raw/h200/*.csv data/raw/h200/env.json "$OUTDIR"/
