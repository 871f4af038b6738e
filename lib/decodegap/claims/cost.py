"""Results 5, cost (R5, R5m): the L4's cost per token against the graphed H100's and the fast GPU measured here
(notebook 05)."""

from __future__ import annotations

from decodegap.analysis import cost
from decodegap.analysis.closing_the_gap_confirmation import CONFIRMED, NOT_CONFIRMED
from decodegap import published
from decodegap.levers import CONFIRM_SESSIONS
from decodegap.claims import rules
from decodegap.claims.evidence import FAST_GPU_GBPS, Evidence
from decodegap.claims.rules import CLAIM_GPU, METHOD, PAPER
from decodegap.claims.verdicts import NOT_TESTABLE, Judged, about, row, two_sided


def cost_claim(ev: Evidence) -> list[dict]:
    target = ev.pub_value("cost", "cost_ratio", gpu="l4")
    ratios = cost.ratio_table(ev.costs, "l4", "h100-sxm")
    # the paper's own step times on both sides: a measured H100 row (any model or context) is not the paper's number
    graphed = ratios[(ratios["configuration_h100-sxm"] == "bf16 graph")
                     & (ratios["source_h100-sxm"] == published.PUBLISHED_LABEL)
                     & (ratios["source_l4"] == published.PUBLISHED_LABEL)]
    tol = rules.get("R5").t("rel_tol")
    if graphed.empty:
        verdict, ours, evidence, hardware = NOT_TESTABLE, "-", "No priced L4 and graphed H100 configurations.", "-"
    else:
        best = graphed.sort_values("usd_per_mtok_l4").iloc[0]  # the L4's cheapest ("optimised kernels")
        verdict = about(best["cost_ratio"], target, tol)
        ours = f"{best['cost_ratio']:.2f}x"
        hardware = (f"l4 {best['configuration_l4']} ({best['source_l4']}) vs h100-sxm bf16 graph ({best['source_h100-sxm']}), "
                    f"{cost.PROVIDER} prices")
        span = ratios["cost_ratio"]
        top = ratios.iloc[0]
        evidence = (f"The cheapest L4 configuration against the graphed H100 at the listed prices, within {tol:.0%} of {target:g}x. L4 {best['configuration_l4']} {best['step_ms_l4']:.2f} ms "
                    f"at ${best['usd_per_hour_l4']:.4f}/h = ${best['usd_per_mtok_l4']:.2f}/Mtok; H100 graph "
                    f"{best['step_ms_h100-sxm']:.2f} ms at ${best['usd_per_hour_h100-sxm']:.4f}/h = ${best['usd_per_mtok_h100-sxm']:.2f}/Mtok "
                    f"(data/specs/prices.csv: {_price_sources(ev)}). Over all {len(ratios)} pairs of L4 and H100 configurations "
                    f"the ratio spans {span.min():.2f}-{span.max():.2f}x (largest: L4 {top['configuration_l4']} vs H100 "
                    f"{top['configuration_h100-sxm']}). {target:g}x would need an H100/L4 price ratio of "
                    f"{cost.price_ratio_needed(target, best['step_ratio']):.2f} (listed: {best['price_ratio']:.2f}), or, at the listed "
                    f"prices, a graphed H100 step of {target * best['usd_per_mtok_l4'] / best['usd_per_hour_h100-sxm'] * 3.6:.1f} ms "
                    f"(published: {best['step_ms_h100-sxm']:.2f} ms).")
    return [row("R5", "cost", "At Modal's published prices of May 2026, the L4 with optimised kernels serves tokens about 6x "
                 "cheaper than the H100 with CUDA Graphs.", f"~{target:g}x", ours, hardware,
                 [Judged(CLAIM_GPU, NOT_TESTABLE), Judged(PAPER, verdict, "the paper's step times at the listed prices")],
                 evidence, claim_gpu="l4")]


