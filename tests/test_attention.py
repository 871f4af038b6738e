"""Attention backends on the CPU: registry, availability with reasons, correctness against math, and
notebook 03 in replay and measure mode."""

from __future__ import annotations

import pandas as pd
import pytest

from decodegap import notebooks, paths, published, records
from decodegap.analysis import attention_backends as attention_report
from decodegap.experiments import attention_backends as attention_experiment
from decodegap.harness import attention, checks, decode, models, session, sweep
from decodegap.harness import hf_attention

SHAPES = {key: attention.Shape.from_config(key, models.load_spec(key).config)
          for key in ("qwen2.5-7b", "mistral-7b-v0.3", "llama-3.1-8b")}


def test_shapes_are_the_models_gqa_shapes():
    assert SHAPES["qwen2.5-7b"] == attention.Shape("qwen2.5-7b", 28, 4, 128)
    assert SHAPES["llama-3.1-8b"] == attention.Shape("llama-3.1-8b", 32, 8, 128)
    assert SHAPES["mistral-7b-v0.3"] == attention.Shape("mistral-7b-v0.3", 32, 8, 128)


def test_registry_holds_every_backend_of_the_issue():
    assert set(attention.BACKENDS) == {"sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math", "flex",
                                       "fa2", "fa3", "fa3_torch", "flashinfer", "flashinfer_paged"}
    label = attention.BACKENDS["sdpa_flash"].label  # PyTorch's flash backend runs FA2's kernels: a proxy, said so
    assert "FlashAttention-2" in label and "proxy" in label
    with pytest.raises(KeyError, match="unknown attention backend 'nosuch'; known: sdpa"):
        attention.backend("nosuch")


@pytest.mark.parametrize("model", sorted(SHAPES))
@pytest.mark.parametrize("key", ["sdpa", "sdpa_flash", "sdpa_math"])
@pytest.mark.parametrize("ctx", [16, 300])
def test_cpu_backends_equal_the_math_backend(model, key, ctx):
    _, err = attention.check(key, SHAPES[model], ctx, device="cpu")
    assert err < 2e-2


def test_math_backend_equals_a_hand_written_gqa_attention():
    import torch

    q, k, v = attention.decode_inputs(SHAPES["qwen2.5-7b"], 32, "cpu", dtype=torch.float32)
    g = q.shape[1] // k.shape[1]
    kk, vv = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    ref = torch.softmax(q @ kk.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1) @ vv
    out = attention.backend("sdpa_math").prepare(q, k, v)()
    assert torch.allclose(out, ref, atol=1e-5)


@pytest.mark.parametrize("key", ["flex", "fa2", "fa3", "fa3_torch", "flashinfer", "flashinfer_paged"])
def test_cuda_only_backends_are_unavailable_on_the_cpu_with_a_reason(key):
    # torch's FA3 switch is refused before the device is looked at: it needs flash_attn_interface
    why = "flash_attn_interface" if key == "fa3_torch" else "needs a CUDA device"
    with pytest.raises(attention.BackendUnavailable, match=why):
        attention.check(key, SHAPES["llama-3.1-8b"], 16, device="cpu")


def test_a_missing_package_is_named_in_the_reason():
    with pytest.raises(attention.BackendUnavailable, match="package not importable.*no_such_kernel_pkg"):
        attention._import("no_such_kernel_pkg")


def test_a_wrong_backend_output_fails_the_check(monkeypatch):
    def broken(q, k, v):
        return lambda: q * 0
    monkeypatch.setitem(attention.BACKENDS, "sdpa", attention.Backend("sdpa", "broken", "SDPA", broken))
    with pytest.raises(AssertionError, match="differs from math"):
        attention.check("sdpa", SHAPES["llama-3.1-8b"], 16, device="cpu")


def test_a_forced_backend_is_forced_by_its_scope_and_only_there():
    import torch

    with attention.backend("sdpa_math").scope():
        assert torch.backends.cuda.math_sdp_enabled() and not torch.backends.cuda.flash_sdp_enabled()
    assert torch.backends.cuda.flash_sdp_enabled()  # restored on exit


