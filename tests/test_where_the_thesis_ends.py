"""Notebook 07's measuring side: the Qwen2.5 configs of the model-size axis (their parameter counts by hand against the
models transformers builds from them and the published sizes), the sweeps of both axes, the lean lever they measure,
and `scope` end to end on a CPU with the tiny configs (rows, checks, kernels, resume, bad input)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from decodegap import arms, inputs, paths, records
from decodegap.experiments import where_the_thesis_ends as scope
from decodegap.harness import models

NEW = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-14b", "qwen2.5-32b")


def params_by_hand(c: dict) -> int:
    """Parameters of a Qwen2 decoder from its config's numbers: per layer q (with bias), k and v (with biases, the KV
    heads' width), o, gate, up and down, two norms; the embedding, the final norm and an LM head unless tied."""
    h, i, layers, vocab = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    kv = h // c["num_attention_heads"] * c["num_key_value_heads"]
    layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * i + 2 * h
    return layers * layer + vocab * h * (1 if c["tie_word_embeddings"] else 2) + h


PUBLISHED_B = {"qwen2.5-0.5b": (0.49, 0.36), "qwen2.5-1.5b": (1.54, 1.31)}
"""(parameters, non-embedding parameters) in billions, as the model cards give them (data/models/<key>.json's
checked_against names the copies read)."""


@pytest.mark.parametrize("key", NEW + ("qwen2.5-7b",))
def test_each_config_builds_the_model_its_numbers_say(key):
    """transformers builds each config (on the meta device: no memory) into exactly the parameters counted by hand."""
    from transformers import AutoModelForCausalLM

    spec = models.load_spec(key)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(models.hf_config(spec), dtype=torch.bfloat16)
    assert sum(p.numel() for p in model.parameters()) == params_by_hand(spec.config)
    assert (model.lm_head.weight is model.model.embed_tokens.weight) == spec.config["tie_word_embeddings"]
    assert spec.hf_repo == f"Qwen/{spec.name.replace('-2.5-', '2.5-')}" and spec.source.endswith("/config.json")
    nominal = float(key.split("-")[1][:-1])
    assert abs(params_by_hand(spec.config) / 1e9 - nominal) / nominal < 0.1  # the size its name says


@pytest.mark.parametrize("key", sorted(PUBLISHED_B))
def test_the_small_configs_have_their_published_sizes(key):
    c = models.load_spec(key).config
    total, non_embedding = PUBLISHED_B[key]
    assert round(params_by_hand(c) / 1e9, 2) == total  # 0.5B: 494,032,768 with the embedding counted once (tied)
    assert round((params_by_hand(c) - c["vocab_size"] * c["hidden_size"]) / 1e9, 2) == non_embedding


