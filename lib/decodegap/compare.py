"""How two outputs are compared in every correctness check: the largest absolute difference relative to the
reference's largest value, per tensor and over a sequence of calls. Imported by the harness, the quantisation
checks and the attention backends alike (no import circle through decode)."""

from __future__ import annotations

VERIFY_TOL = 0.1
"""Largest max|logits_arm - logits_eager| / max|logits_eager| accepted, teacher-forced. Calibrated on the
H200 (bench/verify_diag.py, in git history at d764dd2): two correct bf16 paths of the 7-8B random-weight models
(one full forward against step-by-step decode) differ by 0.043-0.053. What each arm's check gives on the shipped
rows is verify.csv's `vs_eager` rows, per arm (notebook 02's `verify` table), not typed here. That the check can
fail is shown on the tiny models (tests/test_decode.py): with
std-0.2 weights a RoPE position off by one gives 0.6-1.5. On the real shapes with std-0.02 weights the
logits are flatter and an attention error may hide under the tolerance (on a CPU, a narrow Llama whose lean
rotary is sign-flipped passes, bf16 and int4: bench/check_sensitivity_cpu.py, rows in data/diagnostics/): the check catches wrong caches, wrong
projections, broken arms and unrelated tokens, not a wrong attention."""

MODEL_K_PASS = 1.3
"""Model check of a quantised path (harness.quant_checks: every decoder layer of the quantised model fed the bf16
model's input, its output against the bf16 layer's, relative to what the layer adds to the residual stream):
tolerance = MODEL_K_PASS x the null, the same metric of the bf16 model whose decoder weights carry uniform noise of
the format's own rounding step. quant.power's docstring derives it (1 + 3 sigma, sigma = 0.10 the spread of one null
draw). Fixed before any whole-model or GPU row it judges; the rules registry's QT entry reads it."""
MODEL_K_FAIL = 2 ** 0.5
"""A model check whose error reaches MODEL_K_FAIL x the null fails outright (a fault adding an independent error as
large as the format's own rounding noise: sqrt 2); between MODEL_K_PASS and this it is inconclusive (quant.power).
The sweep times a cell only within MODEL_K_PASS x the null."""


def max_relative_error(a, b) -> float:
    """max |a - b| / max |b| over all elements (b the reference)."""
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-12))


def logits_error(got: list, ref: list) -> float:
    """The largest max_relative_error over corresponding calls (NaN if any call gives NaN)."""
    assert len(ref) == len(got), (len(ref), len(got))
    errors = [max_relative_error(g.float(), r.float()) for g, r in zip(got, ref)]
    return float("nan") if any(e != e for e in errors) else max(errors)