def test_timed_calls_run_inside_the_scope_which_is_entered_once(data_dir, monkeypatch):
    entered, inside = [], []

    class Scope:
        def __enter__(self):
            entered.append(1)
            inside.append(True)

        def __exit__(self, *exc):
            inside.append(False)

    def prepare(q, k, v):
        import torch.nn.functional as F

        def call():
            assert inside[-1], "a timed call ran outside its backend's scope"
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return call

    monkeypatch.setitem(attention.BACKENDS, "sdpa", attention.Backend("sdpa", "scoped", "SDPA", prepare, Scope))
    attention_experiment.record_attention("cpu-test", ["llama-tiny"], [16], ["sdpa"], data_dir, device="cpu", reps=3, host_calls=7)
    rows = pd.read_csv(data_dir / "raw" / "cpu-test" / "attention.csv")
    assert (rows.status == "ok").all() and len(rows) == 3
    assert len(entered) == 1 + 3  # once for the correctness check, then once a round around its (20 + 7) timed calls


def test_record_attention_writes_ok_and_unavailable_rows(data_dir):
    attention_experiment.record_attention("cpu-test", ["llama-tiny"], [16], ["sdpa", "sdpa_math", "flashinfer"], data_dir,
                                     device="cpu", reps=2, host_calls=5)
    rows = pd.read_csv(data_dir / "raw" / "cpu-test" / "attention.csv")
    ok = rows[rows.status == "ok"]
    assert sorted(ok.attn.unique()) == ["sdpa", "sdpa_math"] and len(ok) == 2 * 2  # 2 host reps each, no GPU timing
    assert (ok.timing == "host").all() and (ok.us_per_call > 0).all()
    fi = rows[rows.attn == "flashinfer"].iloc[0]
    assert fi.status == "unavailable" and "CUDA" in fi.reason
    # resume: a second call adds nothing
    attention_experiment.record_attention("cpu-test", ["llama-tiny"], [16], ["sdpa", "sdpa_math", "flashinfer"], data_dir,
                                     device="cpu", reps=2, host_calls=5)
    assert len(pd.read_csv(data_dir / "raw" / "cpu-test" / "attention.csv")) == len(rows)
    summ = attention_report.summary(rows)
    assert set(summ.attn) == {"sdpa", "sdpa_math", "flashinfer"}
    assert summ.set_index("attn").loc["sdpa", "host_us"] == pytest.approx(ok[ok.attn == "sdpa"].us_per_call.median())


def test_a_cell_unavailable_until_its_package_arrives_is_measured_again_on_request(data_dir, monkeypatch):
    """fa2 before and after flash-attn is built: --retry-unavailable measures the cell again, the old row stays as
    history, and the summary takes the cell as ok."""
    def missing(q, k, v):
        raise attention.BackendUnavailable("package not importable (flash_attn: ModuleNotFoundError)")
    monkeypatch.setitem(attention.BACKENDS, "fa2", attention.Backend("fa2", "FA2", "FA2", missing))
    args = ("cpu-test", ["llama-tiny"], [16], ["fa2"], data_dir)
    attention_experiment.record_attention(*args, device="cpu", reps=2, host_calls=5)
    monkeypatch.setitem(attention.BACKENDS, "fa2", attention.BACKENDS["sdpa"])  # the package is there now
    attention_experiment.record_attention(*args, device="cpu", reps=2, host_calls=5)  # resume: still done
    assert list(pd.read_csv(data_dir / "raw" / "cpu-test" / "attention.csv").status) == ["unavailable"]
    attention_experiment.record_attention(*args, device="cpu", reps=2, host_calls=5, retry_unavailable=True)
    rows = pd.read_csv(data_dir / "raw" / "cpu-test" / "attention.csv")
    assert list(rows.status) == ["unavailable", "ok", "ok"]
    cell = attention_report.summary(rows).iloc[0]
    assert cell.status == "ok" and cell.host_us > 0
    attention_experiment.record_attention(*args, device="cpu", reps=2, host_calls=5, retry_unavailable=True)
    assert len(pd.read_csv(data_dir / "raw" / "cpu-test" / "attention.csv")) == 3  # measured: done


