#!/usr/bin/env bash
# Notebook 04 on the H200 in one run: the optional kernel packages from .whl/ (bench/gpu_env.sh), Marlin's
# marlin_cuda built from its sources (bench/build_marlin.sh; .src/marlin), ExLlamaV2's extension JIT-built (both
# kept in .ext/, which a later run can carry back), the quantisation GPU tests, then `decodegap quant`: every
# path's layer checks and its decode steps (each quantised model checked against its bf16 self first).
# Every 20 s the raw files are copied to OUTDIR, so a run cut by its time limit loses nothing it measured; run
# again to resume. Usage (repository root): bash bench/quant_h200.sh OUTDIR [decodegap quant options]
set -u
OUTDIR=${1:?usage: bench/quant_h200.sh OUTDIR [options of python -m decodegap quant]}
shift
source bench/gpu_env.sh
save() { for f in decode.csv verify.csv env.json; do cp data/raw/h200/$f "$OUTDIR"/ 2>/dev/null; done; true; }
SECONDS=0
[ -f .extpack/ext.tgz ] && tar xzf .extpack/ext.tgz -C .ext  # the builds of an earlier run, carried back
bash bench/build_marlin.sh .src/marlin .ext > "$OUTDIR"/build.log 2>&1; tail -3 "$OUTDIR"/build.log
echo "marlin ready at ${SECONDS} s"
if ! ls .ext/exllamav2_ext*.so >/dev/null 2>&1; then  # ExLlamaV2 imports a prebuilt exllamav2_ext first
  T0=$SECONDS
  timeout 400 python3 -c "from exllamav2.ext import exllamav2_ext; print('exllamav2 extension built')" >> "$OUTDIR"/build.log 2>&1
  cp .ext/torch_extensions/exllamav2_ext/exllamav2_ext*.so .ext/ 2>/dev/null \
    && python3 -c "import json, sys, torch; json.dump(dict(kernel='exllamav2_ext (exllamav2 0.3.2, its own JIT build)', torch=torch.__version__, build_s=int(sys.argv[1])), open('.ext/exllamav2_build.json', 'w'))" $((SECONDS - T0))
fi
echo "exllamav2 ready at ${SECONDS} s"
# the builds go back in parts (a returned file may have 16 MiB): cat ext.tgz.part-* > ext.tgz; tar xzf it into .ext
( cd .ext && tar czf - *.so *.json 2>/dev/null ) | split -b 12m - "$OUTDIR"/ext.tgz.part-; ls -la "$OUTDIR"/ext.tgz.part-*
python3 -c "from decodegap import quant
for k in quant.PATHS: print(k, '->', quant.unavailable_reason(k, 'cuda') or 'available')"
save
( while sleep 20; do save; done ) & SAVER=$!
if [ -z "${SKIP_TESTS:-}" ]; then
  timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider --tb=short -W ignore::DeprecationWarning \
    tests/test_quant_gpu.py tests/test_int4_gemv.py > "$OUTDIR"/gpu_tests.txt 2>&1; tail -n 12 "$OUTDIR"/gpu_tests.txt
  echo "quant GPU tests done at ${SECONDS} s"
fi
timeout $((${QUANT_TIMEOUT:-560} - SECONDS)) python3 -m decodegap quant --gpu h200 --no-progress "$@" 2>&1 \
  | grep -v "warnings.warn\|TensorFloat32\|^DEBUG" | tail -n 40
echo "quantisation sweep stopped at ${SECONDS} s"
kill $SAVER; save
