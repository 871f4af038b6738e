"""Why the lean decoder's check fails at Llama-3.1-8B ctx 8192 on the H200 (1.63 against HF eager) and not at
4096 or 16384: its error against HF eager at ctx 8192 and at neighbouring contexts, with PyTorch's default
SDPA backend choice and with the math backend forced for both (then each side's attention is plain
matmul-softmax). Prints one line per case. Measured on the H200 2026-11-29 (bench/final2_h200.sh, commit
e5a0089): ctx 8192 default 1.6402, math 0.0470; ctx 8100 0.0461 / 0.0460; ctx 8300 0.0491 / 0.0421. Usage (repository root, GPU): PYTHONPATH=lib python3 bench/lean_8192_diag.py"""

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from decodegap import decode, models

model = models.build_model(models.load_spec("llama-3.1-8b"), device="cuda")
with torch.inference_mode():
    for ctx in (8192, 8100, 8300):
        for label, scope in (("default SDPA", None), ("math SDPA", SDPBackend.MATH)):
            try:
                if scope is None:
                    err = decode.verify_arm(model, "lean", ctx, tol=1e9)
                else:
                    with sdpa_kernel(scope):
                        err = decode.verify_arm(model, "lean", ctx, tol=1e9)
                print(f"lean vs HF eager, ctx {ctx}, {label}: max rel err {err:.4f}", flush=True)
            except Exception as exc:  # noqa: BLE001 (a diagnostic: report and go on)
                print(f"ctx {ctx}, {label}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
