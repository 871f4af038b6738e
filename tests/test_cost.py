"""Cost per million tokens: hand arithmetic, prices only with a source, the ladder and the ratio tables."""

from __future__ import annotations

import pandas as pd
import pytest

from decodegap.analysis import cost
from decodegap import hardware, paths, published

PRICES = pd.DataFrame([
    dict(gpu="l4", provider="modal", usd_per_hour=0.72, source="test", source_date="2026-05-01", note=""),
    dict(gpu="h100-sxm", provider="modal", usd_per_hour=3.6, source="test", source_date="2026-05-01", note=""),
    dict(gpu="h200", provider="modal", usd_per_hour=float("nan"), source="", source_date="", note="no source found"),
])
SPECS = pd.DataFrame(dict(gpu=["l4", "h100-sxm", "h200"], bandwidth_gbps=[300, 3350, 4800]))


def _configs(rows):
    cols = ["source", "gpu", "model", "ctx", "arm", "attn", "quant", "step_ms", "sessions"]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows], columns=cols)


def test_usd_per_mtok_by_hand():
    # 3.6 $/h = 0.001 $/s; 10 ms/step = 100 tokens/s -> 1e-5 $/token = 10 $ per million tokens
    assert cost.tokens_per_s(10.0) == pytest.approx(100.0)
    assert cost.usd_per_mtok(3.6, 10.0) == pytest.approx(10.0)
    # 0.72 $/h at 50 ms/step: 20 tokens/s, 0.0002 $/s -> 1e-5 $/token = 10 $/Mtok
    assert cost.usd_per_mtok(0.72, 50.0) == pytest.approx(10.0)
    assert cost.usd_per_mtok(7.2, 10.0) == pytest.approx(20.0)  # twice the price, twice the cost


def test_a_gpu_without_price_is_a_clear_error():
    assert cost.usd_per_hour("l4", PRICES) == 0.72
    with pytest.raises(cost.NoPriceError, match=r"'h200'.*prices\.csv.*no source found"):
        cost.usd_per_hour("h200", PRICES)
    with pytest.raises(cost.NoPriceError, match=r"'b300'.*prices\.csv"):
        cost.usd_per_hour("b300", PRICES)
    with pytest.raises(cost.NoPriceError, match="no lambda price"):
        cost.usd_per_hour("l4", PRICES, provider="lambda")


def test_shipped_prices_have_sources_and_the_paper_provider():
    prices = cost.load_prices()
    priced = prices.dropna(subset=["usd_per_hour"])
    assert priced["source"].str.startswith("http").all() and priced["source_date"].notna().all()
    modal = priced[priced["provider"] == "modal"].set_index("gpu")["usd_per_hour"]
    for gpu, price in {"l4": 0.7992, "l40s": 1.9512, "a100-80gb": 2.4984, "h100-sxm": 3.9492}.items():
        assert modal[gpu] == price
    assert set(prices["gpu"]) <= set(hardware.specs_table()["gpu"])  # every priced GPU is in the registry
    assert prices["note"].notna().all()


