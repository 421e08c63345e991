"""Renders a pyqtgraph view offscreen: an image of a widget at a scale, PNG and SVG files, and the QApplication
that rendering from a plain script needs.

Knows nothing of the canvas: ``CalibrationCanvas.image`` / ``export_png`` / ``export_svg`` hand it their view,
and ``export.export_view`` paints a figure through ``paint_view``.
"""

from __future__ import annotations

import importlib
import os
import sys
from contextlib import contextmanager

from PySide6 import QtCore, QtGui, QtWidgets

from calibview.core.io.safe_io import atomic_write

__all__ = ["ensure_app", "paint_view", "widget_image", "write_png", "write_svg", "layout_png"]

_APP: list = []     # keeps the QApplication made by ensure_app (and its message handler) alive for later calls


def ensure_app() -> None:
    """Make a QApplication if there is none, on the offscreen platform when there is no display, so that a plain
    script (``calibview report``) can render."""
    if QtWidgets.QApplication.instance() is None:
        if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        _APP.append(QtWidgets.QApplication([]))
        _APP.append(QtCore.qInstallMessageHandler(_quiet_offscreen_messages))


def _quiet_offscreen_messages(mode, context, message: str) -> None:
    """The offscreen platform warns on every shown window that it cannot propagate size hints: noise on the
    command line's stderr. Everything else is printed as Qt would."""
    if "propagateSizeHints" not in message:
        sys.stderr.write(message + "\n")


def paint_view(view: QtWidgets.QGraphicsView, painter: QtGui.QPainter, w: float, h: float) -> None:
    """Draw ``view`` (background and scene) into the rectangle (0, 0, w, h) of ``painter``'s device, in logical
    pixels, antialiased. The painter's device pixel ratio sets the resolution: vectors, text and cosmetic pens are
    redrawn at it, not upsampled."""
    painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
    painter.setRenderHint(QtGui.QPainter.RenderHint.TextAntialiasing, True)
    view.render(painter, QtCore.QRectF(0, 0, w, h), view.viewport().rect(),
                QtCore.Qt.AspectRatioMode.IgnoreAspectRatio)


@contextmanager
def offscreen_layout(make=None):
    """A white ``pg.GraphicsLayoutWidget`` (or the view ``make()`` returns, in its own colours) that is never shown
    on screen, deleted when the block ends (also when it raises): at once, not at the interpreter's exit, where
    Qt's teardown crashes on a widget left behind."""
    import pyqtgraph as pg

    ensure_app()
    if make is None:
        win = pg.GraphicsLayoutWidget()
        win.setBackground("w")
    else:
        win = make()
    try:
        win.setAttribute(QtCore.Qt.WidgetAttribute.WA_DontShowOnScreen, True)
        yield win
    finally:
        win.hide()
        win.deleteLater()
        QtWidgets.QApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)


def layout_png(build, path, width: int, height: int, *, scale: float = 2.0, what: str = "figure") -> None:
    """A figure of pyqtgraph plots drawn offscreen and written to ``path`` as PNG: ``build(win)`` adds the plots to
    a white ``pg.GraphicsLayoutWidget`` of ``width`` x ``height`` logical pixels, rendered at ``scale`` x (vectors
    and text redrawn at that resolution). The widget is deleted afterwards, also when ``build`` raises."""
    with offscreen_layout() as win:
        win.resize(int(width), int(height))
        build(win)
        win.show()
        QtWidgets.QApplication.processEvents()
        w, h = win.width(), win.height()
        img = QtGui.QImage(round(w * scale), round(h * scale), QtGui.QImage.Format.Format_ARGB32_Premultiplied)
        img.fill(QtGui.QColor("#FFFFFF"))
        img.setDevicePixelRatio(scale)
        painter = QtGui.QPainter(img)
        try:
            paint_view(win, painter, w, h)
        finally:
            painter.end()
        img.setDevicePixelRatio(1.0)
        write_png(img, path, what=what)


def _ensure_laid_out(widget: QtWidgets.QWidget) -> None:
    """Lay ``widget`` out at its size; a never-shown top-level widget (report's export) is shown off screen."""
    if widget.isWindow() and not widget.isVisible():
        widget.setAttribute(QtCore.Qt.WidgetAttribute.WA_DontShowOnScreen, True)
        widget.show()
    QtWidgets.QApplication.sendPostedEvents()
    widget.layout().activate()


def widget_image(widget: QtWidgets.QWidget, view: QtWidgets.QGraphicsView, background: str,
                 scale: float = 2.0) -> QtGui.QImage:
    """``view`` (laid out inside ``widget``, at ``widget``'s size) as an image of ``scale`` x that size in pixels on
    ``background`` ('#RRGGBB'); vector items are redrawn at that resolution."""
    scale = float(scale)
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    _ensure_laid_out(widget)
    size = widget.size()
    w, h = max(1, round(size.width() * scale)), max(1, round(size.height() * scale))
    img = QtGui.QImage(w, h, QtGui.QImage.Format.Format_ARGB32_Premultiplied)
    img.fill(QtGui.QColor(background))
    img.setDevicePixelRatio(scale)
    painter = QtGui.QPainter(img)
    try:
        paint_view(view, painter, size.width(), size.height())
    finally:
        painter.end()
    img.setDevicePixelRatio(1.0)
    return img


def write_png(image: QtGui.QImage, path, what: str = "diagram") -> None:
    """Encode ``image`` as PNG and write it to ``path`` atomically; OSError naming ``what`` if Qt cannot encode
    it."""
    buf = QtCore.QBuffer()
    buf.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buf, "PNG"):
        raise OSError(f"could not encode the {what} as PNG for {os.fspath(path)}")
    atomic_write(path, bytes(buf.data()))


def write_svg(widget: QtWidgets.QWidget, view: QtWidgets.QGraphicsView, path) -> None:
    """``view``'s scene (laid out inside ``widget``) as SVG through pyqtgraph's exporter, written atomically."""
    from pyqtgraph.exporters import SVGExporter
    _ensure_laid_out(widget)
    with _svg_close_path_fix():
        data = SVGExporter(view.scene()).export(toBytes=True)
    atomic_write(path, data)


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
