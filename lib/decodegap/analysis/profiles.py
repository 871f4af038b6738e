"""The kernel profile of a decode step, read for every notebook that shows one (04's products of a quantised
step, 06's where the time goes): the kernels of a profiled step (data/raw/<gpu>/breakdown.csv, measured once by
harness.profile.record_kernels) grouped into categories by name, each against the floor of the bytes it must move
(weights for the matrix products, the KV cache for attention; everything else moves activations only, whose bytes
are negligible at batch 1), and the matrix products one by one with the line through their times."""

from __future__ import annotations

import functools
import re
from typing import Mapping

import numpy as np
import pandas as pd

from decodegap import accounting, arms
from decodegap.quant import bytes as quant_bytes


CATEGORIES = (
    ("attention", r"flash|fmha|attention|attn|sdpa|cudnn|softmax|split_kernel|merge_kernel"),
    ("matmul", r"gemm|gemv|nvjet|cutlass|xmma|cublas|splitk|matmul|_mm_|int4pack|marlin"),
    ("norm", r"norm|rsqrt"),
    ("copy / index", r"copy|cat|index|gather|scatter|fill"),
    ("elementwise", r"elementwise|vectorized|unrolled|reduce|silu|mul|add|rotary|triton"),
)
"""Kernel-name patterns (case-insensitive, first match wins); a kernel matching none is `other`.
`split_kernel` and `merge_kernel` are the two stages of decodegap.kernels.step.decode_attention; `rotary_cache_kernel`
(decodegap.kernels.fused.launch: rotary q and k, and the cache write) is elementwise, `fused_gemv_kernel` a matrix product."""


SMALL_CATEGORIES = ("elementwise", "copy / index", "norm", "other")
"""Kernel categories that move activations only: at batch 1 their bytes are negligible, their count is not."""


INDUCTOR_KERNEL = re.compile(r"^triton_(poi|red|per)_")
"""A kernel torch.compile generated from pointwise/reduction ops: its name lists the ops its graph nodes came from
(`..._matmul_...` where a fused node stood next to a product), not what it does, so CATEGORIES' patterns would
misread it; a matrix product stays an extern call (cuBLAS) or a `triton_tem_` template."""


@functools.cache  # a few thousand names over the ~200,000 kernel rows the notebooks read
def category(kernel: str) -> str:
    """The category of a kernel by its name (CATEGORIES). A torch.compile pointwise/reduction kernel
    (INDUCTOR_KERNEL) is `norm` when it takes an rsqrt, else `elementwise`."""
    if INDUCTOR_KERNEL.match(kernel):
        return "norm" if "rsqrt" in kernel else "elementwise"
    for name, pattern in CATEGORIES:
        if re.search(pattern, kernel, re.IGNORECASE):
            return name
    return "other"


def category_table(breakdown_rows: pd.DataFrame, configs: Mapping[str, Mapping], specs: pd.DataFrame) -> pd.DataFrame:
    """Per profiled step (gpu, model, ctx, arm, quant) and kernel category: kernels, summed GPU microseconds, the
    floor of the bytes the category must move (matmul: the weights the step streams in its quantisation path,
    quant.bytes.streamed_weight_bytes, W_streamed for bf16; attention: the KV cache at ctx; others: 0) at the datasheet
    bandwidth, and the excess over it."""
    ok = breakdown_rows[breakdown_rows["status"] == "ok"].copy()
    cols = ["gpu", "model", "ctx", "arm", "quant", "category", "kernels", "gpu_us", "floor_us", "excess_us"]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    ok["category"] = [category(k) for k in ok["kernel"]]
    table = (ok.groupby(["gpu", "model", "ctx", "arm", "quant", "category"], sort=False)
             .agg(kernels=("gpu_us", "size"), gpu_us=("gpu_us", "sum")).reset_index())
    bandwidth = specs.set_index("gpu")["bandwidth_gbps"]

    def floor_us(r) -> float:
        config = configs[r.model]
        if r.category == "matmul":
            nbytes = quant_bytes.streamed_weight_bytes(config, r.quant)
        elif r.category == "attention":
            nbytes = accounting.kv_bytes(config, r.ctx)
        else:
            return 0.0
        return accounting.t_floor_ms(nbytes, float(bandwidth[r.gpu])) * 1e3

    table["floor_us"] = [floor_us(r) for r in table.itertuples()]
    table["excess_us"] = table["gpu_us"] - table["floor_us"]
    return table[cols]


PRODUCT_HELPER = re.compile(r"splitKreduce", re.IGNORECASE)
"""A cuBLAS kernel that finishes the product launched before it (the split-K reduction): its time is that
product's."""


NOT_A_PROJECTION = re.compile(r"sgemm", re.IGNORECASE)
"""An fp32 matrix product in a bf16 step reads no weights: HF's rotary embedding computes its frequencies as
inv_freq x positions (one small sgemm per step)."""


