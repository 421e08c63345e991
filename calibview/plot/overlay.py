"""The overlay layout's plots, as functions over the canvas's two PlotItems (accuracy above, density below):
their axes, ticks and grid lines, their style in a theme, and the legend's table of numbers. No state here."""

from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from calibview.core.reports import units
from calibview.core.stats.smoothing import MIN_EFFECTIVE_N
from calibview.plot.corp.items import corp_note
from calibview.plot.navigation import unit_ticks, x_ticks
from calibview.plot.theme import Theme, themed_color

__all__ = ["setup_axes", "style_axes", "legend_table", "FONT_PT", "Y_PAD"]

Y_PAD = 0.02
AXIS_WIDTH = 58             # fixed left-axis width, so that both plots' x axes line up
FONT_PT = 10


def setup_axes(top: pg.PlotItem, bottom: pg.PlotItem) -> list[pg.PlotCurveItem]:
    """Axes, ticks, ranges and mouse behaviour of the accuracy plot ``top`` and the density strip ``bottom`` over
    confidence [0, 1]; returns the grid-line items it adds (one per plot), which ``set_theme`` colours."""
    for plot in (top, bottom):
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
        plot.getAxis("left").setWidth(AXIS_WIDTH)
        plot.getAxis("right").setWidth(6)
        for side in ("bottom", "top"):
            plot.getAxis(side).setTicks(x_ticks(0.0, 1.0))
        plot.setXRange(0.0, 1.0, padding=0)
    top.setYRange(-Y_PAD, 1.0 + Y_PAD, padding=0)     # a curve at accuracy 1 stays off the frame
    bottom.setYRange(0.0, 1.08, padding=0)
    for side in ("left", "right"):
        top.getAxis(side).setTicks(unit_ticks(0.2, 0.1))
        bottom.getAxis(side).setTicks([[(0.0, "0"), (0.5, "0.5"), (1.0, "1")]])
    top.getAxis("bottom").setStyle(showValues=False)
    top.getAxis("bottom").setHeight(6)
    bottom.getAxis("top").setHeight(4)
    # Own grid lines: pyqtgraph's axis grid would also clip the "0" and "1" labels at the plot's edges.
    grids = []
    for plot, ys in ((top, (0.2, 0.4, 0.6, 0.8)), (bottom, (0.5,))):
        xs = (0.2, 0.4, 0.6, 0.8)
        gx = [v for x in xs for v in (x, x)] + [v for _ in ys for v in (0.0, 1.0)]
        gy = [v for _ in xs for v in (0.0, 1.1)] + [v for y in ys for v in (y, y)]
        grid = pg.PlotCurveItem(x=np.array(gx), y=np.array(gy), connect="pairs")
        grid.setZValue(-30)
        plot.addItem(grid, ignoreBounds=True)
        grids.append(grid)
    return grids


def style_axes(top: pg.PlotItem, bottom: pg.PlotItem, t: Theme) -> None:
    """Axis pens, tick fonts and axis titles of both plots in theme ``t``."""
    font = QtGui.QFont()
    font.setPointSizeF(FONT_PT - 1)
    label_style = {"color": t.foreground, "font-size": f"{FONT_PT}pt"}
    for plot in (top, bottom):
        for side in ("left", "bottom", "top", "right"):
            ax = plot.getAxis(side)
            ax.setPen(pg.mkPen(t.foreground, width=1))
            ax.setTextPen(pg.mkPen(t.foreground))
            ax.setTickFont(font)
            ax.enableAutoSIPrefix(False)
    top.setLabel("left", "accuracy (kernel estimate)", **label_style)
    bottom.setLabel("left", "density", **label_style)
    bottom.setLabel("bottom", "confidence", **label_style)


def set_title(item: pg.LabelItem, view: pg.GraphicsLayoutWidget, t: Theme, title: str, sub: str) -> None:
    """The canvas's title line: ``title`` in bold, then ``sub`` (the kernel and bandwidth) muted, in theme ``t``."""
    head = f"<b>{html.escape(title)}</b>&nbsp;&nbsp;&nbsp;" if title else ""
    item.setText(f"<span style='color:{t.foreground}'>{head}</span>"
                 f"<span style='color:{t.muted}'>{html.escape(sub)}</span>", size=f"{FONT_PT}pt")
    # LabelItem makes the text's width its minimum, which widens the whole layout past a narrow view (the plots
    # then run off its right edge): a long title is cut instead, and the layout put back into the view.
    item.setMinimumWidth(0)
    ci = view.ci
    if ci.geometry().width() > view.width():
        ci.setGeometry(QtCore.QRectF(0, 0, view.width(), view.height()))


