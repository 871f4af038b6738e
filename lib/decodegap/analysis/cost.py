"""Cost per million tokens at batch 1: $/hour -> $ per million tokens, the cost ladder, and the ratio of
one GPU's cost per token to another's (the paper's L4-versus-H100 comparison).

One batch-1 stream emits one token per decode step, so tokens_per_s = 1000 / step_ms and
usd_per_mtok = usd_per_hour / 3600 / tokens_per_s * 1e6 = usd_per_hour * step_ms / 3.6.
Prices are read only here, from data/specs/prices.csv (provider, source and date on every row); a GPU
without a price is a clear error or a row that says so, never a NaN in a figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from decodegap import paths, roofline
from decodegap.analysis.closing_the_gap_confirmation import CONFIRMED, NOT_CONFIRMED, PARTLY
from decodegap.levers import CONFIRM_SESSIONS
from decodegap.published import PUBLISHED_LABEL

PROVIDER = "modal"
"""The paper's cloud provider ("Modal published prices of May 2026")."""
MEASURED_LABEL = "measured"
CONFIG = ["source", "gpu", "model", "ctx", "arm", "attn", "quant"]


class NoPriceError(KeyError):
    """A GPU (or provider) with no price in data/specs/prices.csv."""

    def __str__(self) -> str:
        return self.args[0]


def prices_path(data: str | Path | None = None) -> Path:
    return paths.data_dir(data) / "specs" / "prices.csv"


def load_prices(data: str | Path | None = None) -> pd.DataFrame:
    """data/specs/prices.csv: gpu, provider, usd_per_hour (empty where no source was found), source,
    source_date, note."""
    return pd.read_csv(prices_path(data))


def usd_per_hour(gpu: str, prices: pd.DataFrame, provider: str = PROVIDER, data: str | Path | None = None) -> float:
    """The provider's price of one `gpu` for one hour, in US dollars. A GPU with no row, or a row whose
    price is empty (no source found), raises NoPriceError naming the GPU and the prices file."""
    hit = prices[(prices["gpu"] == gpu) & (prices["provider"] == provider)]
    if hit.empty or pd.isna(hit["usd_per_hour"].iloc[0]):
        note = f" ({hit['note'].iloc[0]})" if not hit.empty and isinstance(hit["note"].iloc[0], str) else ""
        raise NoPriceError(
            f"no {provider} price for GPU {gpu!r} in {prices_path(data)}{note}. Add a row with the price, "
            "its source URL and the source's date; a price is never guessed.")
    return float(hit["usd_per_hour"].iloc[0])


def price_for(gpu: str, prices: pd.DataFrame, provider: str = PROVIDER) -> tuple[float, str]:
    """($ per hour, the provider it is from) of one `gpu`: the `provider`'s price where it has one, else the
    priced row of another provider (the latest source date first), whose name then labels every cost made from
    it. A GPU that no provider prices raises NoPriceError (usd_per_hour's message)."""
    try:
        return usd_per_hour(gpu, prices, provider), provider
    except NoPriceError:
        other = prices[(prices["gpu"] == gpu) & (prices["provider"] != provider)].dropna(subset=["usd_per_hour"])
        if other.empty:
            raise
        row = other.sort_values("source_date", ascending=False).iloc[0]
        return float(row["usd_per_hour"]), str(row["provider"])


def price_label(gpu: str, price_provider: str, provider: str = PROVIDER) -> str:
    """How a cost is named where its price is not the `provider`'s: "h200 (spheron price)"; else the GPU key."""
    return gpu if price_provider in (provider, "", None) or not isinstance(price_provider, str) else f"{gpu} ({price_provider} price)"


def tokens_per_s(step_ms):
    """Tokens per second of one batch-1 stream: one token per decode step of `step_ms` milliseconds."""
    return 1000.0 / step_ms


def usd_per_mtok(hourly_usd, step_ms):
    """US dollars per million generated tokens at batch 1: usd_per_hour / 3600 / tokens_per_s * 1e6."""
    return hourly_usd / 3600.0 / tokens_per_s(step_ms) * 1e6


