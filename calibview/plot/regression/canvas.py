"""The window's regression calibration-sharpness diagram: the kernel estimate of E[Y | mean = v] against the
prediction v with the diagonal, the band of -+ the residual's conditional standard deviation, and below it,
sharing the x axis, the density strip of the predictions (:class:`RegressionCanvas`).

The numbers come from :func:`calibview.core.regression.views.diagram`; this module draws them. The diagram
depends on the predictive mean and the targets alone, which no recalibrator changes, so one curve stands for
every recalibrator of a run. A bandwidth change redraws the items in place; each (result, bandwidth) curve is
computed once (:meth:`RegressionCanvas.set_bandwidth` reads it from a small cache after that). Exports go
through :func:`calibview.plot.export.write_view` (PNG at a DPI, vector PDF and SVG, atomic).
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
from calibview.plot.spec import FigureOptions
from calibview.plot.theme import THEMES, qcolor

__all__ = ["RegressionCanvas", "BAND_TEXT"]

CURVE = PALETTE[0]
#: the legend's words for the band: a spread of the targets, not the curve's uncertainty
BAND_TEXT = "± conditional SD of the residual (spread, not a CI)"
CACHE_SIZE = 64
#: why the export dialog's grid and confidence-band options do not apply here
NO_GRID = ("One diagram stands for every recalibrator: they leave the predictive mean, and so this curve, "
           "unchanged.")
NO_CI = "The regression diagram has no confidence band of its curve; its band is the residual's spread."


class RegressionCanvas(QtWidgets.QWidget):
    """The diagram of one regression run at a bandwidth in the target's units (set_result, set_bandwidth)."""

    #: the export dialog's layouts that apply (the grid does not: see NO_GRID)
    layouts = ("overlay",)
    disabled_options = {"layout": NO_GRID, "ci_band": NO_CI}
    band_label = "± conditional SD band"

    def __init__(self, parent: Optional[QtWidgets.QWidget] = None, *, theme: str = "light",
                 font_pt: Optional[float] = None, line_width: float = 2.0) -> None:
        super().__init__(parent)
        self._theme = THEMES[theme]
        self._result = None
        self._bandwidth = 1.0
        self._bands = True
        self._title = ""
        self._font_pt = font_pt
        self._line_width = float(line_width)
        self._cache: OrderedDict = OrderedDict()
        self.computed = 0                      # curves computed (a cache miss each)
        self._view = pg.GraphicsLayoutWidget()
        self._view.setMinimumSize(320, 260)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self._view)
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
    def set_result(self, result, bandwidth: float, *, title: str = "") -> None:
        """Draw ``result`` (a :class:`calibview.core.regression.evaluate.RegResult`) at ``bandwidth`` (> 0, target
        units); None clears the diagram. The axes span the predictions and the bulk of the targets."""
        self._result, self._title = result, title
        self._bandwidth = float(bandwidth)
        if result is None:
            self._curve.setData(x=np.zeros(0), y=np.zeros(0))
            self._diagonal.item.setData(x=np.zeros(0), y=np.zeros(0))
            self._band.set([], [], [])
            self._density.set([], [])
        else:
            v, y = np.asarray(result.predictive.mean), np.asarray(result.targets)
            lo = float(min(v.min(), np.percentile(y, 1)))
            hi = float(max(v.max(), np.percentile(y, 99)))
            pad = 0.04 * (hi - lo or 1.0)
            self._diagonal.set(lo - pad, hi + pad)
            self._top.setXRange(float(v.min()) - pad, float(v.max()) + pad, padding=0)
            self._top.setYRange(lo - pad, hi + pad, padding=0)
            self._draw()
        self._update_title()
        self._update_legend()

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
        self._update_title()
        self._update_legend()

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

    layout_mode = "overlay"
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
        options = options or FigureOptions()
        path = Path(path)
        fmts = list(formats) or [path.suffix.lstrip(".").lower() or "png"]
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
        """The diagram rendered at ``scale`` x its size."""
        return render_png.widget_image(self, self._view, self._theme.background, scale)

    def export_png(self, path, scale: float = 2.0) -> None:
        """The diagram as on screen, a PNG of ``scale`` x its size (atomic)."""
        render_png.write_png(self.image(scale), path)

    def export_svg(self, path) -> None:
        """The diagram as on screen, as SVG (atomic)."""
        render_png.write_svg(self, self._view, path)

    # ---------------------------------------------------------------------------------------------- internals
    def curve(self, result, bandwidth: float):
        """The core's RegressionCurve of ``result`` at ``bandwidth``, computed once per (result, bandwidth)."""
        from calibview.core.regression import views

        key = (id(result), float(bandwidth))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is result:
            self._cache.move_to_end(key)
            return hit[1]
        rc = views.diagram(result, float(bandwidth))
        self.computed += 1
        self._cache[key] = (result, rc)          # the result kept with its curve: its id is never reused
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return rc

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
