"""The README's gallery: one finding per figure, generated from the committed tables in figures/ (never typed),
written to figures/gallery.csv, and quoted from there into README.md (`python -m decodegap gallery --readme`).

Each finding is the H200's (the GPU measured here) beside the paper's published values; a figure whose rows are
missing says so instead of a number.
"""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from decodegap import paths, published
from decodegap.inputs import InputError
from decodegap.stats import span as _span
from decodegap.levers import CONFIRM_SESSIONS, GRID_TARGET, TARGETS
from decodegap.analysis import quant_across_gpus
from decodegap.analysis.closing_the_gap_confirmation import CONFIRMED, NOT_CONFIRMED, ORDER_MIXED, ORDER_REVERSED
from decodegap.analysis.closing_the_gap_int4_products import scale_levers
from decodegap.analysis.cost import confirmation_status
from decodegap.analysis.where_the_thesis_ends import REL_TOL

QUANT_NAMES = {"int4-triton": "the Triton int4 GEMV", "int4-tinygemm": "int4 tinygemm", "bnb-nf4": "bitsandbytes nf4",
               "gptq-exllamav2": "GPTQ + ExLlamaV2", "awq-marlin": "AutoAWQ + Marlin", "awq-triton": "AWQ's Triton GEMM"}
GPU = "h200"
PAPER_GPU = "h100-sxm"  # the paper's fast GPU, published and (in part) measured here too
DATASHEET_GBPS = 4800  # the H200's datasheet bandwidth (data/specs/gpus.csv), checked in `findings`


_READ: list[str] = []
"""The figures tables read so far by the finding being computed (_reading), so that a failure can name them."""
TEXT_COLUMNS = ("commits", "run_id", "run_ids", "git_commit")
"""Columns of figures tables that name commits or runs: read as text, so that a short commit of digits and one
`e` (6844e40) or of digits only is not read as a number."""
FIX = ("`python -m decodegap reproduce` rebuilds the tables from data/, `git checkout figures/` restores the committed "
       "ones")


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _read(path: Path) -> pd.DataFrame:
    """A figures table as pandas reads it, TEXT_COLUMNS as text."""
    return pd.read_csv(path, dtype=dict.fromkeys(TEXT_COLUMNS, str))


def _table(f: Path, name: str) -> pd.DataFrame:
    """A table of figures/ (`name`), recorded as read; a missing, empty or unparsable one is an InputError naming it."""
    _READ.append(name)
    try:
        return _read(f / name)
    except FileNotFoundError as exc:
        raise InputError(f"the figures table {name} is missing from {f}, so the gallery cannot be computed: {FIX}") \
            from exc
    except ValueError as exc:  # pandas' EmptyDataError and ParserError among them
        raise InputError(f"the figures table {name} in {f} could not be read ({_one_line(exc)}), so the gallery "
                         f"cannot be computed: {FIX}") from exc


def _reading(compute, f: Path, *args) -> dict[str, str]:
    """`compute(f, *args)`, one figure group's findings; a table it read that lacks a column, a row or a number it
    needs (KeyError, ValueError, ...) is an InputError naming the tables it read."""
    del _READ[:]
    try:
        return compute(f, *args)
    except InputError:
        raise
    except (KeyError, ValueError, TypeError, IndexError, AttributeError) as exc:
        names = list(dict.fromkeys(_READ))
        mixed = _not_numbers(f, names)
        if len(mixed) == 1:  # the one table read with a column of numbers and something else among them
            name, column, value = mixed[0]
            raise InputError(f"the figures table {name} in {f} could not be read: its column {column} holds "
                             f"{value!r}, not a number ({_one_line(exc)}): {FIX}") from exc
        which = (f"the figures table {names[0]}" if len(names) == 1 else
                 f"the figures tables {', '.join(names)} (one of them)")
        raise InputError(f"{which} in {f} could not be read: it lacks a column, row or number the gallery needs "
                         f"({_one_line(exc)}): {FIX}") from exc
    finally:
        del _READ[:]


def _not_numbers(f: Path, names: list[str]) -> list[tuple[str, str, str]]:
    """(table, column, value) for each of the tables `names` whose column holds numbers and something that is not
    one (a value typed or damaged into a column of numbers; no committed table but claims.csv, whose columns mix
    numbers and words by design and which is not looked at here, has such a column). A column of numbers is one whose
    non-empty values are numbers in the majority: a column of words with one that reads as a number (the short commit
    6844e40, read as 6844 x 10^40, among other commits) is not one."""
    found = []
    for name in (n for n in names if n != "claims.csv"):
        t = _read(f / name)
        for column in [c for c in t.columns if not pd.api.types.is_numeric_dtype(t[c])]:  # text: str or object
            values = t[column].dropna()
            numbers = pd.to_numeric(values, errors="coerce")
            if numbers.isna().any() and numbers.notna().sum() > numbers.isna().sum():
                found.append((name, str(column), str(values[numbers.isna()].iloc[0])))
    return found


def _pct(lo, hi) -> str:
    return f"{lo:.0%}-{hi:.0%}".replace("%-", "-")


