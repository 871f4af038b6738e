"""How long torch.compile takes to trace the HF decode step, by compile setting, on a CPU: the 32-layer
Llama-3.1-8B architecture at a narrow width (hidden 256: trace time grows with the number of ops, not with
their sizes), AOT autograd's backend (aot_eager; no inductor, so no C++ or Triton compile), two cache lengths,
each setting in a fresh process. It is why decode.compiled sets specialize_float: with dynamic=True alone dynamo
traces the model twice, restarting to specialize the step's floats.
Writes data/diagnostics/compile_trace_cpu.csv (bench/diagnostics.py): one row per (setting, cache length), the
first call's seconds.
Usage (repository root): PYTHONPATH=lib python bench/compile_trace_cpu.py
"""

import json
import subprocess
import sys

from diagnostics import Rows

BODY = """
import json, time, torch
from decodegap.harness import decode, models
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
        print("RESULT", json.dumps(dict(cache_len=ctx + 8, first_call_s=round(time.perf_counter() - t0, 2))), flush=True)
"""

SETTINGS = {"static shapes": (False, False), "dynamic=True": (True, False),
            "dynamic=True, specialize_float": (True, True)}

rows = Rows("compile_trace_cpu", ("setting", "dynamic", "specialize_float", "cache_len", "first_call_s"))
for label, (dynamic, specialize_float) in SETTINGS.items():
    code = BODY.format(dynamic=dynamic, specialize_float=specialize_float)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("RESULT "):
            rows.add(setting=label, dynamic=dynamic, specialize_float=specialize_float, **json.loads(line[7:]))
