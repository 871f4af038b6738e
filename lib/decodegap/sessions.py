"""Session numbers, one band per kind of sweep, so that rows of one cell measured by different sweeps never stand in
for each other: a sweep numbers its sessions from its band's start (harness.sweep.SweepPlan.first_session, which
refuses a plan whose sessions leave the band they start in), and a reader picks a sweep's rows by its band.

  GRID     the grid sweeps of notebooks 01-06 (notebook 02's headline sessions follow its grid's in the same band)
  SCOPE    notebook 07's batch and model-size axes (experiments.where_the_thesis_ends)
  CONFIRM  notebook 06's confirmation sweeps: each cell's chosen lever beside its runner-up, and the megakernel cell's
"""

from __future__ import annotations

GRID = range(0, 100)
SCOPE = range(100, 200)
CONFIRM = range(200, 300)
BANDS = {"grid": GRID, "scope": SCOPE, "confirm": CONFIRM}


def in_band(session, band: range):
    """Whether `session` (a number, or a pandas Series of them) lies in `band`."""
    return (session >= band.start) & (session < band.stop)


def band_of(session: int) -> str | None:
    """The name of the band `session` lies in; None for a number outside every band."""
    return next((name for name, band in BANDS.items() if session in band), None)
