"""The Class CORP tab of the metrics dock: the one-vs-rest diagram of one chosen class (P(y = c) against each
calibrator's p_c, kernel curves at the window's bandwidth) with each calibrator's bandwidth-free CORP steps and
their consistency band (and, ticked, their bootstrap band); the legend gives each calibrator's MCB and DSC of
the one-vs-rest Brier score. A binary run starts on its positive class (class 1).

Computed on the worker (Session.ask_class_corp: one read of the evaluation split per class above two classes,
cached; the curves at once, then their bands) and only while the tab is shown: choosing a class asks once; a
bandwidth move redraws the kernel curves and asks nothing (CORP has no bandwidth). ``asked`` counts the asks
(tests assert on it). Export… writes the figure (PNG at a size and DPI, SVG, PDF) through plot.export.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from PySide6 import QtWidgets

from calibview.core.io.toplabel.format import is_toplabel
from calibview.core.reports.corp import corp_key
from calibview.plot.corp.class_figure import class_figure_panels
from calibview.plot.figure import FigureView
from calibview.plot.figure_fit import FittedFigure
from calibview.plot.spec import FigureOptions

TIP = ("One-vs-rest reliability of the chosen class: P(y = c) against the predicted probability p_c, the kernel "
       "curves at the window's bandwidth and the bandwidth-free CORP steps (isotonic fit) with their 90 % "
       "consistency band, where a calibrated forecast's steps would lie")


class ClassCorpTab(QtWidgets.QWidget):
    """A class chooser, a bootstrap-band switch, Export… and the figure. Listens to evaluation_changed,
    bandwidth_changed and class_corp_changed of ``session`` (a gui.session.Session)."""

    def __init__(self, session, theme: str = "light", parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.asked = 0
        self.result: Optional[tuple] = None         # (ClassForecasts, CorpSet) drawn
        self._want: Optional[tuple] = None           # (evaluation, class) asked for, or to ask when shown
        self._run = None
        self._sent: Optional[tuple] = None
        self.classes = QtWidgets.QComboBox()
        self.classes.setToolTip("The class whose one-vs-rest reliability is drawn (type to find a class)")
        self.classes.setEditable(True)
        self.classes.setInsertPolicy(QtWidgets.QComboBox.InsertPolicy.NoInsert)
        self.classes.setMinimumContentsLength(14)
        self.classes.currentIndexChanged.connect(lambda _i: self._ask())
        self.bootstrap = QtWidgets.QCheckBox("Bootstrap band")
        self.bootstrap.setToolTip("Also draw the CORP steps' 90 % bootstrap band (dotted)")
        self.bootstrap.toggled.connect(lambda _on: self._draw())
        self.export_button = QtWidgets.QPushButton("Export…")
        self.export_button.setToolTip("The class's diagram as a publication figure: PNG at a size and DPI, SVG, PDF")
        self.export_button.clicked.connect(self.open_export_dialog)
        self.note = QtWidgets.QLabel("")
        self.view = FigureView(theme=theme)
        self.view.setToolTip(TIP)
        bar = QtWidgets.QHBoxLayout()
        bar.setContentsMargins(6, 0, 6, 0)
        bar.addWidget(QtWidgets.QLabel("Class"))
        bar.addWidget(self.classes)
        bar.addWidget(self.bootstrap)
        bar.addWidget(self.note, 1)
        bar.addWidget(self.export_button)
        col = QtWidgets.QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        col.addLayout(bar)
        col.addWidget(FittedFigure(self.view), 1)
        session.evaluation_changed.connect(self._on_evaluation)
        session.bandwidth_changed.connect(self.view.set_bandwidth)
        session.class_corp_changed.connect(self._on_answer)
        self._on_evaluation(session.evaluation)

    # --- what is shown ---------------------------------------------------------------------------------------

    def current_class(self) -> Optional[int]:
        """The chosen class index (None without an evaluation)."""
        data = self.classes.currentData()
        return None if data is None else int(data)

    def set_class(self, cls: int) -> None:
        """Choose class ``cls`` (an index); asks for its curves while the tab is shown."""
        self.classes.setCurrentIndex(max(0, self.classes.findData(int(cls))))

    def _on_evaluation(self, ev) -> None:
        usable = (ev is not None and getattr(ev, "k", 0) >= 2 and hasattr(ev.run, "class_names")
                  and not is_toplabel(ev.run))
        run = (ev.run.file, ev.run.name, ev.k) if usable else None
        if run != self._run:             # another run: its classes (a re-evaluation keeps the chosen class)
            self._run = run
            self.classes.blockSignals(True)
            self.classes.clear()
            if usable:
                names = ev.run.class_names or [str(c) for c in range(ev.k)]
                for c, name in enumerate(names):
                    self.classes.addItem(f"{c}: {name}" if str(name) != str(c) else str(c), c)
                self.classes.setCurrentIndex(1 if ev.k == 2 else 0)
            self.classes.blockSignals(False)
        self.result = None
        self.view.set_panels([])
        self.note.setText("" if usable else
                          "A top-label run has no class probabilities." if ev is not None and is_toplabel(ev.run)
                          else "Evaluate a run of class probabilities to see one class's reliability.")
        self._ask()

    def _ask(self) -> None:
        ev, cls = self.session.evaluation, self.current_class()
        if ev is None or ev.pending or cls is None:
            self._want = None
            return
        self._want = (ev, cls)
        if self.isVisible():
            self._send()

    def _send(self) -> None:
        ev, cls = self._want
        if self.result is not None and self.result[1].key == corp_key(ev.request, cls) and self.result[1].bands:
            return                       # drawn already, bands and all
        self.note.setText(f"computing class {self.classes.currentText()}…")
        self.asked += 1
        self.session.ask_class_corp(ev, cls)
        self._sent = self._want

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        """Shown: ask for what was chosen while hidden."""
        super().showEvent(event)
        if self._want is not None and self._sent != self._want:
            self._send()

    def _on_answer(self, result, final: bool) -> None:
        if isinstance(result, str):
            self.note.setText(result)
            return
        fc, cs = result
        if self._want is None or self._sent != self._want or fc.cls != self._want[1]:
            return                     # an answer for an evaluation or class no longer shown
        self.result = (fc, cs)
        self.note.setText(f"{int(fc.outcome.sum()):,} of {fc.outcome.size:,} samples are class {fc.name}"
                          + ("" if final else " · bands coming"))
        self._draw()

    def _draw(self) -> None:
        if self.result is None or self._want is None:
            return
        fc, cs = self.result
        s = self.session
        self.view.set_bandwidth(s.bandwidth, s.kernel)
        self.view.set_panels(class_figure_panels(self._want[0], fc, cs.curves, bootstrap=self.bootstrap.isChecked()))

    def set_theme(self, name: str) -> None:
        """The light or dark theme of the figure."""
        self.view.set_theme(name)

    # --- export: the canvas's Export dialog drives this object as it drives the canvas --------------------------

    layout_mode = "overlay"
    grid_label = "One panel per calibrator"

    @property
    def title(self) -> str:
        """The export dialog's figure title: none, since the panel's own title names the run, split and class."""
        return ""

    def open_export_dialog(self) -> None:
        """The publication export dialog of the class's diagram (nothing to export before it is drawn)."""
        if self.result is None:
            return
        from calibview.plot.export_dialog import ExportDialog
        ExportDialog(self, self).exec()

    def export_figure(self, path, options: Optional[FigureOptions] = None, formats=()) -> list:
        """The class's diagram as a publication figure (plot.export) at the options' size, DPI, fonts and theme;
        "grid": one panel per calibrator, the uncalibrated one faint in each."""
        from calibview.plot.export import render_figure

        options = options or FigureOptions(layout="overlay")
        fc, cs = self.result
        panels = class_figure_panels(self._want[0], fc, cs.curves, bootstrap=self.bootstrap.isChecked(),
                                     layout=options.layout)
        return render_figure(panels, path, dataclasses.replace(options, title=""), bandwidth=self.session.bandwidth,
                             kernel=self.session.kernel, formats=formats)
