"""How long the compiled lean step takes to compile on a CPU with and without LeanLayer marked a nested compile
region (decode.compiled(..., layers=lean.layers), as the lean_compile arm does): the 32-layer Llama-3.1-8B
architecture at a narrow width (compile time grows with the number of ops, not their sizes), inductor, a cold
cache per setting (each in a fresh process with its own TORCHINDUCTOR_CACHE_DIR), the first call (the compile)
and the compiled step against the eager one.
Writes data/diagnostics/lean_compile_regions_cpu.csv (bench/diagnostics.py): one row per setting, the first
call's seconds and the max. relative error of the compiled step against the eager one (bf16).
Usage (repository root): PYTHONPATH=lib python bench/lean_compile_regions_cpu.py
"""

import json
import os
import subprocess
import sys
import tempfile

from diagnostics import Rows

BODY = """
import json, time, torch
from decodegap.harness import decode, lean, models
spec = models.load_spec("llama-3.1-8b")
config = dict(spec.config, hidden_size=256, intermediate_size=512, num_attention_heads=8, num_key_value_heads=2,
              head_dim=32, vocab_size=1024, bos_token_id=1, eos_token_id=2)
model = models.build_model(models.ModelSpec(spec.key, spec.name, None, "narrow", True, config), device="cpu")
with torch.inference_mode():
    eager = lean.LeanStep(model, 64, 72, feedback=False)
    state = lean.LeanStep(model, 64, 72, feedback=False)
    state.forward = decode.compiled(state.lean, layers={layers}, mode=None, dynamic=True)
    t0 = time.perf_counter()
    got = state.step()
    first = time.perf_counter() - t0
    err = decode.max_relative_error(got.float(), eager.step().float())
print("RESULT", json.dumps(dict(first_call_s=round(first, 2), max_rel_err=err)), flush=True)
"""

rows = Rows("lean_compile_regions_cpu", ("setting", "cache_len", "first_call_s", "max_rel_err"))
for label, layers in (("layer regions", "state.lean.layers"), ("whole step", "()")):
    with tempfile.TemporaryDirectory() as cache:
        out = subprocess.run([sys.executable, "-c", BODY.format(layers=layers)], check=True, capture_output=True,
                             text=True, env=dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)).stdout
    for line in out.splitlines():
        if line.startswith("RESULT "):
            rows.add(setting=label, cache_len=72, **json.loads(line[7:]))