def test_the_ladders_measured_best_carries_its_confirmation_by_hand():
    """The measured best of the ladder (the cheapest of many, one sweep) carries notebook 06's confirmation sessions
    of the same gpu, model, ctx, arm and quant, priced at the same price: h100 4 ms at 3.6 $/h is 4 $/Mtok, confirmed
    at 3.5 ms it is 3.5 $/Mtok. Its pick and step_ms stay the sweep's; a best without confirmation says so; naive and
    published rows carry none; two sessions are partly confirmed."""
    configs = _configs([("measured", "h100-sxm", "m", 2048, "eager", "sdpa", "bf16", 20.0, 3),
                        ("measured", "h100-sxm", "m", 2048, "lean_x", "sdpa", "int4-triton", 4.0, 1),
                        ("measured", "l4", "m", 2048, "graph", "sdpa", "bf16", 50.0, 1),
                        ("p", "l4", None, None, None, None, "gptq-exllamav2", 20.0, None)])
    table = cost.cost_table(configs, PRICES, SPECS)
    confirmations = pd.DataFrame([dict(gpu="h100-sxm", model="m", ctx=2048, kind="int4", arm="lean_x",
                                       quant="int4-triton", confirmed_ms=3.5, confirmed_min_ms=3.4,
                                       confirmed_max_ms=3.6, sessions=3),
                                  dict(gpu="h100-sxm", model="m", ctx=4096, kind="int4", arm="lean_x",
                                       quant="int4-triton", confirmed_ms=1.0, confirmed_min_ms=1.0,
                                       confirmed_max_ms=1.0, sessions=3)])
    lad = cost.ladder(table, confirmations).set_index(["source", "gpu", "kernels"])
    best = lad.loc[("measured", "h100-sxm", "best")]
    assert best["step_ms"] == 4.0 and best["usd_per_mtok"] == pytest.approx(4.0)
    assert best["confirmed_ms"] == 3.5 and best["confirmed_sessions"] == 3
    assert best["confirmed_usd_per_mtok"] == pytest.approx(3.5)
    assert (best["model"], best["ctx"]) == ("m", 2048)  # a measured row names its cell; the paper's names none
    assert (lad.loc[("p", "l4", "best"), "model"], pd.isna(lad.loc[("p", "l4", "best"), "ctx"])) == (cost.NOT_STATED,
                                                                                                    True)
    assert lad.loc[("measured", "l4", "best"), "confirmed_sessions"] == 0  # the l4's best has no confirmation
    assert pd.isna(lad.loc[("measured", "h100-sxm", "naive"), "confirmed_sessions"])
    assert pd.isna(lad.loc[("p", "l4", "best"), "confirmed_sessions"])
    lines = cost.findings(lad.reset_index(), pd.DataFrame(), cost.ratio_table(table, "l4", "h100-sxm"), table, "l4",
                          "h100-sxm")
    assert lines[0].startswith("h100-sxm (measured, m ctx 2048): naive bf16 eager")
    assert any(line.startswith("l4 (p, model and context not stated): best gptq-exllamav2") for line in lines)
    # the ratio line says which models its pairs cross: the l4's measured m and its published rows, which name none
    assert lines[-1].endswith("the pairs' models: l4 m and not stated; h100-sxm m.")
    assert ("best int4-triton lean_x 4.00 ms = $4.00/Mtok (the cheapest of many, from one sweep; confirmed in 3 "
            "fresh sessions at 3.50 ms (3.40-3.60) = $3.50/Mtok)") in lines[0]
    assert "not confirmed in fresh sessions" in lines[1] and "confirmed" not in lines[2]
    partly = cost.ladder(table, confirmations.assign(sessions=2))
    assert "partly confirmed, 2 of 3 fresh sessions at 3.50 ms" in cost.findings(
        partly, pd.DataFrame(), pd.DataFrame(), table, "l4", "h100-sxm")[0]


def test_cost_table_keeps_unpriced_rows_with_a_note():
    configs = _configs([("measured", "h200", "m", 2048, "eager", "sdpa", "bf16", 20.0, 3),
                        ("measured", "l4", "m", 2048, "eager", "sdpa", "bf16", 50.0, 3)])
    table = cost.cost_table(configs, PRICES, SPECS)
    h200, l4 = table.iloc[0], table.iloc[1]
    assert pd.isna(h200["usd_per_mtok"]) and "no modal price for h200" in h200["price_note"]
    assert l4["usd_per_mtok"] == pytest.approx(10.0) and l4["price_note"] == ""
    assert l4["configuration"] == "bf16 eager"
    assert cost.unpriced(table) == ["h200: 1 measured configuration(s) have no $/Mtok: no modal price for h200 in "
                                    "data/specs/prices.csv."]


def test_ladder_naive_and_best_and_the_ratio_table():
    configs = _configs([
        ("p", "l4", None, None, "eager", None, "bf16", 60.0, None),
        ("p", "l4", None, None, None, None, "gptq-exllamav2", 20.0, None),
        ("p", "h100-sxm", None, None, "eager", None, "bf16", 15.0, None),
        ("p", "h100-sxm", None, None, "graph", None, "bf16", 12.0, None),
        ("p", "h200", None, None, "eager", None, "bf16", 10.0, None),
    ])
    table = cost.cost_table(configs, PRICES, SPECS)
    lad = cost.ladder(table).set_index(["gpu", "kernels"])
    assert lad.loc[("l4", "naive"), "configuration"] == "bf16 eager"
    assert lad.loc[("l4", "best"), "configuration"] == "gptq-exllamav2"
    assert lad.loc[("l4", "best"), "usd_per_mtok"] == pytest.approx(0.72 * 20 / 3.6)  # 4 $/Mtok
    assert lad.loc[("h100-sxm", "best"), "configuration"] == "bf16 graph"
    assert "h200" not in lad.index.get_level_values("gpu")  # no price, not on the ladder
    assert set(lad["model"]) == {cost.NOT_STATED} and lad["ctx"].isna().all()  # the paper states neither
    ratios = cost.ratio_table(table, "l4", "h100-sxm")
    assert len(ratios) == 4
    top = ratios.iloc[0]  # h100 eager 15 ms at 3.6 $/h = 15 $/Mtok over l4 int4 20 ms at 0.72 $/h = 4 $/Mtok
    assert (top["configuration_l4"], top["configuration_h100-sxm"]) == ("gptq-exllamav2", "bf16 eager")
    assert top["cost_ratio"] == pytest.approx(15 / 4)
    assert top["cost_ratio"] == pytest.approx(top["price_ratio"] * top["step_ratio"])
    sens = cost.price_sensitivity(ratios, "l4", "h100-sxm", [5, 10], target=6.0)
    row = sens.iloc[0]
    assert row["price_ratio_for_6x"] == pytest.approx(6.0 / 0.75)  # step ratio 15/20
    assert row["cost_ratio_at_price_ratio_10"] == pytest.approx(7.5)


