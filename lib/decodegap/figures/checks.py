"""Checks of a drawn figure that a reader would otherwise catch by eye: every plotted data point inside its axes'
final limits (`hidden_points`) and no two text labels on top of each other (`overlapping_labels`), both read from
matplotlib's renderer (fig.canvas.draw(), artist.get_window_extent()). tests/test_figures.py runs them over every
figure the notebooks draw."""

from __future__ import annotations

import numpy as np

TOLERANCE_PX = 1.0


def _inside(points: np.ndarray, box, tol: float = TOLERANCE_PX) -> np.ndarray:
    return ((points[:, 0] >= box.x0 - tol) & (points[:, 0] <= box.x1 + tol)
            & (points[:, 1] >= box.y0 - tol) & (points[:, 1] <= box.y1 + tol))


def _finite(points) -> np.ndarray:
    points = np.asarray(points, dtype=float).reshape(-1, 2)
    return points[np.isfinite(points).all(axis=1)]


def _label(artist) -> str:
    label = str(artist.get_label() or "")
    return "" if label.startswith("_child") else label


def hidden_points(fig) -> list[str]:
    """Each artist of each axes with a data point outside the axes' final limits: lines (errorbars and their bars
    among them), scatter offsets, bars, as '<axes title>: <artist label>: n of m points outside'."""
    from matplotlib.collections import LineCollection, PathCollection, PolyCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    fig.canvas.draw()
    out = []
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison and not ax.lines and not ax.collections:
            continue
        box = ax.bbox
        name = ax.get_title() or ax.get_ylabel() or f"axes {fig.axes.index(ax)}"
        for artist in ax.get_children():
            if not artist.get_visible():
                continue
            if isinstance(artist, Line2D):
                points = _finite(artist.get_transform().transform(_finite(artist.get_xydata())))
            elif isinstance(artist, PathCollection):
                offsets = _finite(artist.get_offsets())
                points = _finite(artist.get_offset_transform().transform(offsets)) if len(offsets) else offsets
            elif isinstance(artist, (LineCollection, PolyCollection)):
                segs = [s for s in artist.get_paths() if len(s.vertices)]
                points = (_finite(artist.get_transform().transform(np.concatenate([s.vertices for s in segs])))
                          if segs else np.empty((0, 2)))
            elif isinstance(artist, Rectangle) and artist is not ax.patch:
                points = _finite(artist.get_verts())
            else:
                continue
            if not len(points):
                continue
            outside = ~_inside(points, box)
            if outside.any():
                out.append(f"{name}: {_label(artist) or type(artist).__name__}: {int(outside.sum())} of "
                           f"{len(points)} points outside the axes")
    return out


def _texts(fig):
    """(description, artist) of every visible, non-empty text of the figure a reader reads."""
    items = []
    for text in fig.texts:
        items.append(("figure text", text))
    if getattr(fig, "_suptitle", None) is not None and fig._suptitle not in fig.texts:
        items.append(("suptitle", fig._suptitle))
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        for title in (ax.title, ax._left_title, ax._right_title):
            items.append((f"axes {i} title", title))
        items.append((f"axes {i} xlabel", ax.xaxis.label))
        items.append((f"axes {i} ylabel", ax.yaxis.label))
        for text in ax.texts:
            items.append((f"axes {i} text", text))
        for axis, kind in ((ax.xaxis, "x tick"), (ax.yaxis, "y tick")):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks():
                loc = tick.get_loc()
                if not (lo - 1e-9 * max(1.0, abs(hi)) <= loc <= hi + 1e-9 * max(1.0, abs(hi))):
                    continue
                for label in (tick.label1, tick.label2):
                    items.append((f"axes {i} {kind}", label))
    return [(what, t) for what, t in items if t.get_visible() and t.get_text().strip()]


def _legends(fig):
    out = [leg for ax in fig.axes for leg in ([ax.get_legend()] if ax.get_legend() else [])]
    return out + list(fig.legends)


