#!/usr/bin/env bash
# Notebook 03's measurements on a GPU machine (not yet run on the H200: the session that wrote it had no
# device time left). Optional kernels travel as wheels in .whl/ (see ../README.md, "Optional kernel
# packages"); whatever is missing becomes an `unavailable` row with the reason.
# Usage (repository root): bash bench/attention_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/attention_h200.sh OUTDIR}
source bench/gpu_env.sh
SECONDS=0
python3 -m decodegap attention --gpu h200; echo "per-layer microbenchmark done at ${SECONDS} s"
for attn in sdpa_flash sdpa_efficient sdpa_math flex; do
  python3 -m decodegap measure --gpu h200 --attn $attn --arms eager,graph --contexts 2048,16384 --sessions 1 --no-progress
done
echo "whole-step backends done at ${SECONDS} s"
cp data/raw/h200/*.csv data/raw/h200/env.json "$OUTDIR"/