def test_published_configurations_are_labelled_and_complete():
    configs = cost.published_configurations(published.load())
    assert set(configs["source"]) == {published.PUBLISHED_LABEL}
    assert sorted(configs["step_ms"]) == [11.78, 14.83, 17.36, 45.24, 59.36, 62.32]


def test_floor_costs_are_in_bandwidth_order_on_the_shipped_registry():
    from decodegap.harness import models

    cfg = {"qwen2.5-7b": models.load_spec("qwen2.5-7b").config}
    floors = cost.floor_costs(cfg, hardware.specs_table(), cost.load_prices(), "qwen2.5-7b", 2048)
    h200 = floors.set_index("gpu").loc["h200"]  # no Modal price: Spheron's, named as such
    assert h200["price_provider"] == "spheron" and h200["usd_per_hour"] == 4.54
    assert (floors[floors.gpu != "h200"].price_provider == "modal").all()
    l4 = floors.set_index("gpu").loc["l4"]
    assert l4["usd_per_mtok"] == pytest.approx(0.7992 * l4["t_floor_ms"] / 3.6)
    ordered = floors.sort_values("bandwidth_gbps")["usd_per_mtok"].to_numpy()
    assert (ordered[1:] < ordered[:-1]).all()


def test_a_gpu_the_provider_does_not_price_takes_another_providers_price_named():
    prices = pd.concat([PRICES, pd.DataFrame([
        dict(gpu="h200", provider="spheron", usd_per_hour=4.5, source="test", source_date="2026-03-01", note=""),
        dict(gpu="h200", provider="other", usd_per_hour=9.0, source="test", source_date="2025-01-01", note=""),
        dict(gpu="l4", provider="other", usd_per_hour=9.0, source="test", source_date="2027-01-01", note="")])])
    assert cost.price_for("h200", prices) == (4.5, "spheron")  # the latest of the other providers' prices
    assert cost.price_for("l4", prices) == (0.72, "modal")  # the provider's own price wins
    with pytest.raises(cost.NoPriceError):
        cost.price_for("b300", prices)
    with pytest.raises(cost.NoPriceError):  # the strict look-up never falls back
        cost.usd_per_hour("h200", prices)
    configs = _configs([("measured", "h200", "m", 2048, "eager", "sdpa", "bf16", 20.0, 3)])
    row = cost.cost_table(configs, prices, SPECS).iloc[0]
    assert row["usd_per_mtok"] == pytest.approx(4.5 * 20 / 3.6) and row["price_provider"] == "spheron"
    assert row["price_note"] == "no modal price for h200: spheron's price"
    assert cost.price_label("h200", "spheron") == "h200 (spheron price)" and cost.price_label("l4", "modal") == "l4"


def test_the_shipped_h200_price_is_spherons_with_its_source():
    prices = cost.load_prices().set_index(["gpu", "provider"])
    assert pd.isna(prices.loc[("h200", "modal"), "usd_per_hour"])  # no Modal price was found: never guessed
    row = prices.loc[("h200", "spheron")]
    assert row["usd_per_hour"] == 4.54 and row["source_date"] == "2026-03-17"
    assert row["source"].startswith("https://www.spheron.network/") and "not Modal's" in row["note"]


def test_prices_file_lives_in_specs():
    assert cost.prices_path() == paths.DATA / "specs" / "prices.csv"
