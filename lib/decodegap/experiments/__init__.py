"""The paper's experiments, one module per notebook, above the harness (harness.sweep, harness.profile, ...) and the
analysis modules (decodegap.analysis.*, roofline, ...): each owns its measurement plan and its measuring code
(through the one sweep harness), its selection of raw rows, its tables and its findings, and the notebook, the CLI
and the claims table read them from it. Data flow one way: measure -> raw rows -> validated frames -> tables -> findings ->
figures, claims, README; nothing that measures imports an experiment.

Each module has the same small interface (notebook 05's cost experiment measures nothing: no plan, no measure):
    NOTEBOOK          the notebook's stem
    plan(gpu, ...)    the sweeps (sweep.SweepPlan) its measurement runs (where the harness exposes them)
    measure(gpu, ...) its measurements into data/raw/<gpu>/
    rows(data, ...)   the validated raw rows its tables read, each cell from one sweep
    tables(data, ...) its tables by name: a dict of DataFrames (and the configs they were computed with)
    findings(t)       its findings from those tables: {figures stem: [sentences]}, written by tables.say
"""
