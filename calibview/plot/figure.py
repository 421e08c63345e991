"""Small multiples: a grid of calibration-sharpness panels drawn from ``spec.PanelSpec`` lists (pyqtgraph).

Each panel is an accuracy plot over a density strip sharing its x axis; all panels share both axes' ranges and
the bandwidth. ``FigureView`` is the widget (the window's grid layout); ``export.py`` writes it as PNG, SVG or
PDF at a physical size (see ``FigureOptions``).

Sizes are in logical pixels of 1/96 inch: a 7 in figure is a 672 px wide view rendered at DPI/96, so fonts (in
points) and line widths keep their physical size at any DPI.
"""

from __future__ import annotations

import html
from typing import Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from calibview.core.reports import units
from calibview.plot.navigation import unit_ticks, x_ticks
from calibview.plot.overlay import curve_notes
from calibview.plot.corp.items import attach_corp
from calibview.plot.curve_items import DASH_STYLES, Series, band_alpha_scale, domain_floor
from calibview.plot.spec import PanelSpec
from calibview.plot.palette import assign_colors, assign_dashes
from calibview.plot.theme import THEMES, Theme, qcolor, themed_color

__all__ = ["FigureView", "grid_shape", "legend_numbers", "DASH_STYLES", "LOGICAL_DPI"]

LOGICAL_DPI = 96.0
_Y_PAD = 0.025           # the accuracy axis runs a little past [0, 1]: a curve at accuracy 1.0 is not under the frame


