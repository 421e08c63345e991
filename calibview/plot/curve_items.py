"""The drawn items of one curve: kernel curve, sharpness band, confidence band, density area and reliability
bins (pyqtgraph).

Shared by the interactive canvas (canvas.py) and the small-multiples figure (figure.py). Everything numeric comes
from the core (``smoothing.sharpness_curve``, ``smoothing.effective_n``, the result's ``curve_band``); items are
created once and updated in place with ``setData``. The curve, bands and density are drawn on [1/K, 1] only: no
top-label confidence lies below 1/K. Where fewer than ``smoothing.MIN_EFFECTIVE_N`` samples lie under the kernel
the curve is drawn pale (``thin``): it rests on too few samples to be read closely. The confidence band is the
pointwise bootstrap band the engine computed at one bandwidth and kernel; at any other it is not drawn.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from calibview.core.stats import smoothing
from calibview.plot.theme import Theme, qcolor, themed_color

__all__ = ["Series", "AreaItem", "TercileLayer", "DRAW_FLOOR", "THIN_ALPHA", "DASH_STYLES", "TERCILE_DASHES",
           "domain_floor", "band_alpha_scale", "set_export_quality", "export_quality"]

#: Qt pen styles of palette.DASHES' names
DASH_STYLES = {"solid": None, "dash": QtCore.Qt.PenStyle.DashLine, "dot": QtCore.Qt.PenStyle.DotLine,
               "dashdot": QtCore.Qt.PenStyle.DashDotLine, "dashdotdot": QtCore.Qt.PenStyle.DashDotDotLine}
#: the low / mid / high epistemic tercile curves' line styles: palette.assign_dashes' order after the calibrators'
#: solid lines, so that the window's overlay and the figures (grid, exports) draw them alike
TERCILE_DASHES = ("dash", "dot", "dashdot")


def band_alpha_scale(n_bands: int) -> float:
    """Factor on the theme's band opacity with ``n_bands`` bands shown together: 1 up to three, then 3/n, so
    that where all of them overlap the fill stays about as light as three bands (curves stay readable)."""
    return 1.0 if n_bands <= 3 else 3.0 / n_bands

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


class AreaItem(QtWidgets.QGraphicsPathItem):
    """A filled area with a 1 px outline. On screen the fill is drawn without antialiasing (4-6x cheaper in Qt's
    raster engine, and its edge lies under the antialiased outline), which keeps 8 bands within a frame; exports
    set ``smooth_fill``."""

    smooth_fill = False

    def paint(self, painter, option, widget=None):  # noqa: N802 (Qt override)
        """Fill (antialiased only with ``smooth_fill``), then the antialiased outline."""
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


class Series:
    """The items and cached data of one calibrator's curve on a pair of plots (the canvas's or a figure panel's):
    kernel curve and sharpness band above, density below, optional reliability bins."""

    def __init__(self, result, color: str, top: pg.PlotItem, bottom: pg.PlotItem, *, k: int = 0,
                 dash: Optional[QtCore.Qt.PenStyle] = None, faint: bool = False, name: Optional[str] = None) -> None:
        self.result = result
        self.name = result.name if name is None else name
        self.color = color
        self.k = int(k) if k else _classes(result)
        self.dash = dash
        self.faint = faint
        self.line_width = 2.0
        self.band_on = not faint
        self.has_thin = False           # part of the drawn curve rests on < MIN_EFFECTIVE_N samples
        self.has_ci = False             # the confidence band exists at the drawn bandwidth and kernel
        self.band_alpha_scale = 1.0
        self.theme: Optional[Theme] = None      # the theme of the latest apply_theme
        self.corp_items = None          # plot.corp.items.CorpItems: its CORP curve, bandwidth-free (attach_corp)
        self.state: Optional[tuple[float, str]] = None     # (bandwidth, kernel) the items show
        self.sc: Optional[smoothing.SharpnessCurve] = None
        count = np.asarray(result.stats.count, dtype=np.float64)
        self.cum_count = np.concatenate(([0.0], np.cumsum(count)))
        self.grid_size = count.shape[0]

        self.band = AreaItem()
        self.band.setZValue(-10)
        self.curve = pg.PlotCurveItem(antialias=True, connect="finite", skipFiniteCheck=False)
        # Separate segments instead of one stroked polyline: Qt strokes a 2 px antialiased polyline ~6x slower.
        self.curve.opts["segmentedLineMode"] = "on"
        self.curve.setZValue(10)
        self.thin = pg.PlotCurveItem(antialias=True, connect="finite", skipFiniteCheck=False)
        self.thin.setZValue(10)
        self.ci_lo = pg.PlotCurveItem(antialias=True, connect="finite", skipFiniteCheck=False)
        self.ci_hi = pg.PlotCurveItem(antialias=True, connect="finite", skipFiniteCheck=False)
        self.density = AreaItem()
        top.addItem(self.band, ignoreBounds=True)
        for item in (self.curve, self.thin, self.ci_lo, self.ci_hi):
            top.addItem(item, ignoreBounds=True)
        bottom.addItem(self.density, ignoreBounds=True)

        bins = getattr(result, "bins", None)        # reliability bins: absent from e.g. a positive-class curve
        if bins is not None:
            acc, conf = np.asarray(bins.accuracy, float), np.asarray(bins.confidence, float)
            keep = np.isfinite(acc) & np.isfinite(conf) & (np.asarray(bins.count) > 0)
            lo = np.asarray(result.bin_acc_lo, float)[keep]
            hi = np.asarray(result.bin_acc_hi, float)[keep]
            bx, by = conf[keep], acc[keep]
        else:
            bx = by = lo = hi = np.zeros(0)
        self.bin_errors = pg.ErrorBarItem(x=bx, y=by, top=np.clip(hi - by, 0, None), bottom=np.clip(by - lo, 0, None),
                                          beam=0.012)
        self.bin_points = pg.ScatterPlotItem(x=bx, y=by, size=6, symbol="o", antialias=True)
        for item in (self.bin_errors, self.bin_points):
            item.setZValue(20)
            top.addItem(item, ignoreBounds=True)

    def remove(self, top: pg.PlotItem, bottom: pg.PlotItem) -> None:
        """Take this series' items off the accuracy plot ``top`` and the density strip ``bottom``."""
        for item in (self.band, self.curve, self.thin, self.ci_lo, self.ci_hi, self.bin_errors, self.bin_points):
            top.removeItem(item)
        bottom.removeItem(self.density)
        self.attach_corp(None, top)

    def attach_corp(self, items, top: pg.PlotItem) -> None:
        """Hang the CORP curve's items (plot.corp.items.CorpItems, already on ``top``; None: none) off this
        series: shown, hidden, restyled and removed with it. The one before is taken off ``top``."""
        if self.corp_items is not None:
            self.corp_items.remove(top)
        self.corp_items = items
        if items is not None:
            if self.theme is not None:
                items.apply_theme(self.theme, self.color, self.line_width)
            items.set_visible(self.curve.isVisible())

    def apply_theme(self, theme: Theme) -> None:
        """Pens and brushes of every item in ``theme`` (faint series in its muted colour)."""
        self.theme = theme
        if self.corp_items is not None:
            self.corp_items.apply_theme(theme, self.color, self.line_width)
        color = themed_color(self.color, theme.name)
        if self.faint:
            color = theme.muted
        pen = pg.mkPen(color, width=self.line_width * (0.6 if self.faint else 1.0))
        if self.dash is not None:
            pen.setStyle(self.dash)
        pen.setCapStyle(QtCore.Qt.PenCapStyle.FlatCap)      # segments meet end to end: no overdraw at joints
        self.curve.setPen(pen)
        self.curve.opts["segmentedLineMode"] = "on" if self.dash is None else "off"   # dashes need one polyline
        thin = QtGui.QPen(pen)
        thin.setColor(qcolor(color, THIN_ALPHA))
        self.thin.setPen(thin)
        for item in (self.ci_lo, self.ci_hi):       # thin lines, unlike the filled sharpness band
            ci = pg.mkPen(qcolor(color, 200), width=max(1.0, 0.5 * pen.widthF()))
            if self.dash is not None:
                ci.setStyle(self.dash)
            item.setPen(ci)
        self.band.setPen(pg.mkPen(qcolor(color, theme.band_edge_alpha), width=1))
        # overlapping bands: each one's opacity shrinks past three so that the stack stays readable
        self.band.setBrush(QtGui.QBrush(qcolor(color, round(theme.band_alpha * self.band_alpha_scale))))
        self.density.setPen(pg.mkPen(qcolor(color, 230), width=1))      # 1 px: Qt's fast line path
        self.density.setBrush(QtGui.QBrush(qcolor(color, theme.density_alpha)))
        visible = self.bin_errors.isVisible()
        self.bin_errors.setData(pen=pg.mkPen(qcolor(color, theme.error_bar_alpha), width=1))
        self.bin_errors.setVisible(visible)     # ErrorBarItem.setData shows itself whenever it has x and y
        self.bin_points.setPen(pg.mkPen(theme.background, width=1))
        self.bin_points.setBrush(pg.mkBrush(color))

    def set_shown(self, on: bool, *, band: bool, ci: bool, bins: bool, density: bool = True) -> None:
        """Show or hide this series' items: everything off unless ``on``; then the sharpness ``band``, the
        confidence band ``ci`` (where it exists at the drawn bandwidth), the reliability ``bins``, the density."""
        for item in (self.curve, self.thin):
            item.setVisible(on)
        if self.corp_items is not None:
            self.corp_items.set_visible(on)
        self.band.setVisible(on and band)
        for item in (self.ci_lo, self.ci_hi):
            item.setVisible(on and ci)
        self.density.setVisible(on and density)
        for item in (self.bin_errors, self.bin_points):
            item.setVisible(on and bins)

    def update(self, bandwidth: float, kernel: str) -> None:
        """Recompute the curve at (bandwidth, kernel) from the binned statistics (the result's own ``curve`` where it
        caches them) and push it into the items."""
        if self.state == (bandwidth, kernel):
            return
        curve_of = getattr(self.result, "curve", None)
        sc = curve_of(bandwidth, kernel) if callable(curve_of) else smoothing.sharpness_curve(self.result.stats,
                                                                                                bandwidth, kernel)
        self.sc, self.state = sc, (bandwidth, kernel)
        idx = _drawn_indices(self.grid_size, _drawn_step(self.grid_size, bandwidth))
        x = sc.x[idx]
        inside = x >= domain_floor(self.k)
        # Where (almost) no sample is near, the Nadaraya-Watson curve only extrapolates its nearest data (the
        # Gaussian kernel never reaches exactly zero): draw it only where the density is at least DRAW_FLOOR of
        # its peak, so the diagram never shows an accuracy at confidences no sample has.
        valid = sc.valid[idx] & (sc.density[idx] >= DRAW_FLOOR) & inside
        thin = valid & (smoothing.effective_n(self.result.stats, bandwidth, kernel)[idx] < smoothing.MIN_EFFECTIVE_N)
        self.has_thin = bool(thin.any())
        empty = np.zeros(0)
        if not valid.any():
            self.curve.setData(x=empty, y=empty)
            self.band.setPath(QtGui.QPainterPath())
        else:
            solid = valid & ~thin
            full = bool(solid.all())
            y = sc.curve[idx] if full else np.where(solid, sc.curve[idx], np.nan)
            self.curve.setData(x=x, y=y, connect="all" if full else "finite", skipFiniteCheck=full)
            self.band.setPath(_area_path(x, sc.band_lo[idx], sc.band_hi[idx], valid))
        if self.has_thin:       # the pale part reaches one point into the solid part, so the two join
            near = thin | np.r_[thin[1:], False] | np.r_[False, thin[:-1]]
            self.thin.setData(x=x, y=np.where(valid & near, sc.curve[idx], np.nan), connect="finite")
        else:
            self.thin.setData(x=empty, y=empty)
        self._update_ci(sc, bandwidth, kernel)
        dens = sc.density[idx]
        self.density.setPath(_area_path(x, np.zeros_like(dens), dens, inside))

    def _update_ci(self, sc, bandwidth: float, kernel: str) -> None:
        """The confidence band's lines, where the result has one at (bandwidth, kernel) and the curve is drawn."""
        band = getattr(self.result, "curve_band", None)
        self.has_ci = (band is not None and band.kernel == kernel
                       and abs(band.bandwidth - bandwidth) <= 1e-9 * max(bandwidth, 1.0))
        if not self.has_ci:
            empty = np.zeros(0)
            for item in (self.ci_lo, self.ci_hi):
                item.setData(x=empty, y=empty)
            return
        x = band.x
        keep = (np.isfinite(band.lo) & np.isfinite(band.hi) & (x >= domain_floor(self.k))
                & (np.interp(x, sc.x, sc.density) >= DRAW_FLOOR))
        for item, y in ((self.ci_lo, band.lo), (self.ci_hi, band.hi)):
            item.setData(x=x, y=np.where(keep, y, np.nan), connect="finite")

    def readout(self, x: float, bandwidth: float) -> str:
        """The hover text at confidence ``x``: accuracy and density of the drawn curve there, and about how many
        samples lie within ``bandwidth`` of ``x``."""
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


