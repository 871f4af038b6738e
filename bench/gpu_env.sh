# Sourced by the bench/*_h200.sh scripts: the library on PYTHONPATH, unbuffered output, Hopper build
# targets, and any optional-kernel wheels found in .whl/ installed into /tmp/site (no network there).
export PYTHONPATH=$PWD/lib PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=9.0 FLASHINFER_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
