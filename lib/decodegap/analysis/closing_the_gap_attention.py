"""Notebook 06's split-KV attention by itself (bench/attention_splits.py, data/diagnostics/attention_splits.csv): per
GPU, model and context, one call a layer in a CUDA graph with PDL, the step's default form (block 32, the split from
kernels.step.split_size, V loaded after the scores, a merge kernel) beside the kv-together levers' (block
KV_TOGETHER_BLOCK, V beside K), the one-kernel form of that (its last program merging), and the fastest variant the
bench timed; each against the KV it reads at the datasheet bandwidth (the attention's floor a layer). On sm_90 V's
load beside K's compiles as the default order does (tests/test_kernels.py), so two variants that differ in it alone
run the same kernel: their times differ by the bench's noise."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from decodegap import paths
from decodegap.analysis.closing_the_gap_int4_products import gpu_keys
from decodegap.kernels.step import KV_TOGETHER_BLOCK, SPLIT_STAGES, SPLIT_WARPS, split_size

DIAGNOSTIC = "attention_splits"
VARIANT = ["block", "split", "kv_together", "merged", "warps", "stages"]
COLUMNS = ["gpu", "model", "ctx", "length", "floor_us", "default_us", "kv_together_us", "one_kernel_us",
           "fastest_us", "fastest", "variants"]
"""The columns of figures/06_attention_splits: per GPU (registry key), model and context, the live `length`, the
attention's floor a layer (`floor_us`: K and V of `length` positions at the datasheet bandwidth, us), the
median us per call of the default form, of the kv-together levers' form, of its one-kernel form, and of the fastest
variant timed (`fastest`: its block, split, V beside K, one kernel), and how many variants were timed."""


def load(data: Path | None = None) -> pd.DataFrame:
    """The bench's `ok` rows (empty where it has none); warps and stages blank (rows from before the launch sweep,
    which passed neither) read as Triton's defaults, SPLIT_WARPS and SPLIT_STAGES."""
    path = Path(data or paths.DATA) / "diagnostics" / f"{DIAGNOSTIC}.csv"
    if not path.exists():
        return pd.DataFrame(columns=["gpu", "model", "ctx", "L", "length", "Hkv", *VARIANT, "us", "bytes"])
    rows = pd.read_csv(path)
    rows = rows[rows["status"] == "ok"].copy()
    for column, default in (("warps", SPLIT_WARPS), ("stages", SPLIT_STAGES)):
        rows[column] = rows[column].fillna(default).astype(int) if column in rows else default
    return rows


def table(rows: pd.DataFrame, specs: pd.DataFrame) -> pd.DataFrame:
    """COLUMNS per (GPU, model, ctx) of the bench's rows; a device the registry lacks is left out (no datasheet)."""
    keys = gpu_keys(specs)
    bandwidth = specs.set_index("gpu")["bandwidth_gbps"]
    out = []
    for (device, model, ctx), cell in rows.groupby(["gpu", "model", "ctx"]):
        gpu = keys.get(device)
        if gpu is None:
            continue
        us = cell.groupby(VARIANT)["us"].median()
        L, Hkv = int(cell["L"].iloc[0]), int(cell["Hkv"].iloc[0])

        def of(block, kv_together, merged):
            key = (block, split_size(L, Hkv, block), int(kv_together), int(merged), SPLIT_WARPS, SPLIT_STAGES)
            return float(us.get(key, float("nan")))

        fastest = us.idxmin()
        out.append(dict(gpu=gpu, model=model, ctx=int(ctx), length=int(cell["length"].iloc[0]),
                        floor_us=float(cell["bytes"].iloc[0]) / float(bandwidth[gpu]) / 1e3,
                        default_us=of(32, False, False), kv_together_us=of(KV_TOGETHER_BLOCK, True, False),
                        one_kernel_us=of(KV_TOGETHER_BLOCK, True, True), fastest_us=float(us.min()),
                        fastest=f"block {fastest[0]}, split {fastest[1]}, V beside K {'yes' if fastest[2] else 'no'}, "
                                f"{'one kernel' if fastest[3] else 'two kernels'}, {fastest[4]} warps, "
                                f"{fastest[5]} stage{'' if fastest[5] == 1 else 's'}",
                        variants=len(us)))
    return pd.DataFrame(out, columns=COLUMNS)


def findings(t: pd.DataFrame, layers: dict) -> list[str]:
    """One line per GPU and model: the attention a layer against its floor at each context, what the kv-together form
    and the fastest variant give a step (`layers`: {model: decoder layers}), and the one-kernel form's cost."""
    lines = []
    for (gpu, model), g in t.groupby(["gpu", "model"]):
        n = int(layers.get(model, 0))
        parts = []
        for r in g.sort_values("ctx").itertuples():
            parts.append(f"ctx {r.ctx}: {r.default_us:.2f} us by default, {r.kv_together_us:.2f} in the kv-together "
                         f"levers' form (block {KV_TOGETHER_BLOCK}), {r.fastest_us:.2f} at the fastest of "
                         f"{r.variants} variants ({r.fastest}), against a floor of {r.floor_us:.2f} us"
                         + (f", so {n * (r.fastest_us - r.floor_us) / 1e3:.2f} ms a step above the floor at "
                            f"best; the one-kernel form {r.one_kernel_us:.2f} us" if n else ""))
        lines.append(f"The split-KV attention alone on the {gpu} ({model}'s shape, one call a layer, graphed with "
                     f"PDL): " + "; ".join(parts) + ".")
    return lines