class TercileLayer:
    """The epistemic tercile curves of one calibrator (core.evaluation.members.terciles.TercileCurve) over a pair
    of plots: kernel curves in the styles of TERCILE_DASHES, without band, density or bins; the canvas's overlay
    layout holds one (the grid draws them as figure items, spec.with_terciles)."""

    def __init__(self, top: pg.PlotItem, bottom: pg.PlotItem) -> None:
        self.top, self.bottom = top, bottom
        self.calibrator: Optional[str] = None
        self.curves: tuple = ()
        self.series: list[Series] = []

    def set(self, calibrator: Optional[str], curves, colors: dict, k: int, theme: Theme) -> None:
        """Draw ``curves`` (the TercileCurves of ``calibrator``; () removes them) in ``colors`` (curve name ->
        colour), on [1/``k``, 1], in ``theme``."""
        for s in self.series:
            s.remove(self.top, self.bottom)
        self.calibrator, self.curves = (calibrator, tuple(curves)) if curves else (None, ())
        self.series = [Series(c, colors[c.name], self.top, self.bottom, k=k,
                              dash=DASH_STYLES[TERCILE_DASHES[c.tercile]], name=c.label) for c in self.curves]
        for s in self.series:
            s.band_on = False
            s.curve.setZValue(12)           # over the calibrators' curves, which they split
            s.apply_theme(theme)

    def show(self, on: bool, bandwidth: float, kernel: str) -> None:
        """Shown (at ``bandwidth`` and ``kernel``: O(grid) per curve) or hidden."""
        for s in self.series:
            if on:
                s.update(bandwidth, kernel)
            s.set_shown(on, band=False, ci=False, bins=False, density=False)

    def apply_theme(self, theme: Theme) -> None:
        """Pens in ``theme``."""
        for s in self.series:
            s.apply_theme(theme)


