"""The harness end to end in fresh processes on a CPU: rows, arm order, env.json, resume after a killed
sweep, OOM/error cells, and the command line."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
import dataclasses
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from conftest import CPU_SPEC_ROW
from decodegap.experiments import cuda_graphs_ab
from decodegap.harness import checks, decode, models, profile, runs, session, sweep
from decodegap import inputs, paths, records, selection

PLAN = sweep.SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(16, 32),
                       arms=("eager", "hf_default", "graph"), sessions=2, steps=3, warmup=1, device="cpu")
N_OK = 2 * 2 * 2 * 3      # sessions * contexts * timed arms * steps
N_WARMUP = 2 * 2 * 2 * 1  # sessions * contexts * timed arms * warmup
N_GRAPH = 2 * 2           # one `unavailable` row per graph cell
GRAPH_REASON = "CUDA graphs need a CUDA device"


def make_data(out: Path) -> Path:
    """The same private data folder as conftest's `data_dir` fixture, for the module-scoped sweep."""
    for sub in ("models", "specs", "published"):
        shutil.copytree(paths.DATA / sub, out / sub)
    with open(out / "specs" / "gpus.csv", "a") as fh:
        fh.write(CPU_SPEC_ROW)
    return out


@pytest.fixture(scope="session")  # once per worker, however xdist interleaves the modules
def swept(tmp_path_factory):
    """One sweep of PLAN (two fresh session processes); tests that change files work on a copy."""
    data = make_data(tmp_path_factory.mktemp("swept") / "data")
    run_id = sweep.run_sweep(PLAN, data, progress=False)
    return data, run_id


def raw(data: Path) -> Path:
    return data / "raw" / "cpu-test"


def copy_raw(src: Path, dst: Path) -> None:
    shutil.copytree(raw(src), raw(dst))