def curve_notes(shown: Sequence, ci: bool) -> list[str]:
    """What the drawn curves' styles mean, for a legend: the pale part of a curve (``Series.has_thin``) and, with
    ``ci`` on, the confidence band's lines, or why they are missing (computed at another bandwidth); the CORP
    curves' steps and bands where they are drawn (plot.corp.items.corp_note)."""
    notes = []
    if any(s.has_thin for s in shown):
        notes.append(f"pale: fewer than {MIN_EFFECTIVE_N} samples under the kernel")
    if ci:
        levels = {round(100 * s.result.curve_band.level) for s in shown if s.has_ci}
        if levels:
            notes.append(f"thin lines: {'/'.join(str(v) for v in sorted(levels))} % confidence band")
        if any(getattr(s.result, "curve_band", None) is not None and not s.has_ci for s in shown):
            bands = [s.result.curve_band for s in shown if getattr(s.result, "curve_band", None) is not None]
            notes.append(f"confidence band at h = {bands[0].bandwidth:g} only")
        elif not levels:
            notes.append("no confidence band: evaluated without resamples")
    corp = corp_note(shown)
    return notes + ([corp] if corp else [])


def legend_table(shown: Sequence, t: Theme, *, compact: bool, stale: bool, notes: Sequence[str] = (),
                 terciles: Sequence = (), tercile_of: str = "") -> str:
    """The legend's HTML table for the shown ``curve_items.Series`` in theme ``t``: a colour swatch, the label and
    ECE %, CAL ×100 and TOT ×100 of each; ``compact`` (side by side with other splits): short names and ECE only;
    ``stale``: CAL was computed at another bandwidth than the one drawn (shown as "…"); ``notes``: lines under
    the table (``curve_notes``); ``terciles``: the Series of the epistemic tercile curves of the calibrator
    labelled ``tercile_of``, listed under the calibrators with their n."""
    cell = "style='padding: 1px 5px 1px 5px'"
    num = "style='padding: 1px 5px 1px 5px' align='right'"
    if compact:            # side by side with other splits: ECE only (the table has the rest)
        # short names (the Shown list pairs them with labels and colours), so the legend fits a narrow plot
        rows = [f"<tr style='color:{t.muted}'><td></td><td {cell}></td><td {num}>ECE</td></tr>"]
        rows += [f"<tr><td {cell}><span style='color:{themed_color(s.color, t.name)}; font-weight:bold'>"
                 f"&#9473;&#9473;</span></td><td {cell}>{html.escape(s.name)}</td>"
                 f"<td {num}>{_fmt(s.result.metrics, 'ece', '%')}</td></tr>" for s in shown]
    else:
        rows = [f"<tr style='color:{t.muted}'><td></td><td {cell}></td><td {num}>ECE %</td><td {num}>CAL ×100</td>"
                f"<td {num}>TOT ×100</td></tr>"]
        for s in shown:
            m = s.result.metrics
            cal = "…" if stale else _fmt(m, 'cal', bare=True)
            swatch = f"<span style='color:{themed_color(s.color, t.name)}; font-weight:bold'>&#9473;&#9473;</span>"
            rows.append(
                f"<tr><td {cell}>{swatch}</td><td {cell}>{html.escape(s.result.label)}</td>"
                f"<td {num}>{_fmt(m, 'ece', bare=True)}</td><td {num}>{cal}</td>"
                f"<td {num}>{_fmt(m, 'tot', bare=True)}</td></tr>")
        losses = sorted({getattr(s.result, "loss", "Brier") for s in shown})
        rows.append(f"<tr style='color:{t.muted}'><td></td><td colspan='4' {cell}>"
                    f"<small>CAL at h; TOT = {html.escape(' / '.join(losses))}, any h</small></td></tr>")
    if terciles:
        head = f"{tercile_of} by " if tercile_of else ""
        rows.append(f"<tr style='color:{t.muted}'><td></td><td colspan='4' {cell}>{html.escape(head)}epistemic "
                    f"(MI terciles)</td></tr>")
        rows += [f"<tr><td {cell}><span style='color:{themed_color(s.color, t.name)}; font-weight:bold'>"
                 f"{_DASH_GLYPHS.get(s.dash, '&#9476;&#9476;')}</span></td><td {cell}>"
                 f"{html.escape(s.name.split(' ')[0])}</td><td {num}>{html.escape(s.result.legend_text)}</td></tr>"
                 for s in terciles]
    rows += [f"<tr style='color:{t.muted}'><td></td><td colspan='4' {cell}><small>{html.escape(n)}</small></td></tr>"
             for n in notes]
    return (f"<table cellspacing='0' style='color:{t.foreground}; font-size:{FONT_PT - 1}pt'>"
            + "".join(rows) + "</table>")


#: the legend's swatch of each dash style: dashed, dotted, dash-dotted
_DASH_GLYPHS = {QtCore.Qt.PenStyle.DashLine: "&#9476;&#9476;", QtCore.Qt.PenStyle.DotLine: "&#183;&#183;&#183;&#183;",
                QtCore.Qt.PenStyle.DashDotLine: "&#8211;&#183;&#8211;"}


def _fmt(metrics, key: str, suffix: str = "", bare: bool = False) -> str:
    """The legend's number of metric ``key`` in the table's convention (``core.reports.units``: ECE in %, CAL and
    TOT x100, two decimals); ``bare``: without the unit, which the column header states."""
    est = metrics.get(key)
    text = units.fmt(key, None if est is None else float(est.value))
    return text if bare or not suffix else f"{text}{suffix}"
