"""The peer step (harness.peers, bench/peer_gpt_fast.py) on the CPU: the weight mapping gives gpt-fast's model.py the HF
model's logits, the peers schema round-trips, and every refusal writes nothing. gpt-fast's source comes from
.peers/gpt-fast when fetched, else from a local mirror of its repository (written to a tmp folder); without either the
tests that import it skip."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from decodegap import compare, paths, records
from decodegap.harness import models, peers

MIRROR = Path("/work/.mirror/pytorch-labs+gpt-fast/repo")


@pytest.fixture(scope="module")
def gpt_fast_dir(tmp_path_factory) -> Path:
    """A folder holding gpt-fast's files at the pinned commit, with its COMMIT file."""
    try:
        peers.source_commit(peers.GPT_FAST_DIR)
        return peers.GPT_FAST_DIR
    except peers.PeerUnavailable:
        pass
    if not MIRROR.exists():
        pytest.skip("no gpt-fast source: neither .peers/gpt-fast nor a mirror")
    out = tmp_path_factory.mktemp("gpt-fast")
    for name in peers.GPT_FAST_FILES:
        text = subprocess.run(["git", "-C", str(MIRROR), "show", f"{peers.GPT_FAST_COMMIT}:{name}"],
                              capture_output=True, check=True).stdout
        (out / name).write_bytes(text)
    (out / "COMMIT").write_text(peers.GPT_FAST_COMMIT + "\n")
    return out


@pytest.fixture(scope="module")
def gpt_fast(gpt_fast_dir):
    return peers.load_gpt_fast(gpt_fast_dir)


def _tiny(std: float = 0.2, dtype: str = "fp32"):
    spec = models.load_spec("llama-tiny")
    hf = models.build_model(spec, device="cpu", dtype=dtype)
    models.randomise_(hf, std=std)  # spread logits: a wrong mapping cannot hide under the tolerance
    return spec, hf


@pytest.mark.slow
def test_mapped_weights_give_the_hf_logits(gpt_fast):
    gf_model, _ = gpt_fast
    spec, hf = _tiny()
    ref = peers.hf_reference(hf, 24)
    gf = peers.build_gpt_fast(gf_model, hf, spec.config)
    err = compare.logits_error(peers.gpt_fast_logits(gf, 24), ref)
    assert err < 1e-4, err  # fp32: the same function up to rounding
    spec16, hf16 = _tiny(dtype="bf16")
    gf16 = peers.build_gpt_fast(gf_model, hf16, spec16.config)
    assert compare.logits_error(peers.gpt_fast_logits(gf16, 24), peers.hf_reference(hf16, 24)) <= compare.VERIFY_TOL


@pytest.mark.slow
def test_the_check_fails_without_the_rotary_reordering(gpt_fast, monkeypatch):
    gf_model, _ = gpt_fast
    spec, hf = _tiny()
    ref = peers.hf_reference(hf, 24)
    monkeypatch.setattr(peers, "to_gpt_fast_rows", lambda weight, heads: weight)
    gf = peers.build_gpt_fast(gf_model, hf, spec.config)
    assert compare.logits_error(peers.gpt_fast_logits(gf, 24), ref) > compare.VERIFY_TOL


def test_rotary_order_pairs_the_halves():
    order = peers.rotary_order(8).tolist()
    assert order == [0, 4, 1, 5, 2, 6, 3, 7]  # gpt-fast's pair (2i, 2i+1) is HF's (i, i + 4)


def test_model_args_express_the_llamas(gpt_fast):
    gf_model, _ = gpt_fast
    args = peers.model_args(gf_model, models.load_spec("llama-3.1-8b").config)
    assert peers.preset_differs(gf_model, args, "llama-3.1-8b") == []
    small = peers.model_args(gf_model, models.load_spec("llama-3.2-1b").config)
    assert (small.head_dim, small.n_local_heads, small.rope_scaling["factor"]) == (64, 8, 32.0)
    with pytest.raises(peers.PeerUnavailable, match="qwen2"):
        peers.model_args(gf_model, models.load_spec("qwen2.5-7b").config)
    with pytest.raises(peers.PeerUnavailable, match="head_dim"):
        peers.model_args(gf_model, {**models.load_spec("llama-tiny").config, "head_dim": 32})


