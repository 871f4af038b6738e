#!/usr/bin/env bash
# The roofline sweep of notebook 01 on the H200 (issue data): 3 models x 4 contexts, arms eager,
# hf_default and graph, 3 fresh sessions each, then the copy-bandwidth probe. Writes into data/ of this
# tree and copies the raw files to OUTDIR. Usage (repository root): bash bench/sweep_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/sweep_h200.sh OUTDIR}
export PYTHONPATH=$PWD/lib PYTHONUNBUFFERED=1
SECONDS=0
python3 -m decodegap measure --gpu h200 --models qwen2.5-7b,mistral-7b-v0.3,llama-3.1-8b \
  --contexts 2048,4096,8192,16384 --arms eager,hf_default,graph --sessions 3 --steps 30 --warmup 5 \
  --no-progress --bandwidth
echo "sweep wall time: ${SECONDS} s"
cp data/raw/h200/*.csv data/raw/h200/env.json "$OUTDIR"/
