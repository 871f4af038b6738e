"""The thesis claims (T1, T2): which term binds batch-1 decode on fast GPUs and on slow ones."""

from __future__ import annotations

from decodegap.claims.evidence import FAST_GPU_GBPS, SLOW_GPU_GBPS, Evidence
from decodegap.claims.verdicts import CONSISTENT, all_true, largest_term, row

BANDWIDTH_BOUND_R_FLOOR = 0.5
"""A step is bandwidth-bound when more than half of it is the memory floor (R_floor > 0.5)."""


def thesis(ev: Evidence) -> list[dict]:
    fast = [g for g in ev.measured if ev.bandwidth(g) >= FAST_GPU_GBPS]
    slow = [g for g in ev.measured if ev.bandwidth(g) < SLOW_GPU_GBPS]
    checks, parts = [], []
    for g in fast:
        d = ev.headline_decomp(g)
        if d.empty:
            continue
        med = d[["t_floor_ms", "gpu_excess_ms", "launch_overhead_ms"]].median()
        term = largest_term(med["t_floor_ms"], med["gpu_excess_ms"], med["launch_overhead_ms"])
        checks.append(term == "launch")
        parts.append(f"{g} (measured, the A/B grid sweep) ctx {ev.headline_ctx}, median over {len(d)} models: floor {med['t_floor_ms']:.2f} ms, "
                     f"GPU-side excess {med['gpu_excess_ms']:.2f} ms, launch overhead {med['launch_overhead_ms']:.2f} ms "
                     f"= {d['launch_overhead_fraction'].median():.0%} of the eager step; largest term: {term}")
    published_fast = []
    for g in sorted(set(ev.pub("quantisation", "step_ms")["gpu"])):
        if g in fast or ev.bandwidth(g) < FAST_GPU_GBPS:
            continue
        steps = ev.pub("quantisation", "step_ms", gpu=g)
        arms = dict(zip(steps["arm"], steps["value"]))
        if {"eager", "graph"} <= set(arms):
            floor = ev.floor_ms(g)
            launch, excess = arms["eager"] - arms["graph"], arms["graph"] - floor
            term = largest_term(floor, excess, launch)
            checks.append(term == "launch")
            published_fast.append(g)
            parts.append(f"{g} (published eager {arms['eager']:.2f} ms, graph {arms['graph']:.2f} ms; our W_all floor of "
                         f"{ev.headline_model} ctx {ev.headline_ctx}): floor {floor:.2f} ms, GPU-side excess {excess:.2f} ms, "
                         f"launch overhead {launch:.2f} ms; largest term: {term}")
    rows = [row("T1", "thesis", "On fast GPUs the binding term of batch-1 decode is per-kernel CPU launch overhead, "
                 "not memory bandwidth.", "qualitative", "; ".join(parts) or "-",
                 ", ".join([f"{g} (measured)" for g in fast if not ev.headline_decomp(g).empty]
                           + [f"{g} (published)" for g in published_fast]) or "-",
                 all_true(checks) if any(not ev.headline_decomp(g).empty for g in fast) else all_true(checks, CONSISTENT),
                 ("Rule, per GPU with datasheet bandwidth >= " f"{FAST_GPU_GBPS} GB/s, measured or published: launch "
                  "overhead (eager - graph) is the largest of floor / GPU-side excess (graph - floor) / launch overhead "
                  "at the headline context; the claim holds when it holds on every such GPU. "
                  + (". ".join(parts) if parts else f"No fast GPU with eager and graph rows: {ev.missing('h100-sxm')}.")
                  + ". Where the GPU-side excess is the largest term, the graphed step's own kernels (their fixed "
                  "cost and inefficiency), not the launches, bind"))]
    checks, parts = [], []
    for g in slow:
        c = ev.cell(g)
        if c is not None:
            checks.append(c["r_floor_W_all"] > BANDWIDTH_BOUND_R_FLOOR)
            parts.append(f"{g} eager R_floor {c['r_floor_W_all']:.2f}")
    rows.append(row("T2", "thesis", "On slow GPUs (L4) the binding term is memory bandwidth.", "qualitative",
                     "; ".join(parts) or "-", ", ".join(slow) or "-", all_true(checks),
                     f"Rule: eager R_floor > {BANDWIDTH_BOUND_R_FLOOR} on every measured GPU below {SLOW_GPU_GBPS} GB/s. "
                     + ("; ".join(parts) if parts else f"No such GPU measured: {ev.missing('l4')}. The published L4 "
                        f"R_floor {ev.pub_value('inverted_ladder', 'r_floor', gpu='l4'):.2f} and graph speed-up "
                        f"{ev.pub_value('cuda_graphs', 'speedup', gpu='l4'):.3f}x are consistent with it.")))
    return rows
