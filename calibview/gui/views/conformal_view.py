"""The Conformal tab of the metrics dock: split conformal prediction sets of the evaluated run, with an alpha
slider, a score and a calibrator choice, coverage by class as bars around the 1 - alpha line, and the set-size
histogram.

*Compute sets* (Ctrl+Shift+R) reads the calibration split (the window's fit split) and the evaluation split once,
on a thread of its own (:func:`calibview.core.evaluation.conformal.sweeps`), for every score and evaluated
calibrator. After that, the slider and both choices only read the cached scores
(:class:`~calibview.core.stats.conformal_sweep.SetSweep`, O(N log K) per level): ``builds`` counts the passes,
``last_redraw_ms`` times the last redraw. A calibrator other than ``none`` was fitted on the same split the
quantile is taken on; the caption says so, as ``calibview conformal`` warns.
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from calibview.gui.session import Session
from calibview.gui.worker import TaskThread
from calibview.plot.palette import PALETTE

SCORES = (("lac", "LAC (1 − p of the label)"), ("aps", "APS (adaptive sets)"), ("raps", "RAPS (regularised APS)"))
ABOVE, BELOW, HIST = PALETTE[0], PALETTE[1], PALETTE[2]
#: slider steps: alpha from 0.005 to 0.5 in steps of 0.005
STEP, STEPS = 0.005, 100


class ConformalView(QtWidgets.QWidget):
    """The Conformal tab; listens to evaluation_changed (a new evaluation drops the cached sets)."""

    def __init__(self, session: Session, parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.sweeps: Optional[dict] = None
        self.builds = 0
        self.last_redraw_ms = float("nan")
        self._thread: Optional[TaskThread] = None
        self._calib_split = ""
        self.compute = QtWidgets.QPushButton("Compute sets")
        self.compute.setShortcut(QtGui.QKeySequence("Ctrl+Shift+R"))
        self.compute.setToolTip("Read the calibration (fit) and evaluation splits once for every score and "
                                "evaluated calibrator (Ctrl+Shift+R); the slider then costs no reading")
        self.compute.clicked.connect(self.start)
        self.score = QtWidgets.QComboBox()
        for key, label in SCORES:
            self.score.addItem(label, key)
        self.calibrator = QtWidgets.QComboBox()
        self.slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.slider.setRange(1, STEPS)
        self.slider.setValue(20)
        self.slider.setToolTip("Miscoverage level alpha: sets cover the label with probability at least 1 − alpha")
        self.alpha_label = QtWidgets.QLabel()
        self.alpha_label.setMinimumWidth(self.alpha_label.fontMetrics().horizontalAdvance("α = 0.000 (cover 99.5 %)"))
        for w in (self.score, self.calibrator):
            w.currentIndexChanged.connect(self.redraw)
        self.slider.valueChanged.connect(self.redraw)
        top = QtWidgets.QHBoxLayout()
        top.addWidget(self.compute)
        top.addSpacing(8)
        for text, w in (("Score", self.score), ("Calibrator", self.calibrator)):
            top.addWidget(QtWidgets.QLabel(text))
            top.addWidget(w)
        top.addSpacing(8)
        top.addWidget(self.slider, 1)
        top.addWidget(self.alpha_label)
        self.plots = pg.GraphicsLayoutWidget()
        self.plots.setBackground("w")
        self.cov_plot = self.plots.addPlot(row=0, col=0)
        self.size_plot = self.plots.addPlot(row=0, col=1)
        self.plots.ci.layout.setColumnStretchFactor(0, 3)
        self.plots.ci.layout.setColumnStretchFactor(1, 2)
        self.cov_plot.setLabel("left", "coverage")
        self.cov_plot.setLabel("bottom", "class")
        self.size_plot.setLabel("left", "fraction of samples")
        self.size_plot.setLabel("bottom", "set size")
        for p in (self.cov_plot, self.size_plot):
            p.setMenuEnabled(False)
            p.hideButtons()
            p.setMouseEnabled(x=False, y=False)
            p.getAxis("left").enableAutoSIPrefix(False)      # fractions, not "800 m"
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.8)
        self.hist = pg.BarGraphItem(x=[], height=[], width=0.8, brush=HIST)
        self.target = pg.InfiniteLine(angle=0, pen=pg.mkPen("#333333", width=1.5, style=QtCore.Qt.PenStyle.DashLine))
        self.cov_plot.addItem(self.bars)
        self.cov_plot.addItem(self.target)
        self.size_plot.addItem(self.hist)
        self.summary = QtWidgets.QLabel("Evaluate a run, then compute its conformal sets.")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 2, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(top)
        lay.addWidget(self.plots, 1)
        lay.addWidget(self.summary)
        session.evaluation_changed.connect(self._on_evaluation_changed)
        self._on_evaluation_changed(session.evaluation)

    # ------------------------------------------------------------------------------------------------ state
    def alpha(self) -> float:
        """The slider's alpha."""
        return round(self.slider.value() * STEP, 6)

    def set_alpha(self, alpha: float) -> None:
        """Move the slider to the step nearest ``alpha``."""
        self.slider.setValue(int(round(float(alpha) / STEP)))

    def _on_evaluation_changed(self, ev) -> None:
        self.stop()
        self.sweeps = None
        names = [r.name for r in ev.results] if ev is not None else []
        self.calibrator.blockSignals(True)
        self.calibrator.clear()
        for r in (ev.results if ev is not None else []):
            self.calibrator.addItem(r.label, r.name)
        self.calibrator.blockSignals(False)
        self.compute.setEnabled(ev is not None)
        self._clear()
        self.summary.setText("Compute sets to see the conformal sets of this evaluation." if names else
                             "Evaluate a run, then compute its conformal sets.")

    def _splits(self, ev) -> Optional[tuple[str, str]]:
        """(calibration split, evaluation split): the window's fit split, or another split than the evaluated."""
        eval_split = ev.request.eval_split
        calib = ev.request.fit_split
        if not calib or calib == eval_split:
            others = [s.name for s in ev.run.splits if s.name != eval_split]
            calib = others[0] if others else None
        return (calib, eval_split) if calib else None

    # ------------------------------------------------------------------------------------------------ compute
    def start(self) -> None:
        """Compute the cached scores of the current evaluation on the view's thread."""
        ev = self.session.evaluation
        if ev is None or (self._thread is not None and self._thread.isRunning()):
            return
        splits = self._splits(ev)
        if splits is None:
            self.summary.setText(f"{ev.run.name} has one split only; conformal sets need a calibration split "
                                 "besides the evaluated one.")
            return
        self._calib_split = splits[0]
        req = ev.request
        kwargs = dict(file=req.file, run=ev.run.name, calib_split=splits[0], eval_split=splits[1],
                      calibrators=tuple(r.name for r in ev.results), fit_split=req.fit_split, seed=req.seed,
                      device=req.device, max_memory=req.max_memory)

        def compute(cancel, progress):
            from calibview.core.evaluation.conformal import sweeps
            from calibview.core.evaluation.engine import Engine

            return sweeps(Engine(), cancel=cancel, progress=progress, **kwargs)

        self._thread = TaskThread(compute, "the conformal sets", "; use `calibview conformal`", self)
        self._thread.done.connect(self._on_done)
        self._thread.failed.connect(self._on_failed)
        self._thread.progressed.connect(lambda f, m: self.summary.setText(f"Computing sets: {m} ({f:.0%})"))
        self.compute.setEnabled(False)
        self.summary.setText("Computing sets…")
        self._thread.start()

    def stop(self) -> None:
        """Cancel a computation in flight and wait for its thread (a closing window never leaves one running)."""
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    def _on_done(self, out) -> None:
        self.sweeps = out
        self.builds += 1
        self.compute.setEnabled(True)
        self.redraw()

    def _on_failed(self, message: str) -> None:
        self.compute.setEnabled(True)
        self.summary.setText(message)

    # ------------------------------------------------------------------------------------------------ drawing
    def _clear(self) -> None:
        self.bars.setOpts(x=[], height=[], y0=[])
        self.hist.setOpts(x=[], height=[])
        self.target.hide()
        self.alpha_label.setText(f"α = {self.alpha():.3f}")

    def current(self):
        """The SweepPoint shown (None before the sets are computed)."""
        if not self.sweeps:
            return None
        sw = self.sweeps.get((self.calibrator.currentData(), self.score.currentData()))
        return None if sw is None else sw.at(self.alpha())

    def redraw(self) -> None:
        """Sets at the slider's alpha from the cached scores: bars, histogram and the summary line."""
        t0 = time.perf_counter()
        a = self.alpha()
        self.alpha_label.setText(f"α = {a:.3f} (cover {100 * (1 - a):.1f} %)")
        pt = self.current()
        if pt is None:
            return
        target = 1.0 - a
        cov = pt.class_coverage
        present = np.flatnonzero(pt.class_n > 0)
        y = cov[present]
        brushes = [pg.mkBrush(ABOVE if v >= target else BELOW) for v in y]
        self.bars.setOpts(x=present, y0=np.full(present.shape, target), height=y - target, brushes=brushes,
                          pens=[pg.mkPen(None)] * len(present))
        self.target.setPos(target)
        self.target.show()
        self.cov_plot.setYRange(min(float(np.nanmin(y)) if y.size else target, target) - 0.05, 1.02, padding=0)
        self.cov_plot.setXRange(-0.8, max(len(pt.class_n), 2) - 0.2, padding=0)
        sizes = np.arange(pt.size_fraction.shape[0])
        last = int(np.flatnonzero(pt.size_fraction)[-1]) if pt.size_fraction.any() else 1
        self.hist.setOpts(x=sizes[: last + 1], height=pt.size_fraction[: last + 1])
        self.size_plot.setXRange(-0.8, last + 0.8, padding=0)
        self.size_plot.setYRange(0, max(float(pt.size_fraction.max()), 0.05) * 1.08, padding=0)
        name = self.calibrator.currentData()
        note = (f" · {self.calibrator.currentText()} was fitted on {self._calib_split}, the split the quantile is "
                f"taken on: its coverage may be optimistic" if name != "none" else "")
        qhat = "∞ (every set holds all classes)" if pt.qhat == float("inf") else f"{pt.qhat:.4f}"
        self.summary.setText(
            f"qhat {qhat} on {self._calib_split} · coverage {100 * pt.coverage:.1f} % (target {100 * target:.1f} %)"
            f" · mean set size {pt.mean_size:.2f} · worst class {100 * pt.worst_class:.1f} % · empty "
            f"{100 * pt.empty_frac:.1f} % · full {100 * pt.full_frac:.1f} %{note}")
        self.last_redraw_ms = 1e3 * (time.perf_counter() - t0)
