"""Notebook 05, cost per token: at listed prices, which configuration serves a token cheapest? It measures nothing:
its rows are notebooks 01-04's decode rows (each cell from one sweep) and the paper's published step times, priced
from data/specs/prices.csv. Its tables (every configuration's $/Mtok, the cost ladder, the floor's ladder, every L4 /
H100 pair, the price sensitivity) and its findings; the claims table reads its cost table."""

from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from decodegap.analysis import cost
from decodegap.analysis import closing_the_gap_confirmation as confirmation
from decodegap import checked, hardware, published, records, roofline, selection
from decodegap.harness import models

NOTEBOOK = "05_cost"
CHEAP_GPU, DEAR_GPU = "l4", "h100-sxm"  # the GPU the paper calls cheaper per token, and the one it is compared with
PRICE_RATIOS = (3, 4, 5, 6, 8, 10)  # DEAR/CHEAP $/hour ratios of the price-sensitivity table


def rows(data) -> pd.DataFrame:
    """Every decode row, each cell from one sweep (as notebooks 01, 04 and 06 read decode.csv), unchecked cells as
    status rows (checked.labelled: never priced)."""
    return roofline.one_sweep(checked.labelled(checked.load("decode", data)), selection.run_plans(data))


def configurations(data, prices: pd.DataFrame, provider: str = cost.PROVIDER, model_keys=()) -> tuple:
    """(the cost table of every published step time and every measured cell at its GPU's price (cost.cost_table),
    the configs of the rows' models and `model_keys`)."""
    decode_rows = rows(data)
    specs = hardware.specs_table(data)
    configs = models.configs(set(decode_rows["model"]) | set(model_keys), data)
    measured = (roofline.cell_table(decode_rows, specs, configs, records.load_experiment("bandwidth", data))
                if not decode_rows.empty else pd.DataFrame(columns=roofline.CELL + ["t_obs_ms", "sessions", "status"]))
    configuration_rows = pd.concat([cost.published_configurations(published.load(data)), cost.measured_configurations(measured)],
                         ignore_index=True)
    return cost.cost_table(configuration_rows, prices, specs, provider, data), configs


def tables(data, provider: str = cost.PROVIDER, cheap_gpu: str = CHEAP_GPU, dear_gpu: str = DEAR_GPU,
           price_ratios: Sequence[float] = PRICE_RATIOS, headline_model: str = "qwen2.5-7b", headline_ctx: int = 2048,
           model_keys=()) -> dict:
    """Notebook 05's tables: `prices`, `costs` (cost.cost_table of every configuration), `unpriced` (a line per
    configuration without a price), `ladder` (each GPU's naive and cheapest configuration at the headline cell, the
    cheapest with notebook 06's confirmation sessions of it where they exist), `confirmations` (every lever's,
    closing_the_gap_confirmation.lever_confirmations: what the ladder and R5m read),
    `floors` (the cost of each priced GPU's step at its memory floor), `ratios` (every `cheap_gpu` / `dear_gpu`
    pair), `sensitivity` (the price ratio each pair needs for the paper's cost ratio, and the cost ratio at
    `price_ratios`), the configs, and the parameters the findings and the figure read."""
    prices = cost.load_prices(data)
    costs, configs = configurations(data, prices, provider, set(model_keys) | {headline_model})
    confirmations = confirmation.lever_confirmations(*confirmation.confirming_rows(data))
    ratios = cost.ratio_table(costs, cheap_gpu, dear_gpu)
    target = float(published.select(published.load(data), "cost", "cost_ratio")["value"].iloc[0])
    return dict(
        prices=prices, costs=costs, configs=configs, unpriced=cost.unpriced(costs),
        ladder=cost.ladder(cost.headline(costs, headline_model, headline_ctx), confirmations),
        confirmations=confirmations,
        floors=cost.floor_costs(configs, hardware.specs_table(data), prices, headline_model, headline_ctx, provider),
        ratios=ratios, sensitivity=cost.price_sensitivity(ratios, cheap_gpu, dear_gpu, list(price_ratios), target),
        cheap_gpu=cheap_gpu, dear_gpu=dear_gpu, headline_model=headline_model, headline_ctx=headline_ctx)


def ladder_label(t: Mapping) -> str:
    """The label of the floor's line in the cost-ladder figure."""
    return f"at the memory floor, R_floor = 1 ({t['headline_model']}, ctx {t['headline_ctx']}, W_all)"


def findings(t: Mapping) -> dict:
    """{"05_findings": cost.findings of the ladder, the floors, the pairs and the cost table}."""
    return {"05_findings": cost.findings(t["ladder"], t["floors"], t["ratios"], t["costs"], t["cheap_gpu"],
                                         t["dear_gpu"])}
