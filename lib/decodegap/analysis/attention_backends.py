"""Summaries of the per-layer attention rows (data/raw/<gpu>/attention.csv) for notebook 03."""

from __future__ import annotations

import numpy as np
import pandas as pd

from decodegap.harness import attention
from decodegap import roofline
from decodegap.finding import Finding

STEP_ARMS = ("eager", "graph")
STEP_COLUMNS = ["gpu", "model", "ctx", "attn", "arm", "sessions", "t_obs_ms", "r_floor_W_all", "status", "reason"]
LAUNCH_BINDS_RATIO = 2.0  # host-inclusive / GPU-only at or above this: the launch sequence binds
KERNEL_BINDS_RATIO = 1.25  # at or below this: the kernel binds

# the paper's backend names (data/published/paper.csv `attn`) -> our registry keys of the same kernel family
PUBLISHED_TO_OURS = {"sdpa": ["sdpa"], "fa2": ["fa2", "sdpa_flash"], "fa3": ["fa3", "fa3_torch"],
                     "flashinfer": ["flashinfer", "flashinfer_paged"]}
PROXY_BACKENDS = {"sdpa_flash": "fa2"}
"""Our backends that stand in for a published one without being it: SDPA's FLASH backend runs PyTorch's vendored
FlashAttention-2 kernels, not the flash-attn package the paper names."""


KEYS = ["gpu", "model", "ctx", "attn"]


