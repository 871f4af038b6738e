"""Session numbers in bands, one per kind of sweep (decodegap.sessions): the bands by hand, a plan refused before it
numbers a session outside its band, and notebook 07's readers taking its band alone, on the shipped rows too."""

from __future__ import annotations

import pandas as pd
import pytest

from decodegap import inputs, levers, paths, records, selection, sessions
from decodegap.analysis import where_the_thesis_ends as scope_analysis
from decodegap.claims import rules
from decodegap.experiments import where_the_thesis_ends as scope
from decodegap.harness.sweep import SweepPlan


@pytest.mark.parametrize("session, band", [(0, "grid"), (9, "grid"), (99, "grid"), (100, "scope"), (199, "scope"),
                                           (200, "confirm"), (202, "confirm"), (300, None)])
def test_band_of(session, band):
    assert sessions.band_of(session) == band


def test_the_sweeps_number_from_their_bands():
    assert scope.FIRST_SESSION == 100 and levers.CONFIRM_FIRST_SESSION == 200
    assert scope.FIRST_SESSION == sessions.SCOPE.start


@pytest.mark.parametrize("first, n, why", [(98, 3, "sessions 98 to 100 leave the band of session numbers their "
                                                   "sweep reads them by (its band 'grid' ends at session 99"),
                                           (100, 101, "its band 'scope' ends at session 199"),
                                           (300, 1, "sessions 300 to 300 leave the band")])
def test_a_plan_whose_sessions_leave_their_band_is_refused(first, n, why):
    with pytest.raises(inputs.InputError, match=why.replace("(", r"\(")):
        SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(16,), sessions=n, first_session=first)


def test_a_plan_inside_its_band_stands():
    plan = SweepPlan(gpu="cpu-test", models=("llama-tiny",), contexts=(16,), sessions=3,
                     first_session=levers.CONFIRM_FIRST_SESSION)
    assert list(plan.session_ids) == [200, 201, 202]


def _rows(session: int, run: str, ms: float) -> dict:
    return dict(gpu="h200", model="llama-3.2-1b", ctx=32, batch=1, arm="graph", attn="sdpa", quant="bf16",
                run_id=run, session=session, t_obs_ms=ms)


def test_notebook_07_reads_its_band_alone():
    """A confirmation of the same cell, newer and in the band above, is no row of notebook 07's sweeps (it was, while
    the selector read every session from 100); the grid's below never was."""
    rows = pd.DataFrame([_rows(5, "20261201T000000-aaaaaa", 1.0), _rows(100, "20261202T000000-bbbbbb", 2.0),
                         _rows(200, "20261204T000000-cccccc", 3.0)])
    kept = scope_analysis.scope_rows(rows)
    assert list(kept["session"]) == [100] and list(kept["t_obs_ms"]) == [2.0]
    for query in (rules.SCOPE_CELLS.query, rules.SCOPE_VERIFY.query):  # the claims' rules read the same rows
        assert list(rows.assign(status="ok", check="vs_eager").query(query)["session"]) == [100]


def test_the_shipped_axes_sessions_are_their_bands_and_no_other_sweep_is_in_them():
    decode = records.load_experiment("decode", paths.DATA)
    plans = {run: (plan or {}).get("first_session", 0) for (_, run), plan in selection.run_plans(paths.DATA).items()}
    first = decode["run_id"].map(plans).fillna(0).astype(int)
    for name, band in sessions.BANDS.items():
        ours = first.isin(band)
        assert sessions.in_band(decode.loc[ours, "session"], band).all(), name
        assert not sessions.in_band(decode.loc[~ours, "session"], band).any(), name


# --- each cell's newest measurement (selection.newest_measurement) -------------------------------------------------
MEASURED = """
run_id, session, cell, step_ms
20261202T100000-aaaaaa, 100, a, 1.0
20261204T100000-bbbbbb, 100, a, 2.0
20261204T100000-bbbbbb, 101, a, 2.0
20261204T110000-cccccc, 102, a, 3.0
20261202T100000-aaaaaa, 100, b, 5.0
20261204T110000-cccccc, 101, b, 6.0
20261204T100000-bbbbbb, 100, c, 7.0
20261204T110000-cccccc, 100, c, 8.0
"""


def test_newest_measurement_replaces_an_old_run_whole_and_keeps_a_resumed_ones_sessions():
    import io

    import pandas as pd

    from decodegap import selection

    rows = pd.read_csv(io.StringIO(MEASURED), skipinitialspace=True)
    kept = selection.newest_measurement(rows, ["cell"])
    by_cell = {c: sorted(zip(g.session, g.step_ms)) for c, g in kept.groupby("cell")}
    # a: measured again from its first session (run b), then resumed (run c): old run a dropped, b's and c's sessions
    assert by_cell["a"] == [(100, 2.0), (101, 2.0), (102, 3.0)]
    # b: no newer measurement of its first session, so the run that resumed it (c) joins the old one
    assert by_cell["b"] == [(100, 5.0), (101, 6.0)]
    # c: two runs of the same session: the newer one alone
    assert by_cell["c"] == [(100, 8.0)]
    assert selection.newest_measurement(rows.iloc[0:0], ["cell"]).empty
