"""Damaged data never rewrites a figure: `reproduce` over a damaged copy of data/ refuses in one line naming the file
and line, before any notebook runs, and leaves every figures folder as it was; a notebook that fails, or Ctrl-C,
leaves nothing partial behind (issue 30, items 1-4)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from decodegap import cli, notebooks, paths, validate

SMALL_LINES = 3000  # breakdown.csv cut to its first lines (still whole rows): the copy stays quick to check


def _tree_digest(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()} if folder.exists() else {}


@pytest.fixture(scope="session")  # once per worker, however xdist interleaves the modules
def small_data(tmp_path_factory) -> Path:
    """A whole copy of data/, its largest CSV cut to its first rows (every row still whole and valid), with every row
    of the runs whose env.json entry records how many rows they wrote there (`rows_written`: a run missing them would
    be refused as a file that lost rows)."""
    out = tmp_path_factory.mktemp("small") / "data"
    shutil.copytree(paths.DATA, out)
    big = out / "raw" / "h200" / "breakdown.csv"
    counted = {run for run, entry in json.loads((big.parent / "env.json").read_text()).items()
               if (entry.get("rows_written") or {}).get("breakdown")}
    lines = big.read_text().splitlines(keepends=True)
    big.write_text("".join(lines[:SMALL_LINES] + [ln for ln in lines[SMALL_LINES:] if ln.split(",", 1)[0] in counted]))
    return out


@pytest.fixture
def copy(small_data, tmp_path) -> Path:
    out = tmp_path / "data"
    shutil.copytree(small_data, out)
    return out


@pytest.fixture
def no_notebook(monkeypatch):
    """Any notebook starting is a failure: the refusal comes before."""
    def refuse(*a, **k):
        raise AssertionError("a notebook started although the inputs are damaged")
    monkeypatch.setattr(notebooks, "run_all", refuse)


def _cut_last_line(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[: len(text) - 7])


def _unlink_on_every_gpu(path: Path) -> None:
    """`path`'s file deleted from every GPU's folder beside it (raw/<gpu>/<name>): a GPU measured in part may lack a
    file, so only a file no GPU has is missing."""
    for other in path.parent.parent.glob(f"*/{path.name}"):
        other.unlink()


def _keep_first_half(path: Path) -> None:
    """The file cut at the end of its middle line: every line left is whole, the later runs' rows are gone."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[: len(lines) // 2]))


def _drop_a_session(path: Path) -> None:
    """The rows of one finished session (the second recorded session of the file's last run) deleted."""
    env = json.loads((path.parent / "env.json").read_text())
    lines = path.read_text().splitlines(keepends=True)
    run = lines[-1].split(",", 1)[0]
    session = sorted(env[run]["sessions"], key=int)[1]
    path.write_text("".join(line for line in lines if not line.startswith(f"{run},{session},")))


def _another_device(path: Path) -> None:
    env = json.loads(path.read_text())
    env[sorted(env)[0]]["device_name"] = "NVIDIA H100 80GB HBM3"
    path.write_text(json.dumps(env, indent=1, sort_keys=True) + "\n")


def _header_only(path: Path) -> None:
    path.write_text(path.read_text().splitlines(keepends=True)[0])


def _field(column: str, value: str):
    """A damage: `column` of the file's first row set to `value` (the csv module's quoting kept)."""
    def damage(path: Path) -> None:
        import csv
        import io

        rows = list(csv.reader(io.StringIO(path.read_text())))
        rows[1][rows[0].index(column)] = value
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(rows)
        path.write_text(out.getvalue())
    return damage


