#!/usr/bin/env bash
# Notebook 04's checks on a GPU machine, in one call: bench/quant_checks_gpu.sh GPU OUTDIR
#
#  1. builds: ExLlamaV2's JIT extension in the background, Marlin's marlin_cuda meanwhile (bench/build_marlin.sh,
#     from .src/marlin); wheels from .whl/ (bench/gpu_env.sh)
#  2. bench/marlin_prefill_gpu.py: is Marlin's multi-row error a nondeterministic kernel defect, and does the layer's
#     prefill route (dequantise + matmul) pass its layer check
#  3. bench/quant_power_gpu.py: the checks' power on the whole Llama-3.1-8B at ctx 2048 (every path but
#     gptq-exllamav2 while its extension builds, then gptq-exllamav2), with tests/test_quant_gpu.py beside it
#  4. the cells rules R4l reads at ctx 2048 measured again (--again), each with its checks in its own run (the
#     null, the format and layer checks at one row and at 2048 rows, the model check; harness.sweep): awq-marlin
#     and gptq-exllamav2 on the three models, eager, graph and lean_attn_graph first, lean_attn_compile after,
#     as far as QUANT_END (seconds since the start, default 560) allows
# The raw rows go to data/raw/GPU (packed as OUTDIR/raw-GPU.tgz every 30 s and at the end), the diagnostics'
# rows to OUTDIR/*.csv (commit them under data/diagnostics/), the logs to OUTDIR/build.log and
# OUTDIR/gpu_tests_quant.txt. Environment: MODELS (default the three 7-8B models), QUANT_END, QUANT_PATHS (the
# paths step 4 measures again, space-separated; default "awq-marlin gptq-exllamav2"), QUANT_CONTEXTS (default 2048),
# QUANT_DIAG=0 (skip steps 2 and 3 and the GPU tests: the builds, then step 4 only), QUANT_PHASES (step 4's order,
# "ARMS:PATHS[:MODELS] ...": see the comment above step 4; a compiled-only phase of a path that needs no build runs
# beside the builds).
set -u
GPU=${1:?usage: bench/quant_checks_gpu.sh GPU OUTDIR}
OUTDIR=${2:?usage: bench/quant_checks_gpu.sh GPU OUTDIR}
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)
source bench/gpu_env.sh
END=${QUANT_END:-560}
MODELS=${MODELS:-llama-3.1-8b,qwen2.5-7b,mistral-7b-v0.3}
PATHS=${QUANT_PATHS:-awq-marlin gptq-exllamav2}
QCTX=${QUANT_CONTEXTS:-2048}
DIAG=${QUANT_DIAG:-1}
SECONDS=0
built=0
save() {
  local tmp="$OUTDIR/.raw.$BASHPID.tgz"
  ( cd data/raw && tar czf "$tmp" "$GPU" 2>/dev/null ) && mv "$tmp" "$OUTDIR/raw-$GPU.tgz"
}
left() { echo $(( END - SECONDS > 1 ? END - SECONDS : 1 )); }
( while sleep 30; do save; done ) & SAVER=$!
trap 'kill $SAVER 2>/dev/null; save' EXIT

echo "== builds (${SECONDS} s)"
( t0=$SECONDS
  timeout 330 python3 -c "from exllamav2.ext import exllamav2_ext; print('exllamav2 extension built')"
  cp .ext/torch_extensions/exllamav2_ext/exllamav2_ext*.so .ext/ 2>/dev/null \
    && python3 bench/optional_report.py --exllamav2-build $((SECONDS - t0)) .ext/exllamav2_build.json
) > "$OUTDIR/build_exllamav2.log" 2>&1 & BUILD=$!
if [ "$DIAG" = 1 ]; then
  bash bench/build_marlin.sh .src/marlin .ext > "$OUTDIR/build.log" 2>&1; tail -2 "$OUTDIR/build.log"
else  # Marlin's build beside ExLlamaV2's, both waited for by wait_builds
  bash bench/build_marlin.sh .src/marlin .ext > "$OUTDIR/build.log" 2>&1 & MARLIN=$!
fi

if [ "$DIAG" = 1 ]; then
echo "== marlin_prefill_gpu (${SECONDS} s)"
DECODEGAP_DIAG_DIR=$OUTDIR timeout 120 python3 bench/marlin_prefill_gpu.py 2>&1 | grep -v "^marlin_prefill_gpu.csv" | tail -5
echo "== quant_power_gpu (${SECONDS} s)"
DECODEGAP_DIAG_DIR=$OUTDIR timeout 240 python3 bench/quant_power_gpu.py \
  awq-marlin,int4-tinygemm,awq-triton,int4-triton,bnb-nf4 --budget 150 2>&1 | tail -3
wait $BUILD; cat "$OUTDIR/build_exllamav2.log" >> "$OUTDIR/build.log"; tail -2 "$OUTDIR/build.log"; built=1
echo "== gptq-exllamav2 power and the quantisation GPU tests (${SECONDS} s)"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short -W ignore::DeprecationWarning \
  tests/test_quant_gpu.py > "$OUTDIR/gpu_tests_quant.txt" 2>&1 & TESTS=$!
DECODEGAP_DIAG_DIR=$OUTDIR timeout 150 python3 bench/quant_power_gpu.py gptq-exllamav2 2>&1 | tail -3
wait $TESTS; tail -3 "$OUTDIR/gpu_tests_quant.txt"
fi
save

# Step 4's phases, ARMS:PATHS[:MODELS] each (commas inside, spaces between). A phase whose arms are all compiled
# (torch.compile's reduce-overhead: a replayed CUDA graph, timed with the host idle) may run beside the builds;
# any other phase, and any phase of a path that needs a build, waits for them first.
PHASES=${QUANT_PHASES:-"eager,graph,lean_attn_graph:${PATHS// /,} lean_attn_compile:${PATHS// /,}"}
wait_builds() {
  [ "$built" = 1 ] && return
  wait $BUILD ${MARLIN:-}; cat "$OUTDIR/build_exllamav2.log" >> "$OUTDIR/build.log"; tail -2 "$OUTDIR/build.log"; built=1
}
for phase in $PHASES; do
  IFS=: read -r arms paths models <<< "$phase"
  for path in ${paths//,/ }; do
    case ",$arms," in *,eager,*|*,graph,*|*_graph,*|*,lean,*) wait_builds;; esac
    case "$path" in awq-marlin|gptq-exllamav2) wait_builds;; esac
    echo "== $path $arms (${SECONDS} s, $(left) s left)"
    [ "$(left)" -gt 30 ] || { echo "out of time: $path $arms not measured"; continue; }
    timeout "$(left)" python3 -m decodegap measure --gpu "$GPU" --models "${models:-$MODELS}" --contexts "$QCTX" \
      --quant "$path" --arms "$arms" --sessions 1 --again --no-progress 2>&1 | grep -v "TensorFloat32\|warnings.warn" | tail -4
    save
  done
done
echo "quant_checks_gpu.sh: done at ${SECONDS} s"
