"""Every figure shows all its data and nothing hides another (issue 30, item 5): each notebook's code runs here,
in-process on the committed rows (CPU), and every figure it hands to style.save is checked with matplotlib's renderer
(figures.checks): no plotted point outside its final axes, no two text labels overlapping, no data label over a
point or out of its axes, no series exactly on another, a saved size a page wide and a short title."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from decodegap import paths
from decodegap.figures import checks, style

STEMS = [p.stem for p in sorted(paths.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]


def figures_of(stem: str, figures_dir: Path, monkeypatch) -> dict:
    """{file name: its problems} of every figure notebook `stem` saves, its cells run in one namespace in order
    (the parameters cell, then FIGURES_DIR pointed at `figures_dir`)."""
    found = {}
    real = style.save

    def save(fig, path):
        name = Path(path).name
        title = fig._suptitle.get_text().splitlines()[0] if fig._suptitle is not None else ""
        found[name] = checks.problems(fig) + ([] if title == style.TITLES.get(name) else [f"title {title!r}"])
        real(fig, path)
    monkeypatch.setattr(style, "save", save)
    namespace = {"__name__": "__main__"}
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in json.loads((paths.NOTEBOOKS / f"{stem}.ipynb").read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            exec(compile("".join(cell["source"]), f"{stem}.ipynb", "exec"), namespace)
            if "parameters" in cell.get("metadata", {}).get("tags", []):
                namespace["FIGURES_DIR"] = str(figures_dir)
    return found


@pytest.mark.notebooks
@pytest.mark.parametrize("stem", STEMS)
def test_every_figure_shows_all_its_data(stem, tmp_path, monkeypatch):
    found = figures_of(stem, tmp_path, monkeypatch)
    committed = sorted(p.name for p in paths.FIGURES.glob(f"{stem[:2]}_*.png"))
    assert sorted(found) == committed  # every committed figure of the notebook is drawn and checked
    assert {name: probs for name, probs in found.items() if probs} == {}
    for name in found:
        assert name in style.TITLES, f"{name} has no short title in figures.style.TITLES"


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