DAMAGE = {
    "decode.csv deleted": ("raw/h200/decode.csv", _unlink_on_every_gpu, r"decode\.csv: missing, though"),
    "ab.csv deleted": ("raw/h200/ab.csv", _unlink_on_every_gpu, r"ab\.csv: missing, though"),
    "decode.csv deleted on one GPU": ("raw/h200/decode.csv", lambda p: p.unlink(),
                                      r"h200/decode\.csv: missing, though .*env\.json records \d+ run\(s\) of "
                                      r"experiment 'decode'"),
    "ab.csv deleted on one GPU": ("raw/h200/ab.csv", lambda p: p.unlink(),
                                  r"h200/ab\.csv: missing, though .*env\.json records \d+ run\(s\) of experiment 'ab'"),
    "attention.csv deleted": ("raw/h200/attention.csv", lambda p: p.unlink(), r"attention\.csv: missing"),
    "bandwidth.csv empty": ("raw/h200/bandwidth.csv", lambda p: p.write_text(""), r"bandwidth\.csv:1: empty file"),
    "bandwidth.csv header only": ("raw/h200/bandwidth.csv", _header_only, r"bandwidth\.csv:2: header only"),
    "ab.csv header only": ("raw/h200/ab.csv", _header_only, r"ab\.csv:2: header only"),
    "decode.csv truncated": ("raw/h200/decode.csv", _cut_last_line, r"decode\.csv:\d+: the last line is incomplete"),
    "env.json {}": ("raw/h200/env.json", lambda p: p.write_text("{}"), r"\.csv:2: run \S+ has no entry in .*env\.json"),
    "env.json []": ("raw/h200/env.json", lambda p: p.write_text("[]"), r"env\.json:1: an object"),
    "env.json invalid": ("raw/h200/env.json", lambda p: p.write_text('{\n  "x": \n'), r"env\.json:3: not valid JSON"),
    "env.json deleted": ("raw/h200/env.json", lambda p: p.unlink(), r"env\.json: missing"),
    "gpus.csv header only": ("specs/gpus.csv", _header_only, r"gpus\.csv:2: header only"),
    "kernels.csv deleted on one GPU": ("raw/h200/kernels.csv", lambda p: p.unlink(),
                                       r"h200/kernels\.csv: missing, though .* run to its end"),
    "peers.csv deleted": ("raw/h200/peers.csv", lambda p: p.unlink(), r"h200/peers\.csv: missing, though"),
    "decode.csv cut at a line's end": ("raw/h200/decode.csv", _keep_first_half,
                                       r"h200/decode\.csv: no row of run \S+, though .*env\.json records"),
    "a session's rows deleted": ("raw/h100-sxm/ab.csv", _drop_a_session,
                                 r"h100-sxm/ab\.csv: no row of session \d+ of run \S+, though"),
    "a folder of no GPU key": ("raw/h100-sxm", lambda p: shutil.copytree(p, p.parent / "foo"),
                               r"raw/foo: a folder of .* unknown GPU key 'foo'"),
    "another GPU's folder copied in": ("raw/h100-sxm", lambda p: shutil.copytree(p, p.parent / "l4"),
                                       r"raw/l4/\w+\.csv:2: a row of GPU 'h100-sxm' in .*the folder of 'l4'"),
    "a GPU key in another case": ("raw/h200/decode.csv", lambda p: p.write_text(p.read_text().replace(",h200,", ",H200,")),
                                  r"h200/decode\.csv:2: a row of GPU 'H200'"),
    "a run on another device": ("raw/h200/env.json", _another_device,
                                r"h200/env\.json:\d+: run \S+ ran on 'NVIDIA H100 80GB HBM3', which is not 'h200'"),
    "a model not JSON": ("models/qwen2.5-7b.json", lambda p: p.write_text("{"), r"qwen2\.5-7b\.json:1: not valid JSON"),
    "a bandwidth with its unit": ("specs/gpus.csv", _field("bandwidth_gbps", "3.35 TB/s"),
                                  r"gpus\.csv:2: column bandwidth_gbps holds '3\.35 TB/s', not a positive number"),
    "a price not a number": ("specs/prices.csv", _field("usd_per_hour", "abc"),
                             r"prices\.csv:2: column usd_per_hour holds 'abc', not a positive number"),
    "a published value not a number": ("published/paper.csv", _field("value", "~5"),
                                       r"paper\.csv:2: column value holds '~5', not a number"),
}


FAST_CASES = ("env.json invalid", "env.json []")
"""The damage cases the fast tier runs (each other case copies and reads the data folder for seconds: slow)."""


def _cases(names):
    return [pytest.param(c, marks=() if c in FAST_CASES else pytest.mark.slow) for c in names]


