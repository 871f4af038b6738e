"""The fused int4 product's launch configs (decodegap.kernels.fused_int4.configs): its products per model by hand, the
flavour and launch of a call's flags, the table before the tuner, and every table entry against the rows of
bench/fused_int4_gemv.py it was read from (data/diagnostics/fused_int4_gemv.csv)."""

from __future__ import annotations

import csv
import importlib.util
import statistics

import pytest

from decodegap import paths
from decodegap.harness import models
from decodegap.kernels.fused_int4 import configs, launch
from decodegap.kernels.int4_gemv.kernel import INT4_CONFIGS

ROWS = paths.DATA / "diagnostics" / "fused_int4_gemv.csv"
WITHIN = 0.02  # an entry may stand within 2 % of the fastest config's median (the bf16 table's test allows as much)
TABLE_GPU = "NVIDIA H200"  # the table was timed on the H200 (kernels.fused_int4.configs)


def test_the_int4_products_of_llama_and_qwen_by_hand():
    """Llama-3.1-8B: hidden 4096, 32 + 2 x 8 heads of 128, intermediate 14336, vocab 128256; Qwen2.5-7B: hidden 3584,
    28 + 2 x 4 heads of 128, intermediate 18944, vocab 152064, qkv with its bias."""
    llama = configs.products(models.load_spec("llama-3.1-8b").config)
    assert llama == [("qkv", 4096, 6144, "norm"), ("o", 4096, 4096, "residual"),
                     ("gate_up_norm", 4096, 28672, "norm"), ("down", 14336, 4096, "residual"),
                     ("down_silu", 14336, 4096, "silu_residual"), ("lm_head", 4096, 128256, "norm"),
                     ("o_norm", 4096, 4096, "residual_norm"), ("gate_up_plain", 4096, 28672, "plain"),
                     ("qkv_rotary", 4096, 6144, "norm_rotary"), ("gate_up_silu", 4096, 28672, "plain_gate_up"),
                     ("down_norm", 14336, 4096, "residual_norm"), ("lm_head_plain", 4096, 128256, "plain"),
                     ("qkv_rotary_plain", 4096, 6144, "plain_rotary"), ("qkv_plain", 4096, 6144, "plain"),
                     ("down_silu_norm", 14336, 4096, "silu_residual_norm")]
    qwen = dict((name, (K, N, flavour)) for name, K, N, flavour in
                configs.products(models.load_spec("qwen2.5-7b").config))
    assert qwen["qkv"] == (3584, 4608, "norm_bias") and qwen["down_silu"] == (18944, 3584, "silu_residual")
    assert qwen["qkv_rotary"] == (3584, 4608, "norm_bias_rotary")
    assert qwen["qkv_rotary_plain"] == (3584, 4608, "bias_rotary") and qwen["qkv_plain"] == (3584, 4608, "bias")
    assert qwen["lm_head"] == (3584, 152064, "norm")  # the int4 head of int4-triton-head, the final norm first


def test_the_flavour_and_launch_of_a_calls_flags():
    flags = dict(NORM=False, BIAS=False, RESIDUAL=True, SILU_X=True, XBLOCK=16, USE_PDL=True, EARLY_TRIGGER=True)
    assert configs.flavour_of(flags, out_norm=False) == "silu_residual"
    assert configs.flavour_of(dict(flags, SILU_X=False), out_norm=True) == "residual_norm"
    gate_up = dict(flags, RESIDUAL=False, SILU_X=False, GATE_UP=True)
    assert configs.flavour_of(gate_up, out_norm=False) == "plain_gate_up"
    assert configs.flavour_of(dict(gate_up, NORM=True), out_norm=False) == "gate_up"
    rotary = dict(gate_up, GATE_UP=False, NORM=True, ROTARY=True)
    assert configs.flavour_of(rotary, out_norm=False) == "norm_rotary"
    assert configs.flavour_of(dict(rotary, BIAS=True), out_norm=False) == "norm_bias_rotary"
    assert configs.flavour_of(dict(flags, SILU_X=False, RESIDUAL=False, NORM=True, BIAS=True), False) == "norm_bias"
    assert configs.flavour_of({}, False) == "plain"
    with pytest.raises(ValueError, match="no flavour"):
        configs.flavour_of(dict(NORM=True, SILU_X=True), False)  # two prologues: never launched
    assert [configs.launch_of(p, e) for p, e in ((False, False), (False, True), (True, False), (True, True))] == [
        "none", "none", "pdl", "early"]