def csv_lines(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


def row_keys(frame) -> Counter:
    """How often each (cell key, status, step) occurs: a duplicated row shows as a count of 2."""
    cols = list(records.DECODE.key) + ["status", "step"]
    return Counter(frame[cols].astype(str).itertuples(index=False, name=None))


# --- one sweep ------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_sweep_row_counts(swept):
    data, run_id = swept
    frame = records.read_csv(raw(data) / "decode.csv")
    assert len(frame) == N_OK + N_WARMUP + N_GRAPH == 36
    assert Counter(frame["status"]) == {"ok": N_OK, "warmup": N_WARMUP, "unavailable": N_GRAPH}
    assert set(frame["run_id"]) == {run_id}
    ok = frame[frame["status"] == "ok"]
    assert set(ok["arm"]) == {"eager", "hf_default"}
    for (_, ctx, arm), cell in ok.groupby(["session", "ctx", "arm"]):
        assert sorted(cell["step"]) == [0, 1, 2]
        assert (cell["step_ms"] > 0).all()
        assert set(cell["max_cache_len"]) == {ctx + 1 + 3}  # ctx + warmup + steps
    graph = frame[frame["arm"] == "graph"]
    assert len(graph) == N_GRAPH and set(graph["status"]) == {"unavailable"}
    assert set(graph["reason"]) == {GRAPH_REASON}
    assert graph["step_ms"].isna().all()
    assert max(row_keys(frame).values()) == 1


@pytest.mark.slow
def test_verify_rows_in_session_zero(swept):
    data, run_id = swept
    verify = records.read_csv(raw(data) / "verify.csv", records.VERIFY)
    # hf_default is checked against eager once per context, in session 0; eager needs no check, graph can't run
    assert sorted(zip(verify["session"], verify["ctx"], verify["arm"])) == [(0, 16, "hf_default"), (0, 32, "hf_default")]
    assert set(verify["status"]) == {"ok"} and set(verify["tol"]) == {0.1}
    assert (verify["max_rel_err"] < 1e-3).all()


@pytest.mark.slow
def test_arm_order_alternates_between_sessions(swept):
    data, _ = swept
    frame = records.read_csv(raw(data) / "decode.csv")
    assert list(frame["session"]) == sorted(frame["session"])  # session 0 whole, then session 1
    for number, expected in ((0, ["eager", "hf_default", "graph"]), (1, ["graph", "hf_default", "eager"])):
        for ctx in (16, 32):
            rows = frame[(frame["session"] == number) & (frame["ctx"] == ctx)]
            assert list(dict.fromkeys(rows["arm"])) == expected, (number, ctx)
    assert [c.arm for c in PLAN.cells(1)[:3]] == ["graph", "hf_default", "eager"]


@pytest.mark.slow
def test_env_json_records_the_run(swept):
    data, run_id = swept
    env = json.loads((raw(data) / "env.json").read_text())
    assert list(env) == [run_id]
    entry = env[run_id]
    assert entry["plan"] == json.loads(json.dumps(asdict(PLAN)))
    assert entry["experiment"] == "decode"
    assert entry["device_name"] == "cpu"
    assert entry["torch"] == torch.__version__
    for key in ("gpu_state_before", "gpu_state_after", "git_commit", "transformers", "host_cpu", "optional_packages"):
        assert key in entry
    assert "time" in entry["gpu_state_before"] and "time" in entry["gpu_state_after"]
    # the rows the run left: 36 in decode.csv (above), and hf_default's two checks in verify.csv (one per context)
    assert entry["rows_written"] == {"decode": N_OK + N_WARMUP + N_GRAPH, "verify": 2}
    assert sorted(entry["sessions"]) == ["0", "1"]
    for s in ("0", "1"):
        assert set(entry["sessions"][s]) == {"before", "after", "timing", "rows", "finished"}
        assert entry["sessions"][s]["finished"] is True
        assert entry["sessions"][s]["rows"] == (N_OK + N_WARMUP + N_GRAPH) // 2 == 18  # what each session wrote
        timing = entry["sessions"][s]["timing"]  # where the session process's wall time went
        assert set(timing["build_s"]) == set(timing["cells_s"]) == set(PLAN.models)
        parts = timing["startup_s"] + timing["import_s"] + sum(timing["build_s"].values()) + sum(timing["cells_s"].values())
        assert 0 < parts <= timing["total_s"] + 0.05  # rounded to 0.01 s each


def test_sweep_plan_json_round_trip():
    assert sweep.SweepPlan.from_json(PLAN.to_json()) == PLAN
    assert PLAN.key(1, sweep.Cell("llama-tiny", 32, "eager")) == ("1", "cpu-test", "llama-tiny", "32", "eager", "sdpa", "bf16", "1")


# --- resume -----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_rerun_of_a_finished_plan_changes_nothing(swept, data_dir, capsys):
    copy_raw(swept[0], data_dir)
    before = {p.name: p.read_bytes() for p in raw(data_dir).iterdir()}
    sweep.run_sweep(PLAN, data_dir, progress=False)
    assert "nothing to measure" in capsys.readouterr().out
    after = {p.name: p.read_bytes() for p in raw(data_dir).iterdir()}
    assert after == before  # decode.csv, verify.csv and env.json byte-identical


@pytest.mark.slow
def test_deleted_session_is_measured_again_and_nothing_else(swept, data_dir):
    copy_raw(swept[0], data_dir)
    path = raw(data_dir) / "decode.csv"
    lines = path.read_text().splitlines(keepends=True)
    kept = [ln for ln in lines if next(csv.reader([ln]))[1] != "1"]  # column 1 is `session`
    assert len(lines) - len(kept) == 36 // 2
    path.write_text("".join(kept))
    verify_before = (raw(data_dir) / "verify.csv").read_bytes()

    new_run = sweep.run_sweep(PLAN, data_dir, progress=False)

    text = path.read_text()
    assert text.startswith("".join(kept))  # session 0 untouched
    frame = records.read_csv(path)
    assert len(frame) == 36
    assert Counter(frame["status"]) == {"ok": N_OK, "warmup": N_WARMUP, "unavailable": N_GRAPH}
    assert set(frame.loc[frame["session"] == 1, "run_id"]) == {new_run}
    assert set(frame.loc[frame["session"] == 0, "run_id"]) == {swept[1]}
    assert max(row_keys(frame).values()) == 1
    verify = records.read_csv(raw(data_dir) / "verify.csv", records.VERIFY)
    assert (raw(data_dir) / "verify.csv").read_bytes().startswith(verify_before)  # the first run's checks stay
    # the new run checks its own cells: a check of another run never stands for it
    mine = verify[verify["run_id"] == new_run]
    assert sorted(zip(mine["session"], mine["ctx"], mine["arm"])) == [(1, 16, "hf_default"), (1, 32, "hf_default")]
    env = json.loads((raw(data_dir) / "env.json").read_text())
    assert set(env) == {swept[1], new_run} and list(env[new_run]["sessions"]) == ["1"]


@pytest.mark.slow
def test_a_run_of_its_own_cut_short_is_continued_session_by_session(swept, data_dir):
    """A sweep measured `again` (in a run of its own) that a call cut short: run A holds session 0 whole and one cell
    of session 1. Planned again at A's commit and source digest, the plan continues A (continuation.cut_short_runs),
    and the new run times session 1 whole and nothing of session 0; without `continues` every cell of both sessions is
    pending, as before. Another commit, a dirty one, another order of arms, or a run that finished every session is not
    continued."""
    from decodegap.harness import continuation

    copy_raw(swept[0], data_dir)
    run_a, path = swept[1], raw(data_dir) / "decode.csv"
    again = dataclasses.replace(PLAN, again=True)
    env_path = raw(data_dir) / "env.json"
    env = json.loads(env_path.read_text())
    env[run_a]["plan"] = json.loads(again.to_json())  # A was planned again
    env[run_a]["git_commit"] = "1" * 40  # at a clean commit (the tests may run from a tree with changes)
    env_path.write_text(json.dumps(env))
    lines = path.read_text().splitlines(keepends=True)
    session_1 = [ln for ln in lines[1:] if next(csv.reader([ln]))[1] == "1"]
    kept = [ln for ln in lines if ln not in session_1] + session_1[:1]  # session 1 cut after its first row
    path.write_text("".join(kept))

    rows = records.read_csv(path)
    assert continuation.whole_sessions(again, rows) == {run_a: {0}}
    commit, source = env[run_a]["git_commit"], env[run_a]["source_sha256"]
    plans = {("cpu-test", run_a): env[run_a]["plan"]}
    entries = {("cpu-test", run_a): env[run_a]}
    assert continuation.cut_short_runs(again, rows, plans, entries, commit, source) == (run_a,)
    assert continuation.cut_short_runs(again, rows, plans, entries, "0" * 40, source) == ()
    assert continuation.cut_short_runs(again, rows, plans, entries, commit + "+dirty", source) == ()
    unknown = "unknown (no git checkout here, DECODEGAP_GIT_COMMIT not set)"
    assert continuation.cut_short_runs(again, rows, plans, {("cpu-test", run_a): dict(env[run_a], git_commit=unknown)},
                                       unknown, source) == ()
    assert continuation.cut_short_runs(again, rows, plans, entries, commit, "f" * 64) == ()
    reversed_arms = dataclasses.replace(again, arms=tuple(reversed(PLAN.arms)))
    assert continuation.cut_short_runs(reversed_arms, rows, plans, entries, commit, source) == ()
    assert continuation.cut_short_runs(PLAN, rows, plans, entries, commit, source) == ()  # not `again`: it resumes
    whole = records.read_csv(raw(swept[0]) / "decode.csv")
    assert continuation.cut_short_runs(again, whole, plans, entries, commit, source) == ()  # finished: measured anew

    cells = len(PLAN.cells(0))
    assert {s: len(c) for s, c in again.pending_by_session(data_dir).items()} == {0: cells, 1: cells}
    continuing = dataclasses.replace(again, continues=(run_a,))
    assert {s: len(c) for s, c in continuing.pending_by_session(data_dir).items()} == {0: 0, 1: cells}
    run_b = sweep.run_sweep(continuing, data_dir, progress=False)
    frame = records.read_csv(path)
    assert set(frame.loc[frame["session"] == 0, "run_id"]) == {run_a}
    assert set(frame.loc[(frame["session"] == 1) & (frame["run_id"] == run_b), "arm"]) == set(PLAN.arms)
    assert len(frame[frame["run_id"] == run_b]) == len(session_1)  # session 1 whole, in the new run
    recorded = json.loads(env_path.read_text())[run_b]["plan"]
    assert recorded["continues"] == [run_a] and recorded["again"] is True
    both = dataclasses.replace(again, continues=(run_a, run_b))  # a third call continues both: nothing left
    assert {s: len(c) for s, c in both.pending_by_session(data_dir).items()} == {0: 0, 1: 0}


@pytest.mark.slow
def test_cut_tail_is_moved_aside_and_measured_again(swept, data_dir):
    copy_raw(swept[0], data_dir)
    path = raw(data_dir) / "decode.csv"
    lines = path.read_text().splitlines(keepends=True)
    # the last cell written is session 1, ctx 32, eager (arms reversed): 1 warm-up + 3 timed rows
    block = lines[-4:]
    assert all(ln.startswith(f"{swept[1]},1,cpu-test,llama-tiny,32,36,eager,") for ln in block)
    cut = block[-1][: block[-1].rindex(",ok,") - 3]  # a killed writer: the file ends inside step_ms
    path.write_text("".join(lines[:-1]) + cut)
    with pytest.raises(records.SchemaError, match="incomplete"):
        records.read_csv(path)

    new_run = sweep.run_sweep(PLAN, data_dir, progress=False)

    partial = path.with_name("decode.csv.partial").read_text()
    assert partial == "".join(block[:-1]) + cut + "\n"  # the whole cut block, kept
    text = path.read_text()
    assert text.startswith("".join(lines[:-4]))  # every earlier row intact
    frame = records.read_csv(path)
    assert Counter(frame["status"]) == {"ok": N_OK, "warmup": N_WARMUP, "unavailable": N_GRAPH}
    assert max(row_keys(frame).values()) == 1
    redone = frame[frame["run_id"] == new_run]
    assert set(zip(redone["session"], redone["ctx"], redone["arm"])) == {(1, 32, "eager")}
    assert len(redone) == 4


# --- one cell in-process: OOM and errors become rows ------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_model():
    return models.build_model(models.load_spec("llama-tiny"), device="cpu")


ONE = sweep.SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(16,), arms=("eager", "hf_default"),
                      sessions=1, steps=2, warmup=1, device="cpu")


