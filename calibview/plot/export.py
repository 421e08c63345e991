"""Writes a figure (``FigureView`` of ``PanelSpec`` panels) as PNG, SVG or PDF at a physical size.

- PNG: ``width_in * dpi`` pixels wide (7 in at 300 DPI: 2100 px), the DPI in the pHYs chunk, the settings in a
  tEXt chunk ("Description"; "Title" the figure's title);
- SVG: vector, text with standard font names, the settings in <title>/<desc>;
- PDF: vector with embedded fonts (Qt's PDF engine), the settings in the document title.

The export theme is light by default whatever the screen's theme. Works from a plain script (creates an
offscreen QApplication when there is none).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Sequence

from PySide6 import QtCore, QtGui, QtWidgets

from calibview.core.io.safe_io import atomic_write
from calibview.plot.curve_items import set_export_quality
from calibview.plot.figure import LOGICAL_DPI, FigureView, grid_shape
from calibview.plot.figure_fit import settle
from calibview.plot.render_png import ensure_app, paint_view, write_png
from calibview.plot.spec import FigureOptions, PanelSpec

__all__ = ["render_figure", "figure_height_in", "export_view", "write_view", "ensure_app"]


def figure_height_in(n_panels: int, width_in: float, font_pt: float = 8.0) -> float:
    """A height that gives each panel a square-ish accuracy plot over its density strip, plus the text."""
    rows, cols = grid_shape(n_panels)
    if n_panels <= 1:                   # one plot: a landscape-ish figure, not a tall square-plus-strip
        return round(min(max(width_in * 0.78, 1.5), 12.0), 3)
    panel_w = width_in / cols
    text = font_pt / 72 * (3.2 + (2.6 if n_panels > 1 else 0.0))     # axis labels, title and numbers per row
    h = rows * (panel_w * 1.08 + text) + font_pt / 72 * 2
    return round(min(max(h, 1.5), width_in * 2.5), 3)


def _layout(view: FigureView, w: int, h: int) -> None:
    view.setAttribute(QtCore.Qt.WidgetAttribute.WA_DontShowOnScreen, True)
    view.setMinimumSize(1, 1)
    view.resize(w, h)
    view.show()
    QtWidgets.QApplication.processEvents()
    QtWidgets.QApplication.sendPostedEvents()


def export_view(view: FigureView, path, fmt: str, options: FigureOptions, height_in: float) -> Path:
    """Writes the laid-out ``view`` (resized here to the options' size in logical pixels) as ``fmt``."""
    w, h = round(options.width_in * LOGICAL_DPI), round(height_in * LOGICAL_DPI)
    _layout(view, w, h)
    if settle(view):                 # a legend went under its plots: lay out once more
        _layout(view, w, h)
    set_export_quality([s for _, s in view.all_series()], True)
    try:
        return _write(view, path, fmt, options, height_in, view.theme.background)
    finally:
        set_export_quality([s for _, s in view.all_series()], False)


def write_view(view: QtWidgets.QGraphicsView, path, fmt: str, options: FigureOptions, height_in: float,
               background: Optional[str] = None) -> Path:
    """Lay out any pyqtgraph ``view`` (a GraphicsLayoutWidget: the regression diagram) offscreen at the options'
    width and ``height_in`` and write it as ``fmt`` ("png", "pdf" or "svg"), atomically, as figures are
    written; ``background`` '#RRGGBB' (default: the options' theme's)."""
    from calibview.plot.theme import THEMES

    w, h = round(options.width_in * LOGICAL_DPI), round(height_in * LOGICAL_DPI)
    _layout(view, w, h)
    return _write(view, path, fmt, options, height_in, background or THEMES[options.theme].background)


def _paint_on(device, view, w: int, h: int, background: str) -> None:
    """Paint ``view`` over ``background`` on a vector ``device`` (a PDF writer, an SVG generator)."""
    painter = QtGui.QPainter(device)
    try:
        painter.fillRect(QtCore.QRectF(0, 0, w, h), QtGui.QColor(background))
        paint_view(view, painter, w, h)
    finally:
        painter.end()


def _write(view, path, fmt: str, options: FigureOptions, height_in: float, background: str) -> Path:
    path = Path(path)
    w, h = round(options.width_in * LOGICAL_DPI), round(height_in * LOGICAL_DPI)
    meta = options.describe()
    if fmt == "png":
        scale = options.dpi / LOGICAL_DPI
        pw, ph = options.pixels(height_in)
        img = QtGui.QImage(pw, ph, QtGui.QImage.Format.Format_ARGB32_Premultiplied)
        img.fill(QtGui.QColor(background))
        img.setDevicePixelRatio(scale)
        painter = QtGui.QPainter(img)
        try:
            paint_view(view, painter, w, h)
        finally:
            painter.end()
        img.setDevicePixelRatio(1.0)
        dpm = round(options.dpi / 0.0254)
        img.setDotsPerMeterX(dpm)
        img.setDotsPerMeterY(dpm)
        img.setText("Description", meta)
        img.setText("Software", "calibview")
        if options.title:
            img.setText("Title", options.title)
        write_png(img, path, what="figure")
    elif fmt == "pdf":
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            writer = QtGui.QPdfWriter(str(tmp))
            writer.setResolution(round(LOGICAL_DPI))
            writer.setPageSize(QtGui.QPageSize(QtCore.QSizeF(options.width_in, height_in),
                                               QtGui.QPageSize.Unit.Inch, "figure"))
            writer.setPageMargins(QtCore.QMarginsF(0, 0, 0, 0))
            writer.setTitle(meta)
            writer.setCreator("calibview")
            _paint_on(writer, view, w, h, background)
            del writer                   # closes the file before it is moved into place
            os.replace(tmp, path)
        finally:
            if tmp.exists():             # a failed write leaves no temporary file behind
                tmp.unlink()
    elif fmt == "svg":
        from PySide6 import QtSvg
        buf = QtCore.QBuffer()
        buf.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
        gen = QtSvg.QSvgGenerator()
        gen.setOutputDevice(buf)
        gen.setSize(QtCore.QSize(w, h))
        gen.setViewBox(QtCore.QRect(0, 0, w, h))
        gen.setResolution(round(LOGICAL_DPI))
        gen.setTitle(options.title or "calibview figure")
        gen.setDescription(meta)
        _paint_on(gen, view, w, h, background)
        atomic_write(path, bytes(buf.data()))
    else:
        raise ValueError(f"unknown figure format {fmt!r}")
    return path


def render_figure(panels: Sequence[PanelSpec], path, options: Optional[FigureOptions] = None, *,
                  bandwidth: float = 0.05, kernel: str = "gaussian", formats: Sequence[str] = (),
                  hidden_bands=(), x_range: Optional[tuple] = None) -> list[Path]:
    """Draws ``panels`` offscreen and writes ``path`` (its suffix is the format) or, with ``formats``, one file
    per format with that suffix; ``hidden_bands``: colour keys drawn without their band; ``x_range``: the
    confidence range shown (default [0, 1]). Returns the paths written."""
    ensure_app()
    options = options or FigureOptions()
    path = Path(path)
    fmts = list(formats) or [path.suffix.lstrip(".").lower() or "png"]
    height_in = options.height_in or figure_height_in(len(panels), options.width_in, options.font_pt)
    view = FigureView(theme=options.theme, font_pt=options.font_pt, line_width_pt=options.line_width_pt)
    out = []
    try:
        view.band_hidden = set(hidden_bands)
        view.set_bands(options.bands)
        view.ci_band = options.ci_band
        view.set_bandwidth(bandwidth, kernel)
        view.set_panels(panels)
        if x_range is not None:
            view.set_x_range(*x_range)
        for fmt in fmts:
            out.append(export_view(view, path.with_suffix("." + fmt), fmt, options, height_in))
    finally:
        view.hide()
        view.deleteLater()
        QtWidgets.QApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)
    return out
