#!/usr/bin/env bash
# Builds the flash-attn package's CUDA extension `flash_attn_2_cuda`, trimmed to what flash_attn_with_kvcache runs at
# batch 1 for the three models (head dim 128, bf16: forward and split-KV forward, causal and not), on the GPU machine.
# The full package's 72 CUDA files take far longer than one GPU run; these 4 compile side by side in one.
#
# Sources: flash-attn 2.8.3 (tag v2.8.3 of Dao-AILab/flash-attention, commit 060c9188beec3a8b62b33a3bfa6d5d2d44975fab),
# placed by the user in an ignored folder (default .src/flash-attention) with its version in COMMIT; they never enter
# this repository. bench/README.md says how to prepare it (the package's source distribution: csrc/flash_attn,
# csrc/cutlass/include, the Python package flash_attn and setup.py are what the build reads).
#
# What it does (bench/flash_attn_build.py, which says why for each step):
#   - copies the Python package flash_attn to OUTDIR/flash_attn: its flash_attn_interface.py does
#     `import flash_attn_2_cuda`, which then finds OUTDIR/flash_attn_2_cuda.so (bench/gpu_env.sh puts .ext on
#     PYTHONPATH);
#   - patches copies of static_switch.h and flash_api.cpp so that no head dim but 128, no fp16 and no backward
#     kernel is referenced (each patch must match once, or the build stops), and sets flash-attn's own
#     FLASHATTENTION_DISABLE_{BACKWARD,DROPOUT,ALIBI,SOFTCAP,UNEVEN_K,LOCAL};
#   - compiles with torch's JIT builder (ninja, MAX_JOBS parallel nvcc jobs) for TORCH_CUDA_ARCH_LIST (9.0 on the H200:
#     FA2's sm80 kernels as sm_90 code), prints the plan before and the measured time and the full build's estimate
#     after;
#   - writes OUTDIR/flash_attn_build.json (source, patches and their sha256, nvcc, per-file seconds, build seconds),
#     which hardware.environment copies into env.json as kernel_builds.flash_attn.
# Usage (repository root, on the GPU machine): bash bench/build_flash_attn.sh [SRC] [OUTDIR]
set -euo pipefail
SRC=${1:-.src/flash-attention}
OUT=${2:-.ext}
[ -f "$SRC/csrc/flash_attn/flash_api.cpp" ] && [ -f "$SRC/csrc/cutlass/include/cutlass/cutlass.h" ] || {
  echo "build_flash_attn: no $SRC/csrc/flash_attn/flash_api.cpp or csrc/cutlass: put the flash-attn 2.8.3 sources there (bench/README.md)"; exit 2; }
mkdir -p "$OUT"
# the Python package only beside a built extension: transformers imports any `flash_attn` it can find, and one
# without its flash_attn_2_cuda fails every model import (seen on the H200 while a build was still running)
if [ -f "$OUT/flash_attn_2_cuda.so" ]; then
  echo "build_flash_attn: $OUT already holds flash_attn_2_cuda.so"
else
  python3 bench/flash_attn_build.py build "$SRC" "$OUT" || exit $?
fi
[ -f "$OUT/flash_attn_2_cuda.so" ] && python3 bench/flash_attn_build.py package "$SRC" "$OUT"
