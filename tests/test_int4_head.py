"""The int4 LM head (quant path int4-triton-head): its bytes by hand, the head replaced and checked as a layer, a tied
head untied with the embedding left bf16, the head check (its own null) passing a correct head and failing a wrong
one, the lean decoder's plain and fused reference steps running the quantised head, and checked.quantised_checks
asking for the head check of a path that quantises the head. No Triton: the int4 layers' reference product."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch

from decodegap import checked, compare
from decodegap.harness import lean, models, quant_checks
from decodegap.kernels.fused import launch as fused
from decodegap.quant import bytes as quant_bytes, paths as quant, power
from decodegap.quant.layers import Int4TritonLinear

CTX = 16


def _tiny(key="llama-tiny", tied=False):
    spec = models.load_spec(key)
    if tied:
        spec = dataclasses.replace(spec, config={**spec.config, "tie_word_embeddings": True})
    model = models.build_model(spec, device="cpu", dtype="bf16")
    models.randomise_(model, seed=1, std=0.2)
    return model


def _initialised():
    """Tiny Llama at its config's initializer_range (the scale the model check's null was calibrated on: at std 0.2
    the tiny decoder layers amplify the rounding past the null for int4-triton as much as for int4-triton-head)."""
    return models.build_model(models.load_spec("llama-tiny"), device="cpu", dtype="bf16")


def test_the_head_streams_the_int4_format_and_the_step_saves_the_difference():
    """Llama-3.1-8B (V 128256, H 4096, G 128): the int4 head reads V*H/2 codes and 2 x 2 bytes of scale and offset a
    group of 128, 279,085,056 bytes against 2*V*H = 1,050,673,152 in bf16; the step's bytes drop by the difference
    and by nothing else."""
    config = models.load_spec("llama-3.1-8b").config
    codes, groups = 128256 * 4096 // 2, 128256 * 4096 // 128
    assert quant_bytes.head_bytes(config, "int4-triton-head") == codes + 4 * groups == 279_085_056
    assert quant_bytes.head_bytes(config, "int4-triton") == 2 * 128256 * 4096 == 1_050_673_152
    saved = quant_bytes.step_bytes(config, "int4-triton", 2048) - quant_bytes.step_bytes(config, "int4-triton-head", 2048)
    assert saved == 1_050_673_152 - 279_085_056
    assert quant_bytes.projection_bytes(config, "int4-triton-head", "fused")["lm_head"] == 279_085_056
    assert quant.path("int4-triton-head").quantises_head and not quant.path("int4-triton").quantises_head


def test_the_path_quantises_the_head_and_checks_it_as_a_layer():
    """Every decoder linear and the head become int4 layers (7 per layer + 1), the head's format and layer checks
    are kept under `lm_head`, and the embedding table is not touched."""
    model = _tiny()
    embed = model.model.embed_tokens.weight.detach().clone()
    info = quant.quantise_model_(model, "int4-triton-head", reference=True, checks=(1, CTX))
    assert isinstance(model.lm_head, Int4TritonLinear)
    assert info["layers"] == 7 * model.config.num_hidden_layers + 1 and info["head_untied"] is False
    head = info["checks"]["lm_head"]
    assert head["layers"] == 1 and head["format"][0] <= 1.05 and set(head["rows"]) == {1, CTX}
    assert all(err <= quant.QUANT_TOL for err, _ in head["rows"].values())
    assert torch.equal(model.model.embed_tokens.weight, embed)
    plain = _tiny()
    assert quant.quantise_model_(plain, "int4-triton", reference=True)["layers"] == 7 * plain.config.num_hidden_layers
    assert type(plain.lm_head) is torch.nn.Linear


def test_a_tied_head_is_untied_and_the_embedding_stays_bf16():
    model = _tiny(tied=True)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    table = model.model.embed_tokens.weight.detach().clone()
    info = quant.quantise_model_(model, "int4-triton-head", reference=True)
    assert info["head_untied"] is True and isinstance(model.lm_head, Int4TritonLinear)
    assert model.model.embed_tokens.weight.dtype == torch.bfloat16 and torch.equal(model.model.embed_tokens.weight, table)
    deq = model.lm_head.dequantised_weight(torch.float32)  # the table rounded to its format: within half a step
    ratio = power.format_check("int4-triton-head", table, deq, info["group_size"])["ratio_max"]
    assert 0.9 < ratio <= power.FORMAT_TOL


def test_the_head_check_passes_a_correct_head_and_fails_a_wrong_one():
    """The head's null is the bf16 head with U(+-D/2) of its own format's step; the quantised head lies inside
    MODEL_K_PASS x that null (and above half of it: the rounding shows), a head quantised from a weight 1.5x too
    large lies past MODEL_K_FAIL x the null, and the model itself scores 0. The bf16 head is put back after."""
    model = _tiny()
    ref = quant_checks.record_head(model, CTX)
    assert quant_checks.forced_head_error(model, CTX, ref) == 0.0
    tol, null, draws = quant_checks.head_tolerance(model, "int4-triton-head", CTX, ref)
    assert null == max(draws) > 0 and tol == pytest.approx(compare.MODEL_K_PASS * null)
    head = model.lm_head
    with quant_checks.swapped(model, "int4-triton-head", reference=True):
        assert isinstance(model.lm_head, Int4TritonLinear)
        err = quant_checks.forced_head_error(model, CTX, ref)
        assert 0.5 * null < err <= tol
        model.lm_head = Int4TritonLinear.from_weight(1.5 * head.weight, None, 32, reference=True)
        assert quant_checks.forced_head_error(model, CTX, ref) >= compare.MODEL_K_FAIL * null
    assert model.lm_head is head


@pytest.mark.parametrize("key", ["llama-tiny", "qwen2-tiny"])
def test_the_lean_steps_run_the_quantised_head(key):
    """The lean decoder takes the head's layer (not a bf16 weight); its fused step through the references, the head
    an int4 product with the final norm as its prologue, gives the plain lean step's logits within bf16 rounding,
    and a step whose head is the bf16 one does not (the head's rounding shows)."""
    model, other = _tiny(key), _tiny(key)
    quant.quantise_model_(model, "int4-triton-head", reference=True)
    quant.quantise_model_(other, "int4-triton", reference=True)  # the same decoder layers, the bf16 head
    with torch.inference_mode():
        plain = lean.LeanStep(model, 12, 16, feedback=False)
        assert plain.lean.lm_head is model.lm_head
        ref = lean.LeanStep(model, 12, 16, feedback=False, custom_kernels=("fused", "attention"))
        ref.lean.fused = fused.FusedOps(reference=True)
        bf16 = lean.LeanStep(other, 12, 16, feedback=False, custom_kernels=("fused", "attention"))
        bf16.lean.fused = fused.FusedOps(reference=True)
        for _ in range(2):
            a, b, c = plain.step().float(), ref.step().float(), bf16.step().float()
            assert compare.max_relative_error(b, a) < 0.02, key
            assert compare.max_relative_error(c, a) > 0.05, key


def _rows(run: str, quant_key: str, head: tuple | None) -> list[dict]:
    """A quantised run's in-run verify rows (format, layer at 1 and 2048 rows, null 0.5, model check 0.55) and,
    with `head` = (null, error), the head check and its null."""
    base = dict(run_id=run, session=0, gpu="h200", model="m", quant=quant_key, reason="")
    out = [dict(base, arm="-", attn="-", layer="q_proj", ctx=0, rows=None, check="format", max_rel_err=1.0, tol=1.05,
                status="ok")]
    out += [dict(base, arm="-", attn="-", layer="q_proj", ctx=m, rows=m, check="layer", max_rel_err=0.005, tol=0.02,
                 status="ok") for m in (1, 2048)]
    model = dict(base, ctx=2048, arm="eager", attn="sdpa", layer="model", rows=None, tol=0.65, status="ok")
    out += [dict(model, check="vs_bf16_null", max_rel_err=0.5), dict(model, check="vs_bf16", max_rel_err=0.55)]
    if head is not None:
        out += [dict(model, layer="lm_head", check="vs_bf16_head_null", max_rel_err=head[0]),
                dict(model, layer="lm_head", check="vs_bf16_head", max_rel_err=head[1])]
    return out


def test_a_quantised_head_counts_only_with_its_own_head_check():
    """checked.quantised_checks: an int4-triton-head run with a head check inside its null's band counts (k 0.06 /
    0.05 = 1.2); without one it is incomplete; a head at k 2 fails; an int4-triton run needs no head check."""
    verify = pd.DataFrame(_rows("A", "int4-triton-head", (0.05, 0.06)) + _rows("B", "int4-triton-head", None)
                          + _rows("C", "int4-triton-head", (0.05, 0.10)) + _rows("D", "int4-triton", None))
    keys = pd.DataFrame([dict(run_id=r, gpu="h200", model="m", ctx=2048, quant=q)
                         for r, q in (("A", "int4-triton-head"), ("B", "int4-triton-head"), ("C", "int4-triton-head"),
                                      ("D", "int4-triton"))])
    out = checked.quantised_checks(keys, verify).set_index("run_id")
    assert out["outcome"].to_dict() == {"A": checked.CHECKED_QUANT, "B": checked.INCOMPLETE_QUANT,
                                        "C": checked.FAILED_QUANT, "D": checked.CHECKED_QUANT}
    assert "head check 0.0600 = k 1.20" in out.loc["A", "note"]
    assert "no vs_bf16_head check" in out.loc["B", "note"] and "head check failed" in out.loc["C", "note"]


def test_the_sessions_head_check_writes_rows_that_count():
    """harness.session's head check on a tiny model (the int4 layers' reference build, as a GPU session builds the
    kernel's): the null row before the head is quantised, the check row after, both layer lm_head; with the model's
    own rows beside them the cell counts, and a wrong head makes the context fail."""
    from decodegap.harness import session as sess
    from decodegap.harness.sweep import Cell, SweepPlan

    plan = SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(CTX,), arms=("eager",), quant="int4-triton-head",
                     device="cpu")
    model = _tiny()
    base = dict(run_id="R", session=0, gpu="cpu-test", model="llama-tiny", quant="int4-triton-head")
    rows: list = []
    head = sess._head_nulls(plan, model, [CTX], base, "int4-triton-head", rows)
    assert [r["check"] for r in rows] == ["vs_bf16_head_null"] and rows[0]["layer"] == "lm_head"
    quant.quantise_model_(model, "int4-triton-head", reference=True)
    cell, failed = Cell("llama-tiny", CTX, "eager", "sdpa", "int4-triton-head"), {}
    sess._check_head(plan, model, "R", 0, cell, head[CTX], rows, failed)
    assert rows[-1]["check"] == "vs_bf16_head" and rows[-1]["layer"] == "lm_head" and rows[-1]["status"] == "ok"
    assert not failed and rows[-1]["tol"] == pytest.approx(rows[0]["tol"])
    verify = pd.DataFrame(_rows("R", "int4-triton-head", None)).assign(ctx=lambda f: f["ctx"].replace(2048, CTX),
                                                                       rows=lambda f: f["rows"].replace(2048, CTX))
    verify = pd.concat([verify.assign(gpu="cpu-test", model="llama-tiny"), pd.DataFrame(rows)], ignore_index=True)
    keys = pd.DataFrame([dict(run_id="R", gpu="cpu-test", model="llama-tiny", ctx=CTX, quant="int4-triton-head")])
    assert checked.quantised_checks(keys, verify)["outcome"].tolist() == [checked.CHECKED_QUANT]
    model.lm_head = Int4TritonLinear.from_weight(1.5 * model.lm_head.dequantised_weight(torch.bfloat16), None, 32,
                                                 reference=True)
    sess._check_head(plan, model, "R", 0, cell, head[CTX], rows, failed)
    assert rows[-1]["status"] == "error" and failed == {CTX: sess.HEAD_CHECK_FAILED}


