#!/usr/bin/env bash
# Notebook 07's two axes in one short GPU call: bench/scope_short_gpu.sh GPU OUTDIR
#
# A shortened form of measure.sh's `batch` and `size` steps for a machine held only a few minutes: the timed arms
# of each axis (experiments.where_the_thesis_ends.plan's first sweep: eager, graph and the lean levers) at ctx
# 2048, then each axis's profiled steps (its kernel_plan), each part under its own time limit; the compiled arms
# (the plan's second sweep) are left for a full `bash bench/measure.sh GPU OUTDIR batch size`. A part cut by its
# limit keeps its rows, and the full steps resume from them. Limits in seconds: SCOPE_LIMITS="batch kernels size
# kernels" (default "150 40 140 40"); SIZE_MODELS (comma-separated, default the axis's own, smallest first).
set -u
GPU=${1:?usage: bench/scope_short_gpu.sh GPU OUTDIR}
OUTDIR=${2:?usage: bench/scope_short_gpu.sh GPU OUTDIR}
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)
source bench/gpu_env.sh
read -r T_BATCH T_BK T_SIZE T_SK <<< "${SCOPE_LIMITS:-150 40 140 40}"
save() {
  local tmp="$OUTDIR/.raw.$BASHPID.tgz"
  ( cd data/raw && tar czf "$tmp" "$GPU" 2>/dev/null ) && mv "$tmp" "$OUTDIR/raw-$GPU.tgz"
}
( while sleep 20; do save; done ) & SAVER=$!
trap 'kill $SAVER 2>/dev/null; save' EXIT
part() {  # part LIMIT AXIS WHAT: one sweep (WHAT=sweep) or the profiled steps (WHAT=kernels) of AXIS at ctx 2048
  echo "== $2 $3 (${SECONDS} s, limit $1 s)"
  timeout "$1" python3 - "$GPU" "$2" "$3" "${SIZE_MODELS:-}" <<'PY' 2>&1 | grep -v "TensorFloat32\|warnings.warn" | tail -4
import sys
from decodegap.experiments import where_the_thesis_ends as scope
from decodegap.harness import profile
from decodegap.harness.sweep import run_sweep
gpu, axis, what, models = sys.argv[1], sys.argv[2], sys.argv[3], [m for m in sys.argv[4].split(",") if m]
models = (models or None) if axis == "size" else None
if what == "sweep":
    print("run", run_sweep(scope.plan(gpu, axis, models=models, contexts=(2048,))[0], progress=False))
else:
    print("kernels", profile.record_kernels(gpu, **scope.kernel_plan(axis, models=models, contexts=(2048,))))
PY
  save
}
part "$T_BATCH" batch sweep
part "$T_BK" batch kernels
part "$T_SIZE" size sweep
part "$T_SK" size kernels
echo "scope_short_gpu.sh: done at ${SECONDS} s"