def test_the_table_wins_over_the_tuner_and_the_tuner_fills_what_it_lacks(monkeypatch):
    tuned = []
    monkeypatch.setattr(launch, "_tuned", lambda key, run: tuned.append(key) or (16, 1, 2))
    monkeypatch.setitem(configs.FUSED_INT4_CONFIGS, (3584, 18944, "silu_residual", "early"), (8, 2, 4))
    monkeypatch.delitem(configs.FUSED_INT4_CONFIGS, (3584, 18944, "silu_residual", "pdl"), raising=False)
    flags = dict(NORM=False, XBLOCK=16, SILU_X=True, BIAS=False, RESIDUAL=True, USE_PDL=True, EARLY_TRIGGER=True)
    assert launch.choose_config(3584, 18944, 128, flags, False, None) == (8, 2, 4) and not tuned
    assert launch.choose_config(3584, 18944, 128, dict(flags, EARLY_TRIGGER=False), False, None) == (16, 1, 2)
    assert tuned and tuned[0][:3] == (3584, 18944, 128)  # the pdl launch has no entry: tuned, keyed by its flags
    assert launch.choose_config(3584, 18944, 64, flags, False, None) == (16, 1, 2)  # the table is of group size 128


def _graph_medians() -> dict:
    """{(N, K, flavour, launch): {config: median us}} of the rows' graph-mode ok repetitions."""
    times: dict = {}
    with open(ROWS, newline="") as fh:
        for r in csv.DictReader(fh):
            if r["mode"] == "graph" and r["status"] == "ok" and r["gpu"] == TABLE_GPU:  # the GPU the table is of
                cell = (int(r["N"]), int(r["K"]), r["flavour"], r["launch"])
                times.setdefault(cell, {}).setdefault(r["config"], []).append(float(r["us"]))
    return {cell: {c: statistics.median(v) for c, v in by.items()} for cell, by in times.items()}


def test_every_table_entry_is_the_fastest_config_of_its_rows():
    """Each FUSED_INT4_CONFIGS entry has rows of every config behind it and stands within WITHIN of the fastest
    config's median there; an entry without rows (or without the file) is a config nobody timed."""
    assert all(k[2] in configs.FLAVOUR_FLAGS and k[3] in configs.LAUNCHES for k in configs.FUSED_INT4_CONFIGS)
    if not ROWS.exists():
        assert configs.FUSED_INT4_CONFIGS == {}, f"table entries without {ROWS.name}: run bench/fused_int4_gemv.py"
        return
    medians = _graph_medians()
    for cell, (block_n, sub, warps) in configs.FUSED_INT4_CONFIGS.items():
        assert cell in medians, f"{cell}: no rows in {ROWS.name}"
        assert len(medians[cell]) == len(INT4_CONFIGS), f"{cell}: {len(medians[cell])} configs timed, not all"
        key = f"n{block_n}_s{sub}_w{warps}"
        best = min(medians[cell].values())
        assert key in medians[cell] and medians[cell][key] <= (1 + WITHIN) * best, (cell, key, medians[cell])


