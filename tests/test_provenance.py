"""Provenance that cannot be edited by hand: env.json entries hold only what code writes, corrections are reviewed
statements beside them, `check` reads both and names a bad file, and data/README.md's facts about runs hold
against env.json."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from decodegap import hardware, paths
from decodegap.claims import run_provenance
from decodegap.harness import runs

ENV = paths.DATA / "raw" / "h200" / "env.json"
README = paths.DATA / "README.md"


def test_every_shipped_entry_holds_only_fields_code_writes():
    for path in sorted((paths.DATA / "raw").glob("*/env.json")):
        env = hardware.read_env(path)
        assert env, path
        for run_id, entry in env.items():
            assert set(entry) <= runs.ENV_FIELDS, (path, run_id, set(entry) - runs.ENV_FIELDS)


def test_a_field_no_code_writes_is_refused_and_named(tmp_path):
    env = json.loads(ENV.read_text())
    run_id = sorted(env)[0]
    env[run_id]["git_commit_as_recorded"] = "typed by hand"
    bad = tmp_path / "env.json"
    bad.write_text(json.dumps(env))
    with pytest.raises(hardware.EnvError, match=rf"{re.escape(str(bad))}: run {run_id} holds field\(s\) "
                                                r"\['git_commit_as_recorded'\]"):
        hardware.read_env(bad)
    with pytest.raises(ValueError, match="no field"):
        runs.update_env("cpu-test", tmp_path, run_id, git_commit_as_recorded="x")


def test_the_corrections_are_applied_by_the_reader_and_hold_the_recorded_value(tmp_path):
    loaded = hardware.load_env(paths.DATA)
    raw = hardware.load_env(paths.DATA, corrected=False)
    fixes = json.loads((ENV.parent / "corrections.json").read_text())
    assert sorted(fixes) == ["20261201T154840-655da7", "20261201T154951-69346c", "20261201T155139-3b685d",
                             "20261201T155456-f1efcd"]
    for run_id, items in fixes.items():
        (fix,) = items
        assert raw[("h200", run_id)]["git_commit"] == fix["recorded"] == "367cbbc8a7e2885d7d79f2851762a01beffb65d1"
        assert loaded[("h200", run_id)]["git_commit"] == fix["corrected"].strip()
        assert hardware.provenance_of(loaded[("h200", run_id)])["corrected"] == ["git_commit"]
    data = tmp_path / "data"
    shutil.copytree(ENV.parent, data / "raw" / "h200", ignore=shutil.ignore_patterns("*.csv"))
    fixes["20261201T154840-655da7"][0]["recorded"] = "something else"  # a correction of a value never recorded
    (data / "raw" / "h200" / "corrections.json").write_text(json.dumps(fixes))
    with pytest.raises(hardware.EnvError, match="corrections.json: run 20261201T154840-655da7"):
        hardware.load_env(data)


def test_check_names_a_broken_env_json(data_dir, tmp_path, capsys):
    from decodegap import cli, records

    folder = data_dir / "raw" / "cpu-test"
    folder.mkdir(parents=True)
    records.append_rows(folder / "bandwidth.csv", records.BANDWIDTH, [dict(
        run_id="20260101T000000-abcdef", gpu="cpu-test", method="d2d_copy", bytes_moved=2, rep=0, time_ms=1.0,
        bandwidth_gbps=1.0, status="ok", reason="")])
    (folder / "env.json").write_text(json.dumps({"20260101T000000-abcdef": {"git_commit": "x", "typed": 1}}))
    assert cli.main(["--data-dir", str(data_dir), "check", "--no-provenance"]) == 1
    assert f"{folder / 'env.json'}:1: run 20260101T000000-abcdef holds field(s) ['typed']" in capsys.readouterr().err
    (folder / "env.json").write_text(json.dumps({"20260101T000000-abcdef": {"git_commit": "x"}}))
    assert cli.main(["--data-dir", str(data_dir), "check", "--no-provenance"]) == 0


@pytest.mark.slow  # a finding over every shipped run
def test_check_reports_the_dirty_and_digestless_runs_behind_each_experiment():
    reports = {r["reader"]: r for r in run_provenance.provenance_report(paths.DATA)}
    ab = reports["02_cuda_graphs_ab"]
    # the headline is the clean, digest-recording run of 2026-12-02; the grid is still the dirty 73a049d run
    assert [run for run, _, _ in ab["dirty"]] == ["20261129T162458-9b10ed"] and ab["dirty_no_diff"] == 1
    assert [run for run, _, _ in ab["no_digest"]] == ["20261129T162458-9b10ed"]
    # the four runs corrections.json corrects (2026-12-01 15:48-15:54) timed quantised cells before in-run layer
    # checks: drawn unchecked under the current rule, counted by no reader, so none lists them as behind its cells
    fixed = set(json.loads((paths.DATA / "raw" / "h200" / "corrections.json").read_text()))
    assert len(fixed) == 4 and not any(run in fixed for r in reports.values() for run, _, _ in r["corrected"])
    assert reports["06_closing_the_gap"]["unchecked"] > 0
    # notebook 07 counts its own sweeps' cells per batch: llama-3.1-8b's batch axis alone is 7 batches x 4 timed arms
    # (eager, graph, lean_attn_graph, lean_graph at every batch; the fused lever at batch 1) plus the compiled cells
    scope = reports["07_where_the_thesis_ends (its own sweeps)"]
    assert scope["cells"] >= 7 * 4 + 1 + 6 and not scope["dirty"] and not scope["no_digest"]
    lines = run_provenance.provenance_lines(list(reports.values()))
    # the H200's grid and headline runs, 36 cells; the H100's newest headline run (its whole sweep of 2026-12-05, run
    # a34f81) adds 3 models x eager and graph, its grid run at ctx 4096-16384 3 models x 3 contexts x eager, graph and
    # compile, its grid run at ctx 2048 (d876e1) the compile arm's 3 cells (eager and graph there are the headline's):
    # 36 + 6 + 27 + 3 = 72 cells from 2 + 3 runs (the H100's earlier headline runs superseded by the newest)
    h100 = (paths.DATA / "raw" / "h100-sxm" / "ab.csv").exists()
    expected = "02_cuda_graphs_ab: 72 counted cells from 5 runs" if h100 else "02_cuda_graphs_ab: 36 counted cells from 2 runs"
    assert any(line.startswith(expected) for line in lines), lines
    one = dict(reports["01_roofline"], corrected=[("20261201T155139-3b685d", "12851f5", 11)])
    assert "  corrected by corrections.json: 20261201T155139-3b685d (12851f5, 11 cells)" in \
        run_provenance.provenance_lines([one])


@pytest.mark.slow  # a finding over every shipped run
def test_the_readme_facts_about_runs_hold_against_env_json():
    env = hardware.load_env(paths.DATA)
    text = " ".join(README.read_text().split())
    ab_runs = ["20261129T162458-9b10ed", "20261129T163202-f0bf02"]
    assert {env[("h200", r)]["git_commit"][:7] + ("+dirty" if env[("h200", r)]["git_commit"].endswith("+dirty")
                                                  else "") for r in ab_runs} == {"73a049d+dirty"}
    assert not any("git_diff_sha256" in env[("h200", r)] for r in ab_runs)
    assert "both runs record git_commit 73a049d+dirty and no diff digest" in text
    assert "commit 7ecafbc):" not in text  # the old, wrong attribution
    assert env[("h200", "20261129T173723-4f08ba")]["git_commit"].startswith("15b50ac")
    assert not env[("h200", "20261129T173723-4f08ba")]["git_commit"].endswith("+dirty")
    assert env[("h200", "20261129T174116-513d65")]["git_commit"].endswith("+dirty")
    assert "4f08ba clean, 513d65 15b50ac+dirty, no diff digest" in text
    assert not any("git_diff_sha256" in e for (gpu, _), e in env.items() if gpu == "h200")  # "no H200 run has one"
    headline = env[("h200", "20261202T145126-796f1d")]
    assert headline["git_commit"].startswith("5c4d471") and headline["git_commit_source"] == "given"
    assert len(headline["source_sha256"]) == 64
    block = README.read_text().split(run_provenance.README_BEGIN)[1].split(run_provenance.README_END)[0].strip()
    assert block == run_provenance.provenance_table(paths.DATA), "data/README.md's runs-by-file table is stale: python -m decodegap gallery --readme"


def test_the_resolved_runs_cache_is_bounded_and_follows_the_rows(tmp_path):
    """claims.provenance caches the runs each selector reads per raw folder state: a changed file is a new state (a
    new answer), and however many states pass, at most RESOLVED_STATES are kept."""
    from decodegap.claims import provenance, rules

    raw = tmp_path / "raw" / "h200"
    raw.mkdir(parents=True)
    header = "run_id,session,gpu,model,ctx,arm,attn,quant,max_rel_err,tol,status,reason,check,layer,rows\n"
    rows = rules.Rows("verify.csv", "the arm checks", "check == 'vs_eager'")
    seen = []
    for i in range(provenance.RESOLVED_STATES + 3):
        lines = "".join(f"20261202T1700{j:02d}-00000{j % 10},0,h200,m,2048,graph,sdpa,bf16,0.01,0.1,ok,,vs_eager,model,\n"
                        for j in range(i + 1))
        (raw / "verify.csv").write_text(header + lines)
        seen.append(len(provenance.Runs(tmp_path).of(rows)))
        assert len(provenance._RESOLVED) <= provenance.RESOLVED_STATES
    assert seen == list(range(1, provenance.RESOLVED_STATES + 4))  # each state its own answer, never a stale one


def test_merge_runs_appends_only_the_runs_this_checkout_lacks_and_refuses_a_differing_entry(tmp_path):
    """runs.merge_runs: rows measured on another of the user's machines (its data/raw/<gpu>, unpacked) merged into
    this checkout's, each run's rows and env.json entry as written there."""
    import pandas as pd

    from decodegap import records

    env = json.loads(ENV.read_text())
    bw = records.read_csv(ENV.parent / "bandwidth.csv")
    (ours_id,) = set(bw["run_id"])
    theirs_id = "20300101T000000-abcdef"
    ours, theirs = tmp_path / "ours" / "h200", tmp_path / "theirs" / "h200"
    ours.mkdir(parents=True), theirs.mkdir(parents=True)
    shutil.copy(ENV.parent / "bandwidth.csv", ours / "bandwidth.csv")
    (ours / "env.json").write_text(json.dumps({ours_id: env[ours_id]}))
    both = pd.concat([bw, bw.assign(run_id=theirs_id)])
    both.to_csv(theirs / "bandwidth.csv", index=False)
    (theirs / "env.json").write_text(json.dumps({ours_id: env[ours_id], theirs_id: env[ours_id]}))

    assert runs.merge_runs(theirs, ours) == {"bandwidth.csv": len(bw), "env.json": 1}
    merged = records.read_csv(ours / "bandwidth.csv")
    assert list(merged["run_id"]) == [ours_id] * len(bw) + [theirs_id] * len(bw)
    assert json.loads((ours / "env.json").read_text()) == {ours_id: env[ours_id], theirs_id: env[ours_id]}
    assert runs.merge_runs(theirs, ours) == {}  # merged once: nothing more to add

    before = (ours / "bandwidth.csv").read_text()
    (theirs / "env.json").write_text(json.dumps({ours_id: dict(env[ours_id], host_cores=1), "20300101T000001-abcdef":
                                                 env[ours_id]}))
    with pytest.raises(ValueError, match=f"differ.*{ours_id}.*nothing merged"):
        runs.merge_runs(theirs, ours)
    assert (ours / "bandwidth.csv").read_text() == before


def test_merge_tarball_merges_a_measure_sh_tarball_and_refuses_a_cut_or_foreign_one_whole(tmp_path):
    """runs.merge_tarball: bench/measure.sh's raw-GPU.tgz merged as merge_runs merges its folder; a tarball cut while
    copying, one of an unknown GPU key, and one with a path out of its GPU folder are refused before anything is
    written."""
    import tarfile

    from decodegap import records

    env = json.loads(ENV.read_text())
    bw = records.read_csv(ENV.parent / "bandwidth.csv")
    (run_id,) = set(bw["run_id"])
    theirs = tmp_path / "theirs" / "h200"
    theirs.mkdir(parents=True)
    shutil.copy(ENV.parent / "bandwidth.csv", theirs / "bandwidth.csv")
    (theirs / "env.json").write_text(json.dumps({run_id: env[run_id]}))
    tgz = tmp_path / "raw-h200.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(theirs, arcname="h200")
    raw = tmp_path / "data" / "raw"

    cut = tmp_path / "cut.tgz"
    cut.write_bytes(tgz.read_bytes()[: len(tgz.read_bytes()) // 2])
    with pytest.raises(ValueError, match="cannot be read to its end.*nothing merged"):
        runs.merge_tarball(cut, raw, {"h200"})
    with pytest.raises(ValueError, match=r"GPU keys \['h200'\].*nothing merged"):
        runs.merge_tarball(tgz, raw, {"l4"})
    odd = tmp_path / "odd.tgz"
    with tarfile.open(odd, "w:gz") as tar:
        tar.add(theirs / "env.json", arcname="env.json")
    with pytest.raises(ValueError, match="not a file of a GPU folder"):
        runs.merge_tarball(odd, raw, {"h200"})
    assert not raw.exists()  # nothing written by the refusals

    assert runs.merge_tarball(tgz, raw, {"h200"}) == {"h200": {"bandwidth.csv": len(bw), "env.json": 1}}
    assert list(records.read_csv(raw / "h200" / "bandwidth.csv")["run_id"]) == [run_id] * len(bw)
    assert runs.merge_tarball(tgz, raw, {"h200"}) == {"h200": {}}


def _git(repo, *args) -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_the_source_digest_at_a_commit_is_the_digest_of_its_checkout(tmp_path):
    """A two-commit repository: each commit's digest read from git equals source_digest of its tree on disk (only
    lib/decodegap's .py files count, __pycache__ left out); the two differ; no such commit, or no git: None."""
    repo = tmp_path / "repo"
    pkg = repo / "lib" / "decodegap"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("A = 1\n")
    (pkg / "sub" / "b.py").write_text("B = 2\n")
    (pkg / "notes.txt").write_text("not source\n")
    (repo / "outside.py").write_text("X = 0\n")
    _git(repo.parent, "init", "-q", str(repo))
    for args in (("config", "user.email", "t@t"), ("config", "user.name", "t"), ("add", "-A"),
                 ("commit", "-qm", "one")):
        _git(repo, *args)
    first = _git(repo, "rev-parse", "HEAD")
    assert hardware.source_digest_at(first, repo) == hardware.source_digest(pkg)
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "a.py").write_text("cached\n")  # never part of the digest
    assert hardware.source_digest(pkg) == hardware.source_digest_at(first, repo)
    (pkg / "a.py").write_text("A = 3\n")
    _git(repo, "commit", "-qam", "two")
    second = _git(repo, "rev-parse", "HEAD")
    assert hardware.source_digest_at(second, repo) == hardware.source_digest(pkg)
    assert hardware.source_digest_at(second, repo) != hardware.source_digest_at(first, repo)
    assert hardware.source_digest_at("0" * 40, repo) is None and hardware.source_digest_at(first, tmp_path) is None
    held = hardware.digests_against_commits({
        "ok": dict(git_commit=first, source_sha256=hardware.source_digest_at(first, repo)),
        "wrong": dict(git_commit=second, source_sha256=hardware.source_digest_at(first, repo)),
        "dirty": dict(git_commit=first + "+dirty", source_sha256="f" * 64),
        "none": dict(git_commit=first),
        "gone": dict(git_commit="1" * 40, source_sha256="f" * 64)}, repo)
    assert held["matched"] == ["ok"] and [m[0] for m in held["mismatched"]] == ["wrong"]
    assert held["commit_missing"] == [("gone", "1" * 40)] and held["not_held"] == ["dirty", "none"]