@pytest.mark.slow
def test_measure_cell_rows(tiny_model, data_dir):
    rows = session.measure_cell(ONE, tiny_model, sweep.Cell("llama-tiny", 16, "hf_default"), "rid", 0, data_dir)
    assert [r["status"] for r in rows] == ["warmup", "ok", "ok"]
    assert [r["step"] for r in rows] == [0, 0, 1]
    assert {r["max_cache_len"] for r in rows} == {16 + 1 + 2}
    assert {(r["run_id"], r["session"], r["gpu"], r["model"], r["ctx"], r["arm"], r["attn"], r["quant"]) for r in rows} \
        == {("rid", 0, "cpu-test", "llama-tiny", 16, "hf_default", "sdpa", "bf16")}
    verify = records.read_csv(raw(data_dir) / "verify.csv", records.VERIFY)
    assert len(verify) == 1 and verify["arm"].iloc[0] == "hf_default"
    # no check for eager, nor again in the same run once it passed
    session.measure_cell(ONE, tiny_model, sweep.Cell("llama-tiny", 16, "eager"), "rid", 0, data_dir)
    session.measure_cell(ONE, tiny_model, sweep.Cell("llama-tiny", 16, "hf_default"), "rid", 1, data_dir)
    assert len(records.read_csv(raw(data_dir) / "verify.csv", records.VERIFY)) == 1


def _raise(exc):
    def fn(*args, **kwargs):
        raise exc
    return fn


def _check_status_row(rows, status):
    assert len(rows) == 1
    row = rows[0]
    assert row["status"] == status
    assert row["step_ms"] is None and row["step"] is None and row["max_cache_len"] is None
    assert (row["model"], row["ctx"], row["arm"]) == ("llama-tiny", 16, "eager")
    return row


def test_out_of_memory_becomes_an_oom_row(tiny_model, data_dir, monkeypatch):
    monkeypatch.setattr(decode, "run_arm", _raise(torch.OutOfMemoryError("CUDA out of memory. test\nTried to allocate")))
    rows = session.measure_cell(ONE, tiny_model, sweep.Cell("llama-tiny", 16, "eager"), "rid", 0, data_dir)
    row = _check_status_row(rows, "oom")
    assert row["reason"] == "out of memory: CUDA out of memory. test"
    path = raw(data_dir) / "decode.csv"
    records.append_rows(path, records.DECODE, rows)  # a valid row of the schema
    assert records.read_csv(path)["status"].tolist() == ["oom"]


def test_other_exceptions_become_error_rows(tiny_model, data_dir, monkeypatch):
    monkeypatch.setattr(decode, "run_arm", _raise(RuntimeError("boom\nsecond line")))
    rows = session.measure_cell(ONE, tiny_model, sweep.Cell("llama-tiny", 16, "eager"), "rid", 0, data_dir)
    assert _check_status_row(rows, "error")["reason"] == "RuntimeError: boom second line"
    monkeypatch.setattr(decode, "run_arm", _raise(decode.ArmUnavailable("no such kernel here")))
    rows = session.measure_cell(ONE, tiny_model, sweep.Cell("llama-tiny", 16, "eager"), "rid", 0, data_dir)
    assert _check_status_row(rows, "unavailable")["reason"] == "no such kernel here"


def test_failed_correctness_check_is_an_error_row_not_a_timing(tiny_model, data_dir, monkeypatch):
    monkeypatch.setattr(checks, "verify_arm", _raise(AssertionError("logits differ by 0.9")))
    timed = []
    monkeypatch.setattr(decode, "run_arm", lambda *a, **k: timed.append(a))
    rows = session.measure_cell(ONE, tiny_model, sweep.Cell("llama-tiny", 16, "hf_default"), "rid", 0, data_dir)
    assert len(rows) == 1 and rows[0]["status"] == "error"
    assert rows[0]["reason"] == "correctness check failed: logits differ by 0.9"
    assert timed == []


# --- the command line -------------------------------------------------------------------------------------

def cli(*args, cwd: Path, timeout=240):
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "decodegap", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


@pytest.mark.slow
def test_cli_measure(data_dir, tmp_path):
    out = cli("--data-dir", str(data_dir), "measure", "--gpu", "cpu-test", "--device", "cpu", "--models", "llama-tiny",
              "--contexts", "16", "--arms", "eager", "--sessions", "1", "--steps", "2", "--warmup", "1", "--no-progress",
              cwd=tmp_path / "elsewhere")
    assert out.returncode == 0, out.stderr
    path = raw(data_dir) / "decode.csv"
    assert str(path) in out.stdout
    frame = records.read_csv(path)
    assert frame["status"].tolist() == ["warmup", "ok", "ok"]
    assert set(frame["max_cache_len"]) == {16 + 1 + 2}
    assert not (tmp_path / "elsewhere" / "data").exists()  # nothing written relative to the working directory
    assert not any((tmp_path / "elsewhere").iterdir())


@pytest.mark.slow
def test_cli_unknown_gpu(data_dir, tmp_path):
    out = cli("--data-dir", str(data_dir), "measure", "--gpu", "nosuch", "--device", "cpu", "--models", "llama-tiny",
              cwd=tmp_path / "elsewhere")
    assert out.returncode == 2
    assert "unknown GPU key 'nosuch'" in out.stderr
    for key in ("l4", "h100-sxm", "h200", "b200", "cpu-test"):
        assert key in out.stderr
    assert "gpus.csv" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (data_dir / "raw").exists()


