"""Notebook 06's fused int4 products one by one: the rows of bench/fused_int4_gemv.py (data/diagnostics/
fused_int4_gemv.csv: each product of the fused int4 step alone, in a CUDA graph of back-to-back calls over copies of
its weights, on every config of the int4 GEMV and each launch), read as what the step's products cost without the
step around them.

Per product and launch (`config_table`): how many configs were timed, the fastest config's median, the bytes a call
streams and its rate against the datasheet, the config the per-process tuner chose (Triton's do_bench on the kernel
alone) and its median, and the config table's entry (kernels.fused_int4.configs, the config the step runs). Per
lever (`step_products`): the products one decoder layer launches (kernels.fused.launch.FusedOps.layer_products of
the arm's kernels; the LM head stays bf16), each at the config the step runs. The findings add them up over the
model's layers against their weight floor, and what the table's configs save over the tuner's by the bench's times.
Beside them, the same products in bf16 from bench/fused_gemv.py's rows (data/diagnostics/fused_gemv.csv, the bf16
fused GEMV at its table's config and the same launch). Products are matched by shape (K, N, flavour), so a model whose
widths another model's rows timed (Mistral-7B-v0.3's are Llama-3.1-8B's) reads those rows. Descriptive: no target
reads it; the step's own time is the confirmation's."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from decodegap import paths
from decodegap.arms import REGISTRY
from decodegap.finding import Finding
from decodegap.kernels.fused.launch import FusedOps
from decodegap.kernels.fused_int4 import configs as int4_configs
from decodegap.kernels.fused_int4.configs import config_key
from decodegap.kernels.int4_gemv.kernel import INT4_CONFIGS
from decodegap.quant import bytes as quant_bytes

DIAGNOSTIC = "fused_int4_gemv"
SHAPE = ["device", "K", "N", "flavour", "launch"]
COLUMNS = SHAPE + ["gpu", "product", "models", "configs", "complete", "fastest_config", "fastest_us", "bytes",
                   "floor_us", "gbps", "datasheet_fraction", "tuned_config", "tuned_us", "tuned_over_fastest",
                   "table_config", "table_us"]


def load(data: Path | None = None) -> pd.DataFrame:
    """The bench's rows (empty where it has none), `ok` rows only, `device` the GPU's name and `product` the shape's
    name without its model."""
    path = Path(data or paths.DATA) / "diagnostics" / f"{DIAGNOSTIC}.csv"
    if not path.exists():
        return pd.DataFrame(columns=["device", "model", "product", "K", "N", "flavour", "config", "launch", "mode",
                                     "us", "bytes"])
    rows = pd.read_csv(path)
    rows = rows[rows["status"] == "ok"]
    return rows.assign(device=rows["gpu"], product=[s.split(" ", 1)[1] for s in rows["shape"]])


BF16_DIAGNOSTIC = "fused_gemv"
BF16_LAUNCH = {("fused", 0): "none", ("fused", 1): "pdl", ("fused_early", 1): "early"}
"""The int4 launch of the bf16 bench's graph rows (kernel, pdl)."""


def load_bf16(data: Path | None = None) -> pd.DataFrame:
    """The bf16 fused GEMV's bench rows (bench/fused_gemv.py, data/diagnostics/fused_gemv.csv) in graph mode, `ok`,
    with the int4 bench's names: `device`, `product`, `launch` (BF16_LAUNCH); empty where it has none."""
    path = Path(data or paths.DATA) / "diagnostics" / f"{BF16_DIAGNOSTIC}.csv"
    cols = ["device", "product", "K", "N", "launch", "config", "us", "bytes"]
    if not path.exists():
        return pd.DataFrame(columns=cols)
    rows = pd.read_csv(path, usecols=["gpu", "shape", "K", "N", "kernel", "config", "pdl", "mode", "us", "bytes",
                                      "status"])
    rows = rows[(rows["status"] == "ok") & (rows["mode"] == "graph")]
    launch = [BF16_LAUNCH.get((k, int(p))) for k, p in zip(rows["kernel"], rows["pdl"])]
    rows = rows.assign(device=rows["gpu"], product=[s.split(" ", 1)[1] for s in rows["shape"]], launch=launch)
    return rows.dropna(subset=["launch"])[cols]


