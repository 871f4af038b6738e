"""The arms registry (decodegap.arms): what each arm is, read from its fields, not its name; each asserted by what
the harness, the lean decoder and the figures do with it."""

import pytest

from decodegap import accounting, arms
from decodegap.figures import style
from decodegap.harness import decode, lean, models


@pytest.fixture(scope="module")
def cpu_model():
    return models.build_model(models.load_spec("llama-tiny"), device="cpu")


def test_every_arm_is_one_registry_entry_the_lean_decoder_and_the_figures_take():
    assert len(set(arms.ARMS)) == len(arms.ARMS) and arms.ARMS == tuple(arms.REGISTRY)
    colours = {}
    for key, arm in arms.REGISTRY.items():
        assert arm.key == key  # an entry filed under another arm's key would be read as that arm
        assert arm.decoder in ("hf", "lean") and arm.runner in ("eager", "graph", "compile")
        assert not arm.kernels or arm.decoder == "lean"  # only the lean decoder takes custom kernels
        assert lean.kernel_set(arm.kernels) == set(arm.kernels)  # a set the lean decoder accepts (raises if not)
        colours[key] = style.arm_color(key)
    assert len(set(colours.values())) == len(colours)  # every arm drawn in a colour of its own, none in the fallback
    assert "#444444" not in colours.values()


def test_the_groups_the_harness_reads_partition_the_registry():
    assert set(arms.HF_ARMS) | set(arms.LEAN_ARMS) == set(arms.ARMS) and not set(arms.HF_ARMS) & set(arms.LEAN_ARMS)
    assert not set(arms.GRAPHED_ARMS) & set(arms.COMPILED_ARMS)
    assert all(arms.is_lean(a) for a in arms.LEAN_ARMS) and not any(arms.is_lean(a) for a in arms.HF_ARMS)
    assert set(arms.ARM_KERNELS) == {k for k, a in arms.REGISTRY.items() if a.kernels}


def test_on_a_cpu_each_arm_runs_or_says_why_by_what_it_is(cpu_model):
    """Graphed and compiled arms need CUDA (the compile arms use reduce-overhead, CUDA graphs); an arm with custom
    kernels needs Triton, or the CPU interpreter; an eager arm of either decoder runs anywhere."""
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