@pytest.mark.slow
def test_cli_unknown_model(data_dir, tmp_path):
    out = cli("--data-dir", str(data_dir), "measure", "--gpu", "cpu-test", "--device", "cpu", "--models", "llama-tiny,nosuch",
              cwd=tmp_path / "elsewhere")
    assert out.returncode == 2
    assert "unknown model 'nosuch'" in out.stderr and "llama-tiny" in out.stderr and "qwen2.5-7b" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (data_dir / "raw").exists()  # refused before any session started


@pytest.mark.slow  # a fresh process of the command line
def test_cli_gpus_lists_the_registry(data_dir, tmp_path):
    out = cli("--data-dir", str(data_dir), "gpus", cwd=tmp_path / "elsewhere")
    assert out.returncode == 0
    assert "4800" in out.stdout and "cpu-test" in out.stdout


def _decode_only(swept, data_dir):
    """The sweep's decode.csv alone (see the xfail below for verify.csv), with the env.json that records its run."""
    raw(data_dir).mkdir(parents=True)
    shutil.copy(raw(swept[0]) / "decode.csv", raw(data_dir) / "decode.csv")
    shutil.copy(raw(swept[0]) / "env.json", raw(data_dir) / "env.json")
    return raw(data_dir) / "decode.csv"


@pytest.mark.slow
def test_cli_check_good_and_corrupted(swept, data_dir, tmp_path):
    path = _decode_only(swept, data_dir)
    out = cli("--data-dir", str(data_dir), "check", cwd=tmp_path / "elsewhere")
    assert out.returncode == 0, out.stderr
    assert f"{path}: 36 rows ok" in out.stdout
    lines = path.read_text().splitlines(keepends=True)
    fields = next(csv.reader([lines[5]]))
    fields[10] = "slow"  # step_ms of line 6
    lines[5] = ",".join(fields) + "\n"
    path.write_text("".join(lines))
    out = cli("--data-dir", str(data_dir), "check", cwd=tmp_path / "elsewhere")
    assert out.returncode == 1
    assert f"{path}:6:" in out.stderr and "step_ms" in out.stderr and "'slow'" in out.stderr


@pytest.mark.slow
def test_cli_check_repair_fixes_a_cut_tail(swept, data_dir, tmp_path):
    path = _decode_only(swept, data_dir)
    text = path.read_text()
    path.write_text(text[:-10])
    env_path = raw(data_dir) / "env.json"  # a sweep killed inside session 1 never recorded that session as finished,
    env = json.loads(env_path.read_text())  # nor the run's end: its GPU state after and the rows it wrote
    del env[swept[1]]["sessions"]["1"], env[swept[1]]["gpu_state_after"], env[swept[1]]["rows_written"]
    env_path.write_text(json.dumps(env))
    out = cli("--data-dir", str(data_dir), "check", cwd=tmp_path / "elsewhere")
    assert out.returncode == 1 and "incomplete" in out.stderr and "--repair" in out.stderr
    out = cli("--data-dir", str(data_dir), "check", "--repair", cwd=tmp_path / "elsewhere")
    assert out.returncode == 0, out.stderr
    assert "moved 4 line(s)" in out.stdout and f"{path}: 32 rows ok" in out.stdout
    assert path.read_text() == "".join(text.splitlines(keepends=True)[:-4])
    assert path.with_name("decode.csv.partial").exists()


@pytest.mark.slow
def test_check_repair_of_a_finished_sessions_cut_tail_still_names_the_loss(swept, data_dir, tmp_path):
    """A session env.json records as finished lost its last cell's rows (a copy cut short): the repair moves the cut
    block aside, and check then names the four rows the session no longer has, since nothing measured them again."""
    path = _decode_only(swept, data_dir)
    path.write_text(path.read_text()[:-10])
    out = cli("--data-dir", str(data_dir), "check", "--repair", cwd=tmp_path / "elsewhere")
    assert out.returncode == 1 and "moved 4 line(s)" in out.stdout
    assert f"14 row(s) of session 1 of run {swept[1]}, though" in out.stderr and "records 18 written" in out.stderr


@pytest.mark.slow
def test_cli_check_accepts_what_a_sweep_writes(swept, data_dir, tmp_path):
    copy_raw(swept[0], data_dir)
    assert (raw(data_dir) / "verify.csv").exists()
    out = cli("--data-dir", str(data_dir), "check", cwd=tmp_path / "elsewhere")
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
def test_check_finds_rows_lost_from_the_middle_of_a_session(swept, data_dir, tmp_path):
    """A session keeps some of its rows: no whole session or run is gone, and every line is whole, so only the row
    count each session's entry records finds the loss."""
    copy_raw(swept[0], data_dir)
    path = raw(data_dir) / "decode.csv"
    lines = path.read_text().splitlines(keepends=True)
    first_of_session_1 = next(i for i, ln in enumerate(lines) if next(csv.reader([ln]))[1] == "1")
    path.write_text("".join(lines[:first_of_session_1 + 2] + lines[first_of_session_1 + 5:]))  # 3 rows of session 1
    out = cli("--data-dir", str(data_dir), "check", cwd=tmp_path / "elsewhere")
    assert out.returncode == 1
    assert f"{path}: 15 row(s) of session 1 of run {swept[1]}, though" in out.stderr
    assert "records 18 written" in out.stderr and "git checkout -- decode.csv" in out.stderr


@pytest.mark.slow
def test_check_finds_a_runs_row_lost_from_a_file_without_sessions_counted(swept, data_dir, tmp_path):
    """One of the run's two checks deleted from verify.csv: no session count covers that file, but the run's
    rows_written does."""
    copy_raw(swept[0], data_dir)
    path = raw(data_dir) / "verify.csv"
    lines = path.read_text().splitlines(keepends=True)
    assert len(lines) == 3  # header and the two checks
    path.write_text("".join(lines[:2]))
    out = cli("--data-dir", str(data_dir), "check", cwd=tmp_path / "elsewhere")
    assert out.returncode == 1
    assert f"{path}: 1 row(s) of run {swept[1]}, though" in out.stderr and "records 2 written" in out.stderr


# --- a session process that dies --------------------------------------------------------------------------

SITECUSTOMIZE = '''
import os
from decodegap.harness import decode
_run_arm = decode.run_arm
def run_arm(model, arm, ctx, *args, **kwargs):
    if ctx == 32:
        os._exit(3)  # like a device-side assert or a segfault: no Python exception, no cleanup
    return _run_arm(model, arm, ctx, *args, **kwargs)
decode.run_arm = run_arm
'''


