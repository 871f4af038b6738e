"""Summaries of the per-layer attention rows (data/raw/<gpu>/attention.csv) for notebook 03."""

from __future__ import annotations

import pandas as pd

from . import attention

# the paper's backend names (data/published/paper.csv `attn`) -> our registry keys of the same kernel family
PUBLISHED_TO_OURS = {"sdpa": ["sdpa"], "fa2": ["fa2", "sdpa_flash"], "fa3": ["fa3", "fa3_torch"],
                     "flashinfer": ["flashinfer"]}


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (gpu, model, ctx, attn): median host and GPU microseconds per call, the correctness
    error against the math backend, and the status and reason of backends that did not run."""
    keys = ["gpu", "model", "ctx", "attn"]
    if rows.empty:
        return pd.DataFrame(columns=keys + ["host_us", "gpu_us", "max_rel_err", "status", "reason"])
    ok = rows[rows["status"] == "ok"]
    timed = ok.pivot_table(index=keys, columns="timing", values="us_per_call", aggfunc="median")
    timed = timed.rename(columns={"host": "host_us", "gpu": "gpu_us"})
    for col in ("host_us", "gpu_us"):
        if col not in timed:
            timed[col] = float("nan")
    err = ok.groupby(keys)["max_rel_err"].max()
    status = rows.groupby(keys).agg(status=("status", "first"), reason=("reason", "first"))
    out = status.join(timed[["host_us", "gpu_us"]]).join(err).reset_index()
    out["label"] = [attention.BACKENDS[a].label if a in attention.BACKENDS else a for a in out["attn"]]
    out["host_over_gpu"] = out["host_us"] / out["gpu_us"]
    return out


def paper_table(summ: pd.DataFrame, published: pd.DataFrame, ctx: int = 2048, model: str = "llama-3.1-8b") -> pd.DataFrame:
    """The paper's table (us per layer per backend) with its published H100 column beside our columns:
    host-inclusive and GPU-only microseconds for each measured GPU at `ctx` for `model`'s shape.
    Every registered backend is a row; one that did not run shows its status and reason."""
    pub = published[(published["claim"] == "attention_backends") & (published["quantity"] == "us_per_layer")]
    rows = []
    for key, backend in attention.BACKENDS.items():
        row = {"attn": key, "backend": backend.label}
        for p in pub.itertuples():
            if key in PUBLISHED_TO_OURS.get(p.attn, []):
                row[f"{p.gpu} us (published)"] = p.value
        sel = summ[(summ["attn"] == key) & (summ["ctx"] == ctx) & (summ["model"] == model)]
        for s in sel.itertuples():
            row[f"{s.gpu} host us"] = s.host_us
            row[f"{s.gpu} GPU us"] = s.gpu_us
            if s.status != "ok":
                row[f"{s.gpu} status"] = f"{s.status}: {s.reason}"
        rows.append(row)
    return pd.DataFrame(rows)


def findings(summ: pd.DataFrame) -> list[str]:
    """Generated sentences: per GPU, the fastest backend each way and whether host or kernel binds."""
    out = []
    ok = summ[summ["status"] == "ok"]
    for (gpu, model, ctx), g in ok.groupby(["gpu", "model", "ctx"]):
        if ctx != ok["ctx"].min() and ctx != ok["ctx"].max():
            continue
        host = g.dropna(subset=["host_us"]).sort_values("host_us")
        gpu_only = g.dropna(subset=["gpu_us"]).sort_values("gpu_us")
        if host.empty:
            continue
        line = f"{gpu} {model} ctx {ctx}: fastest host-inclusive {host.iloc[0]['attn']} {host.iloc[0]['host_us']:.1f} us"
        if not gpu_only.empty:
            line += (f"; fastest GPU-only {gpu_only.iloc[0]['attn']} {gpu_only.iloc[0]['gpu_us']:.1f} us; "
                     f"host/GPU ratio {g['host_over_gpu'].min():.1f}-{g['host_over_gpu'].max():.1f}x")
        out.append(line + ".")
    missing = summ[summ["status"] != "ok"].drop_duplicates(["gpu", "attn"])
    for r in missing.itertuples():
        out.append(f"{r.gpu}: {r.attn} did not run: {r.status}: {r.reason}")
    return out
