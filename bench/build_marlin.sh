#!/usr/bin/env bash
# Builds Marlin's CUDA extension `marlin_cuda` (the kernel AutoAWQ's WQLinear_Marlin calls) on the GPU machine.
#
# Sources: the IST-DASLab/marlin project (https://github.com/IST-DASLab/marlin, commit 2f6d7c1 was used), its
# `setup.py` and `marlin/` folder, placed by the user in an ignored folder (default .src/marlin); they never enter
# this repository. For example, on a machine with network access:
#   git clone https://github.com/IST-DASLab/marlin .src/marlin
# (or an export of it with the commit written to .src/marlin/COMMIT).
#
# One patch, applied to a copy of the sources: nvcc 13.0's ptxas on sm_90 drops the `createpolicy` that makes the
# L2 cache-hint operand of `cp.async...L2::cache_hint` in `cp_async4_stream`, and the kernel then traps ("an illegal
# instruction was encountered"; marlin issue 44). The patch replaces that asm block by a plain
# `cp.async.cg.shared.global` (no eviction hint), the workaround of marlin issue 40; numerics are unchanged, only the
# hint that the streamed weights may be evicted from L2 first is lost.
#
# Output: marlin_cuda*.so in OUTDIR (default .ext), which bench/gpu_env.sh puts on PYTHONPATH, and OUTDIR/marlin_build.json
# (source commit, the patch's sha256, nvcc version, build seconds), which hardware.environment copies into env.json.
# Usage (repository root, on the GPU machine): bash bench/build_marlin.sh [SRC] [OUTDIR]
set -euo pipefail
SRC=${1:-.src/marlin}
OUT=${2:-.ext}
[ -f "$SRC/marlin/marlin_cuda_kernel.cu" ] || { echo "build_marlin: no $SRC/marlin/marlin_cuda_kernel.cu: put the IST-DASLab/marlin sources there (see this script's header)"; exit 2; }
mkdir -p "$OUT"
if ls "$OUT"/marlin_cuda*.so >/dev/null 2>&1; then echo "build_marlin: $OUT already holds $(ls "$OUT"/marlin_cuda*.so)"; exit 0; fi
WORK=$(mktemp -d)
cp -r "$SRC/setup.py" "$SRC/marlin" "$WORK/"
KERNEL=$WORK/marlin/marlin_cuda_kernel.cu
python3 bench/marlin_build.py patch "$KERNEL"
SECONDS=0
( cd "$WORK" && TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-16} python3 setup.py -q build_ext --inplace ) 2>&1 | grep -v "^copying\|^running\|UserWarning\|warnings.warn" | tail -5
cp "$WORK"/marlin_cuda*.so "$OUT"/
python3 bench/marlin_build.py record "$SRC" "$KERNEL" "$OUT" "$SECONDS"
rm -rf "$WORK"
