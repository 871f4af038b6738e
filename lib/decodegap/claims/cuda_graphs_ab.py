"""Results 2, CUDA graphs (R2a-R2c): the A/B speed-ups and the launch overhead (notebook 02)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from decodegap.claims import rules
from decodegap.claims.evidence import Evidence
from decodegap.claims.rules import CLAIM_GPU, PAPER
from decodegap.claims.verdicts import NOT_TESTABLE, Judged, about, intervals_overlap, row, speedup_matches

H100, L4 = "h100-sxm", "l4"


def interval(speed) -> tuple[float, float, str]:
    """(low, high, what it is) of a speed-up row (ab.speedups: `low`, `high`, `interval`, the bootstrap CI from
    enough sessions, else the range of the sessions' ratios); rows of an older table read ci_low / ci_high."""
    get = speed.get if hasattr(speed, "get") else lambda k, d=None: getattr(speed, k, d)
    low, high = get("low", get("ci_low")), get("high", get("ci_high"))
    kind = get("interval", "95 % bootstrap CI")
    return low, high, kind if isinstance(kind, str) else "no interval"


def _ci(speed: pd.Series) -> str:
    n = f"N = {speed['sessions']}" + (f" of the {speed['sweep']} sweep" if speed.get("sweep") else "")
    low, high, kind = interval(speed)
    if pd.isna(low):
        return f"{speed['speedup']:.3f}x (no interval, {n})"
    return f"{speed['speedup']:.3f}x, {kind} [{low:.3f}, {high:.3f}], {n}"


def _apart(ev: Evidence, gpus) -> str:
    """The sessions that the headline statistic of each of `gpus` keeps apart (ab.sweep_findings), as sentences."""
    return "".join(f" {t}" for t in (ev.kept_apart(g) for g in gpus) if t)


def _eager_against_published(ev: Evidence) -> str:
    """How each measured GPU's eager headline step, where slower, compares with the published H100 eager step, the
    H100 measured here among them: a graph speed-up measured on a slower host or stack is larger for that reason, not
    the GPU's."""
    h100 = ev.pub_value("quantisation", "step_ms", gpu=H100, arm="eager")
    slower = {g: ev.cell(g)["t_obs_ms"] / h100 for g in ev.measured if ev.cell(g) is not None}
    parts = [f"{g}'s eager step ({ev.headline_model}, ctx {ev.headline_ctx}) is {x:.2f}x the published H100 eager "
             f"{h100:.2f} ms" for g, x in slower.items() if x > 1]
    if not parts:
        return ""
    return ("; ".join(parts) + ": a larger speed-up there comes from a slower host and software stack (more launch "
            "overhead to remove), not from the GPU, so its size does not test the thesis.")


def cuda_graphs(ev: Evidence) -> list[dict]:
    rows = []
    p = ev.pub("cuda_graphs", "speedup", gpu=H100).iloc[0]
    s = ev.speedup(H100)
    near = ev.nearest(lambda g: (lambda x: f"{g} {ev.headline_model} {_ci(x)}" if x is not None else None)(ev.speedup(g)))
    rows.append(row("R2a", "cuda_graphs", "H100, ctx 2048: CUDA graphs make decode 1.259x faster, 95 % CI [1.253, 1.267], N = 10.",
                     f"{p.value:.3f}x [{p.ci_low:.3f}, {p.ci_high:.3f}], N = {int(p.n)}", _ci(s) if s is not None else "-",
                     H100 if s is not None else "-",
                     Judged(CLAIM_GPU, intervals_overlap(*interval(s)[:2], p.ci_low, p.ci_high)
                            if s is not None else NOT_TESTABLE, H100 if s is not None else ""),
                     ("Our interval against the published one. " if s is not None else ev.missing(H100) + near + ". ")
                     + _eager_against_published(ev) + _apart(ev, [H100] if s is not None else ev.measured), claim_gpu=H100))
    pub_frac = ev.pub_value("cuda_graphs", "launch_overhead_fraction", gpu=H100)
    d = ev.headline_decomp(H100)
    ours = d["launch_overhead_fraction"].median() if not d.empty else np.nan

    def frac(g):
        dd = ev.headline_decomp(g)
        return (f"{g} launch overhead {dd['launch_overhead_fraction'].min():.0%}-{dd['launch_overhead_fraction'].max():.0%} "
                f"of the eager step at ctx {ev.headline_ctx} (its A/B grid sweep)") if not dd.empty else None
    tol = rules.get("R2b").t("rel_tol")
    implied = 1 - 1 / p.value
    rows.append(row("R2b", "cuda_graphs", "H100: launch overhead is ~ 20 % of step time.", f"{pub_frac:.0%}",
                     f"{ours:.0%}" if not d.empty else "-", H100 if not d.empty else "-",
                     [Judged(CLAIM_GPU, about(ours, pub_frac, tol), H100 if not d.empty else ""),
                      Judged(PAPER, about(implied, pub_frac, tol), f"1 - 1/{p.value:.3f} = {implied:.3f}")],
                     (f"(eager - graph) / eager, median over models at ctx {ev.headline_ctx} (the A/B grid sweep). "
                      if not d.empty else ev.missing_grid(H100) + ev.nearest(frac) + ". ")
                     + f"The published speed-up implies 1 - 1/{p.value:.3f} = {implied:.3f} of the eager step.",
                     claim_gpu=H100))
    pub_l4 = ev.pub_value("cuda_graphs", "speedup", gpu="l4")
    s = ev.speedup("l4")
    abs_tol = rules.get("R2c").t("abs_tol")
    rows.append(row("R2c", "cuda_graphs", "L4, ctx 2048: CUDA graphs make decode 1.028x faster.", f"{pub_l4:.3f}x",
                     _ci(s) if s is not None else "-", L4 if s is not None else "-",
                     Judged(CLAIM_GPU, speedup_matches(s["speedup"], *interval(s)[:2], pub_l4, abs_tol)
                            if s is not None else NOT_TESTABLE, L4 if s is not None else ""),
                     (f"Our interval contains it or ours is within {abs_tol}." if s is not None else ev.missing(L4) + ".")
                     + _apart(ev, [L4]), claim_gpu=L4))
    return rows
