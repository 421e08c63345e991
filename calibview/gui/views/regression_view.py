"""A regression run in the window's centre: the bandwidth bar in the target's units (and the layout: the diagram,
or a grid of a row per recalibrator) over the regression calibration-sharpness diagram (:class:`RegressionView`),
in place of the classification bar and canvas.

The slider redraws the curve alone (the canvas caches it per result and bandwidth; no evaluation); "Evaluate cal
at h" asks the session for cal and the sharpness gap at the slider's bandwidth. Listens to regression_changed.
"""

from __future__ import annotations

import math
from typing import Optional

from PySide6 import QtCore, QtWidgets

from calibview.core.regression.kernel import silverman
from calibview.gui.session import Session
from calibview.plot.regression.canvas import RegressionCanvas

#: the slider spans the default bandwidth divided and multiplied by this (log scale)
SPAN, STEPS = 20.0, 1000


def slider_to_bandwidth(value: int, h0: float) -> float:
    """The bandwidth at slider position ``value`` (0..STEPS) around ``h0``: h0 / SPAN at 0, h0 * SPAN at STEPS."""
    return h0 * SPAN ** (2.0 * value / STEPS - 1.0)


def bandwidth_to_slider(h: float, h0: float) -> int:
    """The slider position of bandwidth ``h`` around ``h0`` (clipped to the slider's ends)."""
    x = (math.log(h / h0) / math.log(SPAN) + 1.0) / 2.0
    return int(round(min(max(x, 0.0), 1.0) * STEPS))


def form_text(run) -> str:
    """The browser's and titles' mark of a regression run: "regression · var", "regression · quantiles (Q=3)"."""
    return f"regression · {run.describe()}"


class RegressionView(QtWidgets.QWidget):
    """The bandwidth bar (target units; Silverman's rule by default) over a RegressionCanvas."""

    def __init__(self, session: Session, parent: Optional[QtWidgets.QWidget] = None) -> None:
        super().__init__(parent)
        self.session = session
        self.evaluation = None
        self.h0 = 1.0                           # Silverman's rule on the evaluation split's means
        self.canvas = RegressionCanvas()
        self.slider = QtWidgets.QSlider(QtCore.Qt.Horizontal)
        self.slider.setRange(0, STEPS)
        self.slider.setMinimumWidth(120)
        self.slider.setToolTip("Kernel bandwidth of the diagram in the target's units (log scale, Silverman's rule "
                               "in the middle); redraws the curve, the metrics keep their bandwidth")
        self.box = QtWidgets.QDoubleSpinBox()
        self.box.setDecimals(5)
        self.box.setKeyboardTracking(False)
        self.box.setToolTip("Bandwidth in the target's units")
        self.reset = QtWidgets.QPushButton("Silverman")
        self.reset.setToolTip("Back to Silverman's rule of thumb on the evaluation split's predictions")
        self.apply = QtWidgets.QPushButton("Evaluate cal at h")
        self.apply.setToolTip("Evaluate the run again with cal and the sharpness gap at this bandwidth")
        self.units = QtWidgets.QLabel("")
        self.layout_box = QtWidgets.QComboBox()
        self.layout_box.addItem("Diagram", "overlay")
        self.layout_box.addItem("Grid", "grid")
        self.layout_box.setToolTip("Diagram: E[Y | prediction] of the run (every recalibrator leaves it unchanged). "
                                   "Grid: a row per recalibrator with its diagram, interval coverage, PIT histogram "
                                   "and quantile calibration curve, as the report's regression figure")
        bar = QtWidgets.QHBoxLayout()
        bar.setContentsMargins(6, 2, 6, 2)
        bar.addWidget(QtWidgets.QLabel("Bandwidth"))
        bar.addWidget(self.slider, 1)
        bar.addWidget(self.box)
        bar.addWidget(self.units)
        bar.addWidget(self.reset)
        bar.addWidget(self.apply)
        bar.addSpacing(8)
        bar.addWidget(self.layout_box)
        col = QtWidgets.QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        col.addLayout(bar)
        col.addWidget(self.canvas, 1)
        self._updating = False
        self.slider.valueChanged.connect(self._on_slider)
        self.box.valueChanged.connect(self._on_box)
        self.reset.clicked.connect(lambda: self.set_bandwidth(self.h0))
        self.apply.clicked.connect(self._on_apply)
        self.layout_box.currentIndexChanged.connect(
            lambda i: self.canvas.set_layout(self.layout_box.itemData(i)))
        session.regression_changed.connect(self.set_evaluation)
        self.set_evaluation(None)

    def set_evaluation(self, evaluation) -> None:
        """Show a RegEvaluation (None clears): its first result's diagram at the evaluation's bandwidth."""
        self.evaluation = evaluation
        result = evaluation.results[0] if evaluation is not None and evaluation.results else None
        for w in (self.slider, self.box, self.reset, self.apply):
            w.setEnabled(result is not None)
        if result is None:
            self.canvas.set_result(None, self.canvas.bandwidth)
            return
        self.h0 = silverman(result.predictive.mean)
        h = float(evaluation.bandwidth)
        self._updating = True
        self.box.setRange(self.h0 / SPAN, self.h0 * SPAN)
        self.box.setSingleStep(self.h0 / 20)
        self.box.setValue(h)
        self.slider.setValue(bandwidth_to_slider(h, self.h0))
        self._updating = False
        run, req = evaluation.run, evaluation.request
        self.units.setText("(target units)")
        self.canvas.set_result(result, h, title=f"{run.name} · {req.eval_split} (N = {evaluation.n_eval:,}, "
                                                f"{run.describe()})", evaluation=evaluation)
        self._update_apply()

    def set_layout(self, layout: str) -> None:
        """"overlay" (the diagram) or "grid" (a row per recalibrator), as the layout box shows it."""
        self.layout_box.setCurrentIndex(self.layout_box.findData(layout))

    def set_bandwidth(self, h: float) -> None:
        """Draw the diagram at bandwidth ``h`` (target units) and show it on the slider and in the box."""
        h = min(max(float(h), self.h0 / SPAN), self.h0 * SPAN)
        self._updating = True
        self.slider.setValue(bandwidth_to_slider(h, self.h0))
        self.box.setValue(h)
        self._updating = False
        self.canvas.set_bandwidth(h)
        self._update_apply()

    def step(self, factor: float) -> None:
        """Multiply the drawn bandwidth by ``factor`` (Ctrl+[ and Ctrl+])."""
        self.set_bandwidth(self.canvas.bandwidth * factor)

    def _on_slider(self, value: int) -> None:
        if self._updating or self.evaluation is None:
            return
        h = slider_to_bandwidth(value, self.h0)
        self._updating = True
        self.box.setValue(h)
        self._updating = False
        self.canvas.set_bandwidth(h)
        self._update_apply()

    def _on_box(self, value: float) -> None:
        if self._updating or self.evaluation is None or value <= 0:
            return
        self._updating = True
        self.slider.setValue(bandwidth_to_slider(value, self.h0))
        self._updating = False
        self.canvas.set_bandwidth(value)
        self._update_apply()

    def _update_apply(self) -> None:
        ev = self.evaluation
        self.apply.setEnabled(ev is not None and not math.isclose(self.canvas.bandwidth, ev.bandwidth,
                                                                  rel_tol=1e-9))

    def _on_apply(self) -> None:
        h = self.canvas.bandwidth
        self.session.set_reg_bandwidth(None if math.isclose(h, self.h0, rel_tol=1e-9) else h)
