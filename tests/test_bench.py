"""bench/ on a CPU: the entry point's steps and refusals, its README, the Marlin patch and the diagnostics' rows."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from decodegap import paths

BENCH = paths.REPO / "bench"


def _steps_of_measure_sh() -> list[str]:
    m = re.search(r'^ALL_STEPS="([^"]+)"', (BENCH / "measure.sh").read_text(), re.M)
    return m.group(1).split()


def test_measure_sh_refuses_an_unknown_step_before_it_sets_anything_up(tmp_path):
    out = subprocess.run(["bash", "bench/measure.sh", "h200", str(tmp_path / "out"), "roofline", "rooflin"],
                         cwd=paths.REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "unknown step rooflin" in out.stderr and "roofline" in out.stderr and out.stdout == ""
    assert not (tmp_path / "out").exists()


def test_measure_sh_refuses_the_steps_of_the_second_entry_point_it_replaced(tmp_path):
    for step in ("quant_checks", "quant_checks_gpu", "quant-power"):
        out = subprocess.run(["bash", "bench/measure.sh", "h200", str(tmp_path / "out"), "quant_power", step],
                             cwd=paths.REPO, capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and f"unknown step {step} " in out.stderr, step
        assert "quant_power marlin_prefill" in out.stderr  # the refusal lists the steps there are
    assert not (tmp_path / "out").exists()


def _measure_sh_code() -> str:
    """measure.sh without its usage text: the commands it runs."""
    script = (BENCH / "measure.sh").read_text()
    return script[script.index("\nEOF\n", script.index("usage()")):]


def test_every_script_that_writes_committed_rows_is_run_by_a_measure_sh_step():
    code = _measure_sh_code()
    writers = [p for p in sorted(BENCH.glob("*.py")) if re.search(r"\bRows\(", p.read_text())]
    assert {p.name for p in writers} >= {"check_sensitivity_cpu.py", "quant_power_cpu.py", "quant_power_gpu.py",
                                         "marlin_prefill_gpu.py", "sharp_noise_gpu.py", "int4_gemv.py",
                                         "fused_gemv.py", "fused_int4_gemv.py"}
    for script in writers:
        assert re.search(rf"python3 bench/{re.escape(script.name)}\b", code), f"no measure.sh step runs {script.name}"


def test_measure_sh_is_the_one_entry_point_the_other_shell_scripts_serve_it():
    code = _measure_sh_code()
    others = sorted(p.name for p in BENCH.glob("*.sh") if p.name != "measure.sh")
    assert others == ["build_flash_attn.sh", "build_marlin.sh", "fetch_gpt_fast.sh", "gpu_env.sh", "pack_large.sh"]
    for name in others:
        if name == "pack_large.sh":  # run on the sending side: measure.sh reads what it packs (restore_large)
            assert ".largepack/large.txz" in code and ".largepack/SHA256SUMS" in code
            continue
        assert re.search(rf"(bash|source) bench/{re.escape(name)}\b", code), f"measure.sh does not use {name}"


def test_measure_sh_needs_a_gpu_key_and_an_outdir():
    out = subprocess.run(["bash", "bench/measure.sh"], cwd=paths.REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "usage: bench/measure.sh GPU OUTDIR" in out.stderr


def test_measure_sh_help_shows_every_step_and_its_options_by_group():
    out = subprocess.run(["bash", "bench/measure.sh", "--help"], cwd=paths.REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("usage: bench/measure.sh GPU OUTDIR [STEP ...]")
    assert {"quant_power", "marlin_prefill", "check_sensitivity"} <= set(_steps_of_measure_sh())
    for step in _steps_of_measure_sh():
        assert re.search(rf"^    {step}\s", out.stdout, re.M), step
    for script in ("check_sensitivity_cpu.py", "quant_power_gpu.py", "quant_power_cpu.py", "marlin_prefill_gpu.py"):
        assert f"bench/{script}" in out.stdout, script  # each step says which scripts it runs
    groups = [line.strip() for line in out.stdout.splitlines() if re.fullmatch(r"  [A-Z][a-z ]+", line)]
    assert groups == ["What is measured", "Measuring again", "Where and how long"]
    script = (BENCH / "measure.sh").read_text()
    for name in sorted(set(re.findall(r"\$\{([A-Z_]+):[-+?]", script)) - {"TORCHINDUCTOR_CACHE_DIR"}):
        assert re.search(rf"^    {name}\b", out.stdout, re.M), f"--help does not show {name}"


def test_bench_readme_has_a_row_for_every_step_and_names_every_file():
    readme = (BENCH / "README.md").read_text()
    steps = _steps_of_measure_sh()
    assert steps == ["env", "tests", "roofline", "ab", "attention", "attention_step", "quant", "quant_power",
                     "marlin_prefill", "gemv", "fused", "attention_splits", "int4_configs", "fused_int4", "int4_head",
                     "check_sensitivity", "ladder", "confirm", "megakernel", "batch", "batch_compile", "size", "size_compile", "peers"]
    rows = re.findall(r"^\| `([a-z_0-9]+)` \| (\d\d|all) \|", readme, re.M)
    assert [step for step, _ in rows] == steps
    assert dict(rows) == {"env": "all", "tests": "all", "roofline": "01", "ab": "02", "attention": "03",
                          "attention_step": "03", "quant": "04", "quant_power": "04", "marlin_prefill": "04",
                          "gemv": "04", "fused": "06", "attention_splits": "06", "int4_configs": "06", "fused_int4": "06", "int4_head": "06",
                          "check_sensitivity": "06", "ladder": "06", "confirm": "06", "megakernel": "06", "batch": "07",
                          "batch_compile": "07", "size": "07", "size_compile": "07", "peers": "06"}
    for path in sorted(BENCH.iterdir()):
        if path.name != "README.md" and path.suffix in (".sh", ".py"):
            assert f"`{path.name}`" in readme, f"bench/README.md does not say what {path.name} is"
    for step in steps:  # every step is a function of the script
        assert re.search(rf"^step_{step}\(\) {{", (BENCH / "measure.sh").read_text(), re.M), step


def test_no_shell_script_in_bench_holds_python_of_its_own():
    for script in sorted(BENCH.glob("*.sh")):
        text = script.read_text()
        assert not re.search(r"python3?\s+-\s.*<<", text), f"{script.name}: a Python here-document"
        assert "<<'PY'" not in text and "<<PY" not in text, script.name


HINTED = ('  asm volatile(\n    "{\\n"\n    "   .reg .b64 p;\\n"\n'
          '    "   createpolicy.fractional.L2::evict_first.b64 p, 1.0;"\n'
          '    "   cp.async.cg.shared.global.L2::cache_hint [%0], [%1], %2, p;\\n"\n'
          '    "}\\n" :: "r"(smem), "l"(glob_ptr), "n"(BYTES)\n  );\n')


def test_marlin_patch_replaces_the_cache_hinted_copy_once(tmp_path):
    kernel = tmp_path / "marlin_cuda_kernel.cu"
    kernel.write_text("// before\n" + HINTED + "// after\n")
    out = subprocess.run([sys.executable, "bench/marlin_build.py", "patch", str(kernel)], cwd=paths.REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert kernel.read_text() == ('// before\n  asm volatile(\n    "cp.async.cg.shared.global [%0], [%1], %2;\\n"'
                                  ' :: "r"(smem), "l"(glob_ptr), "n"(BYTES)\n  );\n// after\n')
    again = subprocess.run([sys.executable, "bench/marlin_build.py", "patch", str(kernel)], cwd=paths.REPO,
                           capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "found 0" in again.stderr  # sources changed: stop, never build unpatched


def test_diagnostic_rows_carry_their_provenance_and_keep_their_header(tmp_path, monkeypatch):
    monkeypatch.setenv("DECODEGAP_DIAG_DIR", str(tmp_path))
    monkeypatch.setenv("DECODEGAP_GIT_COMMIT", "98e6285" + "0" * 33)
    from decodegap import hardware

    monkeypatch.setenv("DECODEGAP_SOURCE_SHA256", hardware.source_digest())  # the copy is the commit named
    monkeypatch.setattr(sys, "argv", ["bench/some_diag.py", "8192"])
    from decodegap import diagnostics

    rows = diagnostics.Rows("some_diag", ("ctx", "max_rel_err"))
    rows.add(ctx=8192, max_rel_err=0.047)
    diagnostics.Rows("some_diag", ("ctx", "max_rel_err")).add(ctx=4096, max_rel_err=0.05)  # a later run appends
    with open(tmp_path / "some_diag.csv", newline="") as fh:
        got = list(csv.DictReader(fh))
    assert [(r["ctx"], r["max_rel_err"]) for r in got] == [("8192", "0.047"), ("4096", "0.05")]
    assert {r["command"] for r in got} == {"python3 bench/some_diag.py 8192"}
    assert {r["git_commit"] for r in got} == {"98e6285" + "0" * 33} and {r["device"] for r in got} == {"cpu"}
    assert re.fullmatch(r"2\d{3}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}", got[0]["time"])
    with pytest.raises(KeyError, match="no column"):
        rows.add(ctx=1, error=2)
    with pytest.raises(SystemExit, match="move it aside"):
        diagnostics.Rows("some_diag", ("ctx", "max_rel_err", "status"))



def test_timed_rows_one_per_repetition_with_their_bandwidth(tmp_path, monkeypatch, capsys):
    """Rows.add_times, every bench's row writer: rep 0..n-1, us to 3 decimals, gbps = bytes / us / 1e3 (8000 bytes in
    2 us are 4.0 GB/s), the error in 3 significant digits under the file's own error column; a failed measurement is
    one row with blank times; a row with an unknown column writes nothing; the log has one line per measurement."""
    monkeypatch.setenv("DECODEGAP_DIAG_DIR", str(tmp_path))
    monkeypatch.setenv("DECODEGAP_GIT_COMMIT", "98e6285" + "0" * 33)
    from decodegap import diagnostics, hardware

    monkeypatch.setenv("DECODEGAP_SOURCE_SHA256", hardware.source_digest())
    out = diagnostics.Rows("timed", ("gpu", "shape", "rep", "us", "bytes", "gbps", "max_abs_err", "status", "reason"))
    got = out.add_times([2.0, 4.0, 1.6], err=0.00123, err_field="max_abs_err", gpu="G", shape="o", bytes=8000)
    assert [(r["rep"], r["us"], r["gbps"], r["max_abs_err"]) for r in got] == [
        (0, "2.000", "4.0", "1.230e-03"), (1, "4.000", "2.0", "1.230e-03"), (2, "1.600", "5.0", "1.230e-03")]
    failed = out.add_times(None, err_field="max_abs_err", status="error", reason="OOM", gpu="G", shape="qkv",
                           bytes=8000)
    assert [(r["rep"], r["us"], r["gbps"], r["max_abs_err"], r["status"]) for r in failed] == [(0, "", "", "", "error")]
    with pytest.raises(KeyError, match="max_rel_err"):  # this file's error column is max_abs_err
        out.add_times([1.0], err=0.1, gpu="G", shape="o", bytes=8)
    with pytest.raises(KeyError, match="no column"):
        out.add_times([1.0, 2.0], err_field="max_abs_err", gpu="G", shape="o", bytes=8, model="x")
    with open(tmp_path / "timed.csv", newline="") as fh:
        written = list(csv.DictReader(fh))
    assert [(r["shape"], r["rep"], r["us"]) for r in written] == [("o", "0", "2.000"), ("o", "1", "4.000"),
                                                                  ("o", "2", "1.600"), ("qkv", "0", "")]
    assert {r["git_commit"] for r in written} == {"98e6285" + "0" * 33}
    log = [line for line in capsys.readouterr().out.splitlines() if line.startswith("timed.csv")]
    assert log == ["timed.csv {'shape': 'o'} median 2.000 us of 3", "timed.csv {'shape': 'qkv'} error: OOM"]

# A small fake of flash-attn's static_switch.h and flash_api.cpp: the macro and function shapes the patches look for
FAKE_SWITCH = """#pragma once
#define BOOL_SWITCH(COND, NAME, ...) \\
  [&] { if (COND) { constexpr static bool NAME = true; return __VA_ARGS__(); } \\
        else { constexpr static bool NAME = false; return __VA_ARGS__(); } }()