def test_again_measures_every_cell_anew_and_the_summary_reads_only_the_newest_run(data_dir):
    """--again: every cell is timed again in one run's rounds; the first run's rows stay, and the summary's medians
    come from the second run alone (two runs' rows are never pooled)."""
    args = ("cpu-test", ["llama-tiny"], [16], ["sdpa", "sdpa_math"], data_dir)
    first = attention_experiment.record_attention(*args, device="cpu", reps=2, host_calls=5)
    second = attention_experiment.record_attention(*args, device="cpu", reps=3, host_calls=5, again=True)
    rows = pd.read_csv(data_dir / "raw" / "cpu-test" / "attention.csv")
    assert rows.groupby("run_id").size().to_dict() == {first: 2 * 2, second: 2 * 3}
    newest = attention_report.newest_runs(rows)
    assert set(newest.run_id) == {second} and len(newest) == 6
    summ = attention_report.summary(rows).set_index("attn")
    new_sdpa = rows[(rows.run_id == second) & (rows.attn == "sdpa")].us_per_call
    assert summ.loc["sdpa", "host_us"] == pytest.approx(new_sdpa.median())


def test_newest_runs_keeps_a_cells_ok_run_over_a_later_failure():
    cell = dict(gpu="g", model="m", ctx=16, attn="fa2", timing="host", rep=0, max_rel_err=0.0, reason="")
    rows = pd.DataFrame([dict(cell, run_id="20260101T000000-a", status="ok", us_per_call=10.0),
                         dict(cell, run_id="20260102T000000-b", status="ok", us_per_call=20.0),
                         dict(cell, run_id="20260103T000000-c", status="unavailable", us_per_call=None)])
    assert list(attention_report.newest_runs(rows).us_per_call) == [20.0]
    assert list(attention_report.newest_runs(rows.iloc[[2]]).status) == ["unavailable"]


def test_paper_table_puts_the_published_h100_column_beside_ours():
    summ = pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=2048, attn="sdpa", host_us=30.0, gpu_us=10.0,
                              max_rel_err=0.0, status="ok", reason="")])
    table = attention_report.paper_table(summ, published.load(), 2048, "llama-3.1-8b").set_index("attn")
    assert table.loc["sdpa", "h100-sxm us (published)"] == 36.05
    assert table.loc["fa3", "h100-sxm us (published)"] == 79.25
    assert table.loc["sdpa_flash", "h100-sxm us (published)"] == 44.35  # FA2 family
    assert table.loc["sdpa", "h200 host us"] == 30.0 and table.loc["sdpa", "h200 GPU us"] == 10.0


def test_decode_step_with_a_forced_backend_equals_default(tmp_path):
    model = models.build_model(models.load_spec("llama-tiny"), device="cpu")
    assert checks.verify_arm(model, "eager", 16, attn="sdpa_math") < 1e-2
    t = decode.run_arm(model, "eager", 16, warmup=1, steps=2, attn="sdpa_math")
    assert len(t.step_ms) == 2
    assert hf_attention.hf_implementation("flex") == "flex_attention" and hf_attention.hf_implementation("sdpa_flash") == "sdpa"


@pytest.mark.notebooks
def test_03_measure(tmp_path, data_dir):
    figures = tmp_path / "figures"
    notebooks.run(paths.NOTEBOOKS / "03_attention_backends.ipynb",
                  dict(MEASURE=True, GPU="cpu-test", DEVICE="cpu", MODELS=["llama-tiny"], CONTEXTS=[16],
                       BACKENDS=["sdpa", "sdpa_math", "flex"], STEP_BACKENDS=["sdpa", "sdpa_math"], STEP_CONTEXTS=[16],
                       STEPS=2, WARMUP=1, TABLE_CTX=16, TABLE_MODEL="llama-tiny", DATA_DIR=str(data_dir),
                       FIGURES_DIR=str(figures)), out_dir=tmp_path / "executed")
    table = pd.read_csv(figures / "03_attention_table.csv").set_index("attn")
    assert table.loc["sdpa", "h100-sxm us (published)"] == 36.05
    assert table.loc["sdpa", "cpu-test host us"] > 0
    assert table.loc["flex", "cpu-test status"].startswith("unavailable")
    step = pd.read_csv(figures / "03_attention_step.csv")
    assert set(step.attn) == {"sdpa", "sdpa_math"}
    assert set(step[step.arm == "graph"].status) == {"unavailable"}
    # the replay on the shipped data: tests/test_notebooks.py::test_03_replay_tables_every_backend


# ------------------------------------------------------------------ verdicts and the whole-step comparison

def test_binding_verdict_on_hand_cases():
    assert attention_report.binding(35.0, 7.0) == "launch sequence"  # 5x
    assert attention_report.binding(24.0, 20.0) == "kernel"  # 1.2x
    assert attention_report.binding(30.0, 20.0) == "both"  # 1.5x


