"""The README gallery quotes figures/gallery.csv, which decodegap.gallery generates from the tables in figures/;
the values it quotes are checked here against those tables, computed again by hand."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from decodegap import gallery, paths


def _gallery_lines() -> dict[str, str]:
    readme = (paths.REPO / "README.md").read_text()
    block = readme.split("## Gallery", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| !\[\]\(figures/([\w.-]+\.png)\) `[\w.-]+` \| (.*) \|$", block, re.M))


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"(?<![\w.])\d+\.\d+|(?<![\w.])\d+(?![\w.])", text)]


def test_the_readme_gallery_quotes_figures_gallery_csv_for_every_figure():
    committed = pd.read_csv(paths.FIGURES / "gallery.csv").set_index("figure")["finding"]
    lines = _gallery_lines()
    pngs = sorted(p.name for p in paths.FIGURES.glob("*.png"))
    assert sorted(committed.index) == pngs, "figures/gallery.csv does not cover every figure: run make reproduce"
    for png in pngs:
        assert png in lines, f"{png} is missing from the README gallery"
        assert lines[png] == committed[png], (f"README gallery line of {png} differs from figures/gallery.csv: run "
                                              "python -m decodegap gallery --readme")


def test_figures_gallery_csv_is_what_the_tables_give_now():
    committed = pd.read_csv(paths.FIGURES / "gallery.csv").set_index("figure")["finding"].to_dict()
    assert committed == gallery.findings(), "figures/gallery.csv is stale: run make reproduce"


def test_the_graph_speedups_and_eager_span_are_the_tables_values():
    found = gallery.findings()
    sp = pd.read_csv(paths.FIGURES / "02_speedups.csv")
    h = sp[(sp.gpu == "h200") & (sp.ctx == 2048) & (sp.arm == "graph") & (sp.sweep == "headline")]
    lo, hi = _numbers(found["02_speedup_ci.png"])[:2]
    assert (lo, hi) == (round(h.speedup.min(), 2), round(h.speedup.max(), 2))
    cells = pd.read_csv(paths.FIGURES / "01_roofline_cells.csv")
    eager = cells[(cells.gpu == "h200") & (cells.arm == "eager")]
    lo, hi = _numbers(found["01_step_time_vs_context.png"])[:2]  # "H200" and "2k" are not numbers here
    assert (lo, hi) == (round(eager.t_obs_ms.min(), 1), round(eager.t_obs_ms.max(), 1))


def test_the_cost_ratio_and_the_published_values_come_from_their_files():
    found = gallery.findings()
    lad = pd.read_csv(paths.FIGURES / "05_cost_ladder.csv").set_index(["gpu", "kernels"])
    ratio = lad.loc[("h100-sxm", "best"), "usd_per_mtok"] / lad.loc[("l4", "best"), "usd_per_mtok"]
    assert f"({ratio:.2f}x, not ~6x)" in found["05_cost_ladder.png"]  # 6: the paper's "about 6x" (paper.csv)
    pub = pd.read_csv(paths.DATA / "published" / "paper.csv")
    r = pub[(pub.claim == "inverted_ladder") & (pub.quantity == "r_floor")].set_index("gpu")["value"]
    assert found["01_r_floor_vs_bandwidth.png"].startswith(f"R_floor falls as peak bandwidth rises: L4 {r['l4']:.2f} and "
                                                         f"H100 {r['h100-sxm']:.2f} (published)")


def test_readme_text_replaces_each_gallery_line_and_refuses_a_missing_one():
    readme = "## Gallery\n\n| figure | finding |\n|---|---|\n| ![](figures/a.png) `a.png` | old |\n\n## Next\n"
    assert "| ![](figures/a.png) `a.png` | new |" in gallery.readme_text(readme, {"a.png": "new"})
    with pytest.raises(ValueError, match="b.png"):
        gallery.readme_text(readme, {"a.png": "new", "b.png": "x"})