def _attention(att: pd.DataFrame, sdpa_pub: float, ranking: pd.DataFrame | None = None, r3e: str = "") -> str:
    ok = att[(att.status == "ok") & (att.ctx == 2048) & (att.gpu == GPU)] if "status" in att else att.iloc[0:0]
    if ok.empty:
        return "No GPU attention rows yet: the figure is empty and the table shows the published H100 column only."
    llama = ok[ok.model == "llama-3.1-8b"].set_index("attn")
    fastest = llama.host_us.idxmin()
    text = (f"On the H200 (Llama-3.1-8B shape, ctx 2048) the fastest backend host-inclusive is {fastest} at "
            f"{llama.host_us.min():.1f} us (the paper's H100 SDPA: {sdpa_pub:.2f} us) and FA3 takes {llama.loc['fa3', 'host_us']:.1f} us; "
            f"host-inclusive time is {ok.host_over_gpu.min():.1f}-{ok.host_over_gpu.max():.1f}x the GPU-only time over "
            f"the cells at ctx 2048 (median {ok.host_over_gpu.median():.1f}x)"
            + (f"; whether the launch sequence binds, every cell and context (claim R3e): {r3e}." if r3e else "."))
    # notebook 03's ranking table (attention_report.ranking_table): the graphed steps where SDPA's default is not fastest
    slower = (ranking[(ranking.gpu == GPU) & (ranking.model == "llama-3.1-8b") & (ranking.arm == "graph")
                      & (ranking.fastest_step != "sdpa") & ranking.sdpa_step_ms.notna()]
              if ranking is not None and not ranking.empty else None)
    if slower is not None and not slower.empty:
        parts = [f"{r.sdpa_step_ms:.2f} ms against {r.fastest_step}'s {r.fastest_step_ms:.2f} ms at ctx {int(r.ctx)}"
                 for r in slower.sort_values("ctx").itertuples()]
        if parts:
            text += (" Inside HF's graphed decode step SDPA's default makes a slower step than the fastest backend: "
                     + ", ".join(parts) + " (HF's static cache hands SDPA a mask and an expanded cache).")
    return text


def _quant(qc: pd.DataFrame, found: pd.DataFrame) -> str:
    """Notebook 04 at ctx 2048 on the H200, then on the paper's GPU (PAPER_GPU) where it has counted quantised cells
    (_quant_on)."""
    paper = _quant_on(qc, found, PAPER_GPU, paper_gpu=True)
    return _quant_on(qc, found, GPU) + (" " + paper if paper else "")


def _quant_on(qc: pd.DataFrame, found: pd.DataFrame, gpu: str, paper_gpu: bool = False) -> str:
    """Notebook 04 on `gpu` at ctx 2048, over the counted cells (`checked`: a quantised one checked in its own run,
    decodegap.checked.quantised_checks): HF graph and the lean step; with how many timed quantised cells are drawn
    unchecked. The speed-ups' spans are 04_findings' own (`found`, to 6 decimals: the notebook's sentences): the
    cells table's 3-decimal speed-ups rounded again to 2 could differ from them (0.5751 is 0.575 there, then "0.57").
    `paper_gpu`: the paper's GPU, measured in part, with its models and sessions named, and '' where it has no
    counted quantised cell."""
    here = qc[(qc.gpu == gpu) & (qc.ctx == 2048)]
    g = here[here.t_obs_ms.notna() & (here.checked == True) & ~here.check.astype(str).str.contains("failed")]  # noqa: E712
    quant = here[(here.quant != "bf16") & here.status.isin(["ok", "unchecked"])]
    drawn = int((quant.status == "unchecked").sum())
    if g.empty or not (g.quant != "bf16").any():
        return "" if paper_gpu else (f"No counted H200 cell of the quantised paths at ctx 2048 ({drawn} drawn "
                                     "unchecked).")
    parts = []
    for arm, name in (("graph", "HF graph"), ("lean_attn_graph", "lean step + Triton attention, graphed")):
        a = g[g.arm == arm]
        order = a[a.quant != "bf16"].groupby("quant").speedup_over_bf16.median().sort_values(ascending=False).index
        said = found[(found.gpu == gpu) & (found.ctx == 2048) & (found.arm == arm) & found.speedup_min.notna()]
        said = said.set_index("quant")
        bf16 = found[(found.gpu == gpu) & (found.ctx == 2048) & (found.arm == arm) & (found.quant == "bf16")
                     & found.step_ms_min.notna()]
        if bf16.empty or not len(order):
            continue
        span = (_span(a[(a.quant == "bf16") & a.model.isin(set(a[a.quant != "bf16"].model))].t_obs_ms) if paper_gpu
                else _span(bf16[['step_ms_min', 'step_ms_max']].iloc[0]))  # measured in part: its quantised models
        parts.append(f"{name} (bf16 {span} ms): " + ", ".join(
            f"{QUANT_NAMES.get(k, k)} {_span(said.loc[k, ['speedup_min', 'speedup_max']])}x" for k in order
            if k in said.index))
    counted = int((quant.status == "ok").sum())
    if paper_gpu:
        timed = g[g.quant != "bf16"]
        sessions, plural = _span(timed["sessions"], ".0f"), "" if (timed["sessions"] == 1).all() else "s"
        return (f"On the {gpu.upper().replace('-', ' ')} (the paper's GPU class; ctx 2048, "
                f"{', '.join(sorted(set(timed.model)))}, {sessions} session{plural} a quantised cell; the {counted} "
                f"quantised cells checked in their own run, {drawn} more drawn unchecked) " + "; ".join(parts) + ".")
    return (f"On the H200 (ctx 2048, speed-up over bf16 on the same arm, every path quantised from the model's own "
            f"weights; the {counted} quantised cells checked in their own run, {drawn} more drawn unchecked and counted "
            "nowhere) " + "; ".join(parts) + ".")