def test_every_shipped_run_records_the_digest_of_the_commit_it_names():
    held = hardware.digests_against_commits(hardware.load_env())
    if not held["matched"] and held["commit_missing"]:
        pytest.skip("this clone lacks the runs' commits (a shallow clone)")
    assert not held["mismatched"], held["mismatched"]
    assert len(held["matched"]) + len(held["commit_missing"]) >= 63  # the runs with a digest when this was written


def test_check_refuses_a_run_whose_commit_is_not_the_code_that_ran(data_dir, capsys):
    from decodegap import cli, records

    head = _git(paths.REPO, "rev-parse", "HEAD")
    at_head = hardware.source_digest_at(head)
    if at_head is None:
        pytest.skip("no git history here")
    folder = data_dir / "raw" / "cpu-test"
    folder.mkdir(parents=True)
    records.append_rows(folder / "bandwidth.csv", records.BANDWIDTH, [dict(
        run_id="20260101T000000-abcdef", gpu="cpu-test", method="d2d_copy", bytes_moved=2, rep=0, time_ms=1.0,
        bandwidth_gbps=1.0, status="ok", reason="")])
    entry = {"git_commit": head, "source_sha256": "0" * 64}
    (folder / "env.json").write_text(json.dumps({"20260101T000000-abcdef": entry}))
    assert cli.main(["--data-dir", str(data_dir), "check"]) == 1
    err = capsys.readouterr().err
    assert f"cpu-test/20260101T000000-abcdef: env.json names commit {head[:12]}, whose package source has digest " \
           f"{at_head[:12]}, but records source_sha256 000000000000" in err
    (folder / "env.json").write_text(json.dumps({"20260101T000000-abcdef": dict(entry, source_sha256=at_head)}))
    assert cli.main(["--data-dir", str(data_dir), "check"]) == 0
    assert "source digests: 1 runs name a clean commit" in capsys.readouterr().out
