"""The calibration-sharpness canvas: kernel curve, sharpness band, diagonal and density strip (pyqtgraph).

Everything numeric comes from the core (``CalibratorResult.curve`` / ``smoothing.sharpness_curve``); this module
only draws. Items are created once per ``set_results`` and updated in place with ``setData`` afterwards, so a
bandwidth change costs one O(grid) curve per visible calibrator plus a repaint.

The curve items live in curve_items.py; the overlay's axes and legend table in overlay.py; the grid layout in
canvas_figure.py (a FigureView of figure.py); the controls above the plot in navigation.py. The canvas's
screen-resolution image, PNG and SVG go through render_png.py, its publication figures through export.py;
``render_diagram_png`` draws ``calibview report``'s diagram.png.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from calibview.plot import overlay, render_png
from calibview.plot.canvas_figure import CanvasGrid
from calibview.plot.corp.items import attach_corp
from calibview.plot.curve_items import Series as _Series, TercileLayer, band_alpha_scale, export_quality
from calibview.plot.export import render_figure
from calibview.plot.export_dialog import ExportDialog
from calibview.plot.figure import FigureView, legend_numbers
from calibview.plot.navigation import CanvasToolbar, DraggableLegend, HoverCursor, x_ticks
from calibview.plot.palette import assign_colors
from calibview.plot.spec import LAYOUTS, FigureOptions, calibrator_panels, with_corp, with_terciles
from calibview.plot.theme import THEMES, qcolor

__all__ = ["CalibrationCanvas", "render_diagram_png"]

_KERNEL_NAMES = {"gaussian": "Gaussian", "epanechnikov": "Epanechnikov"}


class CalibrationCanvas(QtWidgets.QWidget):
    """The calibration-sharpness diagram (pyqtgraph): diagonal, one kernel curve with its sharpness band per shown
    calibrator, and below it, sharing the x axis, the density strip of confidences; optional reliability bars."""

    hover_changed = QtCore.Signal(str)

    def __init__(self, parent: Optional[QtWidgets.QWidget] = None, *, theme: str = "light",
                 toolbar: bool = True) -> None:
        super().__init__(parent)
        self._layout = "overlay"
        self._bands = True
        self._ci = False                # the curves' confidence bands: off until asked for
        self._notes: list[str] = []     # the legend's notes on what the curves' styles mean
        self._band_hidden: set[str] = set()
        self._series: list[_Series] = []
        self._hidden: set[str] = set()
        self._bandwidth = 0.05
        self._kernel = "gaussian"
        self._computed_at: Optional[tuple] = None      # (bandwidth, kernel) of the results' CAL
        self._legend_stale = False
        self._compact = False
        self._show_bins = False
        self._corp: tuple = ({}, False)          # (calibrator name -> CorpCurve, bootstrap band) drawn (set_corp)
        self._title = ""
        self._readout = ""
        self._theme = THEMES[theme]

        self._view = pg.GraphicsLayoutWidget()
        self._view.setMinimumSize(320, 260)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        self.toolbar = CanvasToolbar(self)
        self._toolbar_wanted = bool(toolbar)
        self.toolbar.setVisible(toolbar)
        self.toolbar.layout_changed.connect(self.set_layout)
        self.toolbar.bands_changed.connect(lambda on: self.set_bands(on))
        self.toolbar.ci_changed.connect(self.set_ci)
        self.toolbar.item_band_changed.connect(lambda name, on: self.set_bands(on, name))
        self.toolbar.range_preset.connect(self.set_x_range)
        self.toolbar.export_requested.connect(self.open_export_dialog)
        lay.addWidget(self.toolbar)
        self._stack = QtWidgets.QStackedWidget()
        self._stack.addWidget(self._view)
        lay.addWidget(self._stack, 1)
        self._grid_layout = CanvasGrid(self._stack, self._set_readout)

        ci = self._view.ci
        ci.setContentsMargins(8, 6, 14, 6)
        ci.layout.setVerticalSpacing(2)
        self._title_item = ci.addLabel("", row=0, col=0)
        self._top = ci.addPlot(row=1, col=0)
        self._bottom = ci.addPlot(row=2, col=0)
        ci.layout.setRowStretchFactor(1, 3)
        ci.layout.setRowStretchFactor(2, 1)
        self._bottom.setXLink(self._top)
        self._grids = overlay.setup_axes(self._top, self._bottom)

        self._diagonal = pg.PlotCurveItem(x=np.array([0.0, 1.0]), y=np.array([0.0, 1.0]), antialias=True)
        self._diagonal.setZValue(-20)
        self._floor = []            # [0, 1/K): no top-label confidence lies there; shaded, nothing drawn
        for plot in (self._top, self._bottom):
            region = pg.LinearRegionItem(values=(0.0, 0.0), movable=False)
            region.setZValue(-25)
            for line in region.lines:
                line.setPen(pg.mkPen(None))
            plot.addItem(region, ignoreBounds=True)
            self._floor.append(region)
        self._top.addItem(self._diagonal, ignoreBounds=True)
        self._legend = DraggableLegend((0.015, 0.975))
        self._legend.setZValue(50)
        self._legend.reset()
        self._top.addItem(self._legend, ignoreBounds=True)
        self._terciles = TercileLayer(self._top, self._bottom)      # one calibrator's curve by epistemic tercile
        self._hover = HoverCursor((self._top, self._bottom), self._view.scene(), self._hover_text, self._set_readout)
        self._hover_lines = self._hover.lines
        self._top.sigXRangeChanged.connect(self._on_x_range_changed)
        self.set_theme(theme)

    # ------------------------------------------------------------------------------------------------ public API
    def set_results(self, results: Sequence, *, title: str = "", computed_at: Optional[tuple] = None) -> None:
        """Replace everything drawn. Names hidden with ``set_visible`` stay hidden; new names are shown.
        ``computed_at`` (bandwidth, kernel) of the results' CAL: the legend shows CAL only while the curves are
        drawn at that bandwidth and kernel (None: always)."""
        self._computed_at = computed_at
        for s in self._series:
            s.remove(self._top, self._bottom)
        colors = assign_colors(r.name for r in results)        # shown items never share a colour
        self._series = [_Series(r, colors[r.name], self._top, self._bottom) for r in results]
        self._corp = ({}, False)            # of the results before: set_corp draws the new ones' curves
        self._title = title
        for s in self._series:
            s.apply_theme(self._theme)
        self._refresh_visibility()
        self._update_title()
        self._update_legend()
        self._set_readout("")
        self.toolbar.set_items([(s.name, s.result.label) for s in self._series], self._band_hidden)
        k = max((s.k for s in self._series), default=0)
        for region in self._floor:
            region.setRegion((0.0, 1.0 / k if k > 1 else 0.0))
        self._rebuild_grid()

    def set_terciles(self, calibrator: Optional[str], curves=()) -> None:
        """Draw ``calibrator``'s curve split by epistemic tercile: ``curves`` its low / mid / high TercileCurves
        (core.evaluation.members.terciles), over the overlay and in its grid panel, exported with the figure; ()
        removes them. Redrawn at every bandwidth from their binned sums, O(grid) each."""
        colors = assign_colors([s.name for s in self._series] + [c.name for c in curves])
        self._terciles.set(calibrator, curves, colors, max((s.k for s in self._series), default=0), self._theme)
        self._refresh_visibility()
        self._update_legend()
        self._rebuild_grid()

    def set_corp(self, curves, bootstrap: bool = False) -> None:
        """Each calibrator's CORP curve (name -> CorpCurve, {}: none), bootstrap band or not; bandwidth-free."""
        if (dict(curves or {}), bool(bootstrap)) != self._corp:
            self._corp = attach_corp(self._series, self._top, curves, bootstrap)
            self._refresh_visibility()
            self._update_legend()
            self._rebuild_grid()

    @property
    def corp(self) -> tuple:
        """(calibrator name -> CorpCurve, bootstrap band on) of the CORP curves drawn."""
        return self._corp

    @property
    def terciles(self) -> TercileLayer:
        """The epistemic tercile curves drawn over the overlay (``series``, ``calibrator``, ``curves``)."""
        return self._terciles

    def set_visible(self, names: Iterable[str]) -> None:
        """Show the calibrators in ``names``, hide the others."""
        shown = set(names)
        self._hidden = {s.name for s in self._series if s.name not in shown}
        self._refresh_visibility()
        self._update_legend()
        self._rebuild_grid()

    def set_bandwidth(self, bandwidth: float, kernel: str = "gaussian") -> None:
        """The slider's hot path: one O(grid) curve per visible calibrator, existing items updated in place (no
        item creation, no autorange). Hidden calibrators catch up when shown. A bandwidth or kernel the core
        refuses raises its CalibviewError and leaves the canvas as it was."""
        h = float(bandwidth)
        kernel = str(kernel).lower()
        old = (self._bandwidth, self._kernel)
        if (h, kernel) == old:
            return
        self._bandwidth, self._kernel = h, kernel
        try:
            for s in self._series:
                if s.name not in self._hidden:
                    s.update(h, kernel)
            self._terciles.show(self._terciles_on(), h, kernel)
        except Exception:
            self._bandwidth, self._kernel = old
            self._refresh_visibility()
            raise
        self._update_title()
        if self._layout == "grid":
            self._grid_layout.set_bandwidth(h, kernel)
        if self._legend_stale != self._cal_stale() or self._notes != self._curve_notes():
            self._update_legend()            # CAL pending at another bandwidth, or the curves' notes changed

    def set_show_bins(self, on: bool) -> None:
        """The reliability bins (accuracy per bin with its interval) on or off."""
        self._show_bins = bool(on)
        self._refresh_visibility()

    def set_theme(self, name: str) -> None:
        """Redraw in theme ``name`` ("light" or "dark")."""
        t = THEMES[name]
        self._theme = t
        self._view.setBackground(t.background)
        overlay.style_axes(self._top, self._bottom, t)
        for grid in self._grids:
            grid.setPen(pg.mkPen(qcolor(t.grid, t.grid_alpha), width=1))
        self._diagonal.setPen(pg.mkPen(t.diagonal, width=1.2, style=QtCore.Qt.PenStyle.DashLine))
        for region in self._floor:
            region.setBrush(pg.mkBrush(qcolor(t.grid, max(12, t.grid_alpha // 2))))
        self._hover.set_pen(pg.mkPen(qcolor(t.hover, 170), width=1, style=QtCore.Qt.PenStyle.DotLine))
        self._legend.border = pg.mkPen(t.legend_border, width=1)
        self._legend.fill = pg.mkBrush(qcolor(t.legend_fill, t.legend_alpha))
        for s in self._series:
            s.apply_theme(t)
        self._terciles.apply_theme(t)
        self._update_title()
        self._update_legend()
        self._grid_layout.set_theme(name)

    def set_compact(self, on: bool, minimum: tuple[int, int] = (320, 260)) -> None:
        """Side by side with other splits' diagrams: a legend with ECE only, and ``minimum`` the smallest size."""
        self._view.setMinimumSize(int(minimum[0]), int(minimum[1]))
        self.toolbar.setVisible(self._toolbar_wanted and not on)
        if bool(on) != self._compact:
            self._compact = bool(on)
            self._update_title()
            self._update_legend()

    @property
    def accuracy_plot(self) -> pg.PlotItem:
        """The upper plot (accuracy against confidence), for overlays drawn by other views (the slices view)."""
        return self._top

    @property
    def legend_box(self) -> pg.TextItem:
        """The legend over the accuracy plot, which overlays drawn by other views keep clear of."""
        return self._legend

    @property
    def title(self) -> str:
        """The diagram's title (also an exported figure's)."""
        return self._title

    @property
    def bands_on(self) -> bool:
        """Whether the sharpness bands are switched on (as a whole; ``bands_shown`` tells each one)."""
        return self._bands

    @property
    def theme(self) -> str:
        """The theme's name."""
        return self._theme.name

    @property
    def bandwidth(self) -> tuple[float, str]:
        """(bandwidth, kernel) the curves are drawn at."""
        return self._bandwidth, self._kernel

    def names(self) -> list[str]:
        """The calibrators' names, in the order of ``set_results``."""
        return [s.name for s in self._series]

    def drawn_curve(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of calibrator ``name``'s curve exactly as handed to its items, the solid and the pale part
        together (NaN where the curve is undefined)."""
        s = self._get(name)
        x, y = s.curve.xData, s.curve.yData
        if s.has_thin and y is not None:
            y = np.where(np.isfinite(y), y, s.thin.yData)
        return (np.zeros(0) if x is None else x), (np.zeros(0) if y is None else y)

    # ---------------------------------------------------------------------------------- layout, bands, range
    def set_layout(self, layout: str) -> None:
        """"overlay" (every shown calibrator in one plot) or "grid" (one panel per calibrator, canvas_figure)."""
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        self._layout = layout
        box = self.toolbar.layout_box
        if box.currentData() != layout:
            box.blockSignals(True)
            box.setCurrentIndex(box.findData(layout))
            box.blockSignals(False)
        if layout == "grid":
            self._grid_layout.create(self._theme.name)
        self._rebuild_grid()
        self._stack.setCurrentWidget(self._grid_layout.widget if layout == "grid" else self._view)

    @property
    def layout_mode(self) -> str:
        """"overlay" or "grid"."""
        return self._layout

    @property
    def grid_view(self) -> Optional[FigureView]:
        """The grid layout's FigureView while the grid is shown, else None."""
        return self._grid_layout.view if self._layout == "grid" else None

    def set_bands(self, on: bool, name: Optional[str] = None) -> None:
        """Sharpness bands on/off: all of them, or (``name`` given) the band of that calibrator only."""
        if name is None:
            self._bands = bool(on)
            if self.toolbar.bands.isChecked() != self._bands:
                self.toolbar.bands.setChecked(self._bands)
        elif on:
            self._band_hidden.discard(name)
        else:
            self._band_hidden.add(name)
        self._refresh_visibility()
        self._grid_layout.set_bands(self._bands, self._band_hidden)

    def set_ci(self, on: bool) -> None:
        """The curves' pointwise confidence bands on or off (drawn where computed at the current bandwidth)."""
        self._ci = bool(on)
        if self.toolbar.ci.isChecked() != self._ci:
            self.toolbar.ci.setChecked(self._ci)
        self._refresh_visibility()
        self._update_legend()
        self._grid_layout.set_ci(self._ci)

    @property
    def ci_on(self) -> bool:
        """Whether the curves' confidence bands are switched on."""
        return self._ci

    def bands_shown(self) -> dict:
        """Calibrator name -> whether its band is drawn in the overlay."""
        return {s.name: s.band.isVisible() for s in self._series}

    def set_x_range(self, preset) -> None:
        """The confidence range: "full" ([0, 1]), "domain" ([1/K, 1]), "high" ([0.8, 1]) or a (lo, hi) pair."""
        if isinstance(preset, str):
            lo, hi = self._preset_range(preset)
        else:
            lo, hi = (float(v) for v in preset)
        self._top.setXRange(lo, hi, padding=0)
        self._grid_layout.set_x_range(lo, hi)

    def x_range(self) -> tuple[float, float]:
        """The confidence range (lo, hi) shown."""
        lo, hi = self._top.vb.viewRange()[0]
        return float(lo), float(hi)

    # ------------------------------------------------------------------------------------------------ exports
    def figure_panels(self, layout: Optional[str] = None) -> list:
        """The shown calibrators as figure panels (spec.PanelSpec), for the grid and for exports."""
        shown = [s.result for s in self._series if s.name not in self._hidden]
        k = max((s.k for s in self._series), default=0)
        panels = calibrator_panels(shown, k=k, layout=layout or self._layout, subtitle_of=lambda r: legend_numbers(r.metrics))
        layer = self._terciles
        panels = with_corp(panels, self._corp[0], bootstrap=self._corp[1])
        return with_terciles(panels, layer.calibrator, layer.curves if self._terciles_on() else (), k=k)

    def export_figure(self, path, options: Optional[FigureOptions] = None, formats=()) -> list:
        """The shown calibrators as a publication figure (export.render_figure): the options' size, DPI, fonts,
        theme (light by default, whatever the screen's) and layout; the current bandwidth, bands and range."""
        options = options or FigureOptions(layout=self._layout, ci_band=self._ci)
        hidden_bands = set(self._band_hidden)
        return render_figure(self.figure_panels(options.layout), path, options, bandwidth=self._bandwidth,
                             kernel=self._kernel, formats=formats, hidden_bands=hidden_bands,
                             x_range=self.x_range())

    def open_export_dialog(self) -> None:
        """The Export… dialog (a publication figure of what is shown)."""
        ExportDialog(self, self).exec()

    def image(self, scale: float = 2.0) -> QtGui.QImage:
        """The canvas rendered at ``scale`` x its size (vector items redrawn at that resolution, not upsampled)."""
        with export_quality(self._series):
            return render_png.widget_image(self, self._view, self._theme.background, scale)

    def export_png(self, path, scale: float = 2.0) -> None:
        """The canvas as a PNG of ``scale`` x its size in pixels."""
        render_png.write_png(self.image(scale), path)

    def export_svg(self, path) -> None:
        """The canvas as SVG (vector)."""
        with export_quality(self._series):
            render_png.write_svg(self, self._view, path)

    # ---------------------------------------------------------------------------------------------- internals
    def _get(self, name: str) -> _Series:
        for s in self._series:
            if s.name == name:
                return s
        raise KeyError(name)

    def _refresh_visibility(self) -> None:
        scale = band_alpha_scale(sum(1 for s in self._series if s.name not in self._hidden and self._bands
                                     and s.name not in self._band_hidden))
        for s in self._series:
            if s.band_alpha_scale != scale:
                s.band_alpha_scale = scale
                s.apply_theme(self._theme)
            on = s.name not in self._hidden
            if on:
                s.update(self._bandwidth, self._kernel)
            s.set_shown(on, band=self._bands and s.name not in self._band_hidden, ci=self._ci, bins=self._show_bins)
        self._terciles.show(self._terciles_on(), self._bandwidth, self._kernel)

    def _terciles_on(self) -> bool:
        return self._terciles.calibrator is not None and self._terciles.calibrator not in self._hidden

    def _update_title(self) -> None:
        kern = _KERNEL_NAMES.get(self._kernel, self._kernel)
        sub = "" if self._compact else f"{kern} kernel, h = {self._bandwidth:.3g}"     # compact: in the bar above
        overlay.set_title(self._title_item, self._view, self._theme, self._title, sub)

    def _cal_stale(self) -> bool:
        at = self._computed_at
        return at is not None and (float(at[0]), str(at[1])) != (self._bandwidth, self._kernel)

    def _update_legend(self) -> None:
        shown = [s for s in self._series if s.name not in self._hidden]
        if not shown:
            self._legend.hide()
            return
        if not self._compact:
            self._legend_stale = self._cal_stale()
        self._notes = self._curve_notes()
        split = [s for s in self._terciles.series if self._terciles_on()]
        of = next((s.result.label for s in shown if s.name == self._terciles.calibrator), "")
        self._legend.setHtml(overlay.legend_table(shown, self._theme, compact=self._compact, stale=self._legend_stale,
                                                  notes=self._notes, terciles=split, tercile_of=of))
        self._legend.show()

    def _curve_notes(self) -> list[str]:
        return overlay.curve_notes([s for s in self._series if s.name not in self._hidden], self._ci)

    def _set_readout(self, text: str) -> None:
        if text != self._readout:
            self._readout = text
            self.hover_changed.emit(text)

    def _hover_text(self, x: float) -> str:
        shown = [s for s in self._series if s.name not in self._hidden]
        shown += self._terciles.series if self._terciles_on() else []
        return " | ".join([f"conf {x:.2f}"] + [s.readout(x, self._bandwidth) for s in shown])

    def leaveEvent(self, event) -> None:  # noqa: N802 (Qt override)
        self._hover.clear()
        super().leaveEvent(event)

    def _preset_range(self, preset: str) -> tuple[float, float]:
        k = max((s.k for s in self._series), default=0)
        lo = {"full": 0.0, "domain": 1.0 / k if k > 1 else 0.0, "high": 0.8}[preset]
        return round(lo, 6), 1.0

    def _on_x_range_changed(self, *_):
        lo, hi = self.x_range()
        self._legend.follow(lo, hi)
        box = self.toolbar.range_box           # a preset's name only while the range is that preset
        match = [i for i in range(box.count()) if self._preset_range(box.itemData(i)) == (round(lo, 6), round(hi, 6))]
        box.setCurrentIndex(match[0] if match else -1)
        for plot in (self._top, self._bottom):
            for side in ("bottom", "top"):
                plot.getAxis(side).setTicks(x_ticks(lo, hi))
        grid = self._grid_layout.view
        if grid is not None and grid.x_range() != (lo, hi):
            grid.set_x_range(lo, hi)

    def _rebuild_grid(self) -> None:
        if self._grid_layout.view is not None and self._layout == "grid":
            self._grid_layout.show_panels(self.figure_panels("grid"), bandwidth=self._bandwidth, kernel=self._kernel,
                                          bands=self._bands, band_hidden=self._band_hidden, x_range=self.x_range(),
                                          ci=self._ci)


def render_diagram_png(results, path, *, bandwidth: float = 0.05, kernel: str = "gaussian",
                       size: tuple[int, int] = (900, 700), scale: float = 2.0, theme: str = "light",
                       title: str = "", terciles: tuple = (None, ()), corp: tuple = ({}, False)) -> None:
    """Offscreen render of a canvas of ``results`` to a PNG of ``scale * size`` pixels (``calibview report``'s
    diagram.png), with ``terciles`` = (calibrator, its TercileCurves) and ``corp`` = (name -> CorpCurve,
    bootstrap band) drawn (``set_terciles``, ``set_corp``). Works from a plain script: creates a QApplication
    (offscreen when there is no display) if none exists."""
    render_png.ensure_app()
    canvas = CalibrationCanvas(theme=theme, toolbar=False)
    try:
        canvas.setAttribute(QtCore.Qt.WidgetAttribute.WA_DontShowOnScreen, True)
        canvas._view.setMinimumSize(1, 1)          # the requested size wins over the interactive minimum
        canvas.resize(int(size[0]), int(size[1]))
        canvas.set_bandwidth(bandwidth, kernel)
        canvas.set_results(results, title=title)
        canvas.set_terciles(*terciles)
        canvas.set_corp(*corp)
        canvas.show()
        QtWidgets.QApplication.processEvents()
        canvas.export_png(path, scale=scale)
    finally:
        canvas.hide()
        canvas.deleteLater()
        QtWidgets.QApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)

