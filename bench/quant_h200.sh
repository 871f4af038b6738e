#!/usr/bin/env bash
# Notebook 04's measurements on a GPU machine (not yet run on the H200: the session that wrote it had no
# device time left). Wheels in .whl/ (bitsandbytes, exllamav2, autoawq, torchao: see ../shared/BACKENDS.md
# for what each needs on the H200) are installed first; a missing path becomes `unavailable` rows.
# Usage (repository root): bash bench/quant_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/quant_h200.sh OUTDIR}
source bench/gpu_env.sh
SECONDS=0
python3 - <<'PY'
from decodegap import quant_bench
print(quant_bench.measure_quant("h200", ["qwen2.5-7b", "mistral-7b-v0.3", "llama-3.1-8b"], contexts=(2048,),
                                arms=("eager", "graph"), sessions=3))
PY
echo "quantisation sweep done at ${SECONDS} s"
cp data/raw/h200/*.csv data/raw/h200/env.json "$OUTDIR"/