def grid_shape(n: int) -> tuple[int, int]:
    """(rows, columns) for ``n`` panels: at most 3 columns up to 9 panels, 4 beyond."""
    if n <= 1:
        return 1, 1
    cols = 2 if n in (2, 4) else 3 if n <= 9 else 4
    return -(-n // cols), cols


def legend_numbers(metrics, keys=("ece", "cal", "brier"), loss: str = "Brier") -> str:
    """"ECE 7.88 % · CAL×100 0.11 · Brier×100 8.79": the panel title's numbers of ``metrics`` (name -> Estimate)
    in the table's unit convention (``core.reports.units``: ECE in percent, squared-error scores ×100, two
    decimals); ``loss`` names the Brier term ("top-label Brier" for a top-label run: CalibratorResult.loss)."""
    parts = []
    for key in keys:
        est = metrics.get(key) if hasattr(metrics, "get") else None
        text = units.caption(key, None if est is None else float(est.value))
        if key == "brier" and loss != "Brier":
            text = text.replace("Brier", loss, 1)
        parts.append(text)
    return " · ".join(parts)


class _TitleItem(pg.LabelItem):
    """A panel's title (or its legend below the plots) whose text never widens its column: the text wraps at the
    panel's width, and the item grows to the lines it takes (a word longer than the panel is clipped at its edge)."""

    def __init__(self):
        super().__init__("", justify="left")
        self.setFlag(self.GraphicsItemFlag.ItemClipsChildrenToShape, True)

    def resizeEvent(self, ev):  # noqa: N802 (pyqtgraph override)
        width = self.rect().width()
        if width > 1 and abs(self.item.textWidth() - width) > 0.5:
            self.item.setTextWidth(width)          # wrap here: the height follows in updateMin
        super().resizeEvent(ev)

    def updateMin(self):  # noqa: N802 (pyqtgraph override)
        bounds = self.itemRect()
        self.setMinimumWidth(0)
        self.setMinimumHeight(bounds.height())
        self._sizeHint = {QtCore.Qt.SizeHint.MinimumSize: (0, bounds.height()),
                          QtCore.Qt.SizeHint.PreferredSize: (0, bounds.height()),
                          QtCore.Qt.SizeHint.MaximumSize: (-1, -1), QtCore.Qt.SizeHint.MinimumDescent: (0, 0)}
        self.updateGeometry()

    def clipped(self) -> bool:
        """Whether some of the text lies outside the item (it is drawn cut)."""
        text = self.itemRect()
        return self.isVisible() and (text.width() > self.rect().width() + 1 or text.height() > self.rect().height() + 1)


class _Panel:
    """One panel: title, accuracy plot, density strip and the series of its items."""

    def __init__(self, view: "FigureView", spec: PanelSpec, row: int, col: int, colors: dict, dashes: dict,
                 show_x: bool, show_y: bool) -> None:
        self.spec = spec
        layout = pg.GraphicsLayout()
        layout.setContentsMargins(2, 2, 2, 2)
        layout.layout.setVerticalSpacing(1)
        view.ci.addItem(layout, row=row, col=col)
        self.layout = layout
        self.title = _TitleItem()
        layout.addItem(self.title, row=0, col=0)
        self.top = layout.addPlot(row=1, col=0)
        self.bottom = layout.addPlot(row=2, col=0)
        layout.layout.setRowStretchFactor(1, 4)
        layout.layout.setRowStretchFactor(2, 1)
        self.bottom.setXLink(self.top)
        self.show_x, self.show_y = show_x, show_y
        self.first = row == 0 and col == 0
        self.diagonal = pg.PlotCurveItem(x=np.array([0.0, 1.0]), y=np.array([0.0, 1.0]), antialias=True)
        self.diagonal.setZValue(-20)
        self.top.addItem(self.diagonal, ignoreBounds=True)
        self.floor_lines = []
        k = spec.k
        if k > 1:               # where no top-label confidence can be: shaded, so the empty region reads as such
            for plot, ymax in ((self.top, 1 + _Y_PAD), (self.bottom, 1.1)):
                region = pg.LinearRegionItem(values=(0.0, 1.0 / k), movable=False)
                region.setZValue(-25)
                for line in region.lines:
                    line.setPen(pg.mkPen(None))
                plot.addItem(region, ignoreBounds=True)
                self.floor_lines.append(region)
        self.legend = pg.TextItem(anchor=(1, 1))
        self.legend.setZValue(50)
        self.top.addItem(self.legend, ignoreBounds=True)
        # the legend below the plots instead, once inside it would cover data or not fit (figure_fit.place_legends)
        self.legend_outside = False
        self.legend_below = _TitleItem()
        self.legend_below.setVisible(False)
        self.legend_html = ""
        self.series: list[Series] = []
        for it in spec.items:
            s = Series(it.result, colors.get(it.color_key, "#8C8C8C"), self.top, self.bottom, k=it.k,
                       dash=DASH_STYLES.get(dashes.get(it.dash_key, "solid")), faint=it.faint, name=it.label)
            s.item = it
            s.band_on = it.band and not it.faint
            s.line_width = view.line_px
            if it.faint:
                s.curve.setZValue(5)
            self.series.append(s)
        attach_corp(self.series, self.top, {s.name: it.corp for s, it in zip(self.series, spec.items)
                                            if it.corp is not None}, True)    # bandwidth-free: drawn once
        for plot in (self.top, self.bottom):
            plot.setMouseEnabled(x=False, y=False)
            plot.setMenuEnabled(False)
            plot.hideButtons()
            plot.vb.disableAutoRange()
            plot.showAxis("top")
            plot.showAxis("right")
            for side in ("top", "right"):
                plot.getAxis(side).setStyle(showValues=False, tickLength=-3)
            for side in ("left", "bottom"):
                plot.getAxis(side).setStyle(tickLength=-4, tickTextOffset=2, hideOverlappingLabels=False)
            for side in ("bottom", "top"):
                plot.getAxis(side).setTicks(unit_ticks(0.2, 0.1))
        self.top.setYRange(-_Y_PAD, 1 + _Y_PAD, padding=0)
        self.bottom.setYRange(0.0, 1.1, padding=0)
        for side in ("left", "right"):
            self.top.getAxis(side).setTicks(unit_ticks(0.2, 0.1))
            self.bottom.getAxis(side).setTicks([[(0.0, ""), (1.0, "")]])
        self.top.getAxis("bottom").setStyle(showValues=False)
        self.top.getAxis("bottom").setHeight(3)
        self.bottom.getAxis("top").setHeight(3)
        self.top.getAxis("right").setWidth(round(view.font_px * 0.7))     # room for the "1" under the edge
        self.bottom.getAxis("right").setWidth(round(view.font_px * 0.7))

    def style(self, view: "FigureView", t: Theme) -> None:
        fg = t.foreground
        font = QtGui.QFont()
        font.setPixelSize(max(6, round(view.font_px * 0.9)))
        label_style = {"color": fg, "font-size": f"{view.font_px:.1f}px"}
        for plot in (self.top, self.bottom):
            for side in ("left", "bottom", "top", "right"):
                ax = plot.getAxis(side)
                ax.setPen(pg.mkPen(fg, width=1))
                ax.setTextPen(pg.mkPen(fg))
                ax.setTickFont(font)
                ax.enableAutoSIPrefix(False)
        width = round(view.font_px * 3.6)        # tick labels and the rotated axis title side by side
        for plot in (self.top, self.bottom):
            plot.getAxis("left").setWidth(width if self.show_y else round(view.font_px * 1.6))
            plot.getAxis("left").setStyle(showValues=self.show_y)
        self.top.setLabel("left", self.spec.y_label if self.show_y else "", **label_style)
        self.bottom.setLabel("left", "density" if self.show_y else "", **label_style)
        self.bottom.getAxis("bottom").setStyle(showValues=True)
        self.bottom.setLabel("bottom", self.spec.x_label if self.show_x else "", **label_style)
        self.bottom.getAxis("bottom").setHeight(round(view.font_px * (2.8 if self.show_x else 1.5)))
        self.diagonal.setPen(pg.mkPen(t.diagonal, width=1, style=QtCore.Qt.PenStyle.DashLine))
        for region in self.floor_lines:
            region.setBrush(pg.mkBrush(qcolor(t.grid, max(12, t.grid_alpha // 2))))
        for s in self.series:
            s.apply_theme(t)
        self.legend.fill = pg.mkBrush(qcolor(t.legend_fill, t.legend_alpha))
        self.legend.border = pg.mkPen(t.legend_border, width=1)
        self.update_title(view, t)

    def update_title(self, view: "FigureView", t: Theme) -> None:
        spec = self.spec
        text = f"<b>{html.escape(spec.title)}</b>" if spec.title else ""
        faint = [s for s in self.series if s.faint]
        if spec.subtitle:
            sub = html.escape(spec.subtitle)
            if (view.wrap_subtitles or view.columns >= 3) and " · " in sub:      # narrow window panels: the numbers on two lines
                head, _, last = sub.rpartition(" · ")
                sub = f"{head}<br>{last}"
            if self.first and faint and len(view.panels) > 1:       # say once what the grey curve is
                sub += f" · grey: {html.escape(faint[0].name.lower())}"
            if self.first:                                   # and what pale parts and thin lines mean
                drawn = [s for p in view.panels for s in p.series if not s.faint and s.name not in view.hidden]
                sub += "".join(f" · {html.escape(n)}" for n in curve_notes(drawn, view.ci_band))
            text += f"<br><span style='color:{t.muted}; font-size:{view.font_px * 0.8:.1f}px'>{sub}</span>"
        self.title.setText(f"<span style='color:{t.foreground}'>{text}</span>", size=f"{view.font_px:.1f}px")
        self.title.setVisible(bool(text))
        shown = [s for s in self.series if not s.faint and s.name not in view.hidden]
        if len(shown) < 2:
            self.legend.hide()
            self.legend_below.setVisible(False)
            return
        rows = []
        for s in shown:
            color = themed_color(s.color, t.name)
            dash = "&#9473;&#9473;" if s.dash is None else "&#9476;&#9476;"
            if s.faint:
                color = t.muted
            # a split of a curve (an epistemic tercile) gives its own number (its n) in place of the ECE
            number = getattr(s.result, "legend_text", None) or legend_numbers(s.result.metrics, ('ece',))
            rows.append(f"<tr><td><span style='color:{color}; font-weight:bold'>{dash}</span></td>"
                        f"<td style='padding-left:3px'>{html.escape(s.name)}</td>"
                        f"<td align='right' style='padding-left:6px'>"
                        f"{'' if s.faint and len(view.panels) > 1 else html.escape(number)}"
                        f"</td></tr>")
        self.legend_html = (f"<table cellspacing='0' style='color:{t.foreground}; "
                            f"font-size:{view.font_px * 0.9:.1f}px'>" + "".join(rows) + "</table>")
        if self.legend_outside:
            self.legend.hide()
            self.legend_below.setText(self.legend_html)
            self.legend_below.setVisible(True)
            return
        self.legend.setHtml(self.legend_html)
        self.legend.setPos(0.985, 0.02)       # bottom right: above it the over-confident curves rarely reach
        self.legend.show()

    def move_legend_below(self, view: "FigureView") -> None:
        """From now on the legend is drawn under the panel's plots (this panel's lifetime: it never jumps back)."""
        if not self.legend_outside:
            self.legend_outside = True
            self.layout.addItem(self.legend_below, row=3, col=0)
            self.update_title(view, view.theme)

    def text_px(self) -> float:
        """The height the panel's text takes (its title, a legend under the plots), in pixels."""
        below = self.legend_below.minimumHeight() if self.legend_outside and self.legend_below.isVisible() else 0.0
        return (self.title.minimumHeight() if self.title.isVisible() else 0.0) + below


class FigureView(pg.GraphicsLayoutWidget):
    """The panels of a figure, laid out in a grid (``grid_shape``), sharing the bandwidth and x range;
    ``panels_changed`` after the panels are rebuilt or restyled (figure_fit lays them out again)."""

    panels_changed = QtCore.Signal()

    def __init__(self, parent=None, *, theme: str = "light", font_pt: float = 10.0, line_width_pt: float = 1.5):
        super().__init__(parent)
        self.wrap_subtitles = False
        self.columns = 1
        self.font_px = font_pt * LOGICAL_DPI / 72
        self.line_px = line_width_pt * LOGICAL_DPI / 72
        self.theme = THEMES[theme]
        self.hidden: set[str] = set()
        self.bands = True
        self.ci_band = False        # the curves' confidence bands (``ci`` is pyqtgraph's central item)
        self.band_hidden: set[str] = set()
        self.panels: list[_Panel] = []
        self.specs: list[PanelSpec] = []
        self.fixed_columns: Optional[int] = None    # the window's fitted columns (figure_fit); None: grid_shape
        self._bandwidth, self._kernel = 0.05, "gaussian"
        self._x = (0.0, 1.0)
        self.ci.setContentsMargins(4, 4, 12, 4)
        self.setBackground(self.theme.background)

    # ---------------------------------------------------------------------------------------------- building
    def set_panels(self, panels: Sequence[PanelSpec]) -> None:
        """Replace every panel by ``panels``, laid out in ``grid_shape(len(panels))`` (or ``fixed_columns``)."""
        self.specs = list(panels)
        for p in self.panels:
            for s in p.series:
                s.remove(p.top, p.bottom)
        self.ci.clear()
        self.panels = []
        items = [it for p in panels for it in p.items]
        colors = assign_colors(it.color_key for it in items)
        dashes = assign_dashes(it.dash_key for it in items)
        rows, cols = grid_shape(len(panels))
        if self.fixed_columns and len(panels) > 1:
            cols = max(1, min(int(self.fixed_columns), len(panels)))
        self.columns = cols
        for i, spec in enumerate(panels):
            r, c = divmod(i, cols)
            last_row = i + cols >= len(panels)
            self.panels.append(_Panel(self, spec, r, c, colors, dashes, show_x=last_row, show_y=c == 0))
        for c in range(cols):
            self.ci.layout.setColumnStretchFactor(c, 1)
        for c in range(cols, 8):                  # columns of a previous layout take no room
            self.ci.layout.setColumnStretchFactor(c, 0)
        self._restyle()
        self.set_x_range(*self._x)
        self._refresh()
        self.panels_changed.emit()

    def _restyle(self) -> None:
        self.setBackground(self.theme.background)
        for p in self.panels:
            for s in p.series:
                s.line_width = self.line_px
            n = sum(1 for s in p.series if s.band_on)
            for s in p.series:
                s.band_alpha_scale = band_alpha_scale(n)
            p.style(self, self.theme)

    def _refresh(self) -> None:
        for p in self.panels:
            for s in p.series:
                on = s.name not in self.hidden
                if on:
                    s.update(self._bandwidth, self._kernel)
                s.set_shown(on, band=s.band_on and self.bands and s.item.color_key not in self.band_hidden,
                            ci=self.ci_band and not s.faint, bins=False, density=not s.faint and s.item.density)
        for p in self.panels:           # after every curve: the first panel's title notes what all of them show
            p.update_title(self, self.theme)

    def set_columns(self, columns: Optional[int]) -> None:
        """Lay the panels out in ``columns`` columns (None: ``grid_shape``); rebuilt only when that changes."""
        if columns != self.fixed_columns:
            self.fixed_columns = columns
            if self.specs:
                self.set_panels(self.specs)

    # ---------------------------------------------------------------------------------------------- public API
    def set_bandwidth(self, bandwidth: float, kernel: str = "gaussian") -> None:
        """Every curve at ``bandwidth`` (confidence units) and ``kernel``."""
        self._bandwidth, self._kernel = float(bandwidth), str(kernel).lower()
        self._refresh()

    def set_theme(self, name: str) -> None:
        """Redraw in theme ``name`` ("light" or "dark")."""
        self.theme = THEMES[name]
        self._restyle()
        self._refresh()
        self.panels_changed.emit()

    def set_style(self, *, font_pt: Optional[float] = None, line_width_pt: Optional[float] = None) -> None:
        """The font size and curve width, in points (None: unchanged)."""
        if font_pt is not None:
            self.font_px = float(font_pt) * LOGICAL_DPI / 72
        if line_width_pt is not None:
            self.line_px = float(line_width_pt) * LOGICAL_DPI / 72
        self._restyle()
        self._refresh()
        self.panels_changed.emit()

    def set_bands(self, on: bool, color_key: Optional[str] = None) -> None:
        """All bands on/off, or (``color_key`` given) the bands of that item only."""
        if color_key is None:
            self.bands = bool(on)
        elif on:
            self.band_hidden.discard(color_key)
        else:
            self.band_hidden.add(color_key)
        self._refresh()

    def set_ci(self, on: bool) -> None:
        """The curves' pointwise confidence bands on or off (drawn where computed at the current bandwidth)."""
        self.ci_band = bool(on)
        self._refresh()

    def set_hidden(self, labels) -> None:
        """Hide the items with these labels, show the others."""
        self.hidden = set(labels)
        self._refresh()

    def set_x_range(self, lo: float, hi: float) -> None:
        """The confidence range [lo, hi] of every panel."""
        self._x = (float(lo), float(hi))
        ticks = x_ticks(*self._x)
        for p in self.panels:
            p.top.setXRange(self._x[0], self._x[1], padding=0)
            for plot in (p.top, p.bottom):
                for side in ("bottom", "top"):
                    plot.getAxis(side).setTicks(ticks)

    def x_range(self) -> tuple[float, float]:
        """The confidence range (lo, hi) shown."""
        return self._x

    @property
    def bandwidth(self) -> tuple[float, str]:
        """(bandwidth, kernel) the curves are drawn at."""
        return self._bandwidth, self._kernel

    def domain_floor(self) -> float:
        """The smallest top-label confidence any panel can show (1/K of the run with the most classes)."""
        return max((domain_floor(p.spec.k) for p in self.panels), default=0.0)

    def all_series(self) -> list[tuple[int, Series]]:
        """(panel index, Series) of every curve drawn."""
        return [(i, s) for i, p in enumerate(self.panels) for s in p.series]