def _step_rows(cells):
    """Decode rows for hand-made graph cells {(model, attn, ctx): [ms per step ...]}, one session each."""
    rows = []
    for (model, attn, ctx), times in cells.items():
        for i, ms in enumerate(times):
            rows.append(dict(run_id="r", session=0, gpu="h200", model=model, ctx=ctx, max_cache_len=ctx + 40,
                             arm="graph", attn=attn, quant="bf16", step=i, step_ms=ms, status="ok", reason=""))
    return pd.DataFrame(rows)


def test_step_findings_compare_the_step_growth_with_the_per_layer_kernel(data_dir):
    from decodegap import hardware

    configs = {"llama-3.1-8b": models.load_spec("llama-3.1-8b").config}  # 32 layers
    rows = _step_rows({("llama-3.1-8b", "sdpa", 2048): [9.0, 9.0, 9.2], ("llama-3.1-8b", "sdpa", 16384): [19.0] * 3,
                       ("llama-3.1-8b", "flex", 2048): [7.0] * 3, ("llama-3.1-8b", "flex", 16384): [8.0] * 3})
    steps = attention_report.step_table(rows, hardware.specs_table(data_dir), configs, ["sdpa", "flex"], [2048, 16384])
    summ = pd.DataFrame([dict(gpu="h200", model="llama-3.1-8b", ctx=c, attn=a, status="ok", gpu_us=us)
                         for (a, c, us) in [("sdpa", 2048, 7.0), ("sdpa", 16384, 22.0),
                                            ("flex", 2048, 60.0), ("flex", 16384, 600.0)]])
    lines = {line.values["attn"]: line for line in attention_report.step_findings(steps, summ, configs)}
    sdpa, flex = lines["sdpa"].values, lines["flex"].values
    assert sdpa["growth_ms"] == pytest.approx(10.0) and sdpa["implied_ms"] == pytest.approx(0.48)  # 32 x (22 - 7) us
    assert not sdpa["calls_exceed_step"] and "expansion_gb" not in sdpa  # no bandwidth given
    assert flex["growth_ms"] == pytest.approx(1.0) and flex["calls_ms"] == pytest.approx(19.2)  # 32 x 600 us > 8 ms
    assert flex["calls_exceed_step"] and "exceed the whole step" in lines["flex"]
    assert f"+{sdpa['implied_ms']:.2f} ms" in lines["sdpa"]  # the sentence renders its values
    # with a bandwidth: HF's repeat_kv on Llama-3.1-8B adds 2 x 32 layers x 2 x 32 heads x 128 x 2 bytes
    # = 1,048,576 bytes per cache position; (16384 - 2048) positions -> 15.03 GB -> 3.76 ms at 4000 GB/s
    lines = {line.values["attn"]: line.values for line in attention_report.step_findings(steps, summ, configs,
                                                                                          {"h200": 4000.0})}
    extra = 1_048_576 * (16384 - 2048)
    assert lines["sdpa"]["expansion_gb"] == pytest.approx(extra / 1e9)
    assert lines["sdpa"]["expansion_ms"] == pytest.approx(extra / 4000e9 * 1e3)
    assert "expansion_gb" not in lines["flex"]  # FlexAttention takes GQA natively: no expansion
    assert attention_report.repeat_kv_bytes(configs["llama-3.1-8b"], 1) == 1_048_576


def test_step_table_marks_a_refused_forced_backend_unavailable(data_dir):
    from decodegap import hardware

    rows = pd.DataFrame([dict(run_id="r", session=0, gpu="h200", model="llama-3.1-8b", ctx=2048, max_cache_len=None,
                              arm="graph", attn="sdpa_flash", quant="bf16", step=None, step_ms=None, status="error",
                              reason="RuntimeError: No available kernel. Aborting execution.")])
    configs = {"llama-3.1-8b": models.load_spec("llama-3.1-8b").config}
    steps = attention_report.step_table(rows, hardware.specs_table(data_dir), configs, ["sdpa_flash"], [2048])
    assert steps.iloc[0]["status"] == "unavailable" and "explicit attention mask" in steps.iloc[0]["reason"]


def test_measure_cell_records_a_refused_forced_backend_as_unavailable(data_dir, monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError("No available kernel. Aborting execution.")

    monkeypatch.setattr(decode, "run_arm", refuse)
    plan = sweep.SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(16,), arms=("eager",),
                           attn="sdpa_flash", device="cpu", verify=False)
    rows = session.measure_cell(plan, None, sweep.Cell("llama-tiny", 16, "eager", "sdpa_flash"), "r", 1, data_dir)
    assert rows[0]["status"] == "unavailable" and "FLASH takes no explicit attention mask" in rows[0]["reason"]


