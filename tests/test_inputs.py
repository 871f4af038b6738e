"""Bad inputs are refused before anything is written, with one line saying what is wrong and how to fix it:
registry keys, the GPU key against the device measured (harness.keys), CLI values, papermill parameters, the data
folder (inputs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from decodegap.experiments import roofline as roofline_experiment
from decodegap import inputs, notebooks, paths
from decodegap.harness import keys, profile, runs, sweep
from decodegap.inputs import InputError


def cli(*args, cwd: Path, timeout=120):
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "decodegap", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


def _one_line_error(out) -> str:
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("decodegap: ")
    return out.stderr


def _git_status(*pathspec) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--", *pathspec],
                          cwd=paths.REPO, capture_output=True, text=True, check=True).stdout


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_misspelled_arm_leaves_the_repository_untouched(tmp_path):
    before = _git_status("data", "figures")
    err = _one_line_error(cli("measure", "--gpu", "h200", "--arms", "eagr", cwd=tmp_path))
    assert "unknown arm 'eagr'" in err and "eager" in err
    assert _git_status("data", "figures") == before  # no row in decode.csv, no env.json entry


@pytest.mark.slow  # fresh processes of the command line
def test_a_misspelled_lever_leaves_the_repository_untouched(tmp_path):
    before = _git_status("data", "figures")
    err = _one_line_error(cli("ladder", "--gpu", "h200", "--levers", "lean_fused_grpah", cwd=tmp_path))
    assert "unknown lever 'lean_fused_grpah'" in err and "lean_fused_pdl_graph" in err
    assert _git_status("data", "figures") == before


@pytest.mark.parametrize("args, expected", [
    (["quantisation", "--plan", "--paths", "int4-triton,int4-trton"], "unknown quantisation path 'int4-trton'; known: "),
    (["quantisation", "--paths", "int4-triton,int4-trton"], "unknown quantisation path 'int4-trton'; known: "),
    (["quantisation", "--plan", "--paths", ","], "no quantisation path given; pass one or more of bf16"),
    (["quantisation", "--paths", ","], "no quantisation path given; pass one or more of bf16, bnb-nf4"),
    (["closing-the-gap", "--plan", "--levers", ""], "no lever given; pass one or more of eager"),
    (["closing-the-gap", "--levers", ""], "no lever given; pass one or more of eager")])
def test_a_misspelled_or_empty_path_or_lever_list_is_refused_in_one_line_before_anything(data_dir, capsys, args,
                                                                                          expected):
    """`quantisation --paths` names each path against quant.PATHS and its aliases before a plan is listed or a GPU
    is looked for (a misspelt one was a KeyError's traceback from the plan), and an empty `--paths` or `--levers` is
    refused rather than read as every path or lever (932 cells on the H200 for an empty --levers; 2026-12-07)."""
    from decodegap import cli as cli_module

    before = _tree(data_dir)
    assert cli_module.main(["--data-dir", str(data_dir), *args, "--gpu", "h200"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"decodegap: {expected}") and err.count("\n") == 1, err
    assert _tree(data_dir) == before


def test_an_empty_key_list_names_each_key_and_how_to_get_every_one():
    """keys.quants and keys.levers share one check: each key known, at least one; the quantisation paths' message
    also names the option to leave out for every path."""
    from decodegap.quant.paths import ALIASES, PATHS

    with pytest.raises(InputError) as err:
        keys.quants(())
    assert str(err.value) == (f"no quantisation path given; pass one or more of {', '.join([*PATHS, *ALIASES])}, "
                              "or leave --paths out for every quantisation path")
    assert keys.quants(["awq", "bf16"]) == ("awq", "bf16")  # an alias passes, as --quant takes it
    with pytest.raises(InputError, match=r"^no lever given; pass one or more of eager, "):
        keys.levers([])


@pytest.mark.parametrize("option, value, expected", [
    ("--arms", "eagr", "unknown arm 'eagr'"), ("--attn", "fa9", "unknown attention backend 'fa9'"),
    ("--quant", "int3", "unknown quantisation path 'int3'"), ("--contexts", "2k", "--contexts takes comma-separated whole numbers"),
    ("--models", "llama-3.1-8x", "unknown model 'llama-3.1-8x'")])
@pytest.mark.slow
def test_bad_measure_values_write_nothing(data_dir, tmp_path, option, value, expected):
    before = _tree(data_dir)
    err = _one_line_error(cli("--data-dir", str(data_dir), "measure", "--gpu", "cpu-test", "--device", "cpu",
                              "--models", "llama-tiny", "--contexts", "16", option, value, cwd=tmp_path))
    assert expected in err
    assert _tree(data_dir) == before and not (data_dir / "raw").exists()


@pytest.mark.slow
def test_cpu_timings_are_never_written_as_a_gpus_rows(data_dir, tmp_path):
    err = _one_line_error(cli("--data-dir", str(data_dir), "measure", "--gpu", "h200", "--device", "cpu",
                              "--models", "llama-tiny", "--contexts", "16", cwd=tmp_path))
    assert "GPU key 'h200'" in err and "'cpu'" in err and "architecture is cpu" in err
    assert not (data_dir / "raw").exists()
    with pytest.raises(InputError, match="measures this machine's CPU"):
        sweep.run_sweep(sweep.SweepPlan(gpu="h200", models=("llama-tiny",), contexts=(16,), device="cpu"), data_dir)
    with pytest.raises(InputError, match="measures this machine's CPU"):
        roofline_experiment.record_bandwidth("h200", data_dir, "cpu", size_bytes=1 << 20, reps=1)
    assert not (data_dir / "raw").exists()
    assert keys.gpu_to_measure("cpu-test", "cpu", data_dir) == "cpu-test"


def test_the_gpu_key_must_be_the_cuda_device_measured(data_dir, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InputError, match="no CUDA device is visible, so GPU 'l4' cannot be measured"):
        keys.gpu_to_measure("l4", "cuda", data_dir)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA L4")
    assert keys.gpu_to_measure(None, "cuda", data_dir) == "l4"
    assert keys.gpu_to_measure("l4", "cuda", data_dir) == "l4"
    with pytest.raises(InputError, match=r"GPU key 'h200'.*'NVIDIA L4' \(key 'l4'\); pass --gpu l4"):
        keys.gpu_to_measure("h200", "cuda", data_dir)


def test_gpus_this_machine_names_the_device_and_checks_an_expected_key(data_dir, monkeypatch, capsys):
    """`python -m decodegap gpus --this-machine` (bench/measure.sh's check before its first step, and its `detect`)."""
    import torch

    from decodegap import cli as cli_module

    def gpus(*extra):
        return cli_module.main(["--data-dir", str(data_dir), "gpus", "--this-machine", *extra])

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    assert gpus() == 0 and capsys.readouterr().out == "h100-sxm\n"
    assert gpus("--expect", "h100-sxm") == 0 and capsys.readouterr().out == "h100-sxm\n"
    assert gpus("--expect", "h200") == 2
    assert "GPU key 'h200' names an NVIDIA H200 SXM 141GB, but this machine's cuda is a 'NVIDIA H100 80GB HBM3' " \
           "(key 'h100-sxm')" in capsys.readouterr().err
    assert gpus("--expect", "h100") == 2 and "did you mean 'h100-sxm'?" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA GeForce RTX 4090")
    assert gpus() == 2 and "RTX 4090" in capsys.readouterr().err  # not in the registry: named, never guessed
    assert cli_module.main(["--data-dir", str(data_dir), "gpus", "--expect", "h200"]) == 2
    assert "it takes --this-machine" in capsys.readouterr().err


@pytest.mark.slow
def test_without_cuda_a_named_gpu_gets_the_same_one_line_message_as_none(data_dir, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA")
    for extra in ((), ("--gpu", "l4")):
        err = _one_line_error(cli("--data-dir", str(data_dir), "measure", *extra, "--models", "llama-tiny",
                                  cwd=tmp_path))
        assert "no CUDA device is visible" in err
    assert not (data_dir / "raw").exists()


def test_a_failed_sweep_leaves_no_env_entry(data_dir, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("session process failed")

    monkeypatch.setattr(sweep, "_sweep_sessions", boom)
    plan = sweep.SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(16,), device="cpu")
    with pytest.raises(RuntimeError, match="session process failed"):
        sweep.run_sweep(plan, data_dir, progress=False)
    env = data_dir / "raw" / "cpu-test" / "env.json"
    assert json.loads(env.read_text()) == {}


def test_discard_run_keeps_a_run_with_rows(data_dir):
    run_id = runs.start_run("cpu-test", data_dir, "decode")
    csv = data_dir / "raw" / "cpu-test" / "decode.csv"
    csv.write_text(f"header\n{run_id},...\n")
    assert not runs.discard_run("cpu-test", data_dir, run_id, ["decode"])
    assert run_id in json.loads((data_dir / "raw" / "cpu-test" / "env.json").read_text())
    csv.unlink()
    assert runs.discard_run("cpu-test", data_dir, run_id, ["decode"])
    assert run_id not in json.loads((data_dir / "raw" / "cpu-test" / "env.json").read_text())


def test_a_run_stopped_by_sigterm_records_where_it_stopped_and_the_rows_it_left(data_dir):
    """SIGTERM (what bench/measure.sh's STEP_TIMEOUT sends) inside a run with a row written: the block stops with
    runs.Stopped (exit 143, as a killed process), the entry keeps `stopped` and the rows counted then, never
    gpu_state_after; a run stopped before any row is discarded as before; the handler is put back after."""
    import os
    import signal
    import time

    before = signal.getsignal(signal.SIGTERM)
    folder = data_dir / "raw" / "cpu-test"
    with pytest.raises(runs.Stopped) as stopped:
        with runs.recorded("cpu-test", data_dir, "decode", ["decode", "verify"]) as run_id:
            (folder / "decode.csv").write_text(f"header\n{run_id},0,a\n{run_id},0,b\nother-run,0,c\n")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)  # never reached to its end: the handler raises at the next bytecode
    assert stopped.value.code == 128 + 15 and stopped.value.signal_name == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before
    entry = json.loads((folder / "env.json").read_text())[run_id]
    assert entry["rows_written"] == {"decode": 2, "verify": 0}
    assert entry["stopped"]["by"] == "SIGTERM" and "gpu_state_after" not in entry
    assert set(entry["stopped"]) == {"by", "at", "gpu_state"}
    with pytest.raises(runs.Stopped):
        with runs.recorded("cpu-test", data_dir, "decode", ["decode"]) as empty_run:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
    assert empty_run not in json.loads((folder / "env.json").read_text())
    with pytest.raises(ZeroDivisionError):  # an error after rows: its type and message are the stop's cause
        with runs.recorded("cpu-test", data_dir, "decode", ["decode"]) as failed:
            with open(folder / "decode.csv", "a") as fh:
                fh.write(f"{failed},0,d\n")
            1 / 0
    entry = json.loads((folder / "env.json").read_text())[failed]
    assert entry["stopped"]["by"] == "ZeroDivisionError: division by zero" and entry["rows_written"] == {"decode": 1}



def test_a_session_stopped_before_its_first_row_is_not_counted_as_lost(tmp_path):
    """A sweep stopped by SIGTERM in its second session, before that session's first row: env.json keeps the session
    (`finished` false, `rows` 0), decode.csv has rows of the first only. That is whole, not a cut file; a session
    whose entry records rows that are not there still is (the check the stop must not blind)."""
    import pandas as pd

    from decodegap import validate

    csv = tmp_path / "decode.csv"
    frame = pd.DataFrame({"run_id": ["r1"] * 3, "session": [200] * 3})
    stopped = {"finished": False, "rows": 0, "stopped": {"by": "SIGTERM"}}
    env = {"r1": {"experiment": "decode", "sessions": {"200": {"finished": True, "rows": 3}, "201": stopped}}}
    validate.sessions_have_rows(tmp_path / "env.json", env, {csv: frame})  # no refusal
    env["r1"]["sessions"]["201"] = dict(stopped, rows=2)  # two rows written, then lost
    with pytest.raises(InputError, match=r"no row of session 201 of run r1"):
        validate.sessions_have_rows(tmp_path / "env.json", env, {csv: frame})
    env["r1"]["sessions"]["201"] = {"finished": True}  # an older entry without `rows`: counted as before
    with pytest.raises(InputError, match=r"no row of session 201 of run r1"):
        validate.sessions_have_rows(tmp_path / "env.json", env, {csv: frame})


REPEAT = """
import os, signal, sys, time
from decodegap.harness import runs
with runs.stopping_on_sigterm(grace_s=float(sys.argv[1])):
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    except runs.Stopped:  # the stop being recorded: `timeout` signals the process group too, so SIGTERM comes again
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.3)
        print("recorded", flush=True)
print("after", flush=True)
"""


def test_a_repeated_sigterm_while_the_stop_is_recorded_is_ignored_and_a_late_one_kills():
    """runs.stopping_on_sigterm: a second SIGTERM within the grace after the first is ignored, so the stop is recorded
    (until 2026-12-06 the first put the default back and a second killed the process there); one after the grace
    kills, as SIGTERM did before."""
    import subprocess
    import sys

    from decodegap import paths

    def run(grace_s):
        return subprocess.run([sys.executable, "-c", REPEAT, str(grace_s)], capture_output=True, text=True,
                              timeout=60, cwd=paths.REPO, env={**os.environ, "PYTHONPATH": str(paths.REPO / "lib")})

    within = run(30)
    assert within.returncode == 0 and within.stdout.split() == ["recorded", "after"], within.stderr
    late = run(0.1)
    assert late.returncode == -15 and late.stdout == "", late.stderr


def test_sweep_plan_refuses_misspelled_keys():
    good = dict(gpu="g", models=("llama-tiny",), contexts=(16,))
    for field, value, message in (("arms", ("eagr",), "unknown arm"), ("attn", "sdpa2", "unknown attention backend"),
                                  ("quant", "int3", "unknown quantisation path"), ("contexts", ("2k",), "not a positive"),
                                  ("contexts", (0,), "not a positive"), ("sessions", 0, "sessions takes a whole number"),
                                  ("models", (), "no model given")):
        with pytest.raises(InputError, match=message):
            sweep.SweepPlan(**{**good, field: value})
    assert sweep.SweepPlan(**good, quant="awq").quant == "awq"  # an alias is a key too


@pytest.mark.slow  # fresh processes of the command line
def test_check_on_a_missing_or_empty_data_folder_is_an_error(tmp_path):
    err = _one_line_error(cli("check", "--data-dir", str(tmp_path / "nonexistent"), cwd=tmp_path))
    assert "does not exist" in err
    (tmp_path / "d" / "specs").mkdir(parents=True)
    (tmp_path / "d" / "specs" / "gpus.csv").write_text("gpu\n")
    err = _one_line_error(cli("--data-dir", str(tmp_path / "d"), "check", cwd=tmp_path))
    assert "no raw CSV" in err


def test_help_lists_every_command_and_nothing_internal(tmp_path):
    out = cli("--help", cwd=tmp_path)
    assert out.returncode == 0
    for command in ("measure", "cuda-graphs-ab", "attention-backends", "quantisation", "closing-the-gap",
                    "where-the-thesis-ends", "bandwidth", "kernel-counts", "gpus", "check", "reproduce"):
        assert re.search(rf"^\s+{command}\s", out.stdout, re.M), command
    assert "_session" not in out.stdout and "SUPPRESS" not in out.stdout


# --- papermill parameters ---------------------------------------------------------------------------------

def _checked(**params) -> dict:
    namespace = dict(params)
    keys.check_parameters(namespace)
    return namespace


def test_parameters_are_checked_by_type_and_value():
    for params, message in (
            (dict(MEASURE="no"), "parameter MEASURE takes True or False"),
            (dict(CONVENTION="W_All"), "parameter CONVENTION takes one of 'W_all', 'W_streamed', got 'W_All'"),
            (dict(MODELS=["llama-3.1-8x"]), "unknown model 'llama-3.1-8x'"),
            (dict(CONTEXTS="2k"), "parameter CONTEXTS takes a list of context lengths"),
            (dict(CONTEXTS=[2048, -1]), "not a positive whole number"),
            (dict(ARMS=["eagr"]), "unknown arm 'eagr'"),
            (dict(SESSIONS=0), "parameter SESSIONS takes a whole number >= 1, got 0"),
            (dict(STEPS=2.5), "parameter STEPS takes a whole number"),
            (dict(DEVICE="gpu"), "parameter DEVICE takes 'cuda'"),
            (dict(QUANT_PATHS=["int3"]), "unknown quantisation path 'int3'"),
            (dict(TABLE_MODEL="gpt2"), "unknown model 'gpt2'"),
            (dict(DATA_DIR="/nonexistent/data"), "data folder /nonexistent/data does not exist")):
        with pytest.raises(InputError, match=re.escape(message)):
            _checked(**params)


def test_one_value_or_a_comma_string_becomes_a_list():
    assert _checked(MODELS="llama-3.1-8b")["MODELS"] == ["llama-3.1-8b"]  # not its characters
    assert _checked(MODELS="qwen2.5-7b, llama-3.1-8b")["MODELS"] == ["qwen2.5-7b", "llama-3.1-8b"]
    assert _checked(CONTEXTS=2048)["CONTEXTS"] == [2048]
    # the text of a list (`papermill -p MODELS '["a", "b"]'` passes the text) is read as that list
    assert _checked(MODELS='["qwen2.5-7b", "llama-3.1-8b"]')["MODELS"] == ["qwen2.5-7b", "llama-3.1-8b"]
    assert _checked(CONTEXTS=" [2048, 16384] ")["CONTEXTS"] == [2048, 16384]
    with pytest.raises(InputError, match=re.escape("unknown model 'llama-3.1-8x'")):  # the key, not the text
        _checked(MODELS='["llama-3.1-8x"]')
    with pytest.raises(InputError, match=re.escape("parameter MODELS: cannot read '[qwen2.5-7b]' as a list; "
                                                   "write -p MODELS a,b or -y 'MODELS: [a, b]'")):
        _checked(MODELS="[qwen2.5-7b]")
    with pytest.raises(InputError, match=re.escape("parameter CONTEXTS takes a list of context lengths")):
        _checked(CONTEXTS="[2048, '4k']")
    assert _checked(MEASURE=False, GPU=None, BACKENDS=None)["BACKENDS"] is None


def test_every_notebook_parameter_has_a_check():
    for nb in notebooks.notebook_paths():
        cells = json.loads(nb.read_text())["cells"]
        source = "".join(next(c for c in cells if "parameters" in c["metadata"].get("tags", []))["source"])
        names = re.findall(r"^([A-Z_][A-Z0-9_]*) =", source, re.M)
        missing = [n for n in names if n not in inputs.PARAMETERS]
        assert not missing, f"{nb.name}: add a check for {missing} to decodegap.inputs.PARAMETERS"
        code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        assert "keys.check_parameters(globals())" in code, nb.name


def test_a_notebook_shows_the_error_as_one_line():
    err = InputError("parameter X takes Y")
    assert err._render_traceback_() == ["InputError: parameter X takes Y"]


@pytest.mark.notebooks
def test_a_bad_papermill_parameter_stops_the_notebook_before_it_writes(tmp_path):
    import papermill

    figures = tmp_path / "figures"
    with pytest.raises(papermill.PapermillExecutionError) as err:
        notebooks.run(paths.NOTEBOOKS / "01_roofline.ipynb", dict(CONVENTION="W_All", FIGURES_DIR=str(figures)),
                      out_dir=tmp_path / "executed")
    assert err.value.ename == "InputError" and "parameter CONVENTION takes one of" in err.value.evalue
    assert err.value.traceback == [f"InputError: {err.value.evalue}"]  # the one line, no stack
    assert not figures.exists() or not any(figures.iterdir())


@pytest.mark.slow
def test_reproduce_checks_its_parameters_before_any_notebook_runs(tmp_path):
    before = _git_status("figures")
    err = _one_line_error(cli("reproduce", "-p", "MEASURE", "no", cwd=tmp_path))
    assert "parameter MEASURE takes True or False" in err
    err = _one_line_error(cli("reproduce", "-p", "CONTEXTS", "2k", cwd=tmp_path))
    assert "parameter CONTEXTS takes a list of context lengths" in err
    err = _one_line_error(cli("reproduce", "-p", "CONVENTON", "W_all", cwd=tmp_path))
    assert "no notebook takes parameter(s) ['CONVENTON']" in err
    assert _git_status("figures") == before


def test_each_notebook_gets_only_the_parameters_it_defines():
    assert notebooks.parameter_names(paths.NOTEBOOKS / "05_cost.ipynb") >= {"PROVIDER", "DATA_DIR", "MEASURE"}
    assert "CONVENTION" not in notebooks.parameter_names(paths.NOTEBOOKS / "05_cost.ipynb")
    assert "CONVENTION" in notebooks.parameter_names(paths.NOTEBOOKS / "01_roofline.ipynb")


def test_a_profile_that_fails_before_its_first_row_leaves_no_env_entry(data_dir, monkeypatch):
    from decodegap.harness import models

    def boom(*args, **kwargs):
        raise RuntimeError("model build failed")

    monkeypatch.setattr(models, "build_model", boom)
    with pytest.raises(RuntimeError, match="model build failed"):
        profile.record_kernels("cpu-test", ["llama-tiny"], [16], data=data_dir, device="cpu")
    assert json.loads((data_dir / "raw" / "cpu-test" / "env.json").read_text()) == {}


def test_quantisation_measurements_refuse_cpu_timings_as_a_gpus(data_dir):
    from decodegap.experiments import quantisation

    with pytest.raises(InputError, match="measures this machine's CPU"):
        quantisation.measure("h200", ["llama-tiny"], [16], ["int4-tinygemm"], ["eager"], 1, 1, 1, "cpu", data_dir)
    assert not (data_dir / "raw").exists()


def test_a_notebooks_figures_folder_is_checked_like_reproduces(data_dir, tmp_path):
    """papermill run directly: keys.check_parameters, a notebook's first call, refuses a FIGURES_DIR that is the
    data folder or inside it, as `reproduce --figures-dir` does (validate.own_figures_folder), and takes a folder of
    its own."""
    for bad, words in ((data_dir, "is the data folder"), (data_dir / "raw", "lies inside the data folder")):
        with pytest.raises(InputError, match=f"figures folder {re.escape(str(bad))} {words}"):
            keys.check_parameters({"DATA_DIR": str(data_dir), "FIGURES_DIR": str(bad)})
    keys.check_parameters({"DATA_DIR": str(data_dir), "FIGURES_DIR": str(tmp_path / "figures")})
    assert not (tmp_path / "figures").exists() and not (data_dir / "raw").exists()  # nothing made
