"""The canvas's controls: layout (overlay or grid), bands, the confidence range (presets, wheel zoom and drag pan),
the legend that can be dragged, the hover cursor, and the Export… button. No numerics here."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

__all__ = ["CanvasToolbar", "DraggableLegend", "HoverCursor", "RANGE_PRESETS", "unit_ticks", "x_ticks"]

#: (label, key) of the confidence-range presets; "domain" is [1/K, 1].
RANGE_PRESETS = (("Full [0, 1]", "full"), ("[1/K, 1]", "domain"), ("High [0.8, 1]", "high"))


def x_ticks(lo: float, hi: float) -> list:
    """Explicit ticks for the confidence axis over [lo, hi]: "0" and "1" written as such, about 5 labelled ticks."""
    span = max(hi - lo, 1e-6)
    major = next(s for s in (0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001, 1e-4) if span / s >= 3.5 or s == 1e-4)
    minor = major / 2
    digits = max(1, len(f"{major:g}".split(".")[-1]) if "." in f"{major:g}" else 0)

    def label(v):
        if abs(v) < 1e-12:
            return "0"
        if abs(v - 1) < 1e-12:
            return "1"
        return f"{v:.{digits}f}"
    first = int(lo / minor) - 1
    majors, minors = [], []
    for i in range(first, int(hi / minor) + 2):
        v = round(i * minor, 10)
        if v < -1e-12 or v > 1 + 1e-12:
            continue
        if abs(v / major - round(v / major)) < 1e-6:
            # a label on the plot's edge is kept: nudged inside by far less than a pixel, as the linked strip's
            # range can end 1e-16 past it
            at = v + span * 1e-9 if abs(v - lo) < span * 1e-6 else v - span * 1e-9 if abs(v - hi) < span * 1e-6 else v
            majors.append((at, label(v)))
        else:
            minors.append((v, ""))
    return [majors, minors]


def unit_ticks(major: float, minor: float) -> list:
    """Explicit ticks on [0, 1]: labelled majors ("0", "0.2", ..., "1") every ``major`` and unlabelled minors
    every ``minor``, as pyqtgraph's ``setTicks`` takes them."""
    n_major, n_minor = int(round(1 / major)), int(round(1 / minor))
    majors = [(i * major, "0" if i == 0 else "1" if i == n_major else f"{i * major:.1f}") for i in range(n_major + 1)]
    minors = [(i * minor, "") for i in range(n_minor + 1) if abs(i * minor / major - round(i * minor / major)) > 1e-9]
    return [majors, minors]


class DraggableLegend(pg.TextItem):
    """The legend box: drag it anywhere over the plot (it keeps its place when the curves change); a double
    click puts it back in its default corner."""

    def __init__(self, default=(0.015, 0.985)):
        super().__init__(anchor=(0, 0))
        self.default = default
        self.frac = default             # (fraction of the x range, accuracy) of the top-left corner
        self.user_moved = False
        self.setAcceptedMouseButtons(QtCore.Qt.MouseButton.LeftButton)
        self.setCursor(QtCore.Qt.CursorShape.OpenHandCursor)
        self.setToolTip("Drag the legend elsewhere; double-click puts it back")

    def mouseDragEvent(self, ev):  # noqa: N802 (pyqtgraph override)
        if ev.button() != QtCore.Qt.MouseButton.LeftButton:
            ev.ignore()
            return
        ev.accept()
        parent = self.parentItem()
        if parent is None:
            return
        delta = parent.mapFromScene(ev.scenePos()) - parent.mapFromScene(ev.lastScenePos())
        self.setPos(self.pos() + delta)
        self.user_moved = True
        vb = self.getViewBox()
        if vb is not None:              # remember the place relative to the view, so zoom and pan keep it
            (x0, x1), _ = vb.viewRange()
            self.frac = ((self.pos().x() - x0) / max(x1 - x0, 1e-12), self.pos().y())

    def follow(self, lo: float, hi: float) -> None:
        """Keep the legend at its place in the plot when the confidence range changes."""
        self.setPos(lo + self.frac[0] * (hi - lo), self.frac[1])

    def mouseDoubleClickEvent(self, ev):  # noqa: N802 (Qt override)
        self.reset()
        ev.accept()

    def reset(self):
        """Back to the default corner."""
        self.user_moved = False
        self.frac = self.default
        vb = self.getViewBox()
        if vb is not None:
            self.follow(*vb.viewRange()[0])
        else:
            self.setPos(*self.default)