def newest_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """Each cell's rows of one run: the newest run in which it ran (an `ok` row), else its newest status rows.
    Runs are never pooled: a cell measured again (`python -m decodegap attention-backends --again`, or after it
    was unavailable) is read from its latest run, timed there interleaved with the other cells of that run; the
    older rows stay in the file as history. A run's age is where its first row stands in the file (rows are only
    ever appended), not its id: two runs may start within one second."""
    if rows.empty:
        return rows
    order = {run: i for i, run in enumerate(pd.unique(rows["run_id"]))}
    ran = rows.assign(_ok=rows["status"] == "ok", _age=rows["run_id"].map(order))
    best = ran.sort_values(["_ok", "_age"], kind="stable").groupby(KEYS)[["run_id"]].last().reset_index()
    return rows.merge(best, on=KEYS + ["run_id"])[rows.columns]


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (gpu, model, ctx, attn), from the cell's newest run (`newest_runs`): median host and GPU
    microseconds per call, the correctness error against the math backend, and the status and reason of
    backends that did not run."""
    keys = KEYS
    if rows.empty:
        return pd.DataFrame(columns=keys + ["host_us", "gpu_us", "max_rel_err", "status", "reason"])
    rows = newest_runs(rows)
    ok = rows[rows["status"] == "ok"]
    timed = ok.pivot_table(index=keys, columns="timing", values="us_per_call", aggfunc="median")
    timed = timed.rename(columns={"host": "host_us", "gpu": "gpu_us"})
    for col in ("host_us", "gpu_us"):
        if col not in timed:
            timed[col] = float("nan")
    err = ok.groupby(keys)["max_rel_err"].max()
    # a cell measured again after it was unavailable (--retry-unavailable) keeps its old rows: ok once any row is
    first_ok = pd.concat([ok, rows[rows["status"] != "ok"]])
    status = first_ok.groupby(keys).agg(status=("status", "first"), reason=("reason", "first"))
    out = status.join(timed[["host_us", "gpu_us"]]).join(err).reset_index()
    for timing in ("host", "gpu"):  # over the repetitions (rounds) of a cell: largest over smallest, less one
        t = ok[ok["timing"] == timing].groupby(keys)["us_per_call"]
        out = out.join((t.max() / t.min() - 1).rename(f"{timing}_spread"), on=keys)
    out["label"] = [attention.BACKENDS[a].label if a in attention.BACKENDS else a for a in out["attn"]]
    out["host_over_gpu"] = out["host_us"] / out["gpu_us"]
    return out


def shape_agreement(summ: pd.DataFrame, configs) -> pd.DataFrame:
    """Models whose decode attention has one shape (query heads, KV heads, head dim) time the same calls: per GPU,
    shape, ctx and backend with two or more such models, the ratio of their largest to their smallest median
    host-inclusive time, beside the largest spread of a single cell over its repetitions (`host_spread`). A
    ratio far past that spread means the timings depend on something other than the call (the order cells ran
    in, for one)."""
    cols = ["gpu", "shape", "ctx", "attn", "models", "host_ratio", "within_cell_spread", "within_noise", "gpu_ratio",
            "gpu_within_cell_spread"]
    if summ.empty:
        return pd.DataFrame(columns=cols)
    ok = summ[(summ["status"] == "ok") & summ["model"].isin(configs)].copy()
    ok["shape"] = ok["model"].map(lambda m: shape_of(configs[m]))
    out = []
    for (gpu, sh, ctx, attn), g in ok.groupby(["gpu", "shape", "ctx", "attn"]):
        if g["model"].nunique() < 2 or g["host_us"].isna().all():
            continue
        spread = float(g["host_spread"].max()) if "host_spread" in g else float("nan")
        ratio = float(g["host_us"].max() / g["host_us"].min())
        out.append(dict(gpu=gpu, shape=sh, ctx=ctx, attn=attn, models=", ".join(sorted(g["model"])),
                        host_ratio=ratio, within_cell_spread=spread,
                        within_noise=within_spread(g["host_us"].max(), g["host_us"].min(), spread),
                        gpu_ratio=float(g["gpu_us"].max() / g["gpu_us"].min()),
                        gpu_within_cell_spread=float(g["gpu_spread"].max()) if "gpu_spread" in g else float("nan")))
    return pd.DataFrame(out, columns=cols)


def within_spread(larger_us: float, smaller_us: float, *spreads: float) -> bool:
    """Whether `larger_us` exceeds `smaller_us` by no more than the largest of the cells' round-to-round spreads
    (`host_spread`, NaN where a cell has none): a difference that small is noise, not a ranking."""
    known = [s for s in spreads if not np.isnan(s)]
    return bool(known) and larger_us / smaller_us - 1 <= max(known)


def shape_of(config) -> str:
    """A model's decode-attention shape as "query heads x KV heads x head dim", e.g. 32x8x128."""
    return "x".join(map(str, (config["num_attention_heads"], config["num_key_value_heads"],
                              config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])))


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
    missing = summ[summ["status"] != "ok"]
    for (gpu, attn, status, reason), g in missing.groupby(["gpu", "attn", "status", "reason"], dropna=False):
        ran = ok[(ok["gpu"] == gpu) & (ok["attn"] == attn)]
        where = "anywhere" if ran.empty else "for " + ", ".join(sorted(set(g["model"])))
        out.append(f"{gpu}: {attn} did not run {where}: {status}: {reason}")
    return out


def binding(host_us: float, gpu_us: float) -> str:
    """Which part of one attention call binds: 'launch sequence' when the host-inclusive time is at least
    LAUNCH_BINDS_RATIO x the GPU-only time, 'kernel' when at most KERNEL_BINDS_RATIO x, else 'both'."""
    ratio = host_us / gpu_us
    if ratio >= LAUNCH_BINDS_RATIO:
        return "launch sequence"
    if ratio <= KERNEL_BINDS_RATIO:
        return "kernel"
    return "both"


