"""The arms registry (decodegap.arms): what each arm is, read from its fields, not its name; each asserted by what
the harness, the lean decoder and the figures do with it."""

import sys

import pytest

from decodegap import accounting, arms
from decodegap.figures import style
from decodegap.harness import decode, lean, models, session, sweep


@pytest.fixture(scope="module")
def cpu_model():
    return models.build_model(models.load_spec("llama-tiny"), device="cpu")


def test_every_arm_key_resolves_and_a_misspelled_one_is_refused_naming_the_known_keys(cpu_model):
    for key in arms.REGISTRY:
        reason = decode.arm_available(key, cpu_model)
        assert reason is None or "unknown arm" not in reason, (key, reason)
    for wrong in ("eagr", "lean-graph", "LEAN", "lean_fused_grpah"):
        reason = decode.arm_available(wrong, cpu_model)
        assert reason.startswith(f"unknown arm {wrong!r}"), reason
        assert all(repr(key) in reason for key in arms.REGISTRY), reason  # the message lists every known key
        with pytest.raises(decode.ArmUnavailable, match=f"unknown arm {wrong!r}"):
            decode.run_arm(cpu_model, wrong, 8, warmup=1, steps=1)


def test_every_arm_has_kernels_the_lean_decoder_takes_and_a_colour_of_its_own():
    colours = {}
    for key, arm in arms.REGISTRY.items():
        assert lean.kernel_set(arm.kernels) == set(arm.kernels)  # a set the lean decoder accepts (raises if not)
        colours[key] = style.arm_color(key)
    assert len(set(colours.values())) == len(colours)  # every arm drawn in a colour of its own, none in the fallback
    assert "#444444" not in colours.values()


def test_each_fused_lever_is_its_parent_with_what_it_changes():
    """FUSED_LEVERS builds each lever from its parent: the kernels of three levers written out by hand, every lever's
    set its parent's without the dropped kernels and with the added ones, and a lever that drops a kernel its parent
    lacks, adds one it has, or is registered twice is refused."""
    r = arms.REGISTRY
    assert set(r["lean_fused_pdl_norm_graph"].kernels) == {"fused", "attention", "pdl", "norm_epilogue"}
    assert set(r["lean_fused_l2_prefetch_graph"].kernels) == {
        "fused", "attention", "pdl", "norm_epilogue", "early_products", "head_norm_epilogue", "input_norm_epilogue",
        "next_token", "norm_scale", "kv_together", "l2_prefetch"}
    assert set(r["lean_fused_all_rotary_attention_graph"].kernels) == {  # the rotary moved out of qkv's epilogue
        "fused", "attention", "pdl", "norm_epilogue", "early_products", "silu_epilogue", "rotary_attention",
        "head_norm_epilogue", "input_norm_epilogue", "next_token", "norm_scale", "kv_together"}
    for key, parent, add, drop in arms.FUSED_LEVERS:
        assert set(r[key].kernels) == (set(r[parent].kernels) - set(drop)) | set(add), key
        assert len(r[key].kernels) == len(set(r[key].kernels)), key
    base = (arms.Arm("p", "lean", "graph", ("fused", "attention")),)
    for levers in ([("x", "p", ("pdl",), ("gemv",))], [("x", "p", ("fused",), ())],
                   [("x", "p", ("pdl",), ()), ("x", "p", ("pdl",), ())]):
        with pytest.raises(ValueError, match="lever x: registered twice, or drops"):
            arms._levers(base, levers)