def test_a_sessions_quantise_step_checks_the_head_until_both_checks_passed_in_its_run(data_dir, monkeypatch):
    """harness.session._quantise_checked on a tiny model (its layers built as the reference, as a GPU session builds
    the kernel's): the first session writes the model's null and check and the head's, and the format and layer rows
    of lm_head; a later session of the run checks nothing again while both passed, but checks the context again once
    the head's row is missing (a head check that could not run); a head past its tolerance fails the context with
    its own reason."""
    import functools

    from decodegap import records
    from decodegap.harness import quant_checks as qc, session as sess
    from decodegap.harness.sweep import Cell, SweepPlan

    monkeypatch.setattr(quant, "quantise_model_", functools.partial(quant.quantise_model_, reference=True))
    plan = SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(CTX,), arms=("eager",), quant="int4-triton-head",
                     device="cpu")
    cells = [Cell("llama-tiny", CTX, "eager", "sdpa", "int4-triton-head")]
    verify = data_dir / "raw" / "cpu-test" / "verify.csv"
    assert sess._quantise_checked(plan, _initialised(), cells, "R", 0, data_dir) == {}
    rows = records.read_csv(verify, records.VERIFY)
    assert {"vs_bf16_null", "vs_bf16", "vs_bf16_head_null", "vs_bf16_head"} <= set(rows["check"])
    assert (rows["status"] == "ok").all() and "lm_head" in set(rows[rows["check"] == "format"]["layer"])
    assert sess._quantise_checked(plan, _initialised(), cells, "R", 1, data_dir) == {}
    assert len(records.read_csv(verify)) == len(rows)  # nothing checked again
    kept = rows[rows["check"] != "vs_bf16_head"]
    verify.unlink()
    records.append_rows(verify, records.VERIFY, kept.to_dict("records"))
    sess._quantise_checked(plan, _initialised(), cells, "R", 2, data_dir)
    assert (records.read_csv(verify)["check"] == "vs_bf16_head").sum() == 1  # checked again
    honest = qc.forced_head_error  # the null's draws stay honest; the quantised head's error is made 10

    def wrong(model, *args, **kwargs):
        return 10.0 if isinstance(model.lm_head, Int4TritonLinear) else honest(model, *args, **kwargs)

    monkeypatch.setattr(qc, "forced_head_error", wrong)
    assert sess._quantise_checked(plan, _initialised(), cells, "S", 0, data_dir) == {CTX: sess.HEAD_CHECK_FAILED}


