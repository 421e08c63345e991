"""The pyqtgraph pieces every regression figure draws: axes styled in a theme, the diagonal, a filled band
between two curves and a filled density strip, each made once and updated in place with ``set`` (the
window's slider redraws through them without creating items). Draws only; no numerics."""

from __future__ import annotations

from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore

from calibview.plot.theme import THEMES, Theme, qcolor

__all__ = ["style", "Diagonal", "Band", "Density"]


def style(plot: pg.PlotItem, theme: Theme | str = "light", title: str = "", x: str = "", y: str = "",
          font_pt: Optional[float] = None) -> None:
    """Title, axis labels, pens and a faint grid of ``plot`` in ``theme``; no menu, no auto-range button."""
    t = THEMES[theme] if isinstance(theme, str) else theme
    size = f"{font_pt:g}pt" if font_pt else "9pt"
    plot.setTitle(title, size=size, color=t.foreground)
    for side, text in (("bottom", x), ("left", y)):
        plot.setLabel(side, text, color=t.foreground, **({"font-size": size} if font_pt else {}))
        ax = plot.getAxis(side)
        ax.enableAutoSIPrefix(False)
        ax.setPen(pg.mkPen(t.foreground))
        ax.setTextPen(pg.mkPen(t.foreground))
    plot.showGrid(x=True, y=True, alpha=max(0.08, t.grid_alpha / 255))
    plot.setMenuEnabled(False)
    plot.hideButtons()


class Diagonal:
    """The dashed y = x line of ``plot`` between ``lo`` and ``hi`` (kept out of the auto-range)."""

    def __init__(self, plot: pg.PlotItem, theme: Theme | str = "light", lo: float = 0.0, hi: float = 1.0) -> None:
        t = THEMES[theme] if isinstance(theme, str) else theme
        self.item = pg.PlotCurveItem(pen=pg.mkPen(t.diagonal, width=1.2, style=QtCore.Qt.PenStyle.DashLine))
        self.item.setZValue(-20)
        plot.addItem(self.item, ignoreBounds=True)
        self.set(lo, hi)

    def set(self, lo: float, hi: float) -> None:
        """Span [lo, hi] on both axes."""
        self.item.setData(x=np.array([lo, hi], dtype=float), y=np.array([lo, hi], dtype=float))

    def set_theme(self, theme: Theme) -> None:
        """Redraw in ``theme``."""
        self.item.setPen(pg.mkPen(theme.diagonal, width=1.2, style=QtCore.Qt.PenStyle.DashLine))


class Band:
    """The filled region between ``lo`` and ``hi`` over ``x`` (only where both are finite), in ``color``."""

    def __init__(self, plot: pg.PlotItem, color: str, alpha: int = 60, edge_alpha: int = 0) -> None:
        edge = pg.mkPen(qcolor(color, edge_alpha), width=1) if edge_alpha else pg.mkPen(None)
        self.lo = pg.PlotCurveItem(pen=edge)
        self.hi = pg.PlotCurveItem(pen=edge)
        self.fill = pg.FillBetweenItem(self.lo, self.hi, brush=pg.mkBrush(qcolor(color, alpha)))
        for item in (self.lo, self.hi, self.fill):
            item.setZValue(-10)
            plot.addItem(item)

    def set(self, x, lo, hi) -> None:
        """Fill between (x, lo) and (x, hi) where both are finite (nothing with fewer than two such points)."""
        x, lo, hi = (np.asarray(a, dtype=float) for a in (x, lo, hi))
        ok = np.isfinite(lo) & np.isfinite(hi)
        if ok.sum() < 2:
            x, lo, hi, ok = np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool)
        self.lo.setData(x=x[ok], y=lo[ok])
        self.hi.setData(x=x[ok], y=hi[ok])

    def set_visible(self, on: bool) -> None:
        """Show or hide the band."""
        for item in (self.lo, self.hi, self.fill):
            item.setVisible(on)

    def data(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(x, lo, hi) as drawn."""
        x, lo = self.lo.getData()
        _, hi = self.hi.getData()
        return tuple(np.zeros(0) if a is None else np.asarray(a) for a in (x, lo, hi))


class Density:
    """A density strip: ``y`` over ``x`` filled down to 0, in ``color``."""

    def __init__(self, plot: pg.PlotItem, color: str, alpha: int = 60) -> None:
        self.zero = pg.PlotCurveItem(pen=pg.mkPen(None))
        self.line = pg.PlotCurveItem(pen=pg.mkPen(color, width=1))
        self.fill = pg.FillBetweenItem(self.zero, self.line, brush=pg.mkBrush(qcolor(color, alpha)))
        for item in (self.zero, self.line, self.fill):
            plot.addItem(item)

    def set(self, x, y) -> None:
        """Draw ``y`` (its NaN as 0) over ``x``."""
        x, y = np.asarray(x, dtype=float), np.nan_to_num(np.asarray(y, dtype=float))
        self.zero.setData(x=x, y=np.zeros_like(x))
        self.line.setData(x=x, y=y)
