"""The canvas's screen-resolution exports (a mixin of CalibrationCanvas): image, PNG at a scale, SVG; and
render_diagram_png, the classic diagram.png of ``calibview report``. Publication figures: gui.figure_export."""

from __future__ import annotations

import importlib
import os
import sys
from contextlib import contextmanager

from PySide6 import QtCore, QtGui, QtWidgets

from calibview.core.reports.tables import atomic_write

__all__ = ["CanvasExportMixin", "render_diagram_png"]


class CanvasExportMixin:
    """Needs the canvas's _view, _series and _theme."""

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
    from calibview.plot.canvas import CalibrationCanvas
    canvas = CalibrationCanvas(theme=theme, toolbar=False)
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
