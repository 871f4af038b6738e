"""The thesis claims: which term binds batch-1 decode on fast GPUs (T1) and on slow ones (T2), the levers that
follow (T3a, T3b), the short-context qualifier (T4) and the abstract's "memory-dominated" (T5). Every threshold is
its rule's (decodegap.claims.rules)."""

from __future__ import annotations

import pandas as pd

from decodegap.claims import rules
from decodegap.claims.evidence import FAST_GPU_GBPS, SLOW_GPU_GBPS, Evidence
from decodegap.claims.rules import CLAIM_GPU, OTHER_GPU, PAPER
from decodegap.claims.verdicts import NOT_TESTABLE, Judged, all_of, two_sided, row

PAPER_FAST, PAPER_SLOW = "h100-sxm", "l4"
"""The paper's fast and slow GPU: a claim about fast (slow) GPUs names this class."""


def _grid_sessions(ev: Evidence, gpu: str, ctx: int) -> pd.DataFrame:
    """The grid sweep's sessions of `gpu` at `ctx` (ab.session_table), eager and graph per session."""
    s = ev.ab_sessions
    if s.empty:
        return s
    sweep = s["sweep"] == "grid" if "sweep" in s else True
    return s[sweep & (s["gpu"] == gpu) & (s["ctx"] == ctx)].dropna(subset=["eager", "graph"])


def _t1_measured(ev: Evidence, gpu: str) -> tuple[str, str]:
    """T1 on one measured fast GPU, per session of the grid sweep at the headline context: L = eager - graph
    against F (floor, W_streamed to W_all) and X = graph - floor."""
    s = _grid_sessions(ev, gpu, ev.headline_ctx)
    if s.empty:
        return NOT_TESTABLE, f"{gpu}: {ev.missing_grid(gpu)}: not testable there"
    L, F, X = [], [], []
    for r in s.itertuples():
        f_hi, f_lo = ev.floor_ms(gpu, r.model), ev.floor_ms(gpu, r.model, convention="W_streamed")
        L.append(r.eager - r.graph)
        F += [f_lo, f_hi]
        X += [r.graph - f_hi, r.graph - f_lo]
    out = two_sided(min(L) > max(max(F), max(X)), max(L) < max(min(F), min(X)))
    return out, (f"{gpu}, {s['model'].nunique()} models x {s['session'].nunique()} sessions of the grid sweep at ctx "
                 f"{ev.headline_ctx}: launch L {min(L):.2f}-{max(L):.2f} ms, GPU-side excess X {min(X):.2f}-{max(X):.2f}, "
                 f"floor F {min(F):.2f}-{max(F):.2f} (W_streamed to W_all): {out}")


def _t1_published(ev: Evidence, gpu: str) -> tuple[str, str]:
    """T1 on a published fast GPU: L from the published speed-up's interval, X and F under two byte conventions
    (our W_all floor; the published R_floor x the eager step)."""
    steps = ev.pub("quantisation", "step_ms", gpu=gpu)
    arms = dict(zip(steps["arm"], steps["value"]))
    sp = ev.pub("cuda_graphs", "speedup", gpu=gpu)
    if not {"eager", "graph"} <= set(arms) or sp.empty:
        return NOT_TESTABLE, ""
    e, g = arms["eager"], arms["graph"]
    lo, hi = (float(sp["ci_low"].iloc[0]), float(sp["ci_high"].iloc[0])) if pd.notna(sp["ci_low"].iloc[0]) else (
        float(sp["value"].iloc[0]),) * 2
    L = [e * (1 - 1 / lo), e * (1 - 1 / hi)]
    r_pub = ev.pub("inverted_ladder", "r_floor", gpu=gpu)
    F = [ev.floor_ms(gpu)] + ([float(r_pub["value"].iloc[0]) * e] if not r_pub.empty else [])
    X = [g - f for f in F]
    out = two_sided(min(L) > max(max(F), max(X)), max(L) < max(min(F), min(X)))
    return out, (f"{gpu} published (eager {e:.2f} ms, graph {g:.2f} ms, speed-up [{lo:.3f}, {hi:.3f}]): launch L "
                 f"{min(L):.2f}-{max(L):.2f} ms, GPU-side excess X {min(X):.2f}-{max(X):.2f}, floor F "
                 f"{min(F):.2f}-{max(F):.2f} (our W_all floor; the published R_floor x eager): {out}")


