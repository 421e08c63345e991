"""The figure of compared runs, in place of the canvas while runs are compared: built on the figure API
(``gui.figure_spec``: the grid's panels split by one factor, the overlay inside a panel by another) with
calibrators by colour and runs by line style: a panel per calibrator (the default: the runs overlaid, the
comparison at a glance, each panel titled with every run's ECE difference to the reference, marked), a
panel per run (the calibrators overlaid), or everything in one overlay. Draws only; exports through ``gui.figure_export``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from PySide6 import QtCore, QtWidgets

from calibview.plot.navigation import RANGE_PRESETS
from calibview.plot.figure import FigureView
from calibview.plot.spec import CurveItem, FigureOptions, PanelSpec, split_panels
from calibview.gui.session import Session

#: (layout key, what the switch says)
LAYOUTS = (("calibrator", "A panel per calibrator"), ("run", "A panel per run"), ("overlay", "Overlay"))
MARK = "●"


def run_keys(evaluations) -> list[str]:
    """The name of each compared run as the figure shows it: its model (compared runs share the dataset), with
    the file's name where two files hold a run of the same model."""
    names = [ev.run.model or ev.run.name for ev in evaluations]
    return [f"{n} ({Path(ev.run.file).name})" if names.count(n) > 1 else n for n, ev in zip(names, evaluations)]


def _ece_caption(items, comparison) -> str:
    """ "ΔECE vs reference: resnet110-flsd53 -0.69 ●": each other run's ECE difference (points) to the reference
    in a calibrator's panel (the legend has the ECE values), ● once the comparison says its paired interval
    excludes 0 (the interval is in the Compare tab)."""
    ref = next((it for it in items if it.is_reference), None)
    if ref is None:
        return ""
    parts = []
    for it in items:
        if it is ref:
            continue
        ev = it.evaluation
        delta = 100 * (it.result.metrics["ece"].value - ref.result.metrics["ece"].value)
        row = None
        if comparison is not None:
            try:
                row = comparison.row(ev.run.name, it.result.name, ev.run.file)
            except StopIteration:
                row = None
        parts.append(f"{ev.run.model} {delta:+.2f}" + (f" {MARK}" if row is not None and row["significant_ece"]
                                                         else ""))
    return "ΔECE vs reference: " + " · ".join(parts) if parts else ""


def comparison_panels(evaluations, layout: str = "calibrator", comparison=None) -> list[PanelSpec]:
    """The panels of compared runs (the reference first) in ``layout`` (see LAYOUTS): calibrators by colour
    (``color_key`` = calibrator name), runs by line style (``dash_key`` = the run)."""
    evaluations = tuple(evaluations)
    keys = run_keys(evaluations)
    items, evs = [], {}
    for ev, key in zip(evaluations, keys):
        for r in ev.results:
            # unique labels (hiding goes by label); in a panel per calibrator its title names the calibrator, so
            # its short name keeps the legend inside a narrow panel
            label = f"{key} · {r.name if layout == 'calibrator' else r.label}"
            it = CurveItem(result=r, label=label, color_key=r.name, dash_key=key, k=ev.k)
            items.append(it)
            evs[id(it)] = ev
    if not items:
        return []
    ref = keys[0]
    split, n = evaluations[0].request.eval_split, evaluations[0].n_eval
    if layout == "overlay":
        dataset = evaluations[0].run.dataset
        return [PanelSpec(title=f"{len(evaluations)} runs on {dataset} {split} (N = {n:,})",
                          subtitle="line style: run · colour: calibrator", items=tuple(items))]
    if layout == "calibrator":
        def caption(key, its):
            return _ece_caption([_WithEv(it.result, evs[id(it)], evs[id(it)] is evaluations[0]) for it in its],
                                comparison)
        return split_panels(items, panel_of=lambda it: it.color_key, layout="grid",
                            title_of=lambda key, its: its[0].result.label, subtitle_of=caption)
    return split_panels(items, panel_of=lambda it: it.dash_key, layout="grid",
                        title_of=lambda key, its: key + (" (reference)" if key == ref else ""),
                        subtitle_of=lambda key, its: f"{evaluations[0].run.dataset} {split} · N = {n:,}")


class _WithEv:
    __slots__ = ("result", "evaluation", "is_reference")

    def __init__(self, result, evaluation, is_reference: bool) -> None:
        self.result, self.evaluation, self.is_reference = result, evaluation, is_reference


class CompareFigure(QtWidgets.QWidget):
    """A layout switch, an export button and the FigureView of the session's compared runs. Shown (and
    ``active_changed(True)`` emitted) only while runs are compared; the window hides its canvas meanwhile."""

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
        col.addWidget(self.view, 1)
        self.panels: list[PanelSpec] = []
        self.active = False
        self.hide()
        session.evaluation_changed.connect(lambda _ev: self.refresh())
        session.comparison_changed.connect(lambda _c: self.refresh())
        session.bandwidth_changed.connect(self.view.set_bandwidth)
        session.visible_changed.connect(lambda _v: self._apply_hidden())

    def layout_key(self) -> str:
        return self.layout_combo.currentData()

    def set_layout(self, key: str) -> None:
        self.layout_combo.setCurrentIndex(max(0, self.layout_combo.findData(key)))

    def refresh(self) -> None:
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
        self.view.set_theme(name)

    # --- export: the canvas's Export dialog (gui.export_dialog) drives this object as it drives the canvas ------

    @property
    def layout_mode(self) -> str:
        return "overlay" if self.layout_key() == "overlay" else "grid"

    @property
    def _title(self) -> str:
        evs = self.session.evaluations
        return (f"{len(evs)} runs on {evs[0].run.dataset} {evs[0].request.eval_split}, reference "
                f"{evs[0].run.name}") if evs else ""

    def open_export_dialog(self) -> None:
        from calibview.plot.export_dialog import ExportDialog
        ExportDialog(self, self).exec()

    def export_figure(self, path, options: Optional[FigureOptions] = None, formats=()) -> list:
        """The comparison as a publication figure (gui.figure_export) at the options' size, DPI, fonts and theme;
        the options' "grid" is the shown grid (a panel per calibrator or per run), "overlay" one panel."""
        from calibview.plot.export import render_figure

        options = options or FigureOptions(layout=self.layout_mode, title=self._title, bands=self.bands.isChecked())
        key = "overlay" if options.layout == "overlay" else \
            (self.layout_key() if self.layout_key() != "overlay" else "calibrator")
        panels = comparison_panels(self.session.evaluations, key, self.session.comparison)
        return render_figure(panels, path, options, bandwidth=self.session.bandwidth, kernel=self.session.kernel,
                             formats=formats, x_range=self.view.x_range())

    def export(self, path: str) -> Optional[list]:
        """File > Export while runs are compared: the figure as PNG, SVG or PDF (by the suffix) at 7 in and 300 DPI
        in the light theme."""
        return self.export_figure(path) if self.panels else None
