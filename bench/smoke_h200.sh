#!/usr/bin/env bash
# First look at a GPU machine: GPU tests, then a small sweep of every arm into a scratch data folder.
# Usage (repository root): bash bench/smoke_h200.sh OUTDIR
set -u
OUTDIR=${1:?usage: bench/smoke_h200.sh OUTDIR}
export PYTHONPATH=$PWD/lib PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.get_device_name())"
python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tail -25
D=/tmp/smoke-data; rm -rf $D; mkdir -p $D; cp -r data/models data/specs $D/
time python3 -m decodegap --data-dir $D measure --gpu h200 --models llama-3.1-8b --contexts 2048,16384 \
  --arms eager,hf_default,graph,compile --sessions 2 --steps 30 --no-progress --bandwidth
cp $D/raw/h200/*.csv $D/raw/h200/env.json "$OUTDIR"/
python3 - <<'PY'
import sys; sys.path.insert(0, "lib")
import pandas as pd
d = pd.read_csv("/tmp/smoke-data/raw/h200/decode.csv")
print(d[d.status=="ok"].groupby(["model","ctx","arm","session"]).step_ms.median().unstack())
print(d[~d.status.isin(["ok"])].groupby(["model","ctx","arm","status"]).step_ms.agg(["size","max"]))
print(pd.read_csv("/tmp/smoke-data/raw/h200/bandwidth.csv").bandwidth_gbps.describe())
PY