def _t1(ev: Evidence) -> dict:
    fast = [g for g in ev.measured if ev.bandwidth(g) >= FAST_GPU_GBPS]
    ours = {g: _t1_measured(ev, g) for g in fast}
    claim = {g: v for g, v in ours.items() if g == PAPER_FAST}
    other = {g: v for g, v in ours.items() if g != PAPER_FAST}
    pub = {PAPER_FAST: _t1_published(ev, PAPER_FAST)}
    judged = [Judged(CLAIM_GPU, all_of(o for o, _ in claim.values()), ", ".join(claim)),
              Judged(PAPER, all_of(o for o, _ in pub.values())),
              Judged(OTHER_GPU, all_of(o for o, _ in other.values()), ", ".join(other))]
    parts = [t for _, t in list(claim.values()) + list(pub.values()) + list(other.values()) if t]
    return row("T1", "thesis", "On fast GPUs the binding term of batch-1 decode is per-kernel CPU launch overhead, "
               "not memory bandwidth.", "qualitative", "; ".join(parts) or "-",
               ", ".join([f"{g} (measured)" for g, (o, _) in ours.items() if o != NOT_TESTABLE]
                         + [f"{PAPER_FAST} (published)"]), judged,
               ". ".join(parts) + ". Where the GPU-side excess is the largest term, the graphed step's own kernels, not "
               "the launches, bind. The H200's eager step is slower than the published H100's (a slower host and "
               "stack: more launch overhead to remove), so it tests the thesis on another GPU, not the H100's.",
               claim_gpu=PAPER_FAST)


def _t2(ev: Evidence) -> dict:
    rule = rules.get("T2")
    thr = rule.t("r_floor")
    slow = [g for g in ev.measured if ev.bandwidth(g) < SLOW_GPU_GBPS]
    outs, parts = [], []
    for g in slow:
        c = ev.cell(g)
        if c is not None:
            noise = c["t_obs_max_ms"] / c["t_obs_min_ms"] - 1
            outs.append(two_sided(c["r_floor_W_all"] / (1 + noise) > thr, c["r_floor_W_all"] * (1 + noise) <= thr))
            parts.append(f"{g} eager R_floor {c['r_floor_W_all']:.2f}")
    r_l4 = ev.pub_value("inverted_ladder", "r_floor", gpu=PAPER_SLOW)
    judged = [Judged(CLAIM_GPU, all_of(outs), ", ".join(slow)),
              Judged(PAPER, two_sided(r_l4 > thr, r_l4 <= thr), f"L4 R_floor {r_l4:.2f} against {thr:g}")]
    return row("T2", "thesis", "On slow GPUs (L4) the binding term is memory bandwidth.", f"L4 R_floor {r_l4:.2f}",
               "; ".join(parts) or "-", ", ".join(slow) or "-", judged,
               ("; ".join(parts) + ". " if parts else f"No GPU below {SLOW_GPU_GBPS:g} GB/s measured: "
                f"{ev.missing(PAPER_SLOW)}. ")
               + f"The published L4 graph speed-up {ev.pub_value('cuda_graphs', 'speedup', gpu=PAPER_SLOW):.3f}x leaves "
               "little launch overhead to bind.", claim_gpu=PAPER_SLOW)


