#!/usr/bin/env bash
# Notebook 03's measurements on the H200, in one run. Optional kernels travel as wheels in .whl/ (see
# ../README.md, "Optional kernel packages"); whatever is missing becomes an `unavailable` row with the reason.
#  1. per-layer microbenchmark: every backend x 3 model shapes x 4 contexts, checked against math first;
#  2. whole decode step with each backend that runs inside the HF model (eager and graph arms, 1 session);
#  3. the GPU tests.
# Usage (repository root): bash bench/attention_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/attention_h200.sh OUTDIR}
source bench/gpu_env.sh
SECONDS=0
python3 - <<'PY'
import importlib, traceback
for name in ("fa3_fwd_interface", "flashinfer", "flash_attn", "flash_attn_interface"):
    try:
        m = importlib.import_module(name); print("import", name, "ok", getattr(m, "__version__", ""))
    except Exception as exc:
        print("import", name, "failed:", type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
PY
timeout 300 python3 -m decodegap attention --gpu h200; echo "per-layer microbenchmark done at ${SECONDS} s"
cp data/raw/h200/attention.csv data/raw/h200/env.json "$OUTDIR"/
for attn in sdpa_flash sdpa_efficient sdpa_cudnn sdpa_math flex; do
  [ $SECONDS -gt 480 ] && { echo "skipping whole-step $attn: out of time"; continue; }
  timeout $((540 - SECONDS)) python3 -m decodegap measure --gpu h200 --attn $attn --arms eager,graph \
    --contexts 2048,16384 --sessions 1 --no-progress
  echo "whole-step $attn done at ${SECONDS} s"
  cp data/raw/h200/*.csv data/raw/h200/env.json "$OUTDIR"/
done
[ $SECONDS -lt 470 ] && timeout $((560 - SECONDS)) python3 -m pytest -m gpu -q -p no:cacheprovider tests/ 2>&1 | tail -8
echo "all done at ${SECONDS} s"
cp data/raw/h200/*.csv data/raw/h200/env.json "$OUTDIR"/
