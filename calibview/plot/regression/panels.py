"""The window's "Coverage · PIT · quantiles" panels of a regression run, one colour per recalibrator: the
interval-coverage curve (observed against nominal coverage of the central intervals) with its pointwise
bootstrap band, the PIT histogram (as steps, one per recalibrator) with the band a uniform PIT stays in, and
the quantile calibration curve. Numbers from :mod:`calibview.core.regression.views`; this module draws."""

from __future__ import annotations

import html
from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6 import QtWidgets

from calibview.plot.palette import assign_colors
from calibview.plot.regression import items
from calibview.plot.theme import THEMES, qcolor, themed_color

__all__ = ["CoveragePanels"]

PIT_BINS = 20


class CoveragePanels(QtWidgets.QWidget):
    """Three plots side by side of the results of one regression evaluation (:meth:`set_evaluation`)."""

    def __init__(self, parent: Optional[QtWidgets.QWidget] = None, *, theme: str = "light") -> None:
        super().__init__(parent)
        self._theme = THEMES[theme]
        self._view = pg.GraphicsLayoutWidget()
        self._view.setMinimumSize(300, 160)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self._view)
        ci = self._view.ci
        # the legend: one line of coloured names over the panels (a legend box would cover a short dock's plot)
        self._key = ci.addLabel("", row=0, col=0, colspan=3)
        self.coverage = ci.addPlot(row=1, col=0)
        self.pit = ci.addPlot(row=1, col=1)
        self.quantile = ci.addPlot(row=1, col=2)
        self._data: dict[str, dict] = {}
        self._level = 0.95
        self._evaluation = None
        self.set_theme(theme)

    def set_evaluation(self, evaluation) -> None:
        """Draw every recalibrator of ``evaluation`` (a RegEvaluation; None clears)."""
        from calibview.core.regression import views

        self._evaluation = evaluation
        for plot in (self.coverage, self.pit, self.quantile):
            plot.clear()
        self._key.setText("")
        self._data = {}
        self._style()
        if evaluation is None:
            return
        self._level = level = float(evaluation.request.level)
        results: Sequence = evaluation.results
        colors = assign_colors(r.name for r in results)
        self._key.setText("&nbsp;&nbsp;&nbsp;".join(
            f"<span style='color:{themed_color(colors[r.name], self._theme.name)}'>━━ {html.escape(r.name)}</span>"
            for r in results), size="9pt")
        for plot in (self.coverage, self.quantile):
            items.Diagonal(plot, self._theme, 0.0, 1.0)
        pit0 = views.pit_histogram(results[0], bins=PIT_BINS, level=level) if results else None
        if pit0 is not None:
            self.pit.addItem(pg.LinearRegionItem(values=(pit0.band_lo, pit0.band_hi), orientation="horizontal",
                                                 movable=False, pen=pg.mkPen(None),
                                                 brush=pg.mkBrush(qcolor(self._theme.grid, 40))))
            self.pit.addItem(pg.InfiniteLine(pos=1.0, angle=0, pen=pg.mkPen(self._theme.diagonal, width=1)))
        top = pit0.band_hi if pit0 is not None else 1.0
        for r in results:
            color = themed_color(colors[r.name], self._theme.name)
            nominal, observed, lo, hi = views.coverage_curve(r)
            items.Band(self.coverage, color, 45).set(nominal, lo, hi)
            self.coverage.addItem(pg.PlotDataItem(nominal, observed, pen=pg.mkPen(color, width=2)))
            hist = views.pit_histogram(r, bins=PIT_BINS, level=level)
            self.pit.addItem(pg.PlotDataItem(hist.edges, hist.density, stepMode="center",
                                             pen=pg.mkPen(color, width=2)))
            top = max(top, float(np.max(hist.density)))
            levels, frac = views.quantile_curve(r)
            self.quantile.addItem(pg.PlotDataItem(levels, frac, pen=pg.mkPen(color, width=2), symbol="o",
                                                  symbolSize=4, symbolBrush=color, symbolPen=None))
            self._data[r.name] = {"coverage": (nominal, observed, lo, hi), "pit": hist, "quantile": (levels, frac)}
        for plot in (self.coverage, self.quantile):
            plot.setRange(xRange=(0, 1), yRange=(0, 1), padding=0.02)
        self.pit.setXRange(0, 1, padding=0.02)
        self.pit.setYRange(0, top * 1.1, padding=0)

    def key_text(self) -> str:
        """The line of coloured recalibrator names over the panels (HTML)."""
        return self._key.text

    def data(self) -> dict[str, dict]:
        """Recalibrator name -> {"coverage": (nominal, observed, lo, hi), "pit": PitHistogram, "quantile":
        (levels, observed)}, as drawn."""
        return dict(self._data)

    def set_theme(self, name: str) -> None:
        """Redraw in theme ``name``."""
        self._theme = THEMES[name]
        self._view.setBackground(self._theme.background)
        self.set_evaluation(self._evaluation)

    def _style(self) -> None:
        t, pct = self._theme, f"{100 * self._level:g} %"
        items.style(self.coverage, t, f"interval coverage (band: {pct} bootstrap)", "nominal coverage",
                    "observed coverage")
        items.style(self.pit, t, f"PIT histogram (shaded: {pct} band of a uniform PIT)", "PIT", "density")
        items.style(self.quantile, t, "quantile calibration", "quantile level", "fraction of targets below")
