#!/usr/bin/env bash
# The last device run of 2026-11-29: int4 tinygemm whole steps (the quantisation run ran out of time
# before them), the GPU tests on the current code, and the third compile session of the Mistral and
# Llama headline cells. Usage (repository root): bash bench/final_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/final_h200.sh OUTDIR}
source bench/gpu_env.sh
SECONDS=0
timeout 200 python3 - <<'PY'
from decodegap import quant_bench
print(quant_bench.measure_quant("h200", ["qwen2.5-7b", "mistral-7b-v0.3", "llama-3.1-8b"], contexts=(2048, 16384),
                                quant_paths=("int4-tinygemm",), arms=("eager", "graph"), sessions=1, layers=False))
PY
echo "int4 tinygemm done at ${SECONDS} s"; cp data/raw/h200/*.csv data/raw/h200/env.json "$OUTDIR"/
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/ 2>&1 | tail -6; echo "gpu tests done at ${SECONDS} s"
timeout $((400 - SECONDS)) python3 -m decodegap measure --gpu h200 --models mistral-7b-v0.3,llama-3.1-8b \
  --contexts 2048 --arms compile --sessions 3 --no-progress
echo "compile done at ${SECONDS} s"; cp data/raw/h200/*.csv data/raw/h200/env.json "$OUTDIR"/