def binding_findings(summ: pd.DataFrame, attn: str = "sdpa") -> list[str]:
    """Per GPU and context: does the kernel or the launch sequence bind backend `attn` (all model shapes)?"""
    ok = summ[(summ["status"] == "ok") & (summ["attn"] == attn)].dropna(subset=["host_us", "gpu_us"])
    out = []
    for (gpu, ctx), g in ok.groupby(["gpu", "ctx"]):
        per_model = {m: binding(h, d) for m, h, d in zip(g["model"], g["host_us"], g["gpu_us"])}
        verdict = (f"the {next(iter(set(per_model.values())))} binds" if len(set(per_model.values())) == 1 else
                   "it depends on the shape: " + ", ".join(f"{m} {v}" for m, v in sorted(per_model.items())))
        out.append(f"{gpu} ctx {ctx}, {attn}: host-inclusive {g['host_us'].min():.1f}-{g['host_us'].max():.1f} us "
                   f"against GPU-only {g['gpu_us'].min():.1f}-{g['gpu_us'].max():.1f} us per call "
                   f"({(g['host_us'] / g['gpu_us']).min():.1f}-{(g['host_us'] / g['gpu_us']).max():.1f}x): {verdict}.")
    return out


def step_table(decode_rows: pd.DataFrame, specs: pd.DataFrame, configs, backends, contexts) -> pd.DataFrame:
    """The whole decode step (bf16, eager and graph arms) with each backend of `backends` inside the HF model,
    at `contexts`. A cell SDPA refused ("No available kernel") is `unavailable` with the reason."""
    rows = decode_rows[decode_rows["attn"].isin(backends) & (decode_rows["quant"] == "bf16")
                       & decode_rows["arm"].isin(STEP_ARMS) & decode_rows["ctx"].isin(contexts)]
    if rows.empty:
        return pd.DataFrame(columns=STEP_COLUMNS)
    cells = roofline.cell_table(rows, specs, configs)
    refused = (cells["status"] == "error") & cells["reason"].astype(str).str.contains(attention.NO_KERNEL)
    cells.loc[refused, "status"] = "unavailable"
    cells.loc[refused, "reason"] = attention.NO_KERNEL_REASON
    cells = cells.sort_values(["gpu", "model", "arm", "attn", "ctx"]).reset_index(drop=True)
    return cells[STEP_COLUMNS]


REPEAT_KV_BACKENDS = ("sdpa", "sdpa_cudnn", "sdpa_math", "sdpa_efficient", "sdpa_flash")
"""Backends HF reaches through its SDPA integration. transformers 5.x (integrations/sdpa_attention.py,
`use_gqa_in_sdpa`) passes GQA to SDPA only when there is no attention mask; a static cache always passes one,
so K and V are first expanded to every query head (`repeat_kv`), in every layer of every step."""


def repeat_kv_bytes(config, cache_len: int, dtype_bytes: int = 2) -> int:
    """Bytes per decode step that HF's `repeat_kv` adds over a GQA-aware kernel at a static cache of
    `cache_len` positions: for K and V in every layer, the expanded copy is written (Hq heads) and read again
    by the attention kernel (Hq heads) instead of the kernel reading the Hkv heads once; the copy's own read
    of the Hkv heads replaces that read. So 2 x layers x 2 x Hq x cache_len x head_dim x bytes."""
    from decodegap import accounting

    hq = config["num_attention_heads"]
    return 2 * config["num_hidden_layers"] * 2 * hq * int(cache_len) * accounting.head_dim(config) * dtype_bytes


