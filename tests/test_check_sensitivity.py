"""check_sensitivity: how far the decode check tells faults from correct arms, from diagnostic rows, by hand."""

import pandas as pd
import pytest

from decodegap.analysis import check_sensitivity


def _rows():
    def r(case, err, model="a", factor=1.0):
        return dict(device="gpu", model=model, ctx=2048, arm="lean", case=case, sharpen=factor, max_rel_err=err,
                    status="ok")
    return pd.DataFrame([r("as built", 0.05), r("as built", 0.02, "b"), r("rotary sign-flipped", 1.5),
                         r("rotary sign-flipped", 0.9, "b"), r("cache read one slot off", 0.06),
                         r("as built", 0.5, factor=16.0), r("rotary sign-flipped", 1.6, factor=16.0)])


def test_the_table_keeps_each_faults_weakest_error_and_the_largest_correct_one():
    t = check_sensitivity.table(_rows()).set_index(["sharpen", "case"])
    assert t.loc[(1.0, "as built"), "max_rel_err_max"] == 0.05 and t.loc[(1.0, "as built"), "rows"] == 2
    assert t.loc[(1.0, "rotary sign-flipped"), "max_rel_err_min"] == 0.9


def test_findings_say_what_is_caught_missed_and_when_the_check_vouches_for_nothing():
    plain, sharp = check_sensitivity.findings(check_sensitivity.table(_rows()), tol=0.1)
    v = plain.values
    assert (v["sharpen"], v["correct_max"], v["checks"], v["models"], v["within_tolerance"]) == (1.0, 0.05, 2, 2, True)
    assert (v["caught"], v["missed"]) == ("rotary sign-flipped", "cache read one slot off")
    assert v["margin"] == pytest.approx(0.9 / 0.05)
    assert f"{v['margin']:.0f}x the largest correct error" in plain  # the sentence renders its values
    assert (sharp.values["sharpen"], sharp.values["correct_max"], sharp.values["within_tolerance"]) == (16.0, 0.5, False)


def test_no_diagnostic_gives_no_rows(tmp_path):
    assert check_sensitivity.load(tmp_path).empty and check_sensitivity.table(check_sensitivity.load(tmp_path)).empty