def configuration(arm, quant, attn=None) -> str:
    """A configuration's name in the paper's words: the quantisation path, then the arm where known, then
    a non-default attention backend ("bf16 eager", "gptq-exllamav2", "bf16 graph fa2")."""
    parts = [quant if isinstance(quant, str) else "bf16"]
    if isinstance(arm, str) and arm:
        parts.append(arm)
    if isinstance(attn, str) and attn and attn != "sdpa":
        parts.append(attn)
    return " ".join(parts)


def published_configurations(published: pd.DataFrame) -> pd.DataFrame:
    """Every published decode step time (paper.csv rows of quantity step_ms: the L4 paths, the H100 eager and
    graphed steps), one row each, labelled published. Model and context are not stated by the paper."""
    rows = published[(published["quantity"] == "step_ms") & (published["unit"] == "ms")]
    out = pd.DataFrame({"source": PUBLISHED_LABEL, "gpu": rows["gpu"], "model": rows["model"], "ctx": rows["ctx"],
                        "arm": rows["arm"], "attn": rows["attn"], "quant": rows["quant"].fillna("bf16"),
                        "step_ms": rows["value"].astype(float), "sessions": rows["n"]})
    return out.reset_index(drop=True)


def measured_configurations(cells: pd.DataFrame) -> pd.DataFrame:
    """Every measured cell with a step time (roofline.cell_table rows of status ok): step_ms is the median
    over sessions of each session's median step."""
    ok = cells[(cells["status"] == "ok") & cells["t_obs_ms"].notna()]
    out = pd.DataFrame({"source": MEASURED_LABEL, "gpu": ok["gpu"], "model": ok["model"], "ctx": ok["ctx"],
                        "arm": ok["arm"], "attn": ok["attn"], "quant": ok["quant"], "step_ms": ok["t_obs_ms"],
                        "sessions": ok["sessions"]})
    return out.reset_index(drop=True)


def cost_table(configs: pd.DataFrame, prices: pd.DataFrame, specs: pd.DataFrame, provider: str = PROVIDER,
               data: str | Path | None = None) -> pd.DataFrame:
    """`configs` (published_configurations / measured_configurations rows) with the GPU's datasheet
    bandwidth, tokens_per_s, usd_per_hour (`price_for`: the provider's, else another provider's, named in
    `price_provider`) and usd_per_mtok. A GPU without any price keeps empty cost columns and says why in
    `price_note`."""
    out = configs.merge(specs[["gpu", "bandwidth_gbps"]], on="gpu", how="left")
    out.insert(out.columns.get_loc("step_ms"), "configuration",
               [configuration(a, q, t) for a, q, t in zip(out["arm"], out["quant"], out["attn"])])
    out["tokens_per_s"] = tokens_per_s(out["step_ms"])
    hourly, sellers, notes = [], [], []
    for gpu in out["gpu"]:
        try:
            price, seller = price_for(gpu, prices, provider)
            hourly.append(price)
            sellers.append(seller)
            notes.append("" if seller == provider else f"no {provider} price for {gpu}: {seller}'s price")
        except NoPriceError:
            hourly.append(np.nan)
            sellers.append("")
            notes.append(f"no {provider} price for {gpu} in data/specs/prices.csv")
    out["usd_per_hour"] = hourly
    out["price_provider"] = sellers
    out["usd_per_mtok"] = usd_per_mtok(out["usd_per_hour"], out["step_ms"])
    out["price_note"] = notes
    return out


def unpriced(table: pd.DataFrame) -> list[str]:
    """Sentences naming each GPU with configurations but no price (kept out of the figures)."""
    missing = table[table["usd_per_mtok"].isna()]
    return [f"{gpu}: {len(g)} {'/'.join(sorted(set(g['source'])))} configuration(s) have no $/Mtok: "
            f"{g['price_note'].iloc[0]}." for gpu, g in missing.groupby("gpu")]


def headline(table: pd.DataFrame, model: str, ctx: int) -> pd.DataFrame:
    """Rows of `model` at `ctx`, and every row whose model or context is not stated (the published ones)."""
    keep = (table["model"].isna() | (table["model"] == model)) & (table["ctx"].isna() | (table["ctx"] == ctx))
    return table[keep]


