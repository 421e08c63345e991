"""The figure of compared runs, in place of the canvas while runs are compared: the panels of
``plot.compare.comparison_panels`` (calibrators by colour, runs by line style) in a FigureView, with a switch
between a panel per calibrator (the default: each titled with every run's ECE difference to the reference), a
panel per run, or everything in one overlay. Draws only; exports through ``plot.export``.
"""

from __future__ import annotations

from typing import Optional

from PySide6 import QtCore, QtWidgets

from calibview.plot.compare import LAYOUTS, comparison_panels
from calibview.plot.navigation import RANGE_PRESETS
from calibview.plot.figure import FigureView
from calibview.plot.figure_fit import FittedFigure
from calibview.plot.spec import FigureOptions, PanelSpec
from calibview.gui.session import Session


class CompareFigure(QtWidgets.QWidget):
    """A layout switch, an export button and the FigureView of the session's compared runs. Shown (and
    ``active_changed(True)`` emitted) only while runs are compared; the window hides its canvas meanwhile.
    Listens to evaluation_changed, comparison_changed, bandwidth_changed and visible_changed."""

    active_changed = QtCore.Signal(bool)

    def __init__(self, session: Session, theme: str = "light", parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.layout_combo = QtWidgets.QComboBox()
        for key, text in LAYOUTS:
            self.layout_combo.addItem(text, key)
        self.layout_combo.setToolTip("Small multiples split by one factor, the other overlaid inside each panel: "
                                     "calibrators by colour, runs by line style")
        self.layout_combo.currentIndexChanged.connect(lambda _i: self.refresh())
        self.bands = QtWidgets.QCheckBox("Bands")
        self.bands.setChecked(True)
        self.bands.setToolTip("The sharpness bands of every curve")
        self.bands.toggled.connect(lambda on: self.view.set_bands(on))
        self.range_combo = QtWidgets.QComboBox()
        for label, key in RANGE_PRESETS:
            self.range_combo.addItem(label, key)
        self.range_combo.currentIndexChanged.connect(lambda _i: self._apply_range())
        self.export_button = QtWidgets.QPushButton("Export…")
        self.export_button.setToolTip("The comparison as a publication figure: PNG at a size and DPI, SVG, PDF")
        self.export_button.clicked.connect(self.open_export_dialog)
        self.view = FigureView(theme=theme)
        bar = QtWidgets.QHBoxLayout()
        bar.setContentsMargins(6, 0, 6, 0)
        bar.addWidget(QtWidgets.QLabel("Compared runs"))
        bar.addWidget(self.layout_combo)
        bar.addWidget(self.bands)
        bar.addWidget(QtWidgets.QLabel("Range"))
        bar.addWidget(self.range_combo)
        bar.addStretch(1)
        bar.addWidget(self.export_button)
        col = QtWidgets.QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        col.addLayout(bar)
        col.addWidget(FittedFigure(self.view), 1)        # laid out for the window's size, scrolling if need be
        self.panels: list[PanelSpec] = []
        self.active = False
        self.hide()
        session.evaluation_changed.connect(lambda _ev: self.refresh())
        session.comparison_changed.connect(lambda _c: self.refresh())
        session.bandwidth_changed.connect(self.view.set_bandwidth)
        session.visible_changed.connect(lambda _v: self._apply_hidden())

    def layout_key(self) -> str:
        """The chosen layout: a key of LAYOUTS."""
        return self.layout_combo.currentData()

    def set_layout(self, key: str) -> None:
        """Choose a layout by its key in LAYOUTS (the figure is redrawn)."""
        self.layout_combo.setCurrentIndex(max(0, self.layout_combo.findData(key)))

    def refresh(self) -> None:
        """Redraw the figure from the session's compared runs; shown (active) only while runs are compared."""
        s = self.session
        evs = tuple(s.evaluations) if s.compare_runs else ()
        active = bool(evs)
        if active:
            self.panels = comparison_panels(evs, self.layout_key(), s.comparison)
            self.view.set_bandwidth(s.bandwidth, s.kernel)
            self.view.set_panels(self.panels)
            self._apply_hidden()
            self._apply_range()
        if active != self.active:
            self.active = active
            self.setVisible(active)
            self.active_changed.emit(active)

    def _apply_hidden(self) -> None:
        visible = self.session.visible
        self.view.set_hidden({it.label for p in self.panels for it in p.items
                              if visible and it.color_key not in visible})

    def _apply_range(self) -> None:
        key = self.range_combo.currentData()
        lo = {"full": 0.0, "domain": self.view.domain_floor(), "high": 0.8}.get(key, 0.0)
        self.view.set_x_range(lo, 1.0)

    def set_theme(self, name: str) -> None:
        """The light or dark theme of the figure."""
        self.view.set_theme(name)

    # --- export: the canvas's Export dialog (plot.export_dialog) drives this object as it drives the canvas ------

    @property
    def layout_mode(self) -> str:
        """The export dialog's layout: "overlay" for one panel, else "grid"."""
        return "overlay" if self.layout_key() == "overlay" else "grid"

    @property
    def title(self) -> str:
        """The exported figure's title: the runs, the dataset and split, the reference."""
        evs = self.session.evaluations
        return (f"{len(evs)} runs on {evs[0].run.dataset} {evs[0].request.eval_split}, reference "
                f"{evs[0].run.name}") if evs else ""

    def open_export_dialog(self) -> None:
        """The publication export dialog of the comparison's figure."""
        from calibview.plot.export_dialog import ExportDialog
        ExportDialog(self, self).exec()

    def export_figure(self, path, options: Optional[FigureOptions] = None, formats=()) -> list:
        """The comparison as a publication figure (plot.export) at the options' size, DPI, fonts and theme;
        the options' "grid" is the shown grid (a panel per calibrator or per run), "overlay" one panel."""
        from calibview.plot.export import render_figure

        options = options or FigureOptions(layout=self.layout_mode, title=self.title, bands=self.bands.isChecked())
        key = "overlay" if options.layout == "overlay" else \
            (self.layout_key() if self.layout_key() != "overlay" else "calibrator")
        panels = comparison_panels(self.session.evaluations, key, self.session.comparison)
        return render_figure(panels, path, options, bandwidth=self.session.bandwidth, kernel=self.session.kernel,
                             formats=formats, x_range=self.view.x_range())

    def export(self, path: str) -> Optional[list]:
        """File > Export while runs are compared: the figure as PNG, SVG or PDF (by the suffix) at 7 in and 300 DPI
        in the light theme."""
        return self.export_figure(path) if self.panels else None
