#!/usr/bin/env bash
# The CUDA-graphs A/B data (notebook 02) and the GPU tests on the H200, in one run:
#  1. pytest -m gpu;  2. headline cells (each model at ctx 2048) to N = 10 sessions for eager and graph
#  (resumes the 3 sessions of bench/sweep_h200.sh);  3. kernels per step;  4. the compile arm in its own
#  sessions (never in a process that later times eager: see the README), ctx 2048, 3 sessions.
# Usage (repository root): bash bench/ab_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/ab_h200.sh OUTDIR}
export PYTHONPATH=$PWD/lib PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache  # warm across the compile sessions
M=qwen2.5-7b,mistral-7b-v0.3,llama-3.1-8b
SECONDS=0
python3 -m pytest -m gpu -q -p no:cacheprovider tests/ 2>&1 | tail -6; echo "gpu tests: ${SECONDS} s"
python3 -m decodegap measure --gpu h200 --models $M --contexts 2048 --arms eager,graph --sessions 10 --no-progress
echo "headline sweep done at ${SECONDS} s"
python3 -m decodegap kernels --gpu h200 --models $M --contexts 2048,4096,8192,16384; echo "kernels done at ${SECONDS} s"
timeout 330 python3 -m decodegap measure --gpu h200 --models $M --contexts 2048 --arms compile --sessions 3 --no-progress
echo "compile done at ${SECONDS} s"
cp data/raw/h200/*.csv data/raw/h200/env.json "$OUTDIR"/