# ------------------------------------------------------------------------------------------------ levers
def _best_int4(ev: Evidence, gpu: str, model: str) -> tuple[float, float, str] | None:
    """(low, high, path) of the best int4 path's eager speed-up over bf16 eager at the headline context: the
    interval from the two cells' session ranges; only cells whose model check passes (QT)."""
    from decodegap.claims.quantisation import checked_cells, INT4

    qc = checked_cells(ev)
    if qc.empty:
        return None
    sel = qc[(qc["gpu"] == gpu) & (qc["model"] == model) & (qc["ctx"] == ev.headline_ctx) & (qc["arm"] == "eager")
             & qc["t_obs_ms"].notna()]
    bf = sel[sel["quant"] == "bf16"]
    q = sel[sel["quant"].isin(INT4) & (sel["qt"] == "holds")]
    if bf.empty or q.empty:
        return None
    b = bf.iloc[0]
    best = q.loc[q["t_obs_ms"].idxmin()]
    return b["t_obs_min_ms"] / best["t_obs_max_ms"], b["t_obs_max_ms"] / best["t_obs_min_ms"], best["quant"]


def _t3a(ev: Evidence) -> dict:
    """T3a: on fast GPUs the graph speed-up (A/B grid, its sessions' interval) exceeds the best int4 path's."""
    fast = [g for g in ev.measured if ev.bandwidth(g) >= FAST_GPU_GBPS]
    per_gpu, parts = {}, []
    for g in fast:
        sp = ev.speed
        grid = sp[(sp["gpu"] == g) & (sp["ctx"] == ev.headline_ctx) & (sp["arm"] == "graph")
                  & (sp["sweep"] == "grid")] if not sp.empty else sp
        outs = []
        for r in grid.itertuples():
            q = _best_int4(ev, g, r.model)
            if q is None:
                continue
            from decodegap.claims.cuda_graphs_ab import interval

            g_lo, g_hi, _ = interval(r)
            if pd.isna(g_lo):
                g_lo = g_hi = r.speedup
            outs.append(two_sided(g_lo > q[1], q[0] > g_hi))
            parts.append(f"{g} {r.model}: graphs {g_lo:.2f}-{g_hi:.2f}x, best int4 ({q[2]}, eager) {q[0]:.2f}-{q[1]:.2f}x")
        per_gpu[g] = all_of(outs)
    pub_g = ev.pub_value("cuda_graphs", "speedup", gpu=PAPER_FAST)
    judged = [Judged(CLAIM_GPU, per_gpu.get(PAPER_FAST, NOT_TESTABLE)),
              Judged(PAPER, NOT_TESTABLE, note=f"the paper gives the H100's graph speed-up ({pub_g:.3f}x) but no H100 "
                     "int4 step"),
              Judged(OTHER_GPU, all_of(v for g, v in per_gpu.items() if g != PAPER_FAST),
                     ", ".join(g for g in per_gpu if g != PAPER_FAST))]
    return row("T3a", "thesis", "On fast GPUs the lever is CUDA graphs, not specialised int4 kernels (the summaries' "
               "'different levers for fast and edge GPUs').", f"H100 graphs {pub_g:.3f}x", "; ".join(parts) or "-",
               ", ".join(f"{g} (measured)" for g in per_gpu) or "-", judged,
               "Speed-ups at ctx " f"{ev.headline_ctx}: graphs over eager (the A/B grid sweep, its interval: the "
               "range of its sessions below 10), "
               "the fastest int4 path whose model check passes over bf16, both eager (notebook 04's cells, their "
               "session ranges). " + ("; ".join(parts) + "." if parts else ev.missing(PAPER_FAST) + "."),
               claim_gpu=PAPER_FAST)


def _t3b(ev: Evidence) -> dict:
    q = ev.pub("quantisation", "speedup", gpu=PAPER_SLOW)
    best = q.loc[q["value"].idxmax()]
    g = ev.pub_value("cuda_graphs", "speedup", gpu=PAPER_SLOW)
    return row("T3b", "thesis", "On edge GPUs (L4) the lever is specialised int4 kernels, not CUDA graphs.",
               f"L4 {best['quant']} {best['value']:.2f}x, graphs {g:.3f}x", "-", "-",
               [Judged(CLAIM_GPU, NOT_TESTABLE),
                Judged(PAPER, two_sided(best["value"] > g, g > best["value"]),
                       f"{best['quant']} {best['value']:.2f}x against graphs {g:.3f}x")],
               f"{ev.missing(PAPER_SLOW)}. On the paper's L4 numbers the best int4 path's speed-up over bf16 is "
               f"{best['value'] / g:.2f}x the graph speed-up (no interval stated for either).", claim_gpu=PAPER_SLOW)