def overlapping_labels(fig) -> list[str]:
    """Each pair of visible text labels whose rendered boxes overlap (more than TOLERANCE_PX each way), and each
    text that runs into a legend box or out of its axes (a data label, an annotation) or off the figure."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [(what, t, t.get_window_extent(renderer)) for what, t in _texts(fig)]
    out = []
    for i, (wa, ta, ba) in enumerate(texts):
        for wb, tb, bb in texts[i + 1:]:
            if _overlap(ba, bb):
                out.append(f"{wa} {ta.get_text()!r} overlaps {wb} {tb.get_text()!r}")
    for leg in _legends(fig):
        lb = leg.get_window_extent(renderer)
        for what, t, b in texts:
            if _overlap(lb, b):
                out.append(f"{what} {t.get_text()!r} runs into a legend")
    for i, ax in enumerate(fig.axes):
        for t in ax.texts:  # a label of data (anchored in data coordinates) stays inside its axes
            anchored = getattr(t, "xycoords", None) == "data" if hasattr(t, "xycoords") else t.get_transform() == ax.transData
            if anchored and t.get_visible() and t.get_text().strip() and not _within(t.get_window_extent(renderer), ax.bbox):
                out.append(f"axes {i} text {t.get_text()!r} runs out of its axes")
    return out


def _overlap(a, b, tol: float = TOLERANCE_PX) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > tol) and (min(a.y1, b.y1) - max(a.y0, b.y0) > tol)


def _within(inner, outer, tol: float = TOLERANCE_PX) -> bool:
    return (inner.x0 >= outer.x0 - tol and inner.x1 <= outer.x1 + tol and inner.y0 >= outer.y0 - tol
            and inner.y1 <= outer.y1 + tol)


def _markers(ax):
    """Display coordinates of every data marker of `ax` (scatter offsets, line markers), with its artist."""
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D

    for artist in ax.get_children():
        if not artist.get_visible():
            continue
        if isinstance(artist, PathCollection) and len(artist.get_offsets()):
            yield artist, _finite(artist.get_offset_transform().transform(_finite(artist.get_offsets())))
        elif isinstance(artist, Line2D) and artist.get_marker() not in (None, "None", "", " ") and len(artist.get_xydata()):
            yield artist, _finite(artist.get_transform().transform(_finite(artist.get_xydata())))


def _text_box(text, renderer):
    """The window extent of a text's own glyphs: an annotation's connecting line, which may cross markers on its
    way to its point, is left out (Annotation.get_window_extent takes it in)."""
    from matplotlib.text import Text

    return Text.get_window_extent(text, renderer)


def labels_over_points(fig) -> list[str]:
    """Each text of an axes (a data label, an annotation's text) drawn over a data marker of that axes."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out = []
    for i, ax in enumerate(fig.axes):
        for t in ax.texts:
            if not (t.get_visible() and t.get_text().strip()):
                continue
            box = _text_box(t, renderer)
            for artist, points in _markers(ax):
                inside = ((points[:, 0] > box.x0 + 1) & (points[:, 0] < box.x1 - 1)
                          & (points[:, 1] > box.y0 + 1) & (points[:, 1] < box.y1 - 1))
                if inside.any():
                    out.append(f"axes {i} text {t.get_text()!r} covers {int(inside.sum())} point(s) of "
                               f"{_label(artist) or type(artist).__name__}")
    return out


def place_clear_of_markers(text, places) -> bool:
    """Put the annotation `text` at the first of `places` ((offset in points, ha, va) each) where it covers no
    data marker of its axes (labels_over_points' test); at the last one if none is clear. True if one was."""
    ax = text.axes
    for offset, ha, va in places:
        text.xyann = offset
        text.set_ha(ha)
        text.set_va(va)
        ax.figure.canvas.draw()
        box = _text_box(text, ax.figure.canvas.get_renderer())
        if not any(((points[:, 0] > box.x0 + 1) & (points[:, 0] < box.x1 - 1)
                    & (points[:, 1] > box.y0 + 1) & (points[:, 1] < box.y1 - 1)).any() for _, points in _markers(ax)):
            return True
    return False


def coincident_series(fig) -> list[str]:
    """Two lines of one axes with the same points (one hides the other) under different labels."""
    from matplotlib.lines import Line2D

    out = []
    for i, ax in enumerate(fig.axes):
        seen = {}
        for line in ax.get_children():
            if not isinstance(line, Line2D) or not line.get_visible() or not _label(line) or _label(line).startswith("_"):
                continue
            xy = _finite(line.get_transform().transform(_finite(line.get_xydata())))
            if len(xy) < 2:
                continue
            key = tuple(map(float, np.round(xy).ravel()))  # the same pixels: one line hides the other
            if key in seen:
                out.append(f"axes {i}: {_label(line)!r} lies exactly on {seen[key]!r}")
            else:
                seen[key] = _label(line)
    return out


SIZE_LIMIT_PX = (1600, 1400)
"""The largest a saved figure may be (width, height at its dpi, as saved with bbox_inches='tight'): a wider figure
is read by scrolling."""
TITLE_LIMIT = 110
"""The longest line of a figure's title (characters): a finding with numbers belongs in the findings files."""


def too_large(fig) -> list[str]:
    """The figure's saved size (tight bounding box) beyond SIZE_LIMIT_PX, and a title line beyond TITLE_LIMIT."""
    fig.canvas.draw()
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    dpi = float(fig.savefig_dpi if hasattr(fig, "savefig_dpi") else fig.dpi)
    import matplotlib

    dpi = float(matplotlib.rcParams["savefig.dpi"]) if matplotlib.rcParams["savefig.dpi"] != "figure" else fig.dpi
    w, h = box.width * dpi, box.height * dpi
    out = [f"saved size {w:.0f} x {h:.0f} px beyond {SIZE_LIMIT_PX[0]} x {SIZE_LIMIT_PX[1]}"] if (
        w > SIZE_LIMIT_PX[0] or h > SIZE_LIMIT_PX[1]) else []
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    out += [f"title line of {len(line)} characters (at most {TITLE_LIMIT}): {line!r}"
            for line in title.splitlines() if len(line) > TITLE_LIMIT]
    return out


def problems(fig) -> list[str]:
    """Every check of this module: hidden points, overlapping labels, labels over points, coincident series, size."""
    return hidden_points(fig) + overlapping_labels(fig) + labels_over_points(fig) + coincident_series(fig) + too_large(fig)
