"""Measurements of notebook 01 beside its sweep of the roofline grid (SweepPlan, run_sweep): the
copy-bandwidth probe (hardware.copy_bandwidth), data/raw/<gpu>/bandwidth.csv."""

from __future__ import annotations

from . import hardware, paths, records, runs


def record_bandwidth(gpu: str, data=None, device: str = "cuda", size_bytes: int = 2 << 30, reps: int = 20) -> str:
    """Run the copy-bandwidth probe and append its rows to data/raw/<gpu>/bandwidth.csv."""
    with runs.recorded(gpu, data, "bandwidth", ["bandwidth"], device=device,
                       gpu_state_before=hardware.gpu_state()) as run_id:
        rows = hardware.copy_bandwidth(device, size_bytes=size_bytes, reps=reps)
        for r in rows:
            r.update(run_id=run_id, gpu=gpu)
        records.append_rows(paths.raw_dir(gpu, data) / "bandwidth.csv", records.BANDWIDTH, rows)
    return run_id