def _t4(ev: Evidence) -> dict:
    """T4: the launch share (eager - graph) / eager per session of the grid sweep, shortest against longest
    context, per model."""
    rule = rules.get("T4")
    short, long_ctx = int(rule.t("short_ctx")), int(rule.t("long_ctx"))
    per_gpu, parts = {}, []
    for g in ev.measured:
        a, b = _grid_sessions(ev, g, short), _grid_sessions(ev, g, long_ctx)
        outs = []
        for m in sorted(set(a["model"]) & set(b["model"])) if not a.empty and not b.empty else []:
            fa = ((a.eager - a.graph) / a.eager)[a.model == m]
            fb = ((b.eager - b.graph) / b.eager)[b.model == m]
            outs.append(two_sided(fb.max() < fa.min(), fb.min() > fa.max()))
            parts.append(f"{g} {m}: {fa.min():.2f}-{fa.max():.2f} at ctx {short}, {fb.min():.2f}-{fb.max():.2f} at {long_ctx}")
        if outs:
            per_gpu[g] = all_of(outs)
    return row("T4", "thesis", "Launch overhead dominates with short contexts: its share of the eager step falls as the "
               "context grows (the summaries' 'with short contexts').", "qualitative (no published context but 2048)",
               "; ".join(parts) or "-", ", ".join(f"{g} (measured)" for g in per_gpu) or "-",
               [Judged(CLAIM_GPU, per_gpu.get(PAPER_FAST, NOT_TESTABLE)),
                Judged(OTHER_GPU, all_of(v for g, v in per_gpu.items() if g != PAPER_FAST),
                       ", ".join(g for g in per_gpu if g != PAPER_FAST))],
               "Launch share per session of the A/B grid sweep, ranges over sessions. " + ("; ".join(parts) + "."
                                                                                           if parts else "No A/B rows."),
               claim_gpu=PAPER_FAST)


def _t5(ev: Evidence) -> dict:
    thr = rules.get("T5").t("r_floor")
    pub = ev.pub("inverted_ladder", "r_floor")
    pub_out = all_of(two_sided(v > thr, v < thr) for v in pub["value"])
    ours, parts = {}, []
    for g in ev.measured:
        c = ev.cell(g)
        if c is not None:
            noise = c["t_obs_max_ms"] / c["t_obs_min_ms"] - 1
            ours[g] = two_sided(c["r_floor_W_all"] / (1 + noise) > thr, c["r_floor_W_all"] * (1 + noise) < thr)
            parts.append(f"{g} eager {c['r_floor_W_all']:.2f}")
    paper_gpus = set(ev.paper_gpus)
    return row("T5", "thesis", "Batch-1 decode is memory-dominated (the abstract: 'Physical-AI decode is "
               "memory-dominated').", ", ".join(f"{r.gpu} R_floor {r.value:.2f}" for r in pub.itertuples()),
               "; ".join(parts) or "-", ", ".join(f"{g} (measured)" for g in ours) or "-",
               [Judged(CLAIM_GPU, all_of(v for g, v in ours.items() if g in paper_gpus)),
                Judged(PAPER, pub_out, "; ".join(f"{r.gpu} {r.value:.2f}" for r in pub.itertuples()) + f" against {thr:g}"),
                Judged(OTHER_GPU, all_of(v for g, v in ours.items() if g not in paper_gpus),
                       ", ".join(g for g in ours if g not in paper_gpus))],
               f"Read as T2 reads 'bandwidth binds': the memory floor is more than {thr:g} of the step (R_floor, W_all, "
               f"the headline cell, eager). The title's 'memory-bound' in the roofline sense (arithmetic intensity "
               "below the ridge point) holds on every GPU at batch 1 and is not this claim. "
               + ("; ".join(parts) + "." if parts else ""), claim_gpu="paper-GPU")


def thesis(ev: Evidence) -> list[dict]:
    return [_t1(ev), _t2(ev), _t3a(ev), _t3b(ev), _t4(ev), _t5(ev)]
