"""The canvas's figure side (a mixin of CalibrationCanvas): overlay or grid layout, bands, the confidence range,
and exports as publication figures through gui.figure / gui.figure_export."""

from __future__ import annotations

from typing import Optional

from calibview.plot.navigation import x_ticks
from calibview.plot.figure import FigureView, legend_numbers
from calibview.plot.spec import LAYOUTS, FigureOptions, calibrator_panels

__all__ = ["FigureMixin"]


class FigureMixin:
    """Needs the canvas's _series, _hidden, _bandwidth, _kernel, _theme, _top, _bottom, _view, _stack, toolbar,
    _refresh_visibility; owns _layout, _bands, _band_hidden and _grid."""

    def set_layout(self, layout: str) -> None:
        """"overlay" (every shown calibrator in one plot) or "grid" (one panel per calibrator, gui.figure)."""
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        self._layout = layout
        box = self.toolbar.layout_box
        if box.currentData() != layout:
            box.blockSignals(True)
            box.setCurrentIndex(box.findData(layout))
            box.blockSignals(False)
        if layout == "grid" and self._grid is None:
            self._grid = FigureView(theme=self._theme.name, font_pt=9.5)
            self._grid.wrap_subtitles = True
            self._grid.scene().sigMouseMoved.connect(self._on_grid_mouse_moved)
            self._grid.setMinimumSize(320, 260)
            self._stack.addWidget(self._grid)
        self._rebuild_grid()
        self._stack.setCurrentWidget(self._grid if layout == "grid" else self._view)

    @property
    def layout_mode(self) -> str:
        return self._layout

    @property
    def grid_view(self) -> Optional[FigureView]:
        return self._grid if self._layout == "grid" else None

    def set_bands(self, on: bool, name: Optional[str] = None) -> None:
        """Sharpness bands on/off: all of them, or (``name`` given) the band of that calibrator only."""
        if name is None:
            self._bands = bool(on)
            if self.toolbar.bands.isChecked() != self._bands:
                self.toolbar.bands.setChecked(self._bands)
        elif on:
            self._band_hidden.discard(name)
        else:
            self._band_hidden.add(name)
        self._refresh_visibility()
        if self._grid is not None:
            self._grid.bands, self._grid.band_hidden = self._bands, set(self._band_hidden)
            self._grid.set_bands(self._bands)

    def bands_shown(self) -> dict:
        return {s.name: s.band.isVisible() for s in self._series}

    def set_x_range(self, preset) -> None:
        """The confidence range: "full" ([0, 1]), "domain" ([1/K, 1]), "high" ([0.8, 1]) or a (lo, hi) pair."""
        if isinstance(preset, str):
            lo, hi = self._preset_range(preset)
        else:
            lo, hi = (float(v) for v in preset)
        self._top.setXRange(lo, hi, padding=0)
        if self._grid is not None:
            self._grid.set_x_range(lo, hi)

    def _preset_range(self, preset: str) -> tuple[float, float]:
        k = max((s.k for s in self._series), default=0)
        lo = {"full": 0.0, "domain": 1.0 / k if k > 1 else 0.0, "high": 0.8}[preset]
        return round(lo, 6), 1.0

    def _on_grid_mouse_moved(self, pos) -> None:
        """Hover readout in the grid: the calibrator of the panel under the pointer (and the grey reference)."""
        from PySide6 import QtCore
        pos = QtCore.QPointF(pos)
        for panel in self._grid.panels:
            for plot in (panel.top, panel.bottom):
                if plot.vb.sceneBoundingRect().contains(pos):
                    x = min(max(float(plot.vb.mapSceneToView(pos).x()), 0.0), 1.0)
                    parts = [f"conf {x:.2f}"] + [s.readout(x, self._bandwidth) for s in panel.series]
                    self._set_readout(" | ".join(parts))
                    return
        self._set_readout("")

    def x_range(self) -> tuple[float, float]:
        lo, hi = self._top.vb.viewRange()[0]
        return float(lo), float(hi)

    def _on_x_range_changed(self, *_):
        lo, hi = self.x_range()
        self._legend.follow(lo, hi)
        box = self.toolbar.range_box           # a preset's name only while the range is that preset
        match = [i for i in range(box.count()) if self._preset_range(box.itemData(i)) == (round(lo, 6), round(hi, 6))]
        box.setCurrentIndex(match[0] if match else -1)
        for plot in (self._top, self._bottom):
            for side in ("bottom", "top"):
                plot.getAxis(side).setTicks(x_ticks(lo, hi))
        if self._grid is not None and self._grid.x_range() != (lo, hi):
            self._grid.set_x_range(lo, hi)

    def figure_panels(self, layout: Optional[str] = None) -> list:
        """The shown calibrators as figure panels (figure_spec.PanelSpec), for the grid and for exports."""
        shown = [s.result for s in self._series if s.name not in self._hidden]
        return calibrator_panels(shown, k=max((s.k for s in self._series), default=0), layout=layout or self._layout,
                                 subtitle_of=lambda r: legend_numbers(r.metrics))

    def _rebuild_grid(self) -> None:
        if self._grid is None or self._layout != "grid":
            return
        self._grid.bands, self._grid.band_hidden = self._bands, set(self._band_hidden)
        self._grid.set_bandwidth(self._bandwidth, self._kernel)
        self._grid.set_panels(self.figure_panels("grid"))
        self._grid.set_x_range(*self.x_range())

    def export_figure(self, path, options: Optional[FigureOptions] = None, formats=()) -> list:
        """The shown calibrators as a publication figure (gui.figure_export): the options' size, DPI, fonts,
        theme (light by default, whatever the screen's) and layout; the current bandwidth, bands and range."""
        from calibview.plot.export import render_figure
        options = options or FigureOptions(layout=self._layout)
        hidden_bands = set(self._band_hidden)
        return render_figure(self.figure_panels(options.layout), path, options, bandwidth=self._bandwidth,
                             kernel=self._kernel, formats=formats, hidden_bands=hidden_bands,
                             x_range=self.x_range())

    def open_export_dialog(self) -> None:
        from calibview.plot.export_dialog import ExportDialog
        ExportDialog(self, self).exec()
