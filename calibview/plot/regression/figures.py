"""regression.png of ``calibview report`` for a regression run: one row per recalibrator with

- the regression calibration-sharpness diagram: the kernel estimate of E[Y | mean = v] against the prediction v,
  the diagonal, the band of -+ the residual's conditional standard deviation (not a confidence interval), and the
  density of the predictions below;
- the interval-coverage curve: the observed coverage of each central interval against its nominal level, with its
  pointwise bootstrap band;
- the PIT histogram with the band a uniform PIT stays in (binomial, at the request's level);
- the quantile calibration curve: the fraction of targets at or below each predicted quantile against its level.

Everything numeric comes from :mod:`calibview.core.regression.views`; drawn offscreen with pyqtgraph
(:func:`calibview.plot.render_png.layout_png`) like diagram.png.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore

from calibview.plot.palette import NEUTRAL, PALETTE
from calibview.plot.regression import items
from calibview.plot.render_png import layout_png, offscreen_layout
from calibview.plot.theme import qcolor

__all__ = ["regression_figure", "regression_png"]

#: rows at most (one per recalibrator)
MAX_ROWS = 6
CURVE, DIAGONAL = PALETTE[0], "#555555"
BAND_ALPHA, UNIFORM_ALPHA = 60, 50            # of 255: the bands under the curves


def _style(plot: pg.PlotItem, title: str, x: str, y: str) -> None:
    items.style(plot, "light", title, x, y)


def _diagonal(plot: pg.PlotItem, lo: float, hi: float) -> None:
    items.Diagonal(plot, "light", lo, hi).item.setPen(pg.mkPen(DIAGONAL, width=1, style=QtCore.Qt.PenStyle.DashLine))


def _band(plot: pg.PlotItem, x, lo, hi) -> None:
    items.Band(plot, CURVE, BAND_ALPHA).set(x, lo, hi)


def _row(win, i: int, result, bandwidth: float, level: float, name: str) -> None:
    from calibview.core.regression import views

    rc = views.diagram(result, bandwidth)
    left = win.addLayout(row=i, col=0)
    top = left.addPlot(row=0, col=0)
    bottom = left.addPlot(row=1, col=0)
    left.layout.setRowStretchFactor(0, 4)
    left.layout.setRowStretchFactor(1, 1)
    bottom.setXLink(top)
    _style(top, f"{name}: E[Y | prediction], band ± conditional sd (h = {bandwidth:.3g})", "", "target")
    _style(bottom, "", "prediction", "density")
    ok = np.isfinite(rc.curve)
    lo, hi = (float(rc.x[ok].min()), float(rc.x[ok].max())) if ok.any() else (0.0, 1.0)
    _diagonal(top, lo, hi)
    _band(top, rc.x, rc.band_lo, rc.band_hi)
    top.addItem(pg.PlotCurveItem(x=rc.x[ok], y=rc.curve[ok], pen=pg.mkPen(CURVE, width=2)))
    items.Density(bottom, CURVE, BAND_ALPHA).set(rc.x, rc.density)
    bottom.setYRange(0, 1.1, padding=0)

    nominal, observed, olo, ohi = views.coverage_curve(result)
    cov = win.addPlot(row=i, col=1)
    _style(cov, f"interval coverage (band: {100 * level:g} % bootstrap)", "nominal coverage", "observed coverage")
    _diagonal(cov, 0.0, 1.0)
    _band(cov, np.asarray(nominal), np.asarray(olo), np.asarray(ohi))
    cov.addItem(pg.PlotCurveItem(x=nominal, y=observed, pen=pg.mkPen(CURVE, width=2)))
    cov.setRange(xRange=(0, 1), yRange=(0, 1), padding=0.02)

    pit = views.pit_histogram(result, level=level)
    hist = win.addPlot(row=i, col=2)
    _style(hist, f"PIT histogram (uniform: {100 * pit.level:g} % band)", "PIT", "density")
    centres = (pit.edges[:-1] + pit.edges[1:]) / 2
    hist.addItem(pg.LinearRegionItem(values=(pit.band_lo, pit.band_hi), orientation="horizontal", movable=False,
                                     brush=pg.mkBrush(qcolor(NEUTRAL, UNIFORM_ALPHA)), pen=pg.mkPen(None)))
    hist.addItem(pg.BarGraphItem(x=centres, height=pit.density, width=float(np.diff(pit.edges)[0]) * 0.9,
                                 brush=CURVE, pen=pg.mkPen(None)))
    hist.addItem(pg.InfiniteLine(pos=1.0, angle=0, pen=pg.mkPen(NEUTRAL, width=1)))
    hist.setXRange(0, 1, padding=0.02)
    hist.setYRange(0, max(float(np.max(pit.density)), pit.band_hi) * 1.1, padding=0)

    levels, frac = views.quantile_curve(result)
    q = win.addPlot(row=i, col=3)
    _style(q, "quantile calibration", "quantile level", "fraction of targets below")
    _diagonal(q, 0.0, 1.0)
    q.addItem(pg.PlotCurveItem(x=levels, y=frac, pen=pg.mkPen(CURVE, width=2)))
    q.addItem(pg.ScatterPlotItem(x=levels, y=frac, size=4, brush=pg.mkBrush(CURVE), pen=pg.mkPen(None)))
    q.setRange(xRange=(0, 1), yRange=(0, 1), padding=0.02)


def regression_png(evaluation, path, *, width: int = 1500, row_height: int = 300, scale: float = 2.0) -> None:
    """Draw the regression evaluation ``evaluation`` (:class:`calibview.core.regression.evaluate.RegEvaluation`):
    one row per recalibrator (at most MAX_ROWS), at its bandwidth and interval level, and write ``path``."""
    results = list(evaluation.results)[:MAX_ROWS]
    level = float(evaluation.request.level)

    def build(win) -> None:
        for i, res in enumerate(results):
            _row(win, i, res, float(evaluation.bandwidth), level, f"{evaluation.run.name} · {res.name}")

    layout_png(build, path, width, row_height * max(1, len(results)), scale=scale, what="regression figure")


#: height of one recalibrator's row of a publication figure, in units of the figure's width
ROW_ASPECT = 0.2
#: the narrowest publication figure of the regression rows, in inches
MIN_WIDTH_IN = 16.0


def regression_figure(evaluation, path, fmt: str, options) -> None:
    """The same rows as :func:`regression_png`, written as ``fmt`` ("png", "pdf" or "svg") at the figure options
    ``options`` (:class:`calibview.plot.spec.FigureOptions`: width, DPI) through the exports' writer
    (:func:`calibview.plot.export.write_view`: atomic), at least MIN_WIDTH_IN wide. Rows are drawn in the light
    theme whatever the options' theme, as in regression.png."""
    from calibview.plot.export import write_view

    from dataclasses import replace

    results = list(evaluation.results)[:MAX_ROWS]
    level = float(evaluation.request.level)
    # four panels a row with their titles need about 16 in (regression.png is 1500 px): a narrower width would push
    # the right-hand panels off the page, so the figure is never narrower than that
    options = replace(options, width_in=max(float(options.width_in), MIN_WIDTH_IN))
    with offscreen_layout() as win:
        for i, res in enumerate(results):
            _row(win, i, res, float(evaluation.bandwidth), level, f"{evaluation.run.name} · {res.name}")
        height_in = options.width_in * ROW_ASPECT * max(1, len(results))
        write_view(win, path, fmt, options, height_in, background="#FFFFFF")