NOT_STATED = "not stated"
"""The ladder's model of a published row: the paper gives its step times without the model or the context."""
LADDER_COLUMNS = ["source", "gpu", "model", "ctx", "bandwidth_gbps", "kernels", "configuration", "step_ms",
                  "usd_per_mtok", "price_provider", "confirmed_ms", "confirmed_min_ms", "confirmed_max_ms",
                  "confirmed_sessions", "confirmed_usd_per_mtok"]


def ladder(table: pd.DataFrame, confirmations: pd.DataFrame | None = None) -> pd.DataFrame:
    """The cost ladder: per source and priced GPU, its naive configuration (bf16 eager, default attention)
    and its best (the lowest $/Mtok), with its model and context (NOT_STATED and empty for the paper's rows, which
    give neither: a measured row beside a published one may not be the same model), bandwidth and $/Mtok. Filter to
    one model and context first (`headline`); where several rows tie as naive the slowest is kept.

    The best is the cheapest of many measured configurations, each from its cell's one sweep: a best of many, biased
    low. `confirmations` (notebook 06's confirmation sweeps, closing_the_gap_confirmation.lever_confirmations) gives
    a measured best its fresh sessions where they exist: confirmed_ms (the median of its session medians), their
    range and count, and confirmed_usd_per_mtok at the same price. The pick and its step_ms stay the sweep's; nothing
    is confirmed where no confirmation sweep timed that configuration at that cell (confirmed_sessions 0)."""
    rows = []
    priced = table.dropna(subset=["usd_per_mtok"])
    for (source, gpu), g in priced.groupby(["source", "gpu"]):
        naive = g[(g["quant"] == "bf16") & (g["arm"] == "eager") & (g["attn"].isna() | (g["attn"] == "sdpa"))]
        picks = [("naive", naive.sort_values("usd_per_mtok").iloc[-1])] if not naive.empty else []
        picks.append(("best", g.sort_values("usd_per_mtok").iloc[0]))
        for kernels, r in picks:
            row = dict(source=source, gpu=gpu, model=r["model"] if isinstance(r.get("model"), str) else NOT_STATED,
                       ctx=r.get("ctx"), bandwidth_gbps=r["bandwidth_gbps"], kernels=kernels,
                       configuration=r["configuration"], step_ms=r["step_ms"], usd_per_mtok=r["usd_per_mtok"],
                       price_provider=r.get("price_provider", PROVIDER))
            if kernels == "best" and source == MEASURED_LABEL and confirmations is not None:
                row.update(confirmation_of(r, confirmations))
            rows.append(row)
    return pd.DataFrame(rows, columns=LADDER_COLUMNS).astype({"ctx": "Int64"})  # a context in tokens, or none stated


def confirmation_of(r, confirmations: pd.DataFrame) -> dict:
    """The confirmation of the cost table's row `r` (its gpu, model, ctx, arm and quant) in `confirmations`
    (closing_the_gap_confirmation.lever_confirmations), priced as `r` is: $/Mtok is proportional to the step time at
    one price. {confirmed_sessions: 0} where no confirmation sweep timed it (or its attention is not the levers')."""
    at = confirmations[(confirmations["gpu"] == r["gpu"]) & (confirmations["model"] == r["model"])
                       & (confirmations["ctx"] == r["ctx"]) & (confirmations["arm"] == r["arm"])
                       & (confirmations["quant"] == r["quant"])] if not confirmations.empty else confirmations
    if at.empty or (isinstance(r.get("attn"), str) and r["attn"] != "sdpa"):
        return dict(confirmed_sessions=0)
    c = at.iloc[0]
    return dict(confirmed_ms=c["confirmed_ms"], confirmed_min_ms=c["confirmed_min_ms"],
                confirmed_max_ms=c["confirmed_max_ms"], confirmed_sessions=int(c["sessions"]),
                confirmed_usd_per_mtok=r["usd_per_mtok"] * c["confirmed_ms"] / r["step_ms"])