def test_gpt_fast_int4_is_the_float_zero_format(gpt_fast):
    """Its codes, scales and zeros round as the package's float-zero format does (the format whose null sets the int4
    check's tolerance for gpt-fast too): the same relative noise eps, and every weight within its rounding cell up to
    the bf16 rounding of gpt-fast's scale and zero (computed in bf16: the grid's ends move by a fraction of a step,
    so a weight at a group's end can land past half a step, by less than a quarter of one)."""
    import torch

    from decodegap.quant import power

    _, gf_quantize = gpt_fast
    w = (torch.randn(64, 1024, generator=torch.Generator().manual_seed(0)) * 0.02).to(torch.bfloat16)
    codes, sz = gf_quantize.group_quantize_tensor(w, 4, 128)
    deq = gf_quantize.group_dequantize_tensor(codes, sz.float(), 4, 128)
    check = power.format_check("int4-tinygemm", w, deq, 128)
    assert abs(check["eps"] / power.predicted_eps("int4-tinygemm", w, 128) - 1) < 0.02, check
    assert check["ratio_max"] < 1.25 and check["frac_past"] < 0.01, check
    wrong = gf_quantize.group_dequantize_tensor(codes.flip(-1), sz.float(), 4, 128)  # the check can fail
    assert power.format_check("int4-tinygemm", w, wrong, 128)["ratio_max"] > 2


def _rows():
    base = dict(run_id="20261203T000000-abcdef", session=1, gpu="cpu-test", model="llama-tiny", ctx=16)
    from decodegap.harness.decode import ArmTiming

    timing = ArmTiming(arm=peers.GPT_FAST_ARM, ctx=16, max_cache_len=56, warmup_ms=[900.0, 1.5], step_ms=[1.25, 1.5])
    return [peers.check_row(base, "gpt-fast", peers.GPT_FAST_ARM, "bf16", "vs_hf_eager", 0.03, 0.1, "x"),
            *peers.timing_rows(base, "gpt-fast", "bf16", timing, "note"),
            peers.check_row(base, "decodegap", "lean_attn_compile", "int4-triton", "vs_bf16_layers", float("nan"),
                            0.5, "nan fails"),
            peers.status_row(base, "decodegap", "lean_attn_compile", "int4-triton", "unavailable", "no CUDA")]


def test_schema_round_trips(tmp_path):
    path = tmp_path / "peers.csv"
    rows = _rows()
    records.append_rows(path, records.PEERS, rows)
    back = records.read_csv(path)
    assert list(back.columns) == records.PEERS.names
    assert list(back["status"]) == ["ok", "warmup", "warmup", "ok", "ok", "error", "unavailable"]
    assert list(back["step"].iloc[1:5]) == [-2, -1, 0, 1]
    assert back["step_ms"].iloc[3] == 1.25 and back["max_rel_err"].iloc[0] == 0.03
    peers.check_frame(back)
    from decodegap.analysis import closing_the_gap_peers as peer_reading

    cell = peer_reading.peer_table(back).set_index(["system", "quant"]).loc[("gpt-fast", "bf16")]
    assert (cell["step_ms"], cell["status"]) == (1.375, "ok")  # the rows read back as notebook 06 reads them
    bad = back.copy()
    bad.loc[3, "step_ms"] = float("nan")
    with pytest.raises(ValueError, match="without its step"):
        peers.check_frame(bad)


def test_a_step_row_without_its_time_is_refused_by_check_frame(tmp_path):
    path = tmp_path / "peers.csv"
    row = dict(_rows()[3], step_ms=None)
    records.append_rows(path, records.PEERS, [row])
    with pytest.raises(ValueError):
        peers.check_frame(records.read_csv(path))


def _nothing_written(data: Path) -> bool:
    return not (data / "raw").exists() or not any((data / "raw").rglob("*"))


def _bench(*args) -> int:
    sys.path.insert(0, str(paths.REPO / "bench"))
    try:
        import peer_gpt_fast
    finally:
        sys.path.pop(0)
    return peer_gpt_fast.main(list(args))


