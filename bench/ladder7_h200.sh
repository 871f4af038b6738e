#!/usr/bin/env bash
# Second device run of 2026-11-29 (sixth session): the rest of notebook 06's measure_ladder, resumed, cells recorded
# only as `error` measured again: int4 lean compiled + Triton attention over the grid (its cells of the run before
# kernels.prepare are `error`), then the breakdowns of bench/ladder6_h200.sh's profiles (its breakdown.csv, over the
# 16 MiB a returned file may have, did not come back; its kernels.csv rows did, and record_kernels redoes a cell
# whose breakdown is missing), gzipped.
# Ran twice (commit 66743de): 586 s, int4 lean_attn_compile over the 11 cells left (9.5 min, ~52 s a cell, every
# check ok, 3.00-3.69 ms), its time limit cutting the profiles after two; then 89 s (LADDER_TIMEOUT=400), the
# profiles' breakdowns (18.7 MB unzipped). A third time (commit f7873b1, 68 s): the new int4 profile of the target
# cell's compiled lean step with the Triton attention (456 kernels, 3.11 ms of GPU time).
# Usage (repository root): bash bench/ladder7_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/ladder7_h200.sh OUTDIR}
source bench/gpu_env.sh
save() { for f in decode.csv verify.csv env.json kernels.csv; do cp data/raw/h200/$f "$OUTDIR"/ 2>/dev/null; done
        gzip -c data/raw/h200/breakdown.csv > "$OUTDIR"/breakdown.csv.gz.part && mv "$OUTDIR"/breakdown.csv.gz.part "$OUTDIR"/breakdown.csv.gz; true; }  # breakdown.csv outgrows the 16 MiB a returned file may have
( while sleep 15; do save; done ) & SAVER=$!
SECONDS=0
timeout ${LADDER_TIMEOUT:-585} python3 - <<'PY' 2>&1 | grep -v "TensorFloat32\|warnings.warn\|^DEBUG" | tail -n 30
from decodegap import sessions
sessions.measure_ladder("h200", ("llama-3.1-8b", "qwen2.5-7b", "mistral-7b-v0.3"), (2048, 4096, 8192, 16384),
                        n_sessions=1, retry_errors=True)
PY
echo "ladder done at ${SECONDS} s"; kill $SAVER; save
