"""tables: findings written as data beside the tables."""

import pandas as pd

from decodegap import tables
from decodegap.finding import Finding, frame


def test_say_prints_and_writes_the_findings_as_data(tmp_path, capsys):
    lines = tables.say(["a 1.50 ms step", 2.0], "09_findings", tmp_path)
    assert lines == ["a 1.50 ms step", "2.0"]
    assert capsys.readouterr().out == "- a 1.50 ms step\n- 2.0\n"
    assert pd.read_csv(tmp_path / "09_findings.csv")["finding"].tolist() == ["a 1.50 ms step", "2.0"]
    assert (tmp_path / "09_findings.md").read_text() == "- a 1.50 ms step\n- 2.0\n"


def test_a_findings_values_are_written_beside_it_as_columns(tmp_path):
    lines = [Finding("a 1.50 ms step", step_ms=1.5, gpu="h200"), "no numbers here", Finding("x2.00", ratio=2.0)]
    assert frame(lines).columns.tolist() == ["finding", "step_ms", "gpu", "ratio"]
    tables.say(lines, "09_findings", tmp_path)
    written = pd.read_csv(tmp_path / "09_findings.csv")
    assert written["step_ms"].tolist()[0] == 1.5 and written["step_ms"].isna().tolist() == [False, True, True]
    assert written["ratio"].tolist()[2] == 2.0 and written["finding"].tolist()[1] == "no numbers here"
    assert (tmp_path / "09_findings.md").read_text() == "- a 1.50 ms step\n- no numbers here\n- x2.00\n"


def test_a_missing_value_reads_as_a_dash_in_markdown_and_empty_in_the_csv(tmp_path):
    table = pd.DataFrame(dict(lever=["a", None], t_obs_ms=[1.23456, float("nan")], sessions=[3, 0]))
    csv_path, md_path = tables.write_table(table, "t", tmp_path)
    rows = md_path.read_text().splitlines()[2:]
    assert [[cell.strip() for cell in row.strip("|").split("|")] for row in rows] == [["a", "1.235", "3"],
                                                                                       ["-", "-", "0"]]
    assert csv_path.read_text().splitlines()[1:] == ["a,1.235,3", ",,0"]
