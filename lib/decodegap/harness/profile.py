"""The kernel profile of a decode step (kernel_profile: torch.profiler over one step of an arm), measured once for
every notebook that reads it (record_kernels): how many kernels a step launches (data/raw/<gpu>/kernels.csv:
notebook 02's decomposition) and each kernel's name and GPU time (breakdown.csv: notebook 06's where the time goes
and notebook 04's products, read by analysis.profiles)."""

from __future__ import annotations

from decodegap import inputs, paths, records, selection
from decodegap.arms import COMPILED_ARMS
from decodegap.harness import decode, keys, models, runs
from decodegap.harness.sweep import free_device_memory
from decodegap.outcome import attempt


def record_kernels(gpu: str, model_keys, contexts, arms=("eager", "hf_default"), data=None, device: str = "cuda",
                   quant: str = "bf16", again: bool = False, batches=(1,)) -> str:
    """Profile one decode step per model, context and arm (kernel_profile): the kernel count goes to
    data/raw/<gpu>/kernels.csv, every kernel's name and GPU time to breakdown.csv (notebook 06's where the
    time goes). A graph replays exactly the eager step's kernels. `quant` other than bf16 profiles the model with
    its decoder layers swapped for that path's (quant.quantise_model_, as run_sweep does); a path that cannot
    run here leaves `unavailable` rows with the reason. Resumes per file, and builds no model whose steps are all
    profiled already; `again`: profiles every step again (the tables read each step's latest profile,
    selection.latest_profiles). `batches`: the numbers of sequences each profiled step decodes together (a row per
    batch; an arm whose kernels take one row is `unavailable` above 1, as in the sweeps)."""
    from decodegap.harness.sweep import check_batches

    batches = check_batches(batches)
    arms = keys.arms(arms)
    keys.quant(quant)
    inputs.contexts(tuple(contexts))
    keys.models(model_keys, data)
    with runs.recorded(gpu, data, "kernels", ["kernels", "breakdown"], device=device) as run_id:
        folder = paths.raw_dir(gpu, data)
        done = selection.done_keys(folder / "kernels.csv", records.KERNELS, run_id=run_id, again=again)
        done_breakdown = selection.done_keys(folder / "breakdown.csv", records.BREAKDOWN, run_id=run_id, again=again)
        for key in model_keys:
            cells = [(ctx, batch, arm) for ctx in contexts for batch in batches for arm in arms
                     if not {_kernels_key(gpu, key, ctx, arm, quant, batch)} <= done & done_breakdown]
            if not cells:
                continue
            model = models.build_model(models.load_spec(key, data), device=device)
            unavailable = None
            if quant != "bf16":
                from decodegap.quant import loaders as quant_loaders, paths as quant_paths

                try:
                    quant_paths.quantise_model_(model, quant)
                except quant_loaders.QuantUnavailable as exc:
                    unavailable = str(exc)
            for ctx, batch, arm in cells:
                base = dict(run_id=run_id, gpu=gpu, model=key, ctx=ctx, batch=batch, arm=arm, attn="sdpa", quant=quant)
                cell = _kernels_key(gpu, key, ctx, arm, quant, batch)
                if unavailable is None:
                    profile, status, reason = attempt(lambda: kernel_profile(model, arm, ctx, batch=batch),
                                                      (decode.ArmUnavailable,))
                else:
                    profile, status, reason = None, "unavailable", unavailable
                base.update(status=status, reason=reason)
                if cell not in done:
                    records.append_rows(folder / "kernels.csv", records.KERNELS,
                                        [dict(base, kernels=len(profile) if profile is not None else None)])
                if cell not in done_breakdown:
                    rows = ([dict(base, kernel_index=i, kernel=name[:200], gpu_us=us) for i, (name, us) in enumerate(profile)]
                            if profile is not None else [dict(base, kernel_index=None, kernel=None, gpu_us=None)])
                    records.append_rows(folder / "breakdown.csv", records.BREAKDOWN, rows)
                free_device_memory(device)
            del model
            free_device_memory(device)
    return run_id


def _kernels_key(gpu: str, model: str, ctx: int, arm: str, quant: str, batch: int = 1) -> tuple:
    """A profiled step's key in kernels.csv and breakdown.csv (records.KERNELS.key), default attention."""
    base = dict(gpu=gpu, model=model, ctx=ctx, batch=batch, arm=arm, attn="sdpa", quant=quant)
    return tuple(str(base[c]) for c in records.KERNELS.key)


def kernel_profile(model, arm: str, ctx: int, seed: int = 0, batch: int = 1) -> list[tuple[str, float]]:
    """(name, GPU microseconds) of every kernel one decode step launches, in launch order (torch.profiler;
    one profiled eager step after a warm-up step; memcpy and memset left out). `arm` picks the step
    (decode.step_state): an eager arm (eager, hf_default, lean, lean_kernels; a graph replays the same kernels as its
    eager step, without the gaps between them) or a compiled arm, compiled here without its CUDA graph
    (mode=None: inductor's kernels, which reduce-overhead's graph replays), its compile the warm-up step. `batch`:
    the sequences the step decodes together (decode.run_arm)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    reason = decode.arm_available(arm, model, batch) if batch > 1 else None
    if reason:
        raise decode.ArmUnavailable(reason)
    if next(model.parameters()).device.type != "cuda":
        raise decode.ArmUnavailable("profiling GPU kernels needs a CUDA device")
    with torch.inference_mode():
        overrides = dict(mode=None) if arm in COMPILED_ARMS else {}
        state = decode.step_state(model, arm, ctx, ctx + 4, seed, batch=batch, **overrides)
        state.step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            state.step()
            torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "Memcpy" not in e.name and "Memset" not in e.name]
    kernels.sort(key=lambda e: e.time_range.start)
    return [(e.name, float(e.time_range.elapsed_us())) for e in kernels]


def kernels_per_step(model, arm: str, ctx: int, seed: int = 0) -> int:
    """GPU kernels one decode step launches (see kernel_profile)."""
    return len(kernel_profile(model, arm, ctx, seed))
