"""The calibration-sharpness canvas: kernel curve, sharpness band, diagonal and density strip (pyqtgraph).

Everything numeric comes from the core (``CalibratorResult.curve`` / ``smoothing.sharpness_curve``); this module
only draws. Items are created once per ``set_results`` and updated in place with ``setData`` afterwards, so a
bandwidth change costs one O(grid) curve per visible calibrator plus a repaint.

The curve items live in curve_items.py; the grid layout, bands, range and publication exports in
canvas_figure.py (drawn by figure.py / figure_export.py); the controls above the plot in canvas_nav.py; the
screen-resolution PNG/SVG and report's classic diagram.png in canvas_export.py.
"""

from __future__ import annotations

import html
from typing import Iterable, Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from calibview.plot.render_png import CanvasExportMixin, render_diagram_png  # noqa: F401 (re-exported)
from calibview.plot.canvas_figure import FigureMixin
from calibview.plot.navigation import CanvasToolbar, DraggableLegend, x_ticks
from calibview.plot.figure import FigureView
from calibview.plot.palette import assign_colors
from calibview.plot.theme import THEMES, Theme, qcolor, themed_color

__all__ = ["CalibrationCanvas", "render_diagram_png"]

_KERNEL_NAMES = {"gaussian": "Gaussian", "epanechnikov": "Epanechnikov"}
_Y_PAD = 0.02
_AXIS_WIDTH = 58            # fixed left-axis width, so that both plots' x axes line up
_FONT_PT = 10


from calibview.plot.curve_items import DRAW_FLOOR, Series as _Series, band_alpha_scale  # noqa: F401 (DRAW_FLOOR re-exported)