@pytest.mark.gpu
@pytest.mark.parametrize("key", ["llama-3.1-8b", "qwen2.5-7b"])
def test_the_int4_head_product_on_the_real_shape_on_the_gpu(key):
    """The head of the fused int4 step (the NORM flavour: the final norm as its prologue) on the model's own vocab x
    hidden shape, with and without PDL where this GPU has it, on one config and through the tuner (the head has no
    table entry), against its reference (the int4 layer's rounding)."""
    from test_fused_int4 import _product_error

    from decodegap.kernels.int4_gemv.kernel import INT4_CONFIGS

    config = models.load_spec(key).config
    pdl = fused.pdl_unavailable("cuda") is None
    gen = torch.Generator(device="cuda").manual_seed(2)
    for use_pdl in sorted({False, pdl}):
        for launch_config in (INT4_CONFIGS[0], None):
            err = _product_error("lm_head", config["hidden_size"], config["vocab_size"], "norm", use_pdl,
                                 launch_config, gen)
            assert err < 1e-2, (key, use_pdl, launch_config, err)


@pytest.mark.gpu
@pytest.mark.parametrize("arm", ["lean_fused_early_products_graph", "lean_attn_compile",
                                 "lean_fused_silu_epilogue_graph", "lean_fused_all_epilogues_graph",
                                 "lean_fused_epilogue_norms_graph"])