def test_refusals_write_nothing(tmp_path, data_dir, gpt_fast_dir, capsys):
    assert _bench("--peer", str(tmp_path / "none"), "--data", str(data_dir), "--gpu", "cpu-test",
                  "--device", "cpu") == 2
    assert "no gpt-fast source" in capsys.readouterr().err
    assert _bench("--peer", str(gpt_fast_dir), "--data", str(data_dir), "--gpu", "cpu-test", "--device", "cpu",
                  "--model", "llama-9z") == 2
    assert "unknown model 'llama-9z'" in capsys.readouterr().err
    assert _bench("--peer", str(gpt_fast_dir), "--data", str(data_dir), "--gpu", "no-such-gpu", "--device",
                  "cpu", "--model", "llama-tiny") == 2
    assert "no-such-gpu" in capsys.readouterr().err
    assert _bench("--peer", str(gpt_fast_dir), "--data", str(data_dir), "--gpu", "h200", "--device", "cpu",
                  "--model", "llama-tiny") == 2  # a GPU key measured on a CPU
    assert _nothing_written(data_dir)


def test_an_edited_or_other_source_is_refused(tmp_path, gpt_fast_dir):
    copy = tmp_path / "gf"
    copy.mkdir()
    for name in (*peers.GPT_FAST_FILES, "COMMIT"):
        (copy / name).write_bytes((gpt_fast_dir / name).read_bytes())
    assert peers.source_commit(copy) == peers.GPT_FAST_COMMIT
    (copy / "model.py").write_bytes((gpt_fast_dir / "model.py").read_bytes() + b"\n# edited\n")
    with pytest.raises(peers.PeerUnavailable, match="edited"):
        peers.source_commit(copy)
    (copy / "COMMIT").write_text("0" * 40 + "\n")
    with pytest.raises(peers.PeerUnavailable, match="not the pinned"):
        peers.source_commit(copy)


@pytest.mark.slow
def test_a_cpu_run_checks_and_records(data_dir, gpt_fast_dir):
    """On a CPU (the cpu-test key) a run writes its checks and says why nothing was timed, with the peer's commit in
    env.json: gpt-fast's eager step against HF eager, the package's graphed lever and every int4 cell unavailable."""
    run_id = peers.measure("llama-tiny", 16, "cpu-test", data_dir, gpt_fast_dir, device="cpu", warmup=1, steps=2,
                           say=lambda *_: None)
    rows = records.read_csv(data_dir / "raw" / "cpu-test" / "peers.csv")
    peers.check_frame(rows)
    assert set(rows["run_id"]) == {run_id}
    check = rows[(rows["system"] == "gpt-fast") & (rows["check"] == "vs_hf_eager")]
    assert len(check) == 1 and check["status"].iloc[0] == "ok"
    assert check["max_rel_err"].iloc[0] <= compare.VERIFY_TOL
    assert set(rows[rows["check"] == "-"]["status"]) == {"unavailable"}
    assert len(rows[rows["quant"] != "bf16"]) == 2  # both int4 cells, one row each
    env = json.loads((data_dir / "raw" / "cpu-test" / "env.json").read_text())
    assert env[run_id]["peer_source"]["gpt-fast"]["commit"] == peers.GPT_FAST_COMMIT
    assert env[run_id]["experiment"] == "peers"
    assert peers.measured("cpu-test", "llama-tiny", 16, data_dir) is False  # nothing timed: the step would run again


