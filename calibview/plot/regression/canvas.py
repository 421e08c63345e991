"""The window's regression calibration-sharpness diagram: the kernel estimate of E[Y | mean = v] against the
prediction v with the diagonal, the band of -+ the residual's conditional standard deviation, and below it,
sharing the x axis, the density strip of the predictions (:class:`RegressionCanvas`).

The numbers come from :func:`calibview.core.regression.views.diagram`; this module draws them. The diagram
depends on the predictive mean and the targets alone, which no recalibrator changes, so one curve stands for
every recalibrator of a run. A bandwidth change redraws the items in place; each (result, bandwidth) curve is
computed once (:meth:`RegressionCanvas.set_bandwidth` reads it from a small cache after that).

The grid layout (:meth:`RegressionCanvas.set_layout`) shows a row per recalibrator instead, as the report's
regression figure does: the diagram beside the interval coverage, the PIT histogram and the quantile calibration
curve, which do differ between recalibrators (:mod:`calibview.plot.regression.rows`); the slider redraws its
diagrams in place from the same cache. Exports go through :func:`calibview.plot.export.write_view` (PNG at a DPI,
vector PDF and SVG, atomic), the grid's through :func:`calibview.plot.regression.figures.regression_figure`.
"""

from __future__ import annotations

import html
from collections import OrderedDict
from pathlib import Path
from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from calibview.plot import render_png
from calibview.plot.export import write_view
from calibview.plot.export_dialog import ExportDialog
from calibview.plot.palette import PALETTE
from calibview.plot.regression import items
from calibview.plot.regression.figures import MAX_ROWS, MIN_WIDTH_IN, regression_figure
from calibview.plot.regression.rows import add_row, diagram_range
from calibview.plot.spec import FigureOptions
from calibview.plot.theme import THEMES, qcolor

__all__ = ["RegressionCanvas", "BAND_TEXT"]

CURVE = PALETTE[0]
#: the legend's words for the band: a spread of the targets, not the curve's uncertainty
BAND_TEXT = "± conditional SD of the residual (spread, not a CI)"
CACHE_SIZE = 64
#: the least height of a grid row in the window, in pixels (a diagram, its density strip and three panels)
GRID_ROW_PX = 250
#: the least width of the window's grid for four panels a line (narrower: two lines of two a recalibrator)
GRID_FOUR_PX = 960
#: why the export dialog's confidence-band option does not apply here
NO_CI = "The regression diagram has no confidence band of its curve; its band is the residual's spread."