def bf16_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per GPU, product (K, N) and launch, the bf16 fused product at the config its step runs: the bf16 table's
    config, the one config the bench timed with the early trigger (bench/fused_gemv.py times that launch at the table's
    config only), its median us per call and rate (`bf16_us`, `bf16_gbps`)."""
    cols = ["device", "product", "K", "N", "launch", "bf16_config", "bf16_us", "bf16_bytes", "bf16_gbps"]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    table_config = rows[rows["launch"] == "early"].groupby(["device", "product", "K", "N"])["config"].first()
    out = []
    for (device, product, K, N, launch), g in rows.groupby(["device", "product", "K", "N", "launch"]):
        config = table_config.get((device, product, K, N))
        at = g[g["config"] == config]
        if config is None or at.empty:
            continue
        us, nbytes = float(at["us"].median()), int(at["bytes"].iloc[0])
        out.append(dict(device=device, product=product, K=K, N=N, launch=launch, bf16_config=config, bf16_us=us,
                        bf16_bytes=nbytes, bf16_gbps=nbytes / us / 1e3))
    return pd.DataFrame(out, columns=cols)


def gpu_keys(specs: pd.DataFrame) -> dict:
    """{device name as torch reports it: registry key} of the GPU registry (specs' `device_names`, ';'-separated)."""
    return {name.strip(): row["gpu"] for _, row in specs.iterrows()
            for name in str(row.get("device_names") or "").split(";") if name.strip()}


def config_table(rows: pd.DataFrame, specs: pd.DataFrame) -> pd.DataFrame:
    """Per GPU, shape (K, N, flavour) and launch: `gpu` (the registry key of the rows' device name; None for a name
    the registry lacks: no rate against a datasheet, and the findings leave it out and say so), `configs` timed (of
    INT4_CONFIGS; `complete` when all were), the fastest config's median us per call (graph mode) and its rate
    (`gbps`: bytes / us; `datasheet_fraction` against the GPU's datasheet bandwidth; `floor_us`: the bytes at that
    bandwidth), the tuner's choice and its median, the table's entry and its median."""
    graph = rows[rows["mode"] == "graph"]
    if graph.empty:
        return pd.DataFrame(columns=COLUMNS)
    tuned = {tuple(k): c for *k, c in rows[rows["mode"] == "tuned"][SHAPE + ["config"]].itertuples(index=False)}
    bandwidth = specs.set_index("gpu")["bandwidth_gbps"]
    keys = gpu_keys(specs)
    out = []
    for key, g in graph.groupby(SHAPE):
        med = g.groupby("config")["us"].median()
        fastest = med.idxmin()
        device, K, N, flavour, launch = key
        nbytes = int(g["bytes"].iloc[0])
        gpu = keys.get(device)
        datasheet = float(bandwidth[gpu]) if gpu is not None else float("nan")
        pick = tuned.get(tuple(key), "")
        entry = int4_configs.table_config(int(N), int(K), flavour, launch)
        table = config_key(entry) if entry else ""
        out.append(dict(zip(SHAPE, key), gpu=gpu, product=g["product"].iloc[0], models=" ".join(sorted(set(g["model"]))),
                        configs=len(med), complete=len(med) == len(INT4_CONFIGS), fastest_config=fastest,
                        fastest_us=float(med[fastest]), bytes=nbytes, floor_us=nbytes / datasheet / 1e3,
                        gbps=nbytes / float(med[fastest]) / 1e3,
                        datasheet_fraction=nbytes / float(med[fastest]) / 1e3 / datasheet, tuned_config=pick,
                        tuned_us=float(med.get(pick, float("nan"))),
                        tuned_over_fastest=float(med.get(pick, float("nan")) / med[fastest] - 1),
                        table_config=table, table_us=float(med.get(table, float("nan")))))
    return pd.DataFrame(out, columns=COLUMNS)


def layer_products(arm: str) -> list[tuple[str, str]]:
    """(product, launch) of the int4 products one decoder layer of a fused arm launches (INT4_STEP_PRODUCTS; its
    LM head stays bf16); [] for an arm that does not run the fused step, or runs its norms as scales (FusedOps
    .norm_scale: the bench has timed no product of that flavour, so no sum of its products is stated)."""
    kernels = REGISTRY[arm].kernels if arm in REGISTRY else ()
    if "fused" not in kernels or "norm_scale" in kernels:
        return []
    return [(p, launch) for p, launch in FusedOps.of_kernels(kernels).layer_products()
            if p in int4_configs.INT4_STEP_PRODUCTS]


def step_products(table: pd.DataFrame, arm: str, config: dict, device: str,
                  bf16: pd.DataFrame | None = None) -> pd.DataFrame:
    """One layer's int4 products of `arm` on a model (its HF config dict) and GPU (`device`, the bench's name), each
    with its config_table row matched by shape and launch: `step_config` (the table's entry, else the tuner's:
    what the step runs) and `step_us`, `floor_us` (its bytes at the datasheet's rate), and where `bf16` (bf16_table)
    has the same product and launch, `bf16_us` and `bf16_bytes`. A product the bench did not time has NaN times."""
    shapes = {name: (K, N, flavour) for name, K, N, flavour in int4_configs.products(config)}
    indexed = table.set_index(SHAPE) if not table.empty else table
    out = []
    for product, launch in layer_products(arm):
        K, N, flavour = shapes[product]
        key = (device, K, N, flavour, launch)
        row = indexed.loc[key] if not indexed.empty and key in indexed.index else None
        if row is None:
            out.append(dict(product=product, launch=launch, K=K, N=N, flavour=flavour, complete=False))
            continue
        config_name, us = ((row["table_config"], row["table_us"]) if row["table_config"] else
                           (row["tuned_config"], row["tuned_us"]))
        out.append(dict(product=product, launch=launch, K=K, N=N, flavour=flavour, complete=bool(row["complete"]),
                        step_config=config_name, step_us=float(us), fastest_config=row["fastest_config"],
                        fastest_us=float(row["fastest_us"]),
                        tuned_us=float(row["tuned_us"]), bytes=int(row["bytes"]),
                        gbps=int(row["bytes"]) / float(us) / 1e3,
                        floor_us=float(row["floor_us"])))
    out = pd.DataFrame(out)
    if bf16 is not None and not bf16.empty and not out.empty:
        on = ["product", "K", "N", "launch"]
        out = out.merge(bf16[bf16["device"] == device][on + ["bf16_us", "bf16_bytes"]], on=on, how="left")
    return out


def fused_lever_of(confirmation: pd.DataFrame, gpu: str, model: str, ctx: int) -> str | None:
    """The fused int4 lever of a cell of the confirmation table (its chosen lever, else its runner-up, where that
    runs the fused step on the int4-triton format: int4-triton, or int4-triton-head, whose decoder products are the
    same), or None."""
    found = _fused_lever(confirmation, gpu, model, ctx)
    return found[0] if found else None


def _int4_cell(confirmation: pd.DataFrame, gpu: str, model: str, ctx: int) -> pd.DataFrame:
    """The int4 rows of one cell of the confirmation table (empty for an empty table)."""
    if confirmation.empty:
        return confirmation
    return confirmation[(confirmation["gpu"] == gpu) & (confirmation["model"] == model) & (confirmation["ctx"] == ctx)
                        & (confirmation["kind"] == "int4")]


def scale_levers(confirmation: pd.DataFrame, gpu: str, model: str, ctx: int) -> list[str]:
    """The arms of a cell's int4 confirmation (its chosen lever and runner-up) that run the fused step with the norms as
    scales, whose products the int4 bench has no flavour of (layer_products gives none), in that order."""
    arms = [arm for r in _int4_cell(confirmation, gpu, model, ctx).itertuples() for arm in (r.arm, r.runner_up_arm)
            if isinstance(arm, str)]
    return [arm for arm in dict.fromkeys(arms)
            if arm in REGISTRY and {"fused", "norm_scale"} <= set(REGISTRY[arm].kernels)]


def _fused_lever(confirmation: pd.DataFrame, gpu: str, model: str, ctx: int) -> tuple[str, str] | None:
    """(arm, quant) of fused_lever_of's lever, or None."""
    for r in _int4_cell(confirmation, gpu, model, ctx).itertuples():
        for arm, quant in ((r.arm, r.quant), (r.runner_up_arm, r.runner_up_quant)):
            if isinstance(arm, str) and quant_bytes.LAYOUT_OF.get(quant) == "triton_int4" and layer_products(arm):
                return arm, quant
    return None


def target_step(table: pd.DataFrame, confirmation: pd.DataFrame, configs: dict, gpu: str, model: str, ctx: int,
                bf16: pd.DataFrame | None = None) -> pd.DataFrame:
    """step_products of the fused int4 lever of one cell (fused_lever_of) on `gpu` (a registry key), with `gpu`,
    `model`, `arm` and `layers`; empty where the bench has no rows of that GPU or the cell no fused int4 lever."""
    devices = sorted(set(table[table["gpu"] == gpu]["device"])) if not table.empty else []
    arm = fused_lever_of(confirmation, gpu, model, ctx) if not confirmation.empty else None
    if not devices or arm is None or model not in configs:
        return pd.DataFrame(columns=["gpu", "model", "arm", "layers", "product", "launch", "step_us", "bytes"])
    p = step_products(table, arm, configs[model], devices[0], bf16)
    return p.assign(gpu=gpu, model=model, arm=arm, layers=int(configs[model]["num_hidden_layers"]))


def _role(confirmation: pd.DataFrame, gpu: str, models, ctx: int, arm: str, quant: str) -> str:
    """Whether (`arm`, `quant`) is the chosen lever or the runner-up of the models' cells at `ctx` (the confirmation
    table)."""
    c = confirmation[(confirmation["gpu"] == gpu) & confirmation["model"].isin(list(models))
                     & (confirmation["ctx"] == ctx) & (confirmation["kind"] == "int4")]
    roles = {"the chosen lever" if (r.arm, r.quant) == (arm, quant) else "the runner-up" for r in c.itertuples()}
    return " or ".join(sorted(roles)) + f" at ctx {ctx}" if roles else f"at ctx {ctx}"


def _lever_groups(table, confirmation, configs, gpu, device, ctx, bf16=None) -> list:
    """[(arm, quant, layers, [models], step_products frame)] of the GPU's models in the confirmation table with a fused
    int4 lever at `ctx`, models whose lever runs the same products over as many layers grouped (Mistral-7B-v0.3 and
    Llama-3.1-8B: their lines would be one line twice)."""
    groups: dict = {}
    for model in sorted(set(confirmation[confirmation["gpu"] == gpu]["model"])):
        found = _fused_lever(confirmation, gpu, model, ctx)
        if found is None or model not in configs:
            continue
        arm, quant = found
        p = step_products(table, arm, configs[model], device, bf16)
        shapes = tuple(map(tuple, p[["K", "N", "flavour", "launch"]].itertuples(index=False)))
        layers = int(configs[model]["num_hidden_layers"])
        groups.setdefault((arm, quant, layers, shapes), (arm, quant, layers, [], p))[3].append(model)
    return list(groups.values())


def _us(value: float) -> str:
    return f"{value:.1f} us"


def product_findings(table: pd.DataFrame, confirmation: pd.DataFrame, configs: dict, specs: pd.DataFrame,
                     ctx: int, bf16: pd.DataFrame | None = None) -> list[str]:
    """Per GPU with rows and model of the confirmation table: its fused int4 lever at `ctx` (fused_lever_of), one
    layer's int4 products alone at the configs the step runs, summed over the layers against their weight floor
    at the datasheet's rate, each product's rate, and what the products would take at the fastest one's rate; where
    `bf16` (bf16_table) has every one of those products at the same launch, the bf16 fused products' layer beside
    it: how many times fewer bytes int4 streams and how many times less time it takes, product by product."""
    out = []
    if table.empty:
        return out
    unknown = sorted(set(table[table["gpu"].isna()]["device"]))
    if unknown:
        out.append(Finding(f"Rows of the fused int4 bench from GPU names the registry (data/specs/gpus.csv) lacks, "
                           f"left out: {', '.join(unknown)}.", unknown=", ".join(unknown)))
    if confirmation.empty:
        return out
    for device in sorted(set(table[table["gpu"].notna()]["device"])):
        gpu = table[table["device"] == device]["gpu"].iloc[0]
        bandwidth = float(specs.set_index("gpu").loc[gpu, "bandwidth_gbps"])
        for arm, quant, layers, group, p in _lever_groups(table, confirmation, configs, gpu, device, ctx, bf16):
            model = " and ".join(group)
            missing = p[~p["complete"]] if "complete" in p else p
            role = _role(confirmation, gpu, group, ctx, arm, quant)
            head = f"{model} on the {gpu}, {arm} ({quant}, {role})"
            if not missing.empty:
                timed = table.set_index(SHAPE)["configs"] if not table.empty else pd.Series(dtype=int)
                untimed, partly = [], []
                for r in missing.itertuples():
                    n = int(timed.get((device, r.K, r.N, r.flavour, r.launch), 0))
                    (partly.append(f"{r.product} ({r.launch}) at {n} of {len(INT4_CONFIGS)} configs") if n
                     else untimed.append(f"{r.product} ({r.launch})"))
                said = ([f"has not timed {', '.join(untimed)}"] if untimed else []) + (
                    [f"timed {', '.join(partly)} only"] if partly else [])
                out.append(Finding(f"{head}: the bench " + " and ".join(said) + "; no sum of its products is stated.",
                                   gpu=gpu, model=model, arm=arm))
                continue
            layer_us, floor_layer_us = float(p["step_us"].sum()), float(p["floor_us"].sum())
            best = p.loc[p["gbps"].idxmax()]
            worst = p.loc[p["gbps"].idxmin()]
            at_best_ms = float(p["bytes"].sum()) / float(best["gbps"]) / 1e3 * layers / 1e3
            tabled = int((p["step_config"] == p["fastest_config"]).sum()) if "fastest_config" in p else 0
            text = (f"{head}: one layer's {len(p)} int4 products alone, at the configs the step runs ("
                    + (f"{'all' if tabled == len(p) else tabled} the fastest of the bench's {len(INT4_CONFIGS)} "
                       f"there, a best of many; " if tabled else "")
                    + ", ".join(f"{r.product} {_us(r.step_us)}" for r in p.itertuples())
                    + f"), take {_us(layer_us)}, {layer_us * layers / 1e3:.2f} ms over {layers} layers against "
                      f"their weight floor of {floor_layer_us * layers / 1e3:.2f} ms at the datasheet's "
                      f"{bandwidth:,.0f} GB/s ({layer_us / floor_layer_us:.2f}x). They stream at "
                      f"{p['gbps'].min():,.0f}-{p['gbps'].max():,.0f} GB/s "
                      f"({100 * p['gbps'].min() / bandwidth:.0f}-{100 * p['gbps'].max() / bandwidth:.0f} % of the "
                      f"datasheet), the slowest {worst['product']}; at the fastest one's rate ({best['product']}) the "
                      f"{len(p)} would take {at_best_ms:.2f} ms a step.")
            values = dict(gpu=gpu, model=model, arm=arm, layer_us=layer_us, products_ms=layer_us * layers / 1e3,
                          floor_ms=floor_layer_us * layers / 1e3, gbps_min=float(p["gbps"].min()),
                          gbps_max=float(p["gbps"].max()), at_fastest_rate_ms=at_best_ms)
            if "bf16_us" in p and not p["bf16_us"].isna().any():
                bf16_us = float(p["bf16_us"].sum())
                bytes_ratio = float(p["bf16_bytes"].sum()) / float(p["bytes"].sum())
                rate = p["bf16_bytes"] / p["bf16_us"] / 1e3
                text += (f" The same products in bf16 (bench/fused_gemv.py's rows: the bf16 fused GEMV at the config "
                         f"its table held, the same launches) take {_us(bf16_us)} a layer at "
                         f"{rate.min():,.0f}-{rate.max():,.0f} GB/s: "
                         f"int4 streams {bytes_ratio:.1f}x fewer bytes and takes {bf16_us / layer_us:.2f}x less time ("
                         + ", ".join(f"{r.product} {r.bf16_us / r.step_us:.2f}x" for r in p.itertuples()) + ").")
                values.update(bf16_layer_us=bf16_us, bytes_ratio=bytes_ratio, time_ratio=bf16_us / layer_us)
            out.append(Finding(text, **values))
    return out


def tuner_findings(table: pd.DataFrame, confirmation: pd.DataFrame, configs: dict, ctx: int) -> list[str]:
    """Per GPU: in how many (shape, launch) cells timed at every config the tuner chose a config other than the
    fastest, by how much it was slower, and at each model's fused int4 lever what the table's configs save over the
    tuner's choices a step (by the bench's times)."""
    out = []
    whole = table[table["complete"] & table["gpu"].notna()] if not table.empty else table
    for device, g in whole.groupby("device"):
        gpu = g["gpu"].iloc[0]
        # a tuner that failed there chose nothing; a choice without a timed row has no time to compare
        g = g[(g["tuned_config"].fillna("").astype(str) != "") & g["tuned_us"].notna()]
        if g.empty:
            continue
        other = g[g["tuned_config"] != g["fastest_config"]]
        text = (f"The per-process tuner of the fused int4 product on the {gpu} (Triton's do_bench on the kernel alone) "
                f"chose the fastest graphed config in {len(g) - len(other)} of {len(g)} products and launches timed "
                f"at every config")
        values = dict(gpu=gpu, cells=len(g), other=len(other))
        if not other.empty:
            most = other.loc[other["tuned_over_fastest"].idxmax()]
            text += (f"; in the other {len(other)} its choice was slower by "
                     f"{100 * other['tuned_over_fastest'].min():.1f}-{100 * other['tuned_over_fastest'].max():.1f} % "
                     f"(the most: {most['product']} ({most['models']}), {most['launch']}, {most['tuned_config']} "
                     f"{_us(most['tuned_us'])} against {most['fastest_config']} {_us(most['fastest_us'])})")
        saved = []
        groups = _lever_groups(table, confirmation, configs, gpu, device, ctx) if not confirmation.empty else []
        for _arm, _quant, layers, group, p in groups:
            if "tuned_us" not in p or p["tuned_us"].isna().any() or p["step_us"].isna().any():
                continue
            saved.append((" and ".join(group), float((p["tuned_us"] - p["step_us"]).sum()) * layers / 1e3))
        if saved:
            text += ("; at the fused int4 levers' products the table's configs save, by these times, "
                     + ", ".join(f"{ms:.3f} ms a step at {model}" for model, ms in saved)
                     + " over the tuner's choices (the step's confirmation measures what they bring)")
            values.update({f"saved_ms_{m.split(' and ')[0]}": ms for m, ms in saved})
        out.append(Finding(text + ".", **values))
    return out