def floor_costs(configs: Mapping[str, Mapping], specs: pd.DataFrame, prices: pd.DataFrame, model: str, ctx: int,
                provider: str = PROVIDER, convention: str = "W_all") -> pd.DataFrame:
    """$/Mtok of a step that ran exactly at its memory floor (R_floor = 1: t_floor of `model` at `ctx`,
    datasheet bandwidth) on every priced GPU of the registry: what the ladder would be if decode were
    bandwidth-bound. A GPU priced by another provider only (`price_for`) says which in `price_provider`."""
    floors = roofline.floors_by_gpu({model: configs[model]}, specs, ctx, convention).loc[model]
    rows = []
    for gpu, t_floor in floors.items():
        try:
            price, seller = price_for(gpu, prices, provider)
        except NoPriceError:
            continue
        bw = float(specs.loc[specs["gpu"] == gpu, "bandwidth_gbps"].iloc[0])
        rows.append(dict(gpu=gpu, bandwidth_gbps=bw, t_floor_ms=t_floor, usd_per_hour=price,
                         usd_per_mtok=usd_per_mtok(price, t_floor), price_provider=seller))
    return pd.DataFrame(rows)


def ratio_table(table: pd.DataFrame, cheap_gpu: str, dear_gpu: str) -> pd.DataFrame:
    """Every pair of a `cheap_gpu` configuration and a `dear_gpu` configuration (priced rows only):
    cost_ratio = dear $/Mtok / cheap $/Mtok (> 1: the cheap GPU serves tokens that many times cheaper),
    split into price_ratio (dear / cheap $ per hour) times step_ratio (dear / cheap ms per step)."""
    cols = ["source", "model", "ctx", "configuration", "step_ms", "usd_per_hour", "usd_per_mtok"]
    cheap = table[(table["gpu"] == cheap_gpu)].dropna(subset=["usd_per_mtok"])[cols]
    dear = table[(table["gpu"] == dear_gpu)].dropna(subset=["usd_per_mtok"])[cols]
    pairs = cheap.merge(dear, how="cross", suffixes=(f"_{cheap_gpu}", f"_{dear_gpu}"))
    pairs["price_ratio"] = pairs[f"usd_per_hour_{dear_gpu}"] / pairs[f"usd_per_hour_{cheap_gpu}"]
    pairs["step_ratio"] = pairs[f"step_ms_{dear_gpu}"] / pairs[f"step_ms_{cheap_gpu}"]
    pairs["cost_ratio"] = pairs[f"usd_per_mtok_{dear_gpu}"] / pairs[f"usd_per_mtok_{cheap_gpu}"]
    return pairs.sort_values("cost_ratio", ascending=False).reset_index(drop=True)


def price_ratio_needed(target: float, step_ratio: float) -> float:
    """The dear/cheap price ratio at which a configuration pair of this step_ratio has cost_ratio `target`."""
    return target / step_ratio


def price_sensitivity(ratios: pd.DataFrame, cheap_gpu: str, dear_gpu: str, price_ratios: Sequence[float],
                      target: float) -> pd.DataFrame:
    """Per configuration pair of `ratio_table`: the cost ratio at the listed prices, the price ratio it
    needs to reach `target`, and the cost ratio at each of `price_ratios` (dear / cheap $ per hour)."""
    out = ratios[[f"source_{cheap_gpu}", f"configuration_{cheap_gpu}", f"step_ms_{cheap_gpu}",
                  f"source_{dear_gpu}", f"configuration_{dear_gpu}", f"step_ms_{dear_gpu}",
                  "step_ratio", "price_ratio", "cost_ratio"]].copy()
    out[f"price_ratio_for_{target:g}x"] = price_ratio_needed(target, out["step_ratio"])
    for p in price_ratios:
        out[f"cost_ratio_at_price_ratio_{p:g}"] = p * out["step_ratio"]
    return out


