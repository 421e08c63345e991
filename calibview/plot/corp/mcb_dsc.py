"""The MCB-DSC plot (Dimitriadis, Gneiting & Jordan, PNAS 2021, Fig. 4): one point per calibrator (or per
compared run and calibrator) at its miscalibration MCB (x) and discrimination DSC (y) of the top-label Brier
score, over iso-score lines. Since score = MCB - DSC + UNC, the points of equal score lie on a line of slope 1;
each line is labelled with its score. Better is up and to the left. Values are shown ×100, as the table shows
the Brier score.

``McbDscView`` is the widget (the window's tab); ``render_mcb_dsc`` writes ``calibview report``'s mcb_dsc.png
(and .pdf / .svg) through the exports' atomic writer. The points come from core.reports.corp.mcb_dsc_points.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from calibview.plot.palette import assign_colors
from calibview.plot.theme import THEMES, qcolor, themed_color

__all__ = ["McbDscView", "render_mcb_dsc", "iso_levels", "SCALE"]

#: the axes' values are the decomposition's × SCALE (the table's convention for squared-error scores)
SCALE = 100.0
_SYMBOLS = ("o", "s", "t", "d", "star", "p", "h", "t1")


def iso_levels(x0: float, x1: float, y0: float, y1: float, unc: float, count: int = 5) -> list[float]:
    """About ``count`` round score values whose iso-lines (y = x + unc - score) cross the box [x0, x1] x [y0, y1]."""
    lo, hi = x0 - y1 + unc, x1 - y0 + unc          # the scores at the box's upper-left and lower-right corners
    if not hi > lo:
        return []
    raw = (hi - lo) / max(1, count)
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if m * step >= raw)
    first = math.ceil(lo / step) * step
    return [round(v, 12) for v in np.arange(first, hi, step) if lo < v < hi]


class McbDscView(pg.GraphicsLayoutWidget):
    """The MCB-DSC plot of a list of points (core.reports.corp.mcb_dsc_points' dicts, values unscaled), its
    legend table under the plot or (``legend_right``: a short, wide dock) to its right."""

    def __init__(self, parent=None, *, theme: str = "light", font_pt: float = 9.0, legend_right: bool = False) -> None:
        super().__init__(parent)
        self.theme = THEMES[theme]
        self.font_px = font_pt * 96 / 72
        self.points: list[dict] = []
        self.ci.setContentsMargins(6, 6, 14, 6)
        self.title = self.ci.addLabel("", row=0, col=0, justify="left")
        self.plot = self.ci.addPlot(row=1, col=0)
        self.legend = self.ci.addLabel("", row=1 if legend_right else 2, col=1 if legend_right else 0,
                                       justify="left")
        self.ci.layout.setRowStretchFactor(1, 1)
        self.ci.layout.setColumnStretchFactor(0, 1)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(x=False, y=False)
        self._drawn: list = []
        self.set_points([])

    def set_theme(self, name: str) -> None:
        """Redraw in theme ``name``."""
        self.theme = THEMES[name]
        self.set_points(self.points)

    def set_points(self, points: Sequence[dict], title: str = "") -> None:
        """Draw ``points`` (each with "label", "calibrator", "mcb", "dsc", "unc", "score"); [] shows a hint."""
        t = self.theme
        self.points = list(points)
        self.setBackground(t.background)
        for item in self._drawn:
            self.plot.removeItem(item)
        self._drawn = []
        fg = t.foreground
        font = QtGui.QFont()
        font.setPixelSize(max(7, round(self.font_px * 0.9)))
        style = {"color": fg, "font-size": f"{self.font_px:.1f}px"}
        for side in ("left", "bottom"):
            ax = self.plot.getAxis(side)
            ax.setPen(pg.mkPen(fg, width=1))
            ax.setTextPen(pg.mkPen(fg))
            ax.setTickFont(font)
            ax.enableAutoSIPrefix(False)
        self.plot.setLabel("bottom", "MCB ×100 (miscalibration, lower is better)", **style)
        self.plot.setLabel("left", "DSC ×100 (higher is better)", **style)
        self.title.setText(f"<span style='color:{fg}'><b>{html.escape(title or 'MCB-DSC: top-label Brier')}"
                           f"</b></span>", size=f"{self.font_px:.1f}px")
        pts = [p for p in self.points if np.isfinite([p["mcb"], p["dsc"], p["unc"]]).all()]
        if not pts:
            self.legend.setText(f"<span style='color:{t.muted}'>No decomposition yet: it comes with the CORP "
                                f"curves of the evaluation.</span>", size=f"{self.font_px * 0.9:.1f}px")
            return
        x = np.array([p["mcb"] for p in pts]) * SCALE
        y = np.array([p["dsc"] for p in pts]) * SCALE
        unc = pts[0]["unc"] * SCALE
        x0, x1 = 0.0, max(float(x.max()) * 1.2, 1e-3)
        pad = max(float(y.max() - y.min()) * 0.25, 0.05 * max(abs(float(y.max())), 1e-3))
        y0, y1 = float(y.min()) - pad, float(y.max()) + pad
        self.plot.setXRange(x0, x1, padding=0)
        self.plot.setYRange(y0, y1, padding=0)
        self._iso_lines(x0, x1, y0, y1, unc)
        colors = assign_colors(p["calibrator"] for p in pts)
        runs = list(dict.fromkeys(p.get("run", "") for p in pts))
        rows = []
        for i, p in enumerate(pts):
            c = themed_color(colors[p["calibrator"]], t.name)
            sym = _SYMBOLS[runs.index(p.get("run", "")) % len(_SYMBOLS)]
            dot = pg.ScatterPlotItem(x=[x[i]], y=[y[i]], symbol=sym, size=max(7, round(self.font_px * 0.85)),
                                     pen=pg.mkPen(t.background, width=1), brush=pg.mkBrush(c), antialias=True)
            dot.setZValue(20)
            self.plot.addItem(dot)
            self._drawn.append(dot)
            rows.append(f"<tr><td><span style='color:{c}'>{_glyph(sym)}</span></td>"
                        f"<td style='padding-left:4px'>{html.escape(p['label'])}</td>"
                        f"<td align='right' style='padding-left:10px'>MCB {x[i]:.3f}</td>"
                        f"<td align='right' style='padding-left:8px'>DSC {y[i]:.3f}</td>"
                        f"<td align='right' style='padding-left:8px'>score {p['score'] * SCALE:.3f}</td></tr>")
        uncs = [p["unc"] * SCALE for p in pts]
        notes = [f"dashed: equal score = MCB - DSC + UNC, UNC = {unc:.3f}"]
        if max(uncs) - min(uncs) > 1e-9:        # a calibrator that moves the arg-max changes the outcomes
            notes.append(f"(the first point's UNC; the others' range {min(uncs):.3f}-{max(uncs):.3f})")
        note = "<br>".join(html.escape(n) for n in notes)
        self.legend.item.setTextWidth(-1)
        self.legend.setText(f"<table cellspacing='0' style='color:{fg}'>{''.join(rows)}</table>"
                            f"<p style='color:{t.muted}; margin-top:4px'>{note}</p>",
                            size=f"{self.font_px * 0.9:.1f}px")

    def _iso_lines(self, x0: float, x1: float, y0: float, y1: float, unc: float) -> None:
        t = self.theme
        pen = pg.mkPen(qcolor(t.muted, 200), width=1, style=QtCore.Qt.PenStyle.DashLine)
        for s in iso_levels(x0, x1, y0, y1, unc):
            c = unc - s                            # the line y = x + c, clipped to the box
            xa, xb = max(x0, y0 - c), min(x1, y1 - c)
            if xb <= xa:
                continue
            line = pg.PlotCurveItem(x=np.array([xa, xb]), y=np.array([xa + c, xb + c]), pen=pen, antialias=True)
            line.setZValue(-5)
            # below and left of where the line leaves the box (top or right edge): inside the plot either way
            label = pg.TextItem(f"{s:g}", color=t.muted, anchor=(1.0, 0.0))
            label.setFont(_font(self.font_px * 0.8))
            label.setPos(xb, xb + c)
            for item in (line, label):
                self.plot.addItem(item, ignoreBounds=True)
                self._drawn.append(item)


def _font(px: float) -> QtGui.QFont:
    f = QtGui.QFont()
    f.setPixelSize(max(6, round(px)))
    return f


def _glyph(symbol: str) -> str:
    return {"o": "&#9679;", "s": "&#9632;", "t": "&#9660;", "d": "&#9670;", "star": "&#9733;"}.get(symbol, "&#9679;")


def render_mcb_dsc(points: Sequence[dict], path, options=None, formats: Sequence[str] = (),
                   title: str = "") -> list[Path]:
    """Write the MCB-DSC plot of ``points`` to ``path`` (its suffix the format) or, with ``formats``, one file
    per format ("png", "pdf", "svg"), at the FigureOptions' width, DPI, font and theme (default: 7 in at 300
    DPI); the height is 0.8 x the width plus the legend. Returns the paths written."""
    from calibview.plot.export import write_view
    from calibview.plot.render_png import offscreen_layout
    from calibview.plot.spec import FigureOptions

    options = options or FigureOptions()
    path = Path(path)
    fmts = list(formats) or [path.suffix.lstrip(".").lower() or "png"]
    with offscreen_layout(lambda: McbDscView(theme=options.theme, font_pt=options.font_pt)) as view:
        view.set_points(points, title)
        height_in = options.width_in * 0.72 + (len(points) + 2) * options.font_pt * 1.5 / 72
        return [write_view(view, path.with_suffix("." + fmt), fmt, options, height_in) for fmt in fmts]
