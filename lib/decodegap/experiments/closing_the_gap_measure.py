"""Measurements of notebook 06: every lever of the ladder in fresh sessions (levers.ladder_plan), then the
profiled steps behind its breakdown of where the time goes (ab_bench.record_kernels)."""

from __future__ import annotations

from decodegap import inputs
from decodegap.experiments.cuda_graphs_ab_measure import record_kernels
from decodegap.arms import ARM_KERNELS
from decodegap.harness.sweep import SweepPlan, run_sweep


LADDER_PROFILED_ARMS = ("eager", "lean", "lean_kernels_graph", "lean_attn_graph") + tuple(
    arm for arm, kernels in ARM_KERNELS.items() if "pdl" in kernels)
"""The arms measure_ladder profiles per cell (decode.kernel_profile profiles the eager step a graphed arm
captures; the fused steps with PDL, every such arm of the registry, kernel by kernel). Before the split-KV attention's products became tl.dot, the H200 target cell was profiled as
`lean_kernels` (the same kernels, eager); those rows stay, labelled by their run's commit."""
LADDER_TARGET_PROFILED_ARMS = ("lean_attn_compile",)
"""Arms measure_ladder profiles at the target cell only (levers.TARGETS): the fastest lever there, compiled
without its CUDA graph for the profile (a compile per cell, each cold, would cost a GPU run's time over the grid), in each
quantisation of LADDER_TARGET_PROFILED_QUANTS."""
LADDER_TARGET_PROFILED_QUANTS = ("bf16", "int4-tinygemm")
"""The quantisations of the target-cell profiles: bf16 and int4 weight-only on the fastest path, one per target."""


def measure_ladder(gpu: str, model_keys, contexts, n_sessions: int = 3, steps: int = 30, warmup: int = 5,
                   device: str = "cuda", data=None, retry_errors: bool = False, only=None, again: bool = False) -> None:
    """Notebook 06's measurements, resumable: the sweeps of levers.ladder_plan in fresh sessions (per
    quantisation path, bf16 then int4 tinygemm, the lean levers over the grid, int4 also on the HF graph; the
    levers of levers.TARGET_CELL_ONLY at the target cell only; the other HF levers come from notebooks 01 and
    02), then one profiled step per cell (kernel counts and the per-kernel breakdown) of the HF eager
    and lean eager steps and of the step each Triton lever's graph replays (lean_kernels_graph: GEMV and
    split-KV attention; lean_attn_graph: the attention only), and at the target cell the compiled lean step with the
    Triton attention (LADDER_TARGET_PROFILED_ARMS), bf16 and int4 (LADDER_TARGET_PROFILED_QUANTS). `retry_errors`
    measures again the lean cells recorded only as `error` (their rows stay; a cell's ok rows win in the tables).
    `only`: these levers (arms of levers.LEVERS) and no others, swept and profiled (ladder --levers); `again`:
    every cell measured and profiled again, the old rows kept as history (ladder --again: after a change to a
    lever's kernels; roofline.one_sweep and records.latest_profiles read the new rows)."""
    from decodegap import levers

    inputs.gpu_to_measure(gpu, device, data)
    inputs.models(model_keys, data)
    plans = [SweepPlan(gpu=gpu, models=models_, contexts=contexts_, arms=arms, quant=quant, sessions=n_sessions,
                       steps=steps, warmup=warmup, device=device, retry_errors=retry_errors, again=again)
             for quant, models_, contexts_, arms in levers.ladder_plan(model_keys, contexts, gpu, only)]
    for plan in plans:
        run_sweep(plan, data)
    profiled = tuple(a for a in LADDER_PROFILED_ARMS if not only or a in only)
    if profiled:
        record_kernels(gpu, model_keys, contexts, arms=profiled, data=data, device=device, again=again)
    target_arms = tuple(a for a in LADDER_TARGET_PROFILED_ARMS if not only or a in only)
    if target_arms and levers.target_in_grid(model_keys, contexts, gpu):
        target = levers.TARGETS["bf16"]
        for quant in LADDER_TARGET_PROFILED_QUANTS:
            record_kernels(gpu, [target["model"]], [target["ctx"]], arms=target_arms, data=data,
                           device=device, quant=quant, again=again)