def projection_table(breakdown_rows: pd.DataFrame, configs: Mapping[str, Mapping], specs: pd.DataFrame) -> pd.DataFrame:
    """Per profiled step (gpu, model, ctx, arm, quant) and matrix product of a layer (accounting.PROJECTIONS: HF's
    seven for the HF arms, the lean decoder's four fused ones for `lean*` arms) plus the LM head: calls, summed GPU
    microseconds, the bytes those calls read in the step's quantisation path (quant.bytes.projection_bytes), their floor
    at the datasheet bandwidth and the bandwidth reached. The step's matmul kernels (category) are taken in launch
    order, a cuBLAS helper (PRODUCT_HELPER) folded into the product before it, an fp32 product (NOT_A_PROJECTION)
    left out, and named layer by layer; a step whose count is not layers x products + 1 is left out, and so is one
    whose path's bytes cannot be counted for its shapes."""
    ok = breakdown_rows[breakdown_rows["status"] == "ok"]
    cols = ["gpu", "model", "ctx", "arm", "quant", "projection", "calls", "gpu_us", "bytes", "floor_us", "gbps",
            "of_datasheet"]
    bandwidth = specs.set_index("gpu")["bandwidth_gbps"]
    rows = []
    for (g, model, ctx, arm, quant), step in ok.groupby(["gpu", "model", "ctx", "arm", "quant"], sort=False):
        config = configs[model]
        layout = arms.projection_layout(arm)
        order = accounting.PROJECTIONS[layout]
        times: list[float] = []
        for kernel, us in step.sort_values("kernel_index")[["kernel", "gpu_us"]].itertuples(index=False):
            if category(kernel) != "matmul" or NOT_A_PROJECTION.search(kernel):
                continue
            if PRODUCT_HELPER.search(kernel) and times:
                times[-1] += float(us)
            else:
                times.append(float(us))
        layers = int(config["num_hidden_layers"])
        if len(times) != layers * len(order) + 1:
            continue
        names = [*order * layers, "lm_head"]
        try:
            per_call = quant_bytes.projection_bytes(config, quant, layout)
        except ValueError:  # a group size that does not divide a tiny model's widths: its bytes are not counted
            continue
        for name in [*order, "lm_head"]:
            us = sum(t for n, t in zip(names, times) if n == name)
            calls = names.count(name)
            nbytes = per_call[name] * calls
            floor = accounting.t_floor_ms(nbytes, float(bandwidth[g])) * 1e3
            rows.append(dict(gpu=g, model=model, ctx=ctx, arm=arm, quant=quant, projection=name, calls=calls,
                             gpu_us=us, bytes=nbytes, floor_us=floor, gbps=nbytes / us / 1e3, of_datasheet=floor / us))
    return pd.DataFrame(rows, columns=cols)


def step_label(arm: str, quant: str) -> str:
    """A profiled step's name in findings and figures: its arm, and its quantisation path unless bf16."""
    return arm if quant == "bf16" else f"{arm} ({quant})"


def fitted_products(by_projection: pd.DataFrame) -> pd.DataFrame:
    """The projection_table rows product_cost_fit draws its lines through: every product of a bf16 step, and of a
    quantised step all but the LM head, which stays bf16 on cuBLAS, except in a path that quantises the head too
    (accounting.HEAD_QUANTISED), where the head is one more of its products."""
    same_kernel = by_projection["quant"].isin({"bf16", *accounting.HEAD_QUANTISED})
    return by_projection[same_kernel | (by_projection["projection"] != "lm_head")]


def product_cost_fit(by_projection: pd.DataFrame) -> pd.DataFrame:
    """Per profiled step (gpu, model, ctx, arm, quant), a least-squares line through its matrix products' per-call
    times against their per-call bytes: time = fixed_us + bytes / stream_gbps. `fixed_us` is what a product costs
    beyond streaming its weights (ramp-up and tail of one kernel), `stream_gbps` the rate the weights stream at; a
    step needs at least three product shapes. A quantised step's LM head (bf16 but in a path that quantises it,
    another kernel than its products') is left out of its line (fitted_products)."""
    cols = ["gpu", "model", "ctx", "arm", "quant", "fixed_us", "stream_gbps", "products"]
    rows = []
    for key, g in fitted_products(by_projection).groupby(["gpu", "model", "ctx", "arm", "quant"], sort=False):
        if len(g) < 3:
            continue
        mb = (g["bytes"] / g["calls"] / 1e6).to_numpy()
        us = (g["gpu_us"] / g["calls"]).to_numpy()
        slope, fixed = np.polyfit(mb, us, 1)  # us per MB: 1e6 bytes / (GB/s * 1e9) * 1e6 us = 1e3 / GB/s
        rows.append(dict(zip(cols, key), fixed_us=float(fixed), stream_gbps=1e3 / float(slope),
                         products=int(g["calls"].sum())))
    return pd.DataFrame(rows, columns=cols)


PDL_OVERLAP = ("Under PDL a product starts before the kernel it waits for ends and its time includes that wait: "
               "these shares are lower bounds and the fixed cost an upper bound.")
"""What a profiled step launched with PDL adds to its products' line (`with_pdl`)."""


def with_pdl(arm: str) -> bool:
    """Whether the step of `arm` launches its kernels with PDL (arms.ARM_KERNELS' `pdl`), so that each kernel's
    profiled time includes part of the one before it."""
    return "pdl" in arms.ARM_KERNELS.get(arm, ())
