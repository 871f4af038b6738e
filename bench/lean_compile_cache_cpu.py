"""Does the compiled lean step grow with the cache length faster than the eager one? On a CPU (inductor's C++
backend, static shapes), a 4-layer tiny Llama, ms per decode step at three cache lengths, compiled and eager.
Measured 2026-11-29 on this project's CPU machine (2 cores): with one K and one V tensor for all layers, written
in place through a per-layer slice, compiled 1.03 / 15.74 / 67.21 ms against eager 1.53 / 9.30 / 32.48 ms at
cache 1024 / 16384 / 65536 (inductor's output code cloned each layer's whole slice and copied it back every
step); with a K and a V tensor per layer (lean.LeanDecoder since), compiled 1.22 / 9.38 / 34.42 ms against eager
2.10 / 11.63 / 43.91 ms. The H200 had shown the same shape: Llama-3.1-8B ctx 16384, lean compiled 34.4 ms
against lean graph 17.6 ms. Usage (repository root): PYTHONPATH=lib python bench/lean_compile_cache_cpu.py
"""

import time, torch, sys
from decodegap import models, lean, decode
torch._dynamo.config.recompile_limit = 64
spec = models.load_spec("llama-tiny")
cfg = dict(spec.config, num_hidden_layers=4, num_key_value_heads=2)
model = models.build_model(models.ModelSpec(spec.key, spec.name, None, "t", True, cfg), device="cpu")
print({k: cfg[k] for k in ("hidden_size","num_attention_heads","num_key_value_heads","head_dim") if k in cfg})
for L in (1024, 16384, 65536):
    with torch.inference_mode():
        st = lean.LeanStep(model, 16, L)
        f = torch.compile(st.lean, dynamic=False)
        st.forward = f
        for _ in range(3): st.step()
        t0 = time.perf_counter()
        for _ in range(20): st.step()
        tc = (time.perf_counter() - t0) / 20
        st2 = lean.LeanStep(model, 16, L)
        for _ in range(3): st2.step()
        t0 = time.perf_counter()
        for _ in range(20): st2.step()
        te = (time.perf_counter() - t0) / 20
    print(f"cache {L}: compiled {tc*1e3:.2f} ms, eager {te*1e3:.2f} ms", flush=True)