def _quant_gpus(pair_table: pd.DataFrame, grid: pd.DataFrame | None = None) -> str:
    """04_quant_grid's line: per GPU pair, model and arm of notebook 04's pair table (quant_across_gpus.pairs),
    bf16's and the fastest quantised path's speed-up on the faster GPU and the share of its bandwidth gain each
    realises, and which is nearer bandwidth-bound (overlapping spans: neither). The fastest path is the faster GPU's
    (in `grid`, 04_quant_grid.csv); where the slower GPU lacks it, the line says so and reads the fastest path both
    have."""
    gaps = quant_across_gpus.bf16_and_fastest_quant(pair_table, grid)
    if gaps.empty:
        return ("No quantised cell is measured on two GPUs yet: a second GPU's notebook 04 sweep adds its lines and "
                "each path's speed-up against the bandwidth ratio.")
    out = []
    for g in gaps.itertuples():
        bf16 = (g.bf16_gain_realised_min, g.bf16_gain_realised_max)
        quant = (g.quant_gain_realised_min, g.quant_gain_realised_max)
        nearer = {"bf16": "bf16 is nearer bandwidth-bound", "quant": f"{g.paired_quant} is nearer bandwidth-bound",
                  "": "neither is nearer bandwidth-bound (the spans overlap)"}[quant_across_gpus.nearer(g)]
        which = (f"its fastest quantised path, {g.paired_quant}" if g.fastest_paired else
                 f"{g.paired_quant}, the fastest quantised path both GPUs have (the {g.gpu_fast.upper()}'s fastest, "
                 f"{g.fastest_quant}, is not measured on the {g.gpu_slow.upper()})")
        out.append(f"On {g.model} ({g.arm}, ctx {g.ctx_min}-{g.ctx_max}) the {g.gpu_fast.upper()}, with "
                   f"{g.bandwidth_ratio:.2f}x the {g.gpu_slow.upper()}'s datasheet bandwidth, is "
                   f"{_span([g.bf16_speedup_min, g.bf16_speedup_max])}x faster in bf16 (realising "
                   f"{_span([100 * v for v in bf16], '.0f')} % of that gain) and "
                   f"{_span([g.quant_speedup_min, g.quant_speedup_max])}x with {which} "
                   f"({_span([100 * v for v in quant], '.0f')} %): {nearer}"
                   + (f" (cells {g.measured})" if g.measured else "") + ".")
    return " ".join(out)


def _h200_cost(lad: pd.DataFrame) -> str:
    """The measured H200 on the cost ladder, at the price prices.csv gives it (its provider named)."""
    naive, best = lad.loc[(GPU, "naive")], lad.loc[(GPU, "best")]
    provider = str(naive.price_provider)
    return (f"The H200 measured here, at {provider.capitalize()}'s price (no Modal price was found), costs "
            f"${naive.usd_per_mtok:.2f}/Mtok naive (bf16 eager) and ${best.usd_per_mtok:.2f} at its best "
            f"({best.configuration}{_best_confirmed_words(best)}).")


def _best_confirmed_words(best: pd.Series) -> str:
    """A measured best of 05_cost_ladder.csv (the cheapest of many, one sweep) with what notebook 06's confirmation
    sweeps hold of it (the ladder's confirmed_* columns, confirmation_status): '' where the table has none of those
    columns."""
    sessions = best.get("confirmed_sessions", np.nan)
    status = confirmation_status(sessions)
    if status is None:
        return ""
    if status == NOT_CONFIRMED:
        return "; the cheapest of many, from one sweep, not confirmed in fresh sessions"
    how = "" if status == CONFIRMED else f" (partly: {CONFIRM_SESSIONS} asked)"
    return (f"; the cheapest of many, from one sweep, confirmed at {best.confirmed_ms:.2f} ms = "
            f"${best.confirmed_usd_per_mtok:.2f}/Mtok in {int(sessions)} fresh sessions{how}")


def _published() -> dict[str, float]:
    """The published values the gallery states beside ours."""
    pub = published.load()
    r_pub = published.select(pub, "inverted_ladder", "r_floor").set_index("gpu")["value"]
    one = lambda claim, quantity, **w: float(published.select(pub, claim, quantity, **w)["value"].iloc[0])
    return dict(r_l4=float(r_pub["l4"]), r_h100=float(r_pub[PAPER_GPU]),
                graphs=one("cuda_graphs", "speedup", gpu=PAPER_GPU),
                launch=one("cuda_graphs", "launch_overhead_fraction", gpu=PAPER_GPU),
                sdpa=one("attention_backends", "us_per_layer", gpu=PAPER_GPU, attn="sdpa"),
                cost=one("cost", "cost_ratio", gpu="l4"))


def _roofline(f: Path, pub: dict) -> dict[str, str]:
    """Notebook 01's two figures: the headline cell against bandwidth, the eager step over the contexts."""
    cells = _table(f, "01_roofline_cells.csv")
    eager = cells[(cells.gpu == GPU) & (cells.arm == "eager")]
    head = eager[(eager.model == "qwen2.5-7b") & (eager.ctx == 2048)].iloc[0]
    h100 = cells[(cells.gpu == PAPER_GPU) & (cells.arm == "eager") & (cells.model == "qwen2.5-7b")
                 & (cells.ctx == 2048)]
    measured = (f"H100 SXM {h100.iloc[0].r_floor_W_all:.2f} and " if not h100.empty else "")
    return {
        "01_r_floor_vs_bandwidth.png": f"L4 {pub['r_l4']:.2f} and H100 {pub['r_h100']:.2f} (published), "
                                       f"{measured}H200 {head.r_floor_W_all:.2f} (measured, eager, Qwen-2.5-7B ctx 2048).",
        "01_step_time_vs_context.png": f"The H200 eager step stays between {eager.t_obs_ms.min():.1f} and "
                                       f"{eager.t_obs_ms.max():.1f} ms from 2k to 16k tokens, {1 / eager.r_floor_W_all.max():.0f}-"
                                       f"{1 / eager.r_floor_W_all.min():.0f}x its memory floor: it is not paying for bytes.",
    }


