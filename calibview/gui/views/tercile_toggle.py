"""The diagram's split by epistemic tercile, in the bar above it: a toggle (also View > Split curve by epistemic
tercile, Ctrl+Shift+M) and the calibrator whose curve is split into the low / mid / high mutual-information
thirds of the samples (core.evaluation.members.terciles). Enabled only for a run with members."""

from __future__ import annotations

from typing import Optional

from PySide6 import QtCore, QtGui, QtWidgets

from calibview.core.evaluation.members.terciles import default_calibrator
from calibview.core.io.regression.schema import RegRunInfo
from calibview.gui.session import Session

SHORTCUT = "Ctrl+Shift+M"
ON_TIP = ("Split the chosen calibrator's curve into three: the samples of low, mid and high mutual information "
          f"between the members (epistemic terciles) ({SHORTCUT})")


def disabled_reason(session: Session) -> Optional[str]:
    """Why the split cannot be drawn for the session's selection (None: it can)."""
    run, split = session.run, session.eval_split
    if run is None or not split:
        return "Open a run with members (an ensemble or MC-dropout passes) to split its curve by epistemic tercile"
    if session.compare_runs:
        return "Not while runs are compared: the split is of one run's ensemble"
    if isinstance(run, RegRunInfo):
        return "A regression run has no class probabilities of members to split its curve by"
    if not run.split(split).members:
        return (f"Needs members (an ensemble or MC-dropout passes): split {split} of {run.name} has none, so it has "
                "no mutual information to split by")
    return None


class TercileToggle(QtWidgets.QWidget):
    """The toggle and the calibrator combo; ``changed`` when either changes (the window redraws the curves);
    listens to selection_changed and evaluation_changed."""

    changed = QtCore.Signal()

    def __init__(self, session: Session, parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.action = QtGui.QAction("Split curve by &epistemic tercile (MI)", self)
        self.action.setCheckable(True)
        self.action.setShortcut(QtGui.QKeySequence(SHORTCUT))
        self.action.toggled.connect(self._on_action_toggled)
        self.button = QtWidgets.QToolButton()
        self.button.setDefaultAction(self.action)
        self.button.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.action.setIconText("MI terciles")        # the button's text; the View menu shows the full one
        self.calibrator = QtWidgets.QComboBox()
        self.calibrator.setSizeAdjustPolicy(
            QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.calibrator.setMinimumContentsLength(5)        # its popup shows whole names
        self.calibrator.setVisible(False)            # shown while the split is on: the row must fit 1280 px
        self.calibrator.setToolTip("The calibrator whose curve is split by epistemic tercile")
        self.calibrator.currentIndexChanged.connect(lambda _i: self.changed.emit())
        self.calibrator.activated.connect(lambda _i: setattr(self, "_picked", self.calibrator_name()))
        self._picked: Optional[str] = None       # the user's choice, kept across evaluations that have it
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(8, 0, 0, 0)
        lay.addWidget(self.button)
        lay.addWidget(self.calibrator)
        session.selection_changed.connect(self._on_session_selection_changed)
        session.evaluation_changed.connect(self._on_session_evaluation_changed)
        self._on_session_selection_changed()

    def calibrator_name(self) -> Optional[str]:
        """The calibrator whose curve is split (None before an evaluation)."""
        return self.calibrator.currentData() or None

    def _on_action_toggled(self, on: bool) -> None:
        self.calibrator.setEnabled(on and self.action.isEnabled())
        self.calibrator.setVisible(on)
        self.session.set_terciles(on)
        self.changed.emit()

    def _on_session_selection_changed(self) -> None:
        reason = disabled_reason(self.session)
        self.action.setEnabled(reason is None)
        tip = ON_TIP if reason is None else f"{reason}."
        self.action.setToolTip(tip)
        self.action.setStatusTip(tip)
        self.button.setToolTip(tip)
        self.calibrator.setEnabled(reason is None and self.action.isChecked())
        if reason is not None and self.action.isChecked():
            self.action.setChecked(False)

    def _on_session_evaluation_changed(self, ev) -> None:
        names = [(r.name, r.label if r.name != "none" else "Uncalibrated") for r in ev.results] if ev else []
        if [self.calibrator.itemData(i) for i in range(self.calibrator.count())] == [n for n, _ in names]:
            return
        self.calibrator.blockSignals(True)
        self.calibrator.clear()
        for name, label in names:
            self.calibrator.addItem(label, name)
        # partial results bring the calibrators one at a time: the default is the first calibrated one once it comes
        pick = self._picked if self._picked in [n for n, _ in names] else default_calibrator(n for n, _ in names)
        self.calibrator.setCurrentIndex(max(0, self.calibrator.findData(pick)))
        self.calibrator.blockSignals(False)
        self.changed.emit()
