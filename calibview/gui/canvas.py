"""The calibration-sharpness canvas: kernel curve, sharpness band, diagonal and density strip (pyqtgraph).

Everything numeric comes from the core (``CalibratorResult.curve`` / ``smoothing.sharpness_curve``); this module
only draws. Items are created once per ``set_results`` and updated in place with ``setData`` afterwards, so a
bandwidth change costs one O(grid) curve per visible calibrator plus a repaint.
"""

from __future__ import annotations

import html
import importlib
import os
import sys
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterable, Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from ..core import smoothing
from ..core.report import atomic_write
from .theme import THEMES, Theme, calibrator_color, qcolor, themed_color

__all__ = ["CalibrationCanvas", "render_diagram_png"]

_KERNEL_NAMES = {"gaussian": "Gaussian", "epanechnikov": "Epanechnikov"}
_AXIS_WIDTH = 58            # fixed left-axis width, so that both plots' x axes line up
_FONT_PT = 10


_MAX_DRAWN = 1024           # most points drawn per curve (~1 per pixel of a full-screen plot)
_MIN_DRAWN = 256            # fewest
_PER_BANDWIDTH = 6          # points per bandwidth: the kernel curve is smooth on that scale; a polyline through
                            # h/6-spaced grid points stays within (1/6)^2/8 ~ 0.3 % of a wiggle's height (sub-pixel)


@lru_cache(maxsize=64)
def _drawn_indices(grid_size: int, step: int) -> np.ndarray:
    """Every ``step``-th grid index and the last one: drawn values are exactly the core's at those points."""
    idx = np.arange(0, grid_size, step)
    idx = idx if idx[-1] == grid_size - 1 else np.append(idx, grid_size - 1)
    idx.setflags(write=False)
    return idx


