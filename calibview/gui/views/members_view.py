"""The Members tab of the metrics dock: for a run with ensemble or MC-dropout members, the ensemble's metrics first,
then the deterministic scores where the file has them, then each member's, then the spread (min / mean / max over
the members) of each metric, for one calibrator at a time.

The rows are the records ``calibview metrics --members all`` gives (:func:`calibview.core.evaluation.members.
requests.member_requests`), point estimates without resamples, computed on the tab's own thread the first time the
tab is looked at for an evaluation (``builds`` counts it); switching the calibrator only reads them.
"""

from __future__ import annotations

import threading
from typing import Optional

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from calibview.core.reports import units
from calibview.gui.session import Session
from calibview.gui.worker import TaskThread

METRICS = ("accuracy", "nll", "brier", "ece", "classwise_ece", "smece", "cal", "aurc")
SPREAD = ("min", "mean", "max")


def member_rows(ev, cancel: Optional[threading.Event] = None) -> list[tuple[str, dict]]:
    """[(member label, {calibrator: {metric: value}})] of the ensemble, the deterministic row where there is one,
    then each member, for evaluation ``ev`` of a members run (point estimates: its request with n_boot 0)."""
    from dataclasses import replace

    from calibview.core.evaluation.engine import Engine
    from calibview.core.evaluation.members.requests import member_requests

    engine = Engine()
    out = []
    for req in member_requests(replace(ev.request, n_boot=0), ev.run, "all"):
        res = engine.evaluate(req, cancel=cancel)
        out.append((req.member or "ensemble",
                    {r.name: {m: float(r.metrics[m].value) for m in METRICS} for r in res.results}))
    return out


class MembersView(QtWidgets.QWidget):
    """The Members tab; listens to evaluation_changed, and computes when shown (``showEvent``) or asked
    (``start``)."""

    def __init__(self, session: Session, parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.rows: Optional[list] = None
        self.builds = 0
        self._thread: Optional[TaskThread] = None
        self.calibrator = QtWidgets.QComboBox()
        self.calibrator.setToolTip("The calibrator whose metrics the rows show (each member fits its own)")
        self.calibrator.currentIndexChanged.connect(self._fill)
        self.table = QtWidgets.QTableWidget(0, 1 + len(METRICS))
        self.table.setHorizontalHeaderLabels(["Member"] + [units.header(m) for m in METRICS])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 6)
        self.caption = QtWidgets.QLabel("")
        self.caption.setWordWrap(True)
        self.caption.setForegroundRole(QtGui.QPalette.ColorRole.PlaceholderText)
        top = QtWidgets.QHBoxLayout()
        top.addWidget(QtWidgets.QLabel("Calibrator"))
        top.addWidget(self.calibrator)
        top.addStretch(1)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 2, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.caption)
        session.evaluation_changed.connect(self._on_evaluation_changed)
        self._on_evaluation_changed(session.evaluation)

    @staticmethod
    def has_members(ev) -> bool:
        """Whether evaluation ``ev`` is of a split with members."""
        return ev is not None and bool(ev.run.split(ev.request.eval_split).members)

    def _on_evaluation_changed(self, ev) -> None:
        self.stop()
        self.rows = None
        self.table.setRowCount(0)
        self.calibrator.blockSignals(True)
        self.calibrator.clear()
        for r in (ev.results if ev is not None else []):
            self.calibrator.addItem(r.label, r.name)
        self.calibrator.blockSignals(False)
        self.caption.setText("" if ev is None else "Members' metrics: shown when this tab is open." if
                             self.has_members(ev) else f"{ev.run.name} has no ensemble or MC-dropout members.")
        if self.isVisible():
            self.start()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self.start()

    def start(self) -> None:
        """Compute the member rows of the current evaluation (once per evaluation) on the tab's thread."""
        ev = self.session.evaluation
        if (not self.has_members(ev) or self.rows is not None
                or (self._thread is not None and self._thread.isRunning())):
            return
        self._thread = TaskThread(lambda cancel, progress: member_rows(ev, cancel), "the members' metrics",
                                  parent=self)
        self._thread.done.connect(self._on_done)
        self._thread.failed.connect(self.caption.setText)
        self.caption.setText("Computing the members' metrics…")
        self._thread.start()

    def stop(self) -> None:
        """Cancel a computation in flight and wait for its thread."""
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    def _on_done(self, rows) -> None:
        self.rows = rows
        self.builds += 1
        self._fill()

    def spread(self, name: str) -> dict:
        """{"min" | "mean" | "max": {metric: value}} over the members (not the ensemble or deterministic row)."""
        vals = np.array([[row[name][m] for m in METRICS] for label, row in self.rows or []
                         if label not in ("ensemble", "deterministic") and name in row], dtype=np.float64)
        if vals.size == 0:
            return {}
        return {s: dict(zip(METRICS, f(vals, axis=0))) for s, f in zip(SPREAD, (np.min, np.mean, np.max))}

    def _fill(self) -> None:
        name = self.calibrator.currentData()
        if not self.rows or name is None:
            return
        shown = [(("Ensemble" if label == "ensemble" else "Deterministic" if label == "deterministic"
                   else f"Member {label}"), row[name]) for label, row in self.rows if name in row]
        spread = self.spread(name)
        shown += [(f"Members {s}", spread[s]) for s in SPREAD if s in spread]
        self.table.setRowCount(len(shown))
        bold = QtGui.QFont()
        bold.setBold(True)
        for i, (label, values) in enumerate(shown):
            item = QtWidgets.QTableWidgetItem(label)
            if i == 0:
                item.setFont(bold)
            self.table.setItem(i, 0, item)
            for j, m in enumerate(METRICS, start=1):
                cell = QtWidgets.QTableWidgetItem(units.fmt(m, values.get(m)))
                cell.setTextAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, j, cell)
        self.table.resizeColumnsToContents()
        m = len([r for r in self.rows if r[0] not in ("ensemble", "deterministic")])
        self.caption.setText(f"The ensemble (the run's prediction) first, then each of the {m} members, then the "
                             f"spread over the members; point estimates (intervals: calibview metrics --members all).")
