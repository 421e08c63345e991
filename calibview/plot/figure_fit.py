"""The window's small multiples laid out for the space they have: ``FittedFigure`` holds a ``figure.FigureView`` in
a scroll area, picks its number of columns for the area's size (``fit_grid``) and, where even the best grid would
make panels shorter than ``MIN_PANEL_PX``, keeps that height and scrolls instead. After each layout ``settle``
moves a legend under its panel's plots when inside them it would cover data or not fit, and gives the density
strip its title inside the strip when the rotated axis title would run into the accuracy plot's.

Exports keep ``grid_shape`` and their physical size (export.py); they are settled the same way.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from calibview.plot.figure import FigureView

__all__ = ["MIN_PANEL_PX", "MIN_COLUMN_PX", "fit_grid", "settle", "covers_data", "FittedFigure"]

#: The smallest height of a panel's plots (the accuracy plot over its density strip, with the confidence axis),
#: in pixels: below it the curves cannot be read, and the window scrolls instead.
MIN_PANEL_PX = 160
#: The narrowest column the window lays out (an accuracy plot with its tick labels and a two-line title).
MIN_COLUMN_PX = 190
#: Plots a little wider than tall read best: a panel's "size" is min(width, ASPECT * plots height).
ASPECT = 1.25
MAX_COLUMNS = 4


def fit_grid(n: int, width: float, height: float, text_px: float, *, min_panel_px: float = MIN_PANEL_PX,
             min_column_px: float = MIN_COLUMN_PX) -> tuple[int, float, bool]:
    """(columns, plots height in px, scroll) for ``n`` panels in ``width`` x ``height`` pixels, each panel also
    taking ``text_px`` for its title and legend. Without scrolling: the columns whose panels are largest
    (min(width, ASPECT * plots height)) among those whose plots are at least ``min_panel_px`` tall. When none
    is: as many columns as stay ``min_column_px`` wide (the fewest rows to scroll), each panel's plots as tall as
    their width suggests but at least ``min_panel_px`` and at most the view's height."""
    n = max(int(n), 1)
    best: Optional[tuple[float, int, float]] = None
    for cols in range(1, min(n, MAX_COLUMNS) + 1):
        col_w = width / cols
        if cols > 1 and col_w < min_column_px:
            break
        plots = height / math.ceil(n / cols) - text_px
        size = min(col_w, ASPECT * plots)
        if plots >= min_panel_px and (best is None or size > best[0]):
            best = (size, cols, plots)
    if best is not None:
        return best[1], best[2], False
    cols = max(1, min(n, MAX_COLUMNS, int(width // min_column_px)))
    plots = max(min_panel_px, min(width / cols / ASPECT, height - text_px))
    return cols, plots, True


def _to_pixels(vb: pg.ViewBox, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """View coordinates to scene pixels of ``vb`` (an unrotated view: an affine map per axis)."""
    r, v = vb.sceneBoundingRect(), vb.viewRect()
    px = r.left() + (x - v.left()) / max(v.width(), 1e-12) * r.width()
    py = r.bottom() - (y - v.top()) / max(v.height(), 1e-12) * r.height()
    return px, py


def covers_data(panel, hidden=()) -> bool:
    """Whether the legend inside ``panel``'s accuracy plot lies over a drawn curve or band (a band counts from its
    lower to its upper edge), or does not fit inside the plot."""
    legend, vb = panel.legend, panel.top.vb
    if not legend.isVisible():
        return False
    box = legend.sceneBoundingRect().adjusted(-2, -2, 2, 2)
    frame = vb.sceneBoundingRect()
    if box.width() > frame.width() or box.height() > frame.height() or not frame.contains(box.center()):
        return True
    for s in panel.series:
        if s.name in hidden or s.sc is None or not s.curve.isVisible():
            continue
        x = s.curve.xData
        if x is None or not len(x):
            continue
        y = s.curve.yData
        lo = np.interp(x, s.sc.x, s.sc.band_lo) if s.band.isVisible() else y
        hi = np.interp(x, s.sc.x, s.sc.band_hi) if s.band.isVisible() else y
        ok = np.isfinite(y)
        px, py_lo = _to_pixels(vb, x[ok], np.minimum(lo, hi)[ok])
        _, py_hi = _to_pixels(vb, x[ok], np.maximum(lo, hi)[ok])
        inside_x = (px >= box.left()) & (px <= box.right())
        # pixel y grows downwards: the upper edge has the smaller pixel y
        if np.any(inside_x & (py_hi <= box.bottom()) & (py_lo >= box.top())):
            return True
    return False


def _density_title(panel, view: FigureView) -> None:
    """The density strip's title: rotated on its axis where the strip is taller than the title is long, else
    written inside the strip's top-left corner (rotated, it ran into the accuracy plot's: "densityaccuracy")."""
    axis = panel.bottom.getAxis("left")
    inner = getattr(panel, "density_title", None)
    fits = axis.label.boundingRect().width() + 4 <= panel.bottom.vb.height()
    if fits:
        if inner is not None:
            inner.setVisible(False)
        if not axis.label.isVisible():
            axis.showLabel(True)
        return
    if inner is None:
        inner = panel.density_title = pg.TextItem("density", anchor=(0, 0))
        inner.setParentItem(panel.bottom.vb)            # in the strip's pixels, not its data coordinates
        inner.setPos(2, -2)
        inner.setZValue(60)
    inner.setColor(view.theme.muted)
    inner.setFont(axis.label.font())
    inner.setVisible(True)
    if axis.label.isVisible():
        axis.showLabel(False)


def settle(view: FigureView) -> bool:
    """After a layout: legends that cover data go under their plots, density titles that do not fit their strip
    go inside it. Returns whether a legend moved (the layout then changes once more)."""
    moved = False
    for p in view.panels:
        if not p.legend_outside and covers_data(p, view.hidden):
            p.move_legend_below(view)
            moved = True
        if p.show_y:
            _density_title(p, view)
    return moved


class FittedFigure(QtWidgets.QScrollArea):
    """A FigureView laid out for the area it is shown in: its columns from ``fit_grid``, scrolling (vertically
    only) where the panels would otherwise be shorter than MIN_PANEL_PX, legends and axis titles settled after each
    layout. ``view``: the FigureView (the scroll area owns it)."""

    def __init__(self, view: FigureView, parent=None) -> None:
        super().__init__(parent)
        self.view = view
        # sized here (refit), never by the view's own size hints: a tall scrolled view must not grow the window
        self.setWidgetResizable(False)
        self.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        view.setMinimumSize(1, 1)
        self.setWidget(view)
        self.scrolling = False
        self._pending = False
        view.panels_changed.connect(self.refit)

    def minimumSizeHint(self) -> QtCore.QSize:  # noqa: N802 (Qt override)
        # small: it scrolls. Shown in place of the canvas, a larger minimum made the window grow past a laptop's
        # screen (the docks keep their heights)
        return QtCore.QSize(200, 60)

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 (Qt override)
        return QtCore.QSize(320, 260)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self.refit()

    def refit(self) -> None:
        """Choose the columns and the view's height for the area's size, then settle once the layout is done."""
        view = self.view
        n = len(view.specs)
        if not n:
            return
        bar = self.verticalScrollBar().sizeHint().width()
        width, height = max(1, self.width()), max(1, self.height())
        text = self._text_px()
        cols, plots, scroll = fit_grid(n, width, height, text)
        if scroll:
            cols, plots, scroll = fit_grid(n, width - bar, height, text)
        view.set_columns(cols if n > 1 else None)
        rows = math.ceil(n / view.columns)
        need = rows * (plots + self._text_px()) + 12
        self.scrolling = scroll
        full = max(1, self.width() - (bar if scroll else 0))
        view.resize(full, int(math.ceil(need)) if scroll else height)
        self._later()

    def _text_px(self) -> float:
        """What a panel needs besides its plots: its title and legend, the confidence axis, margins."""
        view = self.view
        text = max((p.text_px() for p in view.panels), default=view.font_px * 3)
        return text + view.font_px * 1.2 + 10

    def _later(self, *_):
        if not self._pending:
            self._pending = True
            QtCore.QTimer.singleShot(0, self._settle)

    def _settle(self) -> None:
        self._pending = False
        for p in self.view.panels:                 # settle again whenever a panel's plot changes size
            if not getattr(p, "fit_watched", False):
                p.top.vb.sigResized.connect(self._later)
                p.fit_watched = True
        if settle(self.view):
            self.refit()
