"""One recalibrator's row of the regression grid, as the report's regression figure and the window's grid layout
draw it (:func:`add_row`):

- the regression calibration-sharpness diagram: the kernel estimate of E[Y | mean = v] against the prediction v,
  the diagonal, the band of -+ the residual's conditional standard deviation (not a confidence interval), and the
  density of the predictions below;
- the interval-coverage curve: the observed coverage of each central interval against its nominal level, with its
  pointwise bootstrap band;
- the PIT histogram with the band a uniform PIT stays in (binomial, at the request's level);
- the quantile calibration curve: the fraction of targets at or below each predicted quantile against its level.

Only the diagram depends on the bandwidth; :meth:`Row.set_curve` redraws it in place, so a live grid follows a
slider without rebuilding its plots. The other three panels differ between recalibrators (the diagram does not:
no recalibrator changes the predictive mean). Numbers from :mod:`calibview.core.regression.views`; draws only.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import pyqtgraph as pg

from calibview.plot.palette import NEUTRAL, PALETTE
from calibview.plot.regression import items
from calibview.plot.theme import THEMES, Theme, qcolor

__all__ = ["Row", "add_row", "diagram_title", "diagram_range"]

CURVE = PALETTE[0]
BAND_ALPHA, UNIFORM_ALPHA = 60, 50            # of 255: the bands under the curves


def diagram_title(name: str, bandwidth: float, compact: bool = False) -> str:
    """The diagram panel's title: the row's name and the bandwidth (target units); ``compact`` for a narrow panel."""
    if compact:
        return f"{name}: E[Y | v], h = {bandwidth:.3g}"
    return f"{name}: E[Y | prediction], band ± conditional sd (h = {bandwidth:.3g})"


def diagram_range(result) -> tuple[float, float, float, float]:
    """(x_lo, x_hi, y_lo, y_hi) of a diagram of ``result`` (a RegResult), target units: x spans the predictions,
    y the predictions and the central 98 % of the targets, each padded by 4 % (whatever the bandwidth)."""
    v, y = np.asarray(result.predictive.mean), np.asarray(result.targets)
    lo = float(min(v.min(), np.percentile(y, 1)))
    hi = float(max(v.max(), np.percentile(y, 99)))
    pad = 0.04 * (hi - lo or 1.0)
    return float(v.min()) - pad, float(v.max()) + pad, lo - pad, hi + pad


class Row:
    """The bandwidth-dependent items of one row (the diagram's curve, band, density and title)."""

    def __init__(self, name: str, result, top: pg.PlotItem, bottom: pg.PlotItem, theme: Theme,
                 font_pt: Optional[float], compact: bool = False) -> None:
        self.name, self.result, self.top, self.bottom = name, result, top, bottom
        self._theme, self._font_pt, self._compact = theme, font_pt, compact
        x_lo, x_hi, y_lo, y_hi = diagram_range(result)
        self.diagonal = items.Diagonal(top, theme, y_lo, y_hi)
        top.setXRange(x_lo, x_hi, padding=0)
        top.setYRange(y_lo, y_hi, padding=0)
        self.band = items.Band(top, CURVE, BAND_ALPHA)
        self.curve = pg.PlotCurveItem(pen=pg.mkPen(CURVE, width=2), antialias=True)
        top.addItem(self.curve)
        self.density = items.Density(bottom, CURVE, BAND_ALPHA)
        self.coverage: Optional[pg.PlotCurveItem] = None      # the coverage panel's curve (set by add_row)

    def set_curve(self, rc, bandwidth: float) -> None:
        """Draw ``rc`` (a RegressionCurve of :func:`calibview.core.regression.views.diagram`) at ``bandwidth``."""
        ok = np.isfinite(rc.curve)
        self.band.set(rc.x, rc.band_lo, rc.band_hi)
        self.curve.setData(x=rc.x[ok], y=rc.curve[ok])
        self.density.set(rc.x, rc.density)
        size = f"{self._font_pt:g}pt" if self._font_pt else "9pt"
        self.top.setTitle(diagram_title(self.name, bandwidth, self._compact), size=size, color=self._theme.foreground)


def add_row(layout: pg.GraphicsLayout, i: int, result, bandwidth: float, level: float, name: str, *,
            theme: Theme | str = "light", font_pt: Optional[float] = None,
            curve: Optional[Callable] = None, compact: bool = False, columns: int = 4) -> Row:
    """Add row ``i`` of ``result`` (a RegResult) to ``layout`` (a pyqtgraph GraphicsLayout): the diagram at
    ``bandwidth`` (target units; ``curve(result, bandwidth)`` gives its RegressionCurve, by default computed),
    coverage with its ``level`` (0..1) band, PIT and quantile panels; ``compact``: short titles (the window's
    narrow panels); ``columns`` 4 (the four panels on one line) or 2 (two lines of two, rows 2i and 2i + 1 of the
    layout: a narrow window). Returns the row's diagram items."""
    from calibview.core.regression import views

    t = THEMES[theme] if isinstance(theme, str) else theme
    if columns not in (2, 4):
        raise ValueError(f"a regression row has 2 or 4 columns, got {columns!r}")
    cells = [(i, c) for c in range(4)] if columns == 4 else [(2 * i, 0), (2 * i, 1), (2 * i + 1, 0), (2 * i + 1, 1)]
    left = layout.addLayout(row=cells[0][0], col=cells[0][1])
    top = left.addPlot(row=0, col=0)
    bottom = left.addPlot(row=1, col=0)
    left.layout.setRowStretchFactor(0, 4)
    left.layout.setRowStretchFactor(1, 1)
    bottom.setXLink(top)
    items.style(top, t, "", "", "target", font_pt)
    items.style(bottom, t, "", "prediction", "density", font_pt)
    row = Row(name, result, top, bottom, t, font_pt, compact)
    row.set_curve((curve or views.diagram)(result, bandwidth), bandwidth)
    bottom.setYRange(0, 1.1, padding=0)
    bottom.getAxis("left").setTicks([[(0.0, "0"), (1.0, "1")]])     # a strip too short for more ticks

    nominal, observed, olo, ohi = views.coverage_curve(result)
    cov = layout.addPlot(row=cells[1][0], col=cells[1][1])
    items.style(cov, t, "interval coverage" if compact else f"interval coverage (band: {100 * level:g} % bootstrap)",
                "nominal coverage", "observed coverage", font_pt)
    items.Diagonal(cov, t, 0.0, 1.0)
    items.Band(cov, CURVE, BAND_ALPHA).set(np.asarray(nominal), np.asarray(olo), np.asarray(ohi))
    row.coverage = pg.PlotCurveItem(x=nominal, y=observed, pen=pg.mkPen(CURVE, width=2))
    cov.addItem(row.coverage)
    cov.setRange(xRange=(0, 1), yRange=(0, 1), padding=0.02)

    pit = views.pit_histogram(result, level=level)
    hist = layout.addPlot(row=cells[2][0], col=cells[2][1])
    items.style(hist, t, "PIT histogram" if compact else f"PIT histogram (uniform: {100 * pit.level:g} % band)",
                "PIT", "density", font_pt)
    centres = (pit.edges[:-1] + pit.edges[1:]) / 2
    hist.addItem(pg.LinearRegionItem(values=(pit.band_lo, pit.band_hi), orientation="horizontal", movable=False,
                                     brush=pg.mkBrush(qcolor(NEUTRAL, UNIFORM_ALPHA)), pen=pg.mkPen(None)))
    hist.addItem(pg.BarGraphItem(x=centres, height=pit.density, width=float(np.diff(pit.edges)[0]) * 0.9,
                                 brush=CURVE, pen=pg.mkPen(None)))
    hist.addItem(pg.InfiniteLine(pos=1.0, angle=0, pen=pg.mkPen(t.muted, width=1)))
    hist.setXRange(0, 1, padding=0.02)
    hist.setYRange(0, max(float(np.max(pit.density)), pit.band_hi) * 1.1, padding=0)

    levels, frac = views.quantile_curve(result)
    q = layout.addPlot(row=cells[3][0], col=cells[3][1])
    items.style(q, t, "quantile calibration", "quantile level", "fraction below" if compact else
                "fraction of targets below", font_pt)
    items.Diagonal(q, t, 0.0, 1.0)
    q.addItem(pg.PlotCurveItem(x=levels, y=frac, pen=pg.mkPen(CURVE, width=2)))
    q.addItem(pg.ScatterPlotItem(x=levels, y=frac, size=4, brush=pg.mkBrush(CURVE), pen=pg.mkPen(None)))
    q.setRange(xRange=(0, 1), yRange=(0, 1), padding=0.02)
    grid = layout.ci.layout if hasattr(layout, "ci") else layout.layout
    for col, share in enumerate((3, 2, 2, 2) if columns == 4 else (1, 1)):   # the diagram a little wider
        grid.setColumnStretchFactor(col, share)
    return row
