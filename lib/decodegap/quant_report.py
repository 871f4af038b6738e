"""Summaries of the quantisation rows for notebook 04: every cell with its path's own floor, the paper's
table (ms/step per path, the published L4 column beside our columns), the byte model per model and path,
the per-layer correctness rows, and generated findings.

Step times are roofline-style: the median over sessions of each session's median step (roofline.cell_table).
Each path's floor is its own: quant.step_bytes (packed int4 weights, scales, zeros, the bf16 LM head,
norms, biases, one embedding row, KV at ctx) over the GPU's datasheet bandwidth.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from . import quant, roofline

CLAIM = "quantisation"
PUBLISHED_GPU = "l4"
REALISED_YES, REALISED_PART = 0.8, 0.3
"""Verdict thresholds on the share of the weight-traffic saving realised as time saved (see `realised`)."""


def _group(configs: Mapping[str, Mapping], model: str, group_size: int | None) -> int:
    return group_size or quant.default_group_size(configs[model])


def _bytes(configs, model, key, ctx, group_size=None) -> float:
    if key not in quant.LAYOUT_OF or model not in configs:
        return float("nan")
    return float(quant.step_bytes(configs[model], key, int(ctx), _group(configs, model, group_size)))


def cells(decode_rows: pd.DataFrame, specs: pd.DataFrame, configs: Mapping[str, Mapping],
          bandwidth_rows: pd.DataFrame | None = None, group_size: int | None = None) -> pd.DataFrame:
    """roofline.cell_table of the decode rows plus, per cell, its path's own step bytes (`bytes_quant`),
    floor at the datasheet bandwidth (`t_floor_quant_ms`) and at the measured copy bandwidth, and
    R_floor against them. A quant key outside the byte model gets NaN."""
    if decode_rows.empty:
        return pd.DataFrame(columns=roofline.CELL + ["t_obs_ms", "sessions", "status", "reason", "bytes_quant",
                                                     "t_floor_quant_ms", "r_floor_quant"])
    table = roofline.cell_table(decode_rows, specs, configs, bandwidth_rows)
    table["bytes_quant"] = [_bytes(configs, m, q, c, group_size)
                            for m, q, c in zip(table["model"], table["quant"], table["ctx"])]
    table["t_floor_quant_ms"] = roofline.t_floor_ms(table["bytes_quant"], table["bandwidth_gbps"])
    table["r_floor_quant"] = table["t_floor_quant_ms"] / table["t_obs_ms"]
    table["t_floor_quant_measured_ms"] = roofline.t_floor_ms(table["bytes_quant"], table["measured_gbps"])
    table["r_floor_quant_measured"] = table["t_floor_quant_measured_ms"] / table["t_obs_ms"]
    return table


def byte_table(configs: Mapping[str, Mapping], paths: Sequence[str] | None = None, ctx: int = 2048,
               group_size: int | None = None) -> pd.DataFrame:
    """Per model and path: every byte term of quant.byte_terms (GB), the weights, KV at ctx and the
    step total (GB), and how many times fewer bytes than bf16 the path streams."""
    from . import accounting

    rows = []
    for model, cfg in configs.items():
        G = _group(configs, model, group_size)
        bf16 = quant.step_bytes(cfg, "bf16", ctx)
        for key in paths or quant.PATHS:
            terms = quant.byte_terms(cfg, key, G)
            total = quant.step_bytes(cfg, key, ctx, G)
            rows.append(dict(model=model, quant=key, group_size=G if quant.LAYOUT_OF[key] not in ("bf16", "nf4") else None,
                             **{f"{t}_GB": b / 1e9 for t, b in terms.items()},
                             weights_GB=sum(terms.values()) / 1e9, **{f"kv_ctx{ctx}_GB": accounting.kv_bytes(cfg, ctx) / 1e9},
                             step_GB=total / 1e9, bf16_over_path=bf16 / total))
    return pd.DataFrame(rows)


def layer_summary(layer_rows: pd.DataFrame) -> pd.DataFrame:
    """The per-layer correctness rows, one per (gpu, model, layer, quant), in layer order."""
    cols = ["gpu", "model", "layer", "in_features", "out_features", "quant", "max_rel_err", "status", "reason"]
    if layer_rows.empty:
        return pd.DataFrame(columns=cols)
    order = {name: i for i, name in enumerate(quant.LAYERS)}
    out = layer_rows.drop_duplicates(["gpu", "model", "layer", "quant"], keep="last").copy()
    out["_o"] = out["layer"].map(order).fillna(99)
    return out.sort_values(["gpu", "model", "quant", "_o"])[cols].reset_index(drop=True)


def realised(t_path: float, t_bf16: float, b_path: float, b_bf16: float) -> float:
    """Share of the weight-traffic saving realised as time saved: (1 - t_path/t_bf16) / (1 - b_path/b_bf16).
    1: the step shrank as much as its bytes did (bandwidth-bound both ways); 0: no faster than bf16."""
    return (1 - t_path / t_bf16) / (1 - b_path / b_bf16)


def _published(published: pd.DataFrame, gpu: str = PUBLISHED_GPU) -> dict[str, float]:
    pub = published[(published["claim"] == CLAIM) & (published["quantity"] == "step_ms") & (published["gpu"] == gpu)]
    return {q: float(v) for q, v in zip(pub["quant"], pub["value"]) if isinstance(q, str)}


def _bandwidth(specs: pd.DataFrame, gpu: str) -> float:
    hit = specs[specs["gpu"] == gpu]
    return float(hit["bandwidth_gbps"].iloc[0]) if not hit.empty else float("nan")


def paper_table(cells_: pd.DataFrame, published: pd.DataFrame, specs: pd.DataFrame, configs: Mapping[str, Mapping],
                model: str = "qwen2.5-7b", ctx: int = 2048, arms: Sequence[str] = ("eager", "graph"),
                group_size: int | None = None) -> pd.DataFrame:
    """The paper's quantisation table: one row per registered path (and any other quant key in the data).
    Columns: the path's step bytes for `model` at `ctx` and how many times fewer than bf16; the published
    L4 ms/step (model and context unstated by the paper), its speed-up over bf16, the path's L4 floor and
    the published R_floor against it; then per measured GPU its floor, and per arm ms/step, speed-up over
    bf16 on the same arm and R_floor; a status column where a cell did not run."""
    pub = _published(published)
    sel = cells_[(cells_["model"] == model) & (cells_["ctx"] == ctx) & (cells_["attn"] == "sdpa")
                 & cells_["arm"].isin(list(arms))] if not cells_.empty else cells_
    keys = list(quant.PATHS) + sorted(set(sel["quant"]) - set(quant.PATHS) if not sel.empty else set())
    b_bf16 = _bytes(configs, model, "bf16", ctx, group_size)
    l4_bw = _bandwidth(specs, PUBLISHED_GPU)
    gpus = sorted(set(sel["gpu"])) if not sel.empty else []
    rows = []
    for key in keys:
        p = quant.PATHS.get(key)
        b = _bytes(configs, model, key, ctx, group_size)
        row = {"quant": key, "path": p.label if p else key, "kernel": p.kernel if p else "",
               "step GB": b / 1e9, "bytes vs bf16 (x fewer)": b_bf16 / b}
        floor = roofline.t_floor_ms(b, l4_bw)
        row[f"{PUBLISHED_GPU} ms (published)"] = pub.get(key, np.nan)
        row[f"{PUBLISHED_GPU} speed-up (published)"] = pub.get("bf16", np.nan) / pub.get(key, np.nan)
        row[f"{PUBLISHED_GPU} floor ms"] = floor
        row[f"{PUBLISHED_GPU} R_floor (our floor, published ms)"] = floor / pub.get(key, np.nan)
        for gpu in gpus:
            row[f"{gpu} floor ms"] = roofline.t_floor_ms(b, _bandwidth(specs, gpu))
            status = []
            for arm in arms:
                cell = sel[(sel["gpu"] == gpu) & (sel["arm"] == arm) & (sel["quant"] == key)]
                base = sel[(sel["gpu"] == gpu) & (sel["arm"] == arm) & (sel["quant"] == "bf16")]
                t = float(cell["t_obs_ms"].iloc[0]) if not cell.empty else np.nan
                t0 = float(base["t_obs_ms"].iloc[0]) if not base.empty else np.nan
                if arm in set(sel.loc[sel["gpu"] == gpu, "arm"]):
                    row[f"{gpu} {arm} ms"] = t
                    row[f"{gpu} {arm} speed-up"] = t0 / t
                    row[f"{gpu} {arm} R_floor"] = row[f"{gpu} floor ms"] / t
                if not cell.empty and cell["status"].iloc[0] != "ok":
                    status.append(f"{arm}: {cell['status'].iloc[0]}: {cell['reason'].iloc[0]}")
                elif cell.empty:
                    status.append(f"{arm}: no rows")
            if status:
                row[f"{gpu} status"] = "; ".join(status)
        rows.append(row)
    return pd.DataFrame(rows)


def _verdict(frac: float) -> str:
    if frac >= REALISED_YES:
        return "realises its weight-traffic saving"
    if frac >= REALISED_PART:
        return "realises part of its weight-traffic saving"
    return "does not realise its weight-traffic saving"


def has_quant_rows(cells_: pd.DataFrame) -> bool:
    """Whether any GPU has timed rows of a path other than bf16."""
    return bool(not cells_.empty and (cells_["quant"] != "bf16").any() and
                cells_.loc[cells_["quant"] != "bf16", "t_obs_ms"].notna().any())


def findings(table: pd.DataFrame, published: pd.DataFrame, cells_: pd.DataFrame, model: str, ctx: int,
             arms: Sequence[str] = ("eager", "graph")) -> list[str]:
    """Sentences generated from the table (never typed by hand): for the published L4 column and every
    measured GPU and arm, each path's speed-up over bf16 against its byte ratio, the share of the saving
    realised, and its R_floor against its own floor; then what did not run and why."""
    out = []
    t = table.set_index("quant")
    bf = t.loc["bf16"] if "bf16" in t.index else None
    series = [(f"{PUBLISHED_GPU} (published)", f"{PUBLISHED_GPU} ms (published)", f"{PUBLISHED_GPU} R_floor (our floor, published ms)")]
    gpus = sorted({c.split(" ")[0] for c in t.columns if c.endswith(" floor ms")} - {PUBLISHED_GPU})
    series += [(f"{g} {a}", f"{g} {a} ms", f"{g} {a} R_floor") for g in gpus for a in arms if f"{g} {a} ms" in t]
    for name, ms_col, r_col in series:
        if bf is None or pd.isna(bf[ms_col]):
            continue
        out.append(f"{name}: bf16 {bf[ms_col]:.2f} ms/step, R_floor {bf[r_col]:.2f} against its own floor.")
        for key, r in t.iterrows():
            if key == "bf16" or pd.isna(r[ms_col]):
                continue
            speed = bf[ms_col] / r[ms_col]
            frac = realised(r[ms_col], bf[ms_col], r["step GB"], bf["step GB"])
            out.append(f"{name}: {key} {r[ms_col]:.2f} ms/step = {speed:.2f}x over bf16 with "
                       f"{r['bytes vs bf16 (x fewer)']:.2f}x fewer bytes: it {_verdict(frac)} ({frac:.0%} of it; "
                       f"R_floor {r[r_col]:.2f}).")
    pub = published[(published["claim"] == CLAIM) & (published["quantity"] == "step_ms") & (published["gpu"] != PUBLISHED_GPU)]
    if not pub.empty and "gptq-exllamav2" in t.index and pd.notna(t.loc["gptq-exllamav2", f"{PUBLISHED_GPU} ms (published)"]):
        g = t.loc["gptq-exllamav2", f"{PUBLISHED_GPU} ms (published)"]
        out.append("Published comparison: L4 + gptq-exllamav2 " + f"{g:.2f} ms against "
                   + ", ".join(f"{r.gpu} {r.arm} bf16 {r.value:.2f} ms" for r in pub.itertuples()) + ".")
    out.append(f"Byte convention: each path's floor counts its packed int4 weights, scales and zeros in its own "
               f"dtype and layout, the bf16 LM head, norms, biases, one embedding row and the KV at ctx {ctx} "
               f"({model}); the paper does not state the model or context of its quantisation table.")
    if not has_quant_rows(cells_):
        out.append("No quantised-path rows yet on any GPU (no decode rows whose quant is not bf16 with a timing): "
                   "the table shows the published L4 column and the floors; measure with MEASURE = True.")
    if not cells_.empty:
        failed = cells_[(cells_["status"] != "ok") & (cells_["quant"] != "bf16")].drop_duplicates(["gpu", "quant", "arm"])
        for r in failed.itertuples():
            out.append(f"{r.gpu}: {r.quant} ({r.arm}) did not run: {r.status}: {r.reason}")
    return out
