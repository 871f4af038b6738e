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
python3 - "$KERNEL" <<'PY'
import re, sys
path = sys.argv[1]
src = open(path).read()
hinted = re.compile(r'asm volatile\(\s*"\{\\n"\s*"\s*\.reg \.b64 p;\\n"\s*"\s*createpolicy[^;]*;"\s*'
                    r'"\s*cp\.async\.cg\.shared\.global\.L2::cache_hint \[%0\], \[%1\], %2, p;\\n"\s*"\}\\n"')
plain = 'asm volatile(\n    "cp.async.cg.shared.global [%0], [%1], %2;\\n"'
patched, n = hinted.subn(lambda _: plain, src)  # a function: the replacement is taken as it is
if n != 1:
    sys.exit(f"build_marlin: expected one cache-hinted cp.async in cp_async4_stream, found {n}: sources changed?")
open(path, "w").write(patched)
print("build_marlin: patched cp_async4_stream (plain cp.async.cg.shared.global)")
PY
SECONDS=0
( cd "$WORK" && TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-16} python3 setup.py -q build_ext --inplace ) 2>&1 | grep -v "^copying\|^running\|UserWarning\|warnings.warn" | tail -5
cp "$WORK"/marlin_cuda*.so "$OUT"/
python3 - "$SRC" "$KERNEL" "$OUT" "$SECONDS" <<'PY'
import hashlib, json, os, subprocess, sys
src, kernel, out, seconds = sys.argv[1:]
if os.path.exists(f"{src}/COMMIT"):  # an export; `git -C` inside this repository would name this repository's commit
    commit = open(f"{src}/COMMIT").read().strip()
else:
    commit = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
info = dict(kernel="marlin_cuda (IST-DASLab/marlin)", source_commit=commit or "not a git checkout",
            patch="cp_async4_stream: plain cp.async.cg.shared.global (no createpolicy L2 hint; marlin issues 40, 44)",
            patched_kernel_sha256=hashlib.sha256(open(kernel, "rb").read()).hexdigest(), nvcc=nvcc,
            build_s=int(seconds))
json.dump(info, open(f"{out}/marlin_build.json", "w"), indent=1)
print("build_marlin:", json.dumps(info))
PY
rm -rf "$WORK"
