"""Measurements of notebook 01: its sweep of the roofline grid (`plan`, run through sweep.run_sweep into
data/raw/<gpu>/decode.csv) and the copy-bandwidth probe (hardware.copy_bandwidth, data/raw/<gpu>/bandwidth.csv)."""

from __future__ import annotations

from decodegap import hardware, paths, records
from decodegap.harness import runs
from decodegap.harness.sweep import SweepPlan, run_sweep


def plan(gpu: str, model_keys, contexts, arms=("eager", "hf_default"), n_sessions: int = 3, steps: int = 30,
         warmup: int = 5, device: str = "cuda") -> SweepPlan:
    """Notebook 01's sweep: bf16 with SDPA's default, every model x context x arm, `n_sessions` fresh sessions."""
    return SweepPlan(gpu=gpu, models=tuple(model_keys), contexts=tuple(contexts), arms=tuple(arms),
                     sessions=n_sessions, steps=steps, warmup=warmup, device=device)


def measure_roofline(gpu: str, model_keys, contexts, arms=("eager", "hf_default"), n_sessions: int = 3,
                     steps: int = 30, warmup: int = 5, device: str = "cuda", data=None,
                     bandwidth_bytes: int = 2 << 30) -> str:
    """Notebook 01's measurements: the sweep of `plan`, then the copy-bandwidth probe. Returns the sweep's run id."""
    run_id = run_sweep(plan(gpu, model_keys, contexts, arms, n_sessions, steps, warmup, device), data)
    record_bandwidth(gpu, data, device, size_bytes=bandwidth_bytes)
    return run_id


def record_bandwidth(gpu: str, data=None, device: str = "cuda", size_bytes: int = 2 << 30, reps: int = 20) -> str:
    """Run the copy-bandwidth probe and append its rows to data/raw/<gpu>/bandwidth.csv."""
    with runs.recorded(gpu, data, "bandwidth", ["bandwidth"], device=device,
                       gpu_state_before=hardware.gpu_state()) as run_id:
        rows = hardware.copy_bandwidth(device, size_bytes=size_bytes, reps=reps)
        for r in rows:
            r.update(run_id=run_id, gpu=gpu)
        records.append_rows(paths.raw_dir(gpu, data) / "bandwidth.csv", records.BANDWIDTH, rows)
    return run_id
