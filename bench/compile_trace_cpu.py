"""How long torch.compile takes to trace the HF decode step, by compile setting, on a CPU: the 32-layer
Llama-3.1-8B architecture at a narrow width (hidden 256: trace time grows with the number of ops, not with
their sizes), AOT autograd's backend (aot_eager; no inductor, so no C++ or Triton compile), two cache lengths.
Prints the first-call seconds of each setting, each in a fresh process. Measured 2026-11-29 on this project's
CPU machine (two runs): static shapes 10.4-12.0 s per cache length; dynamic=True 36.6-37.6 s once (dynamo
traced the model twice, restarting to specialize the step's floats); dynamic=True with specialize_float (as
decode.compiled sets it) 16.9-18.6 s once.
Usage (repository root): PYTHONPATH=lib python bench/compile_trace_cpu.py
"""

import subprocess
import sys

BODY = """
import sys, time, torch
from decodegap import decode, models
label = {label!r}
torch._dynamo.config.specialize_float = {specialize_float}
spec = models.load_spec("llama-3.1-8b")
config = dict(spec.config, hidden_size=256, intermediate_size=512, num_attention_heads=8, num_key_value_heads=2,
              head_dim=32, vocab_size=1024, bos_token_id=1, eos_token_id=2)
model = models.build_model(models.ModelSpec(spec.key, spec.name, None, "narrow", True, config), device="cpu")
forward = torch.compile(model.forward, backend="aot_eager", fullgraph=True, dynamic={dynamic})
with torch.inference_mode():
    for ctx in (64, 128):
        state = decode.StaticStep(model, ctx, ctx + 8, forward=forward)
        t0 = time.perf_counter()
        state.step()
        print(f"{{label}}: cache length {{ctx + 8}}: first call {{time.perf_counter() - t0:.1f}} s", flush=True)
"""

SETTINGS = {"static shapes": (False, False), "dynamic=True": (True, False),
            "dynamic=True, specialize_float": (True, True)}

for label, (dynamic, specialize_float) in SETTINGS.items():
    code = BODY.format(label=label, dynamic=dynamic, specialize_float=specialize_float)
    subprocess.run([sys.executable, "-c", code], check=True)
