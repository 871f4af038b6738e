"""Which side is off when the lean decoder's check against HF eager fails at a cell (bench/lean_8192_diag.py: at
Llama-3.1-8B ctx 8192 it failed with PyTorch's default SDPA choice on both sides and passed with the math backend
forced on both): each side (HF eager, lean eager) decodes the same prompt teacher-forced under each SDPA backend
(default choice, efficient, cuDNN, math), and each is compared with the same side under the math backend; then the
lean side against the HF side under the same backend. ctx 4096 is the control. Since this diagnostic the lean
prefill leaves cuDNN out (lean.PREFILL_SDPA_BACKENDS), and the check, like this script through decode.run_arm,
feeds both sides one token (decode.teacher_token) rather than each side's own prefill argmax.
Writes data/diagnostics/lean_8192_sides.csv (bench/diagnostics.py): one row per comparison (model, ctx, cache
length, `side` eager/lean/lean_vs_hf, backend, reference), the max. relative error over three teacher-forced steps,
or the error a backend raised. The results of its runs before that file existed (on the H200, 2026-11-29) are in
this docstring in git history: `bench/lean_8192_sides.py` at commit 1c21d32.
Usage (repository root, GPU): PYTHONPATH=lib python3 bench/lean_8192_sides.py [MODEL CTX ...]"""

import sys

import torch
from diagnostics import Rows
from torch.nn.attention import SDPBackend, sdpa_kernel

from decodegap.harness import decode, lean, models

BACKENDS = {"default": None, "efficient": SDPBackend.EFFICIENT_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "math": SDPBackend.MATH}
MODEL = sys.argv[1] if len(sys.argv) > 1 else "llama-3.1-8b"
CONTEXTS = [int(c) for c in sys.argv[2:]] or [8192, 4096]
PREFILL = lean.PREFILL_SDPA_BACKENDS  # the lean prefill's own choice (since the ctx-8192 finding: no cuDNN)
rows = Rows("lean_8192_sides", ("model", "ctx", "cache_len", "side", "backend", "reference", "max_rel_err", "status",
                                 "reason"))
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
                    rows.add(model=MODEL, ctx=ctx, cache_len=cache_len, side=arm, backend=name, reference="",
                             max_rel_err="", status="error", reason=f"{type(exc).__name__}: {str(exc)[:160]}")
            for name, got in logits.items():
                if name != "math" and "math" in logits:
                    err = max(decode.max_relative_error(g, r) for g, r in zip(got, logits["math"]))
                    rows.add(model=MODEL, ctx=ctx, cache_len=cache_len, side=arm, backend=name, reference="math",
                             max_rel_err=err, status="ok", reason="")
            if arm == "lean":
                for name in logits:
                    if name in hf:
                        err = max(decode.max_relative_error(g, r) for g, r in zip(logits[name], hf[name]))
                        rows.add(model=MODEL, ctx=ctx, cache_len=cache_len, side="lean_vs_hf", backend=name,
                                 reference=f"HF eager, {name}", max_rel_err=err, status="ok", reason="")
            hf = logits
