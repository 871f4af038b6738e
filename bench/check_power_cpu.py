"""How much of a wrong attention the decode check (decode.verify_arm, tolerance 0.1) sees with the random weights
of the real shapes (std 0.02): the lean decoder against HF eager on a CPU, the Llama-3.1-8B architecture at a narrow
width (4 layers, hidden 256, 4 heads of 64, 1 KV head), bf16 and int4 tinygemm, as built and with the lean side's
rotary sign-flipped. A flipped rotary that stays under the tolerance means the check catches broken caches, wrong
projections and unrelated tokens, not a wrong attention: the attention's correctness then rests on the tiny-model
tests with std-0.2 weights (tests/test_lean.py, tests/test_decode.py: a position off by one fails there) and on the
kernels' tests against their references on the real shapes.
Then the sharpened check (decodegap.sharp_check: every attention score sharpened, q and k scaled) on the bf16
model at ctx 256, as built and with each fault it is calibrated on: the rotary flipped, the rotary one position
off at decode, a block of 32 cached positions masked out at decode, and the cache read one slot off (the newest
key dropped, a zero key read), at factor 1 (the plain check) and at sharp_check.SHARPEN.
Writes data/diagnostics/check_power_cpu.csv (bench/diagnostics.py): one row per (path, case, ctx, sharpen), the
max. relative error against HF eager and the tolerance.
Usage (repository root): PYTHONPATH=lib python bench/check_power_cpu.py
"""

import contextlib

import torch
from diagnostics import Rows

from decodegap import decode, lean, models, quant, sharp_check

TOLERANCE = 0.1  # decode.verify_arm's default
rows = Rows("check_power_cpu", ("path", "case", "ctx", "sharpen", "max_rel_err", "tolerance"))
spec = models.load_spec("llama-3.1-8b")
config = dict(spec.config, hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=1,
              head_dim=64, num_hidden_layers=4, vocab_size=1024, bos_token_id=1, eos_token_id=2)
for path in ("bf16", "int4-tinygemm"):
    model = models.build_model(models.ModelSpec(spec.key, spec.name, None, "narrow", True, config), device="cpu")
    if path != "bf16":
        quant.quantise_model_(model, path)
    for ctx in (64, 256):
        rows.add(path=path, case="as built", ctx=ctx, sharpen=1.0,
                 max_rel_err=decode.verify_arm(model, "lean", ctx, tol=1e9), tolerance=TOLERANCE)
    real = lean._rotate_half
    lean._rotate_half = lambda x: -real(x)  # the lean side's rotary sign-flipped
    try:
        flipped = decode.verify_arm(model, "lean", 256, tol=1e9)
    finally:
        lean._rotate_half = real
    rows.add(path=path, case="rotary sign-flipped", ctx=256, sharpen=1.0, max_rel_err=flipped, tolerance=TOLERANCE)


@contextlib.contextmanager
def fault(case):
    """The lean side with one fault in its attention (module attributes patched, put back on exit)."""
    real_forward, real_attention, real_rotate = lean.LeanDecoder.forward, lean._attention, lean._rotate_half

    def one_off(self, ids, start_pos):  # a decode step's rotary at the next position
        if ids.shape[1] != 1:
            return real_forward(self, ids, start_pos)
        cos, sin = self.cos, self.sin
        self.cos, self.sin = torch.roll(cos, -1, 0), torch.roll(sin, -1, 0)
        try:
            return real_forward(self, ids, start_pos)
        finally:
            self.cos, self.sin = cos, sin

    def dropped(q, k, v, mask, scale, prefill):  # a decode step skips 32 cached positions
        if not prefill:
            mask = mask.clone()
            mask[..., 96:128] = False
        return real_attention(q, k, v, mask, scale, prefill)

    def slot_off(q, k, v, mask, scale, prefill):  # a decode step reads the cache one slot off
        if not prefill:
            k, v = torch.roll(k, 1, dims=2), torch.roll(v, 1, dims=2)
        return real_attention(q, k, v, mask, scale, prefill)

    if case == "rotary sign-flipped":
        lean._rotate_half = lambda x: -real_rotate(x)
    elif case == "rotary one position off":
        lean.LeanDecoder.forward = one_off
    elif case == "cache block dropped":
        lean._attention = dropped
    elif case == "cache read one slot off":
        lean._attention = slot_off
    try:
        yield
    finally:
        lean.LeanDecoder.forward, lean._attention, lean._rotate_half = real_forward, real_attention, real_rotate


model = models.build_model(models.ModelSpec(spec.key, spec.name, None, "narrow", True, config), device="cpu")
for factor in (1.0, sharp_check.SHARPEN):
    for case in ("as built", "rotary sign-flipped", "rotary one position off", "cache block dropped",
                 "cache read one slot off"):
        with fault(case):
            err = sharp_check.verify_arm_sharpened(model, "lean", 256, factor=factor, tol=1e9)
        rows.add(path="bf16", case=f"sharpened: {case}", ctx=256, sharpen=factor, max_rel_err=err,
                 tolerance=sharp_check.SHARP_TOL)