def test_the_bench_names_its_configs_as_the_table_reads_them(monkeypatch):
    spec = importlib.util.spec_from_file_location("fused_int4_gemv", paths.REPO / "bench" / "fused_int4_gemv.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.config_key((8, 2, 4)) == "n8_s2_w4"
    assert tuple(int(part[1:]) for part in bench.config_key((16, 1, 2)).split("_")) == (16, 1, 2)
    rows = [dict(shape="llama-3.1-8b o", N="4096", K="4096", flavour="residual", bytes="9437184", launch="early",
                 mode="graph", config=config, us=str(us), status="ok")
            for config, times in (("n4_s1_w2", (10.0, 10.2, 10.1)), ("n8_s2_w4", (9.0, 9.4, 9.2))) for us in times]
    rows.append(dict(rows[0], mode="tuned", config="n4_s1_w2", us=""))
    lines = []
    bench.print = lambda *a, **k: lines.append(" ".join(map(str, a)))  # the summary's lines
    monkeypatch.setattr(bench, "INT4_CONFIGS", [(4, 1, 2), (8, 2, 4)])  # both configs timed: an entry
    bench.summary(rows, "GPU")
    text = "\n".join(lines)
    assert "fastest n8_s2_w4    9.20 us" in text and "tuned n4_s1_w2   10.10 us" in text
    assert "(4096, 4096, 'residual', 'early'): (8, 2, 4),  # llama-3.1-8b o" in text
    lines.clear()
    monkeypatch.setattr(bench, "INT4_CONFIGS", [(4, 1, 2), (8, 2, 4), (16, 1, 2)])  # a run cut before the third
    bench.summary(rows, "GPU")
    text = "\n".join(lines)
    assert "2 of 3 configs timed: no entry" in text and "(8, 2, 4)" not in text


def test_every_flavour_has_its_product_and_reference_and_an_unknown_one_is_refused():
    """kernels.fused_int4.flavours.flavour_product, which the bench and the GPU test share: one (call, reference) for
    each flavour of the table; the plain product's reference is the int4 layer's own rounding."""
    import torch

    from decodegap.kernels.fused import rotary_args
    from decodegap.kernels.fused_int4 import flavours, reference
    from decodegap.kernels.int4_gemv.layer import Int4GemvLinear

    layer = Int4GemvLinear.from_weight((0.02 * torch.randn(8, 64, generator=torch.Generator().manual_seed(0)))
                                       .bfloat16(), group_size=32)
    x = torch.randn(64, generator=torch.Generator().manual_seed(1)).bfloat16()
    res, on, nw = torch.ones(8).bfloat16(), torch.ones(8).bfloat16(), torch.ones(64).bfloat16()
    rotary = (torch.zeros(9, 16).bfloat16(),) * 2 + (torch.tensor([3]), torch.zeros(1, 1, 9, 16).bfloat16(),
                                                       torch.zeros(1, 1, 9, 16).bfloat16(), 2, 1)
    for flavour in configs.FLAVOUR_FLAGS:
        call, ref = flavours.flavour_product(flavour, nw, res, on, 1e-5, rotary=rotary)
        assert callable(call) and callable(ref), flavour
    with pytest.raises(ValueError, match="the norm_rotary product takes `rotary`"):
        flavours.flavour_product("norm_rotary", nw, res, on, 1e-5)
    _, plain = flavours.flavour_product("plain", nw, res, on, 1e-5)
    assert torch.equal(plain(x, layer), reference.linear_reference(x, layer))
    _, residual = flavours.flavour_product("residual", nw, res, on, 1e-5)
    assert torch.equal(residual(x, layer), (reference.linear_reference(x, layer).float() + 1).bfloat16())
    _, silu = flavours.flavour_product("plain_gate_up", nw, res, on, 1e-5)  # the [gate; up] layer's 8 rows: 4 out
    gate, up = reference.linear_reference(x, layer).float().chunk(2)
    assert torch.equal(silu(x, layer), (torch.nn.functional.silu(gate).bfloat16().float() * up).bfloat16())
    with pytest.raises(ValueError, match="no flavour 'gate_up_rotary'"):
        flavours.flavour_product("gate_up_rotary", nw, res, on, 1e-5)
    # a rotary reference writes v's row (and k's) into the caches it is handed, never the kernel's: a test comparing
    # the rows written reads them there (the GPU test once compared against caches the reference never wrote)
    qkv = Int4GemvLinear.from_weight((0.02 * torch.randn(64, 64, generator=torch.Generator().manual_seed(2)))
                                     .bfloat16(), group_size=32)  # (2 + 2 x 1) heads of 16
    own = rotary_args.with_own_caches(rotary)
    _, rotary_ref = flavours.flavour_product("plain_rotary", nw, res, on, 1e-5, rotary=rotary, reference_rotary=own)
    rotary_ref(x, qkv)
    v_row = reference.linear_reference(x, qkv)[48:]
    assert torch.equal(own[4][0, 0, 3], v_row) and v_row.abs().sum() > 0
    k_rows, v_rows = rotary_args.rotary_rows(own)
    assert torch.equal(v_rows, v_row[None]) and v_rows.shape == (1, 16) and k_rows.shape == (1, 16)
    assert rotary[3].abs().sum() == 0 and rotary[4].abs().sum() == 0


def test_the_bench_resumes_config_by_config(tmp_path):
    """attempted / complete_cells: a config with a graph row (ok, or error: it would fail again) for this GPU is not
    timed again, nor a tuner's choice with a row; another GPU's rows and a missing file count for nothing; a cell is
    complete with every config and the tuner's choice."""
    spec = importlib.util.spec_from_file_location("fused_int4_gemv", paths.REPO / "bench" / "fused_int4_gemv.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    keys = [bench.config_key(c) for c in INT4_CONFIGS]
    path = tmp_path / "rows.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["gpu", "K", "N", "flavour", "launch", "config", "mode", "status"])
        w.writeheader()
        base = dict(gpu="NVIDIA H200", K=4096, N=4096, flavour="residual", mode="graph", status="ok")
        for k in keys:
            w.writerow(dict(base, launch="early", config=k))  # whole, and its tuner's choice below
            w.writerow(dict(base, launch="pdl", config=k, status="ok" if k != keys[-1] else "error"))  # one error
            w.writerow(dict(base, launch="none", config=k, gpu="NVIDIA H100 80GB HBM3"))  # another GPU
        for k in keys[:5]:  # a run cut after five configs, before the tuner
            w.writerow(dict(base, K=14336, launch="early", config=k))
        w.writerow(dict(base, launch="early", config=keys[0], mode="tuned"))
        w.writerow(dict(base, launch="pdl", config=keys[0], mode="tuned"))
    files = [path, tmp_path / "absent.csv"]
    done = bench.attempted(files, "NVIDIA H200")
    assert done[(14336, 4096, "residual", "early")] == set(keys[:5])  # the other seven configs and the tuner to time
    assert keys[-1] in done[(4096, 4096, "residual", "pdl")]  # the failing config is not tried again
    assert (4096, 4096, "residual", "none") not in done
    assert bench.complete_cells(done) == {(4096, 4096, "residual", "early"), (4096, 4096, "residual", "pdl")}


def test_the_bench_times_the_products_asked_for_and_refuses_an_unknown_one(tmp_path, monkeypatch):
    """--products (measure.sh's INT4_PRODUCTS) narrows the bench to those products; a misspelled one exits naming the
    known names before anything is written, as an unknown launch does."""
    spec = importlib.util.spec_from_file_location("fused_int4_gemv", paths.REPO / "bench" / "fused_int4_gemv.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.chosen_products("down,lm_head_plain") == {"down", "lm_head_plain"}
    monkeypatch.setenv("DECODEGAP_DIAG_DIR", str(tmp_path))
    for argv, word in ((["--products", "donw"], "--products takes names of qkv"),
                       (["--products", ""], "--products takes"), (["--launches", "eraly"], "--launches takes")):
        with pytest.raises(SystemExit, match=word):
            bench.main(argv)
    assert list(tmp_path.iterdir()) == []
