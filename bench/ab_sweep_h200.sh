#!/usr/bin/env bash
# Notebook 02's whole A/B sweep on the H200 in one run (`python -m decodegap ab`: 12 cells x eager, graph,
# compile x 3 fresh sessions, then the three headline cells to 10 sessions), from a cold inductor cache. The
# rows are copied to OUTDIR every 20 s, so a run cut short keeps what it measured.
# By default it resumes data/raw/h200/ab.csv; AB_FRESH=1 measures the whole sweep afresh into a scratch data
# folder (the registry copied in), to time one complete sweep. AB_TIMEOUT (s) bounds the sweep (default 585).
# Usage (repository root): [AB_FRESH=1] bash bench/ab_sweep_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/ab_sweep_h200.sh OUTDIR}
source bench/gpu_env.sh
rm -rf "$TORCHINDUCTOR_CACHE_DIR"  # cold: the first session compiles from nothing
DATA=data
if [ "${AB_FRESH:-0}" = 1 ]; then
  DATA=/tmp/ab-fresh; rm -rf $DATA; mkdir -p $DATA; cp -r data/models data/specs data/published $DATA/
fi
save() { cp $DATA/raw/h200/ab.csv $DATA/raw/h200/verify.csv $DATA/raw/h200/env.json "$OUTDIR"/ 2>/dev/null; true; }
( while sleep 20; do save; done ) & SAVER=$!
SECONDS=0
timeout ${AB_TIMEOUT:-585} python3 -m decodegap --data-dir $DATA ab --gpu h200 --no-progress 2>&1 | tail -n 80
echo "A/B sweep ended at ${SECONDS} s (exit ${PIPESTATUS[0]})"
kill $SAVER; save