class CalibrationCanvas(FigureMixin, CanvasExportMixin, QtWidgets.QWidget):
    """The calibration-sharpness diagram (pyqtgraph): diagonal, one kernel curve with its sharpness band per shown
    calibrator, and below it, sharing the x axis, the density strip of confidences; optional reliability bars."""

    hover_changed = QtCore.Signal(str)

    def __init__(self, parent: Optional[QtWidgets.QWidget] = None, *, theme: str = "light",
                 toolbar: bool = True) -> None:
        super().__init__(parent)
        self._layout = "overlay"
        self._bands = True
        self._band_hidden: set[str] = set()
        self._grid: Optional[FigureView] = None
        self._series: list[_Series] = []
        self._hidden: set[str] = set()
        self._bandwidth = 0.05
        self._kernel = "gaussian"
        self._computed_at: Optional[tuple] = None      # (bandwidth, kernel) of the results' CAL
        self._legend_stale = False
        self._compact = False
        self._show_bins = False
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
        self.toolbar.item_band_changed.connect(lambda name, on: self.set_bands(on, name))
        self.toolbar.range_preset.connect(self.set_x_range)
        self.toolbar.export_requested.connect(self.open_export_dialog)
        lay.addWidget(self.toolbar)
        self._stack = QtWidgets.QStackedWidget()
        self._stack.addWidget(self._view)
        lay.addWidget(self._stack, 1)

        ci = self._view.ci
        ci.setContentsMargins(8, 6, 14, 6)
        ci.layout.setVerticalSpacing(2)
        self._title_item = ci.addLabel("", row=0, col=0)
        self._top = ci.addPlot(row=1, col=0)
        self._bottom = ci.addPlot(row=2, col=0)
        ci.layout.setRowStretchFactor(1, 3)
        ci.layout.setRowStretchFactor(2, 1)
        self._bottom.setXLink(self._top)
        self._setup_plots()

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
        self._hover_lines = []
        for plot in (self._top, self._bottom):
            line = pg.InfiniteLine(angle=90, movable=False)
            line.setZValue(40)
            line.hide()
            plot.addItem(line, ignoreBounds=True)
            self._hover_lines.append(line)
        self._view.scene().sigMouseMoved.connect(self._on_scene_mouse_moved)
        self._top.sigXRangeChanged.connect(self._on_x_range_changed)
        self.set_theme(theme)

    # ------------------------------------------------------------------------------------------------ layout
    def _setup_plots(self) -> None:
        for plot in (self._top, self._bottom):
            # wheel zoom and drag pan on the confidence axis only, never past [0, 1]; the strip follows (x-linked)
            plot.setMouseEnabled(x=True, y=False)
            plot.vb.setLimits(xMin=0.0, xMax=1.0, minXRange=0.01)
            plot.setMenuEnabled(False)
            plot.hideButtons()
            plot.vb.disableAutoRange()
            plot.showAxis("top")
            plot.showAxis("right")
            for side in ("top", "right"):
                plot.getAxis(side).setStyle(showValues=False, tickLength=-4)
            for side in ("left", "bottom"):
                # the 0 and 1 labels sit on the plot's edge: keep them instead of hiding them as overlapping
                plot.getAxis(side).setStyle(tickLength=-5, tickTextOffset=4, hideOverlappingLabels=False)
            plot.getAxis("left").setWidth(_AXIS_WIDTH)
            plot.getAxis("right").setWidth(6)
            for side in ("bottom", "top"):
                plot.getAxis(side).setTicks(x_ticks(0.0, 1.0))
            plot.setXRange(0.0, 1.0, padding=0)
        self._top.setYRange(-_Y_PAD, 1.0 + _Y_PAD, padding=0)     # a curve at accuracy 1 stays off the frame
        self._bottom.setYRange(0.0, 1.08, padding=0)
        for side in ("left", "right"):
            self._top.getAxis(side).setTicks(_unit_ticks(0.2, 0.1))
            self._bottom.getAxis(side).setTicks([[(0.0, "0"), (0.5, "0.5"), (1.0, "1")]])
        self._top.getAxis("bottom").setStyle(showValues=False)
        self._top.getAxis("bottom").setHeight(6)
        self._bottom.getAxis("top").setHeight(4)
        # Own grid lines: pyqtgraph's axis grid would also clip the "0" and "1" labels at the plot's edges.
        self._grids = []
        for plot, ys in ((self._top, (0.2, 0.4, 0.6, 0.8)), (self._bottom, (0.5,))):
            xs = (0.2, 0.4, 0.6, 0.8)
            gx = [v for x in xs for v in (x, x)] + [v for _ in ys for v in (0.0, 1.0)]
            gy = [v for _ in xs for v in (0.0, 1.1)] + [v for y in ys for v in (y, y)]
            grid = pg.PlotCurveItem(x=np.array(gx), y=np.array(gy), connect="pairs")
            grid.setZValue(-30)
            plot.addItem(grid, ignoreBounds=True)
            self._grids.append(grid)

    def _style_axes(self, t: Theme) -> None:
        font = QtGui.QFont()
        font.setPointSizeF(_FONT_PT - 1)
        label_style = {"color": t.foreground, "font-size": f"{_FONT_PT}pt"}
        for plot in (self._top, self._bottom):
            for side in ("left", "bottom", "top", "right"):
                ax = plot.getAxis(side)
                ax.setPen(pg.mkPen(t.foreground, width=1))
                ax.setTextPen(pg.mkPen(t.foreground))
                ax.setTickFont(font)
                ax.enableAutoSIPrefix(False)
        self._top.setLabel("left", "accuracy (kernel estimate)", **label_style)
        self._bottom.setLabel("left", "density", **label_style)
        self._bottom.setLabel("bottom", "confidence", **label_style)

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

    def set_visible(self, names: Iterable[str]) -> None:
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
        except Exception:
            self._bandwidth, self._kernel = old
            self._refresh_visibility()
            raise
        self._update_title()
        if self._grid is not None and self._layout == "grid":
            self._grid.set_bandwidth(h, kernel)
        if self._legend_stale != self._cal_stale():
            self._update_legend()            # CAL was computed at another bandwidth: shown as pending

    def set_show_bins(self, on: bool) -> None:
        self._show_bins = bool(on)
        self._refresh_visibility()

    def set_theme(self, name: str) -> None:
        t = THEMES[name]
        self._theme = t
        self._view.setBackground(t.background)
        self._style_axes(t)
        for grid in self._grids:
            grid.setPen(pg.mkPen(qcolor(t.grid, t.grid_alpha), width=1))
        self._diagonal.setPen(pg.mkPen(t.diagonal, width=1.2, style=QtCore.Qt.PenStyle.DashLine))
        for region in self._floor:
            region.setBrush(pg.mkBrush(qcolor(t.grid, max(12, t.grid_alpha // 2))))
        for line in self._hover_lines:
            line.setPen(pg.mkPen(qcolor(t.hover, 170), width=1, style=QtCore.Qt.PenStyle.DotLine))
        self._legend.border = pg.mkPen(t.legend_border, width=1)
        self._legend.fill = pg.mkBrush(qcolor(t.legend_fill, t.legend_alpha))
        for s in self._series:
            s.apply_theme(t)
        self._update_title()
        self._update_legend()
        if self._grid is not None:
            self._grid.set_theme(name)

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
        """The upper plot (accuracy against confidence), for overlays drawn by other views (gui.slices)."""
        return self._top

    @property
    def theme(self) -> str:
        return self._theme.name

    @property
    def bandwidth(self) -> tuple[float, str]:
        return self._bandwidth, self._kernel

    def names(self) -> list[str]:
        return [s.name for s in self._series]

    def drawn_curve(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) exactly as handed to the curve item of calibrator ``name`` (NaN where the curve is undefined)."""
        s = self._get(name)
        x, y = s.curve.xData, s.curve.yData
        return (np.zeros(0) if x is None else x), (np.zeros(0) if y is None else y)

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
            for item in (s.curve, s.density):
                item.setVisible(on)
            s.band.setVisible(on and self._bands and s.name not in self._band_hidden)
            for item in (s.bin_errors, s.bin_points):
                item.setVisible(on and self._show_bins)

    def _update_title(self) -> None:
        t = self._theme
        kern = _KERNEL_NAMES.get(self._kernel, self._kernel)
        sub = "" if self._compact else f"{kern} kernel, h = {self._bandwidth:.3g}"     # compact: in the bar above
        head = f"<b>{html.escape(self._title)}</b>&nbsp;&nbsp;&nbsp;" if self._title else ""
        self._title_item.setText(f"<span style='color:{t.foreground}'>{head}</span>"
                                 f"<span style='color:{t.muted}'>{html.escape(sub)}</span>", size=f"{_FONT_PT}pt")
        # LabelItem makes the text's width its minimum, which widens the whole layout past a narrow view (the plots
        # then run off its right edge): a long title is cut instead, and the layout put back into the view.
        self._title_item.setMinimumWidth(0)
        view, ci = self._view, self._view.ci
        if ci.geometry().width() > view.width():
            ci.setGeometry(QtCore.QRectF(0, 0, view.width(), view.height()))

    def _cal_stale(self) -> bool:
        at = self._computed_at
        return at is not None and (float(at[0]), str(at[1])) != (self._bandwidth, self._kernel)

    def _update_legend(self) -> None:
        t = self._theme
        shown = [s for s in self._series if s.name not in self._hidden]
        if not shown:
            self._legend.hide()
            return
        cell = "style='padding: 1px 5px 1px 5px'"
        num = "style='padding: 1px 5px 1px 5px' align='right'"
        if self._compact:            # side by side with other splits: ECE only (the table has the rest)
            # short names (the Shown list pairs them with labels and colours), so the legend fits a narrow plot
            rows = [f"<tr style='color:{t.muted}'><td></td><td {cell}></td><td {num}>ECE</td></tr>"]
            rows += [f"<tr><td {cell}><span style='color:{themed_color(s.color, t.name)}; font-weight:bold'>"
                     f"&#9473;&#9473;</span></td><td {cell}>{html.escape(s.name)}</td>"
                     f"<td {num}>{_fmt(s.result.metrics, 'ece', 100, 2, '%')}</td></tr>" for s in shown]
            self._legend.setHtml(f"<table cellspacing='0' style='color:{t.foreground}; font-size:{_FONT_PT - 1}pt'>"
                                 + "".join(rows) + "</table>")
            self._legend.show()
            return
        rows = [f"<tr style='color:{t.muted}'><td></td><td {cell}></td><td {num}>ECE %</td><td {num}>CAL ×100</td>"
                f"<td {num}>TOT ×100</td></tr>"]
        stale = self._legend_stale = self._cal_stale()
        for s in shown:
            m = s.result.metrics
            cal = "…" if stale else _fmt(m, 'cal', 100, 2, bare=True)
            swatch = f"<span style='color:{themed_color(s.color, t.name)}; font-weight:bold'>&#9473;&#9473;</span>"
            rows.append(
                f"<tr><td {cell}>{swatch}</td><td {cell}>{html.escape(s.result.label)}</td>"
                f"<td {num}>{_fmt(m, 'ece', 100, 2, bare=True)}</td><td {num}>{cal}</td>"
                f"<td {num}>{_fmt(m, 'tot', 100, 2, bare=True)}</td></tr>")
        rows.append(f"<tr style='color:{t.muted}'><td></td><td colspan='4' {cell}>"
                    f"<small>CAL at h; TOT = Brier, any h</small></td></tr>")
        self._legend.setHtml(f"<table cellspacing='0' style='color:{t.foreground}; font-size:{_FONT_PT - 1}pt'>"
                             + "".join(rows) + "</table>")
        self._legend.show()

    def _set_readout(self, text: str) -> None:
        if text != self._readout:
            self._readout = text
            self.hover_changed.emit(text)

    def _on_scene_mouse_moved(self, pos) -> None:
        pos = QtCore.QPointF(pos)
        for plot in (self._top, self._bottom):
            if plot.vb.sceneBoundingRect().contains(pos):
                x = float(plot.vb.mapSceneToView(pos).x())
                break
        else:
            self._clear_hover()
            return
        x = min(max(x, 0.0), 1.0)
        for line in self._hover_lines:
            line.setPos(x)
            line.show()
        parts = [f"conf {x:.2f}"]
        parts += [s.readout(x, self._bandwidth) for s in self._series if s.name not in self._hidden]
        self._set_readout(" | ".join(parts))

    def _clear_hover(self) -> None:
        for line in self._hover_lines:
            line.hide()
        self._set_readout("")

    def leaveEvent(self, event) -> None:  # noqa: N802 (Qt override)
        self._clear_hover()
        super().leaveEvent(event)


def _unit_ticks(major: float, minor: float) -> list:
    """Explicit ticks on [0, 1]: labelled majors ("0", "0.2", ..., "1") and unlabelled minors."""
    n_major, n_minor = int(round(1 / major)), int(round(1 / minor))
    majors = [(i * major, "0" if i == 0 else "1" if i == n_major else f"{i * major:.1f}") for i in range(n_major + 1)]
    minors = [(i * minor, "") for i in range(n_minor + 1) if abs(i * minor / major - round(i * minor / major)) > 1e-9]
    return [majors, minors]


def _fmt(metrics, key: str, factor: float, digits: int, suffix: str = "", bare: bool = False) -> str:
    """The legend's number in the table's convention (core.units once merged: ECE in %, CAL and TOT ×100, two
    decimals); ``bare``: without the unit, which the column header states."""
    est = metrics.get(key)
    try:
        from calibview.core.reports import units
    except ImportError:
        units = None
    if units is not None:
        text = units.fmt(key, None if est is None else float(est.value))
        return text if bare or not suffix else f"{text}{suffix}"
    if est is None or not np.isfinite(est.value):
        return "n/a"
    return f"{est.value * factor:.{digits}f}{'' if bare else suffix}"