def set_export_quality(series, on: bool) -> None:
    """Export quality on/off for the items of ``series`` (an iterable of Series): antialiased fills, and bin
    markers drawn as vectors rather than from the screen-resolution symbol atlas (upsampled in a 2x image)."""
    for s in series:
        s.band.smooth_fill = s.density.smooth_fill = on
        s.bin_points.opts["useCache"] = not on


@contextmanager
def export_quality(series):
    """``set_export_quality(series, True)`` inside the block, off again after it (also when it raises)."""
    series = list(series)
    set_export_quality(series, True)
    try:
        yield
    finally:
        set_export_quality(series, False)


def _classes(result) -> int:
    """K of the run a result comes from (its per-class vectors have K entries); 0 when unknown."""
    per_class = getattr(result, "per_class_count", None)
    return int(np.asarray(per_class).shape[0]) if per_class is not None else 0


def domain_floor(k: int) -> float:
    """The smallest possible top-label confidence, 1/K (0 when K is unknown), less a rounding margin so the grid
    point at exactly 1/K is kept."""
    return 1.0 / k - 1e-9 if k and k > 1 else 0.0


#: The curve and band are drawn where the confidence density is at least this fraction of its maximum.
DRAW_FLOOR = 1e-3
#: Opacity (of 255) of the curve where it rests on fewer than MIN_EFFECTIVE_N samples under the kernel.
THIN_ALPHA = 90