#define FP16_SWITCH(COND, ...) \\
  [&] { if (COND) { using elem_type = cutlass::half_t; return __VA_ARGS__(); } \\
        else { using elem_type = cutlass::bfloat16_t; return __VA_ARGS__(); } }()

#define HEADDIM_SWITCH(HEADDIM, ...) \\
  [&] { if (HEADDIM <= 64) { constexpr static int kHeadDim = 64; return __VA_ARGS__(); } \\
        else { constexpr static int kHeadDim = 128; return __VA_ARGS__(); } }()
// end
"""
FAKE_API = """void run_mha_fwd(Flash_fwd_params &params, cudaStream_t stream) {
    FP16_SWITCH(!params.is_bf16, [&] {
        HEADDIM_SWITCH(params.d, [&] { run_mha_fwd_<elem_type, kHeadDim>(params, stream); });
    });
}

void run_mha_bwd(Flash_bwd_params &params, cudaStream_t stream) {
    FP16_SWITCH(!params.is_bf16, [&] {
        HEADDIM_SWITCH(params.d, [&] { run_mha_bwd_<elem_type, kHeadDim>(params, stream); });
    });
}

int after_bwd() { return 1; }
"""


def _fake_flash_attn(root, switch=FAKE_SWITCH, api=FAKE_API):
    src = root / "csrc" / "flash_attn"
    (src / "src").mkdir(parents=True)
    (src / "src" / "static_switch.h").write_text(switch)
    (src / "flash_api.cpp").write_text(api)
    return src


def test_flash_attn_patches_leave_one_head_dim_one_dtype_and_no_backward(tmp_path):
    src = _fake_flash_attn(tmp_path)
    out = subprocess.run([sys.executable, "bench/flash_attn_build.py", "patch", str(tmp_path)], cwd=paths.REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    switch, api = (src / "src" / "static_switch.h").read_text(), (src / "flash_api.cpp").read_text()
    assert "kHeadDim = 64" not in switch and switch.count("constexpr static int kHeadDim = 128;") == 1
    assert "TORCH_CHECK((HEADDIM) == 128" in switch  # another head dim raises instead of naming a missing kernel
    assert "half_t" not in switch and "TORCH_CHECK(!(COND)" in switch
    assert "using elem_type = cutlass::bfloat16_t;" in switch
    assert FAKE_SWITCH.split("\n\n")[0] in switch and switch.endswith("// end\n")  # BOOL_SWITCH and the rest kept
    assert "run_mha_bwd_" not in api and 'TORCH_CHECK(false, "this trimmed flash-attn build' in api
    assert api.startswith(FAKE_API.split("\n\n")[0]) and api.endswith("int after_bwd() { return 1; }\n")
    assert re.search(r"patched files sha256 [0-9a-f]{64}", out.stdout)


def test_flash_attn_patch_stops_when_a_switch_is_missing_and_writes_nothing(tmp_path):
    without_fp16 = FAKE_SWITCH.replace("#define FP16_SWITCH", "#define FP16_DISPATCH")
    src = _fake_flash_attn(tmp_path, switch=without_fp16)
    out = subprocess.run([sys.executable, "bench/flash_attn_build.py", "patch", str(tmp_path)], cwd=paths.REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "FP16_SWITCH: bf16 only: found 0" in out.stderr
    assert (src / "src" / "static_switch.h").read_text() == without_fp16  # never build half-patched sources
    assert (src / "flash_api.cpp").read_text() == FAKE_API


def test_flash_attn_build_compiles_head_dim_128_bf16_forward_only_and_reads_ninja_times(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import flash_attn_build as fab

    cuda = [s for s in fab.SOURCES if s.endswith(".cu")]
    assert fab.SOURCES[0] == "flash_api.cpp" and len(cuda) == 4
    assert all("hdim128_bf16" in s and "bwd" not in s for s in cuda)
    assert {("split" in s, "causal" in s) for s in cuda} == {(False, False), (False, True), (True, False), (True, True)}
    (tmp_path / "setup.py").write_text('sources=["csrc/flash_attn/flash_api.cpp", "csrc/flash_attn/src/a_sm80.cu",\n'
                                       '"csrc/flash_attn/src/b_sm80.cu", "csrc/flash_attn/src/a_sm80.cu"]')
    assert fab.full_build_files(str(tmp_path)) == 2  # distinct .cu files of the upstream setup.py
    (tmp_path / ".ninja_log").write_text("# ninja log v5\n0\t1500\t0\tflash_api.o\tab\n"
                                         "2\t62002\t0\tx_sm80.cuda.o\tcd\n10\t20\t0\tflash_attn_2_cuda.so\tef\n")
    assert fab.ninja_times(tmp_path) == {"flash_api.o": 1.5, "x_sm80.cuda.o": 62.0}


@pytest.mark.parametrize("want, name, needed", [
    ("all", "awq-marlin", True), ("all", "gptq-exllamav2", True),
    ("int4-tinygemm", "awq-marlin", False), ("int4-tinygemm", "gptq-exllamav2", False),
    ("awq-triton,gptq-exllamav2", "gptq-exllamav2", True), ("awq-triton,gptq-exllamav2", "awq-marlin", False),
    ("awq-marlin-x", "awq-marlin", False),
])
def test_the_quant_step_builds_only_the_extensions_its_paths_need(want, name, needed):
    """measure.sh's `needs`, which decides whether build_quant builds Marlin's or ExLlamaV2's extension (minutes of
    GPU time each): a path list names it whole, or is "all" (the full sweep)."""
    function = re.search(r"^needs\(\) \{.*?^\}", (BENCH / "measure.sh").read_text(), re.M | re.S).group(0)
    out = subprocess.run(["bash", "-c", f'{function}\nneeds "$1" "$2"', "-", want, name])
    assert (out.returncode == 0) is needed


@pytest.mark.parametrize("quant_args, paths", [
    ("", "all"), ("--sessions 3", "all"), ("--sessions 3 --paths int4-triton,bf16", "int4-triton,bf16"),
    ("--paths=awq-marlin --arms eager", "awq-marlin"), ("--arms eager --paths gptq-exllamav2", "gptq-exllamav2"),
])
def test_the_quant_step_builds_for_the_paths_quant_args_names(quant_args, paths):
    """measure.sh's `quant_args_paths`, what build_quant is given: QUANT_ARGS' --paths (either spelling), else all; so
    a sweep of the int4 paths alone builds neither Marlin nor ExLlamaV2 (with `needs`, above)."""
    import os

    function = re.search(r"^quant_args_paths\(\) \{.*?^\}", (BENCH / "measure.sh").read_text(), re.M | re.S).group(0)
    out = subprocess.run(["bash", "-c", f"{function}\nquant_args_paths"], capture_output=True, text=True,
                         env=dict(os.environ, QUANT_ARGS=quant_args))
    assert out.returncode == 0 and out.stdout.strip() == paths


@pytest.mark.parametrize("key,hint", [("H200", "did you mean 'h200'?"), ("h999", None),
                                      ("DETECT", "did you mean 'detect'?"), ("Detect", "did you mean 'detect'?"),
                                      ("h100", "did you mean 'h100-sxm'?")])
def test_measure_sh_refuses_a_gpu_key_outside_the_registry_before_it_sets_anything_up(tmp_path, key, hint):
    """A key that is neither the registry's (data/specs/gpus.csv) nor `detect` (lowercase) stops measure.sh on stderr,
    naming the key and the known ones, before OUTDIR, DATA_DIR's copy of the registry, .ext/ or .site/ exist (and so
    before bench/gpu_env.sh installs any wheel). Run in a folder of links to bench/, lib/ and data/, so that .ext/ and
    .site/ would land there."""
    import os

    work = tmp_path / "work"
    work.mkdir()
    for name in ("bench", "lib", "data"):
        (work / name).symlink_to(paths.REPO / name)
    env = dict(os.environ, DATA_DIR=str(tmp_path / "data-copy"))
    out = subprocess.run(["bash", "bench/measure.sh", key, str(tmp_path / "out"), "roofline"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"unknown GPU key {key!r}" in out.stderr and "Known: l4, " in out.stderr and "h200" in out.stderr
    assert "or detect" in out.stderr and out.stdout == ""
    if hint:
        assert hint in out.stderr
    else:
        assert "did you mean" not in out.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "data-copy").exists()
    assert not (work / ".ext").exists() and not (work / ".site").exists()
    assert sorted(p.name for p in work.iterdir()) == ["bench", "data", "lib"]


def test_measure_sh_checks_the_key_against_data_dirs_own_registry(tmp_path):
    """Where DATA_DIR holds a registry already, the key is checked against that one (the one the run will use)."""
    import os

    data = tmp_path / "data-own" / "specs"
    data.mkdir(parents=True)
    (data / "gpus.csv").write_text("gpu,name\nmy-gpu,Mine\n")
    env = dict(os.environ, DATA_DIR=str(tmp_path / "data-own"))
    out = subprocess.run(["bash", "bench/measure.sh", "h200", str(tmp_path / "out"), "roofline"], cwd=paths.REPO,
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unknown GPU key 'h200': Known: my-gpu, or detect" in out.stderr, out.stderr
    assert not (tmp_path / "out").exists()


def test_measure_sh_checks_the_gpu_key_against_the_device_before_its_first_step(tmp_path):
    """A key that is not this machine's GPU (here: no CUDA device at all, or a misspelled key) stops measure.sh with
    the library's one-line message, before any step runs or any row is written. Run in a folder of links to bench/,
    lib/ and data/, so that what bench/gpu_env.sh sets up (.ext/, .site/) stays out of the checkout."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA")
    for name in ("bench", "lib", "data"):
        (tmp_path / name).symlink_to(paths.REPO / name)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    for key, message in (("h200", "no CUDA device is visible, so GPU 'h200' cannot be measured"),
                         ("detect", "no CUDA device is visible, so no GPU can be measured"),
                         ("h100", "did you mean 'h100-sxm'?")):
        out = subprocess.run(["bash", "bench/measure.sh", key, str(tmp_path / "out"), "roofline"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, out.stdout + out.stderr
        assert message in out.stderr and "== roofline" not in out.stdout
    assert list((tmp_path / "out").iterdir()) == []  # no step's log, no tarball of rows


@pytest.mark.parametrize("env,message", [
    (dict(ATTENTION_CONTEXTS="2048,x"), "ATTENTION_CONTEXTS='2048,x': give comma-separated positive context lengths"),
    (dict(ATTENTION_CONTEXTS="0"), "ATTENTION_CONTEXTS='0': give comma-separated positive context lengths"),
    (dict(ATTENTION_MODELS="llama-3.1-8bb"), "unknown model 'llama-3.1-8bb'. Known: llama-3.1-8b")])
def test_the_attention_bench_refuses_bad_input_before_it_writes(tmp_path, env, message):
    """bench/attention_splits.py checks its contexts and models before its CSV is opened: a bad value exits with a
    message naming it, and no file is written."""
    import os

    run_env = dict(os.environ, PYTHONPATH=str(paths.REPO / "lib"), DECODEGAP_DIAG_DIR=str(tmp_path), **env)
    out = subprocess.run([sys.executable, "bench/attention_splits.py"], cwd=paths.REPO, env=run_env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and message in out.stderr + out.stdout
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("env,message", [
    (dict(FUSED_GEMV_PRODUCTS="o_scale,o_scaled"), "FUSED_GEMV_PRODUCTS names ['o_scaled'], which no model of "
                                                    "FUSED_GEMV_MODELS has"),
    (dict(FUSED_GEMV_MODELS="llama-3.1-8bb"), "unknown model 'llama-3.1-8bb'. Known: llama-3.1-8b")])
def test_the_product_bench_refuses_bad_input_before_it_writes(tmp_path, env, message):
    """bench/fused_gemv.py checks its models and named products before its CSV is opened (and before any GPU call): a
    misspelt product or model exits with a message naming it, and no file is written."""
    import os

    run_env = dict(os.environ, PYTHONPATH=str(paths.REPO / "lib"), DECODEGAP_DIAG_DIR=str(tmp_path), **env)
    out = subprocess.run([sys.executable, "bench/fused_gemv.py"], cwd=paths.REPO, env=run_env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and message in out.stderr + out.stdout, out.stderr[-2000:]
    assert not list(tmp_path.iterdir())


def test_the_raw_tarball_holds_env_json_before_the_csvs_it_counts(tmp_path):
    """measure.sh's save(), run alone: env.json is the tarball's first member (read before the CSVs, whose rows it
    counts, so a snapshot taken mid-run never records more rows than its CSVs hold), every file is in it once, and a
    folder with no env.json yet is packed too."""
    code = (BENCH / "measure.sh").read_text()
    save = re.search(r"^save\(\) \{.*?^\}", code, re.M | re.S).group(0)
    folder = tmp_path / "data" / "raw" / "h200"
    folder.mkdir(parents=True)
    for name in ("ab.csv", "decode.csv", "verify.csv", "env.json", "zz.csv"):
        (folder / name).write_text(name)
    out = tmp_path / "out"
    out.mkdir()
    script = f'{save}\nDATA="{tmp_path / "data"}"; OUTDIR="{out}"; GPU=h200; save'
    subprocess.run(["bash", "-c", script], check=True, timeout=60)
    members = subprocess.run(["tar", "tzf", str(out / "raw-h200.tgz")], capture_output=True, text=True,
                             check=True).stdout.split()
    assert members[0] == "h200/env.json"
    assert sorted(members) == sorted(f"h200/{n}" for n in ("ab.csv", "decode.csv", "verify.csv", "env.json", "zz.csv"))
    (folder / "env.json").unlink()
    subprocess.run(["bash", "-c", script], check=True, timeout=60)
    members = subprocess.run(["tar", "tzf", str(out / "raw-h200.tgz")], capture_output=True, text=True,
                             check=True).stdout.split()
    assert sorted(members) == sorted(f"h200/{n}" for n in ("ab.csv", "decode.csv", "verify.csv", "zz.csv"))


def _measure_functions(*names):
    """measure.sh's shell functions of these names, as text to run alone (a one-line function or a block)."""
    code = (BENCH / "measure.sh").read_text()
    return "\n".join(re.search(rf"^{name}\(\) \{{([^\n]*\}}$|.*?^\}})", code, re.M | re.S).group(0) for name in names)


def _ended(stdout):
    """(name, ended at s, took s) of each step measure.sh's run_step reports ended."""
    return [(m[1], float(m[2]), int(m[3]), float(m[4]))
            for m in re.finditer(r"^== (\w+) ended at ([\d.]+) s \(exit (\d+), ([\d.]+) s\)$", stdout, re.M)]


def test_total_timeout_bounds_the_steps_together_and_skips_those_after_it(tmp_path):
    """measure.sh's run_step and bounded, run alone with stub steps: with TOTAL_TIMEOUT=3 a first step that would
    sleep 30 s is stopped at 3 s (timeout's exit 124), and the second step is skipped, not started; with STEP_TIMEOUT=2
    and TOTAL_TIMEOUT=4 the first step gets 2 s and the second what is left of the 4, so the two end by 4 s (bash's
    SECONDS, whole seconds of the wall clock, let the second run to 5 s). Bad values are refused before any step
    (exit 2)."""
    import time

    funcs = _measure_functions("bounded", "clock_ms", "seconds", "run_step")
    stubs = 'quiet() { cat; }\nsave() { :; }\nstep_a() { bounded sleep 30; }\nstep_b() { bounded sleep 30; }\n'
    script = (f'{funcs}\n{stubs}OUTDIR="{tmp_path}"; RUN_T0_MS=0; clock_ms; RUN_T0_MS=$CLOCK_MS\n'
              'run_step a step_a\nrun_step b step_b\n')
    t0 = time.monotonic()
    out = subprocess.run(["bash", "-c", script], env={**os.environ, "TOTAL_TIMEOUT": "3"}, capture_output=True,
                         text=True, timeout=60)
    assert 2.9 < time.monotonic() - t0 < 20
    (name, at, rc, took), = _ended(out.stdout)
    assert (name, rc) == ("a", 124) and 2.95 <= took <= at < 3.9, out.stdout
    assert re.search(r"^== b skipped: TOTAL_TIMEOUT=3 s spent at 3\.\d s$", out.stdout, re.M), out.stdout
    out = subprocess.run(["bash", "-c", script], env={**os.environ, "TOTAL_TIMEOUT": "4", "STEP_TIMEOUT": "2"},
                         capture_output=True, text=True, timeout=60)
    (a, a_at, a_rc, a_took), (b, b_at, b_rc, b_took) = _ended(out.stdout)
    assert (a, a_rc, b, b_rc) == ("a", 124, "b", 124), out.stdout
    assert 1.95 <= a_took <= a_at < 2.9, out.stdout
    assert b_took <= 4 - a_at + 0.5 and 3.95 <= b_at < 4.9, out.stdout
    for var, value in (("TOTAL_TIMEOUT", "10m"), ("STEP_TIMEOUT", "0")):
        bad = subprocess.run(["bash", "bench/measure.sh", "h200", str(tmp_path / "out"), "roofline"], cwd=paths.REPO,
                             env={**os.environ, var: value}, capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and f"{var}='{value}': give a whole number of seconds above 0" in bad.stderr
    assert not (tmp_path / "out").exists()


def test_pack_large_packs_the_big_tracked_files_and_measure_sh_restores_those_a_tree_lacks(tmp_path):
    """bench/pack_large.sh in a repository of one 1.5 MiB tracked file and a small one packs the big one alone
    (LARGE_MIB=1); measure.sh's restore_large puts it back, byte for byte, where the tree lacks it, leaves a file the
    tree has as it is, and refuses (removing what it restored) a pack whose file is not the one its SHA256SUMS
    names. A bad LARGE_MIB is refused before anything is packed."""
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    big = bytes(range(256)) * (6 * 1024)  # 1.5 MiB
    (repo / "data" / "big.csv").write_bytes(big)
    (repo / "small.csv").write_text("a,b\n1,2\n")
    git = ["git", "-C", str(repo)]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "data/big.csv", "small.csv"], check=True)
    pack = subprocess.run(["bash", str(BENCH / "pack_large.sh")], cwd=repo, env={**os.environ, "LARGE_MIB": "1"},
                          capture_output=True, text=True, timeout=120)
    assert pack.returncode == 0, pack.stderr
    assert pack.stdout.split() == ["data/big.csv"]
    assert (repo / ".largepack" / "SHA256SUMS").read_text().split()[1:] == ["data/big.csv"]
    bad = subprocess.run(["bash", str(BENCH / "pack_large.sh")], cwd=repo, env={**os.environ, "LARGE_MIB": "8M"},
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "LARGE_MIB='8M': give a whole number of MiB above 0" in bad.stderr
    assert (repo / ".largepack" / "large.txz").exists()

    restore = _measure_functions("restore_large") + "\nrestore_large\n"
    run = lambda: subprocess.run(["bash", "-c", restore], cwd=repo, capture_output=True, text=True, timeout=60)
    (repo / "data" / "big.csv").unlink()
    out = run()
    assert out.returncode == 0 and "restored from .largepack/large.txz: data/big.csv" in out.stdout, out.stderr
    assert (repo / "data" / "big.csv").read_bytes() == big
    (repo / "data" / "big.csv").write_text("the tree's own\n")
    out = run()
    assert out.returncode == 0 and out.stdout == "" and (repo / "data" / "big.csv").read_text() == "the tree's own\n"
    sums = repo / ".largepack" / "SHA256SUMS"
    sums.write_text("0" * 64 + "  data/big.csv\n")
    (repo / "data" / "big.csv").unlink()
    out = run()
    assert out.returncode == 1 and "is not the one packed; removed: data/big.csv" in out.stderr
    assert not (repo / "data" / "big.csv").exists()


def test_resume_from_merges_the_earlier_calls_tarballs_before_any_step_or_stops(tmp_path):
    """measure.sh's resume_from, run alone with python3 stubbed (it records its arguments; merge-runs itself is
    tested with real tarballs in test_provenance): unset, nothing is called; two tarballs go to one merge-runs call, in
    order, into DATA; a named tarball that is not there stops it (exit 1) before merge-runs is called, naming the
    path and the fix; a refusal of merge-runs stops it too."""
    (tmp_path / "a.tgz").write_bytes(b"a")
    (tmp_path / "b.tgz").write_bytes(b"b")
    calls = tmp_path / "calls"
    stub = f'python3() {{ echo "$*" >> "{calls}"; return ${{STUB_RC:-0}}; }}\nDATA=mydata\n'
    script = stub + _measure_functions("resume_from") + "\nresume_from\n"

    def run(**env):
        calls.unlink(missing_ok=True)
        out = subprocess.run(["bash", "-c", script], cwd=tmp_path, env={**os.environ, **env}, capture_output=True,
                             text=True, timeout=60)
        return out, (calls.read_text().splitlines() if calls.exists() else [])

    out, made = run()
    assert out.returncode == 0 and made == []
    out, made = run(RESUME_FROM="a.tgz,b.tgz")
    assert out.returncode == 0 and made == ["-m decodegap --data-dir mydata merge-runs a.tgz b.tgz"], out.stderr
    out, made = run(RESUME_FROM="a.tgz,.resume/raw-h200.tgz")
    assert out.returncode == 1 and made == []
    assert "RESUME_FROM names .resume/raw-h200.tgz, which is not here" in out.stderr and "carry it" in out.stderr
    out, made = run(RESUME_FROM="b.tgz", STUB_RC="2")
    assert out.returncode == 1 and made == ["-m decodegap --data-dir mydata merge-runs b.tgz"]
    assert "merge-runs refused b.tgz" in out.stderr and "no step run" in out.stderr