def step_findings(steps: pd.DataFrame, summ: pd.DataFrame, configs, bandwidth_gbps: dict | None = None) -> list[str]:
    """Generated sentences on the graphed whole step per backend: how much the step grows from the smallest
    to the largest context, against what the per-layer GPU-only microbenchmark of the same backend implies
    (layers x the growth of one call); and where one layer's call x layers exceeds the whole graphed step
    (then the microbenchmark did not time the kernel the model runs). For HF's SDPA backends and a GPU in
    `bandwidth_gbps` ({gpu: GB/s}), how much of the growth HF's K/V expansion (repeat_kv_bytes) accounts
    for at that bandwidth."""
    out = []
    graph = steps[(steps["arm"] == "graph") & (steps["status"] == "ok")]
    for (gpu, model, attn), g in graph.groupby(["gpu", "model", "attn"]):
        if g["ctx"].nunique() < 2:
            continue
        g = g.set_index("ctx")["t_obs_ms"]
        lo, hi = g.index.min(), g.index.max()
        layers = int(configs[model]["num_hidden_layers"])
        values = dict(gpu=gpu, model=model, attn=attn, ctx_first=int(lo), ctx_last=int(hi), first_ms=g[lo],
                      last_ms=g[hi], growth_ms=g[hi] - g[lo], layers=layers)
        line = (f"{gpu} {model}, {attn} inside the model (graph): {g[lo]:.2f} ms at ctx {lo}, {g[hi]:.2f} ms at "
                f"ctx {hi} (+{g[hi] - g[lo]:.2f} ms)")
        micro = summ[(summ["gpu"] == gpu) & (summ["model"] == model) & (summ["attn"] == attn)
                     & (summ["status"] == "ok")].set_index("ctx")["gpu_us"]
        if lo in micro.index and hi in micro.index:
            implied_ms = layers * (micro[hi] - micro[lo]) / 1e3
            values.update(implied_ms=implied_ms, calls_ms=layers * micro[hi] / 1e3,
                          calls_exceed_step=bool(layers * micro[hi] / 1e3 > g[hi]))
            line += f"; the per-layer kernel alone implies +{implied_ms:.2f} ms ({layers} layers)"
            if layers * micro[hi] / 1e3 > g[hi]:
                line += (f"; but {layers} of its per-layer calls ({layers * micro[hi] / 1e3:.2f} ms) exceed the whole "
                         "step: the microbenchmark's call is not the kernel the model runs")
        if attn in REPEAT_KV_BACKENDS and bandwidth_gbps and gpu in bandwidth_gbps:
            extra = repeat_kv_bytes(configs[model], hi) - repeat_kv_bytes(configs[model], lo)
            values.update(expansion_gb=extra / 1e9, expansion_ms=extra / bandwidth_gbps[gpu] / 1e6,
                          copy_gbps=bandwidth_gbps[gpu])
            line += (f"; HF's K/V expansion for GQA under a mask adds {extra / 1e9:.1f} GB per step from ctx {lo} to "
                     f"{hi}: {extra / bandwidth_gbps[gpu] / 1e6:.2f} ms at {bandwidth_gbps[gpu]:.0f} GB/s")
        out.append(Finding(line + ".", **values))
    return out


RANKING_COLUMNS = ["gpu", "model", "ctx", "arm", "fastest_step", "fastest_step_ms", "fastest_step_sessions",
                   "sdpa_step_ms", "sdpa_step_sessions", "sdpa_over_fastest", "fastest_layer_gpu_only",
                   "fastest_layer_gpu_only_us", "fastest_layer_host", "fastest_layer_host_us"]


def ranking_table(steps: pd.DataFrame, summ: pd.DataFrame, arms=("graph", "eager")) -> pd.DataFrame:
    """Does the faster per-layer kernel make the faster decode step? Per GPU, model, context and arm with the whole
    step measured for two or more backends: the fastest step (backend, ms, sessions), SDPA's default step beside it
    and their ratio, and which of the same backends was fastest per layer in that cell of the microbenchmark,
    GPU-only and host-inclusive (a CPU's microbenchmark has no GPU-only time: NaN there)."""
    out = []
    for arm in arms:
        ok = steps[(steps["arm"] == arm) & (steps["status"] == "ok")]
        for (gpu, model, ctx), g in ok.groupby(["gpu", "model", "ctx"]):
            if g["attn"].nunique() < 2:
                continue
            t = g.set_index("attn")["t_obs_ms"].sort_values()
            n = g.set_index("attn")["sessions"]
            micro = summ[(summ["gpu"] == gpu) & (summ["model"] == model) & (summ["ctx"] == ctx)
                         & (summ["status"] == "ok") & summ["attn"].isin(t.index)].set_index("attn")
            row = dict(gpu=gpu, model=model, ctx=int(ctx), arm=arm, fastest_step=t.index[0],
                       fastest_step_ms=float(t.iloc[0]), fastest_step_sessions=int(n[t.index[0]]),
                       sdpa_step_ms=float(t["sdpa"]) if "sdpa" in t else float("nan"),
                       sdpa_step_sessions=int(n["sdpa"]) if "sdpa" in t else 0)
            row["sdpa_over_fastest"] = row["sdpa_step_ms"] / row["fastest_step_ms"]
            for timing, col in (("gpu_only", "gpu_us"), ("host", "host_us")):
                us = micro[col].dropna() if not micro.empty else pd.Series(dtype=float)
                row[f"fastest_layer_{timing}"] = us.idxmin() if not us.empty else None
                row[f"fastest_layer_{timing}_us"] = float(us.min()) if not us.empty else float("nan")
            out.append(row)
    return pd.DataFrame(out, columns=RANKING_COLUMNS)