def test_readme_statements_on_the_h200_whole_step_hold():
    """README, notebook 03: SDPA's in-model growth is > 10x what its kernel implies on every shape; Flex's
    growth is < 0.1 of SDPA's on Llama and Mistral, not on Qwen."""
    from decodegap import hardware

    data = paths.data_dir(None)
    configs = {k: models.load_spec(k).config for k in SHAPES}
    summ = attention_report.summary(records.load_experiment("attention", data))
    steps = attention_report.step_table(attention_experiment.step_rows(data), hardware.specs_table(data), configs,
                                        ["sdpa", "flex"], [2048, 16384])
    g = steps[(steps.arm == "graph") & (steps.gpu == "h200")].set_index(["model", "attn", "ctx"])["t_obs_ms"]
    for model, shape in SHAPES.items():
        us = summ[(summ.gpu == "h200") & (summ.model == model) & (summ.attn == "sdpa")].set_index("ctx")["gpu_us"]
        layers = configs[model]["num_hidden_layers"]
        grow_sdpa = g[(model, "sdpa", 16384)] - g[(model, "sdpa", 2048)]
        assert grow_sdpa > 10 * layers * (us[16384] - us[2048]) / 1e3
        grow_flex = g[(model, "flex", 16384)] - g[(model, "flex", 2048)]
        assert (grow_flex < 0.1 * grow_sdpa) == (model != "qwen2.5-7b")


def test_timing_rounds_interleave_every_cell_in_a_seeded_order(data_dir, monkeypatch):
    """Each round times every (model, ctx, backend) cell once, in an order drawn anew per round from the seed:
    a cell's time does not depend on whose turn came before it."""
    def run(seed, folder):
        seen = []
        monkeypatch.setattr(attention, "time_host_us", lambda call, calls, cuda: seen.append(call.cell) or 1.0)
        real_check = attention.check

        def check(attn, shape, ctx, device):
            call, err = real_check(attn, shape, ctx, device)
            wrapped = lambda: call()  # noqa: E731
            wrapped.cell = (shape.model if hasattr(shape, "model") else id(shape), ctx, attn)
            return wrapped, err
        monkeypatch.setattr(attention, "check", check)
        attention_experiment.record_attention("cpu-test", ["llama-tiny"], [16, 32], ["sdpa", "sdpa_math"], folder, device="cpu",
                                         reps=3, host_calls=2, seed=seed)
        monkeypatch.setattr(attention, "check", real_check)
        return seen

    first = run(0, data_dir)
    rounds = [first[i:i + 4] for i in range(0, 12, 4)]
    assert all(len(set(r)) == 4 for r in rounds) and len(set(first)) == 4  # every cell once a round
    assert len({tuple(r) for r in rounds}) > 1  # the order changes between rounds
    rows = pd.read_csv(data_dir / "raw" / "cpu-test" / "attention.csv")
    assert sorted(rows[rows.status == "ok"].groupby(["ctx", "attn"]).rep.apply(list).iloc[0]) == [0, 1, 2]


def test_identical_calls_on_two_models_are_compared_against_one_cells_spread():
    """attention_report.shape_agreement by hand: two models of one attention shape, one backend, host medians 30 and
    45 us (ratio 1.5), cell spreads 10 % and 20 %; a third model of another shape stays out."""
    rows = []
    for model, times in (("a", [30.0, 33.0, 30.0]), ("b", [45.0, 54.0, 45.0]), ("c", [10.0, 10.0, 10.0])):
        rows += [dict(run_id="r", gpu="g", model=model, ctx=16, attn="sdpa", timing="host", rep=i, us_per_call=t,
                      max_rel_err=0.0, status="ok", reason="") for i, t in enumerate(times)]
    summ = attention_report.summary(pd.DataFrame(rows))
    assert summ.set_index("model").host_spread.round(6).to_dict() == {"a": 0.1, "b": 0.2, "c": 0.0}
    same = dict(num_attention_heads=32, num_key_value_heads=8, hidden_size=4096)
    configs = {"a": same, "b": same, "c": dict(num_attention_heads=28, num_key_value_heads=4, hidden_size=3584)}
    table = attention_report.shape_agreement(summ, configs)
    assert len(table) == 1 and table.iloc[0].models == "a, b" and table.iloc[0]["shape"] == "32x8x128"
    assert table.iloc[0].host_ratio == pytest.approx(1.5) and table.iloc[0].within_cell_spread == pytest.approx(0.2)
    assert "median 1.50x" in attention_report.shape_findings(table)[0]


