"""How much of a wrong attention the decode check (decode.verify_arm, tolerance 0.1) sees with the random weights
of the real shapes (std 0.02): the lean decoder against HF eager on a CPU, the Llama-3.1-8B architecture at a narrow
width (4 layers, hidden 256, 4 heads of 64, 1 KV head), bf16 and int4 tinygemm, as built and with the lean side's
rotary sign-flipped. A flipped rotary that stays under the tolerance means the check catches broken caches, wrong
projections and unrelated tokens, not a wrong attention: the attention's correctness then rests on the tiny-model
tests with std-0.2 weights (tests/test_lean.py, tests/test_decode.py: a position off by one fails there) and on the
kernels' tests against their references on the real shapes.
Writes data/diagnostics/check_power_cpu.csv (bench/diagnostics.py): one row per (path, case, ctx), the max.
relative error against HF eager and the tolerance.
Usage (repository root): PYTHONPATH=lib python bench/check_power_cpu.py
"""

from diagnostics import Rows

from decodegap import decode, lean, models, quant

TOLERANCE = 0.1  # decode.verify_arm's default
rows = Rows("check_power_cpu", ("path", "case", "ctx", "max_rel_err", "tolerance"))
spec = models.load_spec("llama-3.1-8b")
config = dict(spec.config, hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=1,
              head_dim=64, num_hidden_layers=4, vocab_size=1024, bos_token_id=1, eos_token_id=2)
for path in ("bf16", "int4-tinygemm"):
    model = models.build_model(models.ModelSpec(spec.key, spec.name, None, "narrow", True, config), device="cpu")
    if path != "bf16":
        quant.quantise_model_(model, path)
    for ctx in (64, 256):
        rows.add(path=path, case="as built", ctx=ctx, max_rel_err=decode.verify_arm(model, "lean", ctx, tol=1e9),
                 tolerance=TOLERANCE)
    real = lean._rotate_half
    lean._rotate_half = lambda x: -real(x)  # the lean side's rotary sign-flipped
    try:
        flipped = decode.verify_arm(model, "lean", 256, tol=1e9)
    finally:
        lean._rotate_half = real
    rows.add(path=path, case="rotary sign-flipped", ctx=256, max_rel_err=flipped, tolerance=TOLERANCE)
