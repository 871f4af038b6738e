"""Results 1, the inverted ladder (R1a-R1e, N1): R_floor of the headline cell against bandwidth (notebook 01).
Every threshold is its rule's (decodegap.claims.rules)."""

from __future__ import annotations

import numpy as np

from decodegap.claims import rules
from decodegap.claims.evidence import Evidence
from decodegap.claims.rules import CLAIM_GPU, METHOD, OTHER_GPU, PAPER
from decodegap.claims.verdicts import (NOT_TESTABLE, Judged, about, all_of, checks_hold, falls_as_bandwidth_rises,
                                       row, two_sided)

L4, H100 = "l4", "h100-sxm"


def _noise(c) -> float:
    """A cell's relative session range (max / min - 1); 0 with one session."""
    return float(c["t_obs_max_ms"] / c["t_obs_min_ms"] - 1) if c is not None and c["t_obs_min_ms"] > 0 else 0.0


def _headline_r_floor(ev: Evidence) -> list[dict]:
    out = []
    for claim_id, gpu in (("R1a", L4), ("R1b", H100)):
        pub = ev.pub_value("inverted_ladder", "r_floor", gpu=gpu)
        c = ev.cell(gpu)
        ours = c["r_floor_W_all"] if c is not None else np.nan
        step = ev.pub_value("quantisation", "step_ms", gpu=gpu, arm="eager")
        note = (f"With our W_all floor ({ev.floor_ms(gpu):.2f} ms for {ev.headline_model} ctx {ev.headline_ctx}) the "
                f"published {gpu} bf16 eager step {step:.2f} ms gives R_floor {ev.floor_ms(gpu) / step:.2f}")
        if c is not None:  # what the verdict weighed: the deviation against the tolerance and our session range
            tol = rules.get(claim_id).t("rel_tol")
            note = (f"Our {gpu} cell: eager step {c['t_obs_ms']:.2f} ms, its sessions {c['t_obs_min_ms']:.2f}-"
                    f"{c['t_obs_max_ms']:.2f} ms (noise {_noise(c):.0%}), R_floor {ours:.2f}: |ours / published - 1| = "
                    f"{abs(ours / pub - 1):.2f} against rel_tol {tol:.2f} and that noise. " + note)
        out.append(row(claim_id, "inverted_ladder", f"Headline cell Qwen-2.5-7B ctx 2048: {gpu} R_floor ~ {pub:.2f}.",
                       f"{pub:.2f}", f"{ours:.2f}" if c is not None else "-", gpu if c is not None else "-",
                       Judged(CLAIM_GPU, about(ours, pub, rules.get(claim_id).t("rel_tol"), _noise(c)), gpu if c is not None else ""),
                       ("" if c is not None else f"{ev.missing(gpu)}. ") + note
                       + ev.nearest(lambda g: (lambda x: f"{g} eager R_floor {x['r_floor_W_all']:.2f}" if x is not None else None)(ev.cell(g)))
                       + ".", claim_gpu=gpu))
    return out


def _bandwidths(ev: Evidence) -> dict:
    checks = [abs(ev.bandwidth(g) - ev.pub_value("inverted_ladder", "bandwidth_gbps", gpu=g)) < 1e-9 for g in (L4, H100)]
    ratio = ev.bandwidth(H100) / ev.bandwidth(L4)
    checks.append(round(ratio) == ev.pub_value("inverted_ladder", "bandwidth_ratio", gpu=H100))
    return row("R1c", "inverted_ladder", "L4 300 GB/s, H100 3350 GB/s: the H100 has 11x the bandwidth.",
               "300 / 3350 GB/s, 11x", f"{ev.bandwidth(L4):.0f} / {ev.bandwidth(H100):.0f} GB/s, {ratio:.1f}x",
               "datasheets (data/specs/gpus.csv)", Judged(PAPER, checks_hold(checks)),
               "Our GPU registry's datasheet values against the quoted ones; their ratio rounded.")


