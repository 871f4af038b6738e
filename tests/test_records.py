"""Raw CSV records: round trip, schema errors that name file/line/column, cut tails, resume keys."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from decodegap import records, selection
from decodegap.records import DECODE, SchemaError

HEADER = ",".join(DECODE.names) + "\n"
LEGACY = ",".join(DECODE.legacy_names) + "\n"  # a file written before the batch column (its rows read as batch 1)


def rows(session=0, arm="eager", n=3, run_id="r1", ctx=16, warmup=0):
    base = dict(run_id=run_id, session=session, gpu="g", model="llama-tiny", ctx=ctx, max_cache_len=ctx + warmup + n,
                arm=arm, attn="sdpa", quant="bf16", reason="")
    out = [dict(base, step=i, step_ms=0.5 + i, status="warmup") for i in range(warmup)]
    out += [dict(base, step=i, step_ms=1.25 + i / 8, status="ok") for i in range(n)]
    return out


def status_row(session=0, arm="graph", status="unavailable", reason="CUDA graphs need a CUDA device", ctx=16):
    return dict(run_id="r1", session=session, gpu="g", model="llama-tiny", ctx=ctx, max_cache_len=None, arm=arm,
                attn="sdpa", quant="bf16", step=None, step_ms=None, status=status, reason=reason)


def test_round_trip(tmp_path):
    path = tmp_path / "decode.csv"
    records.append_rows(path, DECODE, rows(0, "eager", 3, warmup=1))
    records.append_rows(path, DECODE, [status_row()])
    records.append_rows(path, DECODE, rows(1, "hf_default", 2))
    text = path.read_text()
    assert text.count("run_id,") == 1  # one header, written with the first block only
    assert text.startswith(HEADER)
    assert len(text.splitlines()) == 1 + 4 + 1 + 2
    frame = records.read_csv(path)
    assert list(frame.columns) == DECODE.names
    assert len(frame) == 7
    assert list(frame["status"]) == ["warmup", "ok", "ok", "ok", "unavailable", "ok", "ok"]
    assert list(frame["step_ms"].iloc[:4]) == [0.5, 1.25, 1.375, 1.5]  # floats survive exactly (repr)
    assert list(frame["session"]) == [0, 0, 0, 0, 0, 1, 1]
    assert frame["ctx"].tolist() == [16] * 7
    graph = frame.iloc[4]
    assert graph["reason"] == "CUDA graphs need a CUDA device"
    assert math.isnan(graph["step_ms"])
    assert frame.iloc[1]["max_cache_len"] == 16 + 1 + 3


def test_empty_rows_write_nothing(tmp_path):
    path = tmp_path / "decode.csv"
    records.append_rows(path, DECODE, [])
    assert not path.exists()


def test_a_row_lacking_a_column_is_refused(tmp_path):
    row = rows()[0]
    del row["step_ms"]
    with pytest.raises(SchemaError, match="step_ms"):
        records.append_rows(tmp_path / "decode.csv", DECODE, [row])


def test_schema_error_names_file_line_and_column(tmp_path):
    path = tmp_path / "decode.csv"
    records.append_rows(path, DECODE, rows(n=3))
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace(",2.375,", ",fast,").replace(",1.375,", ",fast,")  # line 3 = 2nd data row
    assert "fast" in lines[2]
    path.write_text("".join(lines))
    with pytest.raises(SchemaError) as err:
        records.read_csv(path)
    msg = str(err.value)
    assert str(path) in msg and ":3:" in msg and "step_ms" in msg and "'fast'" in msg


def test_bad_status_and_missing_field_and_empty_required_value(tmp_path):
    path = tmp_path / "decode.csv"
    path.write_text(LEGACY + "r1,0,g,m,16,19,eager,sdpa,bf16,0,1.0,great,\n")
    with pytest.raises(SchemaError, match=r":2: column 'status' is 'great'"):
        records.read_csv(path)
    path.write_text(LEGACY + "r1,0,g,m,16,19,eager,sdpa,bf16,0,1.0,ok,\n" + "r1,0,g,m,16,19,eager,sdpa\n")
    with pytest.raises(SchemaError, match=r":3: 8 fields where 13 are expected; first missing column: 'quant'"):
        records.read_csv(path)
    # step_ms may be empty on a status row, not on an ok row
    path.write_text(LEGACY + "r1,0,g,m,16,,graph,sdpa,bf16,,,unavailable,no cuda\n" + "r1,0,g,m,16,19,eager,sdpa,bf16,0,,ok,\n")
    with pytest.raises(SchemaError, match=r":3: column 'step_ms' is empty on a 'ok' row"):
        records.read_csv(path)


def test_header_mismatch(tmp_path):
    path = tmp_path / "decode.csv"
    path.write_text(HEADER.replace("step_ms", "step_s") + "r1,0,g,m,16,19,eager,sdpa,bf16,0,1.0,ok,\n")
    with pytest.raises(SchemaError) as err:
        records.read_csv(path)
    msg = str(err.value)
    assert f"{path}:1:" in msg and "header" in msg
    assert "missing ['step_ms']" in msg and "unexpected ['step_s']" in msg


def test_unknown_experiment_name(tmp_path):
    with pytest.raises(SchemaError) as err:
        records.schema_for("latency")
    msg = str(err.value)
    assert "'latency'" in msg and "decode" in msg and "bandwidth" in msg and "kernels" in msg
    path = tmp_path / "latency.csv"  # read_csv takes the schema from the file's stem
    path.write_text(HEADER)
    with pytest.raises(SchemaError, match="no schema for experiment 'latency'"):
        records.read_csv(path)


def test_header_only_file_reads_as_empty_frame(tmp_path):
    path = tmp_path / "decode.csv"
    path.write_text(HEADER)
    frame = records.read_csv(path)
    assert frame.empty and list(frame.columns) == DECODE.names


def _write_three_cells_then_cut(path, keep_chars: int):
    """Three cells; the last one (4 lines) cut `keep_chars` characters into its 3rd line."""
    records.append_rows(path, DECODE, rows(0, "eager", 3))
    records.append_rows(path, DECODE, [status_row(0, "graph")])
    records.append_rows(path, DECODE, rows(0, "hf_default", 3, warmup=1))
    full = path.read_text()
    lines = full.splitlines(keepends=True)
    assert len(lines) == 1 + 3 + 1 + 4
    intact = "".join(lines[:5])
    cut_block = lines[5:7] + [lines[7][:keep_chars]]
    path.write_text(intact + "".join(cut_block))
    return intact, cut_block


def test_truncated_csv_is_refused_then_repaired(tmp_path):
    path = tmp_path / "decode.csv"
    intact, cut_block = _write_three_cells_then_cut(path, keep_chars=47)  # cut inside the step_ms field
    assert cut_block[-1].count(",") == 10
    with pytest.raises(SchemaError) as err:
        records.read_csv(path)
    assert "incomplete" in str(err.value) and str(path) in str(err.value)
    moved = records.repair_tail(path, DECODE)
    assert moved == 3  # the cut line and the two complete lines of the same cell before it
    assert path.read_text() == intact  # every earlier row intact, byte for byte
    partial = path.with_name("decode.csv.partial")
    assert partial.read_text() == "".join(cut_block) + "\n"
    frame = records.read_csv(path)
    assert len(frame) == 4 and "hf_default" not in set(frame["arm"])
    assert records.repair_tail(path, DECODE) == 0  # nothing more to do


def test_repair_keeps_what_earlier_repairs_moved(tmp_path):
    path = tmp_path / "decode.csv"
    _, first = _write_three_cells_then_cut(path, keep_chars=47)
    records.repair_tail(path, DECODE)
    records.append_rows(path, DECODE, rows(1, "eager", 2))
    path.write_text(path.read_text()[:-5])
    records.repair_tail(path, DECODE)
    partial = path.with_name("decode.csv.partial").read_text().splitlines()
    assert len(partial) == 3 + 2  # appended to, never overwritten
    assert partial[:3] == [line.rstrip("\n") for line in first]


def test_append_after_a_cut_tail_repairs_first(tmp_path):
    path = tmp_path / "decode.csv"
    intact, _ = _write_three_cells_then_cut(path, keep_chars=47)
    records.append_rows(path, DECODE, rows(0, "hf_default", 3, warmup=1))
    frame = records.read_csv(path)
    assert len(frame) == 4 + 4
    assert path.read_text().startswith(intact)
    assert frame["arm"].tolist() == ["eager"] * 3 + ["graph"] + ["hf_default"] * 4
    assert path.with_name("decode.csv.partial").exists()


def test_done_keys(tmp_path):
    path = tmp_path / "decode.csv"
    assert selection.done_keys(path, DECODE) == set()
    records.append_rows(path, DECODE, rows(0, "eager", 3))
    records.append_rows(path, DECODE, [status_row(1, "graph")])
    records.append_rows(path, DECODE, rows(1, "eager", 2, ctx=32))
    assert selection.done_keys(path, DECODE) == {
        ("0", "g", "llama-tiny", "16", "eager", "sdpa", "bf16", "1"),
        ("1", "g", "llama-tiny", "16", "graph", "sdpa", "bf16", "1"),
        ("1", "g", "llama-tiny", "32", "eager", "sdpa", "bf16", "1"),
    }


def test_done_keys_repairs_a_cut_tail(tmp_path):
    path = tmp_path / "decode.csv"
    _write_three_cells_then_cut(path, keep_chars=47)
    keys = selection.done_keys(path, DECODE)
    assert ("0", "g", "llama-tiny", "16", "hf_default", "sdpa", "bf16", "1") not in keys
    assert len(keys) == 2


def test_load_experiment_concatenates_gpus(tmp_path):
    for gpu, n in (("a", 2), ("b", 3)):
        records.append_rows(tmp_path / "raw" / gpu / "decode.csv", DECODE, rows(0, "eager", n))
    assert len(records.load_experiment("decode", tmp_path)) == 5
    assert len(records.load_experiment("decode", tmp_path, gpus=["b"])) == 3
    assert records.load_experiment("decode", tmp_path / "nowhere").empty


# --- defects in lib/decodegap/records.py, documented by failing tests ----------------------------------------

def test_cut_inside_the_last_key_column_moves_the_whole_block(tmp_path):
    path = tmp_path / "decode.csv"
    records.append_rows(path, DECODE, rows(0, "eager", 3))
    records.append_rows(path, DECODE, rows(0, "hf_default", 3))
    lines = path.read_text().splitlines(keepends=True)
    intact = "".join(lines[:4])
    cut = lines[-1][: lines[-1].index("bf16") + 2]  # '...,hf_default,sdpa,bf'
    path.write_text("".join(lines[:-1]) + cut)
    records.repair_tail(path, DECODE)
    assert path.read_text() == intact


def test_cut_header_is_repaired(tmp_path):
    path = tmp_path / "decode.csv"
    path.write_text(HEADER[:20])
    assert records.repair_tail(path, DECODE) == 1
    records.append_rows(path, DECODE, rows(0, "eager", 2))
    assert len(records.read_csv(path)) == 2


def test_writer_never_writes_what_the_reader_rejects(tmp_path):
    path = tmp_path / "decode.csv"
    row = dict(rows(0, "eager", 1)[0], max_cache_len=19.0, step=0.0)
    try:
        records.append_rows(path, DECODE, [row])
    except SchemaError:
        return  # refusing at write time is fine
    assert records.read_csv(path)["max_cache_len"].tolist() == [19]


def test_done_keys_can_retry_cells_that_were_only_unavailable(tmp_path):
    from decodegap import records as rec

    path = tmp_path / "decode.csv"
    base = dict(run_id="r", gpu="g", model="m", ctx=16, max_cache_len=None, attn="sdpa", quant="bf16", step=None,
                step_ms=None, reason="")
    rec.append_rows(path, rec.DECODE, [dict(base, session=0, arm="graph", status="unavailable", reason="no CUDA")])
    rec.append_rows(path, rec.DECODE, [dict(base, session=0, arm="eager", max_cache_len=20, step=0, step_ms=1.0,
                                            status="ok")])
    assert len(selection.done_keys(path, rec.DECODE)) == 2
    assert selection.done_keys(path, rec.DECODE, retry=("unavailable",)) == {
        ("0", "g", "m", "16", "eager", "sdpa", "bf16", "1")}


def test_done_keys_again_counts_only_the_run_going_on(tmp_path):
    from decodegap import records as rec

    path = tmp_path / "decode.csv"
    base = dict(gpu="g", model="m", ctx=16, max_cache_len=20, attn="sdpa", quant="bf16", step=0, step_ms=1.0,
                status="ok", reason="", session=0)
    rec.append_rows(path, rec.DECODE, [dict(base, run_id="old", arm="eager"), dict(base, run_id="new", arm="graph")])
    assert len(selection.done_keys(path, rec.DECODE, run_id="new")) == 2
    assert selection.done_keys(path, rec.DECODE, run_id="new", again=True) == {
        ("0", "g", "m", "16", "graph", "sdpa", "bf16", "1")}
    assert selection.done_keys(path, rec.DECODE, run_id="other", again=True) == set()


def test_latest_profiles_reads_each_step_from_its_latest_timed_profile():
    """Step A profiled twice (the later profile wins, never summed with the earlier); step B's later run only
    failed, so its earlier ok profile stays; step C never ran ok: its latest status rows."""
    def row(run, arm, status="ok", us=1.0):
        return dict(run_id=run, gpu="h200", model="m", ctx=2048, arm=arm, quant="bf16", status=status, gpu_us=us)

    rows = pd.DataFrame([row("20261201T10", "A", us=5.0), row("20261201T10", "A", us=5.0), row("20261201T12", "A"),
                         row("20261201T10", "B"), row("20261201T12", "B", "error", None),
                         row("20261201T10", "C", "error", None), row("20261201T11", "C", "unavailable", None)])
    kept = selection.latest_profiles(rows)
    assert kept.groupby("arm").run_id.unique().map(list).to_dict() == {
        "A": ["20261201T12"], "B": ["20261201T10"], "C": ["20261201T11"]}
    assert kept[kept.arm == "A"].gpu_us.sum() == 1.0


def test_verify_error_may_be_empty_and_reads_as_nan(tmp_path):
    """verify.csv rows written before checks.verify_arm failed NaN logits have an empty max_rel_err on `ok`."""
    path = tmp_path / "verify.csv"
    header = ",".join(records.VERIFY.legacy_names) + "\n"  # rows written before the batch column
    path.write_text(header + "r,0,h200,m,2048,graph,sdpa,gptq-exllamav2,,0.1,ok,,vs_eager,model,\n"
                    + "r,0,h200,m,2048,graph,sdpa,bf16,0.02,0.1,ok,,vs_eager,model,\n")
    rows = records.read_csv(path, records.VERIFY)
    assert rows.max_rel_err.isna().tolist() == [True, False] and rows.max_rel_err[1] == 0.02


@pytest.mark.parametrize("value, why", [("nan", "finite"), ("NaN", "finite"), ("inf", "finite"), ("-inf", "finite"),
                                        ("0", "above zero"), ("0.0", "above zero"), ("-1.5", "above zero")])
def test_an_ok_step_must_be_a_finite_positive_time(tmp_path, value, why):
    path = tmp_path / "decode.csv"
    records.append_rows(path, DECODE, rows(0, "eager", 3))
    lines = path.read_text().splitlines(keepends=True)
    fields = lines[2].rstrip("\n").split(",")
    fields[DECODE.names.index("step_ms")] = value
    lines[2] = ",".join(fields) + "\n"
    path.write_text("".join(lines))
    with pytest.raises(SchemaError) as err:
        records.read_csv(path)
    assert f"{path}:3: column 'step_ms' holds {value!r} on a 'ok' row" in str(err.value) and why in str(err.value)


def test_a_status_row_may_leave_its_time_empty_and_a_verify_nan_stays_allowed(tmp_path):
    path = tmp_path / "decode.csv"
    records.append_rows(path, DECODE, [status_row()])
    assert records.read_csv(path)["step_ms"].isna().all()
    verify = tmp_path / "verify.csv"
    verify.write_text(",".join(records.VERIFY.legacy_names) + "\nr,0,g,m,16,graph,sdpa,bf16,nan,0.1,ok,,vs_eager,model,\n")
    assert math.isnan(records.read_csv(verify)["max_rel_err"].iloc[0])


def test_a_duplicated_row_is_refused_with_both_lines(tmp_path):
    path = tmp_path / "decode.csv"
    records.append_rows(path, DECODE, rows(0, "eager", 3))
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines + [lines[2]]))
    with pytest.raises(SchemaError, match=rf"{path}:5: every column repeats line 3"):
        records.read_csv(path)


def test_a_truncated_file_names_its_last_line(tmp_path):
    path = tmp_path / "decode.csv"
    records.append_rows(path, DECODE, rows(0, "eager", 3))
    path.write_text(path.read_text()[:-5])  # the 4th line (header + 3 rows) loses its end
    with pytest.raises(SchemaError, match=rf"{path}:4: the last line is incomplete"):
        records.read_csv(path)


def test_one_step_written_twice_with_other_values_is_refused(tmp_path):
    path = tmp_path / "decode.csv"
    records.append_rows(path, DECODE, rows(0, "eager", 3))
    lines = path.read_text().splitlines(keepends=True)
    fields = lines[2].rstrip("\n").split(",")
    fields[DECODE.names.index("step_ms")] = "9.75"  # the same run, cell and step, another time
    path.write_text("".join(lines) + ",".join(fields) + "\n")
    with pytest.raises(SchemaError, match=rf"{path}:5: column 'step' repeats the row of line 3"):
        records.read_csv(path)
    other_run = fields.copy()
    other_run[0] = "r2"  # a later run of the same cell is history, not a duplicate
    path.write_text("".join(lines) + ",".join(other_run) + "\n")
    assert len(records.read_csv(path)) == 4


def test_superseded_rows_fill_only_the_cells_measured_again_nowhere(tmp_path):
    """selection.with_superseded: a cell of the new file hides the same cell's superseded rows; other superseded
    cells come in, labelled."""
    raw = tmp_path / "raw" / "g"
    new = [dict(r, quant="int4-tinygemm") for r in rows(0, "graph", 2)]
    old = [dict(r, quant="int4-tinygemm", run_id="old") for r in rows(0, "graph", 3) + rows(0, "lean_graph", 2)]
    records.append_rows(raw / "decode.csv", DECODE, new)
    records.append_rows(raw / f"decode{records.SYNTHESISED}.csv", records.schema_for("decode" + records.SYNTHESISED), old)
    got = selection.with_superseded("decode", tmp_path)
    assert len(got) == 2 + 2  # the graph cell from the new file only, the lean_graph cell from the old one
    assert set(got[got.arm == "graph"].weights) == {"rtn from bf16"}
    assert set(got[got.arm == "lean_graph"].weights) == {"synthesised (superseded)"}


def test_run_plans_reads_each_runs_plan_from_every_gpus_env_json(tmp_path):
    import json

    for gpu, env in (("h200", {"r1": {"plan": {"contexts": [2048]}}, "r2": {"experiment": "bandwidth"}}),
                     ("l4", {"r3": {"plan": "not a plan"}})):
        (tmp_path / "raw" / gpu).mkdir(parents=True)
        (tmp_path / "raw" / gpu / "env.json").write_text(json.dumps(env))
    assert selection.run_plans(tmp_path) == {("h200", "r1"): {"contexts": [2048]}, ("h200", "r2"): None,
                                             ("l4", "r3"): None}
    assert selection.run_plans(tmp_path, "h200") == {("h200", "r1"): {"contexts": [2048]}, ("h200", "r2"): None}
    assert selection.run_plans(tmp_path, "l4") == {("l4", "r3"): None}
    assert selection.run_plans(tmp_path, "h100-sxm") == {}
