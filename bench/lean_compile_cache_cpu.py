"""Does the compiled lean step grow with the cache length faster than the eager one? On a CPU (inductor's C++
backend, static shapes), a 4-layer tiny Llama, ms per decode step at three cache lengths, compiled and eager (the
lean decoder as it is: a K and a V tensor per layer; the earlier one-tensor-for-all-layers cache made the compiled
step clone each layer's slice every step, which is how this script was first used).
Writes data/diagnostics/lean_compile_cache_cpu.csv (bench/diagnostics.py): one row per (cache length, step), ms
per step, the mean of 20 steps after 3 warm-up steps.
Usage (repository root): PYTHONPATH=lib python bench/lean_compile_cache_cpu.py
"""

import time

import torch
from diagnostics import Rows

from decodegap.harness import lean, models

STEPS, WARMUP = 20, 3
torch._dynamo.config.recompile_limit = 64
spec = models.load_spec("llama-tiny")
cfg = dict(spec.config, num_hidden_layers=4, num_key_value_heads=2)
model = models.build_model(models.ModelSpec(spec.key, spec.name, None, "t", True, cfg), device="cpu")
rows = Rows("lean_compile_cache_cpu", ("model", "layers", "hidden_size", "cache_len", "step", "step_ms"))


def ms_per_step(state) -> float:
    for _ in range(WARMUP):
        state.step()
    t0 = time.perf_counter()
    for _ in range(STEPS):
        state.step()
    return (time.perf_counter() - t0) / STEPS * 1e3


for cache_len in (1024, 16384, 65536):
    with torch.inference_mode():
        compiled = lean.LeanStep(model, 16, cache_len)
        compiled.forward = torch.compile(compiled.lean, dynamic=False)
        for label, state in (("compiled", compiled), ("eager", lean.LeanStep(model, 16, cache_len))):
            rows.add(model="llama-tiny", layers=4, hidden_size=cfg["hidden_size"], cache_len=cache_len, step=label,
                     step_ms=round(ms_per_step(state), 3))
