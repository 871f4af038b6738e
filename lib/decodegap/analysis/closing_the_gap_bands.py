"""Notebook 06's cross-check of its sweeps: the same lever on the same cell (GPU, model, context, arm, attention,
quantisation, batch, cache length) measured by sweeps of different session bands (sessions.BANDS: the grid's selection sweeps, notebook 07's
axes, notebook 06's confirmations), each band's rows its own (no band stands in for another), compared.

Per band and cell: its newest measurement in that band (selection.newest_measurement), the median of its session
medians and their range. A cell agrees across bands where every band's session range overlaps every other's; where
they do not, the gap (the largest median over the smallest, minus one) is more than the sessions of any one band
moved, and the difference lies in what differs between the sweeps (the commit that ran, the other arms in the same
process and their order, the day). A band with one session there has a point, not a range, and says less: the
findings count those apart. Descriptive: no target reads it."""

from __future__ import annotations

import pandas as pd

from decodegap import selection, stats
from decodegap.finding import Finding
from decodegap.sessions import band_of

CELL = ["gpu", "model", "ctx", "arm", "attn", "quant", "batch", "max_cache_len"]
COLUMNS = CELL + ["band", "run_ids", "sessions", "t_ms", "t_min_ms", "t_max_ms"]


def band_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per cell and band of `rows` (decode rows labelled by their own run's checks, checked.labelled; `ok` rows
    only are timed), the band's newest measurement: `run_ids`, `sessions`, `t_ms` (median of session medians),
    `t_min_ms`, `t_max_ms`; only cells measured in two bands or more."""
    ok = rows[rows["status"] == "ok"] if not rows.empty else rows
    if ok.empty:
        return pd.DataFrame(columns=COLUMNS)
    ok = ok.assign(batch=pd.to_numeric(ok["batch"], errors="coerce").fillna(1).astype(int) if "batch" in ok else 1,
                   band=[band_of(int(s)) for s in ok["session"]])
    out = []
    for band, g in ok.dropna(subset=["band"]).groupby("band"):
        newest = selection.newest_measurement(g, CELL)
        per = stats.session_medians(newest, CELL + ["run_id"])
        for key, s in per.groupby(CELL, dropna=False):
            out.append(dict(zip(CELL, key), band=band, run_ids=" ".join(sorted(set(s["run_id"]))),
                            sessions=len(s), t_ms=float(s["step_ms"].median()), t_min_ms=float(s["step_ms"].min()),
                            t_max_ms=float(s["step_ms"].max())))
    table = pd.DataFrame(out, columns=COLUMNS)
    bands = table.groupby(CELL, dropna=False)["band"].transform("nunique")
    return table[bands >= 2].sort_values(CELL + ["band"]).reset_index(drop=True)


def agreement(table: pd.DataFrame) -> pd.DataFrame:
    """Per cell of band_table: its bands, `gap` (largest band median over the smallest, minus one) and `agree`
    (every band's session range overlaps every other's: the largest minimum at or below the smallest maximum),
    `single` (a band has one session there: its range is a point)."""
    out = []
    for key, g in table.groupby(CELL, dropna=False):
        out.append(dict(zip(CELL, key), bands=" ".join(g["band"]), gap=float(g["t_ms"].max() / g["t_ms"].min() - 1),
                        agree=bool(g["t_min_ms"].max() <= g["t_max_ms"].min()), single=bool((g["sessions"] < 2).any()),
                        fastest_band=g.loc[g["t_ms"].idxmin(), "band"], slowest_band=g.loc[g["t_ms"].idxmax(), "band"],
                        fastest_ms=float(g["t_ms"].min()), slowest_ms=float(g["t_ms"].max())))
    return pd.DataFrame(out, columns=CELL + ["bands", "gap", "agree", "single", "fastest_band", "slowest_band",
                                             "fastest_ms", "slowest_ms"])


def _named(cells: pd.DataFrame, shown: int) -> str:
    """The `shown` cells of `cells` (agreement rows) apart the most, with both bands' times."""
    return "; ".join(f"{r.model} ctx {r.ctx} {r.arm} ({r.quant}" + (f", batch {r.batch}" if r.batch != 1 else "")
                     + f") {r.fastest_ms:.2f} ms in the {r.fastest_band} band, {r.slowest_ms:.2f} ms in the "
                       f"{r.slowest_band}" for r in cells.sort_values("gap", ascending=False).head(shown).itertuples())


def findings(table: pd.DataFrame, shown: int = 3) -> list[str]:
    """Per GPU: how many cells were measured by sweeps of two bands or more, how many agree (agreement), and of
    those that do not, the ones with two sessions or more in every band (their ranges are ranges, not points): how
    many, and the `shown` that are apart the most, named with both bands' times."""
    agreed = agreement(table)
    out = []
    for gpu, g in agreed.groupby("gpu"):
        apart = g[~g["agree"]]
        ranged = apart[~apart["single"]]
        text = (f"The same lever on the same cell measured by sweeps of different bands on the {gpu} (the grid's "
                f"selection, notebook 07's axes, notebook 06's confirmations; each band's newest measurement): "
                f"{len(g)} cells, {int(g['agree'].sum())} of them with overlapping session ranges")
        if not apart.empty:
            text += (f"; {len(apart)} apart by {stats.span(100 * apart['gap'], '.2f')} %, "  # a single gap: one number
                     f"{len(apart) - len(ranged)} of them with a single session in a band")
        if not ranged.empty:
            text += (f"; of the {len(ranged)} with two sessions or more in every band, the most apart: "
                     + _named(ranged, shown))
        out.append(Finding(text + ".", gpu=gpu, cells=len(g), agree=int(g["agree"].sum()), apart=len(apart),
                           apart_ranged=len(ranged), gap_max=float(apart["gap"].max()) if len(apart) else 0.0))
    return out