class CanvasToolbar(QtWidgets.QWidget):
    """One row above the diagram: Layout, Bands (all / per item), Range (presets), Reset zoom, Export…"""

    layout_changed = QtCore.Signal(str)
    bands_changed = QtCore.Signal(bool)
    ci_changed = QtCore.Signal(bool)
    item_band_changed = QtCore.Signal(str, bool)
    range_preset = QtCore.Signal(str)
    export_requested = QtCore.Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        row = QtWidgets.QHBoxLayout(self)
        row.setContentsMargins(6, 2, 6, 2)
        row.setSpacing(6)
        self.layout_box = QtWidgets.QComboBox()
        self.layout_box.addItem("Overlay", "overlay")
        self.layout_box.addItem("Grid", "grid")
        self.layout_box.setToolTip("Layout. Overlay: every calibrator in one plot. Grid: one panel each, shared "
                                   "axes, the uncalibrated curve faint in each")
        self.layout_box.currentIndexChanged.connect(lambda i: self.layout_changed.emit(self.layout_box.itemData(i)))
        self.bands = QtWidgets.QToolButton()
        self.bands.setText("Bands")
        self.bands.setCheckable(True)
        self.bands.setChecked(True)
        self.bands.setPopupMode(QtWidgets.QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        self.bands.setToolTip("Show the sharpness bands; the arrow hides or shows the band of one item")
        self.bands.toggled.connect(self.bands_changed)
        self.band_menu = QtWidgets.QMenu(self.bands)
        self.bands.setMenu(self.band_menu)
        self.ci = QtWidgets.QToolButton()
        self.ci.setText("CI")
        self.ci.setCheckable(True)
        self.ci.setShortcut(QtGui.QKeySequence("Ctrl+I"))
        self.ci.setToolTip("Show each curve's pointwise bootstrap confidence band (Ctrl+I): thin lines, unlike the "
                           "sharpness band, which is not a confidence interval. Drawn at the bandwidth the metrics "
                           "were computed at")
        self.ci.toggled.connect(self.ci_changed)
        self.range_box = QtWidgets.QComboBox()
        for label, key in RANGE_PRESETS:
            self.range_box.addItem(label, key)
        self.range_box.setToolTip("Range: the confidence range shown; the mouse wheel zooms and dragging pans it too")
        self.range_box.activated.connect(lambda i: self.range_preset.emit(self.range_box.itemData(i)))
        self.reset = QtWidgets.QToolButton()
        self.reset.setText("Reset")
        self.reset.setToolTip("Back to the full confidence range [0, 1]")
        self.reset.clicked.connect(lambda: self.range_preset.emit("full"))
        self.export = QtWidgets.QToolButton()
        self.export.setText("Export…")
        self.export.setToolTip("Export the figure as PNG, SVG or PDF: size, DPI, fonts, theme, layout")
        self.export.clicked.connect(self.export_requested)
        # no "Layout" / "Range" labels: the combos name their choices ("Overlay", "Full [0, 1]") and their tooltips
        # say what they set, and the row must leave the docks room at 1280 px with the MI and CORP toggles in it
        row.addWidget(self.layout_box)
        row.addWidget(self.bands)
        row.addWidget(self.ci)
        row.addSpacing(8)
        row.addWidget(self.range_box)
        row.addWidget(self.reset)
        self._extra_at = row.count()
        row.addStretch(1)
        row.addWidget(self.export)

    def add_extra(self, widget: QtWidgets.QWidget) -> None:
        """Put a window control (one that draws on this diagram) in this row, after Range, before the stretch."""
        self.layout().insertWidget(self._extra_at, widget)
        self._extra_at += 1

    def set_items(self, names: Iterable[tuple[str, str]], hidden_bands: set) -> None:
        """The per-item band actions: (name, label) pairs."""
        self.band_menu.clear()
        for name, label in names:
            act = self.band_menu.addAction(f"Band of {label}")
            act.setCheckable(True)
            act.setChecked(name not in hidden_bands)
            act.toggled.connect(lambda on, n=name: self.item_band_changed.emit(n, on))


class HoverCursor:
    """A vertical line at the pointer's confidence across ``plots`` (x-linked PlotItems in ``scene``):
    ``readout(x)`` gives the text for confidence x in [0, 1], handed to ``emit`` ("" once the pointer leaves)."""

    def __init__(self, plots: Sequence[pg.PlotItem], scene, readout: Callable[[float], str],
                 emit: Callable[[str], None]) -> None:
        self.plots, self._readout, self._emit = tuple(plots), readout, emit
        self.lines = []
        for plot in self.plots:
            line = pg.InfiniteLine(angle=90, movable=False)
            line.setZValue(40)
            line.hide()
            plot.addItem(line, ignoreBounds=True)
            self.lines.append(line)
        scene.sigMouseMoved.connect(self._on_scene_mouse_moved)

    def set_pen(self, pen) -> None:
        """The lines' pen."""
        for line in self.lines:
            line.setPen(pen)

    def _on_scene_mouse_moved(self, pos) -> None:
        pos = QtCore.QPointF(pos)
        for plot in self.plots:
            if plot.vb.sceneBoundingRect().contains(pos):
                x = min(max(float(plot.vb.mapSceneToView(pos).x()), 0.0), 1.0)
                break
        else:
            self.clear()
            return
        for line in self.lines:
            line.setPos(x)
            line.show()
        self._emit(self._readout(x))

    def clear(self) -> None:
        """Hide the lines and empty the readout."""
        for line in self.lines:
            line.hide()
        self._emit("")
