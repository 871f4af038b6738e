"""How far each arm's teacher-forced logits are from eager's, per model and context, and how far the static-cache
decode is from one full forward over the same tokens: what the verification tolerance (decode.verify_arm, 0.1) was
calibrated on (sweep.py's module docstring).
Writes data/diagnostics/verify_diag.csv (bench/diagnostics.py): one row per check: `check` vs_eager (arm against
eager, ctx) or decode_vs_full_forward (ctx 256, `step` 0-2), the max. relative error, or the error raised.
Usage (repository root, GPU): PYTHONPATH=lib python3 bench/verify_diag.py"""

import torch
from diagnostics import Rows

from decodegap.harness import decode, models

rows = Rows("verify_diag", ("model", "check", "arm", "ctx", "step", "max_rel_err", "logit_max", "status", "reason"))
for key in ("qwen2.5-7b", "mistral-7b-v0.3", "llama-3.1-8b"):
    model = models.build_model(models.load_spec(key), device="cuda")
    for ctx in (2048, 16384):
        for arm in ("graph", "hf_default") + (("compile",) if ctx == 2048 and key == "llama-3.1-8b" else ()):
            try:
                err = decode.verify_arm(model, arm, ctx, tol=1.0)
                rows.add(model=key, check="vs_eager", arm=arm, ctx=ctx, step="", max_rel_err=err, logit_max="",
                         status="ok", reason="")
            except Exception as exc:  # noqa: BLE001 (a diagnostic: record and go on)
                rows.add(model=key, check="vs_eager", arm=arm, ctx=ctx, step="", max_rel_err="", logit_max="",
                         status="error", reason=f"{type(exc).__name__}: {str(exc)[:200]}")
    with torch.inference_mode():  # decode vs one full forward over the same tokens
        ctx = 256
        state = decode.StaticStep(model, ctx, ctx + 4)
        toks, outs = [state.tok.clone()], []
        for _ in range(3):
            outs.append(state.step().float().clone())
            toks.append(state.tok.clone())
        ids = torch.cat([decode.prompt_ids(model.config.vocab_size, ctx, "cuda")] + toks[:3], dim=1)
        full = model(ids).logits.float()
        for i, o in enumerate(outs):
            rows.add(model=key, check="decode_vs_full_forward", arm="eager", ctx=ctx, step=i,
                     max_rel_err=decode.max_relative_error(o[0, -1], full[0, ctx + i]),
                     logit_max=float(full.abs().max()), status="ok", reason="")
    del model
    torch.cuda.empty_cache()