def test_int4_conversion_replaces_every_linear_and_fills_its_buffers(gpt_fast, monkeypatch):
    """quantise_gpt_fast_ on the CPU, the CUDA-only packing replaced by a tensor of the shape gpt-fast's
    WeightOnlyInt4Linear declares: every nn.Linear (the output layer too) becomes one, with no buffer left on the meta
    device, and its scales and zeros those of gpt-fast's group_quantize_tensor (the tiny dims padded to 1024, as its
    handler pads them)."""
    import torch

    gf_model, gf_quantize = gpt_fast
    spec, hf = _tiny(dtype="bf16")
    gf = peers.build_gpt_fast(gf_model, hf, spec.config)
    linears = [n for n, m in gf.named_modules() if isinstance(m, torch.nn.Linear)]
    wo = gf.layers[0].attention.wo.weight.detach().clone()
    monkeypatch.setattr(peers, "int4_pack", lambda codes, inner=8: torch.zeros(
        codes.shape[0] // 8, codes.shape[1] // (inner * 16), 32, inner // 2, dtype=torch.int32))
    assert peers.quantise_gpt_fast_(gf, gf_quantize, group_size=32) == len(linears) == 2 * 5 + 1  # wqkv, wo, w1, w3, w2; output
    for name in linears:
        layer = gf.get_submodule(name)
        assert type(layer).__name__ == "WeightOnlyInt4Linear", name
        assert not layer.weight.is_meta and not layer.scales_and_zeros.is_meta, name
        assert layer.weight.shape == (layer.out_features // 8, layer.in_features // 128, 32, 4)
    _, expected = gf_quantize.group_quantize_tensor(torch.nn.functional.pad(wo, (0, 1024 - wo.shape[1])), 4, 32)
    assert torch.equal(gf.layers[0].attention.wo.scales_and_zeros, expected)


# --- notebook 06's reading of peers.csv (analysis.closing_the_gap_peers), on hand-made rows -------------------------

def _peer_rows(system, arm, quant, check_status="ok", times=(4.0, 4.2, 4.4), run="r1"):
    base = dict(run_id=run, session=1, gpu="h200", model="llama-3.1-8b", ctx=2048, system=system, arm=arm, quant=quant,
                reason="", max_rel_err=float("nan"), tol=float("nan"))
    rows = [dict(base, check="vs_hf_eager", step=float("nan"), step_ms=float("nan"), max_rel_err=0.05, tol=0.1,
                 status=check_status)]
    rows += [dict(base, check="-", step=0, step_ms=9.9, status="warmup")]
    return rows + [dict(base, check="-", step=i + 1, step_ms=t, status="ok") for i, t in enumerate(times)]


def test_the_peer_table_counts_a_side_only_with_every_check_of_its_run_passed():
    import pandas as pd

    from decodegap.analysis import closing_the_gap_peers as peer_reading

    rows = pd.DataFrame(_peer_rows("decodegap", "lean_fused_early_products_graph", "bf16", times=(4.1, 4.2, 4.3))
                        + _peer_rows("gpt-fast", "compiled_decode", "bf16", times=(5.7, 5.8, 5.9))
                        + _peer_rows("gpt-fast", "compiled_decode", "int4-gpt-fast", check_status="error")
                        + _peer_rows("decodegap", "lean_attn_compile", "int4-triton", times=(2.6, 2.6, 2.6)))
    t = peer_reading.peer_table(rows).set_index(["system", "quant"])
    assert t.loc[("decodegap", "bf16"), "step_ms"] == pytest.approx(4.2)  # the warm-up row is not a step
    assert (t.loc[("gpt-fast", "bf16"), "status"], t.loc[("gpt-fast", "bf16"), "steps"]) == ("ok", 3)
    assert t.loc[("gpt-fast", "int4-gpt-fast"), "status"] == "unchecked"
    lines = peer_reading.findings(peer_reading.peer_table(rows))
    bf16 = next(line for line in lines if ", bf16," in line)
    assert "the package's step is 1.38x as fast" in bf16  # 5.8 / 4.2
    int4 = next(line for line in lines if ", int4," in line)
    assert "unchecked" in int4 and "no ratio" in int4
    assert "keeps a bf16 LM head" in int4 and "keeps a bf16 LM head" not in bf16  # gpt-fast's int4 quantises its own
    head = rows.replace({"quant": {"int4-triton": "int4-triton-head"}})
    assert not any("keeps a bf16 LM head" in line for line in peer_reading.findings(peer_reading.peer_table(head)))
    assert peer_reading.findings(peer_reading.peer_table(rows.iloc[:0]))[0].startswith("No peer measured yet")


@pytest.mark.slow
def test_the_block_check_is_zero_on_its_own_blocks_and_sees_a_changed_one(gpt_fast):
    """gpt-fast's blocks through quant_checks' layer check (record_io, forced_error): fed their own recorded inputs
    they give their recorded outputs exactly; one block's weight changed shows as an error."""
    import torch

    gf_model, _ = gpt_fast
    spec, hf = _tiny()
    gf = peers.build_gpt_fast(gf_model, hf, spec.config)
    io = peers.record_blocks(gf, 12)
    assert len(io) == spec.config["num_hidden_layers"] and all(len(calls) == len(io[0]) > 1 for calls in io)
    assert peers.forced_block_error(gf, 12, io) == 0.0
    with torch.no_grad():
        gf.layers[1].feed_forward.w2.weight.mul_(1.5)
    assert peers.forced_block_error(gf, 12, io) > 0.05


@pytest.mark.slow
def test_the_output_layer_check_is_zero_on_its_own_layer_and_sees_a_changed_one(gpt_fast):
    """gpt-fast's output layer through the head check's metric (record_output, forced_output_error): fed its own
    recorded inputs it gives its recorded logits exactly; its weight scaled by 1.5 shows as an error of half the
    logits' scale, past any int4 tolerance."""
    import torch

    gf_model, _ = gpt_fast
    spec, hf = _tiny()
    gf = peers.build_gpt_fast(gf_model, hf, spec.config)
    io = peers.record_output(gf, 12)
    assert len(io) == 1 and len(io[0]) > 1 and io[0][0][1].shape[-1] == spec.config["vocab_size"]
    assert peers.forced_output_error(gf, 12, io) == 0.0
    with torch.no_grad():
        gf.output.weight.mul_(1.5)
    assert peers.forced_output_error(gf, 12, io) == pytest.approx(0.5, rel=1e-3)  # |1.5 l - l| / max|l|


def test_the_head_references_follow_the_packages_path_and_rows_carry_the_head_check(monkeypatch):
    """head_references: the package's head reference only for a path that quantises the head (int4-triton-head), the
    null and tolerance of the float-zero format on the HF head either way (tol = MODEL_K_PASS x null > 0); and
    _package_levers writes a vs_bf16_head row before the lever's own rows where it has that reference, failing a
    head that is not the bf16 model's."""
    import torch

    from decodegap.harness import quant_checks

    spec, hf = _tiny(dtype="bf16")
    plain = peers.head_references(hf, None, "int4-triton", 12)
    head = peers.head_references(hf, None, "int4-triton-head", 12)
    assert plain["hf"] is None and plain["gf"] is None and head["hf"] is not None
    assert head["null"] > 0 and head["tol"] == pytest.approx(compare.MODEL_K_PASS * head["null"])
    assert quant_checks.forced_head_error(hf, 12, head["hf"]) == 0.0

    written = []
    monkeypatch.setattr(peers, "PEER_LEVERS", {"bf16": ("lean_graph", "bf16"), "int4": ("lean_graph", "int4-x")})
    monkeypatch.setattr(peers, "package_cell", lambda hf, base, arm, quant, *a, first=None, **k: list(first or []))
    monkeypatch.setattr(quant_checks, "forced_layer_error", lambda *a, **k: 0.0)
    quantised = []
    monkeypatch.setattr("decodegap.quant.paths.quantise_model_", lambda model, path: quantised.append(path))
    with torch.no_grad():
        hf.lm_head.weight.mul_(1.5)  # the "quantised" head: far from the bf16 one
    base = dict(run_id="r", session=1, gpu="h200", model="llama-tiny", ctx=12)
    peers._package_levers(hf, base, 12, 1, 1, 0, ("int4",), None, [], 1.0, 0.1, written.extend, head)
    checks = {r["check"]: r for r in written}
    assert quantised == ["int4-x"] and set(checks) == {"vs_bf16_layers", "vs_bf16_head"}
    assert checks["vs_bf16_head"]["status"] == "error" and checks["vs_bf16_head"]["max_rel_err"] == pytest.approx(
        0.5, rel=1e-2)  # |1.5 l - l| / max|l|, bf16
    written.clear()
    peers._package_levers(hf, base, 12, 1, 1, 0, ("int4",), None, [], 1.0, 0.1, written.extend, plain)
    assert [r["check"] for r in written] == ["vs_bf16_layers"]


def test_the_peer_levers_are_the_confirmed_choices_at_the_target_cell():
    """PEER_LEVERS names, per precision, the fastest lever confirmed at notebook 06's target cell (at least
    levers.CONFIRM_SESSIONS fresh sessions of its confirmation sweeps: experiments.closing_the_gap.confirmed_at_target):
    a new winner there, once confirmed, fails this until the peer step times it; a pick of the selection sweeps
    alone moves nothing."""
    from decodegap import paths
    from decodegap.experiments import closing_the_gap as experiment

    assert experiment.confirmed_at_target(paths.DATA) == {"bf16": peers.PEER_LEVERS["bf16"],
                                                          "int4": peers.PEER_LEVERS["int4"]}
