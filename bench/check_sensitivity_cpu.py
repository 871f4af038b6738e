"""How much of a wrong attention the decode check (checks.verify_arm, tolerance 0.1) sees with the random weights
of the real shapes (std 0.02): the lean decoder against HF eager on a CPU, the Llama-3.1-8B architecture at a narrow
width (4 layers, hidden 256, 4 heads of 64, 1 KV head), bf16 and int4 tinygemm, as built and with the lean side's
rotary sign-flipped. A flipped rotary that stays under the tolerance means the check catches broken caches, wrong
projections and unrelated tokens, not a wrong attention: the attention's correctness then rests on the tiny-model
tests with std-0.2 weights (tests/test_lean.py, tests/test_decode.py: a position off by one fails there) and on the
kernels' tests against their references on the real shapes.
Then the sharpened check (decodegap.harness.checks: every attention score sharpened, q and k scaled) on the bf16
model at ctx 256, as built and with each fault it is calibrated on: the rotary flipped, the rotary one position
off at decode, a block of 32 cached positions masked out at decode, and the cache read one slot off (the newest
key dropped, a zero key read), at factor 1 (the plain check) and at checks.SHARPEN.
Writes data/diagnostics/check_sensitivity_cpu.csv (decodegap.diagnostics): one row per (path, case, ctx, sharpen), the
max. relative error against HF eager and the tolerance.
Usage (repository root): PYTHONPATH=lib python bench/check_sensitivity_cpu.py (bench/measure.sh's check_sensitivity step)
"""

from decodegap.diagnostics import Rows

from decodegap.harness import checks
from decodegap.quant import paths as quant

TOLERANCE = 0.1  # checks.verify_arm's default
rows = Rows("check_sensitivity_cpu", ("path", "case", "ctx", "sharpen", "max_rel_err", "tolerance"))
for path in ("bf16", "int4-tinygemm"):
    model = checks.calibration_model()
    if path != "bf16":
        quant.quantise_model_(model, path)
    for ctx in (64, 256):
        rows.add(path=path, case="as built", ctx=ctx, sharpen=1.0,
                 max_rel_err=checks.verify_arm(model, "lean", ctx, tol=1e9), tolerance=TOLERANCE)
    with checks.fault("rotary sign-flipped"):  # the lean side's rotary sign-flipped
        flipped = checks.verify_arm(model, "lean", 256, tol=1e9)
    rows.add(path=path, case="rotary sign-flipped", ctx=256, sharpen=1.0, max_rel_err=flipped, tolerance=TOLERANCE)


model = checks.calibration_model()
for factor in (1.0, checks.SHARPEN):
    for case in checks.FAULTS:
        with checks.fault(case):
            err = checks.verify_arm_sharpened(model, "lean", 256, factor=factor, tol=1e9)
        rows.add(path="bf16", case=f"sharpened: {case}", ctx=256, sharpen=factor, max_rel_err=err,
                 tolerance=checks.SHARP_TOL)
