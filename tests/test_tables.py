"""tables: findings written as data beside the tables."""

import pandas as pd

from decodegap import tables


def test_say_prints_and_writes_the_findings_as_data(tmp_path, capsys):
    lines = tables.say(["a 1.50 ms step", 2.0], "09_findings", tmp_path)
    assert lines == ["a 1.50 ms step", "2.0"]
    assert capsys.readouterr().out == "- a 1.50 ms step\n- 2.0\n"
    assert pd.read_csv(tmp_path / "09_findings.csv")["finding"].tolist() == ["a 1.50 ms step", "2.0"]
    assert (tmp_path / "09_findings.md").read_text() == "- a 1.50 ms step\n- 2.0\n"
