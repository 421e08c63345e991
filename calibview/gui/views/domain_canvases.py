"""Side-by-side diagrams of several evaluation splits (domains): one calibration canvas per split, same axes.

Draws only: each canvas gets its split's immutable results; the window feeds it Session.evaluations.
"""

from __future__ import annotations

from typing import Iterable, Optional

from PySide6 import QtCore, QtGui, QtWidgets


from calibview.plot.canvas import CalibrationCanvas
from calibview.plot.render_png import write_png


#: the interactive minimum of a single diagram, and of each one side by side (so two fit next to the docks)
SINGLE_MIN, SIDE_BY_SIDE_MIN = (320, 260), (200, 220)


def split_title(ev, short: bool = False) -> str:
    """The diagram's title; side by side the run is in the window title and the table caption."""
    if short:
        return f"{ev.request.eval_split} · N = {ev.n_eval:,}"
    return f"{ev.run.name} · {ev.request.eval_split} (N = {ev.n_eval:,}, K = {ev.k or '?'})"


class DomainCanvases(QtWidgets.QWidget):
    """The primary canvas (the reference split) and, with more than one eval split, one more canvas per split to
    its right. Every canvas has the fixed [0, 1] axes, so the splits read against the same scale. Listens to no
    Session signal: the window feeds it."""

    hover_changed = QtCore.Signal(str)

    def __init__(self, primary: CalibrationCanvas, parent: Optional[QtWidgets.QWidget] = None) -> None:
        super().__init__(parent)
        self.primary = primary
        self.extra: list[CalibrationCanvas] = []
        self._theme = primary.theme
        self._show_bins = False
        self._layout = QtWidgets.QHBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(2)
        self._layout.addWidget(primary, 1)
        primary.hover_changed.connect(self.hover_changed)

    def canvases(self) -> list[CalibrationCanvas]:
        """The primary canvas, then one per further eval split."""
        return [self.primary] + self.extra

    def set_evaluations(self, evaluations, bandwidth: float, kernel: str, visible: Iterable[str]) -> None:
        """One canvas per evaluation (eval split), in order; an empty tuple clears the primary one."""
        evaluations = tuple(evaluations)
        want = max(0, len(evaluations) - 1)
        while len(self.extra) > want:
            canvas = self.extra.pop()
            self._layout.removeWidget(canvas)
            canvas.deleteLater()
        while len(self.extra) < want:
            canvas = CalibrationCanvas(theme=self._theme)
            canvas.set_show_bins(self._show_bins)
            canvas.hover_changed.connect(self.hover_changed)
            self.extra.append(canvas)
            self._layout.addWidget(canvas, 1)
        if not evaluations:
            self.primary.set_results([])
            return
        visible = set(visible)
        for canvas in self.canvases():
            canvas.set_compact(bool(want), SIDE_BY_SIDE_MIN if want else SINGLE_MIN)
        for canvas, ev in zip(self.canvases(), evaluations):
            canvas.set_results(list(ev.results), title=split_title(ev, short=bool(want)),
                               computed_at=(ev.request.bandwidth, ev.request.kernel))
            canvas.set_bandwidth(bandwidth, kernel)
            canvas.set_visible(visible)

    def set_bandwidth(self, bandwidth: float, kernel: str) -> None:
        """Redraw every canvas's curves at this bandwidth and kernel."""
        for canvas in self.canvases():
            canvas.set_bandwidth(bandwidth, kernel)

    def set_visible(self, names) -> None:
        """Show only these calibrators (by name) on every canvas."""
        for canvas in self.canvases():
            canvas.set_visible(names)

    def set_show_bins(self, on: bool) -> None:
        """Draw (or hide) the reliability bars on every canvas."""
        self._show_bins = bool(on)
        for canvas in self.canvases():
            canvas.set_show_bins(on)

    def set_theme(self, name: str) -> None:
        """The light or dark theme of every canvas."""
        self._theme = name
        for canvas in self.canvases():
            canvas.set_theme(name)

    def image(self, scale: float = 2.0) -> QtGui.QImage:
        """Every split's diagram side by side, each redrawn at ``scale`` (as CalibrationCanvas.image)."""
        images = [c.image(scale) for c in self.canvases()]
        if len(images) == 1:
            return images[0]
        out = QtGui.QImage(sum(i.width() for i in images), max(i.height() for i in images),
                           QtGui.QImage.Format.Format_ARGB32_Premultiplied)
        out.fill(QtGui.QColor(QtCore.Qt.GlobalColor.white))
        painter = QtGui.QPainter(out)
        x = 0
        for img in images:
            painter.drawImage(x, 0, img)
            x += img.width()
        painter.end()
        return out

    def export_png(self, path, scale: float = 2.0) -> None:
        """Write :meth:`image` at ``scale`` as a PNG file (atomically); OSError when it cannot be encoded."""
        write_png(self.image(scale), path)