def _not_proportional(ev: Evidence) -> dict:
    """R1d: the eager step's speed-up over the L4's bf16 step against the bandwidth ratio, per source."""
    l4_pub = ev.pub_value("quantisation", "step_ms", gpu=L4, arm="eager")
    h100 = ev.pub_value("quantisation", "step_ms", gpu=H100, arm="eager")
    bw = ev.bandwidth(H100) / ev.bandwidth(L4)
    pub_sp = l4_pub / h100
    ours, parts = {}, []
    for g in [g for g in ev.measured if g != L4 and ev.bandwidth(g) > ev.bandwidth(L4)]:
        c = ev.cell(g)
        if c is None:
            continue
        l4 = ev.cell(L4)
        l4_ms, src = (l4["t_obs_ms"], "measured") if l4 is not None else (l4_pub, "published")
        ratio, sp, n = ev.bandwidth(g) / ev.bandwidth(L4), l4_ms / c["t_obs_ms"], _noise(c) + _noise(l4)
        ours[g] = two_sided(sp * (1 + n) < ratio, sp / (1 + n) > ratio)
        parts.append(f"{g} eager {c['t_obs_ms']:.2f} ms vs L4 bf16 {l4_ms:.2f} ms ({src}): {sp:.2f}x faster with "
                     f"{ratio:.1f}x the bandwidth")
    return row("R1d", "inverted_ladder", "The H100's 11x bandwidth advantage does not give an 11x speed-up.",
               f"L4 bf16 {l4_pub:.2f} ms vs H100 eager {h100:.2f} ms = {pub_sp:.2f}x", "; ".join(parts) or "-",
               ", ".join(f"{g} (measured)" for g in ours) or "-",
               [Judged(CLAIM_GPU, ours.get(H100, NOT_TESTABLE), H100),
                Judged(PAPER, two_sided(pub_sp < bw, pub_sp > bw), f"{pub_sp:.2f}x faster with {bw:.1f}x the bandwidth"),
                Judged(OTHER_GPU, all_of(v for g, v in ours.items() if g != H100), ", ".join(g for g in ours if g != H100))],
               "The eager step's speed-up over the L4 bf16 step against the bandwidth ratio, the cells' session "
               "ranges as noise. " + ("; ".join(parts) + "." if parts else ""), claim_gpu=H100)


def _falls(ev: Evidence) -> dict:
    """R1e: R_floor against bandwidth, on the published points and on ours apart (one source at a time)."""
    n_min = int(rules.get("R1e").t("min_points"))
    pub = {p.gpu: (ev.bandwidth(p.gpu), p.value) for p in ev.pub("inverted_ladder", "r_floor").itertuples()}
    ours = {g: (ev.bandwidth(g), ev.cell(g)["r_floor_W_all"]) for g in ev.measured if ev.cell(g) is not None}
    paper_ours = {g: v for g, v in ours.items() if g in ev.paper_gpus}
    fmt = lambda pts, src: [f"{g} {bw:.0f} GB/s: {v:.2f} ({src})" for g, (bw, v) in sorted(pts.items(), key=lambda kv: kv[1][0])]
    parts = fmt(pub, "published") + fmt(ours, "measured")
    return row("R1e", "inverted_ladder", "Achieved fraction of peak bandwidth (R_floor) falls as peak bandwidth rises.",
               "L4 0.81 > H100 0.27", "; ".join(parts), ", ".join(f"{g} (measured)" for g in ours) or "-",
               [Judged(CLAIM_GPU, falls_as_bandwidth_rises(list(paper_ours.values()), n_min), ", ".join(paper_ours)),
                Judged(PAPER, falls_as_bandwidth_rises(list(pub.values()), n_min), "L4 0.81 > H100 0.27")],
               f"Eager R_floor of the headline cell ({ev.headline_model}, ctx {ev.headline_ctx}) falls strictly with "
               f"datasheet bandwidth over at least {n_min} GPUs of one source; our {len(ours)} measured GPU(s) are not "
               "among the paper's and cannot test it alone (the H200's point continues the published trend: "
               + "; ".join(fmt(ours, "measured")) + ").")


def _note(ev: Evidence) -> dict:
    tol = rules.get("N1").t("rel_tol")
    checks, parts = [], []
    for r in ev.pub("inverted_ladder", "r_floor_recomputed_w_all").itertuples():
        step = ev.pub_value("quantisation", "step_ms", gpu=r.gpu, arm="eager")
        ours = ev.floor_ms(r.gpu) / step
        checks.append(abs(ours / r.value - 1) <= tol)
        parts.append(f"{r.gpu}: {ev.floor_ms(r.gpu):.3f} ms / {step:.2f} ms = {ours:.3f} (note: {r.value:.2f})")
    return row("N1", "inverted_ladder", "A note of ours (not the paper's claim): under W = all parameters the published "
               "L4 62.32 ms gives R_floor ~ 0.82 and the H100 eager 14.83 ms ~ 0.31, not the published 0.27.",
               "0.82 / 0.31", "; ".join(parts), "arithmetic on published step times", Judged(METHOD, checks_hold(checks)),
               f"Our W_all floor of Qwen-2.5-7B at ctx 2048 over each published bf16 eager step, within {tol:.0%} of "
               "the note's value. So the published H100 0.27 needs a different byte convention, model, context or step "
               "time than the 14.83 ms the paper quotes.")


def inverted_ladder(ev: Evidence) -> list[dict]:
    return _headline_r_floor(ev) + [_bandwidths(ev), _not_proportional(ev), _falls(ev), _note(ev)]