def _sessions(n: pd.Series) -> str:
    """'N = 10 sessions each', or 'N = 6-7 sessions' where the models' counts differ."""
    lo, hi = int(n.min()), int(n.max())
    return f"N = {lo} sessions each" if lo == hi else f"N = {lo}-{hi} sessions"


def _cuda_graphs(f: Path, pub: dict) -> dict[str, str]:
    """Notebook 02's figures: the headline speed-ups, the decomposition, R_floor per arm (every arm at ctx 2048,
    the cells of one selection)."""
    speedups = _table(f, "02_speedups.csv")
    sp = speedups[(speedups.gpu == GPU) & (speedups.ctx == 2048) & (speedups.arm == "graph")]
    h100 = speedups[(speedups.gpu == PAPER_GPU) & (speedups.ctx == 2048) & (speedups.arm == "graph")
                    & (speedups.sweep == "headline")]
    ours_h100 = (f"; on an H100 SXM measured here {_span(h100.speedup)}x ({_sessions(h100.sessions)}, of its "
                 f"headline sweep)" if not h100.empty else "")
    hs, gs = sp[sp.sweep == "headline"], sp[sp.sweep == "grid"]
    ab = _table(f, "02_ab_cells.csv")
    h = ab[(ab.gpu == GPU) & (ab.ctx == 2048)]
    d = _table(f, "02_decomposition.csv")
    d = d[d.gpu == GPU]
    d2, d16 = d[d.ctx == 2048].launch_overhead_fraction, d[d.ctx == 16384].launch_overhead_fraction
    return {
        "02_speedup_ci.png": f"CUDA graphs: {hs.speedup.min():.2f}-{hs.speedup.max():.2f}x faster than eager on the H200 at "
                             f"ctx 2048 ({_sessions(hs.sessions)}, of the headline sweep alone; the grid "
                             f"sweep's {int(gs.sessions.min())} sessions of those cells, kept apart, give "
                             f"{gs.speedup.min():.2f}-{gs.speedup.max():.2f}x){ours_h100}, against {pub['graphs']:.3f}x published for the "
                             f"H100.",
        "02_decomposition.png": f"Launch overhead is {_pct(d2.min(), d2.max())} of the H200 eager step at ctx 2048 and "
                                f"{_pct(d16.min(), d16.max())} at 16k (the paper: ~{pub['launch'] * 100:.0f} % on the H100).",
        "02_r_floor_per_arm.png": f"On the H200 at ctx 2048 ({h.model.nunique()} models), R_floor is "
                                  f"{h.r_floor_eager.min():.2f}-{h.r_floor_eager.max():.2f} eager, "
                                  f"{h.r_floor_graph.min():.2f}-{h.r_floor_graph.max():.2f} graphed and "
                                  f"{h.r_floor_compile.min():.2f}-{h.r_floor_compile.max():.2f} with torch.compile.",
    }


def _quant_and_cost(f: Path, pub: dict) -> dict[str, str]:
    """Notebooks 03-05's figures: attention, quantisation against the floors, the cost ladder."""
    att = _table(f, "03_attention_cells.csv")
    qt = _table(f, "04_quant_table.csv")
    q = qt[qt.ctx == qt.ctx.min()].set_index("quant")["l4 R_floor (our floor, published ms)"]
    ladder = _table(f, "05_cost_ladder.csv")
    lad = ladder.set_index(["gpu", "kernels"])
    paper = ladder[ladder.source.str.startswith("published")].set_index(["gpu", "kernels"])  # the paper's ladder
    floor = _table(f, "05_cost_at_floor.csv").set_index("gpu").usd_per_mtok
    l4, h100 = paper.loc[("l4", "best")], paper.loc[(PAPER_GPU, "best")]
    return {
        "03_attention_us_vs_context.png": _attention(att, pub["sdpa"], _table(f, "03_attention_ranking.csv"),
                                                     _claim_verdict(f, "R3e")),
        "04_quant_ms_vs_floor.png": f"On the published L4 numbers GPTQ + ExLlamaV2 reaches R_floor {q['gptq-exllamav2']:.2f} of its "
                                    f"own floor, bf16 {q['bf16']:.2f} and bitsandbytes nf4 {q['bnb-nf4']:.2f}: the kernel, not "
                                    "the int4 format, realises the saving. " + _quant(_table(f, "04_quant_cells.csv"),
                                                                                _table(f, "04_findings.csv")),
        "04_quant_grid.png": _quant_gpus(_table(f, "04_quant_gpu_pairs.csv"), _table(f, "04_quant_grid.csv")),
        "05_cost_ladder.png": f"At Modal's May 2026 prices the L4 with GPTQ + ExLlamaV2 costs ${l4.usd_per_mtok:.2f}/Mtok against "
                              f"the paper's graphed H100's ${h100.usd_per_mtok:.2f} ({h100.usd_per_mtok / l4.usd_per_mtok:.2f}x, not ~{pub['cost']:g}x); "
                              f"at the memory floor the H100 (${floor['h100-sxm']:.2f}) would undercut the L4 (${floor['l4']:.2f}). "
                              + _measured_h100_cost(ladder) + _h200_cost(lad),
    }


