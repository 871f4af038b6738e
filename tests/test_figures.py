"""Every figure shows all its data and nothing hides another: every notebook is replayed on the committed rows (the
`replayed` fixture), and every figure it hands to style.save is checked there with matplotlib's renderer
(figures.checks, written beside it through style.CHECK_FIGURES): no plotted point outside its final axes, no two text labels overlapping, no data label over a
point or out of its axes, no series exactly on another, a saved size a page wide and a short title."""

from __future__ import annotations

import json

import pytest

from decodegap import paths
from decodegap.figures import checks, style

STEMS = [p.stem for p in sorted(paths.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]


@pytest.mark.notebooks
@pytest.mark.parametrize("stem", STEMS)
def test_every_figure_shows_all_its_data(stem, replayed):
    """The figures of notebook `stem` as its replay saved them (the `replayed` fixture runs every notebook with
    figures.style.CHECK_FIGURES set): each committed figure was drawn and checked, and none has a problem."""
    _, figures = replayed
    checked = {p.name[:-len(".json")]: json.loads(p.read_text())
               for p in sorted((figures.parent / "figure_checks").glob(f"{stem[:2]}_*.png.json"))}
    committed = sorted(p.name for p in paths.FIGURES.glob(f"{stem[:2]}_*.png"))
    assert sorted(checked) == committed  # every committed figure of the notebook is drawn and checked
    assert {name: probs for name, probs in checked.items() if probs} == {}
    for name in checked:
        assert name in style.TITLES, f"{name} has no short title in figures.style.TITLES"


def test_save_writes_the_problems_it_finds_when_asked(tmp_path, monkeypatch):
    """style.save with CHECK_FIGURES set writes each figure's problems as JSON (a title not in TITLES is one)."""
    def frozen(ax):
        ax.plot([1, 2], [1, 2])
        ax.set_ylim(0, 1.5)
        ax.plot([1, 2], [3, 4])  # off the chart
    monkeypatch.setenv(style.CHECK_FIGURES, str(tmp_path / "checks"))
    style.save(_fig_with(frozen), tmp_path / "x.png")
    found = json.loads((tmp_path / "checks" / "x.png.json").read_text())
    assert any("outside" in p or "hidden" in p for p in found) and any(p.startswith("title") for p in found)
    monkeypatch.delenv(style.CHECK_FIGURES)
    style.save(_fig_with(frozen), tmp_path / "y.png")
    assert not (tmp_path / "checks" / "y.png.json").exists()


def _fig_with(draw):
    import matplotlib.pyplot as plt

    style.apply()
    fig, ax = plt.subplots(figsize=(4, 3))
    draw(ax)
    return fig


def test_the_checks_can_fail():
    """Each check catches the defect it is for: the test above cannot pass by checking nothing."""
    def frozen(ax):
        ax.plot([1, 2], [1, 2], label="a")
        ax.set_ylim(0, 1.5)
        ax.plot([1, 2], [3, 4], label="b")  # drawn after the limits froze: off the chart
    assert checks.hidden_points(_fig_with(frozen))

    def on_top(ax):
        ax.text(0.5, 0.5, "first label")
        ax.text(0.52, 0.5, "second label")
    assert checks.overlapping_labels(_fig_with(on_top))

    def off(ax):
        ax.plot([0, 1], [0, 1])
        ax.annotate("a label past the right edge", (0.95, 0.5))
    assert checks.overlapping_labels(_fig_with(off))

    def covered(ax):
        ax.scatter([0.5], [0.5])
        ax.text(0.45, 0.48, "over it")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
    assert checks.labels_over_points(_fig_with(covered))

    def twice(ax):
        ax.plot([1, 2], [1, 2], label="a")
        ax.plot([1, 2], [1, 2], label="b")
    assert checks.coincident_series(_fig_with(twice))

    fig = _fig_with(lambda ax: ax.plot([0, 1], [0, 1]))
    fig.set_size_inches(20, 3)
    style.finding_title(fig, "x" * 200)
    assert len(checks.too_large(fig)) == 2


def test_the_gallery_line_starts_with_the_figure_title():
    """The README gallery's line of a figure and the figure's title come from one text (style.TITLES)."""
    from decodegap.figures import gallery

    for name, text in gallery.read().items():
        assert text.startswith(f"**{style.TITLES[name]}.** "), name


def test_no_sentence_prints_a_range_whose_two_ends_are_the_same():
    """A span of one value reads as that value (stats.span), never "4.17-4.17 ms", and no number prints as "nan": in
    every committed findings file and the README's gallery."""
    import re

    texts = {p.name: p.read_text() for p in sorted((paths.REPO / "figures").glob("*findings*.md"))}
    texts["README.md"] = (paths.REPO / "README.md").read_text()
    same = [(name, m.group(0)) for name, text in texts.items()
            for m in re.finditer(r"(?<![\d.])(\d+\.\d+)-(\d+\.\d+)(?![\d.])", text) if m.group(1) == m.group(2)]
    assert not same, same
    missing = [(name, text[max(0, m.start() - 60):m.end()]) for name, text in texts.items()
               for m in re.finditer(r"[+-]?\bnan\b", text)]
    assert not missing, missing  # a number no row gave, printed as a number