def confirmation_status(sessions) -> str | None:
    """What notebook 06's confirmation sweeps hold of a configuration timed in `sessions` of them (the ladder's
    confirmed_sessions, confirmation_of's): None where nothing is said (NaN: not a measured best, or a ladder made
    without confirmations), else NOT_CONFIRMED (none), PARTLY (fewer than CONFIRM_SESSIONS) or CONFIRMED. The one
    reading of that count for the findings, the figure, the gallery and R5m."""
    if sessions is None or sessions != sessions:
        return None
    return NOT_CONFIRMED if not sessions else CONFIRMED if sessions >= CONFIRM_SESSIONS else PARTLY


def confirmed_text(r) -> str:
    """What the confirmation sweeps say of a ladder row's measured best (ladder's confirmed_* columns,
    confirmation_status): '' for a naive or published row, or one whose ladder was built without confirmations."""
    sessions = getattr(r, "confirmed_sessions", np.nan)
    status = confirmation_status(sessions) if r.kernels == "best" and r.source == MEASURED_LABEL else None
    if status is None:
        return ""
    if status == NOT_CONFIRMED:
        return " (the cheapest of many, from one sweep; not confirmed in fresh sessions)"
    span = f"{r.confirmed_min_ms:.2f}-{r.confirmed_max_ms:.2f}"
    how = (f"confirmed in {int(sessions)} fresh sessions" if status == CONFIRMED else
           f"partly confirmed, {int(sessions)} of {CONFIRM_SESSIONS} fresh sessions")
    return (f" (the cheapest of many, from one sweep; {how} at {r.confirmed_ms:.2f} ms ({span}) = "
            f"${r.confirmed_usd_per_mtok:.2f}/Mtok)")


def findings(gpu_ladder: pd.DataFrame, floors: pd.DataFrame, ratios: pd.DataFrame, table: pd.DataFrame,
             cheap_gpu: str, dear_gpu: str) -> list[str]:
    """Sentences generated from the cost tables (never typed by hand) for the notebook narrative."""
    out = []
    for (source, gpu), g in gpu_ladder.groupby(["source", "gpu"], sort=False):
        out.append(f"{price_label(gpu, g['price_provider'].iloc[0])} ({source}{_cell_words(g)}): " + "; ".join(
            f"{r.kernels} {r.configuration} {r.step_ms:.2f} ms = ${r.usd_per_mtok:.2f}/Mtok" + confirmed_text(r)
            for r in g.itertuples()) + ".")
    if not floors.empty:
        f = floors.sort_values("bandwidth_gbps")
        out.append("At the memory floor (R_floor = 1) the ladder would run in bandwidth order: "
                   + ", ".join(f"{price_label(r.gpu, r.price_provider)} ${r.usd_per_mtok:.2f}" for r in f.itertuples())
                   + " per Mtok.")
    if not ratios.empty:
        top, low = ratios.iloc[0], ratios.iloc[-1]
        out.append(f"{cheap_gpu} against {dear_gpu}: the {dear_gpu} costs {low['cost_ratio']:.2f}-{top['cost_ratio']:.2f}x "
                   f"the {cheap_gpu} per token over {len(ratios)} configuration pairs at a price ratio of "
                   f"{top['price_ratio']:.2f} (largest: {cheap_gpu} {top[f'configuration_{cheap_gpu}']} against "
                   f"{dear_gpu} {top[f'configuration_{dear_gpu}']}); the pairs' models: "
                   + "; ".join(f"{g} {_models(ratios[f'model_{g}'])}" for g in (cheap_gpu, dear_gpu)) + ".")
    out += unpriced(table)
    return out


def _cell_words(ladder_rows: pd.DataFrame) -> str:
    """', <model> ctx <ctx>' of a GPU's ladder rows (one cell: the ladder is filtered to it), or ', model and context
    not stated' for the paper's rows (model NOT_STATED: ladder)."""
    r = ladder_rows.iloc[0]
    if r["model"] == NOT_STATED:
        return ", model and context not stated"
    return f", {r['model']} ctx {int(r['ctx'])}" if pd.notna(r["ctx"]) else f", {r['model']}"


def _models(models: pd.Series) -> str:
    """The models of one side of the ratio table, or 'not stated' where its rows give none (the paper's)."""
    named = sorted(set(models.dropna()))
    return ", ".join(named) + ("" if models.notna().all() else (" and " if named else "") + "not stated")