def _measured_h100_cost(ladder: pd.DataFrame) -> str:
    """The H100 SXM measured here on the cost ladder (05_cost_ladder.csv's measured rows), beside the paper's; "" where
    no H100 SXM rows are shipped."""
    ours = ladder[(ladder.gpu == PAPER_GPU) & (ladder.source == "measured")].set_index("kernels")
    if ours.empty:
        return ""
    naive, best = ours.loc["naive"], ours.loc["best"]
    return (f"An H100 SXM measured here costs ${naive.usd_per_mtok:.2f}/Mtok naive ({naive.configuration}, "
            f"{naive.step_ms:.2f} ms) and ${best.usd_per_mtok:.2f} at its best ({best.configuration}, {best.step_ms:.2f} ms"
            f"{_best_confirmed_words(best)}) at Modal's price. ")


def _ladder_cells(f: Path) -> dict:
    """Notebook 06's ladder at the target cell (Llama-3.1-8B, ctx 2048) and over the grid."""
    lad6 = _table(f, "06_ladder.csv")
    cell6 = lad6[(lad6.gpu == GPU) & (lad6.model == "llama-3.1-8b") & (lad6.ctx == 2048) & (lad6.status == "ok")]
    bf16_6, int4_6 = cell6[cell6.quant == "bf16"], cell6[cell6.quant != "bf16"]
    best6 = bf16_6.loc[bf16_6.t_obs_ms.idxmin()]
    best_int4 = int4_6.loc[int4_6.t_obs_ms.idxmin()] if int4_6.t_obs_ms.notna().any() else None
    target = lad6[(lad6.gpu == GPU) & (lad6.model == "llama-3.1-8b") & (lad6.ctx == 2048) & (lad6.quant != "bf16")]
    ok6 = lad6[(lad6.gpu == GPU) & (lad6.status == "ok")]
    best_path = ok6[ok6.lever == best6.lever]  # the target cell's best bf16 lever, over the grid
    hf_compiled = ok6[(ok6.lever == "HF compiled") & ok6.set_index(["model", "ctx"]).index.isin(
        best_path.set_index(["model", "ctx"]).index)].t_obs_ms
    conf_every_gpu = _table(f, "06_confirmation.csv")
    conf_all = conf_every_gpu[conf_every_gpu.gpu == GPU]
    conf = conf_all[conf_all.kind == "bf16"]
    targets = _table(f, "06_findings_targets.csv")
    current = targets[targets.earlier.isna() & targets.measured.eq(True)]
    counted = {k: r for k, r in current[current.kind.isin(["bf16", "int4"])].set_index("kind").iterrows()
               if pd.notna(r.get("counted_ms"))}  # only a target whose pick awaits confirmation has one
    return dict(best6=best6, best_int4=best_int4, int4_unchecked=int((target.status == "unchecked").sum()),
                levers6=int(bf16_6.t_obs_ms.notna().sum()), counted=counted,
                grid=current[current.finding.str.startswith("grid target")].iloc[0],
                target_confirmation=conf[(conf.model == "llama-3.1-8b") & (conf.ctx == 2048)],
                int4_confirmation=conf_all[(conf_all.kind == "int4") & (conf_all.model == "llama-3.1-8b")
                                           & (conf_all.ctx == 2048)],
                paper_gpu=conf_every_gpu[(conf_every_gpu.gpu == PAPER_GPU) & (conf_every_gpu.model == "llama-3.1-8b")
                                         & (conf_every_gpu.ctx == 2048)],
                paper_gpu_fastest=lad6[(lad6.gpu == PAPER_GPU) & (lad6.status == "ok") & (lad6.quant == "bf16")
                                       ].groupby(["model", "ctx"]).r_floor_bf16.max(),
                lean=cell6.set_index("lever").t_obs_ms, best_path=best_path,
                grid_cells=lad6[lad6.gpu == GPU].groupby(["model", "ctx"]).ngroups, hf_compiled=hf_compiled,
                fastest=ok6[ok6.quant == "bf16"].groupby(["model", "ctx"]).r_floor_bf16.max())  # each cell's fastest


def _grid_confirmed_words(grid: pd.Series) -> str:
    """'; N of them confirmed by a fresh sweep (H on the lever confirmed before the current pick), M reaching it
    there.' from the bf16 grid target's line of 06_findings_targets.csv, the count the target itself reads."""
    held = grid.get("cells_held")
    held = int(held) if pd.notna(held) else 0
    return (f"{int(grid.cells_confirmed)} of them confirmed by a fresh sweep"
            + (f" ({held} on the lever confirmed there before the selection's current pick)" if held else "")
            + f", {int(grid.cells_met)} reaching it there.")


def _confirmation_words(row: pd.DataFrame, r_floor: bool = True, counted: pd.Series | None = None) -> str:
    """How the target cell's chosen lever of one kind stands in its confirmation sweep (06_confirmation.csv); where
    it is not confirmed and the target counts another lever confirmed there (`counted`: the target's line of
    06_findings_targets.csv), that lever and its confirmed time too."""
    if row.empty or row.iloc[0].status != "confirmed":
        held = ("" if counted is None else f"; the target counts {counted.counted_lever}, confirmed at "
                f"{counted.counted_ms:.2f} ms" + (f", R_floor {counted.counted_r_floor:.3f}" if r_floor else ""))
        return "not yet confirmed by a fresh sweep (a best of many, not counted" + held + ")"
    r = row.iloc[0]
    order = getattr(r, "order", None)
    if pd.isna(r.margin_median):
        margin = "no runner-up timed in those sessions"
    elif order == ORDER_REVERSED:
        margin = f"the runner-up faster by {-100 * r.margin_median:.1f} % (order reversed in every paired session)"
    else:
        margin = f"{100 * r.margin_median:+.1f} % over the runner-up" + (f" (order {order})" if order ==
                                                                         ORDER_MIXED else "")
    return (f"confirmed at {r.confirmed_ms:.2f} ms" + (f" (R_floor {r.r_floor_bf16:.3f})" if r_floor else "")
            + f" in {int(r.sessions)} fresh sessions, {margin}")


