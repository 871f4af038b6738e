"""bench/ on a CPU: the entry point's steps and refusals, its README, the Marlin patch and the diagnostics' rows."""

from __future__ import annotations

import csv
import re
import subprocess
import sys

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
    assert "unknown step rooflin" in out.stdout and "roofline" in out.stdout
    assert not (tmp_path / "out").exists()


def test_measure_sh_needs_a_gpu_key_and_an_outdir():
    out = subprocess.run(["bash", "bench/measure.sh"], cwd=paths.REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "usage: bench/measure.sh GPU OUTDIR" in out.stderr


def test_bench_readme_has_a_row_for_every_step_and_names_every_file():
    readme = (BENCH / "README.md").read_text()
    steps = _steps_of_measure_sh()
    assert steps == ["env", "tests", "roofline", "ab", "attention", "quant", "gemv", "ladder"]
    rows = re.findall(r"^\| `([a-z]+)` \| (\d\d|all) \|", readme, re.M)
    assert [step for step, _ in rows] == steps
    assert dict(rows) == {"env": "all", "tests": "all", "roofline": "01", "ab": "02", "attention": "03",
                          "quant": "04", "gemv": "04", "ladder": "06"}
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
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(sys, "argv", ["bench/some_diag.py", "8192"])
    import diagnostics

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