def test_on_a_cpu_each_arm_runs_or_says_why_by_what_it_is(cpu_model):
    """Graphed and compiled arms need CUDA (the compile arms use reduce-overhead, CUDA graphs); an arm with custom
    kernels needs Triton, or the CPU interpreter; an eager arm of either decoder runs anywhere, and does: one
    warm-up and two timed steps on the tiny model."""
    ran = []
    for key, arm in arms.REGISTRY.items():
        reason = decode.arm_available(key, cpu_model)
        if arm.runner == "graph":
            assert reason == "CUDA graphs need a CUDA device", key
        elif arm.runner == "compile":
            assert "reduce-overhead" in reason, key
        elif arm.kernels:
            assert reason is None or "riton" in reason, (key, reason)
        else:
            assert reason is None, (key, reason)
            timing = decode.run_arm(cpu_model, key, 8, warmup=1, steps=2)
            assert len(timing.warmup_ms) == 1 and len(timing.step_ms) == 2, key
            ran.append(arm.decoder)
    assert set(ran) == {"hf", "lean"}  # both decoders ran eagerly


def test_an_arm_whose_kernel_package_is_missing_records_an_unavailable_row(cpu_model, tmp_path, monkeypatch):
    """With Triton not importable, a cell of an eager arm with custom kernels becomes one `unavailable` row that
    says so (never a timing, never an error); an arm without custom kernels is timed as before."""
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    plan = sweep.SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(16,), arms=("eager",), sessions=1,
                           steps=2, warmup=1, device="cpu", verify=False)
    kernel_arms = [k for k, a in arms.REGISTRY.items() if a.kernels and a.runner == "eager"]
    assert kernel_arms
    for key in kernel_arms:
        rows = session.measure_cell(plan, cpu_model, sweep.Cell("llama-tiny", 16, key), "rid", 0, tmp_path)
        assert [r["status"] for r in rows] == ["unavailable"], (key, rows)
        assert rows[0]["reason"] == "package triton not installed" and rows[0]["step_ms"] is None
    plain = session.measure_cell(plan, cpu_model, sweep.Cell("llama-tiny", 16, "lean"), "rid", 0, tmp_path)
    assert [r["status"] for r in plain] == ["warmup", "ok", "ok"]


def test_a_batch_of_an_arm_with_one_row_kernels_names_the_arm_measured_instead(cpu_model):
    """At batch 2 an arm whose custom kernels take one row (the GEMVs, the fused step) is refused, naming its
    fallback: the same decoder, runner and cache keeping only the kernels that take a batch (the split-KV attention),
    or none where no such arm exists, which itself takes the batch; an arm without custom kernels, or with only the
    attention kernel, is not refused for it."""
    for key, arm in arms.REGISTRY.items():
        reason = decode.arm_available(key, cpu_model, batch=2)
        fallback = arms.batch_fallback(key)
        if set(arm.kernels) <= {"attention"}:
            assert fallback is None and (reason is None or "take one row" not in reason), (key, reason)
            continue
        assert "take one row" in reason and f"measured as {fallback} " in reason, (key, reason)
        instead = arms.REGISTRY[fallback]
        assert (instead.decoder, instead.runner, instead.cache) == (arm.decoder, arm.runner, arm.cache)
        assert set(instead.kernels) < set(arm.kernels) and set(instead.kernels) <= {"attention"}
        assert arms.batch_fallback(fallback) is None


def test_the_cache_an_arm_names_is_the_step_it_gets(cpu_model):
    for key, arm in arms.REGISTRY.items():
        if arm.decoder != "hf" or arm.runner != "eager":
            continue
        state = decode.step_state(cpu_model, key, 8, 12)
        assert isinstance(state, decode.DynamicStep if arm.cache == "dynamic" else decode.StaticStep), key


def test_each_arm_names_the_products_of_its_decoder():
    assert len(accounting.PROJECTIONS[arms.projection_layout("lean_attn_compile")]) == 4  # qkv, o, gate_up, down
    assert len(accounting.PROJECTIONS[arms.projection_layout("graph")]) == 7
    assert arms.is_lean("lean") and not arms.is_lean("compile")
    assert arms.projection_layout("lean_some_future_arm") == "fused"  # rows of an arm this package does not know
    assert arms.projection_layout("hf_some_future_arm") == "hf"