def ranking_findings(ranking: pd.DataFrame) -> list[str]:
    """ranking_table's rows as sentences."""
    def sessions(k: int) -> str:
        return f"{k} session{'s' if k != 1 else ''}"

    out = []
    for r in ranking.itertuples():
        line = (f"{r.gpu} {r.model} ctx {r.ctx} ({r.arm}): fastest step {r.fastest_step} {r.fastest_step_ms:.2f} ms "
                f"({sessions(r.fastest_step_sessions)})")
        if r.fastest_step != "sdpa" and not np.isnan(r.sdpa_step_ms):
            line += (f", SDPA's default {r.sdpa_step_ms:.2f} ms ({r.sdpa_over_fastest:.2f}x; "
                     f"{sessions(r.sdpa_step_sessions)})")
        fastest = [f"{name} {label} ({us:.1f} us)" for name, label, us in
                   ((r.fastest_layer_gpu_only, "GPU-only", r.fastest_layer_gpu_only_us),
                    (r.fastest_layer_host, "host-inclusive", r.fastest_layer_host_us))
                   if isinstance(name, str)]  # no per-layer rows at the cell: None, or NaN once in a frame
        if fastest:
            line += "; per layer the fastest of them is " + " and ".join(fastest)
        out.append(line + ".")
    return out


def shape_findings(agreement: pd.DataFrame) -> list[str]:
    """Per GPU: how far the times of identical calls (one attention shape, two models) differ, host-inclusive and
    GPU-only, against the spread of a single cell over its repetitions: a difference within that spread is noise."""
    out = []
    for gpu, g in agreement.groupby("gpu"):
        worst = g.loc[g["host_ratio"].idxmax()]
        n_ok = int(g["within_noise"].sum()) if "within_noise" in g else 0
        gpu_part = ""
        if "gpu_ratio" in g and g["gpu_ratio"].notna().any():
            gworst = g.loc[g["gpu_ratio"].idxmax()]
            gpu_part = (f" GPU-only (graph replay) they differ by a median {g['gpu_ratio'].median():.2f}x (up to "
                        f"{gworst['gpu_ratio']:.2f}x, {gworst['attn']} at ctx {int(gworst['ctx'])}), one cell's rounds by "
                        f"a median {g['gpu_within_cell_spread'].median():.0%}.")
        out.append(f"{gpu}: identical calls timed on different models (shape {', '.join(sorted(set(g['shape'])))}, "
                   f"{len(g)} backend and context pairs) differ host-inclusive by a median {g['host_ratio'].median():.2f}x "
                   f"(up to {worst['host_ratio']:.2f}x, {worst['attn']} at ctx {int(worst['ctx'])}), while one cell's "
                   f"repetitions spread by a median {g['within_cell_spread'].median():.0%} (up to "
                   f"{g['within_cell_spread'].max():.0%}); {n_ok} of {len(g)} pairs differ by no more than their cells' "
                   "spread" + (", so identical calls agree within the noise of host-inclusive timing." if n_ok == len(g)
                               else ": in the others the time depends on more than the call.") + gpu_part)
    return out