def test_the_head_levers_run_the_int4_head_on_the_gpu(arm):
    """Two layers of Llama-3.1-8B's widths (its 128256 x 4096 head) quantised with the head: the lever's graphed
    (or compiled) step through the real kernels, the head an int4 product (the fused step: with the final norm as its
    prologue, or with the all-epilogues levers made in the last down's epilogue and the head plain; the SiLU in
    gate_up's epilogue and the rotary in qkv's on the epilogue levers, every layer's input norm in the previous
    down's on the epilogue-norms lever), against HF eager of the same quantised model
    (checks.verify_arm) and against the plain lean step."""
    from test_fused import _two_layers

    from decodegap import arms
    from decodegap.harness import checks, decode

    model = _two_layers("llama-3.1-8b")
    quant.quantise_model_(model, "int4-triton-head")
    assert isinstance(model.lm_head, Int4TritonLinear) and decode.arm_available(arm, model) is None  # Hopper: PDL
    assert checks.verify_arm(model, arm, ctx=300, tol=0.1) < 0.1
    if "fused" in arms.REGISTRY[arm].kernels:
        with torch.inference_mode():
            plain = lean.LeanStep(model, 300, 304, feedback=False)
            got = lean.LeanStep(model, 300, 304, feedback=False, custom_kernels=arms.REGISTRY[arm].kernels)
            assert got.lean.lm_head is model.lm_head
            for _ in range(3):
                assert compare.max_relative_error(got.step().float(), plain.step().float()) < 0.05
