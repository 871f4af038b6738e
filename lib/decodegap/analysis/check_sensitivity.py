"""How sensitive the decode check is (notebook 06's 06_check_sensitivity table and findings): the lean decoder's faults
against correct arms, both checked against HF eager, from the diagnostics' rows (data/diagnostics/sharp_noise_gpu.csv
on a GPU, bench/sharp_noise_gpu.py; check_sensitivity_cpu.csv on a CPU's narrow model). A check can only vouch for a lever
if every fault it is meant to catch lands above its tolerance and every correct arm below."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from decodegap import paths
from decodegap.finding import Finding

AS_BUILT = "as built"
DIAGNOSTIC = "sharp_noise_gpu"


def load(data: Path | None = None, name: str = DIAGNOSTIC) -> pd.DataFrame:
    """The diagnostic's rows (empty where it has none), ok rows only."""
    path = Path(data or paths.DATA) / "diagnostics" / f"{name}.csv"
    if not path.exists():
        return pd.DataFrame(columns=["device", "model", "ctx", "arm", "case", "sharpen", "max_rel_err", "status"])
    rows = pd.read_csv(path)
    return rows[rows["status"] == "ok"]


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per device and sharpening factor: the largest error of a correct arm (every arm and cell as built), and per
    fault the smallest error over the models it was injected on, with how many rows each rests on."""
    cols = ["device", "sharpen", "case", "rows", "models", "max_rel_err_min", "max_rel_err_max"]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    out = (rows.groupby(["device", "sharpen", "case"])
           .agg(rows=("max_rel_err", "size"), models=("model", "nunique"), max_rel_err_min=("max_rel_err", "min"),
                max_rel_err_max=("max_rel_err", "max")).reset_index())
    return out[cols]


def findings(sensitivity: pd.DataFrame, tol: float) -> list[str]:
    """Per device and factor: whether the check at `tol` passes every correct arm and fails each fault, with the
    margin (the smallest fault error over the largest correct one)."""
    out = []
    for (device, factor), g in sensitivity.groupby(["device", "sharpen"]):
        g = g.set_index("case")
        if AS_BUILT not in g.index:
            continue
        noise = float(g.loc[AS_BUILT, "max_rel_err_max"])
        faults = g.drop(index=AS_BUILT)
        caught = [c for c in faults.index if faults.loc[c, "max_rel_err_min"] > tol]
        missed = [c for c in faults.index if c not in caught]
        n_models = int(g.loc[AS_BUILT, "models"])
        head = (f"{device}, scores x{factor:g}: correct arms at most {noise:.3f} from HF eager "
                f"({int(g.loc[AS_BUILT, 'rows'])} checks, {n_models} model{'s' if n_models != 1 else ''})"
                + (f", within the tolerance {tol:g}" if noise <= tol else
                   f", past the tolerance {tol:g}: at this factor the check fails correct arms too and vouches for "
                   "nothing"))
        values = dict(device=device, sharpen=factor, correct_max=noise, checks=int(g.loc[AS_BUILT, "rows"]),
                      models=n_models, within_tolerance=bool(noise <= tol))
        if faults.empty:
            out.append(Finding(head + "; no fault injected at this factor.", **values))
            continue
        parts = [f"{c} at least {faults.loc[c, 'max_rel_err_min']:.3f}" for c in faults.index]
        verdict = ("every fault fails" if not missed else f"caught: {', '.join(caught) or 'none'}; missed: {', '.join(missed)}")
        margin = faults.loc[caught, "max_rel_err_min"].min() / noise if caught and noise > 0 else float("nan")
        out.append(Finding(head + f"; faults: {'; '.join(parts)}: {verdict}"
                           + (f" (the weakest caught fault is {margin:.0f}x the largest correct error)."
                              if caught and noise <= tol else "."),
                           caught="; ".join(caught), missed="; ".join(missed), margin=margin, **values))
    return out