def _int4_products(f: Path) -> dict[str, str]:
    """Notebook 06's int4 products figure: its line of 06_findings_int4_products.csv at the int4 target's model."""
    t = _table(f, "06_findings_int4_products.csv")
    model = TARGETS["int4"]["model"]
    needed = {"gpu", "model", "layer_us", "bf16_layer_us"}
    rows = t[t["layer_us"].notna()] if needed <= set(t.columns) else t.iloc[0:0]
    if not rows.empty:
        rows = rows[(rows["gpu"] == GPU).to_numpy()
                    & np.array([model in str(m).split(" and ") for m in rows["model"]], bool)]
    if rows.empty:
        ctx = TARGETS["int4"]["ctx"]
        confirmation = f / "06_confirmation.csv"
        scaled = scale_levers(_table(f, "06_confirmation.csv"), GPU, model, ctx) if confirmation.exists() else []
        if scaled:  # the products exist, but not the flavour these levers launch
            return {"06_int4_products.png": f"On the H200 ({model}, ctx {ctx}) the confirmed int4 levers "
                                            f"({' and '.join(scaled)}) leave each norm to the next product as a scale: "
                                            "the int4 bench (bench/fused_int4_gemv.py) has no flavour of those "
                                            "products yet, so none of them is timed alone."}
        return {"06_int4_products.png": "No fused int4 products timed alone on the H200 yet "
                                        "(bench/fused_int4_gemv.py, `bash bench/measure.sh h200 OUT int4_configs`)."}
    r = rows.iloc[0]
    bf16 = (f"the same products in bf16 take {r.bf16_layer_us:.1f} us: int4 reads {r.bytes_ratio:.1f}x fewer bytes "
            f"and takes {r.time_ratio:.2f}x less time." if pd.notna(r.bf16_layer_us) else
            "the bf16 bench has not timed the same products at these launches, so no bf16 time stands beside them.")
    return {"06_int4_products.png":
            f"On the H200 ({model}) one layer's {r.arm} int4 products, each timed alone, take {r.layer_us:.1f} us "
            f"({r.products_ms:.2f} ms a step, {r.products_ms / r.floor_ms:.1f}x their weight floor) and stream at "
            f"{r.gbps_min:,.0f}-{r.gbps_max:,.0f} GB/s ({r.gbps_min / DATASHEET_GBPS:.0%}-{r.gbps_max / DATASHEET_GBPS:.0%} "
            f"of the datasheet); " + bf16}


def _paper_gpu_words(conf: pd.DataFrame, fastest: pd.Series | None = None) -> str:
    """' On the paper's GPU ...': the levers confirmed at the target cell on the H100 SXM (06_confirmation.csv's rows
    of that GPU and cell), bf16 first, each with its confirmation (_confirmation_words), then (`fastest`: each of its
    grid cells' fastest bf16 R_floor on the selection sweeps, 06_ladder.csv) the span over those cells; '' where none
    is confirmed there."""
    done = conf[conf.status == "confirmed"].sort_values("kind")
    parts = [f"its {r.kind} step ({r.lever}) " + _confirmation_words(done[done.kind == r.kind], r_floor=r.kind == "bf16")
             for r in done.itertuples()]
    if not parts:
        return ""
    grid = ("" if fastest is None or len(fastest) < 2 else
            f"; over its {len(fastest)} grid cells each cell's fastest bf16 lever of the selection sweeps reaches "
            f"R_floor {_span(fastest, '.3f')} (a best of many, not counted)")
    return (f" On the paper's GPU ({PAPER_GPU}, the same cell; R_floor against its own datasheet): " + "; ".join(parts)
            + grid + ".")


