# Sourced by bench/measure.sh: the library on PYTHONPATH, unbuffered output, build targets for this machine's GPU
# (its compute capability from nvidia-smi, e.g. 9.0 on Hopper; set TORCH_CUDA_ARCH_LIST to choose), and any
# optional-kernel wheels found in .whl/ and .whl-*/ installed into .site/ (no network needed).
GPU_CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1)
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-${GPU_CC:-9.0}}
export FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:-$TORCH_CUDA_ARCH_LIST}
export PYTHONPATH=$PWD/lib PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-$(nproc)}
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache  # warm across the session processes of one run
# kernels built from source here (bench/build_marlin.sh; ExLlamaV2's JIT build): kept in .ext/ so that a later run
# on this machine (or another, given the packed .ext in .extpack/) reuses them
mkdir -p .ext && export TORCH_EXTENSIONS_DIR=$PWD/.ext/torch_extensions DECODEGAP_EXT_DIR=$PWD/.ext
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")}
export CUDA_HOME LIBRARY_PATH=$CUDA_HOME/lib64/stubs:${LIBRARY_PATH:-}  # FlashInfer's JIT links libcuda
# Wheels come in .whl/ and, if you keep them apart, in more folders .whl-*/ (e.g. .whl-fa3/, .whl-flashinfer/).
# They go to .site/ (ignored by git), which a later run on the same machine keeps: a package installed by an
# earlier run stays importable when its wheel is no longer in .whl/.
SITE=$PWD/.site
mkdir -p "$SITE"
for wheel in .whl/*.whl .whl-*/*.whl; do
  [ -f "$wheel" ] || continue
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$wheel" \
    || echo "gpu_env.sh: could not install $wheel"
done
export PYTHONPATH=$PYTHONPATH:$SITE
# FlashInfer's JIT-built modules: kept in .ext/ with the other builds, so a later call reuses them
export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-$PWD/.ext/flashinfer}
# ExLlamaV2's JIT build includes cusparse.h, which pip's CUDA headers keep under nvidia/cu13/include
NV_INC=$(python3 -c "import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], 'cu13', 'include'))" 2>/dev/null)
[ -n "$NV_INC" ] && [ -d "$NV_INC" ] && export CPATH=$NV_INC:${CPATH:-}
export PYTHONPATH=$PYTHONPATH:$PWD/.ext  # marlin_cuda*.so
true