def _drawn_step(grid_size: int, bandwidth: float) -> int:
    """Grid stride for drawing at ``bandwidth``: ~h/6 apart, between _MIN_DRAWN and _MAX_DRAWN points."""
    n = grid_size - 1
    step = int(bandwidth * n / _PER_BANDWIDTH)
    return max(1, -(-n // _MAX_DRAWN), min(step, n // _MIN_DRAWN))


def _runs(valid: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of each run of True in ``valid``."""
    if valid.all():
        return [(0, valid.shape[0])]
    edges = np.flatnonzero(np.diff(np.concatenate(([0], valid.view(np.int8), [0]))))
    return list(zip(edges[0::2].tolist(), edges[1::2].tolist()))


def _area_path(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, valid: np.ndarray) -> QtGui.QPainterPath:
    """Closed outline between ``lo`` and ``hi`` over each run of valid points (forward along hi, back along lo)."""
    path = QtGui.QPainterPath()
    for s, e in _runs(valid):
        xs = np.concatenate((x[s:e], x[s:e][::-1], x[s:s + 1]))
        ys = np.concatenate((hi[s:e], lo[s:e][::-1], hi[s:s + 1]))
        sub = pg.arrayToQPath(xs, ys, connect="all", finiteCheck=False)
        if path.isEmpty():
            path = sub
        else:
            path.addPath(sub)
    return path


class _AreaItem(QtWidgets.QGraphicsPathItem):
    """A filled area with a 1 px outline. On screen the fill is drawn without antialiasing (4-6x cheaper in Qt's
    raster engine, and its edge lies under the antialiased outline), which keeps 8 bands within a frame; exports
    set ``smooth_fill``."""

    smooth_fill = False

    def paint(self, painter, option, widget=None):  # noqa: N802 (Qt override)
        path = self.path()
        if path.isEmpty():
            return
        painter.save()
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, self.smooth_fill)
        painter.fillPath(path, self.brush())
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
        painter.setBrush(QtCore.Qt.BrushStyle.NoBrush)
        painter.setPen(self.pen())
        painter.drawPath(path)
        painter.restore()


class _Series:
    """The items and cached data of one calibrator on the canvas."""

    def __init__(self, result, color: str, top: pg.PlotItem, bottom: pg.PlotItem) -> None:
        self.result = result
        self.name = result.name
        self.color = color
        self.state: Optional[tuple[float, str]] = None     # (bandwidth, kernel) the items show
        self.sc: Optional[smoothing.SharpnessCurve] = None
        count = np.asarray(result.stats.count, dtype=np.float64)
        self.cum_count = np.concatenate(([0.0], np.cumsum(count)))
        self.grid_size = count.shape[0]

        self.band = _AreaItem()
        self.band.setZValue(-10)
        self.curve = pg.PlotCurveItem(antialias=True, connect="finite", skipFiniteCheck=False)
        # Separate segments instead of one stroked polyline: Qt strokes a 2 px antialiased polyline ~6x slower.
        self.curve.opts["segmentedLineMode"] = "on"
        self.curve.setZValue(10)
        self.density = _AreaItem()
        top.addItem(self.band, ignoreBounds=True)
        top.addItem(self.curve, ignoreBounds=True)
        bottom.addItem(self.density, ignoreBounds=True)

        bins = result.bins
        acc, conf = np.asarray(bins.accuracy, float), np.asarray(bins.confidence, float)
        keep = np.isfinite(acc) & np.isfinite(conf) & (np.asarray(bins.count) > 0)
        lo = np.asarray(result.bin_acc_lo, float)[keep]
        hi = np.asarray(result.bin_acc_hi, float)[keep]
        bx, by = conf[keep], acc[keep]
        self.bin_errors = pg.ErrorBarItem(x=bx, y=by, top=np.clip(hi - by, 0, None), bottom=np.clip(by - lo, 0, None),
                                          beam=0.012)
        self.bin_points = pg.ScatterPlotItem(x=bx, y=by, size=6, symbol="o", antialias=True)
        for item in (self.bin_errors, self.bin_points):
            item.setZValue(20)
            top.addItem(item, ignoreBounds=True)

    def remove(self, top: pg.PlotItem, bottom: pg.PlotItem) -> None:
        for item in (self.band, self.curve, self.bin_errors, self.bin_points):
            top.removeItem(item)
        bottom.removeItem(self.density)

    def apply_theme(self, theme: Theme) -> None:
        color = themed_color(self.color, theme.name)
        pen = pg.mkPen(color, width=2)
        pen.setCapStyle(QtCore.Qt.PenCapStyle.FlatCap)      # segments meet end to end: no overdraw at joints
        self.curve.setPen(pen)
        self.band.setPen(pg.mkPen(qcolor(color, theme.band_edge_alpha), width=1))
        self.band.setBrush(QtGui.QBrush(qcolor(color, theme.band_alpha)))
        self.density.setPen(pg.mkPen(qcolor(color, 230), width=1))      # 1 px: Qt's fast line path
        self.density.setBrush(QtGui.QBrush(qcolor(color, theme.density_alpha)))
        visible = self.bin_errors.isVisible()
        self.bin_errors.setData(pen=pg.mkPen(qcolor(color, theme.error_bar_alpha), width=1))
        self.bin_errors.setVisible(visible)     # ErrorBarItem.setData shows itself whenever it has x and y
        self.bin_points.setPen(pg.mkPen(theme.background, width=1))
        self.bin_points.setBrush(pg.mkBrush(color))

    def update(self, bandwidth: float, kernel: str) -> None:
        """Recompute the curve at (bandwidth, kernel) from the binned statistics and push it into the items."""
        if self.state == (bandwidth, kernel):
            return
        sc = smoothing.sharpness_curve(self.result.stats, bandwidth, kernel)
        self.sc, self.state = sc, (bandwidth, kernel)
        idx = _drawn_indices(self.grid_size, _drawn_step(self.grid_size, bandwidth))
        x = sc.x[idx]
        # Where (almost) no sample is near, the Nadaraya-Watson curve only extrapolates its nearest data (the
        # Gaussian kernel never reaches exactly zero): draw it only where the density is at least DRAW_FLOOR of
        # its peak, so the diagram never shows an accuracy at confidences no sample has.
        valid = sc.valid[idx] & (sc.density[idx] >= DRAW_FLOOR)
        if not valid.any():
            empty = np.zeros(0)
            self.curve.setData(x=empty, y=empty)
            self.band.setPath(QtGui.QPainterPath())
        else:
            full = bool(valid.all())
            y = sc.curve[idx] if full else np.where(valid, sc.curve[idx], np.nan)
            self.curve.setData(x=x, y=y, connect="all" if full else "finite", skipFiniteCheck=full)
            self.band.setPath(_area_path(x, sc.band_lo[idx], sc.band_hi[idx], valid))
        dens = sc.density[idx]
        self.density.setPath(_area_path(x, np.zeros_like(dens), dens, np.ones(x.shape[0], dtype=bool)))

    def readout(self, x: float, bandwidth: float) -> str:
        sc = self.sc
        if sc is None:
            return f"{self.name}: -"
        g = self.grid_size
        i = int(round(min(max(x, 0.0), 1.0) * (g - 1)))
        lo = int(np.clip(np.ceil((x - bandwidth) * (g - 1)), 0, g - 1))
        hi = int(np.clip(np.floor((x + bandwidth) * (g - 1)), 0, g - 1))
        n = self.cum_count[hi + 1] - self.cum_count[lo] if hi >= lo else 0.0
        acc = f"{sc.curve[i]:.2f}" if sc.valid[i] else "n/a"
        return f"{self.name}: acc {acc}, density {sc.density[i]:.2f}, n≈{int(round(n))} within ±{bandwidth:.3g}"


#: The curve and band are drawn where the confidence density is at least this fraction of its maximum.
DRAW_FLOOR = 1e-3


class CalibrationCanvas(QtWidgets.QWidget):
    """The calibration-sharpness diagram (pyqtgraph): diagonal, one kernel curve with its sharpness band per shown
    calibrator, and below it, sharing the x axis, the density strip of confidences; optional reliability bars."""

    hover_changed = QtCore.Signal(str)

    def __init__(self, parent: Optional[QtWidgets.QWidget] = None, *, theme: str = "light") -> None:
        super().__init__(parent)
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
        lay.addWidget(self._view)

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
        self._top.addItem(self._diagonal, ignoreBounds=True)
        self._legend = pg.TextItem(anchor=(0, 0))
        self._legend.setZValue(50)
        self._legend.setPos(0.015, 0.985)
        self._top.addItem(self._legend, ignoreBounds=True)
        self._hover_lines = []
        for plot in (self._top, self._bottom):
            line = pg.InfiniteLine(angle=90, movable=False)
            line.setZValue(40)
            line.hide()
            plot.addItem(line, ignoreBounds=True)
            self._hover_lines.append(line)
        self._view.scene().sigMouseMoved.connect(self._on_scene_mouse_moved)
        self.set_theme(theme)

    # ------------------------------------------------------------------------------------------------ layout
    def _setup_plots(self) -> None:
        for plot in (self._top, self._bottom):
            plot.setMouseEnabled(x=False, y=False)
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
                plot.getAxis(side).setTicks(_unit_ticks(0.2, 0.1))
            plot.setXRange(0.0, 1.0, padding=0)
        self._top.setYRange(0.0, 1.0, padding=0)
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
        self._series = [_Series(r, calibrator_color(r.name, i), self._top, self._bottom)
                        for i, r in enumerate(results)]
        self._title = title
        for s in self._series:
            s.apply_theme(self._theme)
        self._refresh_visibility()
        self._update_title()
        self._update_legend()
        self._set_readout("")

    def set_visible(self, names: Iterable[str]) -> None:
        shown = set(names)
        self._hidden = {s.name for s in self._series if s.name not in shown}
        self._refresh_visibility()
        self._update_legend()

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
        for line in self._hover_lines:
            line.setPen(pg.mkPen(qcolor(t.hover, 170), width=1, style=QtCore.Qt.PenStyle.DotLine))
        self._legend.border = pg.mkPen(t.legend_border, width=1)
        self._legend.fill = pg.mkBrush(qcolor(t.legend_fill, t.legend_alpha))
        for s in self._series:
            s.apply_theme(t)
        self._update_title()
        self._update_legend()

    def set_compact(self, on: bool, minimum: tuple[int, int] = (320, 260)) -> None:
        """Side by side with other splits' diagrams: a legend with ECE only, and ``minimum`` the smallest size."""
        self._view.setMinimumSize(int(minimum[0]), int(minimum[1]))
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

    def image(self, scale: float = 2.0) -> QtGui.QImage:
        """The canvas rendered at ``scale`` x its size (vector items redrawn at that resolution, not upsampled)."""
        scale = float(scale)
        if not scale > 0:
            raise ValueError(f"scale must be positive, got {scale!r}")
        self._ensure_laid_out()
        size = self.size()
        w, h = max(1, round(size.width() * scale)), max(1, round(size.height() * scale))
        img = QtGui.QImage(w, h, QtGui.QImage.Format.Format_ARGB32_Premultiplied)
        img.fill(QtGui.QColor(self._theme.background))
        img.setDevicePixelRatio(scale)
        painter = QtGui.QPainter(img)
        self._set_smooth(True)
        try:
            painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
            painter.setRenderHint(QtGui.QPainter.RenderHint.TextAntialiasing, True)
            # QGraphicsView.render draws the background and the scene through this painter, whose device pixel
            # ratio makes Qt redraw vectors, text and cosmetic pens at full resolution.
            self._view.render(painter, QtCore.QRectF(0, 0, size.width(), size.height()),
                              self._view.viewport().rect(), QtCore.Qt.AspectRatioMode.IgnoreAspectRatio)
        finally:
            painter.end()
            self._set_smooth(False)
        img.setDevicePixelRatio(1.0)
        return img

    def export_png(self, path, scale: float = 2.0) -> None:
        img = self.image(scale)
        buf = QtCore.QBuffer()
        buf.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
        if not img.save(buf, "PNG"):
            raise OSError(f"could not encode the diagram as PNG for {os.fspath(path)}")
        atomic_write(path, bytes(buf.data()))

    def export_svg(self, path) -> None:
        from pyqtgraph.exporters import SVGExporter
        self._ensure_laid_out()
        self._set_smooth(True)
        try:
            with _svg_close_path_fix():
                data = SVGExporter(self._view.scene()).export(toBytes=True)
        finally:
            self._set_smooth(False)
        atomic_write(path, data)

    # ------------------------------------------------------------------------------------------------ internals
    def _get(self, name: str) -> _Series:
        for s in self._series:
            if s.name == name:
                return s
        raise KeyError(name)

    def _set_smooth(self, on: bool) -> None:
        """Export quality on/off: antialiased fills, and bin markers drawn as vectors rather than from the
        screen-resolution symbol atlas (which would be upsampled in a 2x image)."""
        for s in self._series:
            s.band.smooth_fill = s.density.smooth_fill = on
            s.bin_points.opts["useCache"] = not on

    def _ensure_laid_out(self) -> None:
        if self.isWindow() and not self.isVisible():
            # A never-shown top-level canvas (report export): lay it out without putting it on screen.
            self.setAttribute(QtCore.Qt.WidgetAttribute.WA_DontShowOnScreen, True)
            self.show()
        QtWidgets.QApplication.sendPostedEvents()
        self.layout().activate()

    def _refresh_visibility(self) -> None:
        for s in self._series:
            on = s.name not in self._hidden
            if on:
                s.update(self._bandwidth, self._kernel)
            for item in (s.band, s.curve, s.density):
                item.setVisible(on)
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
        rows = [f"<tr style='color:{t.muted}'><td></td><td {cell}></td><td {num}>ECE</td><td {num}>CAL</td>"
                f"<td {num}>TOT</td></tr>"]
        stale = self._legend_stale = self._cal_stale()
        for s in shown:
            m = s.result.metrics
            cal = "…" if stale else _fmt(m, 'cal', 100, 2)
            swatch = f"<span style='color:{themed_color(s.color, t.name)}; font-weight:bold'>&#9473;&#9473;</span>"
            rows.append(
                f"<tr><td {cell}>{swatch}</td><td {cell}>{html.escape(s.result.label)}</td>"
                f"<td {num}>{_fmt(m, 'ece', 100, 2, '%')}</td><td {num}>{cal}</td>"
                f"<td {num}>{_fmt(m, 'tot', 100, 1)}</td></tr>")
        rows.append(f"<tr style='color:{t.muted}'><td></td><td colspan='4' {cell}>"
                    f"<small>CAL (at h) and TOT (= Brier, any h) &times;100</small></td></tr>")
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


def _fmt(metrics, key: str, factor: float, digits: int, suffix: str = "") -> str:
    est = metrics.get(key)
    if est is None or not np.isfinite(est.value):
        return "n/a"
    return f"{est.value * factor:.{digits}f}{suffix}"


@contextmanager
def _svg_close_path_fix():
    """pyqtgraph 0.14's SVG exporter reads path data as 'x,y' tokens and fails on the 'Z' (close path) tokens
    that Qt 6.12's QSvgGenerator writes (any plot with a ViewBox). Drop them while exporting: a fill closes its
    subpaths anyway, and every outline drawn here returns to its start explicitly."""
    module = importlib.import_module("pyqtgraph.exporters.SVGExporter")
    original = module.correctCoordinates

    def correct(node, defs, item, options):
        for el in node.getElementsByTagName("path"):
            d = el.getAttribute("d")
            if "Z" in d or "z" in d:
                el.setAttribute("d", " ".join(t for t in d.split() if t not in ("Z", "z")))
        return original(node, defs, item, options)

    module.correctCoordinates = correct
    try:
        yield
    finally:
        module.correctCoordinates = original


def render_diagram_png(results, path, *, bandwidth: float = 0.05, kernel: str = "gaussian",
                       size: tuple[int, int] = (900, 700), scale: float = 2.0, theme: str = "light",
                       title: str = "") -> None:
    """Offscreen render of the canvas to a PNG of ``scale * size`` pixels (``calibview report``'s diagram.png).
    Works from a plain script: creates a QApplication (offscreen when there is no display) if none exists."""
    if QtWidgets.QApplication.instance() is None:
        if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        _APP.append(QtWidgets.QApplication([]))
        _APP.append(QtCore.qInstallMessageHandler(_quiet_offscreen_messages))
    canvas = CalibrationCanvas(theme=theme)
    try:
        canvas.setAttribute(QtCore.Qt.WidgetAttribute.WA_DontShowOnScreen, True)
        canvas._view.setMinimumSize(1, 1)          # the requested size wins over the interactive minimum
        canvas.resize(int(size[0]), int(size[1]))
        canvas.set_bandwidth(bandwidth, kernel)
        canvas.set_results(results, title=title)
        canvas.show()
        QtWidgets.QApplication.processEvents()
        canvas.export_png(path, scale=scale)
    finally:
        canvas.hide()
        canvas.deleteLater()
        QtWidgets.QApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)


def _quiet_offscreen_messages(mode, context, message: str) -> None:
    """The offscreen platform warns on every shown window that it cannot propagate size hints: noise on the
    command line's stderr. Everything else is printed as Qt would."""
    if "propagateSizeHints" not in message:
        sys.stderr.write(message + "\n")


_APP: list = []     # keeps a QApplication created by render_diagram_png alive for later calls