def cost_claim_measured(ev: Evidence) -> list[dict]:
    """R5 on the GPU measured here: the L4 with optimised kernels (published) against each measured fast GPU's
    graphed step at the headline cell, each at its price in prices.csv (another provider's where the paper's
    has none, named). Reproduced when the L4 is cheaper per token."""
    c = ev.costs
    l4 = c[(c["gpu"] == "l4") & (c["source"] == published.PUBLISHED_LABEL) & (c["quant"] == "gptq-exllamav2")]
    graphed = c[(c["source"] == cost.MEASURED_LABEL) & (c["arm"] == "graph") & (c["quant"] == "bf16")
                & (c["attn"] == "sdpa") & (c["model"] == ev.headline_model) & (c["ctx"] == ev.headline_ctx)
                & (c["bandwidth_gbps"] >= FAST_GPU_GBPS)].dropna(subset=["usd_per_mtok"])
    statement = ("The cost claim on the fast GPU measured here: the L4 with optimised kernels serves tokens cheaper than "
                 f"the {'/'.join(sorted(set(graphed['gpu']))) or 'fast GPU'} with CUDA Graphs "
                 f"({ev.headline_model}, ctx {ev.headline_ctx}).")
    if l4.empty or graphed.empty:
        return [row("R5m", "cost", statement, "L4 cheaper", "-", "-", Judged(METHOD, NOT_TESTABLE),
                     "Needs a priced, measured graphed step of a fast GPU at the headline cell.")]
    a = l4.iloc[0]
    thr = rules.get("R5m").t("ratio")
    rows = []
    for g in graphed.sort_values("gpu").itertuples():  # one row per GPU, in a fixed order (one_left_out pairs by it)
        ratio = g.usd_per_mtok / a["usd_per_mtok"]
        best = c[(c["gpu"] == g.gpu) & (c["source"] == cost.MEASURED_LABEL) & (c["model"] == ev.headline_model)
                 & (c["ctx"] == ev.headline_ctx)].dropna(subset=["usd_per_mtok"]).sort_values("usd_per_mtok").iloc[0]
        seller = g.price_provider
        rows.append(row("R5m", "cost", statement, "L4 cheaper", f"{ratio:.2f}x",
                         f"l4 gptq-exllamav2 (published) vs {g.gpu} bf16 graph (measured), {seller} price for the {g.gpu}",
                         Judged(METHOD, two_sided(ratio > thr, ratio <= thr)),
                         f"Met when the {g.gpu}'s $/Mtok over the L4's is above {thr:g} (this package's own statement, "
                         "a method check). L4 gptq-exllamav2 "
                         f"{a['step_ms']:.2f} ms at ${a['usd_per_hour']:.4f}/h = ${a['usd_per_mtok']:.2f}/Mtok; {g.gpu} "
                         f"graph {g.step_ms:.2f} ms at ${g.usd_per_hour:.4f}/h ({seller}'s price"
                         f"{'' if seller == cost.PROVIDER else ', no ' + cost.PROVIDER + ' price found'}) = "
                         f"${g.usd_per_mtok:.2f}/Mtok. The {g.gpu}'s cheapest measured configuration there, "
                         f"{best['configuration']} ({best['step_ms']:.2f} ms), costs ${best['usd_per_mtok']:.2f}/Mtok "
                         f"({best['usd_per_mtok'] / a['usd_per_mtok']:.2f}x the L4's)"
                         + _confirmed_words(cost.confirmation_of(best, ev.confirmations), a) + "."))
    return rows


def _confirmed_words(c: dict, l4) -> str:
    """The cheapest configuration's confirmation (cost.confirmation_of), against the L4's published $/Mtok: it is
    the cheapest of many, each from one sweep (a best of many); R5m's verdict reads the graphed step, not this."""
    status = cost.confirmation_status(c.get("confirmed_sessions"))
    if status == NOT_CONFIRMED:
        return "; the cheapest of many, from one sweep, not confirmed in fresh sessions"
    how = status if status == CONFIRMED else f"{status} ({CONFIRM_SESSIONS} asked)"
    return (f"; the cheapest of many, from one sweep, {how} at {c['confirmed_ms']:.2f} ms in "
            f"{c['confirmed_sessions']} fresh sessions: ${c['confirmed_usd_per_mtok']:.2f}/Mtok "
            f"({c['confirmed_usd_per_mtok'] / l4['usd_per_mtok']:.2f}x the L4's)")


def _price_sources(ev: Evidence) -> str:
    p = ev.prices[ev.prices["gpu"].isin(["l4", "h100-sxm"]) & (ev.prices["provider"] == cost.PROVIDER)]
    return "; ".join(f"{r.gpu} {r.usd_per_hour} $/h from {r.source} ({r.source_date})" for r in p.itertuples())
