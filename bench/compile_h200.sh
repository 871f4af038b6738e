#!/usr/bin/env bash
# Compile-arm sessions that bench/ab_h200.sh could not fit: resumes sessions 1-2 at ctx 2048.
# Usage (repository root): bash bench/compile_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/compile_h200.sh OUTDIR}
export PYTHONPATH=$PWD/lib PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
SECONDS=0
timeout 250 python3 -m decodegap measure --gpu h200 --models qwen2.5-7b,mistral-7b-v0.3,llama-3.1-8b \
  --contexts 2048 --arms compile --sessions 3 --no-progress
echo "compile sessions done at ${SECONDS} s"
cp data/raw/h200/decode.csv data/raw/h200/env.json "$OUTDIR"/