@pytest.mark.slow
def test_a_session_that_dies_inside_a_cell_leaves_an_error_row(data_dir, tmp_path, monkeypatch):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)  # loaded by the session processes only
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])))
    plan = sweep.SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(16, 32, 48), arms=("eager",),
                           sessions=1, steps=2, warmup=1, device="cpu")
    sweep.run_sweep(plan, data_dir, progress=False)
    frame = records.read_csv(raw(data_dir) / "decode.csv")
    died = frame[frame["ctx"] == 32]
    assert died["status"].tolist() == ["error"]
    assert "exited with code 3 while measuring this cell" in died["reason"].iloc[0]
    # the sweep went on in a new process: the cells before and after were measured
    for ctx in (16, 48):
        assert frame.loc[frame["ctx"] == ctx, "status"].tolist() == ["warmup", "ok", "ok"]
    # the session's row count holds both processes' cells and the error row the parent wrote: 3 + 1 + 3
    env = json.loads((raw(data_dir) / "env.json").read_text())
    (entry,) = env.values()
    assert entry["sessions"]["0"]["rows"] == len(frame) == 7


DIE_IN_MISTRAL = '''
import os
from decodegap.harness import decode
_run_arm = decode.run_arm
def run_arm(model, arm, ctx, *args, **kwargs):
    if model.config.model_type == "mistral" and ctx == 32:
        os._exit(3)
    return _run_arm(model, arm, ctx, *args, **kwargs)
decode.run_arm = run_arm
'''


@pytest.mark.slow
def test_a_session_that_takes_two_processes_keeps_both_records(data_dir, tmp_path, monkeypatch):
    """The first process reports llama-tiny and dies inside mistral-tiny's ctx 32 cell; the second measures the rest
    (mistral-tiny at ctx 48). The session's record is the second process's, the first's kept beside it."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(DIE_IN_MISTRAL)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])))
    plan = sweep.SweepPlan(gpu="cpu-test", models=("llama-tiny", "mistral-tiny"), contexts=(16, 32, 48),
                           arms=("eager",), sessions=1, steps=2, warmup=1, device="cpu")
    sweep.run_sweep(plan, data_dir, progress=False)
    (entry,) = json.loads((raw(data_dir) / "env.json").read_text()).values()
    record = entry["sessions"]["0"]
    assert record["finished"] is True and set(record["timing"]["build_s"]) == {"mistral-tiny"}
    (first,) = record["earlier_processes"]
    assert set(first) == {"before", "after", "timing"} and set(first["timing"]["build_s"]) == {"llama-tiny"}
    assert record["rows"] == 3 * 3 + 3 + 1 + 3  # llama 3 cells, mistral 16, the error row, mistral 48


def _two_model_sweep_with_hook(data_dir, tmp_path, hook_source: str, once_marked=None) -> subprocess.CompletedProcess:
    """`python -m decodegap measure` of llama-tiny then mistral-tiny at ctx 16, eager, one session, with `hook_source`
    as a sitecustomize loaded by the sweep and its session processes. With `once_marked`, the sweep runs in a process
    group of its own, and once the hook has created the file named by DECODEGAP_TEST_MARKER, `once_marked(process)`
    is called (to signal it as a test would)."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(hook_source)
    marker = tmp_path / "marked"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])),
               DECODEGAP_TEST_MARKER=str(marker))
    args = ["--data-dir", str(data_dir), "measure", "--gpu", "cpu-test", "--device", "cpu", "--models",
            "llama-tiny,mistral-tiny", "--contexts", "16", "--arms", "eager", "--sessions", "1", "--steps", "2",
            "--warmup", "1", "--no-progress"]
    cmd = [sys.executable, "-m", "decodegap", *args]
    if once_marked is None:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the hook never reached its cell"
    once_marked(proc)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


KILL_PARENT = '''
import os, signal
from decodegap.harness import decode
_run_arm = decode.run_arm
def run_arm(model, arm, ctx, *args, **kwargs):
    if model.config.model_type == "mistral":  # the second model: the sweep is killed, as a step's time limit does
        os.kill(os.getppid(), signal.SIGKILL)
        os._exit(9)
    return _run_arm(model, arm, ctx, *args, **kwargs)
decode.run_arm = run_arm
'''


