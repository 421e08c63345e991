"""The canvas's grid layout: a ``figure.FigureView`` of one panel per shown calibrator, made on first use and
kept in step with the canvas. The canvas owns the state (results, bandwidth, bands, range) and hands it over;
this module knows nothing of the canvas."""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Sequence

from PySide6 import QtCore, QtWidgets

from calibview.plot.figure import FigureView
from calibview.plot.figure_fit import FittedFigure
from calibview.plot.spec import PanelSpec

__all__ = ["CanvasGrid"]


class CanvasGrid:
    """The grid layout's FigureView (None until ``create``), laid out for its size in a FittedFigure (``widget``)
    inside the canvas's stack of views; ``readout`` gets the hover text of the panel under the pointer ("" when it
    leaves the panels)."""

    def __init__(self, stack: QtWidgets.QStackedWidget, readout: Callable[[str], None]) -> None:
        self.view: Optional[FigureView] = None
        self.widget: Optional[FittedFigure] = None
        self._stack = stack
        self._readout = readout

    def create(self, theme: str) -> FigureView:
        """The grid's FigureView in theme ``theme``, made and added to the stack on the first call."""
        if self.view is None:
            self.view = FigureView(theme=theme, font_pt=9.5)
            self.view.wrap_subtitles = True
            self.view.scene().sigMouseMoved.connect(self._on_mouse_moved)
            self.widget = FittedFigure(self.view)
            self._stack.addWidget(self.widget)
        return self.view

    def show_panels(self, panels: Sequence[PanelSpec], *, bandwidth: float, kernel: str, bands: bool,
                    band_hidden: Iterable[str], x_range: tuple[float, float], ci: bool = False) -> None:
        """Draw ``panels`` at ``bandwidth`` (confidence units) and ``kernel``, the bands on or off (``band_hidden``:
        the colour keys drawn without theirs), the confidence bands ``ci`` on or off, over the confidence range
        ``x_range`` = (lo, hi)."""
        view = self.view
        view.bands, view.band_hidden, view.ci_band = bands, set(band_hidden), bool(ci)
        view.set_bandwidth(bandwidth, kernel)
        view.set_panels(panels)
        view.set_x_range(*x_range)

    def set_bandwidth(self, bandwidth: float, kernel: str) -> None:
        """Every panel's curves at ``bandwidth`` and ``kernel`` (nothing before ``create``)."""
        if self.view is not None:
            self.view.set_bandwidth(bandwidth, kernel)

    def set_bands(self, bands: bool, band_hidden: Iterable[str]) -> None:
        """Bands on or off, the colour keys in ``band_hidden`` without theirs (nothing before ``create``)."""
        if self.view is not None:
            self.view.bands, self.view.band_hidden = bands, set(band_hidden)
            self.view.set_bands(bands)

    def set_ci(self, on: bool) -> None:
        """The confidence bands on or off (nothing before ``create``)."""
        if self.view is not None:
            self.view.set_ci(on)

    def set_x_range(self, lo: float, hi: float) -> None:
        """The confidence range [lo, hi] of every panel (nothing before ``create``)."""
        if self.view is not None:
            self.view.set_x_range(lo, hi)

    def set_theme(self, name: str) -> None:
        """Theme ``name`` ("light" or "dark"; nothing before ``create``)."""
        if self.view is not None:
            self.view.set_theme(name)

    def _on_mouse_moved(self, pos) -> None:
        """Hover readout: the curves of the panel under the pointer (with the grey reference)."""
        pos = QtCore.QPointF(pos)
        bandwidth = self.view.bandwidth[0]
        for panel in self.view.panels:
            for plot in (panel.top, panel.bottom):
                if plot.vb.sceneBoundingRect().contains(pos):
                    x = min(max(float(plot.vb.mapSceneToView(pos).x()), 0.0), 1.0)
                    parts = [f"conf {x:.2f}"] + [s.readout(x, bandwidth) for s in panel.series]
                    self._readout(" | ".join(parts))
                    return
        self._readout("")
