#!/usr/bin/env bash
# Notebook 06's measurements on the H200 (not yet run): the GPU tests (they check the lean arms against HF
# eager on Llama-3.1-8B first), the lean arms over the 12-cell grid in 3 fresh sessions, then one profiled
# step per cell of the HF eager and lean steps (kernel counts and the per-kernel breakdown).
# Usage (repository root): bash bench/ladder_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/ladder_h200.sh OUTDIR}
source bench/gpu_env.sh
SECONDS=0
timeout 180 python3 -m pytest -m gpu -q -p no:cacheprovider tests/ 2>&1 | tail -8; echo "gpu tests done at ${SECONDS} s"
timeout $((540 - SECONDS)) python3 - <<'PY'
from decodegap import sessions
sessions.measure_ladder("h200", ["qwen2.5-7b", "mistral-7b-v0.3", "llama-3.1-8b"], [2048, 4096, 8192, 16384])
PY
echo "ladder done at ${SECONDS} s"
cp data/raw/h200/*.csv data/raw/h200/env.json "$OUTDIR"/
