"""Whether the lean decoder's check against HF eager depends on PyTorch's SDPA backend choice at a context: its
error against HF eager at Llama-3.1-8B ctx 8192 and at neighbouring contexts, with the default SDPA backend choice
and with the math backend forced for both (then each side's attention is plain matmul-softmax). Written for the
lean check that failed at ctx 8192 on the H200 and not at 4096 or 16384 (data/README.md, decode.csv's `error`
rows); bench/lean_8192_sides.py then asks which side is off.
Writes data/diagnostics/lean_8192_diag.csv (bench/diagnostics.py): one row per (ctx, SDPA choice), the max.
relative error or the error raised. The results of its runs before that file existed are in this docstring in git
history: `bench/lean_8192_diag.py` at commit 7f4e0fa.
Usage (repository root, GPU): PYTHONPATH=lib python3 bench/lean_8192_diag.py"""

import torch
from diagnostics import Rows
from torch.nn.attention import SDPBackend, sdpa_kernel

from decodegap.harness import decode, models

MODEL = "llama-3.1-8b"
rows = Rows("lean_8192_diag", ("model", "ctx", "sdpa", "max_rel_err", "status", "reason"))
model = models.build_model(models.load_spec(MODEL), device="cuda")
with torch.inference_mode():
    for ctx in (8192, 8100, 8300):
        for label, scope in (("default", None), ("math", SDPBackend.MATH)):
            try:
                if scope is None:
                    err = decode.verify_arm(model, "lean", ctx, tol=1e9)
                else:
                    with sdpa_kernel(scope):
                        err = decode.verify_arm(model, "lean", ctx, tol=1e9)
                rows.add(model=MODEL, ctx=ctx, sdpa=label, max_rel_err=err, status="ok", reason="")
            except Exception as exc:  # noqa: BLE001 (a diagnostic: record and go on)
                rows.add(model=MODEL, ctx=ctx, sdpa=label, max_rel_err="", status="error",
                         reason=f"{type(exc).__name__}: {str(exc)[:200]}")
