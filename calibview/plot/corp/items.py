"""The drawn items of one CORP curve (core.stats.corp.curves.CorpCurve) on an accuracy plot: the PAV step function
in its calibrator's colour, its consistency band as a light grey fill (where the curve of a calibrated forecast
would lie, 90 % pointwise: grey, so that it never reads as the calibrator's coloured sharpness band), and
optionally its bootstrap band as two dotted lines in the calibrator's colour.

They hang off a ``curve_items.Series`` (``Series.attach_corp``), which shows, hides, restyles and removes them with
its own items; nothing here depends on the bandwidth, so a slider move never touches them. Data are set once.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from calibview.plot.curve_items import AreaItem, _area_path, band_alpha_scale
from calibview.plot.theme import Theme, qcolor, themed_color

__all__ = ["CorpItems", "attach_corp", "corp_note", "CONS_ALPHA"]

#: opacity (of 255) of one consistency band's fill; several stacked (all lie near the diagonal) share
#: curve_items.band_alpha_scale of it, so that the stack stays about as light as three
CONS_ALPHA = 46


class CorpItems:
    """The step curve, consistency band and (``bootstrap``) bootstrap band of ``curve`` on plot ``top``."""

    def __init__(self, curve, top: pg.PlotItem, *, bootstrap: bool = False) -> None:
        self.curve = curve
        self.bootstrap = bool(bootstrap) and curve.boot_lo is not None
        self.alpha_scale = 1.0
        self.step = pg.PlotCurveItem(antialias=True)
        self.step.setZValue(14)                 # over the kernel curves: the steps are thin
        xs, ys = curve.stairs()
        self.step.setData(x=xs, y=ys)
        self.cons = AreaItem()
        self.cons.setZValue(-12)                # under the sharpness bands' outlines
        self.boot = [pg.PlotCurveItem(antialias=True, connect="finite") for _ in range(2)]
        if curve.cons_lo is not None:
            ok = np.isfinite(curve.cons_lo) & np.isfinite(curve.cons_hi)
            self.cons.setPath(_area_path(curve.grid, np.where(ok, curve.cons_lo, 0.0),
                                         np.where(ok, curve.cons_hi, 0.0), ok))
        if self.bootstrap:
            for item, y in zip(self.boot, (curve.boot_lo, curve.boot_hi)):
                item.setData(x=curve.grid, y=y)
        self.items = [self.cons, self.step] + (self.boot if self.bootstrap else [])
        for item in self.items:
            top.addItem(item, ignoreBounds=True)

    @property
    def has_band(self) -> bool:
        """Whether the consistency band is drawn (computed)."""
        return self.curve.cons_lo is not None

    def remove(self, top: pg.PlotItem) -> None:
        """Take the items off ``top``."""
        for item in self.items:
            top.removeItem(item)

    def set_visible(self, on: bool) -> None:
        """Show or hide every item."""
        for item in self.items:
            item.setVisible(on)

    @property
    def visible(self) -> bool:
        """Whether the items are shown."""
        return self.step.isVisible()

    def apply_theme(self, theme: Theme, color: str, width: float) -> None:
        """Pens and fill in ``theme`` for a calibrator drawn in ``color`` with a kernel curve ``width`` px wide."""
        c = themed_color(color, theme.name)
        pen = pg.mkPen(c, width=max(1.0, 0.7 * width))
        pen.setJoinStyle(QtCore.Qt.PenJoinStyle.MiterJoin)     # square corners: a step function
        self.step.setPen(pen)
        self.cons.setPen(pg.mkPen(None))
        self.cons.setBrush(QtGui.QBrush(qcolor(theme.muted, round(CONS_ALPHA * self.alpha_scale))))
        for item in self.boot:
            item.setPen(pg.mkPen(qcolor(c, 210), width=1, style=QtCore.Qt.PenStyle.DotLine))


def attach_corp(series, top: pg.PlotItem, curves, bootstrap: bool) -> tuple:
    """Hang the CORP curve of each of ``series`` (curve_items.Series on plot ``top``) off it: ``curves`` name ->
    CorpCurve (a series without one gets none); returns (curves as a dict, bootstrap) as drawn."""
    curves = dict(curves or {})
    scale = band_alpha_scale(sum(1 for s in series if s.name in curves))
    for s in series:
        c = curves.get(s.name)
        items = None if c is None else CorpItems(c, top, bootstrap=bootstrap)
        if items is not None:
            items.alpha_scale = scale
        s.attach_corp(items, top)
    return curves, bool(bootstrap)


def corp_note(series) -> str:
    """The legend's line on what the CORP items of the shown ``series`` (curve_items.Series) mean ("" when none is
    drawn)."""
    drawn = [s.corp_items for s in series if getattr(s, "corp_items", None) is not None and s.corp_items.visible]
    if not drawn:
        return ""
    note = "steps: CORP"
    if any(c.has_band for c in drawn):
        note += ", grey: 90 % consistency band"
    if any(c.bootstrap for c in drawn):
        note += ", dotted: bootstrap band"
    return note
