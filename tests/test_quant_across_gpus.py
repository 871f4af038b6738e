"""Notebook 04's cells on two GPUs (decodegap.analysis.quant_across_gpus, its figure and gallery line), on hand-made
grids whose answers are checked by hand: the H100-SXM's datasheet 3350 GB/s and the H200's 4800 GB/s
(data/specs/gpus.csv) give a bandwidth ratio of 96/67."""

import math

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from decodegap import hardware
from decodegap.analysis import quant_across_gpus
from decodegap.figures import gallery, quantisation as grid_plots

NAN = float("nan")
RATIO = 4800 / 3350


def _grid(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["gpu", "model", "ctx", "bf16", "int4-triton", "bnb-nf4"])


GRID = _grid([("h100-sxm", "llama-3.1-8b", 2048, 8.0, 5.0, 6.0),
              ("h200", "llama-3.1-8b", 2048, 6.0, 5.0, NAN),  # nf4 on one GPU only: no pair
              ("h200", "llama-3.1-8b", 16384, 7.0, 4.0, 5.0)])  # the H100 lacks ctx 16384: no pair


def test_pairs_weigh_each_speed_up_against_the_bandwidth_ratio():
    """bf16 8 -> 6 ms: 4/3 faster, ln(4/3) / ln(96/67) = 0.28768 / 0.35965 = 0.7999 of the bandwidth gain; int4 5 -> 5
    ms: no gain (0). The slow GPU is the one of less bandwidth, whatever the names' order."""
    p = quant_across_gpus.pairs(GRID, hardware.specs_table(), "lean_attn_graph").set_index("quant")
    assert list(p.index) == ["bf16", "int4-triton"] and set(p["ctx"]) == {2048}
    assert (p["gpu_slow"] == "h100-sxm").all() and (p["gpu_fast"] == "h200").all() and (p["arm"] == "lean_attn_graph").all()
    assert p.loc["bf16", "speedup"] == pytest.approx(4 / 3)
    assert p.loc["bf16", "bandwidth_ratio"] == pytest.approx(1.432836, abs=1e-6)
    assert p.loc["bf16", "gain_realised"] == pytest.approx(0.7999, abs=1e-4)
    assert p.loc["int4-triton", "gain_realised"] == 0.0
    swapped = quant_across_gpus.pairs(GRID.iloc[::-1], hardware.specs_table(), "lean_attn_graph").set_index("quant")
    pd.testing.assert_frame_equal(swapped, p)


def test_a_step_slower_on_the_faster_gpu_realises_a_negative_gain():
    """6 ms on the H100, 7.5 on the H200: speed-up 0.8, ln 0.8 / ln(96/67) = -0.6204."""
    grid = _grid([("h200", "m", 2048, 7.5, NAN, NAN), ("h100-sxm", "m", 2048, 6.0, NAN, NAN)])
    p = quant_across_gpus.pairs(grid, hardware.specs_table(), "graph").iloc[0]
    assert (p["gpu_slow"], p["speedup"]) == ("h100-sxm", pytest.approx(0.8))
    assert p["gain_realised"] == pytest.approx(math.log(0.8) / math.log(RATIO)) == pytest.approx(-0.6204, abs=1e-4)


def test_one_gpu_gives_no_pairs_and_the_gallery_says_so():
    p = quant_across_gpus.pairs(GRID[GRID["gpu"] == "h200"], hardware.specs_table(), "lean_attn_graph")
    assert p.empty and list(p.columns) == quant_across_gpus.PAIR_COLUMNS
    assert quant_across_gpus.findings(p) == []
    assert gallery._quant_gpus(p).startswith("No quantised cell is measured on two GPUs yet")


@pytest.mark.parametrize("int4_h200_ms, nearer", [(5.0, "bf16 is nearer bandwidth-bound"),
                                                   (3.0, "int4-triton is nearer bandwidth-bound")])
def test_the_gallery_line_names_whichever_path_is_nearer_bandwidth_bound(int4_h200_ms, nearer):
    """bf16 realises 0.80 of the gain (above). int4 5 -> 5 ms realises 0, below; 5 -> 3 ms: ln(5/3) / ln(96/67) = 1.42,
    above."""
    grid = GRID.copy()
    grid.loc[1, "int4-triton"] = int4_h200_ms
    line = gallery._quant_gpus(quant_across_gpus.pairs(grid, hardware.specs_table(), "lean_attn_graph"))
    assert line.endswith(nearer + ".")
    assert "the H200, with 1.43x the H100-SXM's datasheet bandwidth, is 1.33x faster in bf16 (realising 80 %" in line
    found = quant_across_gpus.findings(quant_across_gpus.pairs(grid, hardware.specs_table(), "lean_attn_graph"))
    assert [f.values["quant"] for f in found] == ["bf16", "int4-triton"]
    assert found[0].values["gain_realised_min"] == pytest.approx(0.7999, abs=1e-4)


