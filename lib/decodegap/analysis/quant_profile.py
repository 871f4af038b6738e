"""Notebook 04: where a quantised step's time goes, and every path over the grid.

A profiled step (data/raw/<gpu>/breakdown.csv: every kernel of one decode step and its GPU time) of a quantised
path gives its matrix products (profiles.projection_table: fixed microseconds per product and the rate its bytes
stream at, profiles.product_cost_fit) and, for the kernels that take fp16 activations, the dtype conversions around
each product (`casts`). The grid tables put every path's step on one arm side by side over every measured model
and context (`grid`, `coverage`).
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

import pandas as pd

from decodegap import accounting
from decodegap.analysis import profiles
from decodegap.analysis.quantisation import passing
from decodegap.finding import Finding, span as _values
from decodegap.quant.layers import FP16_CASTS_PER_PRODUCT
from decodegap.stats import span as _span

STEP = ["gpu", "model", "ctx", "arm", "quant"]

CAST_KERNEL = re.compile(r"direct_copy_kernel_cuda.*lambda\(c10::(?:Half|BFloat16)\)")
"""PyTorch's dtype-conversion kernel from fp16 or bf16 (`x.to(dtype)`: a direct copy whose functor takes the source
dtype). In a graphed lean step only the fp16 paths' casts around their products match it: the lean decoder's own
copies move bf16 through index_copy and cat kernels, and its fp32 conversions take float."""


def _ok(breakdown_rows: pd.DataFrame) -> pd.DataFrame:
    return breakdown_rows[(breakdown_rows["status"] == "ok") & breakdown_rows["kernel"].notna()]


def casts(breakdown_rows: pd.DataFrame, configs: Mapping[str, Mapping]) -> pd.DataFrame:
    """Per profiled step of a quantised path: its kernels, their summed GPU time (`step_gpu_us`), the dtype
    conversions among them (CAST_KERNEL: count, summed GPU microseconds, share of the step's kernel time) and
    the count the path's layer class implies (FP16_CASTS_PER_PRODUCT x its products, the products taken from the
    step's projection layout: 0 for a path that takes bf16)."""
    cols = STEP + ["kernels", "step_gpu_us", "casts", "cast_us", "cast_share", "casts_expected"]
    ok = _ok(breakdown_rows)
    ok = ok[ok["quant"] != "bf16"]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    ok = ok.assign(is_cast=ok["kernel"].astype(str).str.contains(CAST_KERNEL))
    ok = ok.assign(cast_us=ok["gpu_us"].where(ok["is_cast"], 0.0))
    table = (ok.groupby(STEP, sort=False)
             .agg(kernels=("gpu_us", "size"), step_gpu_us=("gpu_us", "sum"), casts=("is_cast", "sum"),
                  cast_us=("cast_us", "sum")).reset_index())
    table["cast_share"] = table["cast_us"] / table["step_gpu_us"]
    table["casts_expected"] = [FP16_CASTS_PER_PRODUCT.get(q, 0) * layer_products(configs[m], a)
                               for q, a, m in zip(table["quant"], table["arm"], table["model"])]
    return table[cols]


def layer_products(config: Mapping, arm: str) -> int:
    """Decoder-layer matrix products of one step of `arm`: layers x products per layer (accounting.PROJECTIONS:
    the lean decoder's four fused ones for `lean*` arms, HF's seven otherwise)."""
    from decodegap import accounting, arms

    return int(config["num_hidden_layers"]) * len(accounting.PROJECTIONS[arms.projection_layout(arm)])


def products(breakdown_rows: pd.DataFrame, configs: Mapping[str, Mapping], specs: pd.DataFrame) -> pd.DataFrame:
    """profiles.projection_table of the profiled quantised steps, with the bf16 steps of the same (gpu, model, ctx,
    arm) beside them for comparison."""
    ok = _ok(breakdown_rows)
    quantised = ok[ok["quant"] != "bf16"]
    if quantised.empty:
        return profiles.projection_table(quantised, configs, specs)
    keys = quantised[["gpu", "model", "ctx", "arm"]].drop_duplicates()
    bf16 = ok[ok["quant"] == "bf16"].merge(keys, on=["gpu", "model", "ctx", "arm"])
    return profiles.projection_table(pd.concat([bf16, quantised], ignore_index=True), configs, specs)


def product_fits(by_projection: pd.DataFrame, specs: pd.DataFrame) -> pd.DataFrame:
    """profiles.product_cost_fit per profiled step (fixed us per product, stream GB/s), with the products' summed
    GPU time (`products_ms`, LM head left out of quantised steps as in the fit), the fixed part over all products
    (`fixed_ms`) and the stream rate as a share of the datasheet bandwidth."""
    fits = profiles.product_cost_fit(by_projection)
    if fits.empty:
        return fits.assign(products_ms=[], fixed_ms=[], stream_of_datasheet=[])
    summed = (profiles.fitted_products(by_projection).groupby(STEP, sort=False)["gpu_us"].sum() / 1e3).rename("products_ms")
    fits = fits.join(summed, on=STEP)
    fits["fixed_ms"] = fits["fixed_us"] * fits["products"] / 1e3
    bandwidth = specs.set_index("gpu")["bandwidth_gbps"]
    fits["stream_of_datasheet"] = fits["stream_gbps"] / fits["gpu"].map(bandwidth).astype(float)
    return fits


def _step(by_projection: pd.DataFrame, key: tuple) -> pd.DataFrame:
    """The projection_table rows of one profiled step, `key` its STEP values."""
    return by_projection[(by_projection[STEP] == pd.Series(dict(zip(STEP, key)))).all(axis=1)]


def grid(cell_table: pd.DataFrame, arm: str, value: str = "t_obs_ms") -> pd.DataFrame:
    """Every path on one arm over every measured (gpu, model, ctx): `value` of quant_report.cells (a cell whose
    check failed or that has no timing is NaN), one column per path in the registry's order."""
    from decodegap.quant import paths as quant

    c = cell_table[(cell_table["arm"] == arm) & (cell_table["attn"] == "sdpa")]
    c = passing(c)
    if c.empty:
        return pd.DataFrame()
    table = c.pivot_table(index=["gpu", "model", "ctx"], columns="quant", values=value, aggfunc="first")
    order = [k for k in quant.PATHS if k in table.columns] + [k for k in table.columns if k not in quant.PATHS]
    return table[order]


def coverage(cell_table: pd.DataFrame, arms: Sequence[str], model_keys: Sequence[str], contexts: Sequence[int]) -> pd.DataFrame:
    """Per GPU, path and arm: how many of the grid's cells (models x contexts) are timed with a passing check,
    and which are missing."""
    grid_cells = [(m, int(c)) for m in model_keys for c in contexts]
    c = cell_table[(cell_table["attn"] == "sdpa") & cell_table["t_obs_ms"].notna()]
    c = passing(c)
    rows = []
    for gpu in sorted(set(c["gpu"])):
        for key in dict.fromkeys(c.loc[c["gpu"] == gpu, "quant"]):
            for arm in arms:
                here = c[(c["gpu"] == gpu) & (c["quant"] == key) & (c["arm"] == arm)]
                have = set(zip(here["model"], here["ctx"].astype(int)))
                missing = [f"{m} {x}" for m, x in grid_cells if (m, x) not in have]
                rows.append(dict(gpu=gpu, quant=key, arm=arm, cells=len(grid_cells) - len(missing),
                                 of=len(grid_cells), missing=", ".join(missing)))
    return pd.DataFrame(rows, columns=["gpu", "quant", "arm", "cells", "of", "missing"])


def grid_findings(cell_table: pd.DataFrame, arm: str) -> list[Finding]:
    """Per GPU and path on `arm`, over every measured model and context: the span of its step time, of its
    speed-up over bf16 on the same arm, and of the share of its byte saving realised. Each a Finding (gpu, arm,
    quant, cells, models; the spans as `<name>_min`, `<name>_max`)."""
    out = []
    c = cell_table[(cell_table["arm"] == arm) & (cell_table["attn"] == "sdpa") & cell_table["t_obs_ms"].notna()]
    c = passing(c)
    for gpu in sorted(set(c["gpu"])):
        g = c[c["gpu"] == gpu]
        for key in dict.fromkeys(g["quant"]):
            r = g[g["quant"] == key]
            n_cells, n_models = len(r), r["model"].nunique()
            line = (f"{gpu} {arm}, {key}: {_span(r['t_obs_ms'])} ms/step over {n_cells} cell{'s' * (n_cells != 1)} "
                    f"({n_models} model{'s' * (n_models != 1)}, ctx {_span(r['ctx'], '.0f')})")
            values = dict(gpu=gpu, arm=arm, quant=key, **_values("step_ms", r["t_obs_ms"]), cells=n_cells,
                          models=n_models, **_values("ctx", r["ctx"]))
            if key != "bf16" and r["speedup_over_bf16"].notna().any():
                s = r[r["speedup_over_bf16"].notna()]
                line += (f", {_span(s['speedup_over_bf16'])}x over bf16, {_span(s['realised_fraction'] * 100, '.0f')} % "
                         f"of its byte saving realised")
                values.update(**_values("speedup", s["speedup_over_bf16"]),
                              **_values("realised_fraction", s["realised_fraction"]))
            out.append(Finding(line + ".", **values))
    return out


def profile_findings(fits: pd.DataFrame, by_projection: pd.DataFrame, cast_table: pd.DataFrame) -> list[Finding]:
    """Per profiled quantised step: its products' GPU time, the line through them (fixed us per product and the
    stream rate, as a share of the datasheet bandwidth), beside the bf16 step of the same cell and arm where
    profiled; then each step's dtype conversions where the path has any. Each a Finding with the step's STEP
    values and the numbers it states (the bf16 step's as `bf16_*`, the LM head's as `lm_head_*`; times in the
    units the sentence gives them)."""
    out = []
    f = fits.set_index(STEP)
    for key, r in f.iterrows():
        gpu, model, ctx, arm, quant = key
        if quant == "bf16":
            continue
        head_in = quant in accounting.HEAD_QUANTISED  # its int4 head is one of the products the line is drawn through
        line = (f"{gpu} {model} ctx {ctx}, {quant} {arm} step (profiled): its {int(r['products'])} "
                + ("products (the int4 LM head among them) " if head_in else "decoder-layer products ")
                + f"take {r['products_ms']:.2f} ms of GPU time; a line through their per-call times gives "
                f"{r['fixed_us']:.1f} us fixed per product ({r['fixed_ms']:.2f} ms over the step) plus its bytes at "
                f"{r['stream_gbps']:.0f} GB/s ({r['stream_of_datasheet']:.0%} of the datasheet's)")
        values = dict(zip(STEP, key), products=int(r["products"]), **{
            k: float(r[k]) for k in ("products_ms", "fixed_us", "fixed_ms", "stream_gbps", "stream_of_datasheet")})
        base = (gpu, model, ctx, arm, "bf16")
        if base in f.index:
            b = f.loc[base]
            line += (f"; bf16 on the same arm: {b['fixed_us']:.1f} us fixed per product, {b['stream_gbps']:.0f} GB/s")
            values.update(bf16_fixed_us=float(b["fixed_us"]), bf16_stream_gbps=float(b["stream_gbps"]))
        step = _step(by_projection, key)
        head = step[step["projection"] == "lm_head"]
        if not head.empty and not head_in:
            line += f"; its bf16 LM head {head['gpu_us'].iloc[0]:.0f} us at {head['gbps'].iloc[0]:.0f} GB/s"
            values.update(lm_head_us=float(head["gpu_us"].iloc[0]), lm_head_gbps=float(head["gbps"].iloc[0]))
        if profiles.with_pdl(arm):
            values["pdl"] = True
            line += ". " + profiles.PDL_OVERLAP.removesuffix(".")
        out.append(Finding(line + ".", **values))
    for r in cast_table[cast_table["casts_expected"] > 0].itertuples():
        out.append(Finding(
            f"{r.gpu} {r.model} ctx {r.ctx}, {r.quant} {r.arm} step (profiled): the kernel takes fp16, so each "
            f"product's bf16 input is cast to fp16 and its fp16 output back to bf16 (`x.to(torch.float16)` "
            f"and `y.to(torch.bfloat16)` in its layer): {r.casts} conversion kernels ({r.casts_expected} "
            f"expected), {r.cast_us / 1e3:.2f} ms of the step's {r.step_gpu_us / 1e3:.2f} ms of kernel time "
            f"({r.cast_share:.0%}).", **{k: getattr(r, k) for k in STEP}, casts=int(r.casts),
            casts_expected=int(r.casts_expected), cast_ms=r.cast_us / 1e3, step_gpu_ms=r.step_gpu_us / 1e3,
            cast_share=float(r.cast_share)))
    return out


def target_obstacles(t: dict | None, fits: pd.DataFrame, by_projection: pd.DataFrame,
                     target: Mapping) -> Finding | None:
    """What stands between the fastest int4 step (quant_report.int4_target: `t`) and the int4 target, in numbers,
    from the profile of the same path at the target cell (any profiled arm; the lean_attn_graph one first): its
    products' GPU time, the fixed part of it, the rate the rest streams at, what their bytes take at the measured
    copy bandwidth, and the bf16 LM head's time. None when the path has no profile at the target cell. A Finding
    with those numbers (`layer_GB`: the products' bytes; `before_attention_ms`: products and head together)."""
    if t is None:
        return None
    at = fits[(fits["gpu"] == target["gpu"]) & (fits["model"] == target["model"]) & (fits["ctx"] == target["ctx"])
              & (fits["quant"] == t["quant"])]
    if at.empty:
        return None
    r = at.sort_values("arm", key=lambda a: a != "lean_attn_graph").iloc[0]
    step = _step(by_projection, tuple(r[STEP]))
    head_in = t["quant"] in accounting.HEAD_QUANTISED  # the int4 head is one of the fitted products
    layer_bytes = float(step.loc[(step["projection"] != "lm_head") | head_in, "bytes"].sum())
    head = step[step["projection"] == "lm_head"]
    head_ms = 0.0 if head_in else float(head["gpu_us"].sum()) / 1e3
    at_copy = layer_bytes / (t["copy_gbps"] * 1e6)
    products = "products (the int4 LM head among them)" if head_in else "decoder-layer products"
    return Finding(
        f"In the way of the int4 target, from the profiled {r['arm']} step of {t['quant']} at the same cell: its "
        f"{int(r['products'])} {products} take {r['products_ms']:.2f} ms ({r['fixed_ms']:.2f} ms of it "
        f"the fixed {r['fixed_us']:.1f} us of each, the rest streaming {layer_bytes / 1e9:.2f} GB at "
        f"{r['stream_gbps']:.0f} GB/s)" + ("" if head_in else f" and its bf16 LM head {head_ms:.2f} ms")
        + f": {r['products_ms'] + head_ms:.2f} ms "
        f"of the {target['step_ms']:g} ms before attention and the step's other kernels. At the measured copy "
        f"bandwidth those products' bytes would take {at_copy:.2f} ms: the int4 GEMV's streaming rate and fixed "
        f"cost per product are what stand in the way.", **dict(zip(STEP, r[STEP])), products=int(r["products"]),
        products_ms=float(r["products_ms"]), fixed_ms=float(r["fixed_ms"]), fixed_us=float(r["fixed_us"]),
        layer_GB=layer_bytes / 1e9, stream_gbps=float(r["stream_gbps"]), lm_head_ms=head_ms,
        before_attention_ms=float(r["products_ms"]) + head_ms, target_ms=float(target["step_ms"]),
        bytes_at_copy_ms=at_copy)