@pytest.mark.slow
def test_a_sweep_killed_between_models_keeps_its_sessions_record(data_dir, tmp_path):
    """A step's time limit kills the sweep and its session process at once: the session's env.json record of the
    models it finished survives (timing, the tuner's choices, its rows), marked unfinished, and check accepts it."""
    out = _two_model_sweep_with_hook(data_dir, tmp_path, KILL_PARENT)
    assert out.returncode == -9, out.stderr  # the parent was killed: nothing after that ran
    frame = records.read_csv(raw(data_dir) / "decode.csv")
    assert frame["model"].tolist() == ["llama-tiny"] * 3  # warmup + 2 steps, then the kill
    (run_id, entry), = json.loads((raw(data_dir) / "env.json").read_text()).items()
    assert "rows_written" not in entry  # the run's end was never reached
    record = entry["sessions"]["0"]
    assert record["finished"] is False and "after" not in record
    assert record["rows"] == 3
    assert set(record["timing"]["build_s"]) == set(record["timing"]["cells_s"]) == {"llama-tiny"}
    assert record["timing"]["total_s"] >= record["timing"]["cells_s"]["llama-tiny"] > 0
    check = subprocess.run([sys.executable, "-m", "decodegap", "--data-dir", str(data_dir), "check"],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert check.returncode == 0, check.stderr


SLEEP_IN_MISTRAL = '''
import os, time
from decodegap.harness import decode
_run_arm = decode.run_arm
def run_arm(model, arm, ctx, *args, **kwargs):
    if model.config.model_type == "mistral":  # the second model: its cell marks the file and sleeps, to be stopped
        open(os.environ["DECODEGAP_TEST_MARKER"], "w").close()
        time.sleep(120)
    return _run_arm(model, arm, ctx, *args, **kwargs)
decode.run_arm = run_arm
'''


def _as_timeout_stops(proc) -> None:
    """What coreutils' `timeout` does when its time is up (bench/measure.sh's STEP_TIMEOUT): SIGTERM to the command,
    then to its whole process group, so the command gets it twice."""
    os.kill(proc.pid, signal.SIGTERM)
    os.killpg(proc.pid, signal.SIGTERM)


@pytest.mark.slow
def test_a_sweep_stopped_by_sigterm_records_its_stop_and_the_rows_it_left(data_dir, tmp_path):
    """A sweep stopped inside its second model's cell as `timeout` stops it (bench/measure.sh's STEP_TIMEOUT: SIGTERM
    to the sweep, then to its process group, the session process too): the sweep records the run and the session as
    stopped with the rows they left (3: llama-tiny's warmup and 2 steps; the cell it was in is not written), and exits
    143; check accepts it, and holds the file to those rows."""
    t0 = time.monotonic()
    out = _two_model_sweep_with_hook(data_dir, tmp_path, SLEEP_IN_MISTRAL, _as_timeout_stops)
    assert out.returncode == 143, out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("decodegap: stopped by SIGTERM; the run's rows so far are kept")
    assert time.monotonic() - t0 < 100  # the session process sleeping in its cell ended, not waited for
    frame = records.read_csv(raw(data_dir) / "decode.csv")
    assert frame["model"].tolist() == ["llama-tiny"] * 3
    (run_id, entry), = json.loads((raw(data_dir) / "env.json").read_text()).items()
    assert entry["stopped"]["by"] == "SIGTERM" and "gpu_state_after" not in entry
    assert entry["rows_written"] == {"decode": 3, "verify": 0}
    record = entry["sessions"]["0"]
    assert record["finished"] is False and record["stopped"]["by"] == "SIGTERM" and record["rows"] == 3
    assert set(record["timing"]["build_s"]) == {"llama-tiny"}
    check = [sys.executable, "-m", "decodegap", "--data-dir", str(data_dir), "check"]
    checked = subprocess.run(check, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert checked.returncode == 0
    assert f"  stopped before its end: run {run_id} by SIGTERM at {entry['stopped']['at']}, rows kept: decode 3, " \
        "verify 0" in checked.stdout.splitlines()
    path = raw(data_dir) / "decode.csv"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))  # one row of the run cut
    cut = subprocess.run(check, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert cut.returncode != 0 and "decode.csv: 2 row(s) of session" in cut.stderr, cut.stderr
    assert "records 3 written" in cut.stderr


def test_a_session_process_that_ignores_sigterm_is_killed_after_the_wait():
    """sweep._end: SIGTERM first (a process that exits on it ends with -15), SIGKILL once `wait_s` has passed for one
    that ignores it (-9), and a process already ended is left as it is."""
    ignores = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    for code, expected in (("import time; print('ready', flush=True); time.sleep(60)", -15), (ignores, -9)):
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"  # its handler is set before the signal comes
        t0 = time.monotonic()
        sweep._end(proc, wait_s=1.0)
        assert proc.returncode == expected and time.monotonic() - t0 < 30
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    sweep._end(done, wait_s=1.0)
    assert done.returncode == 0


@pytest.mark.slow
def test_a_model_that_cannot_be_built_stops_the_sweep_with_a_clear_error(data_dir):
    spec = json.loads((data_dir / "models" / "llama-tiny.json").read_text())
    spec.update(key="broken-tiny", config=dict(spec["config"], model_type="no-such-architecture"))
    (data_dir / "models" / "broken-tiny.json").write_text(json.dumps(spec))
    plan = sweep.SweepPlan(gpu="cpu-test", models=("broken-tiny",), contexts=(16,), arms=("eager",),
                           sessions=1, steps=2, warmup=1, device="cpu")
    with pytest.raises(RuntimeError, match="session 0 exited with code 1 outside any cell, twice"):
        sweep.run_sweep(plan, data_dir, progress=False)
    assert not (raw(data_dir) / "decode.csv").exists()  # no row claims the cell was measured


@pytest.mark.slow
def test_retry_unavailable_measures_such_cells_once_more_and_stops(data_dir, tmp_path):
    """`--retry-unavailable` re-measures cells recorded only as unavailable, once per run (no endless loop)."""
    cmd = [sys.executable, "-m", "decodegap", "--data-dir", str(data_dir), "measure", "--gpu", "cpu-test",
           "--device", "cpu", "--models", "llama-tiny", "--contexts", "16", "--arms", "eager,graph", "--sessions", "1",
           "--steps", "2", "--warmup", "1", "--no-progress"]
    for extra in ([], ["--retry-unavailable"], []):
        subprocess.run(cmd + extra, check=True, timeout=240, cwd=tmp_path, capture_output=True)
    rows = records.read_csv(data_dir / "raw" / "cpu-test" / "decode.csv")
    graph = rows[rows.arm == "graph"]
    assert len(graph) == 2 and set(graph.status) == {"unavailable"}  # first run + the retry, none from the third
    assert (rows[rows.arm == "eager"].status == "ok").sum() == 2  # the eager cell was never measured again


def test_retry_errors_makes_a_cell_recorded_only_as_error_pending_again(tmp_path):
    """SweepPlan.retry_errors (CLI --retry-errors, closing_the_gap.measure(retry_errors=True)): a cell whose only row is
    `error` or `oom` (the lean decoder's copies, before it could share the model's storage) is pending again; an ok
    cell never is; without the flag neither is."""
    path = tmp_path / "raw" / "g" / "decode.csv"
    base = dict(run_id="r1", session=0, gpu="g", model="m", ctx=16, max_cache_len=None, attn="sdpa", quant="bf16",
                step=None, step_ms=None)
    records.append_rows(path, records.DECODE, [
        dict(base, arm="lean_compile", status="error", reason="FailOnRecompileLimitHit"),
        dict(base, arm="lean_graph", max_cache_len=40, step=0, step_ms=1.0, status="ok", reason=""),
        dict(base, arm="lean_attn_graph", status="oom", reason="out of memory: the lean decoder's copies")])
    arms = ("lean_graph", "lean_compile", "lean_attn_graph")
    plan = sweep.SweepPlan(gpu="g", models=("m",), contexts=(16,), arms=arms, sessions=1)
    runs.update_env("g", tmp_path, "r1", plan=asdict(plan))  # r1 was a run of this plan's sweep
    assert plan.pending(0, tmp_path) == []
    retried = sweep.SweepPlan(**{**asdict(plan), "retry_errors": True}).pending(0, tmp_path)
    assert [c.arm for c in retried] == ["lean_compile", "lean_attn_graph"]


@pytest.mark.slow  # quantises and profiles a model: seconds
def test_kernel_profiles_of_a_quantised_model_record_its_path_or_why_it_cannot_run(data_dir):
    """record_kernels with an int4 path quantises the model (tinygemm runs on the CPU) and keys its rows by the path;
    profiling itself needs CUDA, so every row is `unavailable` with that reason. A path that cannot run here at all
    (AWQ's Triton GEMM on a CPU) says so in its rows, without profiling."""
    profile.record_kernels("cpu-test", ["llama-tiny"], [16], arms=["lean"], data=data_dir, device="cpu",
                            quant="int4-tinygemm")
    profile.record_kernels("cpu-test", ["llama-tiny"], [16], arms=["lean"], data=data_dir, device="cpu",
                            quant="awq-triton")
    with open(data_dir / "raw" / "cpu-test" / "kernels.csv") as fh:
        rows = {r["quant"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {"int4-tinygemm", "awq-triton"}
    assert rows["int4-tinygemm"]["status"] == "unavailable" and "CUDA" in rows["int4-tinygemm"]["reason"]
    assert rows["awq-triton"]["status"] == "unavailable" and "awq" in rows["awq-triton"]["reason"].lower()
    with open(data_dir / "raw" / "cpu-test" / "breakdown.csv") as fh:
        assert sorted(r["quant"] for r in csv.DictReader(fh)) == ["awq-triton", "int4-tinygemm"]


@pytest.mark.slow  # quantises and profiles a model: seconds
def test_kernel_profiles_build_no_model_whose_steps_are_all_profiled(data_dir, monkeypatch):
    """A second record_kernels over the same steps builds no model and writes no row; one more context builds the
    model once more and profiles that context alone (the unavailable rows of a CPU count as profiled)."""
    built = []
    build = models.build_model
    monkeypatch.setattr(models, "build_model", lambda *a, **k: built.append(a[0].key) or build(*a, **k))
    profile.record_kernels("cpu-test", ["llama-tiny"], [16], arms=["lean"], data=data_dir, device="cpu",
                            quant="int4-tinygemm")
    kernels = data_dir / "raw" / "cpu-test" / "kernels.csv"
    first = kernels.read_text()
    profile.record_kernels("cpu-test", ["llama-tiny"], [16], arms=["lean"], data=data_dir, device="cpu",
                            quant="int4-tinygemm")
    assert built == ["llama-tiny"] and kernels.read_text() == first
    profile.record_kernels("cpu-test", ["llama-tiny"], [16, 32], arms=["lean"], data=data_dir, device="cpu",
                            quant="int4-tinygemm")
    with open(kernels) as fh:
        assert sorted(int(r["ctx"]) for r in csv.DictReader(fh)) == [16, 32]
    assert built == ["llama-tiny", "llama-tiny"]


def test_a_plan_numbered_after_another_adds_sessions_of_its_own():
    """first_session: a headline plan after a grid of 3 sessions measures sessions 3-4, none of the grid's."""
    grid = sweep.SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(16,), arms=("eager",), sessions=3,
                           device="cpu")
    headline = dataclasses.replace(grid, sessions=2, first_session=3)
    assert list(grid.session_ids) == [0, 1, 2] and list(headline.session_ids) == [3, 4]
    assert [headline.key(s, c)[0] for s in headline.session_ids for c in headline.cells(s)] == ["3", "4"]
    with pytest.raises(inputs.InputError):
        dataclasses.replace(grid, first_session=-1)


def test_measure_ab_numbers_the_headline_sessions_after_the_grid(data_dir, monkeypatch):
    plans = []
    monkeypatch.setattr(cuda_graphs_ab, "run_sweep", lambda plan, data, progress=True: plans.append(plan) or "run")
    monkeypatch.setattr(cuda_graphs_ab.runs, "update_env", lambda *a, **k: None)
    cuda_graphs_ab.measure("cpu-test", ["llama-tiny"], [16, 32], headline_ctx=16, sessions=3, headline_sessions=10,
                          device="cpu", data=data_dir, progress=False)
    grid, headline = plans
    assert list(grid.session_ids) == [0, 1, 2] and grid.arms == ("eager", "graph", "compile")
    assert list(headline.session_ids) == list(range(3, 13)) and headline.contexts == (16,)


def test_a_part_measured_headline_sweep_is_not_topped_up(data_dir, monkeypatch, capsys):
    """The headline statistic reads one run: with 3 of the 10 headline sessions' cells on disk (one of them in part),
    measure runs the grid and leaves the headline sweep to `again`, saying so; with none on disk, with all of them,
    or with `again`, the headline sweep is run as planned (run_sweep finds nothing to do when all are there)."""
    plans = []
    monkeypatch.setattr(cuda_graphs_ab, "run_sweep", lambda plan, data, progress=True: plans.append(plan) or "run")
    monkeypatch.setattr(cuda_graphs_ab.runs, "update_env", lambda *a, **k: None)
    cells = {}

    def pending_by_session(plan, data, rows=None):  # the first cells[session] cells of a session done
        return {s: plan.cells(s)[cells.get(s, 0):] for s in plan.session_ids}

    monkeypatch.setattr(cuda_graphs_ab.SweepPlan, "pending_by_session", pending_by_session)
    run = dict(headline_ctx=16, sessions=3, headline_sessions=10, device="cpu", data=data_dir, progress=False)
    cells.update({3: 2, 4: 2, 5: 1})  # llama-tiny at ctx 16: 2 cells a session (eager, graph)
    cuda_graphs_ab.measure("cpu-test", ["llama-tiny"], [16, 32], **run)
    assert [p.contexts for p in plans] == [(16, 32)]  # the grid alone
    assert "not topped up: 3 of its 10 sessions have rows of an earlier run" in capsys.readouterr().out
    for done, again in (({}, False), ({s: 2 for s in range(3, 13)}, False), ({3: 2, 4: 2, 5: 1}, True)):
        plans.clear()
        cells.clear()
        cells.update(done)
        cuda_graphs_ab.measure("cpu-test", ["llama-tiny"], [16, 32], again=again, **run)
        assert [p.contexts for p in plans] == [(16, 32), (16,)], (done, again)


def test_pending_by_session_reads_the_file_once_and_agrees_with_pending(tmp_path):
    """SweepPlan.pending_by_session: per session the cells `pending` names, from one read of the CSV or from rows read
    already (rows_on_disk, shared by plans of one file); a missing file leaves every cell pending."""
    path = tmp_path / "raw" / "g" / "decode.csv"
    base = dict(run_id="r1", gpu="g", model="m", ctx=16, max_cache_len=40, attn="sdpa", quant="bf16", step=0,
                step_ms=1.0, status="ok", reason="")
    plan = sweep.SweepPlan(gpu="g", models=("m",), contexts=(16,), arms=("lean_graph", "lean_compile"), sessions=3)
    assert {s: len(c) for s, c in plan.pending_by_session(tmp_path).items()} == {0: 2, 1: 2, 2: 2}
    assert len(plan.rows_on_disk(tmp_path)) == 0
    records.append_rows(path, records.DECODE, [dict(base, session=0, arm="lean_graph"),
                                               dict(base, session=0, arm="lean_compile"),
                                               dict(base, session=1, arm="lean_compile")])
    runs.update_env("g", tmp_path, "r1", plan=asdict(plan))
    by_session = plan.pending_by_session(tmp_path)
    assert by_session == {s: plan.pending(s, tmp_path) for s in plan.session_ids}
    assert [c.arm for c in by_session[1]] == ["lean_graph"] and len(by_session[0]) == 0 and len(by_session[2]) == 2
    assert plan.pending_by_session(tmp_path, plan.rows_on_disk(tmp_path)) == by_session


def test_a_sweep_measures_what_the_readers_would_not_read_without_it(tmp_path):
    """Resume and the readers agree on what a session of a cell is (selection.sweep_of, roofline.widest_sweep): a
    session a narrower sweep measured (fewer contexts, a run without a plan) leaves this plan's cell pending, since
    the readers would not pool it with this sweep's; a run of the same contexts and arms (the same sweep, cut and
    started again, whatever its models or session count) counts; a cell a wider sweep of the same band timed is
    done in every session (the readers read that sweep there), and a wider sweep's rows in another band are not."""
    path = tmp_path / "raw" / "g" / "decode.csv"
    base = dict(session=0, gpu="g", model="m", ctx=16, max_cache_len=40, attn="sdpa", quant="bf16", step=0,
                step_ms=1.0, status="ok", reason="", arm="lean_graph")
    plan = sweep.SweepPlan(gpu="g", models=("m",), contexts=(16, 32), arms=("lean_graph", "lean_compile"),
                           sessions=2)
    ladder = sweep.SweepPlan(gpu="g", models=("m",), contexts=(16,), arms=("lean_graph",), sessions=1)
    records.append_rows(path, records.DECODE, [dict(base, run_id="ladder"), dict(base, run_id="no-plan")])
    runs.update_env("g", tmp_path, "ladder", plan=asdict(ladder))
    assert [len(plan.pending(s, tmp_path)) for s in (0, 1)] == [4, 4]  # neither the ladder's nor the plan-less run's
    assert ladder.pending(0, tmp_path) == []  # the ladder's own session does, for the ladder
    records.append_rows(path, records.DECODE, [dict(base, run_id="cut")])
    runs.update_env("g", tmp_path, "cut", plan=asdict(sweep.SweepPlan(**{**asdict(plan), "models": ("m", "n"),
                                                                          "sessions": 3})))
    assert [(c.ctx, c.arm) for c in plan.pending(0, tmp_path)] == [(16, "lean_compile"), (32, "lean_graph"),
                                                                    (32, "lean_compile")]
    assert len(plan.pending(1, tmp_path)) == 4
    # the run going on always counts its own rows, plan or not
    assert [c.arm for c in plan.pending(0, tmp_path, run_id="no-plan")] == ["lean_compile", "lean_graph",
                                                                            "lean_compile"]
    # a wider sweep (three contexts) timed (32, lean_compile) in its session 0: the cell is done for this plan in both
    # its sessions; a wider sweep's `error` row alone leaves the cell pending
    wide = sweep.SweepPlan(gpu="g", models=("m",), contexts=(16, 32, 64), arms=("lean_compile",), sessions=1)
    runs.update_env("g", tmp_path, "wide", plan=asdict(wide))
    records.append_rows(path, records.DECODE, [dict(base, run_id="wide", ctx=32, arm="lean_compile"),
                                               dict(base, run_id="wide", ctx=16, arm="lean_compile", step=None,
                                                    step_ms=None, status="error", reason="boom")])
    assert [(c.ctx, c.arm) for c in plan.pending(1, tmp_path)] == [(16, "lean_compile"), (16, "lean_graph"),
                                                                    (32, "lean_graph")]
    scope = sweep.SweepPlan(**{**asdict(plan), "first_session": 100})  # the same cells in the scope band
    assert len(scope.pending(100, tmp_path)) == 4  # no row of the grid band counts there, the wide sweep's neither
    headline = sweep.SweepPlan(**{**asdict(plan), "first_session": 3})  # sessions of its own after another's
    assert len(headline.pending(3, tmp_path)) == 4  # the wide sweep's cell is not done for it
    plans = selection.run_plans(tmp_path)
    assert selection.sweep_of(plans[("g", "cut")], "cut") == selection.sweep_of(asdict(plan), "")
    assert selection.sweep_of(plans[("g", "ladder")], "ladder") < selection.sweep_of(asdict(plan), "") < \
        selection.sweep_of(plans[("g", "wide")], "wide")


def test_a_reference_plan_reads_a_cell_from_any_sweep_that_timed_it_unless_it_timed_it_itself(tmp_path):
    """SweepPlan.reference (notebook 04's bf16 cells): a cell a narrower sweep timed (the ladder's session 0 at one
    context) is done in every session, read from that sweep; a cell this plan's sweep timed some sessions of is read
    from this sweep, so its missing sessions are measured, whatever another sweep timed (the H100's bf16 lean cells at
    ctx 2048 on 2026-12-06: sessions 1 and 2 of notebook 04's sweep, session 0 the ladder's); decided per cell."""
    path = tmp_path / "raw" / "g" / "decode.csv"
    base = dict(gpu="g", model="m", max_cache_len=40, attn="sdpa", quant="bf16", step=0, step_ms=1.0, status="ok",
                reason="")
    plan = sweep.SweepPlan(gpu="g", models=("m",), contexts=(16, 32), arms=("lean_graph",), sessions=3,
                           reference=True)
    ladder = sweep.SweepPlan(gpu="g", models=("m",), contexts=(16,), arms=("lean_graph", "lean_compile"), sessions=1)
    runs.update_env("g", tmp_path, "ladder", plan=asdict(ladder))
    runs.update_env("g", tmp_path, "mine", plan=asdict(plan))
    records.append_rows(path, records.DECODE, [dict(base, run_id="ladder", session=0, ctx=16, arm="lean_graph"),
                                               dict(base, run_id="ladder", session=0, ctx=32, arm="lean_graph")])
    assert {s: len(c) for s, c in plan.pending_by_session(tmp_path).items()} == {0: 0, 1: 0, 2: 0}
    records.append_rows(path, records.DECODE, [dict(base, run_id="mine", session=s, ctx=16, arm="lean_graph")
                                               for s in (1, 2)])
    assert [(s, c.ctx) for s in plan.session_ids for c in plan.pending(s, tmp_path)] == [(0, 16)]
    plain = sweep.SweepPlan(**{**asdict(plan), "reference": False})  # the same plan not a reference: the ladder's
    assert [(s, c.ctx) for s in plain.session_ids for c in plain.pending(s, tmp_path)] == [  # narrower: no stand-in
        (0, 16), (0, 32), (1, 32), (2, 32)]