class RegressionCanvas(QtWidgets.QWidget):
    """The diagram of one regression run at a bandwidth in the target's units (set_result, set_bandwidth)."""

    #: the export dialog's layouts: the one diagram, or a row per recalibrator
    layouts = ("overlay", "grid")
    disabled_options = {"ci_band": NO_CI}
    band_label = "± conditional SD band"
    grid_label = "Grid (a row per recalibrator: diagram, coverage, PIT, quantiles)"
    #: the narrowest grid figure, which the export dialog shows
    grid_min_width_in = MIN_WIDTH_IN

    def __init__(self, parent: Optional[QtWidgets.QWidget] = None, *, theme: str = "light",
                 font_pt: Optional[float] = None, line_width: float = 2.0) -> None:
        super().__init__(parent)
        self._theme = THEMES[theme]
        self._result = None
        self._evaluation = None                # the grid's rows: every result of this evaluation
        self._layout = "overlay"
        self._rows: list = []                  # the grid's rows as drawn (calibview.plot.regression.rows.Row)
        self._grid_key = None                  # (evaluation, theme, font, columns) the grid was built for
        self._bandwidth = 1.0
        self._bands = True
        self._title = ""
        self._font_pt = font_pt
        self._line_width = float(line_width)
        self._cache: OrderedDict = OrderedDict()
        self.computed = 0                      # curves computed (a cache miss each)
        self._view = pg.GraphicsLayoutWidget()
        self._view.setMinimumSize(320, 260)
        self._grid = pg.GraphicsLayoutWidget()
        # a row of four panels needs some height to be read: the grid scrolls rather than squash its rows
        self._grid_scroll = QtWidgets.QScrollArea()
        self._grid_scroll.setWidgetResizable(True)
        self._grid_scroll.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self._grid_scroll.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._grid_scroll.setWidget(self._grid)
        self._stack = QtWidgets.QStackedWidget()
        self._stack.addWidget(self._view)
        self._stack.addWidget(self._grid_scroll)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self._stack)
        ci = self._view.ci
        ci.setContentsMargins(8, 6, 14, 6)
        self._title_item = ci.addLabel("", row=0, col=0)
        self._top = ci.addPlot(row=1, col=0)
        self._bottom = ci.addPlot(row=2, col=0)
        ci.layout.setRowStretchFactor(1, 4)
        ci.layout.setRowStretchFactor(2, 1)
        self._bottom.setXLink(self._top)
        self._bottom.setYRange(0, 1.1, padding=0)
        self._bottom.getAxis("left").setTicks([[(0.0, "0"), (1.0, "1")]])
        self._diagonal = items.Diagonal(self._top, self._theme)
        self._band = items.Band(self._top, CURVE, 50, 110)
        self._curve = pg.PlotCurveItem(pen=pg.mkPen(CURVE, width=self._line_width), antialias=True)
        self._top.addItem(self._curve)
        self._density = items.Density(self._bottom, CURVE, 60)
        # bottom right: a calibrated curve runs from bottom left to top right, which leaves that corner free
        self._legend = pg.LegendItem(offset=(-8, -8), labelTextSize=f"{font_pt:g}pt" if font_pt else "8pt")
        self._legend.setParentItem(self._top.vb)
        # samples for the legend (pyqtgraph draws a sample from an item's opts; a fill between two curves has none)
        self._band_sample = pg.PlotDataItem(pen=pg.mkPen(qcolor(CURVE, 110)), fillLevel=0,
                                            fillBrush=pg.mkBrush(qcolor(CURVE, 50)))
        self._diagonal_sample = pg.PlotDataItem()
        self.set_theme(theme)

    # ------------------------------------------------------------------------------------------------ public API
    def set_result(self, result, bandwidth: float, *, title: str = "", evaluation=None) -> None:
        """Draw ``result`` (a :class:`calibview.core.regression.evaluate.RegResult`) at ``bandwidth`` (> 0, target
        units); None clears the diagram. The axes span the predictions and the bulk of the targets.
        ``evaluation`` (the RegEvaluation ``result`` belongs to) gives the grid layout its rows."""
        self._result, self._title = result, title
        self._evaluation = evaluation if result is not None else None
        self._bandwidth = float(bandwidth)
        if result is None:
            self._curve.setData(x=np.zeros(0), y=np.zeros(0))
            self._diagonal.item.setData(x=np.zeros(0), y=np.zeros(0))
            self._band.set([], [], [])
            self._density.set([], [])
        else:
            x_lo, x_hi, y_lo, y_hi = diagram_range(result)
            self._diagonal.set(y_lo, y_hi)
            self._top.setXRange(x_lo, x_hi, padding=0)
            self._top.setYRange(y_lo, y_hi, padding=0)
            self._draw()
        self._update_title()
        self._update_legend()
        self._sync_grid()

    def set_bandwidth(self, bandwidth: float) -> None:
        """Redraw at ``bandwidth`` (> 0, target units): one cached curve, the items updated in place."""
        h = float(bandwidth)
        if not (np.isfinite(h) and h > 0):
            raise ValueError(f"the bandwidth must be a positive number in the target's units, got {bandwidth!r}")
        if h == self._bandwidth:
            return
        self._bandwidth = h
        if self._result is not None:
            self._draw()
        for row in self._rows:
            row.set_curve(self.curve(row.result, h), h)
        self._update_title()
        self._update_legend()

    def set_layout(self, layout: str) -> None:
        """"overlay" (the one diagram) or "grid" (a row per recalibrator of the evaluation)."""
        if layout not in self.layouts:
            raise ValueError(f"the layout must be one of {', '.join(self.layouts)}, got {layout!r}")
        self._layout = layout
        self._sync_grid()
        self._stack.setCurrentWidget(self._grid_scroll if layout == "grid" else self._view)

    @property
    def layout_mode(self) -> str:
        """"overlay" or "grid"."""
        return self._layout

    @property
    def grid_rows(self) -> list:
        """The grid's rows as drawn (empty unless the grid layout shows an evaluation)."""
        return list(self._rows)

    def set_bands(self, on: bool) -> None:
        """The conditional-SD band on or off."""
        self._bands = bool(on)
        self._band.set_visible(self._bands)
        self._update_legend()

    def set_theme(self, name: str) -> None:
        """Redraw in theme ``name`` ("light" or "dark")."""
        t = self._theme = THEMES[name]
        self._view.setBackground(t.background)
        items.style(self._top, t, "", "", "target", self._font_pt)
        items.style(self._bottom, t, "", "prediction (predictive mean)", "density", self._font_pt)
        self._diagonal.set_theme(t)
        self._grid.setBackground(t.background)
        self._sync_grid()
        self._diagonal_sample.setPen(self._diagonal.item.opts["pen"])
        self._legend.setBrush(pg.mkBrush(qcolor(t.legend_fill, t.legend_alpha)))
        self._legend.setPen(pg.mkPen(t.legend_border))
        self._legend.setLabelTextColor(t.foreground)
        self._update_title()
        self._update_legend()

    @property
    def bandwidth(self) -> float:
        """The bandwidth drawn, in the target's units."""
        return self._bandwidth

    @property
    def title(self) -> str:
        """The diagram's title (also an exported figure's)."""
        return self._title

    @property
    def theme(self) -> str:
        """The theme's name."""
        return self._theme.name

    @property
    def bands_on(self) -> bool:
        """Whether the conditional-SD band is drawn."""
        return self._bands

    ci_on = False

    def drawn_curve(self) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of the curve as handed to its item (finite points only)."""
        x, y = self._curve.getData()
        return (np.zeros(0) if x is None else np.asarray(x)), (np.zeros(0) if y is None else np.asarray(y))

    def drawn_band(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(x, lo, hi) of the band as drawn."""
        return self._band.data()

    def legend_text(self) -> list[str]:
        """The legend's entries, in order."""
        return [label.text for _, label in self._legend.items]

    # ------------------------------------------------------------------------------------------------ exports
    def export_figure(self, path, options: Optional[FigureOptions] = None, formats=()) -> list[Path]:
        """The diagram as a publication figure: the options' width, DPI, font, line width, theme and bands, at
        the current bandwidth; ``path``'s suffix (or each of ``formats``) the format. Returns the paths written."""
        render_png.ensure_app()
        options = options or FigureOptions(layout=self._layout)
        path = Path(path)
        fmts = list(formats) or [path.suffix.lstrip(".").lower() or "png"]
        if options.layout == "grid" and self._evaluation is not None:
            return [regression_figure(self._evaluation, path.with_suffix("." + fmt), fmt, options,
                                      bandwidth=self._bandwidth, curve=self.curve) for fmt in fmts]
        height_in = options.height_in or round(options.width_in * 0.72, 3)
        fig = RegressionCanvas(theme=options.theme, font_pt=options.font_pt, line_width=options.line_width_pt * 1.6)
        out = []
        try:
            fig._view.setMinimumSize(1, 1)
            fig.set_bands(options.bands)
            fig.set_result(self._result, self._bandwidth, title=options.title or self._title)
            for fmt in fmts:
                out.append(write_view(fig._view, path.with_suffix("." + fmt), fmt, options, height_in))
        finally:
            fig.hide()
            fig.deleteLater()
            QtWidgets.QApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)
        return out

    def open_export_dialog(self) -> None:
        """The Export… dialog (the window's publication export)."""
        ExportDialog(self, self).exec()

    def image(self, scale: float = 2.0) -> QtGui.QImage:
        """The diagram (or the grid) rendered at ``scale`` x its size."""
        return render_png.widget_image(self, self._shown_view(), self._theme.background, scale)

    def export_png(self, path, scale: float = 2.0) -> None:
        """The diagram as on screen, a PNG of ``scale`` x its size (atomic)."""
        render_png.write_png(self.image(scale), path)

    def export_svg(self, path) -> None:
        """The diagram as on screen, as SVG (atomic)."""
        render_png.write_svg(self, self._shown_view(), path)

    def _shown_view(self) -> pg.GraphicsLayoutWidget:
        return self._grid if self._layout == "grid" else self._view

    # ---------------------------------------------------------------------------------------------- internals
    def curve(self, result, bandwidth: float):
        """The core's RegressionCurve of ``result`` at ``bandwidth``, computed once per (predictive mean, targets,
        bandwidth): the recalibrators of a run share their mean and targets, so the grid's rows share one curve."""
        from calibview.core.regression import views

        mean, targets = result.predictive.mean, result.targets
        key = (id(mean), id(targets), float(bandwidth))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is mean and hit[1] is targets:
            self._cache.move_to_end(key)
            return hit[2]
        rc = views.diagram(result, float(bandwidth))
        self.computed += 1
        self._cache[key] = (mean, targets, rc)    # the arrays kept with their curve: their ids are never reused
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return rc

    def _sync_grid(self) -> None:
        """Build the grid's rows for the evaluation and theme shown, once each (only in the grid layout)."""
        ev = self._evaluation
        if self._layout != "grid" or ev is None:
            if ev is None and self._rows:
                self._grid.ci.clear()
                self._rows, self._grid_key = [], None
            return
        key = (self._theme.name, self._font_pt, self._grid_columns())
        if self._grid_key is not None and self._grid_key[0] is ev and self._grid_key[1:] == key:
            return
        self._grid.ci.clear()
        # the run is in the window's title bar and the browser: a row is named by its recalibrator, so that its
        # narrow panels keep their width for the plots
        self._rows = [add_row(self._grid.ci, i, res, self._bandwidth, float(ev.request.level), res.name,
                              theme=self._theme, font_pt=self._font_pt, curve=self.curve, compact=True,
                              columns=key[2])
                      for i, res in enumerate(list(ev.results)[:MAX_ROWS])]
        self._grid.setMinimumHeight(GRID_ROW_PX * len(self._rows) * (4 // key[2]))
        self._grid_key = (ev, *key)

    def _grid_columns(self) -> int:
        """4 panels a line where the grid is wide enough for them to be read, else 2 (two lines a recalibrator)."""
        return 4 if self._grid_scroll.viewport().width() >= GRID_FOUR_PX else 2

    def resizeEvent(self, event) -> None:          # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._sync_grid()                          # rebuilt only when the number of columns changes

    def _draw(self) -> None:
        rc = self.curve(self._result, self._bandwidth)
        ok = np.isfinite(rc.curve)
        self._curve.setData(x=rc.x[ok], y=rc.curve[ok])
        self._band.set(rc.x, rc.band_lo, rc.band_hi)
        self._density.set(rc.x, rc.density)

    def _update_title(self) -> None:
        t = self._theme
        sub = f"Gaussian kernel, h = {self._bandwidth:.4g}" if self._result is not None else \
            "no regression evaluation yet"
        head = f"<b>{html.escape(self._title)}</b>&nbsp;&nbsp;&nbsp;" if self._title else ""
        size = f"{self._font_pt + 1:g}pt" if self._font_pt else "10pt"
        self._title_item.setText(f"<span style='color:{t.foreground}'>{head}</span>"
                                 f"<span style='color:{t.muted}'>{html.escape(sub)}</span>", size=size)
        self._title_item.setMinimumWidth(0)

    def _update_legend(self) -> None:
        self._legend.clear()
        if self._result is None:
            self._legend.hide()
            return
        self._legend.addItem(self._curve, f"E[Y | prediction v], h = {self._bandwidth:.3g}")
        if self._bands:
            self._legend.addItem(self._band_sample, BAND_TEXT)
        self._legend.addItem(self._diagonal_sample, "diagonal: calibrated (E[Y | v] = v)")
        self._legend.show()