def test_overlapping_spans_name_neither():
    """Two contexts: bf16 realises 0.80 (8 -> 6 ms) and 0 (7 -> 7 ms) of the gain, int4 ln(5/4) / ln(96/67) = 0.62 at
    both: inside bf16's span, so neither is nearer."""
    grid = _grid([("h100-sxm", "m", 2048, 8.0, 5.0, NAN), ("h200", "m", 2048, 6.0, 4.0, NAN),
                  ("h100-sxm", "m", 4096, 7.0, 5.0, NAN), ("h200", "m", 4096, 7.0, 4.0, NAN)])
    line = gallery._quant_gpus(quant_across_gpus.pairs(grid, hardware.specs_table(), "graph"))
    assert "1.00-1.33x faster in bf16 (realising 0-80 % of that gain) and 1.25x" in line
    assert line.endswith("int4-triton (62 %): neither is nearer bandwidth-bound (the spans overlap).")


def test_the_gallery_line_says_when_the_faster_gpus_fastest_path_is_not_on_the_slower_one():
    """nf4 is on both GPUs (8 -> 6 ms bf16, 5 -> 4.5 ms nf4); int4-triton, 3 ms, only on the H200: the line reads nf4
    as the fastest path both have and names int4-triton as the H200's fastest, not on the H100."""
    grid = _grid([("h100-sxm", "m", 2048, 8.0, NAN, 5.0), ("h200", "m", 2048, 6.0, 3.0, 4.5)])
    pairs = quant_across_gpus.pairs(grid, hardware.specs_table(), "graph")
    line = gallery._quant_gpus(pairs, grid)
    assert ("with bnb-nf4, the fastest quantised path both GPUs have (the H200's fastest, int4-triton, is not "
            "measured on the H100-SXM)") in line
    assert "its fastest quantised path, bnb-nf4" in gallery._quant_gpus(pairs)  # without the grid: paired paths only


def test_the_grid_figure_draws_a_line_per_path_and_gpu_with_rows():
    """llama-3.1-8b: bf16 and int4 on both GPUs, nf4 on the H100 (at 2048) and the H200 (at 16384): 6 lines."""
    fig = grid_plots.grid_lines(GRID, "lean_attn_graph")
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 6 and ax.get_title(loc="left") == "llama-3.1-8b"
    plt.close(fig)
    empty = grid_plots.grid_lines(_grid([]), "lean_attn_graph")
    assert not any(ax.get_lines() for ax in empty.axes)
    plt.close(empty)


def test_pairs_say_when_each_side_was_measured():
    """With the cell table, each pair carries its two cells' `measured`; the finding and the gallery line give their
    days per GPU (the sides may be of different dates and code)."""
    cells = pd.DataFrame([dict(gpu=g, model="llama-3.1-8b", ctx=2048, arm="lean_attn_graph", attn="sdpa", quant=q,
                               t_obs_ms=1.0, measured=m)
                          for g, q, m in (("h100-sxm", "bf16", "2026-12-06 16:53 UTC"),
                                          ("h100-sxm", "int4-triton", "2026-12-06 17:09 UTC"),
                                          ("h200", "bf16", "2026-11-29 16:13 UTC"),
                                          ("h200", "int4-triton", "2026-12-02 18:41 UTC"))])
    p = quant_across_gpus.pairs(GRID, hardware.specs_table(), "lean_attn_graph", cells).set_index("quant")
    assert (p.loc["bf16", "measured_slow"], p.loc["bf16", "measured_fast"]) == ("2026-12-06 16:53 UTC",
                                                                                "2026-11-29 16:13 UTC")
    found = quant_across_gpus.findings(p.reset_index())
    assert str(found[1]).endswith("; measured 2026-12-06 on the h100-sxm and 2026-12-02 on the h200.")
    line = gallery._quant_gpus(p.reset_index())
    assert line.endswith("(cells measured 2026-12-06 on the h100-sxm and 2026-11-29 to 2026-12-02 on the h200).")

