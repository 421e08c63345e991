"""The bandwidth-free CORP views of the window: the "CORP" toggle in the diagram's bar (its menu adds the
bootstrap band; also View > CORP reliability curve, Ctrl+Shift+C), the MCB-DSC tab of the metrics dock and its
Class CORP tab (one class's one-vs-rest diagram, gui.class_corp).

The curves are computed on the worker thread (gui.model.corp: at once without bands, then with them), only while
the toggle is on or the tab is shown; a bandwidth move never asks for them again (they have no bandwidth).
Listens to Session.corp_changed, evaluation_changed and comparison_changed.
"""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from calibview.core.reports.corp import mcb_dsc_points
from calibview.gui.class_corp import TIP as CLASS_TIP, ClassCorpTab
from calibview.gui.model.corp import run_key
from calibview.plot.corp.mcb_dsc import McbDscView

SHORTCUT = "Ctrl+Shift+C"
TIP = ("The CORP reliability curve (Dimitriadis et al. 2021): the isotonic (PAV) fit of correctness on the "
       "top-label confidence, bandwidth-free, with its 90 % consistency band (where a calibrated model's curve "
       f"would lie); the menu adds its bootstrap band ({SHORTCUT})")


class CorpToggle(QtWidgets.QToolButton):
    """The toggle; its menu's "Bootstrap band" adds the curves' bootstrap band."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.action = QtGui.QAction("&CORP reliability curve", self)
        self.action.setCheckable(True)
        self.action.setShortcut(QtGui.QKeySequence(SHORTCUT))
        self.action.setIconText("CORP")
        self.action.setToolTip(TIP)
        self.action.setStatusTip(TIP)
        self.setDefaultAction(self.action)
        self.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.bootstrap = QtGui.QAction("CORP &bootstrap band", self)
        self.bootstrap.setCheckable(True)
        self.bootstrap.setToolTip("Also draw the CORP curves' 90 % bootstrap band (dotted)")
        menu = QtWidgets.QMenu(self)
        menu.addAction(self.bootstrap)
        self.setMenu(menu)
        self.setPopupMode(QtWidgets.QToolButton.ToolButtonPopupMode.MenuButtonPopup)


class McbDscTab(QtWidgets.QWidget):
    """The MCB-DSC plot of the shown evaluations (one point per calibrator and run or split)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.view = McbDscView(legend_right=True)     # the dock is short and wide
        self.view.setMinimumSize(260, 180)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)

    def set_points(self, points, title: str = "") -> None:
        """Draw these points (core.reports.corp.mcb_dsc_points)."""
        self.view.set_points(points, title)


class CorpMode:
    """Wires the toggle and the tab of ``window`` (a MainWindow) to its Session's CorpModel; made after the window's
    own connections, so that the canvases have their new results before their CORP curves are set."""

    def __init__(self, window) -> None:
        self.window = window
        self.session = s = window.session
        self.toggle = CorpToggle()
        window.canvas.toolbar.add_extra(self.toggle)
        acts = window.view_menu.actions()           # View: after the tercile split, the other diagram toggle
        at = acts.index(window.tercile_toggle.action) + 1
        window.view_menu.insertAction(acts[at] if at < len(acts) else None, self.toggle.action)
        self.tab = McbDscTab()
        tabs = window.table.tabs
        tabs.addTab(self.tab, "MCB-DSC")
        tabs.currentChanged.connect(lambda _i: s.corp.set_tab(tabs.currentWidget() is self.tab))
        self.class_tab = ClassCorpTab(s)         # one class's one-vs-rest CORP, computed while shown
        tabs.addTab(self.class_tab, "Class CORP")
        tabs.setTabToolTip(tabs.indexOf(self.class_tab), CLASS_TIP)
        self.toggle.action.toggled.connect(lambda on: s.corp.set_on(on, self.toggle.bootstrap.isChecked()))
        self.toggle.bootstrap.toggled.connect(self._on_bootstrap_toggled)
        s.corp_changed.connect(self.update)
        s.evaluation_changed.connect(lambda _ev: self.update())

    def _on_bootstrap_toggled(self, on: bool) -> None:
        if on and not self.toggle.action.isChecked():
            self.toggle.action.setChecked(True)         # asking for the band asks for the curve
        self.session.corp.set_on(self.toggle.action.isChecked(), on)

    def update(self) -> None:
        """Each canvas gets its evaluation's CORP curves while the toggle is on (none otherwise); the tab its
        points (the rows' corp_mcb / corp_dsc / corp_unc where they carry them)."""
        model, evs = self.session.corp, tuple(self.session.evaluations)
        shown = evs[:1] if self.session.compare_runs else evs        # the compared runs are in their own figure
        for canvas, ev in zip(self.window.domains.canvases(), shown):
            cs = model.shown(ev) if model.on else None
            canvas.set_corp(cs.curves if cs is not None else {}, model.bootstrap)
        sets = {run_key(e): model.shown(e) for e in evs if model.shown(e) is not None}
        self.tab.set_points(mcb_dsc_points([e for e in evs if not e.pending], sets),
                            "MCB-DSC: top-label Brier" + (" of the compared runs" if self.session.compare_runs else ""))

    def set_theme(self, name: str) -> None:
        """The tabs' plots in theme ``name``."""
        self.tab.view.set_theme(name)
        self.class_tab.set_theme(name)