def test_a_call_outside_the_trimmed_flash_attn_build_is_refused_before_the_extension(tmp_path, monkeypatch):
    """The trimmed build (bench/build_flash_attn.sh) has head dim 128 and bf16 only; a record without those keys is
    the first such build; an untrimmed flash-attn (no record) is never refused here."""
    import json

    monkeypatch.setenv("DECODEGAP_EXT_DIR", str(tmp_path))
    assert attention.trimmed_build_refusal(64, "bfloat16") is None  # no build record: the package as installed
    (tmp_path / "flash_attn_build.json").write_text(json.dumps({"kernel": "flash_attn_2_cuda, trimmed: head dim 128"}))
    assert attention.trimmed_build_refusal(128, "bfloat16") is None
    assert "head dim 128 only" in attention.trimmed_build_refusal(64, "bfloat16")
    assert "not head dim 128 in float16" in attention.trimmed_build_refusal(128, "float16")
    (tmp_path / "flash_attn_build.json").write_text(json.dumps({"kernel": "trimmed", "head_dims": [64, 128],
                                                                "dtypes": ["bfloat16"]}))
    assert attention.trimmed_build_refusal(64, "bfloat16") is None


def test_ranking_names_the_fastest_step_beside_sdpas_and_the_fastest_per_layer_kernel():
    """Hand case: SDPA fastest per layer (GPU-only 5 us) but the slower step (9 ms against fa2's 6 ms: 1.50x)."""
    steps = pd.DataFrame([dict(gpu="g", model="m", ctx=2048, attn=a, arm="graph", sessions=s, t_obs_ms=t, status="ok")
                          for a, t, s in (("sdpa", 9.0, 10), ("fa2", 6.0, 1))])
    summ = pd.DataFrame([dict(gpu="g", model="m", ctx=2048, attn=a, status="ok", gpu_us=gu, host_us=hu)
                         for a, gu, hu in (("sdpa", 5.0, 20.0), ("fa2", 8.0, 25.0))])
    (row,) = attention_report.ranking_table(steps, summ).to_dict("records")
    assert (row["fastest_step"], row["fastest_step_ms"], row["sdpa_step_ms"]) == ("fa2", 6.0, 9.0)
    assert row["sdpa_over_fastest"] == pytest.approx(1.5) and row["sdpa_step_sessions"] == 10
    assert (row["fastest_layer_gpu_only"], row["fastest_layer_gpu_only_us"]) == ("sdpa", 5.0)
    assert (row["fastest_layer_host"], row["fastest_layer_host_us"]) == ("sdpa", 20.0)
    no_gpu = summ.assign(gpu_us=float("nan"))  # a CPU's microbenchmark
    (cpu_row,) = attention_report.ranking_table(steps, no_gpu).to_dict("records")
    assert cpu_row["fastest_layer_gpu_only"] is None and cpu_row["fastest_layer_host"] == "sdpa"
    assert "1.50x" in attention_report.ranking_findings(attention_report.ranking_table(steps, summ))[0]
    # beside it, a cell with no per-layer rows (a GPU whose attention bench ran at other contexts) names no kernel
    both = pd.concat([steps, steps.assign(gpu="h")], ignore_index=True)
    mine, other = attention_report.ranking_findings(attention_report.ranking_table(both, summ))
    assert "per layer the fastest of them is sdpa GPU-only (5.0 us)" in mine
    assert other.startswith("h m ctx 2048") and "per layer" not in other and "nan" not in other


def test_within_spread_by_hand():
    """30 us against 24 us is 25 % slower: within a 30 % spread, not within 20 %; a missing spread is ignored, and
    with none known nothing is within noise."""
    assert attention_report.within_spread(30.0, 24.0, 0.3, 0.1)
    assert not attention_report.within_spread(30.0, 24.0, 0.2, 0.1)
    assert attention_report.within_spread(30.0, 24.0, float("nan"), 0.3)
    assert not attention_report.within_spread(30.0, 24.0, float("nan"))

