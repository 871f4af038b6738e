"""Diagnostics: how far each arm's teacher-forced logits are from eager's, per model and context
(calibrates the verification tolerance). Prints one line per check."""
import sys
import torch
sys.path.insert(0, "lib")
from decodegap import decode, models

for key in ("qwen2.5-7b", "mistral-7b-v0.3", "llama-3.1-8b"):
    model = models.build_model(models.load_spec(key), device="cuda")
    for ctx in (2048, 16384):
        for arm in ("graph", "hf_default") + (("compile",) if ctx == 2048 and key == "llama-3.1-8b" else ()):
            try:
                err = decode.verify_arm(model, arm, ctx, tol=1.0)
                print(f"VERIFY {key} ctx={ctx} arm={arm} max_rel_err={err:.4g}", flush=True)
            except Exception as exc:
                print(f"VERIFY {key} ctx={ctx} arm={arm} FAILED {type(exc).__name__}: {exc}", flush=True)
    with torch.inference_mode():  # decode vs one full forward over the same tokens
        ctx = 256
        state = decode.StaticStep(model, ctx, ctx + 4)
        toks, outs = [state.tok.clone()], []
        for _ in range(3):
            outs.append(state.step().float().clone()); toks.append(state.tok.clone())
        ids = torch.cat([decode.prompt_ids(model.config.vocab_size, ctx, "cuda")] + toks[:3], dim=1)
        full = model(ids).logits.float()
        errs = [decode.max_relative_error(o[0, -1], full[0, ctx + i]) for i, o in enumerate(outs)]
        print(f"FULLFWD {key} errs={[round(e, 4) for e in errs]} logit_max={float(full.abs().max()):.3g}", flush=True)
    del model
    torch.cuda.empty_cache()