def test_the_family_is_one_architecture():
    configs = [models.load_spec(k).config for k in scope.SIZE_MODELS]
    assert [c["model_type"] for c in configs] == ["qwen2"] * 6
    assert [params_by_hand(c) for c in configs] == sorted(params_by_hand(c) for c in configs)
    assert all(c["hidden_size"] // c["num_attention_heads"] == (64 if c["hidden_size"] == 896 else 128) for c in configs)
    assert "qwen2.5-7b" in scope.SIZE_MODELS  # the paper's headline model on the axis


def test_every_config_is_sourced_in_data_readme():
    text = (paths.DATA / "README.md").read_text()
    for key in NEW:
        assert f"`{key}.json`" in text and models.load_spec(key).source in text


# --- the plans ----------------------------------------------------------------------------------------------------

def test_batch_plan():
    timed, compiled = scope.plan("h200", "batch")
    assert timed.models == ("llama-3.1-8b",) and timed.contexts == (2048,) and timed.batches == (1, 2, 4, 8, 16, 32, 64)
    assert timed.arms == ("eager", "graph", scope.LEAN_BEST, "lean_attn_graph", "lean_graph") and timed.sessions == 3
    assert compiled.arms == ("compile", "lean_compile") and compiled.batches == (1, 8, 64) and compiled.sessions == 1
    assert not timed.again and all(p.again for p in scope.plan("h200", "batch", again=True))
    assert {timed.first_session, compiled.first_session} == {scope.FIRST_SESSION}


def test_size_plan():
    timed, compiled = scope.plan("h200", "size")
    assert timed.models == compiled.models == scope.SIZE_MODELS and timed.batches == compiled.batches == (1,)
    assert timed.contexts == (2048, 8192) and compiled.contexts == (2048,) and compiled.arms == ("compile",)
    with pytest.raises(inputs.InputError, match="batch 1"):
        scope.plan("h200", "size", batches=(1, 8))
    with pytest.raises(inputs.InputError, match="unknown axis 'width'"):
        scope.plan("h200", "width")


def test_each_sweep_of_an_axis_is_measured_alone_or_both_in_order():
    assert scope.check_sweeps("compiled") == ("compiled",)
    assert scope.check_sweeps(("compiled", "timed")) == scope.SWEEPS == ("timed", "compiled")
    assert scope.check_sweeps("both") == scope.SWEEPS
    with pytest.raises(inputs.InputError, match="unknown sweep 'compile'"):
        scope.check_sweeps("compile")


@pytest.mark.slow  # a fresh process
def test_scope_refuses_an_unknown_sweep_before_anything_is_written(data_dir, tmp_path):
    out = cli("--data-dir", str(data_dir), "scope", "--axis", "size", "--sweep", "compile", "--gpu", "cpu-test",
              "--device", "cpu", cwd=tmp_path / "elsewhere")
    assert out.returncode == 2 and "unknown sweep 'compile'" in out.stderr and not (data_dir / "raw").exists()


def test_the_fallback_of_the_one_row_lever_is_measured_wherever_the_lever_is():
    assert scope.LEAN_FALLBACK == arms.batch_fallback(scope.LEAN_BEST) == "lean_attn_graph"
    for axis in scope.AXES:
        for p in scope.plan("h200", axis):
            assert scope.LEAN_BEST not in p.arms or scope.LEAN_FALLBACK in p.arms


def test_the_lean_lever_is_the_fastest_confirmed_at_notebook_06s_target_cell():
    """LEAN_BEST is the bf16 lever confirmed fastest at notebook 06's target cell (experiments.closing_the_gap.
    confirmed_at_target): a pick of the selection sweeps alone does not move it."""
    from decodegap.experiments import closing_the_gap as experiment

    assert experiment.confirmed_at_target(paths.DATA)["bf16"] == (scope.LEAN_BEST, "bf16")


def test_kernel_plan_profiles_the_steps_graph_and_lean_graph_replay():
    plan = scope.kernel_plan("batch")
    assert plan == dict(model_keys=("llama-3.1-8b",), contexts=(2048,), arms=("eager", "lean", "lean_attn_graph"),
                        batches=(1, 2, 4, 8, 16, 32, 64))
    assert scope.kernel_plan("size")["model_keys"] == scope.SIZE_MODELS


# --- `scope` end to end on a CPU ------------------------------------------------------------------------------------

def cli(*args, cwd):
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "decodegap", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("batches, why", [("0", "batch 0 is not a whole number of sequences"),
                                          pytest.param("two", "--batches takes comma-separated whole numbers of "
                                                       "sequences", marks=pytest.mark.slow),  # a fresh process each
                                          pytest.param("2,2", "repeat", marks=pytest.mark.slow)])
def test_scope_refuses_a_bad_batch_before_anything_is_written(data_dir, tmp_path, batches, why):
    out = cli("--data-dir", str(data_dir), "scope", "--axis", "batch", "--gpu", "cpu-test", "--device", "cpu",
              "--models", "llama-tiny", "--contexts", "16", "--batches", batches, cwd=tmp_path / "elsewhere")
    assert out.returncode == 2 and why in out.stderr, out.stderr
    assert not (data_dir / "raw").exists()


@pytest.mark.slow  # a fresh process
def test_scope_refuses_an_unknown_axis(data_dir, tmp_path):
    out = cli("--data-dir", str(data_dir), "scope", "--axis", "width", "--gpu", "cpu-test", "--device", "cpu",
              cwd=tmp_path / "elsewhere")
    assert out.returncode == 2 and "unknown axis 'width'" in out.stderr and not (data_dir / "raw").exists()


@pytest.mark.slow
def test_scope_batch_on_a_cpu(data_dir, tmp_path):
    """Both sweeps of the batch axis and the profiled steps, into decode, verify and kernels.csv, each row with its
    batch; on a CPU only the eager arms time (the graphed and compiled ones are `unavailable`, as is a GPU profile)."""
    args = ("--data-dir", str(data_dir), "scope", "--axis", "batch", "--gpu", "cpu-test", "--device", "cpu", "--models",
            "llama-tiny", "--contexts", "16", "--batches", "1,2", "--steps", "2", "--warmup", "1", "--no-progress",
            "--sessions", "2")
    out = cli(*args, cwd=tmp_path / "elsewhere")
    assert out.returncode == 0, out.stderr
    raw = paths.raw_dir("cpu-test", data_dir)
    rows = records.read_csv(raw / "decode.csv")
    ok = rows[rows.status == "ok"]
    assert sorted(set(zip(ok.batch, ok.arm))) == [(1, "eager"), (2, "eager")]
    first = scope.FIRST_SESSION  # the timed arms in 2 sessions, the compiled arms in COMPILE_SESSIONS (1)
    assert set(rows[~rows.arm.str.contains("compile")].session) == {first, first + 1}
    assert set(rows[rows.arm.str.contains("compile")].session) == {first}
    cells = rows.groupby(["batch", "arm"]).status.agg(set).to_dict()
    assert set(cells) == ({(b, a) for b in (1, 2) for a in scope.TIMED_ARMS}
                          | {(1, "compile"), (1, "lean_compile")})  # the compiled arms at COMPILE_BATCHES only
    lever = rows[(rows.arm == scope.LEAN_BEST) & (rows.batch == 2)]
    assert lever.reason.str.contains(f"measured as {scope.LEAN_FALLBACK} ").all()
    kernels = records.read_csv(raw / "kernels.csv")
    assert sorted(zip(kernels.batch, kernels.arm)) == [(b, a) for b in (1, 2)
                                                       for a in ("eager", "lean", "lean_attn_graph")]
    assert set(kernels.status) == {"unavailable"}
    t = scope.tables(data_dir, "cpu-test")  # the rows through notebook 07's replay, end to end
    cells = t["scope"][t["scope"].arm == "eager"].set_index("batch")
    assert sorted(cells.index) == [1, 2] and cells["t_obs_ms"].notna().all()
    k_bytes = 2 * 2 * 2 * 16 * 16 * 2  # layers x (K, V) x kv heads x head_dim x ctx x bf16 bytes: one sequence's KV
    assert cells.loc[2, "t_floor_bw_ms"] - cells.loc[1, "t_floor_bw_ms"] == pytest.approx(k_bytes / 10e9 * 1e3)
    assert cells.loc[2, "tokens_per_s_aggregate"] == pytest.approx(2 * cells.loc[2, "tokens_per_s_per_stream"])
    assert cells["sessions"].tolist() == [2, 2]
    resumed = cli(*args, cwd=tmp_path / "elsewhere")  # a second run: every cell is there, nothing measured again
    assert resumed.returncode == 0 and "nothing to measure" in resumed.stdout
    assert len(records.read_csv(raw / "decode.csv")) == len(rows)
    again = cli(*args, "--again", "--no-kernels", cwd=tmp_path / "elsewhere")  # every cell again, in a new run
    assert again.returncode == 0, again.stderr
    after = records.read_csv(raw / "decode.csv")
    assert len(after) == 2 * len(rows) and after.run_id.nunique() == 2 * rows.run_id.nunique()
    newest = scope.tables(data_dir, "cpu-test")["scope"]  # the new run replaces the old rows whole
    new_runs = set(after.run_id) - set(rows.run_id)
    eager = after[(after.arm == "eager") & (after.status == "ok") & after.run_id.isin(new_runs)]
    medians = eager.groupby(["batch", "session"]).step_ms.median().groupby("batch").median()
    assert newest[newest.arm == "eager"].set_index("batch")["t_obs_ms"].to_dict() == pytest.approx(medians.to_dict())
