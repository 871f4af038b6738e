"""Which side is off at Llama-3.1-8B ctx 8192 (bench/lean_8192_diag.py: the lean decoder against HF eager is 1.64 with
PyTorch's default SDPA choice on both sides, 0.047 with the math backend forced on both): each side (HF eager, lean
eager) decodes the same prompt teacher-forced under each SDPA backend (default choice, efficient, cuDNN, math), and
each is compared with the same side under the math backend. ctx 4096 is the control. Prints one line per case.
Measured on the H200 2026-11-29 (bench/ladder3_h200.sh, commit 98e6285; cache length 8227 / 4131, three
teacher-forced steps), max rel. error against the same side under math:
  ctx 8192  HF eager: default 0.0497, cuDNN 0.0497 (efficient refuses HF's call);
            lean: default 1.4699, cuDNN 1.4699, efficient 0.0519; lean vs HF, both math 0.0470.
  ctx 4096  HF eager: default 0.0552, cuDNN 0.0552; lean: default 0.0542, cuDNN 0.0542, efficient 0.0495.
PyTorch's default choice for the lean prefill at ctx 8192 is cuDNN's attention. The same run's checks failed for
Llama ctx 8192 lean_attn_graph too, whose decode steps attend in Triton: it is the prefill that differs. Mistral ctx
16384 failed the same way (1.51-1.53). Since then the lean prefill leaves cuDNN out (lean.PREFILL_SDPA_BACKENDS),
and Llama ctx 8192 passes (0.047-0.053).
Mistral-7B ctx 16384 (bench/ladder5_h200.sh, commit d644c1d; cache 16419): HF eager default 0.0512, cuDNN 0.0512
against math; lean default 0.0503, efficient 0.0621, cuDNN 0.0523; lean vs HF: both default 1.5000, both cuDNN
1.5121, both math 1.5000: each side agrees with itself under every backend and the two disagree under math too.
Reading, found after these runs: this script (and the check) fed each side the argmax of its own prefill, and with
random weights that argmax is a near-tie any rounding difference can flip; two sides fed different tokens give
unrelated logits, 1.4-1.6 apart by this measure. Every failure above is of that size, so a flipped argmax explains
them as well as a wrong kernel does; which it was is not known. run_arm now feeds one token (decode.teacher_token)
to every side; neither cell was measured again with it (no device time left).
Usage (repository root, GPU): PYTHONPATH=lib python3 bench/lean_8192_sides.py [MODEL CTX ...]"""

import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from decodegap import decode, lean, models

BACKENDS = {"default": None, "efficient": SDPBackend.EFFICIENT_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "math": SDPBackend.MATH}
MODEL = sys.argv[1] if len(sys.argv) > 1 else "llama-3.1-8b"
CONTEXTS = [int(c) for c in sys.argv[2:]] or [8192, 4096]
PREFILL = lean.PREFILL_SDPA_BACKENDS  # the lean prefill's own choice (since the ctx-8192 finding: no cuDNN)
model = models.build_model(models.load_spec(MODEL), device="cuda")
with torch.inference_mode():
    for ctx in CONTEXTS:
        cache_len = decode.max_cache_len("lean", ctx, 5, 30)  # the lean timing run's cache length
        for arm in ("eager", "lean"):
            logits = {}
            for name, backend in BACKENDS.items():
                try:  # a forced backend is forced on the lean prefill too (it sets its own backends otherwise)
                    lean.PREFILL_SDPA_BACKENDS = PREFILL if backend is None else (backend,)
                    scope = sdpa_kernel(backend) if backend is not None else torch.no_grad()
                    with scope:
                        logits[name] = decode.run_arm(model, arm, ctx, warmup=0, steps=3, keep_logits=True,
                                                      feedback=False, cache_len=cache_len).logits
                except Exception as exc:  # noqa: BLE001 (a diagnostic: report and go on)
                    print(f"ctx {ctx} {arm} {name}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
            for name, got in logits.items():
                if name != "math" and "math" in logits:
                    err = max(decode.max_relative_error(g, r) for g, r in zip(got, logits["math"]))
                    print(f"ctx {ctx} cache {cache_len} {arm} side, {name} vs math: max rel err {err:.4f}", flush=True)
            if arm == "lean":
                for name in logits:
                    if name in hf:
                        err = max(decode.max_relative_error(g, r) for g, r in zip(logits[name], hf[name]))
                        print(f"ctx {ctx} lean vs HF, both {name}: {err:.4f}", flush=True)
            hf = logits