def _ladder(f: Path) -> dict[str, str]:
    """Notebook 06's two figures: the products' fits and the ladder of levers."""
    c = _ladder_cells(f)
    best6, best_int4, lean, best_path, fastest = c["best6"], c["best_int4"], c["lean"], c["best_path"], c["fastest"]
    fits = _table(f, "06_product_fits.csv")
    fits = fits[(fits.gpu == GPU) & (fits.model == "llama-3.1-8b") & (fits.ctx == 2048)].set_index(["arm", "quant"])
    shares = _table(f, "06_projections.csv")
    shares = shares[(shares.gpu == GPU) & (shares.model == "llama-3.1-8b") & (shares.ctx == 2048)
                    & (shares.arm == "lean_attn_compile") & (shares.quant == "bf16")].set_index("projection").of_datasheet
    compiled, gemv = fits.loc[("lean_attn_compile", "bf16")], fits.loc[("lean_kernels_graph", "bf16")]
    tinygemm = fits.loc[("lean_attn_compile", "int4-tinygemm")]
    return {
        "06_products.png": f"On the H200 (Llama-3.1-8B, ctx 2048) each matrix product of the compiled lean step costs "
                           f"{compiled.fixed_us:.1f} us plus its weights at {compiled.stream_gbps:.0f} GB/s "
                           f"({compiled.stream_gbps / DATASHEET_GBPS:.0%} of the datasheet): {compiled.products} products pay "
                           f"{compiled.fixed_us * compiled.products / 1e3:.2f} ms of fixed cost, so the small ones fall short "
                           f"(o {shares['o']:.0%}, qkv {shares['qkv']:.0%} of the datasheet; the LM head {shares['lm_head']:.0%}). "
                           f"The Triton GEMV streams as fast ({gemv.stream_gbps:.0f} GB/s) but pays {gemv.fixed_us:.1f} us "
                           f"per product; int4 tinygemm pays {tinygemm.fixed_us:.1f} us but streams its codes and scales at "
                           f"{tinygemm.stream_gbps:.0f} GB/s ({tinygemm.stream_gbps / DATASHEET_GBPS:.0%}).",
        "06_ladder.png": f"On the H200 (Llama-3.1-8B, ctx 2048) the fastest of {c['levers6']} bf16 levers on the selection "
                         f"sweeps is {best6.lever} at {best6.t_obs_ms:.2f} ms, R_floor {best6.r_floor_bf16:.3f} against the "
                         f"{TARGETS['bf16']['r_floor']:.2f} target, "
                         f"{_confirmation_words(c['target_confirmation'], counted=c['counted'].get('bf16'))} (HF compiled "
                         f"{lean['HF compiled']:.2f} ms, the lean decoder graphed {lean['lean graph']:.2f} ms); "
                         + (f"the best int4 lever ({best_int4.lever}) takes {best_int4.t_obs_ms:.2f} ms against the "
                            f"{TARGETS['int4']['step_ms']:.1f} ms target, "
                            f"{_confirmation_words(c['int4_confirmation'], r_floor=False, counted=c['counted'].get('int4'))}. "
                            if best_int4 is not None else
                            f"no int4 lever there is counted against the {TARGETS['int4']['step_ms']:.1f} ms target "
                            f"({c['int4_unchecked']} int4 cells there drawn unchecked under the current rule). ")
                         + _best_path_words(best_path, c["hf_compiled"], c["grid_cells"])
                         + f"; with each cell's fastest bf16 lever "
                         f"of the selection sweeps {int((fastest >= GRID_TARGET['r_floor']).sum())} of the {c['grid_cells']} "
                         f"cells reach R_floor {GRID_TARGET['r_floor']:.2f} (R_floor {fastest.min():.3f}-{fastest.max():.3f}); "
                         + _grid_confirmed_words(c["grid"])
                         + _paper_gpu_words(c["paper_gpu"], c["paper_gpu_fastest"]),
    }


def _best_path_words(best_path: pd.DataFrame, hf_compiled: pd.Series, grid_cells: int) -> str:
    """Where the target cell's best bf16 lever has rows over the grid: its span and HF compiled's beside it over
    those cells, their contexts named as they are (one cell: that cell alone, no span)."""
    ctxs = sorted({int(c) for c in best_path.ctx})
    where = (f"at ctx {ctxs[0]} alone" if len(ctxs) == 1 else
             f"from {ctxs[0] // 1024}k to {ctxs[-1] // 1024}k tokens")
    if len(best_path) == 1:
        return (f"The best bf16 lever has rows in 1 of the grid's {grid_cells} cells ({where}), HF compiled "
                f"{hf_compiled.min():.2f} ms there")
    return (f"The best bf16 lever has rows in {len(best_path)} of the grid's {grid_cells} cells, where it takes "
            f"{best_path.t_obs_ms.min():.2f}-{best_path.t_obs_ms.max():.2f} ms {where}, HF compiled "
            f"{hf_compiled.min():.2f}-{hf_compiled.max():.2f} ms")


def _scope(f: Path) -> dict[str, str]:
    """Notebook 07's two figures: the cells against their floors and the two-term model's fits."""
    cells, cross = _table(f, "07_cells.csv"), _table(f, "07_compute_crossover.csv")
    fits, verdicts = _table(f, "07_step_model_fits.csv"), _table(f, "07_step_model_verdicts.csv")
    h = cells[(cells.gpu == GPU) & (cells.attn == "sdpa") & (cells.arm == "eager")]
    big = h[h.batch == h.batch.max()] if not h.empty else h
    never = cross[cross.crossover_batch == float("inf")]
    floor = (f"On the H200 the eager step's R_floor is {_span(h[h.batch == 1].r_floor)} at batch 1"
             + (f" and {_span(big.r_floor)} at batch {int(big.batch.max())}" if not h.empty and h.batch.max() > 1
                else " (no batch > 1 row yet)") + "; ") if not h.empty else "No H200 eager rows; "
    if not never.empty:
        floor += (f"from {int(never.ctx.min())} tokens of context the compute floor never passes the bandwidth floor at "
                  f"any batch ({never.model.nunique()} models, {never.gpu.nunique()} GPUs of the registry): it can only "
                  f"below {_span(never.drop_duplicates(['gpu', 'model']).longest_crossing_ctx, '.0f')} tokens.")
    testable = verdicts[verdicts.testable.astype(bool)] if not verdicts.empty else verdicts
    if testable.empty:
        model = ("Not measured yet: no arm of notebook 07's own sweeps has enough cells to fit (claims W2a: "
                 f"{_claim_verdict(f, 'W2a') or 'no claims table'}; W2b: {_claim_verdict(f, 'W2b') or '-'}).")
    else:
        parts = []
        for v in testable[testable.gpu == GPU].itertuples():
            fit = fits[(fits.gpu == v.gpu) & (fits.arm == v.arm) & (fits.attn == v.attn)].iloc[0]
            parts.append(f"{v.arm}{'' if v.attn == 'sdpa' else f' ({v.attn})'} a {fit.a:.2f}, c0 {fit.c0_ms:.3f} ms, "
                         f"{fit.c1_ms * 1e3:.0f} us per layer, {v.explained} of {v.cells} cells within {REL_TOL:.0%}")
        model = ("On the H200: " + "; ".join(parts) + f" (claims W2a, over every GPU's fits, the paper's GPU class "
                 f"first: {_claim_verdict(f, 'W2a')}; W2b: {_claim_verdict(f, 'W2b')}).")
    return {"07_r_floor_vs_t_floor.png": floor, "07_step_model_residuals.png": model}