@pytest.mark.parametrize("case", _cases(sorted(DAMAGE)))
def test_damaged_data_is_refused_before_anything_is_written(case, copy, tmp_path, no_notebook, capsys):
    rel, damage, message = DAMAGE[case]
    damage(copy / rel)
    figures = tmp_path / "mine"
    figures.mkdir()
    (figures / "01_step_time_vs_context.png").write_bytes(b"the committed figure")
    before, repo_before = _tree_digest(figures), _tree_digest(paths.FIGURES)
    assert cli.main(["reproduce", "--data-dir", str(copy), "--figures-dir", str(figures)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("decodegap: "), err
    import re

    assert re.search(message, err), err
    assert str(copy) in err  # the file named by its path
    assert _tree_digest(figures) == before and _tree_digest(paths.FIGURES) == repo_before
    assert not (copy.parent / "figures").exists()  # nor the default folder beside the data


@pytest.mark.parametrize("case", _cases(["bandwidth.csv header only", "env.json {}", "env.json []",
                                            "decode.csv truncated", "env.json deleted", "a GPU key in another case",
                                            "a folder of no GPU key", "another GPU's folder copied in",
                                            "decode.csv cut at a line's end", "kernels.csv deleted on one GPU",
                                            "a run on another device", "a model not JSON", "a bandwidth with its unit",
                                            "a price not a number", "a published value not a number"]))
def test_check_reports_the_same_damage(case, copy, capsys):
    rel, damage, message = DAMAGE[case]
    damage(copy / rel)
    assert cli.main(["check", "--data-dir", str(copy), "--no-provenance"]) == 1
    import re

    assert re.search(message, capsys.readouterr().err)


@pytest.mark.slow  # validates every shipped file
def test_the_shipped_data_is_whole():
    assert validate.file_problems(paths.DATA) == []


def test_data_dir_figures_go_beside_it(copy):
    assert validate.figures_for(paths.DATA) == paths.FIGURES
    assert validate.figures_for(copy) == copy.parent / "figures"
    assert validate.figures_for(copy, copy.parent / "x") == (copy.parent / "x").resolve()
    inside = paths.REPO / "mydata"  # a folder in the repository: never its committed figures/
    assert validate.figures_for(inside) == paths.REPO / "mydata-figures"


def _another_data_folder(copy: Path) -> Path:
    """A second data folder beside `copy` (its specs/gpus.csv only), as another copy of the repository's data/."""
    other = copy.parent / "other-data"
    (other / "specs").mkdir(parents=True)
    shutil.copy(copy / "specs" / "gpus.csv", other / "specs" / "gpus.csv")
    (other / "raw" / "h200").mkdir(parents=True)
    return other


@pytest.mark.parametrize("where, words", [
    (lambda copy: copy, "is the data folder;"), (lambda copy: copy / "x", "lies inside the data folder"),
    (lambda copy: copy / "raw", "lies inside the data folder"), (lambda copy: copy.parent, "holds the data folder"),
    (lambda copy: paths.REPO, "is the repository's root"), (lambda copy: paths.REPO / "lib" / "x", "repository's lib/"),
    (lambda copy: paths.REPO / "data", "repository's data/"),
    (lambda copy: _another_data_folder(copy), "is another data folder;"),
    (lambda copy: _another_data_folder(copy) / "raw" / "h200", "lies inside another data folder")])
def test_a_figures_folder_that_is_not_one_of_its_own_is_refused_before_anything_runs(copy, capsys, where, words):
    """A named figures folder must be a folder of its own: `reproduce --figures-dir data` wrote notebook 01's tables
    and figures among the raw rows (2026-12-07). The data folder, a folder inside it or holding it, the repository's
    root and its own folders, and another data folder or one inside it (another copy's), are refused in one line
    before any notebook runs; nothing is written there."""
    target = where(copy)
    before = sorted(p.name for p in target.iterdir()) if target.exists() else None
    assert cli.main(["reproduce", "--data-dir", str(copy), "--figures-dir", str(target), "--only", "05_cost"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"decodegap: figures folder {target.resolve()} ") and words in err and err.count("\n") == 1
    assert (sorted(p.name for p in target.iterdir()) if target.exists() else None) == before


def _fake_run_all(fail=None, figure="01_step_time_vs_context.png", content=b"half done"):
    """A run_all that writes one figure and one executed copy, then fails with `fail` (None: succeeds)."""
    def run_all(parameters, only=None, out_dir=None):
        out = Path(parameters["FIGURES_DIR"])
        out.mkdir(parents=True)
        (out / figure).write_bytes(content)
        Path(out_dir).mkdir(parents=True)
        (Path(out_dir) / "01_roofline.ipynb").write_text("{}")
        if fail is not None:
            raise fail
    return run_all


@pytest.mark.parametrize("fail", [KeyboardInterrupt(), RuntimeError("a cell failed")])
def test_a_stopped_run_moves_nothing_into_place(fail, tmp_path, monkeypatch):
    figures, executed = tmp_path / "figures", tmp_path / "executed"
    figures.mkdir()
    (figures / "01_step_time_vs_context.png").write_bytes(b"committed")
    monkeypatch.setattr(notebooks, "run_all", _fake_run_all(fail))
    with pytest.raises(type(fail)):
        notebooks.reproduce({}, figures, executed=executed)
    assert (figures / "01_step_time_vs_context.png").read_bytes() == b"committed"
    assert not executed.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["figures"]  # the temporary folder is gone


def test_ctrl_c_is_one_line(copy, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(notebooks, "run_all", _fake_run_all(KeyboardInterrupt()))
    figures = tmp_path / "mine"
    assert cli.main(["reproduce", "--data-dir", str(copy), "--figures-dir", str(figures)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "interrupted" in err[0] and "Traceback" not in err[0]
    assert not any(figures.iterdir()) if figures.exists() else True


def test_a_whole_run_moves_everything_into_place(tmp_path, monkeypatch):
    figures, executed = tmp_path / "figures", tmp_path / "executed"
    executed.mkdir()
    (executed / "01_roofline.failed.ipynb").write_text("{}")
    monkeypatch.setattr(notebooks, "run_all", _fake_run_all(figure="a.png", content=b"new"))
    assert notebooks.reproduce({}, figures, executed=executed) == [figures / "a.png"]
    assert (figures / "a.png").read_bytes() == b"new"
    assert sorted(p.name for p in executed.iterdir()) == ["01_roofline.ipynb"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["executed", "figures"]


@pytest.mark.parametrize("argv, message", [
    (["-p", "GPU", "H200"], "-p GPU names the GPU to measure; it takes --measure"),
    (["--gpu", "h200"], "--gpu names the GPU to measure; it takes --measure"),
    (["--measure", "--gpu", "H200"], "did you mean 'h200'?"),
    (["--measure", "--gpu", "h200 "], "did you mean 'h200'?"),
    (["-p", "LADDER_GPU", "H200"], "did you mean 'h200'?"),
    (["-p", "CONTEXTS", "100000000"], "beyond mistral-7b-v0.3's maximum of 32,768 tokens"),
    (["-p", "CONTEXTS", "2048,2k"], "parameter CONTEXTS takes a list of context lengths"),
])
def test_parameters_are_refused_before_any_notebook(argv, message, no_notebook, capsys):
    assert cli.main(["reproduce", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def test_lists_as_users_type_them_and_repeats_dropped(capsys):
    from decodegap.harness import keys

    params = {"CONTEXTS": "2048,16384,2048", "PRICE_RATIOS": "3,4.5", "MODELS": "qwen2.5-7b,llama-3.1-8b"}
    keys.check_parameters(params)
    assert params["CONTEXTS"] == [2048, 16384] and params["PRICE_RATIOS"] == [3, 4.5]
    assert "given more than once" in capsys.readouterr().out


def test_model_keys_are_checked_against_the_chosen_folder(copy, no_notebook, capsys):
    (copy / "models" / "qwen2.5-7b.json").rename(copy / "models" / "other.json.bak")
    assert cli.main(["reproduce", "--data-dir", str(copy), "-p", "MODELS", "qwen2.5-7b"]) == 2
    assert str(copy / "models") in capsys.readouterr().err


def test_measuring_commands_bound_and_deduplicate_contexts(capsys):
    assert cli.main(["measure", "--gpu", "h200", "--contexts", "100000000"]) == 2
    assert "maximum" in capsys.readouterr().err


@pytest.mark.notebooks
def test_real_ctrl_c_during_reproduce(copy, tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while a notebook runs: exit 130, one line
    on stderr, no traceback, and no figure or executed copy anywhere."""
    import os
    import signal
    import subprocess
    import sys
    import time

    figures, executed_before = tmp_path / "mine", _tree_digest(paths.EXECUTED)
    # SIGINT at its default in the child, as in a terminal's foreground job: a test run started in the background of
    # a non-interactive shell inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler at all
    proc = subprocess.Popen([sys.executable, "-m", "decodegap", "reproduce", "--data-dir", str(copy), "--figures-dir",
                             str(figures)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for line in proc.stdout:  # notebook 01 done and staged, notebook 02 running: stop it there
        if line.startswith("running 02_"):
            break
    # A SIGINT that lands while the notebook's kernel is being started can be swallowed there (seen on a loaded
    # machine): press Ctrl-C again, as a user would, until the process stops.
    for _ in range(20):
        time.sleep(2)
        if proc.poll() is not None:
            break
        os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert err.strip().splitlines() == ["decodegap: interrupted; nothing was moved into place (figures and executed "
                                        "notebooks as before)"], err
    assert not figures.exists() and not list(tmp_path.glob(".decodegap-reproduce-*"))
    assert _tree_digest(paths.EXECUTED) == executed_before


def test_check_env_reads_env_json_once_and_still_names_the_line(tmp_path, monkeypatch):
    """validate.check_env reads the file once (it parsed it, read it again for the line numbers and had
    hardware.read_env read it a third time); a defect still names its line."""
    import json
    from pathlib import Path

    from decodegap import validate

    env = tmp_path / "env.json"
    env.write_text(json.dumps({"20261202T170333-a665bb": {"git_commit": "53a9f22"}}, indent=1))
    reads = []
    original = Path.read_text

    def counted(self, *args, **kwargs):
        reads.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)
    assert validate.check_env(env) == {"20261202T170333-a665bb": {"git_commit": "53a9f22"}}
    assert reads.count(env) == 1
    env.write_text('{\n "20261202T170333-a665bb": {"git_commit": "53a9f22"},\n "bad-id": {"git_commit": "x"}\n}')
    with pytest.raises(validate.InputError, match=r"env\.json:3: .*'bad-id' is no run id"):
        validate.check_env(env)


def test_a_file_no_gpu_has_is_refused_for_the_notebook_that_reads_it(tmp_path, monkeypatch):
    """With every file whole (the file checks stubbed), a notebook whose rows no GPU folder holds is refused by name:
    a GPU measured in part may lack a file, the data folder may not lack it on every GPU."""
    data = tmp_path / "data"
    (data / "raw" / "h200").mkdir(parents=True)
    shutil.copytree(paths.DATA / "specs", data / "specs")  # what makes a folder a data folder
    (data / "raw" / "h200" / "bandwidth.csv").write_text("")  # a GPU with another file only
    monkeypatch.setattr(validate, "_file_checks", lambda folder: iter(()))
    with pytest.raises(validate.InputError, match=r"raw/<gpu>/ab\.csv: missing on every GPU, and notebook "
                                                  r"02_cuda_graphs_ab reads its rows"):
        validate.data_whole(data, notebooks=["02_cuda_graphs_ab"])
    assert validate.data_whole(data, notebooks=[]) == data.resolve()  # no notebook named: nothing it reads


def test_a_run_killed_before_its_first_row_leaves_an_entry_that_refuses_nothing(copy, capsys):
    """An env.json entry of an experiment whose CSV the folder lacks is refused only where that run left rows in
    another CSV (a deleted file) or ran to its end (its entry has gpu_state_after): an entry alone, of a run killed
    before it wrote a row, is no damage."""
    folder = copy / "raw" / "h100-sxm"
    (folder / "attention.csv").unlink()  # as measured in part, before its attention runs
    env = json.loads((folder / "env.json").read_text())
    env = {run: entry for run, entry in env.items() if entry.get("experiment") != "attention"}
    env["20260101T000000-abcdef"] = {"experiment": "attention", "git_commit": "x"}
    (folder / "env.json").write_text(json.dumps(env))
    assert cli.main(["check", "--data-dir", str(copy), "--no-provenance"]) == 0
    ended = dict(env, **{"20260101T000000-abcdef": {"experiment": "attention", "git_commit": "x", "gpu_state_after": {}}})
    (folder / "env.json").write_text(json.dumps(ended))  # the same run, ended: it wrote rows, which are gone
    capsys.readouterr()
    assert cli.main(["check", "--data-dir", str(copy), "--no-provenance"]) == 1
    assert re.search(r"h100-sxm/attention\.csv: missing, though .*run 20260101T000000-abcdef run to its end",
                     capsys.readouterr().err)
    (folder / "env.json").write_text(json.dumps(env))
    verify = (folder / "verify.csv").read_text().splitlines(keepends=True)
    run = verify[1].split(",", 1)[0]
    (folder / "verify.csv").write_text("".join(verify) + verify[1].replace(run, "20260101T000000-abcdef", 1))
    capsys.readouterr()
    assert cli.main(["check", "--data-dir", str(copy), "--no-provenance"]) == 1
    assert re.search(r"h100-sxm/attention\.csv: missing, though .*run 20260101T000000-abcdef with rows in "
                     r"verify\.csv", capsys.readouterr().err)


@pytest.mark.slow  # copies and reads the data folder
def test_a_source_digest_not_its_commits_is_refused_by_replay_as_by_check(copy, tmp_path, no_notebook, capsys):
    """check has reported it as an error; reproduce now refuses it too, before anything is written."""
    from decodegap import hardware

    env_path = copy / "raw" / "h100-sxm" / "env.json"
    env = json.loads(env_path.read_text())
    held = hardware.digests_against_commits({run: e for run, e in env.items()})
    if not held["matched"]:
        pytest.skip("this clone lacks the commits the runs name (a shallow clone): no digest can be held")
    run = held["matched"][0]
    env[run]["source_sha256"] = "0" * 64
    env_path.write_text(json.dumps(env, indent=1, sort_keys=True) + "\n")
    figures = tmp_path / "mine"
    assert cli.main(["reproduce", "--data-dir", str(copy), "--figures-dir", str(figures)]) == 2
    err = capsys.readouterr().err
    assert f"h100-sxm/{run}: env.json names commit" in err and "records source_sha256 000000000000" in err
    assert not figures.exists()
    assert cli.main(["check", "--data-dir", str(copy)]) == 1
    assert "records source_sha256 000000000000" in capsys.readouterr().err


def _run_folder(copy: Path, tmp_path: Path, gpu: str, name: str, new_id: str) -> Path:
    """A data/raw/<name> folder as another machine's measure.sh leaves it: one bandwidth run of `gpu`'s, renamed
    `new_id` (a run this checkout lacks), with its env.json entry."""
    src = copy / "raw" / gpu
    env = json.loads((src / "env.json").read_text())
    lines = (src / "bandwidth.csv").read_text().splitlines(keepends=True)
    run = lines[1].split(",", 1)[0]
    out = tmp_path / "theirs" / new_id / name
    out.mkdir(parents=True)
    (out / "bandwidth.csv").write_text(lines[0] + "".join(x.replace(run, new_id) for x in lines[1:] if x.startswith(run)))
    (out / "env.json").write_text(json.dumps({new_id: env[run]}))
    return out


@pytest.mark.slow  # copies and reads the data folder
def test_merge_runs_checks_the_merged_folders_whole_and_writes_all_or_nothing(copy, tmp_path, capsys):
    """Another GPU's run in a folder named h200 is refused (its rows and its device are the H100's); a good source
    beside a cut tarball merges nothing; a good source alone merges its run, and the result passes `check`."""
    import tarfile

    before = _tree_digest(copy / "raw")
    foreign = _run_folder(copy, tmp_path, "h100-sxm", "h200", "20270101T000000-aaaaaa")
    assert cli.main(["merge-runs", str(foreign), "--data-dir", str(copy)]) == 2
    err = capsys.readouterr().err
    assert "a row of GPU 'h100-sxm' in" in err and str(copy / "raw" / "h200") in err and "nothing merged" in err
    assert f"merging {foreign} would leave this" in err  # the source named
    assert "/tmp" not in err.replace(str(tmp_path), "").replace(str(copy), "")  # no staging path named
    good = _run_folder(copy, tmp_path, "h100-sxm", "h100-sxm", "20270101T000001-bbbbbb")
    tgz = tmp_path / "raw-h100-sxm.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(good, arcname="h100-sxm")
    cut = tmp_path / "cut.tgz"
    cut.write_bytes(tgz.read_bytes()[: len(tgz.read_bytes()) // 2])
    assert cli.main(["merge-runs", str(good), str(cut), "--data-dir", str(copy)]) == 2
    assert "cannot be read to its end" in capsys.readouterr().err
    assert _tree_digest(copy / "raw") == before  # neither refusal wrote anything
    assert not (copy / "raw" / "H100-SXM").exists()
    assert cli.main(["merge-runs", str(tgz), "--data-dir", str(copy)]) == 0
    env = json.loads((copy / "raw" / "h100-sxm" / "env.json").read_text())
    assert "20270101T000001-bbbbbb" in env
    assert (copy / "raw" / "h100-sxm" / "bandwidth.csv").read_text().count("20270101T000001-bbbbbb") == 20
    assert validate.file_problems(copy) == []


def test_a_run_whose_rows_written_names_another_file_owes_no_file_of_its_own(copy, capsys):
    """A run that ran to its end owes its experiment's own CSV only where its rows_written names that file with rows:
    a quant_layers run writes its checks to verify.csv alone (rows_written {'verify': n}), and its merge must pass;
    the same entry claiming rows in quant_layers.csv is refused, that file being missing."""
    folder = copy / "raw" / "h100-sxm"
    assert not (folder / "quant_layers.csv").exists()
    verify = (folder / "verify.csv").read_text().splitlines(keepends=True)
    run = verify[1].split(",", 1)[0]
    (folder / "verify.csv").write_text("".join(verify) + verify[1].replace(run, "20260101T000000-abcdef", 1))
    env = json.loads((folder / "env.json").read_text())
    entry = {"experiment": "quant_layers", "git_commit": "x", "gpu_state_after": {}, "rows_written": {"verify": 1}}
    (folder / "env.json").write_text(json.dumps(dict(env, **{"20260101T000000-abcdef": entry})))
    assert cli.main(["check", "--data-dir", str(copy), "--no-provenance"]) == 0
    entry["rows_written"] = {"verify": 1, "quant_layers": 1}
    (folder / "env.json").write_text(json.dumps(dict(env, **{"20260101T000000-abcdef": entry})))
    capsys.readouterr()
    assert cli.main(["check", "--data-dir", str(copy), "--no-provenance"]) == 1
    assert re.search(r"h100-sxm/quant_layers\.csv: missing, though .*run 20260101T000000-abcdef run to its end",
                     capsys.readouterr().err)


@pytest.mark.parametrize("rel, column, field, refused_as", [
    ("specs/gpus.csv", "bandwidth_gbps", "", "positive number"),  # a bandwidth in every row
    ("specs/gpus.csv", "bandwidth_gbps", "0", "positive number"),
    ("specs/gpus.csv", "bandwidth_gbps", "nan", "positive number"),
    ("specs/gpus.csv", "bandwidth_gbps", "4800", None),
    ("specs/prices.csv", "usd_per_hour", "", None),  # no source found: unpriced
    ("specs/prices.csv", "usd_per_hour", "-1.5", "positive number"),
    ("specs/prices.csv", "usd_per_hour", "0.80/hr", "positive number"),
    ("published/paper.csv", "value", "", None),
    ("published/paper.csv", "value", "-3.5", None),  # any number: a published difference may be negative
    ("published/paper.csv", "value", "5%", "number")])
def test_a_registry_number_column_holds_what_its_rule_says(tmp_path, rel, column, field, refused_as):
    """validate.NUMBER_COLUMNS, read by _csv_lines on a two-line file: positive or any number, empty or not."""
    columns = validate.REGISTRY_COLUMNS[rel]
    path = tmp_path / "registry.csv"
    row = ["1" for _ in columns]
    row[columns.index(column)] = field
    path.write_text(",".join(columns) + "\n" + ",".join(row) + "\n")
    if refused_as is None:
        validate._csv_lines(path, columns, validate.NUMBER_COLUMNS[rel])
    else:
        with pytest.raises(validate.InputError, match=re.escape(f"registry.csv:2: column {column} holds {field!r}, not a "
                                                       f"{refused_as}; fix that field")):
            validate._csv_lines(path, columns, validate.NUMBER_COLUMNS[rel])