def _claim_verdict(f: Path, claim_id: str) -> str:
    """A row's label in figures/claims.csv ('' without one)."""
    path = f / "claims.csv"
    if not path.exists():
        return ""
    t = _table(f, "claims.csv").set_index("id")
    return str(t.loc[claim_id, "verdict"]) if claim_id in t.index else ""


def findings(figures: Path | None = None) -> dict[str, str]:
    """The gallery's finding of each figure (file name -> sentence), computed from the tables in `figures`; a table
    that is missing or lacks what a finding needs is an InputError naming it."""
    f = Path(figures or paths.FIGURES)
    specs = pd.read_csv(paths.DATA / "specs" / "gpus.csv").set_index("gpu")
    assert float(specs.loc[GPU, "bandwidth_gbps"]) == DATASHEET_GBPS, "the H200's datasheet bandwidth changed"
    pub = _published()
    found = {}
    for compute, args in ((_ladder, ()), (_int4_products, ()), (_roofline, (pub,)), (_cuda_graphs, (pub,)),
                          (_quant_and_cost, (pub,)), (_scope, ())):
        found.update(_reading(compute, f, *args))
    return found


GALLERY_CSV = "gallery.csv"


def line(name: str, finding: str) -> str:
    """A figure's gallery line: its title (figures.style.TITLES, the very text the figure's title states) in bold,
    then the finding's numbers; the two come from one place and cannot disagree."""
    from decodegap.figures.style import TITLES

    return f"**{TITLES[name]}.** {finding}"


def write(figures: Path | None = None) -> Path:
    """figures/gallery.csv: one row per figure (figure, finding: its gallery `line`), in file-name order. Every line
    is computed first (a damaged table is an InputError naming it, findings), then the file is written beside itself
    and moved into place, so a failure leaves the gallery.csv there was as it was."""
    f = Path(figures or paths.FIGURES)
    out = f / GALLERY_CSV
    rows = [[name, line(name, text)] for name, text in sorted(findings(f).items())]
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", newline="") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(["figure", "finding"])
            w.writerows(rows)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def read(figures: Path | None = None) -> dict[str, str]:
    """figures/gallery.csv as {figure: finding}."""
    table = pd.read_csv(Path(figures or paths.FIGURES) / GALLERY_CSV)
    return dict(zip(table["figure"], table["finding"]))


LINE = r"^\| !\[\]\(figures/{name}\) `{name}` \| (.*) \|$"
COUNTS = re.compile(r"^\(([^;]*); generated by notebook 05,", re.M)
"""The README's claims counts, `(8 reproduced, ...; generated by notebook 05, ...`: the part before the semicolon."""


QUANT_COUNTS = re.compile(r"^\(([^;]*); generated by notebook 04,", re.M)
"""The README's count of checked quantised cells, `(20 of 185 timed ...; generated by notebook 04, ...`."""


def quant_counts(figures: Path | None = None) -> str:
    """From figures/04_quant_cells.csv, per GPU: how many timed quantised cells count (checked in their own run,
    decodegap.checked.quantised_checks) and at which contexts, and how many are drawn unchecked, those of an earlier
    rule with the span of their runs' start (the README's words, no semicolon)."""
    qc = pd.read_csv(Path(figures or paths.FIGURES) / "04_quant_cells.csv")
    timed = qc[(qc.quant != "bf16") & qc.status.isin(["ok", "unchecked"])]
    parts = []
    for gpu, g in timed.groupby("gpu"):
        ok, drawn = g[g.status == "ok"], g[g.status == "unchecked"]
        earlier = drawn[drawn.quant_check == "earlier rule"]
        text = (f"on the {gpu.upper()}, {len(ok)} of {len(g)} timed quantised cells are checked in their own run"
                + (f" (ctx {', '.join(str(int(c)) for c in sorted(set(ok.ctx)))})" if len(ok) else ""))
        if len(earlier):
            text += (f", {len(earlier)} were timed between {earlier.measured.min()} and {earlier.measured.max()}, "
                     "before in-run layer checks")
        if len(drawn) > len(earlier):
            text += f", {len(drawn) - len(earlier)} fail or lack a check of the current rule"
        parts.append(text)
    return ", ".join(parts) or "no timed quantised cells"


def readme_text(readme: str, found: dict[str, str], counts: str | None = None, quant: str | None = None) -> str:
    """`readme` with each gallery line's finding replaced by `found`'s, the claims counts by `counts`
    (claims.table.claim_counts) and the checked quantised cells by `quant` (quant_counts). A figure without a gallery line is
    an error naming it (add its row to the README's gallery table first)."""
    missing = []
    for name, text in found.items():
        pattern = re.compile(LINE.format(name=re.escape(name)), re.M)
        m = pattern.search(readme)
        if not m:
            missing.append(name)
            continue
        readme = readme[:m.start(1)] + text + readme[m.end(1):]
    if missing:
        raise ValueError(f"the README's gallery has no line for {missing}: add `| ![](figures/NAME) `NAME` | ... |`")
    if counts is not None:
        m = COUNTS.search(readme)
        if not m:
            raise ValueError("the README has no claims counts line `(... ; generated by notebook 05,`")
        readme = readme[:m.start(1)] + counts + readme[m.end(1):]
    if quant is not None:
        m = QUANT_COUNTS.search(readme)
        if not m:
            raise ValueError("the README has no quantised cells' count `(... ; generated by notebook 04,`")
        readme = readme[:m.start(1)] + quant + readme[m.end(1):]
    return readme
